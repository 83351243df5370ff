//! The reduction chapter's teaching kernels v0–v5 (f32 sums), runnable for the bandwidth table in
//! `cargo bench`. Production code wants [`DeviceReduce::sum`](crate::DeviceReduce::sum) instead.
use cust::memory::DeviceBuffer;
use cust::stream::Stream;
use reduce_contract::layout::SEED_THREADS;

use crate::dispatch::{self, call::Call};
use crate::driver;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::last_use::LastUse;
use crate::pinned::Pinned;
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};

/// One step of the chapter's sum kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeedVersion {
    /// Interleaved addressing with `tid % (2*s)`: divergent warps.
    V0,
    /// Contiguous threads at `2*s*tid`: shared-memory bank conflicts.
    V1,
    /// Sequential addressing.
    V2,
    /// First add during load (two elements per thread).
    V3,
    /// v3 plus a warp-shuffle tail for the last 64 → 1.
    V4,
    /// Grid-stride loop, 16-byte loads, warp → shared → warp, one barrier.
    V5,
}

impl SeedVersion {
    /// Every version, in the chapter's order.
    pub const ALL: [SeedVersion; 6] = [Self::V0, Self::V1, Self::V2, Self::V3, Self::V4, Self::V5];

    /// The contract's kernel of this version.
    fn kernel(self) -> reduce_contract::kernels::SeedVersion {
        use reduce_contract::kernels::SeedVersion as K;
        match self {
            Self::V0 => K::V0,
            Self::V1 => K::V1,
            Self::V2 => K::V2,
            Self::V3 => K::V3,
            Self::V4 => K::V4,
            Self::V5 => K::V5,
        }
    }

    /// What the version changes, in a few words.
    pub fn change(self) -> &'static str {
        match self {
            Self::V0 => "interleaved, divergent",
            Self::V1 => "strided index, bank conflicts",
            Self::V2 => "sequential addressing",
            Self::V3 => "first add during load",
            Self::V4 => "warp-shuffle tail",
            Self::V5 => "grid-stride, 16-byte loads, 2-level shuffle",
        }
    }
}

/// Threads per block of every seed kernel (the chapter's `kThreads`).
const THREADS: u32 = SEED_THREADS;
/// Blocks per SM of v5's fixed grid (the chapter's `sm_count() * 8`).
const V5_BLOCKS_PER_SM: u32 = 8;

/// Runs the seed kernels; their per-block partials are combined by the production finalize kernel.
pub struct SeedReduce {
    partials: InContext<DeviceBuffer<f32>>,
    /// Where blocking calls have their sum written.
    result: InContext<DeviceBuffer<f32>>,
    staging: InContext<Pinned>,
    /// Orders every use of `partials`, from any stream, after the one before (see [`LastUse`]).
    last_use: LastUse,
    stream: InContext<Stream>,
    gpu: Gpu,
}

