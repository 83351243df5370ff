//! CPU reference implementations with the same documented semantics as the GPU reductions. Sums are
//! computed in f64, so they also serve as the accuracy reference for the f32 kernels.

/// Element types the references accept.
pub trait RefElement: Copy + PartialOrd {
    /// Whether this is a NaN.
    fn is_nan(self) -> bool;
    /// Exact widening to f64.
    fn to_f64(self) -> f64;
}

impl RefElement for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl RefElement for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// Sum in f64, summing left to right; 0 for an empty slice.
pub fn sum_f64<T: RefElement>(xs: &[T]) -> f64 {
    xs.iter().map(|x| x.to_f64()).sum()
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

/// Histogram of `samples` in `bins` evenly spaced bins over `[lower, upper)`, each sample binned in f32 by
/// [`EvenBins::bin`](crate::EvenBins::bin), the formula the device uses; NaN, ±∞ and out-of-range samples are
/// dropped. Errors as [`EvenBins::new`](crate::EvenBins::new) for bad arguments.
pub fn histogram_even<T: crate::HistogramSample>(
    samples: &[T],
    bins: usize,
    lower: f32,
    upper: f32,
) -> crate::Result<Vec<u64>> {
    let even = crate::EvenBins::new(bins, lower, upper)?;
    let mut counts = vec![0u64; bins];
    for x in samples {
        if let Some(b) = even.bin(x.to_f32()) {
            counts[b] += 1;
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
    fn byte_histogram_counts_each_value() {
        let h = histogram_bytes(&[0, 255, 7, 7]);
        assert_eq!((h[0], h[7], h[255], h.iter().sum::<u64>()), (1, 2, 1, 4));
    }
}
