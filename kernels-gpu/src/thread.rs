//! One thread's share of a device-wide pass: a grid-stride loop over 16-byte vectors, with the unaligned
//! head and the ragged tail handled element by element, so any sub-slice offset and any length is correct.
use crate::arch::{self, Vec16};
use crate::half::{BF16, F16};
use crate::op::DeviceOp;

/// Element types that come in 16-byte vectors.
pub trait Vectorize: Copy {
    /// Elements per 16 bytes.
    const LANES: usize;
    /// `[Self; LANES]`, which [`Vec16`] aligns to 16 bytes.
    type Array: Copy;
    /// Lane `i` of `v`, `i < LANES`.
    fn lane(v: &Vec16<Self::Array>, i: usize) -> Self;
    /// The `LANES` elements at `p`, by scalar loads: what a 16-byte load would give, at any address
    /// aligned to the element.
    ///
    /// # Safety
    /// `p` must be valid for reads of `LANES` elements and aligned to the element.
    unsafe fn gather(p: *const Self) -> Vec16<Self::Array>;
}

macro_rules! vectorize {
    ($($t:ty),*) => {$(
        impl Vectorize for $t {
            const LANES: usize = 16 / size_of::<$t>();
            type Array = [$t; 16 / size_of::<$t>()];
            #[inline(always)]
            fn lane(v: &Vec16<Self::Array>, i: usize) -> Self { v.0[i] }
            #[inline(always)]
            unsafe fn gather(p: *const Self) -> Vec16<Self::Array> {
                // SAFETY: i < LANES, which the caller makes valid.
                Vec16(core::array::from_fn(|i| unsafe { p.add(i).read() }))
            }
        }
    )*};
}
vectorize!(f32, f64, F16, BF16, u8, u32, i32, u64, i64);

/// Vectors each thread loads before it combines any: enough bytes in flight per thread to cover latency.
/// Runs of `UNROLL * LANES` elements go to [`DeviceOp::fold_run`], which takes at most 64.
pub use reduce_contract::layout::UNROLL;

/// Reduces this thread's grid-stride share of `input[0..n]`; thread `t` of `threads` takes vectors
/// `t, t + threads, …`. Indices given to [`DeviceOp::lift`] are positions in `input`.
///
/// The partition depends only on `n`, `threads` and the address of `input`, so a sum is bitwise repeatable.
///
/// # Safety
/// `input` must be valid for reads of `n` elements, aligned to its element, and unmodified during the kernel.
#[inline(always)]
pub unsafe fn reduce<Op: DeviceOp>(input: *const Op::In, n: u64, t: u64, threads: u64) -> Op::Acc
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
    type Group<T> = [core::mem::MaybeUninit<Vec16<<T as Vectorize>::Array>>; UNROLL as usize];
    // The UNROLL vectors `v, v + threads, …`, all loads issued before any is used.
    let load = |v: u64| {
        let mut x: Group<Op::In> = [const { core::mem::MaybeUninit::uninit() }; UNROLL as usize];
        unroll!(K in [0, 1, 2, 3] {
            // SAFETY: the callers load only groups with v + (UNROLL − 1) · threads < vectors, so the whole
            // vector lies inside input[head..tail].
            x[K].write(unsafe { arch::load_vec16(body.add((v + K as u64 * threads) as usize)) });
        });
        x
    };
    // One run of `UNROLL * LANES` elements: element i is lane i % LANES of vector i / LANES; indices grow
    // with i.
    let element = |x: &Group<Op::In>, v: u64, i: usize| {
        let (k, j) = (i / lanes as usize, i % lanes as usize);
        // SAFETY: `load` wrote every vector of the group.
        let vec = unsafe { x[k].assume_init_ref() };
        (
            <Op::In as Vectorize>::lane(vec, j),
            first(v + k as u64 * threads) + j as u64,
        )
    };
    let run = UNROLL as usize * lanes as usize;
    let fold = |acc: Op::Acc, x: &Group<Op::In>, v: u64| {
        Op::fold_run_deferred(acc, run, |i| element(x, v, i))
    };
    let whole = |v: u64| v + (UNROLL - 1) * threads < vectors;
    let mut v = t;
    if Op::DEFERS && whole(v) {
        // The first run at once: most threads of a small input have no other, and what it deferred would
        // cost them a second trip to memory. Outside the loop, so the loop holds only the deferring fold.
        let x = load(v);
        acc = Op::fold_run(acc, run, |i| element(&x, v, i));
        v += UNROLL * threads;
    }
    if Op::DEEP_FOLD {
        // Operators bound by issue slots fold long enough that the loads of one group alone leave DRAM
        // idle while they compute: the next group is loaded into registers before the current one is
        // folded. The same runs in the same order, so the same bits. (Asking L2 for the next group with
        // `prefetch.global.L2` instead, which costs no registers, measured 10–15 % slower on every
        // statistic: one prefetch per lane and vector crowds the load path.)
        if whole(v) {
            let mut x = load(v);
            loop {
                let next = v + UNROLL * threads;
                let more = whole(next);
                let y = if more { load(next) } else { x };
                acc = fold(acc, &x, v);
                v = next;
                if !more {
                    break;
                }
                x = y;
            }
        }
    } else {
        while whole(v) {
            let x = load(v);
            acc = fold(acc, &x, v);
            v += UNROLL * threads;
        }
    }
    // What the runs left for later (an operator's new extreme's index), once per thread: the run whose
    // element 0 has index `first` is the group of vectors `(first − head) / LANES + k · threads`, which
    // `whole` admitted when it was folded.
    // (Only an operator that defers has anything to revisit: the others keep no dead branch in the kernel.)
    if Op::DEFERS {
        acc = Op::revisit(acc, run, |first| {
            let w = (first - head) / lanes;
            let x = load(w);
            move |i| element(&x, w, i)
        });
    }
    while v < vectors {
        // SAFETY: v < vectors.
        let x = unsafe { arch::load_vec16(body.add(v as usize)) };
        acc = Op::fold_run(acc, lanes as usize, |j| {
            (<Op::In as Vectorize>::lane(&x, j), first(v) + j as u64)
        });
        v += threads;
    }
    if tail + t < n {
        // SAFETY: tail + t < n.
        acc = Op::combine(
            acc,
            Op::lift(unsafe { input.add((tail + t) as usize).read() }, tail + t),
        );
    }
    acc
}

