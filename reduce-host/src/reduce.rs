//! [`DeviceReduce`]: the reusable handle for sum, max, min, argmax and argmin; the launches are in
//! [`crate::dispatch::reduce`].
use cust::memory::DeviceCopy;
use cust::stream::Stream;
use reduce_contract::Op;
use reduce_contract::kernels::Reduction;
use reduce_contract::layout::MAX_OP_ACC_BYTES;
use reduce_contract::reproducible::CHUNK;

use crate::determinism::Determinism;
use crate::dispatch::call::Call;
use crate::dispatch::reduce::{Scratch, Strategy};
use crate::dispatch::reproducible::{ReproScratch, ReproShape};
use crate::dispatch::{self, Source, Span};
use crate::driver;
use crate::element::{Element, Indexed, OrdElement, SumElement};
use crate::error::Result;
use crate::gpu::{Gpu, InContext};
use crate::pinned::Pinned;
use crate::stream::StreamRef;
use crate::tuning::{self, Policy};
use crate::view::{DeviceView, DeviceViewMut};

/// How the per-block partials of a device-wide reduction are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Combine {
    /// The default: `TwoPass` on sm_90 and later GPUs (with a CUDA 12.3 or newer driver), where its second
    /// kernel is a programmatic dependent launch that overlaps the first; elsewhere `TwoPass` for inputs up
    /// to 4 MiB and `LastBlock` above. **Deterministic** (the choice depends only on the GPU, the input's
    /// length and its element type). Measured on the H200 (docs/PERFORMANCE.md, run F): `TwoPass` was as
    /// fast as `LastBlock` or faster at every size (2^22 f32: 9.9 against 11.0 µs).
    #[default]
    Auto,
    /// A second one-block kernel reduces the partials in a fixed order. **Deterministic**: the same input
    /// (length, values and address alignment) on the same device gives the same bits on every run.
    TwoPass,
    /// One kernel; each block writes its partial, fences and takes a ticket, and the last block reduces all
    /// partials in a fixed order. **Deterministic**, like `TwoPass`, with one launch instead of two. Before
    /// sm_90 that saves about 0.3 µs per call launched one by one; on sm_90 and later `TwoPass`'s second
    /// launch overlaps its first, and `TwoPass` measured as fast or faster (2^22 f32: 9.9 against 11.0 µs).
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
    /// `dependent_launch`: the device runs the finalize as a programmatic dependent of the partials, which
    /// makes `TwoPass` the faster at every size (see [`tuning::AUTO_TWO_PASS_BYTES`]).
    pub(crate) fn resolve(self, bytes: u64, dependent_launch: bool) -> Strategy {
        match self {
            Combine::Auto if dependent_launch || bytes <= tuning::AUTO_TWO_PASS_BYTES => {
                Strategy::TwoPass
            }
            Combine::Auto => Strategy::LastBlock,
            Combine::TwoPass => Strategy::TwoPass,
            Combine::LastBlock => Strategy::LastBlock,
            Combine::Atomic => Strategy::Atomic,
        }
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
///
/// # Streams and CUDA graphs
/// Async calls on different streams share the handle's scratch (partials, ticket) safely: each call waits
/// on the previous call's completion event first. Calls captured into a CUDA graph are not tracked that way:
/// a graph that holds calls of a handle must not run while other calls of that handle (or replays of
/// another such graph) run, and must not be launched after the handle is dropped or after
/// [`set_policy`](Self::set_policy) grows the partials, or after a [`Determinism::GpuToGpu`] sum of an input
/// longer than any before grows its chunk partials: all of these free buffers the captured kernels point
/// at.
pub struct DeviceReduce {
    scratch: InContext<Scratch>,
    stream: InContext<Stream>,
    /// Page-locked, device-mapped memory the results of blocking calls are written (or copied) into.
    staging: InContext<Pinned>,
    policy: Policy,
    /// Whether `policy` was set by [`set_policy`](Self::set_policy), which is not fitted to the kernels'
    /// registers; the tuning table's may have its block size fitted to each kernel's.
    policy_forced: bool,
    combine: Combine,
    determinism: Determinism,
    repro: InContext<ReproScratch>,
    /// A test's override of the reproducible sum's launch shape.
    repro_shape: ReproShape,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceReduce);

impl DeviceReduce {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        // The device's context, current while the handle's buffers are allocated in it.
        let _current = gpu.make_current()?;
        let stream = gpu.handle_stream()?;
        let info = gpu.info();
        let policy = tuning::policy(info.cc());
        Ok(DeviceReduce {
            scratch: InContext::new(gpu, Scratch::new(info.sm_count * policy.blocks_per_sm)?),
            stream,
            staging: InContext::new(gpu, Pinned::new(MAX_OP_ACC_BYTES)?),
            policy,
            policy_forced: false,
            combine: Combine::default(),
            determinism: Determinism::default(),
            repro: InContext::new(gpu, ReproScratch::new()?),
            repro_shape: ReproShape::default(),
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

    /// The bit-reproducibility of float sums ([`Determinism::RunToRun`] unless set).
    pub fn determinism(&self) -> Determinism {
        self.determinism
    }

    /// Chooses the bit-reproducibility of the following float sums (`sum` and `sum_async`):
    /// [`Determinism::GpuToGpu`] gives bits that depend only on the values and their order, with the error
    /// bound its documentation states.
    pub fn set_determinism(&mut self, determinism: Determinism) {
        self.determinism = determinism;
    }

    /// Forces the reproducible sum's launch shape, so tests can check that it does not change the bits:
    /// the chunk kernel's grid capped at `max_grid` blocks (`None`: one resident wave; its block size is
    /// the policy's `threads`), and the combine's block of `combine_threads` (a multiple of 32 in 32..=1024;
    /// `None`: 1024).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn set_reproducible_shape(
        &mut self,
        max_grid: Option<u32>,
        combine_threads: Option<u32>,
    ) -> Result<()> {
        if combine_threads.is_some_and(|t| !t.is_multiple_of(32) || !(32..=1024).contains(&t)) {
            return Err(crate::error::Error::InvalidArgument(format!(
                "combine_threads {combine_threads:?} must be a multiple of 32 in 32..=1024"
            )));
        }
        self.repro_shape = ReproShape {
            max_grid,
            combine_threads,
            ..self.repro_shape
        };
        Ok(())
    }

    /// Turns the reproducible sum's L2 prefetch on or off (`None`: the tuning default), for the bench to
    /// time both; the bits are the same either way.
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn set_reproducible_prefetch(&mut self, prefetch: Option<bool>) {
        self.repro_shape.prefetch = prefetch;
    }

    /// The launch policy in use (from the tuning table for this device unless set). Under the table's
    /// policy a kernel heavy in registers may launch another block size (see [`Policy::threads`]).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Forces a launch policy, e.g. to test odd grid and block sizes: `threads` and `finalize_threads`
    /// multiples of 32 in 32..=1024, `blocks_per_sm` in 1..=32; anything else is an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument). A policy set so is not fitted to the
    /// kernels' registers (still capped at the most threads a kernel can launch and one resident wave),
    /// until [`reset_policy`](Self::reset_policy).
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        policy.check()?;
        let _current = self.make_current()?;
        self.scratch
            .reserve(self.gpu.info().sm_count * policy.blocks_per_sm)?;
        self.policy = policy;
        self.policy_forced = true;
        Ok(())
    }

    /// Returns to the tuning table's policy for this device, fitted to each kernel's registers again, as a
    /// new handle has it.
    pub fn reset_policy(&mut self) {
        self.policy = tuning::policy(self.gpu.info().cc());
        self.policy_forced = false;
    }

    fn make_current(&self) -> Result<crate::gpu::Current> {
        self.gpu.make_current()
    }

    /// Sum of the elements; 0 for an empty slice, returned in [`SumElement::Acc`]. f32 is summed in f32 (f16
    /// and bf16 too, widened) by a fixed tree: with every strategy but [`Combine::Atomic`] the bits
    /// are the same on every run. With [`Determinism::GpuToGpu`] float sums take the reproducible
    /// algorithm instead (f64 accumulation, bits independent of the GPU and the launch; see there).
    /// Integers are summed in i64/u64 and **wrap** on overflow (the result is the exact sum modulo 2^64),
    /// the same with every strategy.
    pub fn sum<'a, T: SumElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<T::Acc> {
        self.blocking(Op::Sum, input.into())
    }

    /// Greatest element, `None` for an empty slice. If any element is NaN the result is NaN; -0.0 and +0.0
    /// compare equal.
    pub fn max<'a, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<T>> {
        let input = input.into();
        Ok(self.blocking(Op::Max, input)?).map(|v: T| (!input.is_empty()).then_some(v))
    }

    /// Least element, `None` for an empty slice. NaN propagates as for [`max`](Self::max).
    pub fn min<'a, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<T>> {
        let input = input.into();
        Ok(self.blocking(Op::Min, input)?).map(|v: T| (!input.is_empty()).then_some(v))
    }

    /// Index and value of the greatest element, `None` for an empty slice. Ties go to the smallest index;
    /// if any element is NaN the result is the first NaN; -0.0 and +0.0 compare equal.
    pub fn argmax<'a, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        let input = input.into();
        Ok(self.blocking(Op::ArgMax, input)?).map(|v| (!input.is_empty()).then_some(v))
    }

    /// Index and value of the least element, `None` for an empty slice. Same rules as
    /// [`argmax`](Self::argmax).
    pub fn argmin<'a, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        let input = input.into();
        Ok(self.blocking(Op::ArgMin, input)?).map(|v| (!input.is_empty()).then_some(v))
    }

    /// Enqueues the sum of `input` into `out[0]` on `stream` and returns without waiting.
    ///
    /// # Safety
    /// `input` and `out` must stay allocated, and `input` unmodified, until `stream` has passed this work.
    /// If `stream` is capturing a CUDA graph, the graph uses the handle's scratch each time it runs: it must
    /// not run after the handle is dropped or its scratch is replaced (by a later call that needs more, or
    /// a new policy), nor while another call of the handle runs.
    pub unsafe fn sum_async<'s, 'a, 'b, T: SumElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        out: impl Into<DeviceViewMut<'b, T::Acc>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(Op::Sum, input.into(), out.into(), stream.into())
    }

    /// Enqueues the max of `input` into `out[0]`; an empty input writes the identity (−∞, or `MIN` for
    /// integers).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn max_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        out: impl Into<DeviceViewMut<'b, T>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(Op::Max, input.into(), out.into(), stream.into())
    }

    /// Enqueues the min of `input` into `out[0]`; an empty input writes the identity (+∞, or `MAX` for
    /// integers).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn min_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        out: impl Into<DeviceViewMut<'b, T>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(Op::Min, input.into(), out.into(), stream.into())
    }

    /// Enqueues the argmax of `input` into `out[0]`; an empty input writes `{ value: −∞ (or MIN), index:
    /// u64::MAX }`.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmax_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(Op::ArgMax, input.into(), out.into(), stream.into())
    }

    /// Enqueues the argmin of `input` into `out[0]`; an empty input writes `{ value: +∞ (or MAX), index:
    /// u64::MAX }`.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmin_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(Op::ArgMin, input.into(), out.into(), stream.into())
    }

    /// Runs `op` over `input` on the handle's stream and reads the accumulator back.
    ///
    /// The last kernel writes the result straight into the page-locked staging memory through its device
    /// mapping, so the call costs the kernels and a synchronize, without a copy on the stream (measured on
    /// the H200 in docs/PERFORMANCE.md, "Blocking calls"). `Combine::Atomic` adds into its result with
    /// device atomics, which host memory need not support, so it keeps a device slot and a copy.
    fn blocking<T: Element, Acc: DeviceCopy + Default>(
        &mut self,
        op: Op,
        input: DeviceView<'_, T>,
    ) -> Result<Acc> {
        self.blocking_with(Source::Builtin(Reduction { op, elem: T::ELEM }), input)
    }

    /// [`blocking`](Self::blocking) with `source`'s kernels (a built-in reduction or a user's operator),
    /// whose element is `T` and accumulator `Acc`.
    pub(crate) fn blocking_with<T: Element, Acc: Copy>(
        &mut self,
        source: Source<'_, Reduction>,
        input: DeviceView<'_, T>,
    ) -> Result<Acc> {
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        call.own();
        let mapped = self
            .staging
            .device_ptr()
            .filter(|_| self.combine != Combine::Atomic);
        assert!(size_of::<Acc>() <= self.staging.len(), "staging too small");
        let out = mapped.unwrap_or(self.scratch.result.as_device_ptr().as_raw());
        self.enqueue::<T, Acc>(&call, source, input, out as *mut Acc, None)?;
        let stream = StreamRef::from(&*self.stream);
        // SAFETY (both arms): the kernels just enqueued on the handle's stream write an `Acc` to `out`, the
        // staging's mapping or the device slot; `staging` is this handle's, used by blocking calls only,
        // which `&mut self` serialises.
        unsafe {
            if mapped.is_some() {
                driver::synchronize(stream)?;
                Ok(self.staging.read::<Acc>())
            } else {
                driver::read_back::<Acc>(out, &self.staging, stream)
            }
        }
    }

    fn enqueue_into<T: Element, Acc: DeviceCopy>(
        &mut self,
        op: Op,
        input: DeviceView<'_, T>,
        out: DeviceViewMut<'_, Acc>,
        stream: StreamRef<'_>,
    ) -> Result<()> {
        self.enqueue_into_with(
            Source::Builtin(Reduction { op, elem: T::ELEM }),
            input,
            out,
            stream,
        )
    }

    /// [`enqueue_into`](Self::enqueue_into) with `source`'s kernels, whose element is `T` and accumulator
    /// `Acc`.
    pub(crate) fn enqueue_into_with<T: Element, Acc>(
        &mut self,
        source: Source<'_, Reduction>,
        input: DeviceView<'_, T>,
        out: DeviceViewMut<'_, Acc>,
        stream: StreamRef<'_>,
    ) -> Result<()> {
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        let out = call.first(&out, "output")?;
        self.enqueue::<T, Acc>(&call, source, input, out.as_mut_ptr(), Some(stream))
    }

    /// This GPU's part of a sharded reproducible sum: `shard`'s first `split.head` and last `split.tail`
    /// elements, copied to the host, and the partials of the `split.chunks` whole chunks between them,
    /// computed by the reproducible sum's own chunk kernel (so they have its bits).
    pub(crate) fn reproducible_parts<T: crate::cpu::ReproSum + Element>(
        &mut self,
        shard: DeviceView<'_, T>,
        split: crate::sharded::ChunkSplit,
    ) -> Result<crate::sharded::ReproParts<T>>
    where
        T::Acc: Default,
    {
        let float = T::ELEM.float().expect("reproducible sums are of floats");
        let (head, chunks) = (split.head as usize, (split.chunks * CHUNK) as usize);
        let mut call = Call::new(&self.gpu)?;
        let whole = call.input(shard, "shard")?;
        let middle = call.input(shard.slice(head..head + chunks), "shard")?;
        let stream = StreamRef::from(&*self.stream);
        let mut ends = vec![T::default(); head + split.tail as usize];
        let (first, last) = ends.split_at_mut(head);
        let partials = call.enqueue(stream, || {
            // SAFETY: `whole` and `middle` are checked, borrowed views of the shard, so the head and tail
            // copies read inside it; each call waits for its work before it returns.
            unsafe {
                driver::copy_to_host(whole.ptr, first, stream)?;
                let tail_at = whole.ptr + ((head + chunks) * size_of::<T>()) as u64;
                driver::copy_to_host(tail_at, last, stream)?;
                dispatch::reproducible::chunk_partials::<T, T::Acc>(
                    &self.gpu,
                    &mut self.repro,
                    (&self.policy, self.repro_shape),
                    float,
                    middle,
                    stream,
                )
            }
        })?;
        let tail = last.to_vec();
        ends.truncate(head);
        Ok(crate::sharded::ReproParts {
            head: ends,
            partials,
            tail,
        })
    }

    /// The dispatch of `call`: the reproducible sum, or `source`'s kernels by the handle's combine.
    fn enqueue<T: Element, Acc>(
        &mut self,
        call: &Call,
        source: Source<'_, Reduction>,
        input: Span<T>,
        out: *mut Acc,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        let sum = matches!(source, Source::Builtin(Reduction { op: Op::Sum, .. }));
        let reproducible = T::ELEM
            .float()
            .filter(|_| sum && self.determinism.reproducible_sum(T::ELEM));
        if let Some(float) = reproducible {
            // SAFETY: as below; for a float sum `Acc` is the f32 or f64 result the kernels write.
            return call.enqueue(stream, || unsafe {
                dispatch::reproducible::enqueue(
                    &self.gpu,
                    &mut self.repro,
                    (&self.policy, self.repro_shape),
                    float,
                    input,
                    out,
                    stream,
                )
            });
        }
        let strategy = self.combine.resolve(
            input.len * std::mem::size_of::<T>() as u64,
            self.gpu.dependent_launch(),
        );
        // SAFETY: `input` is a checked, borrowed view and `out` holds one `Acc` (the handle's mapped staging
        // or device result slot, or a non-empty slice the caller keeps alive until `stream` passes this work).
        call.enqueue(stream, || unsafe {
            dispatch::reduce::enqueue(
                &self.gpu,
                &mut self.scratch,
                &self.policy,
                !self.policy_forced,
                strategy,
                source,
                input,
                out,
                stream,
            )
        })
    }
}