impl SeedReduce {
    /// A handle on an opened device.
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        // The device's context, current while the handle's buffers are allocated in it.
        let _current = gpu.make_current()?;
        Ok(SeedReduce {
            partials: InContext::new(gpu, driver::zeroed(1)?),
            result: InContext::new(gpu, driver::zeroed(1)?),
            staging: InContext::new(gpu, Pinned::new(size_of::<f32>())?),
            last_use: LastUse::new()?,
            // Blocking, so it waits for copies the caller made on the legacy default stream.
            stream: gpu.handle_stream()?,
            gpu: gpu.clone(),
        })
    }

    /// Grid size of `version` for `n` elements.
    pub fn grid(&self, version: SeedVersion, n: u64) -> u64 {
        match version {
            SeedVersion::V0 | SeedVersion::V1 | SeedVersion::V2 => n.div_ceil(THREADS as u64),
            SeedVersion::V3 | SeedVersion::V4 => n.div_ceil(2 * THREADS as u64),
            SeedVersion::V5 => (self.gpu.info().sm_count * V5_BLOCKS_PER_SM) as u64,
        }
        .max(1)
    }

    /// Makes room for the partials of `n` elements under `version`; call it before timing, so the enqueue
    /// itself never allocates.
    pub fn reserve(&mut self, version: SeedVersion, n: u64) -> Result<()> {
        let grid = self.grid(version, n);
        if grid > i32::MAX as u64 {
            return Err(Error::InvalidArgument(format!(
                "{version:?} needs {grid} blocks for {n} elements"
            )));
        }
        if (self.partials.len() as u64) < grid {
            let _current = self.gpu.make_current()?;
            // Async calls may still be using the partials on any stream.
            self.last_use.synchronize()?;
            self.partials = InContext::new(&self.gpu, driver::zeroed(grid as usize)?);
        }
        Ok(())
    }

    /// The sum of `input` by `version` (blocking).
    pub fn sum<'a>(
        &mut self,
        version: SeedVersion,
        input: impl Into<DeviceView<'a, f32>>,
    ) -> Result<f32> {
        let input = input.into();
        self.reserve(version, input.len() as u64)?;
        let _current = self.gpu.make_current()?;
        let out = self.result.as_device_ptr().as_raw();
        // SAFETY: `out` is this handle's one f32 and `stream` the handle's own, both live for this call;
        // `&mut self` keeps them and `staging` to it, and `read_back` waits for the stream, so `input` is
        // read before its borrow ends.
        unsafe {
            let stream = StreamRef::from_raw(self.stream.as_inner());
            let out_view = DeviceViewMut::<f32>::from_raw_parts(out, 1);
            self.sum_async(version, input, out_view, stream)?;
            driver::read_back::<f32>(out, &self.staging, stream)
        }
    }

    /// Enqueues the sum of `input` by `version` into `out[0]` on `stream`. [`reserve`](Self::reserve) first,
    /// or this reports `InvalidArgument`.
    ///
    /// # Safety
    /// `input` and `out` must stay allocated and `input` unmodified until `stream` has passed this work.
    /// If `stream` is capturing a CUDA graph, the graph uses the handle's scratch each time it runs: it must
    /// not run after the handle is dropped or its scratch is replaced (by a later call that needs more, or
    /// a new policy), nor while another call of the handle runs.
    pub unsafe fn sum_async<'s, 'a, 'b>(
        &mut self,
        version: SeedVersion,
        input: impl Into<DeviceView<'a, f32>>,
        out: impl Into<DeviceViewMut<'b, f32>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let (input, out) = (input.into(), out.into());
        let n = input.len() as u64;
        let grid = self.grid(version, n);
        let input_ptr = input.as_raw();
        if (self.partials.len() as u64) < grid || out.is_empty() {
            return Err(Error::InvalidArgument(
                "call reserve() first, and pass a non-empty output".into(),
            ));
        }
        if version == SeedVersion::V5 && !input_ptr.is_multiple_of(16) {
            return Err(Error::InvalidArgument(
                "v5 reads float4s: the input must be 16-byte aligned".into(),
            ));
        }
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        let out = call.output(&out, "output")?;
        let stream = stream.into();
        let partials = self.partials.as_device_ptr().as_raw() as *mut f32;
        call.enqueue(stream, || {
            // SAFETY: the caller keeps `input` and `out` alive; `partials` holds `grid` f32 (checked above)
            // and no other work uses them until this is done (the claim); v5's 16-byte alignment is checked
            // above.
            self.last_use.claim(stream, || unsafe {
                dispatch::seed::enqueue(
                    &self.gpu,
                    version.kernel(),
                    grid as u32,
                    input,
                    partials,
                    out.as_mut_ptr(),
                    stream,
                )
            })
        })
    }
}

impl Drop for SeedReduce {
    fn drop(&mut self) {
        // Async calls may still be using the partials on any stream: wait for the last use before the
        // fields free them (each in the device's context, `InContext`). A failure here has no caller to go
        // to, so it is dropped.
        let _current = self.gpu.make_current();
        let _ = self.last_use.synchronize();
    }
}
