//! Lane-to-lane moves: the four `shfl.sync` instructions on one 32-bit word, and [`Shuffle`], which lets any
//! accumulator (a float, a 64-bit integer, a value–index pair) travel as a sequence of words. It sits below
//! both the operators ([`crate::op`]), whose accumulators implement it, and the warp and tile collectives
//! ([`crate::warp`], [`crate::tile`]) that move them.
use core::arch::asm;

macro_rules! shfl_u32 {
    ($(#[$doc:meta])* $name:ident, $mode:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every lane named in `mask` must execute this same call (converged), and `mask` must include the
        /// calling lane. `c` is PTX's clamp/segment operand: `((32 - width) << 8) | clamp`.
        #[inline(always)]
        pub unsafe fn $name(v: u32, b: u32, c: u32, mask: u32) -> u32 {
            let r: u32;
            // SAFETY: the caller upholds the convergence and mask requirements.
            unsafe {
                asm!(concat!("shfl.sync.", $mode, ".b32 {0}, {1}, {2}, {3}, {4};"),
                     out(reg32) r, in(reg32) v, in(reg32) b, in(reg32) c, in(reg32) mask,
                     options(nostack, nomem))
            };
            r
        }
    };
}
shfl_u32!(
    /// `__shfl_down_sync` on one word: lane `i` reads lane `i + b` of its segment (its own past the end).
    shfl_down_u32,
    "down"
);
shfl_u32!(
    /// `__shfl_up_sync` on one word: lane `i` reads lane `i - b` of its segment (its own below 0).
    shfl_up_u32,
    "up"
);
shfl_u32!(
    /// `__shfl_xor_sync` on one word: lane `i` reads lane `i ^ b`.
    shfl_xor_u32,
    "bfly"
);
shfl_u32!(
    /// `__shfl_sync` on one word: every lane reads lane `b` of its segment.
    shfl_idx_u32,
    "idx"
);

/// The `c` operand of a down/xor/idx shuffle over segments of `width` lanes.
#[inline(always)]
pub const fn clamp_for(width: u32) -> u32 {
    ((32 - width) << 8) | 0x1f
}

/// The `c` operand of an up shuffle over segments of `width` lanes.
#[inline(always)]
pub const fn clamp_up_for(width: u32) -> u32 {
    (32 - width) << 8
}

/// A value that can cross lanes word by word.
///
/// # Safety
/// `map_words` must rebuild `Self` from the images of exactly the words it is made of, so that the identity
/// map gives back the same value.
pub unsafe trait Shuffle: Copy {
    /// Applies `f` to each 32-bit word of `self` and reassembles the result.
    fn map_words(self, f: impl FnMut(u32) -> u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty),*) => {$(
        // SAFETY: a 32-bit value is one word.
        unsafe impl Shuffle for $t {
            #[inline(always)]
            fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
                <$t>::from_ne_bytes(f(u32::from_ne_bytes(self.to_ne_bytes())).to_ne_bytes())
            }
        }
    )*};
}
macro_rules! shuffle_64 {
    ($($t:ty),*) => {$(
        // SAFETY: a 64-bit value is two words, low then high.
        unsafe impl Shuffle for $t {
            #[inline(always)]
            fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
                let bits = u64::from_ne_bytes(self.to_ne_bytes());
                let lo = f(bits as u32) as u64;
                let hi = f((bits >> 32) as u32) as u64;
                <$t>::from_ne_bytes((lo | (hi << 32)).to_ne_bytes())
            }
        }
    )*};
}
shuffle_32!(u32, i32, f32);
shuffle_64!(u64, i64, f64);

// SAFETY: a byte travels in the low bits of one word.
unsafe impl Shuffle for u8 {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        f(self as u32) as u8
    }
}

/// `__shfl_down_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_down_u32`].
#[inline(always)]
pub unsafe fn shfl_down<T: Shuffle>(v: T, delta: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_down_u32(w, delta, clamp_for(width), mask) })
}

/// `__shfl_up_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_up_u32`].
#[inline(always)]
pub unsafe fn shfl_up<T: Shuffle>(v: T, delta: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_up_u32(w, delta, clamp_up_for(width), mask) })
}

/// `__shfl_xor_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_xor_u32`].
#[inline(always)]
pub unsafe fn shfl_xor<T: Shuffle>(v: T, lane_mask: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_xor_u32(w, lane_mask, clamp_for(width), mask) })
}

/// `__shfl_sync` for any [`Shuffle`] value: read lane `src` of this segment of `width` lanes.
///
/// # Safety
/// As [`shfl_idx_u32`].
#[inline(always)]
pub unsafe fn shfl_idx<T: Shuffle>(v: T, src: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_idx_u32(w, src, clamp_for(width), mask) })
}
