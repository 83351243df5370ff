//! Top-k: the order-preserving keys its radix select runs on, the state its passes share, and the rule
//! that makes its output unique.
//!
//! # Which k elements, in which order
//! Every element gets a *composite key*: its order-preserving value key ([`TopKElement::key`], turned
//! around for `min_k`) above the bits of its inverted index. All composite keys differ, so "the k largest
//! composite keys" is one set with one order, whatever the ties: among equal values the smaller index wins
//! and comes first. NaN (any payload) gets the greatest value key for `max_k` and for `min_k` alike, so it
//! counts as above +∞ for `max_k` and below −∞ for `min_k` (torch's rule); −0.0 and +0.0 get the same key.
//!
//! # The passes (device-wide)
//! A most-significant-digit radix select over the composite keys, a byte per pass: `histogram` counts the
//! next byte of the keys that match the prefix found so far, `pick` finds the byte at which the k-th
//! largest lies and extends the prefix. Keys wider than the value's bytes add the index's bytes
//! ([`index_bytes`]) only while the boundary falls among equal values: once the bucket at the boundary
//! holds exactly the number still wanted, the select is done (`done`), and later passes return at once.
//! `filter` then copies every element whose composite key is at least the prefix, exactly k of them, and
//! the sort orders them (one block for at most [`SORT_TILE`], block-sorted runs merged beyond that).
use crate::op::Element;

/// Bits of a radix digit: one byte per pass.
pub const DIGIT_BITS: u32 = 8;
/// Buckets per pass.
pub const BUCKETS: usize = 1 << DIGIT_BITS;
/// Threads of the top-k kernels' blocks.
pub const THREADS: u32 = 256;
/// Pairs each thread sorts in the block sort.
pub const SORT_ITEMS: u32 = 8;
/// Candidates one block sorts in shared memory: a result of at most this many is sorted by one block;
/// longer ones are cut into runs of this length and merged.
pub const SORT_TILE: u64 = (THREADS * SORT_ITEMS) as u64;
/// Outputs each thread of a merge pass writes.
pub const MERGE_ITEMS: u64 = 8;

/// Elements top-k selects among: the ordered element types, each with an order-preserving key.
pub trait TopKElement: Element {
    /// Bytes of [`key`](Self::key) (the passes over the value).
    const KEY_BYTES: u32;
    /// An unsigned key with the element's order: `a < b` exactly when `key(a) < key(b)`, both zeros
    /// alike. Not called on a NaN.
    fn key(self) -> u64;
    /// Whether this is a NaN (never for integers).
    fn is_nan(self) -> bool;
}

/// All ones in the low `bytes` bytes.
#[inline(always)]
pub const fn low_bytes(bytes: u32) -> u64 {
    if bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * bytes)) - 1
    }
}

/// The value key of `x` for `max_k` (`largest`) or `min_k`: greater is better. NaN is the greatest key
/// of both.
#[inline(always)]
pub fn value_key<T: TopKElement>(x: T, largest: bool) -> u64 {
    let mask = low_bytes(T::KEY_BYTES);
    if x.is_nan() {
        mask
    } else if largest {
        x.key()
    } else {
        !x.key() & mask
    }
}

/// The bytes of the index part of the composite keys of `n` elements: enough for `n − 1`, at least one.
#[inline(always)]
pub const fn index_bytes(n: u64) -> u32 {
    let bits = 64 - n.saturating_sub(1).leading_zeros();
    let bytes = bits.div_ceil(8);
    if bytes == 0 { 1 } else { bytes }
}

/// The composite key of the element with value key `key` at `index`: the value key above the inverted
/// index, so that of two equal values the smaller index has the greater key.
#[inline(always)]
pub fn composite(key: u64, index: u64, index_bytes: u32) -> u128 {
    let mask = low_bytes(index_bytes);
    ((key as u128) << (8 * index_bytes)) | (!index & mask) as u128
}

/// Whether the pair `(a_key, a_index)` comes before `(b_key, b_index)` in the output: the greater value key
/// first, the smaller index among equal keys.
#[inline(always)]
pub fn before(a_key: u64, a_index: u64, b_key: u64, b_index: u64) -> bool {
    a_key > b_key || (a_key == b_key && a_index < b_index)
}

/// What the passes share, in device memory, zeroed before the first pass.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct State {
    /// The composite-key prefix found so far (low then high 64 bits); once `done`, the threshold: the k
    /// selected elements are those whose composite key is at least this.
    pub prefix: [u64; 2],
    /// How many of the k are still to be found among the keys that match the prefix.
    pub remaining: u64,
    /// Nonzero once the prefix decides the set (later passes return at once).
    pub done: u64,
    /// The filter's output counter.
    pub count: u64,
    /// The current pass's bucket counts.
    pub histogram: [u64; BUCKETS],
}

