//! [`StreamRef`]: the stream an async call is enqueued on, whichever crate made it.
use std::marker::PhantomData;

use cust::sys;

use crate::error::Result;
use crate::view::Home;

/// A borrowed CUDA stream of this handle's device: a `cust` [`Stream`](cust::stream::Stream), or with the
/// `cudarc` feature a cudarc `CudaStream`. Async calls take `impl Into<StreamRef>`, so `&stream` works for
/// either.
///
/// The borrow keeps the stream alive for the call that enqueues work on it; the work itself may run after the
/// call returns, and the driver keeps a stream until the work queued on it is done.
#[derive(Clone, Copy)]
pub struct StreamRef<'a> {
    raw: sys::CUstream,
    _borrow: PhantomData<&'a ()>,
}

impl std::fmt::Debug for StreamRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StreamRef").field(&self.raw).finish()
    }
}

impl<'a> StreamRef<'a> {
    /// A stream from its raw driver handle, for streams made outside `cust` and `cudarc`.
    ///
    /// # Safety
    /// `raw` must be a live stream (or null, the legacy default stream) of the device of the handle it is
    /// used with, and stay live for `'a`.
    pub unsafe fn from_raw(raw: sys::CUstream) -> Self {
        StreamRef {
            raw,
            _borrow: PhantomData,
        }
    }

    /// The raw driver handle.
    pub fn as_raw(&self) -> sys::CUstream {
        self.raw
    }

    /// Whether this is the legacy default stream (null, or `CU_STREAM_LEGACY`), which synchronises with
    /// every other blocking stream; launches on it keep the plain stream order.
    pub(crate) fn is_legacy(&self) -> bool {
        self.raw.is_null() || self.raw as usize == 0x1
    }
}

impl<'a> From<&'a cust::stream::Stream> for StreamRef<'a> {
    fn from(stream: &'a cust::stream::Stream) -> Self {
        // SAFETY: a live cust stream, borrowed for 'a.
        unsafe { StreamRef::from_raw(stream.as_inner()) }
    }
}

impl<'a, 'b> From<&'b StreamRef<'a>> for StreamRef<'a> {
    fn from(stream: &'b StreamRef<'a>) -> Self {
        *stream
    }
}

/// Runs `enqueue` (which puts one call's work on `stream`) ordered with the streams that own the call's
/// cudarc memory (`homes`): the work waits for what those streams already hold, and their later work (a
/// cudarc free included) waits for it. Without the `cudarc` feature there are no homes and this is just
/// `enqueue()`.
///
/// The homes are made to wait even when `enqueue` fails: it may fail after some of its kernels went in,
/// and a caller that gets the error may free the memory at once. Where even that fails, the host waits for
/// the stream before returning the error.
pub(crate) fn ordered<R>(
    homes: &[Home],
    stream: StreamRef<'_>,
    enqueue: impl FnOnce() -> Result<R>,
) -> Result<R> {
    #[cfg(feature = "cudarc")]
    crate::cudarc::wait_for_homes(homes, stream)?;
    let r = enqueue();
    #[cfg(feature = "cudarc")]
    if let Err(e) = crate::cudarc::homes_wait_for(homes, stream) {
        // Nothing else orders the homes after work that may be queued: wait for it here (a failure of
        // this too leaves nothing more to try).
        let _ = crate::driver::synchronize(stream);
        r?;
        return Err(e);
    }
    #[cfg(not(feature = "cudarc"))]
    let _ = (homes, stream);
    r
}
