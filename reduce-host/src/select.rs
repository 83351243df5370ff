//! [`DeviceSelect`]: stream compaction — copy the elements that pass a test to the front of an output
//! buffer and count them — unordered (tiles placed by one atomic add each) or stable (single pass, decoupled
//! look-back): one kernel body, which differs only there.
use cust::memory::DeviceBuffer;
use cust::stream::Stream;
use reduce_contract::Pred;
use reduce_contract::kernels::SelectBy;

use crate::half::{BF16, F16};

use crate::dispatch::select::{Pick, Scratch, Selection};
use crate::dispatch::{self, call::Call};
use crate::driver;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::pinned::Pinned;
use crate::stream::StreamRef;
use crate::tuning::{self, Policy};
use crate::view::{DeviceView, DeviceViewMut};

mod sealed {
    pub trait Sealed {}
}

/// Element types the compaction kernels are built for: every element type of the library.
pub trait SelectElement: Element + sealed::Sealed {}

macro_rules! select_elements {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl SelectElement for $t {}
    )*};
}
select_elements!(f32, f64, F16, BF16, i32, u32, i64, u64, u8);

/// A test on one element that selects it, mirrored by a device type of the same name; the threshold, when
/// the test has one, is a kernel parameter.
pub trait Predicate<T: SelectElement>: Copy + sealed::Sealed {
    /// The contract's name of the test for `T`, which picks the kernels.
    #[doc(hidden)]
    fn by() -> SelectBy;
    /// The value passed as the kernel's `threshold` parameter.
    fn threshold(&self) -> T;
}

/// Keeps `x > self.0`. NaN is never kept (it compares false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GreaterThan<T>(pub T);
/// Keeps `x < self.0`. NaN is never kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LessThan<T>(pub T);
/// Keeps `x != 0`: -0.0 and +0.0 are dropped, NaN is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonZero;
/// Keeps finite values of a float type: NaN and ±∞ are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsFinite;

impl<T> sealed::Sealed for GreaterThan<T> {}
impl<T> sealed::Sealed for LessThan<T> {}
impl sealed::Sealed for NonZero {}
impl sealed::Sealed for IsFinite {}

impl<T: SelectElement> Predicate<T> for GreaterThan<T> {
    fn by() -> SelectBy {
        SelectBy::Compare(Pred::Gt, T::ELEM)
    }
    fn threshold(&self) -> T {
        self.0
    }
}

impl<T: SelectElement> Predicate<T> for LessThan<T> {
    fn by() -> SelectBy {
        SelectBy::Compare(Pred::Lt, T::ELEM)
    }
    fn threshold(&self) -> T {
        self.0
    }
}

impl<T: SelectElement> Predicate<T> for NonZero {
    fn by() -> SelectBy {
        SelectBy::Compare(Pred::NonZero, T::ELEM)
    }
    fn threshold(&self) -> T {
        T::default()
    }
}

impl<T: SelectElement + reduce_contract::Float> Predicate<T> for IsFinite {
    fn by() -> SelectBy {
        let float = T::ELEM
            .float()
            .expect("the Float element types are the floats");
        SelectBy::Finite(float)
    }
    fn threshold(&self) -> T {
        T::default()
    }
}

/// Stream compaction on `cust` device memory: copies the elements of `input` that pass a test to the front
/// of `out` and returns how many there are.
///
/// - [`select_if`](Self::select_if) is the fastest: each block reserves room for its tile's elements with
///   one atomic add. **The order of the output is unspecified** and may change from run to run (each
///   tile's elements stay in input order; the tiles land in the order their atomics do).
/// - [`select_if_stable`](Self::select_if_stable) and [`select_flagged`](Self::select_flagged) keep the
///   input order, in a single pass over the input (decoupled look-back).
///
/// `out` must hold at least `input.len()` elements; only the first `count` are written. Inputs may be any
/// sub-slice (any offset and length); lengths and counts are 64-bit. The handle keeps its stream and
/// scratch, so repeated calls do not allocate (the stable kernels' look-back words grow to the largest input
/// they have seen).
///
/// ```no_run
/// use cust::memory::{CopyDestination, DeviceBuffer};
/// use reduce_host::{DeviceSelect, GreaterThan};
///
/// let mut select = DeviceSelect::new()?;
/// let x = DeviceBuffer::from_slice(&[0.5f32, -1.0, 2.0, 0.0, 3.5])?;
/// let mut out = DeviceBuffer::from_slice(&[0.0f32; 5])?;
/// let kept = select.select_if_stable(&x, GreaterThan(0.25), &mut out)?;
/// let mut host = [0.0f32; 5];
/// out.copy_to(&mut host[..])?;
/// assert_eq!(&host[..kept as usize], &[0.5, 2.0, 3.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Streams and CUDA graphs
/// As for [`DeviceReduce`](crate::DeviceReduce): async calls on different streams are ordered on the
/// handle's look-back scratch; a captured graph must not run beside other calls of the handle, and must not
/// be launched after the handle is dropped or after a stable compaction of a larger input has grown the
/// scratch.
pub struct DeviceSelect {
    /// Where blocking calls have the count written.
    count: InContext<DeviceBuffer<u64>>,
    tiles: InContext<Scratch>,
    stream: InContext<Stream>,
    /// Page-locked memory the counts of blocking calls are copied into.
    staging: InContext<Pinned>,
    policy: Policy,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceSelect);

