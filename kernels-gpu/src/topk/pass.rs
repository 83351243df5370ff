//! The passes after a [`pick`](super::pick): [`split`] and [`level`], over the input or a candidate buffer
//! ([`Pass`]).

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    BUCKETS, DIGIT_BITS, FROM_INPUT, RUNNING, State, TopKElement, composite, digit, same_above,
};

use super::buffers::{Pending, Stage, buffer, candidates, destination, warp_areas};
use super::{each_key, extremes, flush_shared, tally, top_digit, zero_shared};
use crate::arch::{self, global_thread_idx, grid_threads, lane_id};
use crate::thread::Vectorize;
use crate::warp::{self, FULL_MASK};

/// What one pass over the chosen bucket's entries shares between its elements: the chosen digit, and
/// where the pass puts what it finds (shared-memory counts, two warp stages, the least and greatest key).
struct Pass {
    index_bits: u32,
    shift: u32,
    width: u32,
    bucket: u32,
    take_all: bool,
    capture: bool,
    next_width: u32,
    count_index: bool,
    next_counts: u32,
    index_counts: u32,
    sure: Stage,
    kept: Stage,
    pending: Pending,
    lo: u64,
    hi: u64,
}

impl Pass {
    /// Reads the state as `pick` left it and zeroes the shared counts; the buffer the chosen entries go
    /// to is the other one than `source`'s.
    ///
    /// # Safety
    /// The whole block calls it; [`LEVEL_SHARED`](reduce_contract::topk::LEVEL_SHARED) bytes of dynamic
    /// shared memory; the pair and candidate buffers valid for `p.k` and `p.capacity` entries.
    #[inline(always)]
    unsafe fn new<T>(p: &TopKParams<T>) -> Pass {
        let ib = p.index_bits;
        let shift = state!(p, shift);
        // SAFETY: LEVEL_SHARED bytes of dynamic shared memory (caller): two histograms, then the stages;
        // the whole block.
        let counts = unsafe { arch::shared::<u32>() };
        unsafe { zero_shared(counts, 2 * BUCKETS) };
        // SAFETY: shared memory.
        let window = unsafe { arch::shared_window(counts) };
        let dst = destination(state!(p, source)) as usize - 1;
        // SAFETY: LEVEL_SHARED bytes (caller); the state is valid; fewer than k pairs are selected before
        // the last level, exactly k in all; at most `capacity` are buffered when `capture` (pick's rule).
        let (sure, kept, pending) = unsafe {
            let (stages, pending) = warp_areas(counts);
            (
                Stage::new(
                    stages,
                    0,
                    &raw mut (*p.state).count,
                    (p.keys, p.indices),
                    p.k,
                ),
                Stage::new(
                    stages,
                    1,
                    candidates(p.state, dst),
                    buffer(p, dst),
                    p.capacity,
                ),
                pending,
            )
        };
        Pass {
            index_bits: ib,
            shift,
            width: state!(p, width),
            bucket: state!(p, bucket),
            take_all: state!(p, take_all) != 0,
            capture: state!(p, capture) != 0,
            next_width: state!(p, next_width),
            count_index: shift > ib,
            next_counts: window,
            index_counts: window + 4 * BUCKETS as u32,
            sure,
            kept,
            pending,
            lo: u64::MAX,
            hi: 0,
        }
    }

    /// Takes one entry per lane: `d` is its digit at the chosen position, `inside` whether it is in the
    /// pass at all (valid, and in the chosen buckets of the digits above). Entries at or above the chosen
    /// bucket are set aside, and handled [`PENDING`] at a time ([`drain`](Self::drain)).
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    unsafe fn visit(&mut self, key: u64, index: u64, inside: bool, d: u32) {
        // SAFETY: the whole warp is here (caller); drained when told.
        if unsafe { self.pending.add(inside && d >= self.bucket, key, index) } {
            core::hint::cold_path();
            // SAFETY: the whole warp (the condition is the same in every lane).
            unsafe { self.drain() };
        }
    }

