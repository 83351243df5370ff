//! cudarc interop (feature `cudarc`): cudarc's `CudaSlice`, `CudaView` and `CudaViewMut` convert into the
//! handles' views, and its `CudaStream`s into [`StreamRef`]s, so candle and burn users can call every handle
//! on their own memory and streams.
//!
//! cudarc allocates, frees and (in its multi-stream mode) tracks reads and writes on the stream that owns
//! each allocation, its *home*. A view made from cudarc memory remembers that home; every call then waits
//! for the home's earlier work before its own, and makes the home wait for the call's work after it, so a
//! cudarc write before the call, or a cudarc free after it, can never overlap the kernels.
//!
//! A home that is cudarc's per-thread default stream (`CU_STREAM_PER_THREAD`) names the calling thread's
//! stream, whichever thread queued the memory's work: such memory is ordered with the caller's thread only.
use std::sync::Arc;

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice as _,
};

use crate::driver::{self, RawEvent};
use crate::error::{Error, Result};
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut, Home};

impl<'a> From<&'a CudaStream> for StreamRef<'a> {
    fn from(stream: &'a CudaStream) -> Self {
        // SAFETY: a live cudarc stream, borrowed for 'a; both crates name the same driver handle type.
        unsafe { StreamRef::from_raw(stream.cu_stream() as cust::sys::CUstream) }
    }
}

impl<'a> From<&'a Arc<CudaStream>> for StreamRef<'a> {
    fn from(stream: &'a Arc<CudaStream>) -> Self {
        StreamRef::from(&**stream)
    }
}

fn home(stream: &CudaStream) -> Home {
    Home(Some(stream.cu_stream() as usize))
}

/// The address of cudarc memory, after making its home stream wait for any write cudarc tracks on another
/// stream (multi-stream mode). The read or write cudarc records when the guard drops is ordered again, after
/// the call, by `homes_wait_for`.
fn read_address<T>(memory: &impl DevicePtr<T>) -> u64 {
    let home = memory.stream().clone();
    let (ptr, _recorded) = memory.device_ptr(&home);
    ptr
}

fn write_address<T>(memory: &mut impl DevicePtrMut<T>) -> u64 {
    let home = memory.stream().clone();
    let (ptr, _recorded) = memory.device_ptr_mut(&home);
    ptr
}

macro_rules! read_views {
    ($($source:ty),*) => {$(
        impl<'a, 'b: 'a, T> From<&'a $source> for DeviceView<'a, T> {
            fn from(memory: &'a $source) -> Self {
                let ptr = read_address(memory);
                // SAFETY: cudarc memory of `len` initialised elements (cudarc's safe API allocates only
                // initialised or zeroed memory), borrowed for 'a.
                unsafe { DeviceView::homed(ptr, memory.len(), home(memory.stream())) }
            }
        }
    )*};
}
read_views!(CudaSlice<T>, CudaView<'b, T>, CudaViewMut<'b, T>);

macro_rules! write_views {
    ($($source:ty),*) => {$(
        impl<'a, 'b: 'a, T> From<&'a mut $source> for DeviceViewMut<'a, T> {
            fn from(memory: &'a mut $source) -> Self {
                let ptr = write_address(memory);
                let home = home(memory.stream());
                // SAFETY: cudarc memory of `len` elements, borrowed exclusively for 'a.
                unsafe { DeviceViewMut::homed(ptr, memory.len(), home) }
            }
        }
        impl<'a, 'b: 'a, T> From<&'a mut $source> for DeviceView<'a, T> {
            fn from(memory: &'a mut $source) -> Self {
                DeviceView::from(&*memory)
            }
        }
    )*};
}
write_views!(CudaSlice<T>, CudaViewMut<'b, T>);

/// The distinct homes other than `stream` itself. A capturing stream is left alone: an event recorded
/// outside a capture cannot be waited on inside it (the caller orders graphs, as for every handle).
///
/// A home that is capturing while `stream` is not is refused: waiting on an event recorded in a capture
/// would pull `stream` into that capture, so the call's kernels would be captured, not run, and the
/// capture's owner would find foreign work in its graph.
fn others(homes: &[Home], stream: StreamRef<'_>) -> Result<Vec<StreamRef<'static>>> {
    let mut raw: Vec<usize> = homes
        .iter()
        .filter_map(|h| h.0)
        .filter(|&r| r != stream.as_raw() as usize)
        .collect();
    // Most calls have no cudarc memory: no driver query for them.
    if raw.is_empty() || driver::capturing(stream)? {
        return Ok(Vec::new());
    }
    raw.sort_unstable();
    raw.dedup();
    let others: Vec<StreamRef<'static>> = raw
        .into_iter()
        // SAFETY: each home belongs to cudarc memory the call's views borrow, which holds its stream alive
        // for the call; the StreamRef does not leave this module's two functions.
        .map(|r| unsafe { StreamRef::from_raw(r as cust::sys::CUstream) })
        .collect();
    for &home in &others {
        if driver::capturing(home)? {
            return Err(Error::InvalidArgument(
                "the stream that owns this cudarc memory is capturing a CUDA graph: end the capture \
                 first, or make the call on the capturing stream"
                    .into(),
            ));
        }
    }
    Ok(others)
}

/// Makes `stream` wait for the work already queued on every home.
pub(crate) fn wait_for_homes(homes: &[Home], stream: StreamRef<'_>) -> Result<()> {
    for home in others(homes, stream)? {
        let event = RawEvent::new()?;
        event.record(home)?;
        event.wait_on(stream)?;
    }
    Ok(())
}

/// Makes every home wait for the work queued on `stream` so far.
pub(crate) fn homes_wait_for(homes: &[Home], stream: StreamRef<'_>) -> Result<()> {
    let others = others(homes, stream)?;
    if others.is_empty() {
        return Ok(());
    }
    let event = RawEvent::new()?;
    event.record(stream)?;
    for home in others {
        event.wait_on(home)?;
    }
    Ok(())
}
