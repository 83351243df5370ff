//! Device memory views that borrow what they describe: [`DeviceView`] (read-only, `Copy`) and
//! [`DeviceViewMut`] (exclusive). Every handle takes them, so safe code cannot pass memory that was freed,
//! nor write through a view while another aliases it.
//!
//! cust 0.3's `DeviceSlice` has no lifetime (`buf.index(..)` returns an owned slice that outlives `buf`), so
//! it is accepted only through the `unsafe` constructors here.
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use cust::memory::{DeviceBuffer, DeviceCopy, DeviceSlice};

/// A read-only view of `len` elements of device memory, borrowed for `'a`.
///
/// ```no_run
/// use reduce_host::cust::memory::DeviceBuffer;
/// use reduce_host::{DeviceReduce, DeviceView};
///
/// let mut reduce = DeviceReduce::new()?;
/// let x = DeviceBuffer::from_slice(&[1.0f32, 5.0, -2.0, 5.0])?;
/// assert_eq!(reduce.sum(&x)?, 9.0); // a whole buffer
/// assert_eq!(reduce.min(DeviceView::from(&x).slice(1..))?, Some(-2.0)); // a sub-range, still borrowed
/// # Ok::<(), reduce_host::Error>(())
/// ```
///
/// A view cannot outlive its buffer:
///
/// ```compile_fail
/// # use reduce_host::cust::memory::DeviceBuffer;
/// # use reduce_host::DeviceView;
/// let view = {
///     let x = DeviceBuffer::from_slice(&[1.0f32]).unwrap();
///     DeviceView::from(&x)
/// }; // x is freed here
/// # let _ = view;
/// ```
pub struct DeviceView<'a, T> {
    ptr: u64,
    len: usize,
    home: Home,
    _borrow: PhantomData<&'a [T]>,
}

/// An exclusive view of `len` elements of device memory, borrowed mutably for `'a`: what the handles write
/// to.
///
/// ```no_run
/// use reduce_host::cust::memory::DeviceBuffer;
/// use reduce_host::{DeviceSelect, DeviceViewMut, GreaterThan};
///
/// let mut select = DeviceSelect::new()?;
/// let x = DeviceBuffer::from_slice(&[0.5f32, -1.0, 2.0])?;
/// let mut out = DeviceBuffer::from_slice(&[0.0f32; 3])?;
/// let kept = select.select_if_stable(&x, GreaterThan(0.0), &mut out)?;
/// assert_eq!(kept, 2);
/// // Input and output cannot be the same buffer: the borrow checker refuses `&x` beside `&mut x`, and
/// // overlapping raw views are refused at run time.
/// # Ok::<(), reduce_host::Error>(())
/// ```
pub struct DeviceViewMut<'a, T> {
    ptr: u64,
    len: usize,
    home: Home,
    _borrow: PhantomData<&'a mut [T]>,
}

/// The stream that owns a view's memory, when that memory comes from cudarc: a call orders its work after
/// that stream's, and that stream's later work (a cudarc free included) after the call's. Nothing without
/// the `cudarc` feature, or for memory from elsewhere.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Home(#[cfg(feature = "cudarc")] pub(crate) Option<usize>);

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceView<'_, T> {}

/// `range` of `0..len` as `start..end`, or `None` when it does not fit.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some((start, end))
}

macro_rules! common {
    ($view:ident) => {
        impl<T> std::fmt::Debug for $view<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let (name, ty) = (stringify!($view), std::any::type_name::<T>());
                write!(f, "{name}({:#x}, {} × {ty})", self.ptr, self.len)
            }
        }

        impl<'a, T> $view<'a, T> {
            /// A view of `len` elements at device address `ptr`.
            ///
            /// # Safety
            /// `ptr..ptr + len · size_of::<T>()` must be device memory of the context the view is used
            /// with, valid for `'a` for the accesses the view allows (reads; for `DeviceViewMut`, writes
            /// too, with no other access meanwhile), and hold `len` initialised values of `T`.
            pub unsafe fn from_raw_parts(ptr: u64, len: usize) -> Self {
                // SAFETY: forwarded to the caller.
                unsafe { Self::homed(ptr, len, Home::default()) }
            }

            /// As [`from_raw_parts`](Self::from_raw_parts), with the stream that owns the memory.
            ///
            /// # Safety
            /// As [`from_raw_parts`](Self::from_raw_parts).
            pub(crate) unsafe fn homed(ptr: u64, len: usize, home: Home) -> Self {
                $view {
                    ptr,
                    len,
                    home,
                    _borrow: PhantomData,
                }
            }

            /// The stream that owns the memory, if it is cudarc's.
            pub(crate) fn home(&self) -> Home {
                self.home
            }

            /// A view of a cust `DeviceSlice`, which carries no lifetime of its own.
            ///
            /// # Safety
            /// As [`from_raw_parts`](Self::from_raw_parts): the memory must stay allocated, and not be
            /// accessed in ways the view forbids, for `'a`.
            pub unsafe fn from_cust(slice: &DeviceSlice<T>) -> Self
            where
                T: DeviceCopy,
            {
                // SAFETY: forwarded to the caller.
                unsafe { Self::from_raw_parts(slice.as_device_ptr().as_raw(), slice.len()) }
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether the view holds no element.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address of the first element.
            pub fn as_raw(&self) -> u64 {
                self.ptr
            }

            /// `range` of the view (address, length), or `None` when it does not fit.
            fn range(&self, range: impl RangeBounds<usize>) -> Option<(u64, usize)> {
                let (start, end) = bounds(range, self.len)?;
                Some((self.ptr + (start * size_of::<T>()) as u64, end - start))
            }
        }
    };
}
common!(DeviceView);
common!(DeviceViewMut);

