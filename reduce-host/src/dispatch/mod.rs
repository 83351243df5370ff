//! The dispatch layer, between [`crate::driver`] and the handles: for every kernel family, the argument
//! checks, the grid, the ordering of scratch reuse and the launch. Every launch goes through [`launch`] or
//! [`Source::launch`], which take a typed kernel (`reduce_contract::kernels`) and the parameter struct it
//! `Takes`; the handles above only choose kernels and present results.
pub(crate) mod call;
pub(crate) mod histogram;
pub(crate) mod reduce;
pub(crate) mod reproducible;
pub(crate) mod row_topk;
pub(crate) mod seed;
pub(crate) mod segmented;
pub(crate) mod select;
pub(crate) mod top_one;
pub(crate) mod topk;

use std::marker::PhantomData;

use reduce_contract::kernels::{Family, Key, Takes};

use crate::custom::OpKernels;
use crate::driver::{self, Function, Launch, Order};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};

/// A device slice as the dispatch sees it: its address and length.
pub(crate) struct Span<T> {
    pub ptr: u64,
    pub len: u64,
    _element: PhantomData<*const T>,
}

impl<T> Clone for Span<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Span<T> {}

impl<T> std::fmt::Debug for Span<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Span({:#x}, {})", self.ptr, self.len)
    }
}

impl<T> Span<T> {
    /// The span of `view`, checked: a non-empty view must have a non-null address aligned to `T`, in memory
    /// of `gpu`'s device.
    pub fn of_view(gpu: &Gpu, view: DeviceView<'_, T>, what: &str) -> Result<Self> {
        Span::from_raw(gpu, view.as_raw(), view.len() as u64, what)
    }

    /// As [`of_view`](Self::of_view), for an exclusive view.
    pub fn of_view_mut(gpu: &Gpu, view: &DeviceViewMut<'_, T>, what: &str) -> Result<Self> {
        Span::from_raw(gpu, view.as_raw(), view.len() as u64, what)
    }

    /// The first element of `view`, where an async call writes its one result; an empty view is an
    /// `InvalidArgument`.
    pub fn of_first(gpu: &Gpu, view: &DeviceViewMut<'_, T>, what: &str) -> Result<Self> {
        let first = view.as_view().get(..1).ok_or_else(|| {
            Error::InvalidArgument(format!("the {what} slice must hold at least one element"))
        })?;
        Span::of_view(gpu, first, what)
    }

