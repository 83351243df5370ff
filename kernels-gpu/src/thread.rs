//! One thread's share of a device-wide pass: a grid-stride loop over 16-byte vectors, with the unaligned
//! head and the ragged tail handled element by element, so any sub-slice offset and any length is correct.
use crate::arch::{self, Vec16};
use crate::op::ReduceOp;

/// Element types that come in 16-byte vectors.
pub trait Vectorize: Copy {
    /// Elements per 16 bytes.
    const LANES: usize;
    /// `[Self; LANES]`, which [`Vec16`] aligns to 16 bytes.
    type Array: Copy;
    /// Lane `i` of `v`, `i < LANES`.
    fn lane(v: &Vec16<Self::Array>, i: usize) -> Self;
}

macro_rules! vectorize {
    ($($t:ty),*) => {$(
        impl Vectorize for $t {
            const LANES: usize = 16 / size_of::<$t>();
            type Array = [$t; 16 / size_of::<$t>()];
            #[inline(always)]
            fn lane(v: &Vec16<Self::Array>, i: usize) -> Self { v.0[i] }
        }
    )*};
}
vectorize!(f32, f64, u8, u32, i32, u64, i64, crate::half::F16, crate::half::BF16);

/// Expands `$body` once for each `$i` in `0..$n` (`$n` a constant at most 16), `$i` being a literal each time,
/// so that loops over vector lanes never index a register array with a variable (which would put the array
/// in local memory): LLVM does not fully unroll the 8- and 16-lane loops of 16- and 8-bit elements.
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        unroll!(@ $i, $n, $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $i:ident, $n:expr, $body:block; $($k:literal)*) => {{
        const { assert!($n <= 16) };
        $(if $k < $n {
            let $i: usize = $k;
            $body
        })*
    }};
}

/// Vectors each thread loads before it combines any: enough bytes in flight per thread to cover latency.
/// The combine below is written out for four.
pub const UNROLL: u64 = 4;

/// Reduces the vector that starts at element `first` (its lanes are `first..first + LANES`).
#[inline(always)]
fn reduce_vector<Op: ReduceOp>(v: &Vec16<<Op::In as Vectorize>::Array>, first: u64) -> Op::Acc
where
    Op::In: Vectorize,
{
    // Pairwise tree over the lanes, so the adds of one vector do not form one long dependent chain.
    let lanes = <Op::In as Vectorize>::LANES;
    let mut acc: [Op::Acc; 16] = [Op::identity(); 16];
    let mut i = 0;
    while i < lanes {
        acc[i] = Op::lift(<Op::In as Vectorize>::lane(v, i), first + i as u64);
        i += 1;
    }
    let mut width = lanes;
    while width > 1 {
        width /= 2;
        let mut j = 0;
        while j < width {
            acc[j] = Op::combine(acc[j], acc[j + width]);
            j += 1;
        }
    }
    acc[0]
}

/// Reduces this thread's grid-stride share of `input[0..n]`; thread `t` of `threads` takes vectors
/// `t, t + threads, …`. Indices given to [`ReduceOp::lift`] are positions in `input`.
///
/// The partition depends only on `n`, `threads` and the address of `input`, so a sum is bitwise repeatable.
///
/// # Safety
/// `input` must be valid for reads of `n` elements, aligned to its element, and unmodified during the kernel.
#[inline(always)]
pub unsafe fn reduce<Op: ReduceOp>(input: *const Op::In, n: u64, t: u64, threads: u64) -> Op::Acc
where
    Op::In: Vectorize,
{
    let lanes = <Op::In as Vectorize>::LANES as u64;
    let size = size_of::<Op::In>() as u64;
    // Elements before the first 16-byte boundary, then whole vectors, then the tail.
    let misalign = (input as u64 & 15) / size;
    let head = ((lanes - misalign) % lanes).min(n);
    let vectors = (n - head) / lanes;
    let tail = head + vectors * lanes;

    let mut acc = Op::identity();
    if t < head {
        // SAFETY: t < head <= n.
        acc = Op::combine(acc, Op::lift(unsafe { input.add(t as usize).read() }, t));
    }
    // SAFETY: `input + head` is 16-byte aligned (head skips the misaligned elements) and in bounds.
    let body = unsafe { input.add(head as usize) } as *const Vec16<<Op::In as Vectorize>::Array>;
    let first = |v: u64| head + v * lanes;
    let mut v = t;
    while v + (UNROLL - 1) * threads < vectors {
        // All loads first, then the arithmetic: UNROLL independent 16-byte loads in flight.
        let mut x = [const { core::mem::MaybeUninit::<Vec16<<Op::In as Vectorize>::Array>>::uninit() }; UNROLL as usize];
        let mut k = 0;
        while k < UNROLL as usize {
            // SAFETY: v + k * threads < vectors, so the whole vector lies inside input[head..tail].
            x[k].write(unsafe { arch::load_vec16(body.add((v + k as u64 * threads) as usize)) });
            k += 1;
        }
        let mut part = [Op::identity(); UNROLL as usize];
        k = 0;
        while k < UNROLL as usize {
            // SAFETY: written in the loop above.
            let vec = unsafe { x[k].assume_init_ref() };
            part[k] = reduce_vector::<Op>(vec, first(v + k as u64 * threads));
            k += 1;
        }
        acc = Op::combine(acc, Op::combine(Op::combine(part[0], part[1]), Op::combine(part[2], part[3])));
        v += UNROLL * threads;
    }
    while v < vectors {
        // SAFETY: v < vectors.
        let x = unsafe { arch::load_vec16(body.add(v as usize)) };
        acc = Op::combine(acc, reduce_vector::<Op>(&x, first(v)));
        v += threads;
    }
    if tail + t < n {
        // SAFETY: tail + t < n.
        acc = Op::combine(acc, Op::lift(unsafe { input.add((tail + t) as usize).read() }, tail + t));
    }
    acc
}