impl<'a, T> DeviceView<'a, T> {
    /// The elements in `range`, borrowed as long as `self`'s memory. Panics when `range` is out of bounds,
    /// as slice indexing does; [`get`](Self::get) returns `None` instead.
    pub fn slice(&self, range: impl RangeBounds<usize> + std::fmt::Debug) -> DeviceView<'a, T> {
        let len = self.len;
        let what = format!("{range:?}");
        self.get(range)
            .unwrap_or_else(|| panic!("range {what} out of bounds for a view of {len}"))
    }

    /// The elements in `range`, or `None` when it is out of bounds.
    pub fn get(&self, range: impl RangeBounds<usize>) -> Option<DeviceView<'a, T>> {
        let (ptr, len) = self.range(range)?;
        // SAFETY: a sub-range of memory this view borrows for 'a.
        Some(unsafe { DeviceView::homed(ptr, len, self.home) })
    }
}

impl<'a, T> DeviceViewMut<'a, T> {
    /// The elements in `range`, borrowing this view (so it cannot be used meanwhile). Panics when `range` is
    /// out of bounds.
    pub fn slice_mut(
        &mut self,
        range: impl RangeBounds<usize> + std::fmt::Debug,
    ) -> DeviceViewMut<'_, T> {
        let len = self.len;
        let what = format!("{range:?}");
        let (ptr, n) = self
            .range(range)
            .unwrap_or_else(|| panic!("range {what} out of bounds for a view of {len}"));
        // SAFETY: a sub-range of memory this view borrows exclusively, reborrowed for as long as `self` is.
        unsafe { DeviceViewMut::homed(ptr, n, self.home) }
    }

    /// A shorter-lived exclusive view of the same memory, leaving `self` usable afterwards.
    pub fn reborrow(&mut self) -> DeviceViewMut<'_, T> {
        // SAFETY: the same memory, borrowed from `self` for less long.
        unsafe { DeviceViewMut::homed(self.ptr, self.len, self.home) }
    }

    /// A read-only view of the same memory, borrowing this one.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        // SAFETY: shared access to memory this view borrows, for as long as `self` is borrowed.
        unsafe { DeviceView::homed(self.ptr, self.len, self.home) }
    }
}

impl<'a, T: DeviceCopy> From<&'a DeviceBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        // SAFETY: the buffer is allocated and initialised, and borrowed for 'a.
        unsafe { DeviceView::from_raw_parts(buffer.as_device_ptr().as_raw(), buffer.len()) }
    }
}

impl<'a, T: DeviceCopy> From<&'a mut DeviceBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        DeviceView::from(&*buffer)
    }
}

impl<'a, T: DeviceCopy> From<&'a mut DeviceBuffer<T>> for DeviceViewMut<'a, T> {
    fn from(buffer: &'a mut DeviceBuffer<T>) -> Self {
        // SAFETY: the buffer is allocated and initialised, and borrowed exclusively for 'a.
        unsafe { DeviceViewMut::from_raw_parts(buffer.as_device_ptr().as_raw(), buffer.len()) }
    }
}

impl<'a, T> From<DeviceViewMut<'a, T>> for DeviceView<'a, T> {
    fn from(view: DeviceViewMut<'a, T>) -> Self {
        // SAFETY: the exclusive borrow becomes a shared one for the same 'a.
        unsafe { DeviceView::homed(view.ptr, view.len, view.home) }
    }
}

impl<'a, 'b, T> From<&'b DeviceView<'a, T>> for DeviceView<'a, T> {
    fn from(view: &'b DeviceView<'a, T>) -> Self {
        *view
    }
}

impl<'a, 'b: 'a, T> From<&'a mut DeviceViewMut<'b, T>> for DeviceViewMut<'a, T> {
    fn from(view: &'a mut DeviceViewMut<'b, T>) -> Self {
        view.reborrow()
    }
}

/// Whether two byte ranges of device memory overlap (empty ones never do).
pub(crate) fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.1 > 0 && b.1 > 0 && a.0 < b.0.saturating_add(b.1) && b.0 < a.0.saturating_add(a.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(len: usize) -> DeviceView<'static, f32> {
        // SAFETY: never dereferenced; these tests only do address arithmetic.
        unsafe { DeviceView::from_raw_parts(0x1000, len) }
    }

    #[test]
    fn sub_ranges_move_the_address_and_keep_within_bounds() {
        let v = view(10);
        assert_eq!((v.slice(2..5).as_raw(), v.slice(2..5).len()), (0x1008, 3));
        assert_eq!(v.slice(..).len(), 10);
        assert_eq!(v.slice(10..).len(), 0);
        assert_eq!(v.slice(..=9).len(), 10);
        assert!(v.get(3..11).is_none());
        let (five, four) = (5, 4);
        assert!(v.get(five..four).is_none());
        assert!(v.get(..=usize::MAX).is_none());
        assert_eq!(v.slice(2..8).slice(1..3).as_raw(), 0x100c);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn an_out_of_bounds_slice_panics_like_a_slice() {
        let _ = view(4).slice(0..5);
    }

    #[test]
    fn overlap_is_on_bytes_and_ignores_empty_ranges() {
        assert!(overlap((0, 8), (4, 8)));
        assert!(overlap((4, 8), (0, 8)));
        assert!(!overlap((0, 8), (8, 8)));
        assert!(!overlap((0, 0), (0, 8)));
        assert!(overlap((0, 16), (4, 4)));
        assert!(!overlap((u64::MAX - 1, 1), (0, 4)));
    }
}