    /// As [`of_view`](Self::of_view), from an address and a length. The owner check matters because a
    /// kernel that touches memory its context cannot see (another device's, or another context's on the
    /// same device) raises an illegal-address error, which is sticky: it would end all GPU work in the
    /// process, on every device.
    pub fn from_raw(gpu: &Gpu, ptr: u64, len: u64, what: &str) -> Result<Self> {
        let span = Span::aligned(ptr, len, what)?;
        if len > 0 {
            // The driver answers pointer queries only with a context current, and a handle may be used
            // on a thread that has none.
            let _current = gpu.make_current()?;
            let ours = gpu.info().ordinal;
            match driver::owner_of(ptr)? {
                Some(owner) if owner.device != ours => {
                    return Err(Error::InvalidArgument(format!(
                        "the {what} is memory of device {}, but this handle runs on device {ours}",
                        owner.device
                    )));
                }
                Some(owner)
                    if !owner.managed
                        && !owner.host
                        && !owner.context.is_null()
                        && owner.context != gpu.raw_context() =>
                {
                    return Err(Error::InvalidArgument(format!(
                        "the {what} was allocated in a CUDA context of device {ours} other than its \
                         primary context, which this handle runs in and which cannot address it"
                    )));
                }
                Some(_) => {}
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "the {what} address {ptr:#x} is not memory the CUDA driver knows"
                    )));
                }
            }
        }
        Ok(span)
    }

    /// The address checks alone, which need no device: a non-empty span must have a non-null address
    /// aligned to `T`.
    pub fn aligned(ptr: u64, len: u64, what: &str) -> Result<Self> {
        let align = std::mem::align_of::<T>() as u64;
        if len > 0 && (ptr == 0 || !ptr.is_multiple_of(align)) {
            return Err(Error::InvalidArgument(format!(
                "{what} address {ptr:#x} is null or not aligned to its {align}-byte element"
            )));
        }
        Ok(Span {
            ptr,
            len,
            _element: PhantomData,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *const T {
        self.ptr as *const T
    }

    pub fn as_mut_ptr(&self) -> *mut T {
        self.ptr as *mut T
    }
}

/// Where one reduction's kernels come from: the built-in images (a contract [`Family`], its kernels by
/// pass), or a user's kernel crate ([`OpKernels`], resolved by the operator's name in the same pass
/// order). Every family that runs user operators (device-wide and per segment) takes one, so a user's
/// operator goes through the same checks, grids, scratch ordering and launches as the built-ins.
#[derive(Clone, Copy)]
pub(crate) enum Source<'k, F> {
    Builtin(F),
    User(&'k OpKernels),
}

impl<'k, F: Family> Source<'k, F> {
    /// The kernel of `pass`, loading its module the first time. The context must be current.
    pub fn function<'a>(self, gpu: &'a Gpu, pass: F::Pass) -> Result<&'a Function>
    where
        'k: 'a,
    {
        match self {
            Source::Builtin(family) => gpu.function(family.kernel(pass)),
            Source::User(kernels) => kernels.function(pass.ordinal()),
        }
    }

    /// Dynamic shared memory the kernels need: [`SMEM_BYTES`](reduce_contract::layout::SMEM_BYTES), or a
    /// user's accumulator in each of 32 warp slots when that is more.
    pub fn shared_bytes(self) -> u32 {
        let smem = reduce_contract::layout::SMEM_BYTES;
        match self {
            Source::Builtin(_) => smem,
            Source::User(kernels) => smem.max(32 * kernels.acc_bytes() as u32),
        }
    }

    /// Whether these kernels wait for their predecessor before touching memory when launched as
    /// programmatic dependents: code built from the sm_90 PTX, on a driver that takes such launches.
    pub fn dependent_launch(self, gpu: &Gpu) -> bool {
        match self {
            Source::Builtin(_) => gpu.dependent_launch(),
            Source::User(kernels) => crate::gpu::dependent_launch_of(kernels.code()),
        }
    }

    /// Launches the kernel of `pass` with `params`, in `order` ([`Order::Programmatic`] falls back to
    /// stream order where [`dependent_launch`](Self::dependent_launch) is false).
    ///
    /// # Safety
    /// As [`launch`]; with [`Order::Programmatic`], the kernel calls `arch::wait_for_primary` before it
    /// touches any memory but its parameter (the reduce family's partials and finalize kernels, built-in or
    /// a user's, do). For a user's kernels, `P` must be built from the operator's `In` and `Acc` (the
    /// built-ins' pairing is checked by `Takes`).
    pub unsafe fn launch<P>(
        self,
        gpu: &Gpu,
        pass: F::Pass,
        shape: Launch,
        stream: StreamRef<'_>,
        params: P,
        order: Order,
    ) -> Result<()>
    where
        F::Kernel: Takes<P>,
    {
        let order = if order == Order::Programmatic && self.dependent_launch(gpu) {
            Order::Programmatic
        } else {
            Order::Stream
        };
        // SAFETY (both arms): forwarded to the caller; the built-in kernel takes `P` (the bound).
        unsafe { driver::launch(self.function(gpu, pass)?, shape, stream, &params, order) }
    }
}

/// Launches a built-in `kernel` with its family's parameters: `K: Takes<P>` makes a wrong pairing a
/// compile error.
///
/// # Safety
/// Every pointer in `params` must be valid for what `kernel`'s body documents until `stream` has passed the
/// launch; `shape.shared_bytes` must cover what the kernel needs.
pub(crate) unsafe fn launch<K: Takes<P>, P>(
    gpu: &Gpu,
    kernel: K,
    shape: Launch,
    stream: StreamRef<'_>,
    params: P,
) -> Result<()> {
    // SAFETY: forwarded to the caller; the kernel takes `P` (the bound).
    unsafe { driver::launch(gpu.function(kernel)?, shape, stream, &params, Order::Stream) }
}

/// The shape of a grid-stride kernel: `threads` fitted to its registers, and at most one resident wave of
/// `grid` blocks (a larger grid would leave a tail of blocks running alone). The shape depends only on the
/// kernel and the arguments, so results stay repeatable.
pub(crate) fn resident(
    gpu: &Gpu,
    f: &Function,
    grid: u32,
    threads: u32,
    shared_bytes: u32,
) -> Result<Launch> {
    let block = f.fit_block(threads);
    let wave = gpu.info().sm_count * f.blocks_per_sm(block, shared_bytes)?;
    Ok(Launch {
        grid: grid.min(wave).max(1),
        block,
        shared_bytes,
    })
}