/// Calls `f(x, valid)` for each element `x` of this thread's grid-stride share of `input[0..n]`, with the
/// same partition as [`reduce`]: the unaligned head, 16-byte vectors `t, t + threads, …`, then the tail.
///
/// The calls are **warp-uniform**: every lane of a warp makes the same number of calls, in step, and lanes
/// with nothing to contribute pass `valid == false` (with an arbitrary `x`, to be ignored). So `f` may use
/// warp collectives over the full mask (e.g. [`crate::warp::match_any`]), which an `if` around each call would
/// forbid.
///
/// # Safety
/// `input` must be valid for reads of `n` elements, aligned to its element, and unmodified during the kernel.
/// `threads` must be a multiple of 32 and the lanes of a warp must have consecutive `t`, lane 0's a multiple
/// of 32 (true for `global_thread_idx`/`grid_threads` with `blockDim.x % 32 == 0`).
#[inline(always)]
pub unsafe fn for_each<T: Vectorize + Default>(
    input: *const T,
    n: u64,
    t: u64,
    threads: u64,
    mut f: impl FnMut(T, bool),
) {
    let lanes = T::LANES as u64;
    let size = size_of::<T>() as u64;
    let misalign = (input as u64 & 15) / size;
    let head = ((lanes - misalign) % lanes).min(n);
    let vectors = (n - head) / lanes;
    let tail = head + vectors * lanes;
    let element = |i: u64, ok: bool| {
        // SAFETY: read only when `ok`, which the callers below set only for i < n.
        (if ok { unsafe { input.add(i as usize).read() } } else { T::default() }, ok)
    };

    let (x, ok) = element(t, t < head);
    f(x, ok);
    // SAFETY: `input + head` is 16-byte aligned (head skips the misaligned elements) and in bounds.
    let body = unsafe { input.add(head as usize) } as *const Vec16<T::Array>;
    // `threads % 32 == 0`, so `v & 31` stays the lane and `v | 31` is the warp's last lane's vector: a trip's
    // bounds test on it gives the same answer in every lane.
    let mut v = t;
    while (v | 31) + (UNROLL - 1) * threads < vectors {
        // All loads first: UNROLL independent 16-byte loads in flight.
        let mut x = [const { core::mem::MaybeUninit::<Vec16<T::Array>>::uninit() }; UNROLL as usize];
        unroll!(k < UNROLL as usize, {
            // SAFETY: v + k * threads <= (v | 31) + k * threads < vectors.
            x[k].write(unsafe { arch::load_vec16(body.add((v + k as u64 * threads) as usize)) });
        });
        unroll!(k < UNROLL as usize, {
            // SAFETY: written just above.
            let vec = unsafe { x[k].assume_init_ref() };
            unroll!(i < T::LANES, { f(T::lane(vec, i), true) });
        });
        v += UNROLL * threads;
    }
    // Ragged trips, while the warp's first lane has a vector: lanes past the end reload the last vector
    // (so no branch around the load) and pass it as padding.
    while v & !31 < vectors {
        let ok = v < vectors;
        // SAFETY: the loop condition gives vectors >= 1, and min(v, vectors - 1) < vectors.
        let vec = unsafe { arch::load_vec16(body.add(v.min(vectors - 1) as usize)) };
        unroll!(i < T::LANES, { f(T::lane(&vec, i), ok) });
        v += threads;
    }
    let (x, ok) = element(tail + t, tail + t < n);
    f(x, ok);
}