impl DeviceSelect {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        // The device's context, current while the handle's buffers are allocated in it.
        let _current = gpu.make_current()?;
        let stream = gpu.handle_stream()?;
        Ok(DeviceSelect {
            count: InContext::new(gpu, driver::zeroed(1)?),
            tiles: InContext::new(gpu, Scratch::new()?),
            stream,
            staging: InContext::new(gpu, Pinned::new(size_of::<u64>())?),
            policy: Policy {
                threads: tuning::SELECT_THREADS,
                ..tuning::policy(gpu.info().cc())
            },
            gpu: gpu.clone(),
        })
    }

    /// The launch policy in use (from the tuning table for this device unless set).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Forces a launch policy, e.g. to test odd block sizes, checked as
    /// [`DeviceReduce::set_policy`](crate::DeviceReduce::set_policy) checks it (`finalize_threads`
    /// and `blocks_per_sm` are not used here: a compaction launches one block per tile). The compaction
    /// kernels use at most 736 threads, whose tile still fits the 48 KiB of shared memory a block gets.
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        policy.check()?;
        self.policy = policy;
        Ok(())
    }

    /// Copies the elements of `input` that pass `pred` to `out[..count]` **in unspecified order** and
    /// returns `count`. `out` must hold at least `input.len()` elements.
    pub fn select_if<'a, 'b, T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        pred: P,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<u64> {
        self.blocking(by_predicate(false, &pred), input.into(), out.into())
    }

    /// Copies the elements of `input` that pass `pred` to `out[..count]` in input order and returns
    /// `count`. `out` must hold at least `input.len()` elements.
    pub fn select_if_stable<'a, 'b, T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        pred: P,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<u64> {
        self.blocking(by_predicate(true, &pred), input.into(), out.into())
    }

    /// Copies `input[i]` for every `i` with `flags[i] != 0` to `out[..count]` in input order and returns
    /// `count`. `flags` must be as long as `input`, and `out` at least as long.
    pub fn select_flagged<'a, 'b, T: SelectElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        flags: impl Into<DeviceView<'a, u8>>,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<u64> {
        let (input, flags) = (input.into(), flags.into());
        self.blocking(self.flagged::<T>(input, flags)?, input, out.into())
    }

    /// Enqueues [`select_if`](Self::select_if) on `stream`, with the count written to `count[0]`, and
    /// returns without waiting.
    ///
    /// # Safety
    /// `input`, `out` and `count` must stay allocated, `input` unmodified and `out`/`count` untouched by
    /// other work, until `stream` has passed this work.
    /// If `stream` is capturing a CUDA graph, the graph uses the handle's scratch each time it runs: it must
    /// not run after the handle is dropped or its scratch is replaced (by a later call that needs more, or
    /// a new policy), nor while another call of the handle runs.
    pub unsafe fn select_if_async<'s, 'a, 'b, T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        pred: P,
        out: impl Into<DeviceViewMut<'b, T>>,
        count: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(
            by_predicate(false, &pred),
            input.into(),
            out.into(),
            count.into(),
            stream.into(),
        )
    }

    /// Enqueues [`select_if_stable`](Self::select_if_stable) on `stream`, with the count written to
    /// `count[0]`, and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async).
    pub unsafe fn select_if_stable_async<'s, 'a, 'b, T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        pred: P,
        out: impl Into<DeviceViewMut<'b, T>>,
        count: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into(
            by_predicate(true, &pred),
            input.into(),
            out.into(),
            count.into(),
            stream.into(),
        )
    }

    /// Enqueues [`select_flagged`](Self::select_flagged) on `stream`, with the count written to `count[0]`,
    /// and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async); `flags` too must stay allocated and unmodified.
    pub unsafe fn select_flagged_async<'s, 'a, 'b, T: SelectElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        flags: impl Into<DeviceView<'a, u8>>,
        out: impl Into<DeviceViewMut<'b, T>>,
        count: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let (input, flags) = (input.into(), flags.into());
        let selection = self.flagged::<T>(input, flags)?;
        self.enqueue_into(selection, input, out.into(), count.into(), stream.into())
    }

    fn flagged<'f, T: SelectElement>(
        &self,
        input: DeviceView<'_, T>,
        flags: DeviceView<'f, u8>,
    ) -> Result<Selection<'static, T, DeviceView<'f, u8>>> {
        if flags.len() != input.len() {
            return Err(Error::InvalidArgument(format!(
                "flags hold {} bytes for {} elements; they must be as long as the input",
                flags.len(),
                input.len()
            )));
        }
        Ok(Selection::Flagged(flags))
    }

    pub(crate) fn blocking<T: SelectElement>(
        &mut self,
        selection: Selection<'_, T, DeviceView<'_, u8>>,
        input: DeviceView<'_, T>,
        out: DeviceViewMut<'_, T>,
    ) -> Result<u64> {
        let mut call = Call::new(&self.gpu)?;
        let count = self.count.as_device_ptr().as_raw();
        call.own();
        self.enqueue(call, selection, (input, out), count as *mut u64, None)?;
        // SAFETY: the kernels just enqueued write the count, a u64, on the handle's stream; `staging` is
        // this handle's, used by blocking calls only, which `&mut self` serialises.
        unsafe { driver::read_back::<u64>(count, &self.staging, StreamRef::from(&*self.stream)) }
    }

    pub(crate) fn enqueue_into<T: SelectElement>(
        &mut self,
        selection: Selection<'_, T, DeviceView<'_, u8>>,
        input: DeviceView<'_, T>,
        out: DeviceViewMut<'_, T>,
        count: DeviceViewMut<'_, u64>,
        stream: StreamRef<'_>,
    ) -> Result<()> {
        let mut call = Call::new(&self.gpu)?;
        let count = call.first(&count, "count")?;
        self.enqueue(
            call,
            selection,
            (input, out),
            count.as_mut_ptr(),
            Some(stream),
        )
    }

    /// Checks the slices (against each other and `call`'s count) and hands the call to the dispatch, on
    /// `stream` (the handle's if none).
    fn enqueue<T: SelectElement>(
        &mut self,
        mut call: Call,
        selection: Selection<'_, T, DeviceView<'_, u8>>,
        (input, out): (DeviceView<'_, T>, DeviceViewMut<'_, T>),
        count: *mut u64,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        let input = call.input(input, "input")?;
        let out = call.output(&out, "output")?;
        let selection = selection.try_map(|flags| call.input(flags, "flags"))?;
        if out.len < input.len {
            return Err(Error::InvalidArgument(format!(
                "the output holds {} elements; it must hold at least the input's {}",
                out.len, input.len
            )));
        }
        // SAFETY: `input` and `out` are checked, borrowed, disjoint views, `out` at least as long; `count` holds one u64 (the
        // handle's slot, or a non-empty slice the caller keeps alive until `stream` passes this work).
        call.enqueue(stream, || unsafe {
            dispatch::select::enqueue(
                &self.gpu,
                &mut self.tiles,
                &self.policy,
                selection,
                input,
                out,
                count,
                stream,
            )
        })
    }
}

/// The selection by `pred`, in input order when `stable`.
fn by_predicate<'f, T: SelectElement, P: Predicate<T>>(
    stable: bool,
    pred: &P,
) -> Selection<'static, T, DeviceView<'f, u8>> {
    Selection::by_predicate(stable, Pick::Builtin(P::by()), pred.threshold())
}

impl Drop for DeviceSelect {
    fn drop(&mut self) {
        // The fields free device memory: make their context current first. Nothing to report a failure to.
        let _current = self.gpu.make_current();
        // Async calls may still be using the scratch on any stream: wait for the last use before it is freed.
        let _ = self.tiles.wait_idle();
    }
}
