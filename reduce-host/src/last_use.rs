//! [`LastUse`]: stream ordering for a handle's scratch buffers, which async calls may use from any stream.
use crate::driver::{self, RawEvent};
use crate::error::Result;
use crate::stream::StreamRef;

/// The event recorded after the latest work that used some scratch. Every use waits for it on its stream
/// first (a stream wait on an event is cheap), so two streams never touch the scratch at the same time, not
/// even when a dropped stream's handle is reused by a new one.
///
/// Work captured into a CUDA graph is not tracked: it runs when the graph is launched, which no event
/// recorded during the capture can describe (and waiting on such an event from outside the capture is an
/// error). A graph that holds calls of a handle must not run while other calls of that handle do.
pub(crate) struct LastUse {
    event: RawEvent,
}

impl LastUse {
    pub fn new() -> Result<Self> {
        Ok(LastUse {
            event: RawEvent::new()?,
        })
    }

    /// Makes `stream` wait for the previous use (at once if there was none).
    pub fn acquire(&self, stream: StreamRef<'_>) -> Result<()> {
        if !driver::capturing(stream)? {
            self.event.wait_on(stream)?;
        }
        Ok(())
    }

    /// Records that work using the scratch was enqueued on `stream`.
    pub fn release(&mut self, stream: StreamRef<'_>) -> Result<()> {
        if driver::capturing(stream)? {
            return Ok(());
        }
        self.event.record(stream)
    }

    /// Enqueues `work` on `stream` as a use: after the previous use, and recorded as the last even when
    /// `work` fails (a launch before the failing one may have gone in).
    pub fn claim<R>(
        &mut self,
        stream: StreamRef<'_>,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.acquire(stream)?;
        let r = work();
        self.release(stream)?;
        r
    }

    /// Waits on the host until the previous use is done, e.g. before freeing the scratch.
    pub fn synchronize(&self) -> Result<()> {
        self.event.synchronize()
    }
}
