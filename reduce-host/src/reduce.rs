//! [`DeviceReduce`]: the reusable handle and the device-wide dispatch of sum, max, min, argmax and argmin.
use std::ffi::{CStr, c_void};

use cust::memory::{DeviceBuffer, DeviceCopy, DeviceSlice};
use cust::stream::Stream;
use cust::sys::CUfunction;

use crate::driver::{self, Launch};
use crate::element::{Element, Indexed, Kernels, OrdElement, SumElement};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::tuning::{self, Policy};

/// How the per-block partials of a device-wide reduction are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Combine {
    /// The default: `TwoPass` for inputs up to 4 MiB, `LastBlock` above. **Deterministic** (the choice
    /// depends only on the input's length and element type). Measured on the H200 (docs/PERFORMANCE.md):
    /// replayed from a CUDA graph, `TwoPass` took 0.2–0.5 µs less per call than `LastBlock` from 2^15 to
    /// 2^20 f32, whose fence and ticket cost more than a graph's second kernel; above, `LastBlock` is
    /// 1–3 % faster.
    #[default]
    Auto,
    /// A second one-block kernel reduces the partials in a fixed order. **Deterministic**: the same input
    /// (length, values and address alignment) on the same device gives the same bits on every run.
    TwoPass,
    /// One kernel; each block writes its partial, fences and takes a ticket, and the last block reduces all
    /// partials in a fixed order. **Deterministic**, like `TwoPass`, with one launch instead of two (which
    /// saves about 0.3 µs per call when calls are launched one by one rather than from a graph).
    LastBlock,
    /// One kernel; each block adds its partial atomically into a zeroed result. Sums only. For floats the
    /// result depends on the order blocks finish in, so it is **not reproducible** run to run; it is within
    /// the usual pairwise-summation bound of the exact sum (see the crate docs), plus, for f32, up to 2^-126
    /// per block: the hardware's f32 atomic add flushes a subnormal running total to zero when a normal
    /// partial meets it (subnormal partials themselves are added exactly).
    Atomic,
}

impl Combine {
    /// The strategy that runs for an input of `bytes`: `Auto` becomes `TwoPass` or `LastBlock`.
    fn resolve(self, bytes: u64) -> Combine {
        match self {
            Combine::Auto if bytes <= tuning::AUTO_TWO_PASS_BYTES => Combine::TwoPass,
            Combine::Auto => Combine::LastBlock,
            c => c,
        }
    }
}

/// Device temporaries: per-block partials, the last-block ticket and the result slot of blocking calls.
/// Async calls may run on any stream; [`LastUse`] keeps two streams from sharing them at the same time.
struct Scratch {
    partials: DeviceBuffer<u8>,
    ticket: DeviceBuffer<u32>,
    result: DeviceBuffer<u8>,
    last_use: LastUse,
}

/// Largest accumulator any kernel writes (an `Indexed<f64>`).
const MAX_ACC_BYTES: usize = 16;

impl Scratch {
    fn new(max_grid: u32) -> Result<Self> {
        Ok(Scratch {
            partials: DeviceBuffer::zeroed(max_grid as usize * MAX_ACC_BYTES)?,
            ticket: DeviceBuffer::zeroed(1)?,
            result: DeviceBuffer::zeroed(MAX_ACC_BYTES)?,
            last_use: LastUse::new()?,
        })
    }
}

/// Device-wide reductions on `cust` device memory.
///
/// The handle owns the loaded kernels, a stream and its temporary storage, so repeated calls neither
/// allocate nor reload. Blocking methods (`sum`, `argmax`, …) run on the handle's stream and return the
/// value; `*_async` methods write the result into device memory on a stream you pass and return at once.
///
/// ```no_run
/// use cust::memory::DeviceBuffer;
/// use reduce_host::DeviceReduce;
///
/// let mut reduce = DeviceReduce::new()?;
/// let data = DeviceBuffer::from_slice(&[3.0f32, -1.0, 7.5, 7.5, 2.0])?;
/// assert_eq!(reduce.sum(&data)?, 17.0);
/// assert_eq!(reduce.max(&data)?, Some(7.5));
/// let best = reduce.argmax(&data)?.unwrap();
/// assert_eq!((best.index, best.value), (2, 7.5)); // ties go to the smallest index
/// # Ok::<(), reduce_host::Error>(())
/// ```
pub struct DeviceReduce {
    scratch: Scratch,
    stream: Stream,
    policy: Policy,
    combine: Combine,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceReduce);

