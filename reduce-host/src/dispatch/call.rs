//! [`Call`]: what every handle method does around its dispatch, written once. A call makes the device's
//! context current, checks each view it is given (device, context, alignment, and that no output shares a
//! byte with any other argument), and enqueues its work with the stream ordered after the views' cudarc
//! homes and them after the work.
use crate::error::{Error, Result};
use crate::gpu::{Current, Gpu};
use crate::stream::{self, StreamRef};
use crate::view::{DeviceView, DeviceViewMut, Home, overlap};

use super::Span;

/// The most views one call takes (input, two offset arrays, and two outputs: a per-segment top-k).
const MAX_VIEWS: usize = 5;

/// A view already checked: its bytes, its name in messages, and whether the call writes it.
#[derive(Clone, Copy)]
struct Checked {
    ptr: u64,
    len: u64,
    size: usize,
    what: &'static str,
    output: bool,
}

/// One handle call in progress; the context stays current until it drops. It holds its own `Gpu` (an
/// `Arc`), so the handle stays free to lend its scratch to the dispatch.
pub(crate) struct Call {
    gpu: Gpu,
    homes: [Home; MAX_VIEWS],
    views: [Option<Checked>; MAX_VIEWS],
    count: usize,
    _current: Current,
}

impl Call {
    /// Starts a call on `gpu`: its context is current until the call drops.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Call {
            gpu: gpu.clone(),
            homes: [Home::default(); MAX_VIEWS],
            views: [None; MAX_VIEWS],
            count: 0,
            _current: gpu.make_current()?,
        })
    }

    /// An input `view`, checked ([`Span::of_view`]) and disjoint from every output so far.
    pub fn input<T>(&mut self, view: DeviceView<'_, T>, what: &'static str) -> Result<Span<T>> {
        let span = Span::of_view(&self.gpu, view, what)?;
        self.record(view.home(), &span, what, false)?;
        Ok(span)
    }

    /// An output `view`, checked and disjoint from every view so far.
    pub fn output<T>(
        &mut self,
        view: &DeviceViewMut<'_, T>,
        what: &'static str,
    ) -> Result<Span<T>> {
        let span = Span::of_view_mut(&self.gpu, view, what)?;
        self.record(view.home(), &span, what, true)?;
        Ok(span)
    }

    /// The first element of an output `view` (where an async call writes its one result), checked as
    /// [`output`](Self::output); an empty view is an `InvalidArgument`.
    pub fn first<T>(&mut self, view: &DeviceViewMut<'_, T>, what: &'static str) -> Result<Span<T>> {
        let span = Span::of_first(&self.gpu, view, what)?;
        self.record(view.home(), &span, what, true)?;
        Ok(span)
    }

    /// Memory of the handle's own (a result slot) written by the call: no home, nothing to check.
    pub fn own(&mut self) {
        self.push(Home::default(), None);
    }

    /// Enqueues `work` on `stream`, ordered after the views' cudarc homes, and them after it.
    pub fn enqueue<R>(&self, stream: StreamRef<'_>, work: impl FnOnce() -> Result<R>) -> Result<R> {
        stream::ordered(&self.homes[..self.count], stream, work)
    }

    fn record<T>(
        &mut self,
        home: Home,
        span: &Span<T>,
        what: &'static str,
        output: bool,
    ) -> Result<()> {
        let view = Checked {
            ptr: span.ptr,
            len: span.len,
            size: size_of::<T>(),
            what,
            output,
        };
        let bytes = |v: &Checked| (v.ptr, v.len.saturating_mul(v.size as u64));
        for other in self.views[..self.count].iter().flatten() {
            if (output || other.output) && overlap(bytes(other), bytes(&view)) {
                return Err(Error::InvalidArgument(format!(
                    "the {} and the {what} overlap in device memory; they must be disjoint",
                    other.what
                )));
            }
        }
        self.push(home, Some(view));
        Ok(())
    }

    fn push(&mut self, home: Home, view: Option<Checked>) {
        assert!(
            self.count < MAX_VIEWS,
            "a call takes at most {MAX_VIEWS} views"
        );
        self.homes[self.count] = home;
        self.views[self.count] = view;
        self.count += 1;
    }
}