    /// Handles the pending entries, a lane each: selects what lies above the chosen bucket (or in it,
    /// when `take_all`); counts, folds and buffers what lies in it.
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    unsafe fn drain(&mut self) {
        let ib = self.index_bits;
        let index_width = DIGIT_BITS.min(ib);
        let (shift, width, bucket, take_all) = (self.shift, self.width, self.bucket, self.take_all);
        // Inlined by force: a closure call in the drain's loop would put the pass's state in local memory.
        let handle = #[inline(always)]
        |key, index, valid| {
            let c = composite(key, index, ib);
            let d = digit(c, shift, width);
            let select = valid && (d > bucket || (take_all && d == bucket));
            let chosen = valid && !take_all && d == bucket;
            // SAFETY: the whole warp is here (`drain` calls it so); the stages' outputs have room
            // (`new`); digits of `next_width`, `index_width` ≤ DIGIT_BITS bits index the counters.
            unsafe {
                self.sure.push(select, key, index);
                if warp::any(FULL_MASK, chosen) {
                    if chosen {
                        self.lo = self.lo.min(key);
                        self.hi = self.hi.max(key);
                    }
                    tally(
                        self.next_counts,
                        digit(c, shift - self.next_width, self.next_width),
                        chosen,
                    );
                    if self.count_index {
                        tally(
                            self.index_counts,
                            digit(c, ib - index_width, index_width),
                            chosen,
                        );
                    }
                    self.kept.push(self.capture && chosen, key, index);
                }
            }
        };
        // SAFETY: the whole warp (caller).
        unsafe { self.pending.drain(handle) };
    }

    /// Copies out the stages and adds the block's counts and extremes into the state.
    ///
    /// # Safety
    /// The whole block calls it; the state valid.
    #[inline(always)]
    unsafe fn finish(mut self, state: *mut State) {
        // SAFETY: the whole warp; the outputs have room (`new`).
        unsafe {
            self.drain();
            self.sure.flush();
            self.kept.flush();
        }
        // SAFETY: the state's histograms have BUCKETS counters each; the whole block.
        unsafe {
            let shared = arch::shared::<u32>();
            flush_shared(shared, (&raw mut (*state).next).cast::<u64>(), BUCKETS);
            if self.count_index {
                flush_shared(
                    shared.add(BUCKETS),
                    (&raw mut (*state).index).cast::<u64>(),
                    BUCKETS,
                );
            }
            extremes(state, self.lo, self.hi);
        }
    }
}

/// The pass over the input after the first histogram: every element against the first digit's chosen
/// bucket, with nothing above it to match ([`Pass::visit`]). The hot loop is the key, one shift and one
/// vote per element.
///
/// # Safety
/// `p.input` valid for `p.n` reads; the state as `pick` left it at level 0; as [`Pass::new`]; a grid of
/// whole warps.
#[inline(always)]
pub unsafe fn split<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // After the sieve, the first digit's pass reads its buffer: `level`'s work.
    if state!(p, done) != RUNNING || state!(p, source) != FROM_INPUT {
        return;
    }
    // SAFETY: the whole block (caller).
    let mut pass = unsafe { Pass::new(&p) };
    let width = pass.width;
    // SAFETY: the input (caller); `visit` runs warp-uniformly inside `each_key`.
    unsafe {
        each_key(&p, |key, i, ok| {
            pass.visit(key, i, ok, top_digit::<T>(key, width));
        });
        pass.finish(p.state);
    }
}

/// A later pass over the chosen bucket's entries: a candidate buffer, or the input again when the bucket
/// was too large to buffer (each element then matched against every chosen digit above).
///
/// # Safety
/// As [`split`], at any later level.
#[inline(always)]
pub unsafe fn level<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // The first digit's pass over the input is `split`'s.
    if state!(p, done) != RUNNING || (p.level == 0 && state!(p, source) == FROM_INPUT) {
        return;
    }
    // SAFETY: the whole block (caller).
    let mut pass = unsafe { Pass::new(&p) };
    let (ib, shift, width) = (p.index_bits, pass.shift, pass.width);
    let prefix = (state!(p, prefix)[1] as u128) << 64 | state!(p, prefix)[0] as u128;
    let source = state!(p, source);
    if source == FROM_INPUT {
        // SAFETY: the input (caller); `visit` runs warp-uniformly inside `each_key`.
        unsafe {
            each_key(&p, |key, i, ok| {
                let c = composite(key, i, ib);
                let inside = ok && same_above(c, prefix, shift + width);
                pass.visit(key, i, inside, digit(c, shift, width));
            })
        };
    } else {
        let (keys, indices) = buffer(&p, source as usize - 1);
        // SAFETY: the state is valid; the buffer's count was written by the previous level.
        let len = unsafe { candidates(p.state, source as usize - 1).read() };
        // Warp-uniform trips: every lane takes part in each collective.
        let mut first = global_thread_idx() - lane_id() as u64;
        while first < len {
            let j = first + lane_id() as u64;
            let valid = j < len;
            // SAFETY: j < len entries of the buffer.
            let (key, index) = if valid {
                unsafe { (keys.add(j as usize).read(), indices.add(j as usize).read()) }
            } else {
                (0, 0)
            };
            // SAFETY: the whole warp is here.
            unsafe {
                pass.visit(
                    key,
                    index,
                    valid,
                    digit(composite(key, index, ib), shift, width),
                )
            };
            first += grid_threads();
        }
    }
    // SAFETY: the whole block; the state is valid.
    unsafe { pass.finish(p.state) };
}
