//! Random inputs in device memory, in enough disjoint copies that a rotation over them reads from HBM and
//! not from the 60 MB L2.
use cust::memory::DeviceBuffer;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::DeviceView;

/// One big random buffer on host and device; windows of it are the rotated copies.
pub struct Pool {
    pub host: Vec<f32>,
    pub device: DeviceBuffer<f32>,
}

impl Pool {
    /// `len` uniform values in [0, 1) (never zeros in bulk), seeded.
    pub fn new(len: usize, seed: u64) -> Result<Self, Box<dyn std::error::Error>> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let host: Vec<f32> = (0..len).map(|_| rng.random_range(0.0f32..1.0)).collect();
        let device = DeviceBuffer::from_slice(&host)?;
        Ok(Pool { host, device })
    }

    /// Copies of `n` elements to rotate over: enough for `min_bytes` in total, as many as fit.
    pub fn copies(&self, n: usize, min_bytes: usize) -> usize {
        let stride = Self::stride(n);
        let want = min_bytes.div_ceil((n * 4).max(1)).max(1);
        want.min(self.host.len() / stride).max(1)
    }

    fn stride(n: usize) -> usize {
        n.div_ceil(64).max(1) * 64
    }

    /// Copy `k` of `n` elements (16-byte aligned start).
    pub fn window(&self, n: usize, k: usize) -> DeviceView<'_, f32> {
        let start = k * Self::stride(n);
        DeviceView::from(&self.device).slice(start..start + n)
    }

    /// Host view of copy `k`.
    pub fn host_window(&self, n: usize, k: usize) -> &[f32] {
        let start = k * Self::stride(n);
        &self.host[start..start + n]
    }
}
