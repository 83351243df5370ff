//! [`Segments`]: where the segments of a [`DeviceSegmentedReduce`](crate::DeviceSegmentedReduce) call lie
//! in its input (rows of a matrix, fixed-size blocks, or offset ranges), and their check against the input.
use crate::dispatch::Span;
use crate::dispatch::segmented::Layout;
use crate::error::{Error, Result};
use crate::view::DeviceView;

/// Where the segments of a [`DeviceSegmentedReduce`](crate::DeviceSegmentedReduce) call lie in its input.
///
/// ```
/// use reduce_host::Segments;
/// let m = Segments::rows(3, 5, 8); // 3 rows of 5 elements, each row starting 8 elements after the last
/// assert_eq!(m.count(), 3);
/// assert_eq!(Segments::fixed(4, 16).count(), 4); // = Segments::rows(4, 16, 16)
/// ```
///
/// Offsets (CUB's `d_begin_offsets`/`d_end_offsets`) are device arrays of `u64`; a segment `begin[s] ..
/// end[s]` with `end < begin` or `end` past the input is never read: it reduces as empty, and the blocking
/// methods report it as [`Error::InvalidArgument`].
///
/// ```no_run
/// use reduce_host::cust::memory::DeviceBuffer;
/// use reduce_host::{DeviceView, Segments};
///
/// let offsets = DeviceBuffer::from_slice(&[0u64, 3, 3, 10])?; // segments 0..3, 3..3 (empty), 3..10
/// let all = DeviceView::from(&offsets);
/// let segments = Segments::offsets(all.slice(..3), all.slice(1..));
/// assert_eq!(segments.count(), 3);
/// # Ok::<(), reduce_host::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Segments<'a> {
    kind: Kind<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Kind<'a> {
    Rows {
        rows: u64,
        cols: u64,
        stride: u64,
    },
    Offsets {
        begin: DeviceView<'a, u64>,
        end: DeviceView<'a, u64>,
    },
}

impl Segments<'static> {
    /// The `rows` rows of a row-major matrix of `cols` columns whose rows start `stride` elements apart
    /// (`stride >= cols` when there are two rows or more; the input's first element is row 0's). Row `r` is
    /// `input[r · stride ..][..cols]`.
    pub fn rows(rows: usize, cols: usize, stride: usize) -> Self {
        Segments {
            kind: Kind::Rows {
                rows: rows as u64,
                cols: cols as u64,
                stride: stride as u64,
            },
        }
    }

    /// `count` back-to-back segments of `size` elements: `rows(count, size, size)`.
    pub fn fixed(count: usize, size: usize) -> Self {
        Segments::rows(count, size, size)
    }
}

impl<'a> Segments<'a> {
    /// Segment `s` is `input[begin[s] .. end[s]]`; `begin` and `end` must have the same length, the number
    /// of segments. For CUB-style offsets `o` (`count + 1` values), pass `o.slice(..count)` and
    /// `o.slice(1..)`.
    pub fn offsets(
        begin: impl Into<DeviceView<'a, u64>>,
        end: impl Into<DeviceView<'a, u64>>,
    ) -> Self {
        Segments {
            kind: Kind::Offsets {
                begin: begin.into(),
                end: end.into(),
            },
        }
    }

    /// How many segments (and results) there are.
    pub fn count(&self) -> usize {
        match self.kind {
            Kind::Rows { rows, .. } => rows as usize,
            Kind::Offsets { begin, .. } => begin.len(),
        }
    }

    /// `(rows, cols, stride)` of a rows (or fixed) layout; `None` for offsets.
    pub(crate) fn rows_shape(&self) -> Option<(u64, u64, u64)> {
        match self.kind {
            Kind::Rows { rows, cols, stride } => Some((rows, cols, stride)),
            Kind::Offsets { .. } => None,
        }
    }