impl Drop for DeviceReduce {
    fn drop(&mut self) {
        // The fields free device memory and unload the module: make their context current first. A failure
        // here has no caller to go to, so it is dropped.
        let _current = self.gpu.make_current();
        // Async calls may still be using the scratch on any stream: wait for the last use before it is freed.
        let _ = self.scratch.wait_idle();
        let _ = self.repro.wait_idle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_two_pass_with_dependent_launch_else_up_to_4_mib() {
        assert_eq!(Combine::default(), Combine::Auto);
        assert_eq!(Combine::Auto.resolve(0, false), Strategy::TwoPass);
        assert_eq!(Combine::Auto.resolve(4 << 20, false), Strategy::TwoPass);
        assert_eq!(
            Combine::Auto.resolve((4 << 20) + 1, false),
            Strategy::LastBlock
        );
        for bytes in [0, 4 << 20, (4 << 20) + 1, 1 << 40] {
            assert_eq!(Combine::Auto.resolve(bytes, true), Strategy::TwoPass);
        }
        for (c, s) in [
            (Combine::TwoPass, Strategy::TwoPass),
            (Combine::LastBlock, Strategy::LastBlock),
            (Combine::Atomic, Strategy::Atomic),
        ] {
            for dependent in [false, true] {
                assert_eq!(c.resolve(1, dependent), s);
                assert_eq!(c.resolve(1 << 40, dependent), s);
            }
        }
    }
}
