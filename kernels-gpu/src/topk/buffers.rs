//! The candidate buffers and the warps' staging of what goes into them ([`Stage`], [`Pending`]).

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{BUCKETS, PENDING, STAGE, State, THREADS};

use super::put;
use crate::arch::{self, lane_id};
use crate::shuffle::shfl_idx;
use crate::warp::{self, FULL_MASK};

/// A warp's staging area for appended `(key, index)` pairs: lanes add their pairs in shared memory, and a
/// full stage goes out with one atomic on the output's counter and coalesced stores. Appending straight to
/// the output would take an atomic on one global counter per warp and element step: on data where many
/// elements land in the chosen bucket, millions of atomics on one address.
pub(super) struct Stage {
    /// `STAGE` keys, then `STAGE` indices, in this warp's part of shared memory.
    keys: *mut u64,
    indices: *mut u64,
    /// Pairs staged (the same in every lane).
    len: u32,
    /// The output's counter and arrays, and the entries the arrays hold: pairs the counter hands out past
    /// them are counted but not written (the sieve's overflow, which makes it step aside).
    counter: *mut u64,
    out_keys: *mut u64,
    out_indices: *mut u64,
    room: u64,
    /// The counter has passed `room`: later stages are dropped without an atomic (the count already
    /// says the output overflowed; a misjudged sieve would otherwise add on one word for the rest of the
    /// input).
    full: bool,
}

impl Stage {
    /// Stage `i` (0 or 1) of this warp, at `base`: `2 · warps` stages of `STAGE` pairs, going out to
    /// `out`, `room` pairs long.
    ///
    /// # Safety
    /// `base` valid shared memory for the stages of every warp of the block.
    #[inline(always)]
    pub(super) unsafe fn new(
        base: *mut u64,
        i: u32,
        counter: *mut u64,
        out: (*mut u64, *mut u64),
        room: u64,
    ) -> Self {
        let at = (2 * arch::warp_id() + i) * 2 * STAGE;
        // SAFETY: inside the stages (caller).
        let keys = unsafe { base.add(at as usize) };
        Stage {
            keys,
            // SAFETY: as above.
            indices: unsafe { keys.add(STAGE as usize) },
            len: 0,
            counter,
            out_keys: out.0,
            out_indices: out.1,
            room,
            full: false,
        }
    }

    /// Appends `(key, index)` from each lane where `keep`.
    ///
    /// # Safety
    /// The whole warp calls it together; the output valid for `room` pairs.
    #[inline(always)]
    pub(super) unsafe fn push(&mut self, keep: bool, key: u64, index: u64) {
        // SAFETY: the whole warp is here (caller).
        let kept = unsafe { warp::ballot(FULL_MASK, keep) };
        if kept == 0 {
            return;
        }
        if self.len + kept.count_ones() > STAGE {
            // SAFETY: as above (the condition is the same in every lane).
            unsafe { self.flush() };
        }
        // SAFETY: len + popc ≤ STAGE (flushed above otherwise).
        self.len = unsafe { put(self.keys, self.indices, self.len, kept, keep, key, index) };
    }

    /// Copies the staged pairs out and empties the stage.
    ///
    /// # Safety
    /// As [`push`](Self::push).
    #[inline(always)]
    pub(super) unsafe fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the whole warp (caller): the lanes' shared writes are seen by every lane after this.
        unsafe { warp::sync_warp(FULL_MASK) };
        if self.full {
            // SAFETY: the whole warp; no lane reads the stage here.
            unsafe { warp::sync_warp(FULL_MASK) };
            self.len = 0;
            return;
        }
        let mut base = 0u64;
        if lane_id() == 0 {
            // SAFETY: a valid global counter (caller).
            base = unsafe { arch::atomic_add_u64(self.counter, self.len as u64) };
        }
        // SAFETY: the whole warp.
        let base = unsafe { shfl_idx(base, 0, 32, FULL_MASK) };
        self.full = base + self.len as u64 > self.room;
        let mut j = lane_id();
        while j < self.len && base + (j as u64) < self.room {
            // SAFETY: j < len staged pairs; at < room, inside the output (caller).
            unsafe {
                let at = (base + j as u64) as usize;
                self.out_keys
                    .add(at)
                    .write(self.keys.add(j as usize).read());
                self.out_indices
                    .add(at)
                    .write(self.indices.add(j as usize).read());
            }
            j += 32;
        }
        // SAFETY: the whole warp: every lane has read the stage before any lane refills it.
        unsafe { warp::sync_warp(FULL_MASK) };
        self.len = 0;
    }
}