    /// Checks the segments against an input of `n` elements: rows must lie inside it (offsets are checked
    /// on the device, where they are).
    /// `span` checks an offsets view the way every device slice of a call is checked (address, device).
    pub(crate) fn layout(
        &self,
        n: u64,
        mut span: impl FnMut(DeviceView<'_, u64>, &'static str) -> Result<Span<u64>>,
    ) -> Result<Layout> {
        let invalid = |m: String| Err(Error::InvalidArgument(m));
        match self.kind {
            Kind::Rows { rows, cols, stride } => {
                // One row (or none) has no second row to overlap, whatever the stride: the kernels then
                // see the stride of back-to-back rows.
                let stride = if rows <= 1 { cols } else { stride };
                if stride < cols {
                    return invalid(format!(
                        "row stride {stride} is less than the {cols} columns: rows would overlap"
                    ));
                }
                if rows > 0 {
                    let end = (rows - 1)
                        .checked_mul(stride)
                        .and_then(|start| start.checked_add(cols));
                    match end {
                        Some(end) if end <= n => {}
                        Some(end) => {
                            return invalid(format!(
                                "{rows} rows of {cols} with stride {stride} end at element {end}, past the \
                                 input's {n}"
                            ));
                        }
                        None => {
                            return invalid(format!(
                                "{rows} rows with stride {stride} overflow 64-bit offsets"
                            ));
                        }
                    }
                }
                Ok(Layout::Rows {
                    count: rows,
                    len: cols,
                    stride,
                })
            }
            Kind::Offsets { begin, end } => {
                if begin.len() != end.len() {
                    return invalid(format!(
                        "{} begin offsets but {} end offsets: one of each per segment",
                        begin.len(),
                        end.len()
                    ));
                }
                Ok(Layout::Offsets {
                    count: begin.len() as u64,
                    begin: span(begin, "begin offsets")?,
                    end: span(end, "end offsets")?,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets check of a call, for tests whose segments are rows (or fail before it).
    fn rows_only(_: DeviceView<'_, u64>, _: &str) -> Result<Span<u64>> {
        unreachable!("rows need no device check")
    }

    /// The address checks of a call's offsets without the device check (no GPU here).
    fn addresses_only(v: DeviceView<'_, u64>, what: &str) -> Result<Span<u64>> {
        Span::aligned(v.as_raw(), v.len() as u64, what)
    }

    fn invalid(r: Result<Layout>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn rows_must_lie_inside_the_input() {
        let l = Segments::rows(3, 5, 8).layout(21, rows_only).unwrap();
        assert!(matches!(
            l,
            Layout::Rows {
                count: 3,
                len: 5,
                stride: 8
            }
        ));
        assert!(invalid(Segments::rows(3, 5, 8).layout(20, rows_only)).contains("past the input"));
        assert!(Segments::fixed(4, 16).layout(64, rows_only).is_ok());
        assert!(invalid(Segments::fixed(4, 16).layout(63, rows_only)).contains("past"));
    }

    #[test]
    fn stride_below_cols_is_refused() {
        assert!(invalid(Segments::rows(2, 5, 4).layout(100, rows_only)).contains("stride"));
    }

    #[test]
    fn one_row_takes_any_stride() {
        for stride in [0, 4, 5, 1 << 40] {
            let l = Segments::rows(1, 5, stride).layout(5, rows_only).unwrap();
            assert!(matches!(
                l,
                Layout::Rows {
                    count: 1,
                    len: 5,
                    stride: 5
                }
            ));
        }
        assert!(invalid(Segments::rows(1, 5, 0).layout(4, rows_only)).contains("past the input"));
    }

    #[test]
    fn empty_layouts_are_fine() {
        assert_eq!(
            Segments::rows(0, 5, 8)
                .layout(0, rows_only)
                .unwrap()
                .count(),
            0
        );
        assert_eq!(
            Segments::rows(7, 0, 0)
                .layout(0, rows_only)
                .unwrap()
                .count(),
            7
        );
        assert_eq!(
            Segments::fixed(0, 0).layout(0, rows_only).unwrap().count(),
            0
        );
    }

    #[test]
    fn overflowing_shapes_are_refused_not_wrapped() {
        let big = usize::MAX / 2 + 1;
        assert!(
            invalid(Segments::rows(3, 1, big).layout(u64::MAX, rows_only)).contains("overflow")
        );
        assert!(invalid(Segments::fixed(big, 4).layout(u64::MAX, rows_only)).contains("overflow"));
        assert!(
            invalid(Segments::rows(2, usize::MAX, usize::MAX).layout(u64::MAX, rows_only))
                .contains("overflow")
        );
    }

    #[test]
    fn offsets_need_one_begin_and_one_end_per_segment() {
        // SAFETY: never dereferenced; these tests only check lengths and addresses.
        let (b, e) = unsafe {
            (
                DeviceView::<u64>::from_raw_parts(0x1000, 3),
                DeviceView::<u64>::from_raw_parts(0x2000, 4),
            )
        };
        assert!(
            invalid(Segments::offsets(b, e).layout(10, addresses_only)).contains("begin offsets")
        );
        let l = Segments::offsets(b, e.slice(1..))
            .layout(10, addresses_only)
            .unwrap();
        assert_eq!(l.count(), 3);
        // SAFETY: as above; misaligned on purpose.
        let odd = unsafe { DeviceView::<u64>::from_raw_parts(0x1004, 3) };
        assert!(invalid(Segments::offsets(odd, b).layout(10, addresses_only)).contains("aligned"));
    }
}
