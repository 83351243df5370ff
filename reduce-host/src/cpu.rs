//! CPU reference implementations with the same documented semantics as the GPU reductions. Float sums are
//! computed in f64 with compensation, so they also serve as the accuracy reference for the f32 and f64
//! kernels; integer sums are exact ([`sum_exact_i128`]).
use crate::half::{BF16, F16};

mod reproducible;
pub use reproducible::{ReproSum, chunk_partial, sum_reproducible};

/// Element types the references accept: every [`Element`](crate::Element).
pub trait RefElement: Copy + PartialOrd {
    /// Whether this is a NaN (never, for integers).
    fn is_nan(self) -> bool;
    /// Widening to f64: exact except for i64/u64 beyond 2^53, which round.
    fn to_f64(self) -> f64;
}

macro_rules! ref_float {
    ($($t:ty),*) => {$(
        impl RefElement for $t {
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
ref_float!(f32, f64);

macro_rules! ref_half {
    ($($t:ty),*) => {$(
        impl RefElement for $t {
            fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
            fn to_f64(self) -> f64 {
                self.to_f32() as f64
            }
        }
    )*};
}
ref_half!(F16, BF16);

macro_rules! ref_int {
    ($($t:ty),*) => {$(
        impl RefElement for $t {
            fn is_nan(self) -> bool {
                false
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
ref_int!(i32, u32, i64, u64, u8);

/// Sum in f64 of the widened elements, left to right with Neumaier's compensation, so its error is about
/// one f64 rounding of the result whatever the length; 0 for an empty slice, NaN or ±∞ as IEEE adds give.
pub fn sum_f64<T: RefElement>(xs: &[T]) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for x in xs.iter().map(|x| x.to_f64()) {
        let t = sum + x;
        carry += if sum.abs() >= x.abs() {
            (sum - t) + x
        } else {
            (x - t) + sum
        };
        sum = t;
    }
    // Once the sum is ±∞ or NaN the carry is NaN or meaningless: IEEE's answer is the plain sum.
    if sum.is_finite() { sum + carry } else { sum }
}

/// Exact sum of integers (no overflow for fewer than 2^64 elements). The GPU's wrapping i64/u64 sum equals
/// it modulo 2^64: compare with `sum_exact_i128(xs) as i64` (or `as u64`).
pub fn sum_exact_i128<T: Copy + Into<i128>>(xs: &[T]) -> i128 {
    xs.iter().map(|&x| x.into()).sum()
}

/// Sum of absolute values in f64: the scale for judging a floating-point sum's error.
pub fn abs_sum_f64<T: RefElement>(xs: &[T]) -> f64 {
    xs.iter().map(|x| x.to_f64().abs()).sum()
}

/// Index and value of the first element that no later element beats: `better(a, b)` is "a strictly better
/// than b". A NaN beats everything; ties keep the first.
fn arg_best<T: RefElement>(xs: &[T], better: impl Fn(T, T) -> bool) -> Option<(usize, T)> {
    let mut best: Option<(usize, T)> = None;
    for (i, &x) in xs.iter().enumerate() {
        match best {
            None => best = Some((i, x)),
            Some((_, b)) if b.is_nan() => {}
            Some(_) if x.is_nan() => best = Some((i, x)),
            Some((_, b)) if better(x, b) => best = Some((i, x)),
            _ => {}
        }
    }
    best
}

/// Index and value of the greatest element: first one on ties, first NaN if any; `None` when empty.
pub fn argmax<T: RefElement>(xs: &[T]) -> Option<(usize, T)> {
    arg_best(xs, |a, b| a > b)
}

/// Index and value of the least element: first one on ties, first NaN if any; `None` when empty.
pub fn argmin<T: RefElement>(xs: &[T]) -> Option<(usize, T)> {
    arg_best(xs, |a, b| a < b)
}

/// Greatest element (NaN if any element is NaN); `None` when empty.
pub fn max<T: RefElement>(xs: &[T]) -> Option<T> {
    argmax(xs).map(|(_, v)| v)
}

/// Least element (NaN if any element is NaN); `None` when empty.
pub fn min<T: RefElement>(xs: &[T]) -> Option<T> {
    argmin(xs).map(|(_, v)| v)
}

/// The element ranges of `rows` rows of `cols` elements starting `stride` apart (row `r` is `r · stride ..
/// r · stride + cols`): the segments of `Segments::rows`.
pub fn row_ranges(rows: usize, cols: usize, stride: usize) -> Vec<std::ops::Range<usize>> {
    (0..rows).map(|r| r * stride..r * stride + cols).collect()
}

/// The element ranges of CUB-style offsets: segment `s` is `offsets[s] .. offsets[s + 1]`.
pub fn offset_ranges(offsets: &[u64]) -> Vec<std::ops::Range<usize>> {
    offsets
        .windows(2)
        .map(|w| w[0] as usize..w[1] as usize)
        .collect()
}

/// `f` of each segment of `xs`: the per-segment reference of any reduction here, e.g.
/// `segmented(&x, &row_ranges(r, c, c), argmax)`. Ranges with `end < begin` or past `xs` are empty
/// segments, as on the device.
pub fn segmented<T, R>(
    xs: &[T],
    ranges: &[std::ops::Range<usize>],
    f: impl Fn(&[T]) -> R,
) -> Vec<R> {
    ranges
        .iter()
        .map(|r| {
            let ok = r.start <= r.end && r.end <= xs.len();
            f(if ok { &xs[r.clone()] } else { &[] })
        })
        .collect()
}

/// Softmax statistics of a row in f64: `(max, Σ exp(xᵢ − max))`, with the device's conventions: empty gives
/// `(−∞, 0)`, a NaN gives `(NaN, NaN)`, and an element equal to the max counts exactly 1 (so a row of −∞
/// gives `(−∞, len)`).
pub fn softmax_stats<T: RefElement>(xs: &[T]) -> (f64, f64) {
    if xs.iter().any(|x| x.is_nan()) {
        return (f64::NAN, f64::NAN);
    }
    let m = xs
        .iter()
        .map(|x| x.to_f64())
        .fold(f64::NEG_INFINITY, f64::max);
    let s = xs
        .iter()
        .map(|x| x.to_f64())
        .map(|x| if x == m { 1.0 } else { (x - m).exp() })
        .sum();
    (m, s)
}

/// Histogram of `samples` in `bins` evenly spaced bins over `[lower, upper)`, each sample binned in f32 by
/// [`EvenBins::bin`](crate::EvenBins::bin), the formula the device uses; NaN, ±∞ and out-of-range samples are
/// dropped. Errors as [`EvenBins::new`](crate::EvenBins::new) for bad arguments.
pub fn histogram_even<T: crate::HistogramSample>(
    samples: &[T],
    bins: usize,
    lower: f32,
    upper: f32,
) -> crate::Result<Vec<u64>> {
    // The arguments are checked as the device's are; the bins are computed here from CUB's formula
    // (`ScaleTransform`: `(x - lower) * scale` with `scale = bins / (upper - lower)`, all in f32), written
    // out again rather than through `EvenBins::bin`, so the reference does not share the code it checks.
    crate::EvenBins::new(bins, lower, upper)?;
    let scale = bins as f32 / (upper - lower);
    let mut counts = vec![0u64; bins];
    for x in samples {
        let x = x.to_f32();
        if x >= lower && x < upper {
            let product = (x - lower) * scale;
            // Truncation toward zero; a product that rounds up to `bins` lands in the last bin.
            let b = (product.trunc() as u64).min(bins as u64 - 1);
            counts[b as usize] += 1;
        }
    }
    Ok(counts)
}

/// Histogram of byte values: 256 bins, bin `b` counts the bytes equal to `b`.
pub fn histogram_bytes(samples: &[u8]) -> Vec<u64> {
    let mut counts = vec![0u64; 256];
    for &b in samples {
        counts[b as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_inputs() {
        assert_eq!(sum_f64::<f32>(&[]), 0.0);
        assert_eq!(max::<f32>(&[]), None);
        assert_eq!(argmin::<f64>(&[]), None);
    }

    #[test]
    fn ties_go_to_the_first_index() {
        assert_eq!(argmax(&[1.0f32, 3.0, 3.0, 2.0]), Some((1, 3.0)));
        assert_eq!(argmin(&[5.0f32, 0.5, 9.0, 0.5]), Some((1, 0.5)));
    }

    #[test]
    fn nan_wins_and_the_first_nan_is_reported() {
        let xs = [1.0f32, f32::NAN, f32::INFINITY, f32::NAN];
        assert_eq!(argmax(&xs).map(|(i, _)| i), Some(1));
        assert_eq!(argmin(&xs).map(|(i, _)| i), Some(1));
        assert!(max(&xs).unwrap().is_nan());
        assert!(min(&[f32::NAN]).unwrap().is_nan());
    }

    #[test]
    fn signed_zeros_compare_equal() {
        assert_eq!(argmax(&[-0.0f32, 0.0]).map(|(i, _)| i), Some(0));
        assert_eq!(argmin(&[0.0f32, -0.0]).map(|(i, _)| i), Some(0));
    }

    #[test]
    fn infinities_are_ordinary_extremes() {
        let xs = [f32::NEG_INFINITY, 2.0, f32::INFINITY];
        assert_eq!(argmax(&xs), Some((2, f32::INFINITY)));
        assert_eq!(argmin(&xs), Some((0, f32::NEG_INFINITY)));
        assert_eq!(
            argmax(&[f32::NEG_INFINITY; 3]),
            Some((0, f32::NEG_INFINITY))
        );
    }

    #[test]
    fn compensated_sum_cancels_exactly() {
        assert_eq!(sum_f64(&[1.0f64, 1e100, 1.0, -1e100]), 2.0);
        assert_eq!(sum_f64(&[f64::INFINITY, 1.0]), f64::INFINITY);
        assert!(sum_f64(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
    }

    #[test]
    fn integer_sums_are_exact_and_wrap_as_the_gpu_does() {
        let xs = [i64::MAX, 1, i64::MAX];
        assert_eq!(sum_exact_i128(&xs), 2 * i64::MAX as i128 + 1);
        assert_eq!(
            sum_exact_i128(&xs) as i64,
            i64::MAX.wrapping_add(1).wrapping_add(i64::MAX)
        );
        assert_eq!(sum_exact_i128(&[u64::MAX, 2]) as u64, 1);
        assert_eq!(sum_exact_i128(&[255u8; 3]), 765);
    }

    #[test]
    fn integers_and_halves_order_like_their_values() {
        assert_eq!(argmax(&[3u8, 255, 255]), Some((1, 255)));
        assert_eq!(argmin(&[i32::MAX, i32::MIN, 0]), Some((1, i32::MIN)));
        let h = |x: f32| F16(half::f16::from_f32(x));
        let xs = [h(1.0), h(f32::NAN), h(-0.0), h(f32::NAN)];
        assert_eq!(argmax(&xs).map(|(i, _)| i), Some(1));
        assert_eq!(argmin(&[h(0.0), h(-0.0)]).map(|(i, _)| i), Some(0));
        let b = |x: f32| BF16(half::bf16::from_f32(x));
        assert_eq!(
            argmin(&[b(2.0), b(f32::NEG_INFINITY)]).map(|(i, _)| i),
            Some(1)
        );
    }

    #[test]
    fn sum_is_exact_in_f64_for_f32_inputs() {
        let xs: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
        assert_eq!(sum_f64(&xs), 249750.0);
        assert_eq!(abs_sum_f64(&[-1.0f32, 2.0]), 3.0);
    }

    #[test]
    fn histogram_edges_are_half_open() {
        let (lo, hi) = (-1.0f32, 3.0f32);
        let below_upper = f32::from_bits(hi.to_bits() - 1);
        let xs = [lo, hi, below_upper, 0.0, 0.999_999_9, 1.0, 2.5];
        // Bins of width 1: [-1, 0) [0, 1) [1, 2) [2, 3).
        assert_eq!(histogram_even(&xs, 4, lo, hi).unwrap(), [1, 2, 1, 2]);
        assert_eq!(
            histogram_even(&[lo], 4, lo, hi).unwrap()[0],
            1,
            "lower is bin 0"
        );
        assert_eq!(
            histogram_even(&[hi], 4, lo, hi).unwrap(),
            [0; 4],
            "upper is dropped"
        );
        assert_eq!(
            histogram_even(&[below_upper], 4, lo, hi).unwrap()[3],
            1,
            "just below upper: last bin"
        );
    }

    #[test]
    fn histogram_drops_nan_infinities_and_outliers() {
        let xs = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.5,
            1.5,
            0.25,
            -f32::NAN,
        ];
        assert_eq!(histogram_even(&xs, 2, 0.0, 1.0).unwrap(), [1, 0]);
    }

    #[test]
    fn histogram_clamps_a_product_that_rounds_up_to_bins() {
        // Just below 0.2, (x + 0.7) · (10 / 0.9) rounds to exactly 10.0 in f32: the sample is in range, so it
        // goes to the last bin (CUB's formula would index bin 10).
        let (lo, hi) = (-0.7f32, 0.2f32);
        let x = f32::from_bits(hi.to_bits() - 1);
        let even = crate::EvenBins::new(10, lo, hi).unwrap();
        assert_eq!((x - lo) * even.scale(), 10.0);
        assert_eq!(even.bin(x), Some(9));
        assert_eq!(histogram_even(&[x], 10, lo, hi).unwrap()[9], 1);
    }

    #[test]
    fn histogram_of_16_bit_samples_bins_their_f32_value() {
        use crate::{BF16, F16};
        let h = [
            half::f16::from_f32(0.5),
            half::f16::NAN,
            half::f16::from_f32(0.25),
        ];
        assert_eq!(
            histogram_even(F16::from_halves(&h), 4, 0.0, 1.0).unwrap(),
            [0, 1, 1, 0]
        );
        let b = [
            BF16(half::bf16::from_f32(-0.75)),
            BF16(half::bf16::INFINITY),
        ];
        assert_eq!(histogram_even(&b, 2, -1.0, 1.0).unwrap(), [1, 0]);
    }

    #[test]
    fn histogram_rejects_bad_arguments() {
        assert!(histogram_even(&[0.5f32], 0, 0.0, 1.0).is_err());
        assert!(histogram_even(&[0.5f32], 2, 1.0, 0.0).is_err());
        assert!(histogram_even(&[0.5f32], 2, 0.0, f32::INFINITY).is_err());
    }

    #[test]
    fn segmented_references_follow_the_ranges() {
        let xs = [1.0f32, 5.0, 2.0, 7.0, 7.0, -1.0];
        let rows = row_ranges(2, 2, 3);
        assert_eq!(rows, [0..2, 3..5]);
        assert_eq!(segmented(&xs, &rows, sum_f64), [6.0, 14.0]);
        assert_eq!(
            segmented(&xs, &rows, argmax),
            [Some((1, 5.0)), Some((0, 7.0))]
        );
        let ragged = offset_ranges(&[0, 3, 3, 6]);
        assert_eq!(ragged, [0..3, 3..3, 3..6]);
        assert_eq!(segmented(&xs, &ragged, max), [Some(5.0), None, Some(7.0)]);
        #[allow(clippy::reversed_empty_ranges)]
        let bad = [2..1, 4..9];
        assert_eq!(segmented(&xs, &bad, |s| s.len()), [0, 0]);
    }

    #[test]
    fn softmax_statistics_and_their_special_rows() {
        let (m, s) = softmax_stats(&[0.0f32, 0.0, 2.0f32.ln()]);
        assert_eq!(m, 2.0f32.ln() as f64);
        assert!((s - 2.0).abs() < 1e-7);
        assert_eq!(softmax_stats::<f32>(&[]), (f64::NEG_INFINITY, 0.0));
        assert_eq!(
            softmax_stats(&[f32::NEG_INFINITY; 3]),
            (f64::NEG_INFINITY, 3.0)
        );
        assert_eq!(
            softmax_stats(&[f32::INFINITY, 1.0, f32::INFINITY]),
            (f64::INFINITY, 2.0)
        );
        let (m, s) = softmax_stats(&[1.0f32, f32::NAN]);
        assert!(m.is_nan() && s.is_nan());
    }

    #[test]
    fn byte_histogram_counts_each_value() {
        let h = histogram_bytes(&[0, 255, 7, 7]);
        assert_eq!((h[0], h[7], h[255], h.iter().sum::<u64>()), (1, 2, 1, 4));
    }
}