/// Candidate buffer `i`'s keys and indices. (A branch, not an index into the parameters: a parameter
/// array indexed at run time is copied to local memory.)
#[inline(always)]
pub(super) fn buffer<T>(p: &TopKParams<T>, i: usize) -> (*mut u64, *mut u64) {
    if i == 0 {
        (p.candidate_keys[0], p.candidate_indices[0])
    } else {
        (p.candidate_keys[1], p.candidate_indices[1])
    }
}

/// Candidate buffer `i`'s entry counter in the state (0 or 1, by a branch: no bounds check).
///
/// # Safety
/// `state` valid.
#[inline(always)]
pub(super) unsafe fn candidates(state: *mut State, i: usize) -> *mut u64 {
    // SAFETY: valid (caller); both places exist.
    unsafe {
        if i == 0 {
            &raw mut (*state).candidates[0]
        } else {
            &raw mut (*state).candidates[1]
        }
    }
}

/// The `State::source` code of the buffer a level reading `source` copies into: buffer 0 (code 1) from
/// the input or buffer 1, buffer 1 (code 2) from buffer 0.
#[inline(always)]
pub(super) fn destination(source: u32) -> u32 {
    if source == 1 { 2 } else { 1 }
}

/// The warps' areas of a [`LEVEL_SHARED`](reduce_contract::topk::LEVEL_SHARED) layout whose two
/// histograms start at `counts`: the stages of every warp (for [`Stage::new`]), and this warp's
/// pending pairs.
///
/// # Safety
/// `counts` the start of `LEVEL_SHARED` bytes of shared memory.
#[inline(always)]
pub(super) unsafe fn warp_areas(counts: *mut u32) -> (*mut u64, Pending) {
    // SAFETY: the stages follow the two histograms, the pending pairs the stages (LEVEL_SHARED): this
    // warp's PENDING keys, then as many indices.
    unsafe {
        let stages = counts.add(2 * BUCKETS).cast::<u64>();
        let warps = (THREADS / 32) as usize;
        let keys = stages
            .add(warps * 4 * STAGE as usize)
            .add(arch::warp_id() as usize * 2 * PENDING as usize);
        (
            stages,
            Pending {
                keys,
                indices: keys.add(PENDING as usize),
                len: 0,
            },
        )
    }
}

/// A warp's pairs set aside in shared memory as its lanes meet them, [`PENDING`] at most, to be handled
/// in bulk: what a pass sets aside is rare on the input, and handling each pair where it is met would put
/// the handling's code in the hot loop.
pub(super) struct Pending {
    keys: *mut u64,
    indices: *mut u64,
    /// Pairs pending (the same in every lane).
    len: u32,
}

impl Pending {
    /// Sets aside `(key, index)` from each lane where `wanted`; returns whether the list is too full for
    /// another round (then [`drain`](Self::drain) it).
    ///
    /// # Safety
    /// The whole warp calls it together, and drains before another call when told.
    #[inline(always)]
    pub(super) unsafe fn add(&mut self, wanted: bool, key: u64, index: u64) -> bool {
        // SAFETY: the whole warp is here (caller).
        let set = unsafe { warp::ballot(FULL_MASK, wanted) };
        if set == 0 {
            return false;
        }
        // SAFETY: len + popc ≤ PENDING (drained before it could pass, caller).
        self.len = unsafe { put(self.keys, self.indices, self.len, set, wanted, key, index) };
        self.len > PENDING - 32
    }

    /// Calls `f(key, index, valid)` on the pending pairs, a pair per lane in rounds of the whole warp
    /// (`valid` false past the last), then empties the list.
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    pub(super) unsafe fn drain(&mut self, mut f: impl FnMut(u64, u64, bool)) {
        // SAFETY: the whole warp (caller): every lane's pending writes are seen by every lane after this.
        unsafe { warp::sync_warp(FULL_MASK) };
        let mut base = 0;
        while base < self.len {
            let j = base + lane_id();
            let valid = j < self.len;
            // SAFETY: j < len entries, written before the sync above.
            let (key, index) = if valid {
                unsafe {
                    (
                        self.keys.add(j as usize).read(),
                        self.indices.add(j as usize).read(),
                    )
                }
            } else {
                (0, 0)
            };
            f(key, index, valid);
            base += 32;
        }
        // SAFETY: the whole warp: every lane has read its entry before any lane refills the list.
        unsafe { warp::sync_warp(FULL_MASK) };
        self.len = 0;
    }
}