/// Calls `f(x, i, valid)` for each element `x = input[i]` of this thread's grid-stride share of
/// `input[0..n]`, with the same partition as [`reduce`]: the unaligned head, 16-byte vectors
/// `t, t + threads, …`, then the tail. (A caller that ignores `i` pays nothing for it.)
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
    mut f: impl FnMut(T, u64, bool),
) {
    let lanes = T::LANES as u64;
    let size = size_of::<T>() as u64;
    let misalign = (input as u64 & 15) / size;
    let head = ((lanes - misalign) % lanes).min(n);
    let vectors = (n - head) / lanes;
    let tail = head + vectors * lanes;
    let element = |i: u64, ok: bool| {
        // SAFETY: read only when `ok`, which the callers below set only for i < n.
        (
            if ok {
                unsafe { input.add(i as usize).read() }
            } else {
                T::default()
            },
            ok,
        )
    };

    let (x, ok) = element(t, t < head);
    f(x, t, ok);
    // SAFETY: `input + head` is 16-byte aligned (head skips the misaligned elements) and in bounds.
    let body = unsafe { input.add(head as usize) } as *const Vec16<T::Array>;
    // `threads % 32 == 0`, so `v & 31` stays the lane and `v | 31` is the warp's last lane's vector: a trip's
    // bounds test on it gives the same answer in every lane.
    let mut v = t;
    while (v | 31) + (UNROLL - 1) * threads < vectors {
        // All loads first: UNROLL independent 16-byte loads in flight.
        let mut x =
            [const { core::mem::MaybeUninit::<Vec16<T::Array>>::uninit() }; UNROLL as usize];
        unroll!(K in [0, 1, 2, 3] {
            // SAFETY: v + K * threads <= (v | 31) + K * threads < vectors.
            x[K].write(unsafe { arch::load_vec16(body.add((v + K as u64 * threads) as usize)) });
        });
        unroll!(K in [0, 1, 2, 3] {
            // SAFETY: written just above.
            let vec = unsafe { x[K].assume_init_ref() };
            let at = head + (v + K as u64 * threads) * lanes;
            each_index!(I < T::LANES, { f(T::lane(vec, I), at + I as u64, true) });
        });
        v += UNROLL * threads;
    }
    // Ragged trips, while the warp's first lane has a vector: lanes past the end reload the last vector
    // (so no branch around the load) and pass it as padding.
    while v & !31 < vectors {
        let ok = v < vectors;
        // SAFETY: the loop condition gives vectors >= 1, and min(v, vectors - 1) < vectors.
        let vec = unsafe { arch::load_vec16(body.add(v.min(vectors - 1) as usize)) };
        let at = head + v * lanes;
        each_index!(I < T::LANES, { f(T::lane(&vec, I), at + I as u64, ok) });
        v += threads;
    }
    let (x, ok) = element(tail + t, tail + t < n);
    f(x, tail + t, ok);
}
