//! [`LastUse`]: stream ordering for a handle's scratch buffers, which async calls may use from any stream.
use cust::stream::Stream;
use cust::sys::CUstream;

use crate::driver::{self, RawEvent};
use crate::error::Result;

/// The event recorded after the latest work that used some scratch, and the stream it went to. A use on
/// another stream waits for it first, so two streams never touch the scratch at the same time.
///
/// Work captured into a CUDA graph is not tracked: it runs when the graph is launched, which no event
/// recorded during the capture can describe (and waiting on such an event from outside the capture is an
/// error). A graph that holds calls of a handle must not run while other calls of that handle do.
pub(crate) struct LastUse {
    event: RawEvent,
    stream: Option<CUstream>,
}

impl LastUse {
    pub fn new() -> Result<Self> {
        Ok(LastUse {
            event: RawEvent::new()?,
            stream: None,
        })
    }

    /// Makes `stream` wait for the previous use if that was on another stream.
    pub fn acquire(&self, stream: &Stream) -> Result<()> {
        if self.stream.is_some_and(|s| s != stream.as_inner()) && !driver::capturing(stream)? {
            self.event.wait_on(stream)?;
        }
        Ok(())
    }

    /// Records that work using the scratch was enqueued on `stream`.
    pub fn release(&mut self, stream: &Stream) -> Result<()> {
        if driver::capturing(stream)? {
            return Ok(());
        }
        self.event.record(stream)?;
        self.stream = Some(stream.as_inner());
        Ok(())
    }

    /// Waits on the host until the previous use is done, e.g. before freeing the scratch.
    pub fn synchronize(&self) -> Result<()> {
        self.event.synchronize()
    }
}