impl DeviceReduce {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        let stream = gpu.stream()?;
        let info = gpu.info();
        let policy = tuning::policy(info.cc());
        Ok(DeviceReduce {
            scratch: Scratch::new(info.sm_count * policy.blocks_per_sm)?,
            stream,
            policy,
            combine: Combine::default(),
            gpu: gpu.clone(),
        })
    }

    /// The combine strategy in use ([`Combine::Auto`] unless set).
    pub fn combine(&self) -> Combine {
        self.combine
    }

    /// Chooses how block partials are combined for the following calls.
    pub fn set_combine(&mut self, combine: Combine) {
        self.combine = combine;
    }

    /// The launch policy in use (from the tuning table for this device unless set).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Forces a launch policy, e.g. to test odd grid and block sizes. `threads` must be a multiple of 32 in
    /// 32..=1024 and `blocks_per_sm`, `finalize_threads` likewise sane.
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        let block_ok = |t: u32| t.is_multiple_of(32) && (32..=1024).contains(&t);
        if !block_ok(policy.threads)
            || !block_ok(policy.finalize_threads)
            || policy.blocks_per_sm == 0
        {
            return Err(Error::InvalidArgument(format!(
                "{policy:?}: threads must be multiples of 32 in 32..=1024 and blocks_per_sm at least 1"
            )));
        }
        self.make_current()?;
        if policy.blocks_per_sm > self.policy.blocks_per_sm {
            // The old buffer may still be in use by async work on any stream.
            self.scratch.last_use.synchronize()?;
            self.scratch.partials = DeviceBuffer::zeroed(
                (self.gpu.info().sm_count * policy.blocks_per_sm) as usize * MAX_ACC_BYTES,
            )?;
        }
        self.policy = policy;
        Ok(())
    }

    fn make_current(&self) -> Result<()> {
        self.gpu.make_current()
    }

    /// Sum of the elements; 0 for an empty slice, returned in [`SumElement::Acc`]. f32 is summed in f32 (f16
    /// and bf16 too, widened) by a fixed tree: with every strategy but [`Combine::Atomic`] the bits
    /// are the same on every run. Integers are summed in i64/u64 and **wrap** on overflow (the result is the
    /// exact sum modulo 2^64), the same with every strategy.
    pub fn sum<T: SumElement>(&mut self, input: &DeviceSlice<T>) -> Result<T::Acc> {
        self.blocking(&T::SUM, input)
    }

    /// Greatest element, `None` for an empty slice. If any element is NaN the result is NaN; -0.0 and +0.0
    /// compare equal.
    pub fn max<T: OrdElement>(&mut self, input: &DeviceSlice<T>) -> Result<Option<T>> {
        Ok(self.blocking(&T::MAX, input)?).map(|v: T| (!input.is_empty()).then_some(v))
    }

    /// Least element, `None` for an empty slice. NaN propagates as for [`max`](Self::max).
    pub fn min<T: OrdElement>(&mut self, input: &DeviceSlice<T>) -> Result<Option<T>> {
        Ok(self.blocking(&T::MIN, input)?).map(|v: T| (!input.is_empty()).then_some(v))
    }

    /// Index and value of the greatest element, `None` for an empty slice. Ties go to the smallest index;
    /// if any element is NaN the result is the first NaN; -0.0 and +0.0 compare equal.
    pub fn argmax<T: OrdElement>(&mut self, input: &DeviceSlice<T>) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        Ok(self.blocking(&T::ARGMAX, input)?).map(|v| (!input.is_empty()).then_some(v))
    }

    /// Index and value of the least element, `None` for an empty slice. Same rules as
    /// [`argmax`](Self::argmax).
    pub fn argmin<T: OrdElement>(&mut self, input: &DeviceSlice<T>) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        Ok(self.blocking(&T::ARGMIN, input)?).map(|v| (!input.is_empty()).then_some(v))
    }

    /// Enqueues the sum of `input` into `out[0]` on `stream` and returns without waiting.
    ///
    /// # Safety
    /// `input` and `out` must stay allocated, and `input` unmodified, until `stream` has passed this work.
    pub unsafe fn sum_async<T: SumElement>(
        &mut self,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T::Acc>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(&T::SUM, input, out, stream)
    }

    /// Enqueues the max of `input` into `out[0]`; an empty input writes the identity (−∞, or `MIN` for
    /// integers).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn max_async<T: OrdElement>(
        &mut self,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(&T::MAX, input, out, stream)
    }

    /// Enqueues the min of `input` into `out[0]`; an empty input writes the identity (+∞, or `MAX` for
    /// integers).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn min_async<T: OrdElement>(
        &mut self,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(&T::MIN, input, out, stream)
    }

    /// Enqueues the argmax of `input` into `out[0]`; an empty input writes `{ value: −∞ (or MIN), index:
    /// u64::MAX }`.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmax_async<T: OrdElement>(
        &mut self,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<Indexed<T>>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(&T::ARGMAX, input, out, stream)
    }

    /// Enqueues the argmin of `input` into `out[0]`; an empty input writes `{ value: +∞ (or MAX), index:
    /// u64::MAX }`.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmin_async<T: OrdElement>(
        &mut self,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<Indexed<T>>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(&T::ARGMIN, input, out, stream)
    }

    /// Runs `kernels` over `input` on the handle's stream and reads the accumulator back.
    fn blocking<T: Element, Acc: DeviceCopy + Default>(
        &mut self,
        kernels: &Kernels,
        input: &DeviceSlice<T>,
    ) -> Result<Acc> {
        self.make_current()?;
        let out = self.scratch.result.as_device_ptr().as_raw();
        self.enqueue::<T, Acc>(kernels, input, out, None)?;
        // SAFETY: the kernels just enqueued write an `Acc` to `out` on the handle's stream.
        unsafe { driver::read_back::<Acc>(out, &self.stream) }
    }

    fn enqueue_into<T: Element, Acc: DeviceCopy>(
        &mut self,
        kernels: &Kernels,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<Acc>,
        stream: &Stream,
    ) -> Result<()> {
        if out.is_empty() {
            return Err(Error::InvalidArgument(
                "the output slice must hold at least one element".into(),
            ));
        }
        self.make_current()?;
        self.enqueue::<T, Acc>(kernels, input, out.as_device_ptr().as_raw(), Some(stream))
    }

    /// The dispatch: checks the input, sizes the grid and launches the kernels of the chosen strategy.
    fn enqueue<T: Element, Acc>(
        &mut self,
        kernels: &Kernels,
        input: &DeviceSlice<T>,
        out: u64,
        stream: Option<&Stream>,
    ) -> Result<()> {
        let stream = stream.unwrap_or(&self.stream);
        let mut input_ptr = input.as_device_ptr().as_raw();
        let mut n = input.len() as u64;
        if n > 0 && (input_ptr == 0 || !input_ptr.is_multiple_of(std::mem::align_of::<T>() as u64))
        {
            return Err(Error::InvalidArgument(format!(
                "input address {input_ptr:#x} is null or not aligned to its {}-byte element",
                std::mem::align_of::<T>()
            )));
        }
        if self.combine == Combine::Atomic && kernels.atomic.is_none() {
            // Refused at every size, though the small ones would not need the atomic kernel.
            return Err(atomic_unsupported());
        }
        let policy = self.policy;
        let sm_count = self.gpu.info().sm_count;
        let grid = tuning::grid_for(&policy, sm_count, n, std::mem::size_of::<T>());
        let bytes = n * std::mem::size_of::<T>() as u64;
        let single_block = bytes <= tuning::SINGLE_BLOCK_BYTES;
        let combine = self.combine.resolve(bytes);
        let gpu = &self.gpu;
        // A kernel and the shape it can launch with: many registers can cap its block size below the
        // policy's, and its grid below the policy's blocks per SM; a grid larger than one resident wave would
        // leave a tail of blocks running alone. Every kernel here is grid-stride or block-stride, so any shape
        // is correct; the shape depends only on the kernel and the policy, so results stay repeatable.
        let kernel = |name: &CStr, grid: u32, threads: u32| -> Result<(CUfunction, Launch)> {
            let f = gpu.function(name)?;
            let block = driver::fit_block(f, threads)?;
            let resident = sm_count * driver::max_active_blocks(f, block, SMEM_BYTES)?.max(1);
            Ok((
                f,
                Launch {
                    grid: grid.min(resident),
                    block,
                    shared_bytes: SMEM_BYTES,
                },
            ))
        };
        let mut partials = self.scratch.partials.as_device_ptr().as_raw();
        let mut ticket = self.scratch.ticket.as_device_ptr().as_raw();
        let mut out = out;
        let arg = |p: &mut u64| p as *mut u64 as *mut c_void;

        self.scratch.last_use.acquire(stream)?;
        // SAFETY (all launches below): the argument lists match the kernels' signatures in kernels-gpu's
        // `entry` module; `input` is valid for `n` reads (a live DeviceSlice, alignment checked above);
        // `partials` holds `max grid * 16` bytes, `ticket` one zeroed u32 that only this handle's kernels use
        // (serialised by `acquire`), and `out` is valid for one accumulator; all kernels get SMEM_BYTES.
        let launched = (|| unsafe {
            match combine {
                _ if n == 0 => {
                    // The finalize body over zero partials writes the identity.
                    let (f, shape) = kernel(kernels.finalize, 1, policy.finalize_threads)?;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [arg(&mut partials), arg(&mut n), arg(&mut out)],
                    )
                }
                _ if grid == 1 || single_block => {
                    // One block reduces everything and writes the result: one launch, no partials.
                    let threads = if single_block {
                        tuning::SINGLE_BLOCK_THREADS
                    } else {
                        policy.threads
                    };
                    let (f, shape) = kernel(kernels.partials, 1, threads)?;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [arg(&mut input_ptr), arg(&mut n), arg(&mut out)],
                    )
                }
                Combine::TwoPass => {
                    let (f, shape) = kernel(kernels.partials, grid, policy.threads)?;
                    let mut count = shape.grid as u64;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [arg(&mut input_ptr), arg(&mut n), arg(&mut partials)],
                    )?;
                    let (f, shape) = kernel(kernels.finalize, 1, policy.finalize_threads)?;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [arg(&mut partials), arg(&mut count), arg(&mut out)],
                    )
                }
                Combine::LastBlock => {
                    let (f, shape) = kernel(kernels.last_block, grid, policy.threads)?;
                    let mut args = [
                        arg(&mut input_ptr),
                        arg(&mut n),
                        arg(&mut partials),
                        arg(&mut ticket),
                        arg(&mut out),
                    ];
                    driver::launch(f, shape, stream, &mut args)
                }
                Combine::Auto => unreachable!("resolved above"),
                Combine::Atomic => {
                    let atomic = kernels.atomic.ok_or_else(atomic_unsupported)?;
                    driver::memset_zero(out, std::mem::size_of::<Acc>(), stream)?;
                    let (f, shape) = kernel(atomic, grid, policy.threads)?;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [arg(&mut input_ptr), arg(&mut n), arg(&mut out)],
                    )
                }
            }
        })();
        // Record the use even after a failed launch, so a later call orders after whatever did run.
        self.scratch.last_use.release(stream)?;
        launched
    }
}

fn atomic_unsupported() -> Error {
    Error::InvalidArgument("Combine::Atomic supports sums only; use LastBlock or TwoPass".into())
}

/// Dynamic shared memory every kernel is launched with: kernels-gpu's `SMEM_BYTES` (a CPU test checks the two
/// agree).
pub(crate) const SMEM_BYTES: u32 = 1024;

impl Drop for DeviceReduce {
    fn drop(&mut self) {
        // The fields free device memory and unload the module: make their context current first. A failure
        // here has no caller to go to, so it is dropped.
        let _ = self.gpu.make_current();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_two_pass_up_to_4_mib_and_last_block_above() {
        assert_eq!(Combine::default(), Combine::Auto);
        assert_eq!(Combine::Auto.resolve(0), Combine::TwoPass);
        assert_eq!(Combine::Auto.resolve(4 << 20), Combine::TwoPass);
        assert_eq!(Combine::Auto.resolve((4 << 20) + 1), Combine::LastBlock);
        for c in [Combine::TwoPass, Combine::LastBlock, Combine::Atomic] {
            assert_eq!(c.resolve(1), c);
            assert_eq!(c.resolve(1 << 40), c);
        }
    }
}