impl State {
    /// The prefix as one number.
    #[inline(always)]
    pub fn threshold(&self) -> u128 {
        (self.prefix[1] as u128) << 64 | self.prefix[0] as u128
    }
}

/// The radix digit (byte) of composite key `c` at pass `pass` of `passes`, and whether `c` matches
/// `prefix` in the bytes above it (the keys this pass counts).
#[inline(always)]
pub fn digit(c: u128, prefix: u128, pass: u32, passes: u32) -> (usize, bool) {
    let shift = 8 * (passes - 1 - pass);
    let above = shift + DIGIT_BITS;
    let matches = above >= 128 || (c >> above) == (prefix >> above);
    (((c >> shift) & 0xff) as usize, matches)
}

macro_rules! float_key {
    ($($t:ty: $bits:ty, $sign:expr, $bytes:expr);*) => {$(
        impl TopKElement for $t {
            const KEY_BYTES: u32 = $bytes;
            #[inline(always)]
            fn key(self) -> u64 {
                float_bits_key(self.to_bits() as u64, $sign)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                self != self
            }
        }
    )*};
}

/// The order-preserving key of a float's `bits` whose sign bit is `sign`: negative numbers flipped
/// whole (more negative, smaller key), positive ones with the sign set; −0.0 as +0.0.
#[inline(always)]
pub const fn float_bits_key(bits: u64, sign: u64) -> u64 {
    let bits = if bits == sign { 0 } else { bits };
    if bits & sign != 0 {
        !bits & (sign | (sign - 1))
    } else {
        bits | sign
    }
}

float_key!(f32: u32, 1 << 31, 4; f64: u64, 1 << 63, 8);

macro_rules! int_key {
    ($($t:ty: $bytes:expr, $flip:expr);*) => {$(
        impl TopKElement for $t {
            const KEY_BYTES: u32 = $bytes;
            #[inline(always)]
            fn key(self) -> u64 {
                (self as u64 ^ $flip) & low_bytes($bytes)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
        }
    )*};
}

int_key!(i32: 4, 1 << 31; u32: 4, 0; i64: 8, 1 << 63; u64: 8, 0; u8: 1, 0);

/// Implements [`TopKElement`] for each side's 16-bit floats, from their bits: `F16: |x| x.0, 0x7c00;`
/// (the bits, and the all-ones exponent).
#[macro_export]
macro_rules! topk_halves {
    ($($t:ident: |$x:ident| $bits:expr, $exponent:literal;)*) => {$(
        impl $crate::topk::TopKElement for $t {
            const KEY_BYTES: u32 = 2;
            #[inline(always)]
            fn key(self) -> u64 {
                let $x = self;
                $crate::topk::float_bits_key($bits as u64, 0x8000)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                let $x = self;
                ($bits & 0x7fff) > $exponent
            }
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_the_order_and_merge_the_zeros() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-40,
            -0.0,
            0.0,
            1e-40,
            2.0,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(w[0].key() <= w[1].key(), "{w:?}");
            assert_eq!(w[0].key() == w[1].key(), w[0] == w[1], "{w:?}");
        }
        assert!(value_key(f32::NAN, true) > value_key(f32::INFINITY, true));
        assert!(value_key(-f32::NAN, false) > value_key(f32::NEG_INFINITY, false));
        assert_eq!(value_key(f64::MAX, false), !f64::MAX.key());
        let ints = [i32::MIN, -1, 0, 1, i32::MAX];
        for w in ints.windows(2) {
            assert!(w[0].key() < w[1].key());
        }
        assert!(value_key(i64::MIN, false) > value_key(i64::MAX, false));
        assert_eq!(u8::MAX.key(), 255);
    }

    #[test]
    fn composite_keys_prefer_the_smaller_index() {
        assert_eq!(index_bytes(0), 1);
        assert_eq!(index_bytes(256), 1);
        assert_eq!(index_bytes(257), 2);
        assert_eq!(index_bytes(1 << 32), 4);
        assert_eq!(index_bytes((1 << 32) + 1), 5);
        let b = index_bytes(1000);
        assert!(composite(7, 3, b) > composite(7, 4, b));
        assert!(composite(8, 999, b) > composite(7, 0, b));
        let (d, m) = digit(composite(0x12, 0x0001, 2), 0, 0, 3);
        assert_eq!((d, m), (0x12, true));
        let c = composite(0x12, 0x0001, 2);
        assert_eq!(digit(c, 0x12 << 16, 1, 3), (0xff, true));
        assert!(!digit(c, 0x13 << 16, 1, 3).1);
    }
}
