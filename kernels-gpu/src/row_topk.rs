//! Per-segment top-k: a block per segment (or per piece of a long one) reads its elements once, keeps
//! those at or above a threshold in a shared candidate buffer, and when the buffer fills, radix-selects the
//! k best of it, which raises the threshold to the k-th best seen so far. On most data the threshold soon
//! stops all but a few elements, so the pass runs at the speed of the read. At the end the k best are
//! sorted (bitonic, in shared memory) and written with their values read back from the input; a segment
//! shorter than k is padded with index `u64::MAX` and the worst value.
//!
//! Candidates are `(value key, inverted index)` pairs, compared as one number: the greater value key first,
//! the smaller index among equal keys (the inverted index is `!index` in 32 bits, so the smaller index
//! has the greater one), the order of the device-wide top-k. The inverted index of a real element is at
//! least 1; `(0, 0)` marks a missing one. A split segment's pieces write their k best unsorted; `merge`
//! runs the same filter over them.
use reduce_contract::params::{RowTopKParams, UnpairParams};
use reduce_contract::topk::{
    ROW_HEADER, ROW_K_MAX, ROW_MAX_LEN, ROW_THREADS, TopKElement, row_capacity, row_trip,
    row_trip_vectors, value_key,
};

use core::mem::MaybeUninit;

use crate::arch::{self, Vec16, block_idx, grid_dim, thread_idx};
use crate::bitonic;
use crate::block_scan;
use crate::half::{BF16, F16};
use crate::op::Plus;
use crate::thread::Vectorize;

/// How a candidate's value key is kept in shared memory and compared in the hot loop: 32 bits for keys of
/// at most 4 bytes.
pub trait KeyWord: Copy + Ord {
    /// The word holding `key`.
    fn store(key: u64) -> Self;
    /// The key back.
    fn load(self) -> u64;
}

impl KeyWord for u32 {
    #[inline(always)]
    fn store(key: u64) -> Self {
        key as u32
    }
    #[inline(always)]
    fn load(self) -> u64 {
        self as u64
    }
}

impl KeyWord for u64 {
    #[inline(always)]
    fn store(key: u64) -> Self {
        key
    }
    #[inline(always)]
    fn load(self) -> u64 {
        self
    }
}

/// Element types of the per-segment top-k: their key word, and the value a short segment is padded with.
pub trait RowElement: TopKElement + Vectorize + Default {
    /// The shared-memory word of the value key.
    type Key: KeyWord;
    /// The worst value: the identity of max (−∞, or the least integer) for `max_k`, of min for `min_k`.
    fn worst(largest: bool) -> Self;
}

macro_rules! row_elements {
    ($($t:ty: $key:ty, $low:expr, $high:expr;)*) => {$(
        impl RowElement for $t {
            type Key = $key;
            #[inline(always)]
            fn worst(largest: bool) -> Self {
                if largest { $low } else { $high }
            }
        }
    )*};
}

row_elements! {
    f32: u32, f32::NEG_INFINITY, f32::INFINITY;
    f64: u64, f64::NEG_INFINITY, f64::INFINITY;
    F16: u32, F16(0xfc00), F16(0x7c00);
    BF16: u32, BF16(0xff80), BF16(0x7f80);
    i32: u32, i32::MIN, i32::MAX;
    u32: u32, 0, u32::MAX;
    i64: u64, i64::MIN, i64::MAX;
    u64: u64, 0, u64::MAX;
    u8: u32, 0, u8::MAX;
}

/// Control words after the digit counters: the candidate count, the chosen digit, the count above it and
/// in it, and the compaction's two list counters.
const COUNT: usize = 0;
const DIGIT: usize = 1;
const ABOVE: usize = 2;
const SIZE: usize = 3;
const HOLES: usize = 4;
const MOVERS: usize = 5;

/// One block's candidates and threshold. Every method with a barrier is called by the whole block.
struct Filter<T: RowElement> {
    keys: *mut T::Key,
    inverted: *mut u32,
    counts: *mut u32,
    control: *mut u32,
    holes: *mut u32,
    /// Slots of `keys`/`inverted`.
    cap: u32,
    /// How many results: at most [`ROW_K_MAX`].
    k: u32,
    /// The threshold: a candidate is kept when `(key, inverted) ≥ (lo_key, lo_inverted)`.
    lo_key: u64,
    lo_inverted: u32,
    /// `lo_key` as a key word: the hot loop's test, on all of a vector's keys at once.
    lo_word: T::Key,
    /// The most candidates this thread knows of since the last compaction (an append's slot + 1): the
    /// block's count is the greatest over its threads.
    seen: u32,
}

impl<T: RowElement> Filter<T> {
    /// The filter over the block's shared memory, empty: the header's control words are zeroed here and
    /// ordered by the barrier of the first [`make_room`](Self::make_room).
    ///
    /// # Safety
    /// [`reduce_contract::topk::row_shared`] bytes of dynamic shared memory; the whole block calls it,
    /// after a barrier if the shared memory was in use.
    #[inline(always)]
    unsafe fn new(k: u64) -> Self {
        // SAFETY: the header and `cap` slots of each array lie inside the launch's shared memory (caller).
        let (counts, control, holes, keys, inverted) = unsafe {
            let base = arch::shared::<u8>();
            let cap = row_capacity(size_of::<T>() as u32) as usize;
            let keys = base.add(ROW_HEADER as usize) as *mut T::Key;
            (
                base.add(512) as *mut u32,
                base.add(1536) as *mut u32,
                base.add(2048) as *mut u32,
                keys,
                keys.add(cap) as *mut u32,
            )
        };
        if thread_idx() == 0 {
            // SAFETY: a control word; the callers' barrier orders it before any use.
            unsafe { control.add(COUNT).write(0) };
        }
        Filter {
            keys,
            inverted,
            counts,
            control,
            holes,
            cap: row_capacity(size_of::<T>() as u32),
            k: k.min(ROW_K_MAX) as u32,
            lo_key: 0,
            lo_inverted: 1,
            lo_word: T::Key::store(0),
            seen: 0,
        }
    }

    /// Whether `(key, inverted)` is at or above the threshold.
    #[inline(always)]
    fn keeps(&self, key: u64, inverted: u32) -> bool {
        key > self.lo_key || (key == self.lo_key && inverted >= self.lo_inverted)
    }

    /// Appends the candidate when `ok` and it is at or above the threshold.
    ///
    /// # Safety
    /// A [`make_room`](Self::make_room) for this candidate came before it (no barrier since).
    #[inline(always)]
    unsafe fn offer(&mut self, key: u64, inverted: u32, ok: bool) {
        if ok && self.keeps(key, inverted) {
            // SAFETY: the count word is shared; `make_room` left room for every append of the trip.
            unsafe {
                let at =
                    arch::shared_fetch_add_u32(arch::shared_window(self.control.add(COUNT)), 1);
                self.keys.add(at as usize).write(T::Key::store(key));
                self.inverted.add(at as usize).write(inverted);
                self.seen = self.seen.max(at + 1);
            }
        }
    }

    /// The candidate in slot `j` as one number: the value key above the inverted index.
    ///
    /// # Safety
    /// `j` below the candidate count, ordered after its write by a barrier.
    #[inline(always)]
    unsafe fn composite(&self, j: u32) -> u128 {
        // SAFETY: j < count ≤ cap (caller).
        let (key, inverted) = unsafe {
            (
                self.keys.add(j as usize).read().load(),
                self.inverted.add(j as usize).read(),
            )
        };
        (key as u128) << 32 | inverted as u128
    }

    /// A barrier; then, if `extra` more candidates might not fit, the k best are selected and the rest
    /// dropped. Every candidate offered before it is in the buffer after it.
    ///
    /// # Safety
    /// The whole block calls it with the same `extra`, at most `cap − k`.
    #[inline(always)]
    unsafe fn make_room(&mut self, extra: u32) {
        // SAFETY: the whole block is here (caller).
        if unsafe { arch::sync_threads_or(self.seen + extra > self.cap) } {
            // SAFETY: after the barrier the count is final until the compaction rewrites it.
            let count = unsafe { self.control.add(COUNT).read() };
            // SAFETY: the whole block; count > cap − extra ≥ ROW_K_MAX ≥ k.
            unsafe { self.shrink(count) };
        }
    }

    /// Keeps only the k best of `count > k` candidates: raises the threshold to the k-th best
    /// ([`select`](Self::select)), then moves the kept candidates above slot k into the slots below it
    /// that hold dropped ones. (Stopping the select early, at a looser threshold that keeps up to
    /// [`ROW_K_MAX`], measured slower on the H200: more elements pass a looser threshold later; 46 % more
    /// time at k = 1 on 4096 × 151936 f32, tried together with the warp-aggregated counts of `select`.)
    ///
    /// # Safety
    /// The whole block; `k < count ≤ cap`, every candidate written before the last barrier.
    #[inline(always)]
    unsafe fn shrink(&mut self, count: u32) {
        let t = thread_idx();
        // SAFETY: the whole block; k < count (caller).
        let lo = unsafe { self.select(count) };
        let kept = self.k;
        self.lo_key = (lo >> 32) as u64;
        self.lo_inverted = lo as u32;
        self.lo_word = T::Key::store(self.lo_key);
        if t == 0 {
            // SAFETY: control words, last read before the select's barriers.
            unsafe {
                self.control.add(HOLES).write(0);
                self.control.add(MOVERS).write(0);
            }
        }
        // SAFETY: the whole block.
        unsafe { arch::sync_threads() };
        let mut j = t;
        while j < kept {
            // SAFETY: j < kept ≤ count; `holes` has ROW_K_MAX ≥ kept slots and at most kept are listed.
            unsafe {
                if self.composite(j) < lo {
                    let h =
                        arch::shared_fetch_add_u32(arch::shared_window(self.control.add(HOLES)), 1);
                    self.holes.add(h as usize).write(j);
                }
            }
            j += ROW_THREADS;
        }
        // SAFETY: the whole block.
        unsafe { arch::sync_threads() };
        let mut j = kept + t;
        while j < count {
            // SAFETY: exactly `kept` candidates are ≥ lo, so the kept ones above slot `kept` are as many as
            // the holes below it: each mover gets its own listed hole.
            unsafe {
                let c = self.composite(j);
                if c >= lo {
                    let m = arch::shared_fetch_add_u32(
                        arch::shared_window(self.control.add(MOVERS)),
                        1,
                    );
                    let to = self.holes.add(m as usize).read() as usize;
                    self.keys.add(to).write(self.keys.add(j as usize).read());
                    self.inverted.add(to).write(c as u32);
                }
            }
            j += ROW_THREADS;
        }
        if t == 0 {
            // SAFETY: the count word; every append is behind the barrier before the select.
            unsafe { self.control.add(COUNT).write(kept) };
        }
        self.seen = kept;
        // SAFETY: the whole block: the moves and the count are seen before anything reads or appends.
        unsafe { arch::sync_threads() };
    }

    /// The k-th best of the `count` candidates (all distinct), by 8-bit radix digits from the top: a
    /// digit's counts, a block scan of them from the greatest, and the digit whose bucket holds the k-th. It
    /// stops at a bucket that holds exactly as many as still wanted and returns the least number with the
    /// digits chosen so far, so that exactly k candidates are at or above it. (Adding a warp's equal digits
    /// first, one atomic per digit and warp, measured 11–23 % slower at k = 1024: the later digits are
    /// spread out and gain nothing.)
    ///
    /// # Safety
    /// The whole block; `k < count`, every candidate written before the last barrier.
    #[inline(always)]
    unsafe fn select(&self, count: u32) -> u128 {
        let t = thread_idx();
        let top = 8 * T::KEY_BYTES + 32;
        let mut shift = top - 8;
        let mut prefix = 0u128;
        let mut remaining = self.k;
        loop {
            // SAFETY: a counter per thread (ROW_THREADS = 256 buckets); its last reader was behind a barrier.
            unsafe { self.counts.add(t as usize).write(0) };
            // SAFETY: the whole block.
            unsafe { arch::sync_threads() };
            let mut j = t;
            while j < count {
                // SAFETY: j < count; the counters are shared, 256 of them.
                unsafe {
                    let c = self.composite(j);
                    if shift + 8 >= top || c >> (shift + 8) == prefix >> (shift + 8) {
                        let d = (c >> shift) as u32 & 255;
                        arch::shared_add_u32(arch::shared_window(self.counts.add(d as usize)), 1);
                    }
                }
                j += ROW_THREADS;
            }
            // SAFETY: the whole block.
            unsafe { arch::sync_threads() };
            // Thread t holds bucket 255 − t: the scan from thread 0 counts from the greatest digit down.
            // SAFETY: counters written before the barrier.
            let here = unsafe { self.counts.add(255 - t as usize).read() };
            // SAFETY: the whole block; the scan's slots are the header's first bytes.
            let (above, _) = unsafe { block_scan::exclusive_scan::<Plus<u32>>(here) };
            if above < remaining && remaining <= above + here {
                // SAFETY: control words; one thread's bucket holds the k-th, so one writer.
                unsafe {
                    self.control.add(DIGIT).write(255 - t);
                    self.control.add(ABOVE).write(above);
                    self.control.add(SIZE).write(here);
                }
            }
            // SAFETY: the whole block.
            unsafe { arch::sync_threads() };
            // SAFETY: written before the barrier; rewritten only after the next round's barriers.
            let (digit, above, size) = unsafe {
                (
                    self.control.add(DIGIT).read(),
                    self.control.add(ABOVE).read(),
                    self.control.add(SIZE).read(),
                )
            };
            prefix |= (digit as u128) << shift;
            remaining -= above;
            // Distinct candidates put at most one in a last-digit bucket, so the loop ends at shift 0.
            if size == remaining || shift == 0 {
                // At least (0, 1): a missing result (0, 0) never passes the threshold.
                return prefix.max(1);
            }
            shift -= 8;
        }
    }

    /// Ends the filter: the k best of the candidates (fewer when fewer were kept) in slots `0..m`, sorted best
    /// first when `sorted`; returns m.
    ///
    /// # Safety
    /// The whole block.
    #[inline(always)]
    unsafe fn finish(&mut self, sorted: bool) -> u32 {
        // SAFETY: the whole block.
        unsafe { arch::sync_threads() };
        // SAFETY: the count is final behind the barrier.
        let count = unsafe { self.control.add(COUNT).read() };
        if count > self.k {
            // SAFETY: the whole block, k < count.
            unsafe { self.shrink(count) };
        }
        let m = count.min(self.k);
        if sorted {
            // SAFETY: the whole block; m ≤ k ≤ ROW_K_MAX ≤ cap.
            unsafe { self.sort(m) };
        }
        m
    }

    /// Sorts slots `0..m` best first (bitonic, over the next power of two, padded with `(0, 0)`, which sorts
    /// last).
    ///
    /// # Safety
    /// The whole block; `m ≤ ROW_K_MAX`, the candidates written before the last barrier.
    #[inline(always)]
    unsafe fn sort(&self, m: u32) {
        let t = thread_idx();
        let size = m.next_power_of_two().max(2);
        let mut j = m + t;
        while j < size {
            // SAFETY: j < size ≤ ROW_K_MAX ≤ cap.
            unsafe {
                self.keys.add(j as usize).write(T::Key::store(0));
                self.inverted.add(j as usize).write(0);
            }
            j += ROW_THREADS;
        }
        // Runs whose `width` bit is clear go best first, the others worst first.
        let exchange = |a: usize, b: usize, best_first: bool| {
            // SAFETY: a < b < size ≤ cap; each pair has one thread between two barriers.
            unsafe {
                let (ca, cb) = (self.composite(a as u32), self.composite(b as u32));
                if (cb > ca) == best_first {
                    let (ka, kb) = (self.keys.add(a), self.keys.add(b));
                    let (x, y) = (ka.read(), kb.read());
                    ka.write(y);
                    kb.write(x);
                    self.inverted.add(a).write(cb as u32);
                    self.inverted.add(b).write(ca as u32);
                }
            }
        };
        // SAFETY: the whole block (caller), the padding written above; `exchange` touches its pair only.
        unsafe { bitonic::sort(size as usize, t as usize, ROW_THREADS as usize, exchange) };
    }

    /// Slot `j`'s value key and index in the segment.
    ///
    /// # Safety
    /// `j` below the count, ordered by a barrier.
    #[inline(always)]
    unsafe fn result(&self, j: u32) -> (u64, u32) {
        // SAFETY: as the caller's.
        unsafe {
            (
                self.keys.add(j as usize).read().load(),
                self.inverted.add(j as usize).read(),
            )
        }
    }
}

/// Segment `s`: its first element and length; an offsets segment out of range, or longer than
/// [`ROW_MAX_LEN`], is empty and sets the error word.
///
/// # Safety
/// `s < p.count`; rows checked by the host; offsets valid for `count` reads and `error` for a write.
#[inline(always)]
unsafe fn segment<T>(p: &RowTopKParams<T>, s: u64) -> (*const T, u64) {
    let (first, len) = if p.begin.is_null() {
        (s * p.stride, p.len)
    } else {
        // SAFETY: s < count (caller).
        let (b, e) = unsafe { (p.begin.add(s as usize).read(), p.end.add(s as usize).read()) };
        if b <= e && e <= p.n && e - b <= ROW_MAX_LEN {
            (b, e - b)
        } else {
            // SAFETY: the host passes a valid error word with offsets.
            unsafe { p.error.write_volatile(1) };
            (0, 0)
        }
    };
    // SAFETY: first ≤ n (rows: checked by the host; offsets: above).
    (unsafe { p.input.add(first as usize) }, len)
}

/// Offers the `len` elements at `x` (positions `base ..` in their segment) to `f`: the unaligned head and
/// the ragged tail in one scalar trip, then trips of [`row_trip_vectors`] 16-byte vectors per thread, each
/// trip's loads issued before the previous trip is filtered. (Asking L2 for the trip two ahead, as stable
/// compaction asks for a later tile, measured 1–7 % slower on 17 of the bench's 18 shapes, H100.)
///
/// # Safety
/// `x` valid for `len` reads, `base + len ≤` [`ROW_MAX_LEN`]; the whole block.
#[inline(always)]
unsafe fn offer_elements<T: RowElement>(
    f: &mut Filter<T>,
    x: *const T,
    len: u64,
    base: u64,
    largest: bool,
) {
    let t = thread_idx() as u64;
    let lanes = T::LANES as u64;
    let misalign = (x as u64 & 15) / size_of::<T>() as u64;
    let head = ((lanes - misalign) % lanes).min(len);
    let vectors = (len - head) / lanes;
    let tail = head + vectors * lanes;
    // The head (< LANES) and the tail (< LANES) together: fewer than 32 elements, one per thread.
    let i = if t < head { t } else { tail + (t - head) };
    let ok = i < len && (t < head || tail + (t - head) < len);
    // SAFETY: the whole block; 256 ≤ cap − k.
    unsafe { f.make_room(ROW_THREADS) };
    if ok {
        // SAFETY: i < len.
        let v = unsafe { x.add(i as usize).read() };
        // SAFETY: after make_room.
        unsafe { f.offer(value_key(v, largest), !((base + i) as u32), true) };
    }
    // SAFETY: `x + head` is 16-byte aligned and in bounds.
    let body = unsafe { x.add(head as usize) } as *const Vec16<T::Array>;
    let per = row_trip_vectors(size_of::<T>() as u32) as u64;
    let step = ROW_THREADS as u64 * per;
    let trips = vectors.div_ceil(step);
    let mut trip = 0;
    while trip < trips {
        // The trip's loads first (lanes past the end reload the last vector, then ignore it), so that their
        // latency overlaps the barrier of `make_room`.
        let first = trip * step + t;
        let mut group = [const { MaybeUninit::<Vec16<T::Array>>::uninit() }; 4];
        unroll!(R in [0, 1, 2, 3] {
            if (R as u64) < per {
                let v = (first + R as u64 * ROW_THREADS as u64).min(vectors - 1);
                // SAFETY: trips ≥ 1 gives vectors ≥ 1, and v < vectors.
                group[R].write(unsafe { arch::load_vec16(body.add(v as usize)) });
            }
        });
        // SAFETY: the whole block, the same trip bound for all.
        unsafe { f.make_room(row_trip(size_of::<T>() as u32)) };
        unroll!(R in [0, 1, 2, 3] {
            if (R as u64) < per {
                let v = first + R as u64 * ROW_THREADS as u64;
                // SAFETY: written above for R < per.
                let vec = unsafe { group[R].assume_init_ref() };
                // The fast test: does any lane's value key reach the threshold's? Once the threshold has
                // risen, almost never; then each lane is offered with its index.
                let mut best = T::Key::store(0);
                each_index!(I < T::LANES, {
                    best = best.max(T::Key::store(value_key(T::lane(vec, I), largest)));
                });
                if v < vectors && best >= f.lo_word {
                    let at = base + head + v * lanes;
                    each_index!(I < T::LANES, {
                        let key = value_key(T::lane(vec, I), largest);
                        // SAFETY: after make_room; the index fits 32 bits (segment ≤ ROW_MAX_LEN).
                        unsafe { f.offer(key, !((at + I as u64) as u32), true) };
                    });
                }
            }
        });
        trip += 1;
    }
}

/// Writes segment `s`'s results from the sorted slots `0..m` of `f`: indices in the segment and values
/// read back from it, then padding up to k.
///
/// # Safety
/// `m ≤ k`, the slots sorted; `x` the segment's first element; the outputs valid for `count · k`.
#[inline(always)]
unsafe fn write_results<T: RowElement>(
    p: &RowTopKParams<T>,
    f: &Filter<T>,
    s: u64,
    x: *const T,
    m: u32,
) {
    let mut j = thread_idx();
    while (j as u64) < p.k {
        let out = (s * p.k + j as u64) as usize;
        // SAFETY: out < count · k; a kept candidate's index lies in the segment.
        unsafe {
            if j < m {
                let index = !f.result(j).1 as u64;
                p.indices_out.add(out).write(index);
                if !p.values_out.is_null() {
                    p.values_out.add(out).write(x.add(index as usize).read());
                }
            } else {
                p.indices_out.add(out).write(u64::MAX);
                if !p.values_out.is_null() {
                    p.values_out.add(out).write(T::worst(p.largest != 0));
                }
            }
        }
        j += ROW_THREADS;
    }
}

/// A block per (segment, piece), grid-stride over them: each piece's k best, written sorted as the results
/// when segments are whole (`pieces == 1`), else unsorted to the pieces' buffer for [`merge`].
///
/// # Safety
/// The host's launch contract: [`RowTopKParams`]' pointers valid as documented, `1 ≤ k ≤ ROW_K_MAX`,
/// blocks of [`ROW_THREADS`] with [`reduce_contract::topk::row_shared`] bytes of shared memory.
#[inline(always)]
pub unsafe fn select<T: RowElement>(p: RowTopKParams<T>) {
    let pieces = p.pieces.max(1);
    let items = p.count * pieces;
    let largest = p.largest != 0;
    let mut item = block_idx() as u64;
    while item < items {
        let (s, piece) = (item / pieces, item % pieces);
        // SAFETY: s < count.
        let (x, len) = unsafe { segment(&p, s) };
        let (lo, hi) = (len * piece / pieces, len * (piece + 1) / pieces);
        // SAFETY: the shared memory (launch); the previous item ended with a barrier.
        let mut f = unsafe { Filter::<T>::new(p.k) };
        // SAFETY: x + lo .. x + hi lies in the segment, whose length is at most ROW_MAX_LEN.
        unsafe { offer_elements(&mut f, x.add(lo as usize), hi - lo, lo, largest) };
        // SAFETY: the whole block.
        let m = unsafe { f.finish(pieces == 1) };
        if pieces == 1 {
            // SAFETY: m ≤ k, sorted.
            unsafe { write_results(&p, &f, s, x, m) };
        } else {
            let mut j = thread_idx();
            while (j as u64) < p.k {
                let at = (item * p.k + j as u64) as usize;
                // SAFETY: the pieces' buffer holds count · pieces · k pairs; slot j < m was kept.
                unsafe {
                    let (key, inverted) = if j < m { f.result(j) } else { (0, 0) };
                    p.piece_keys.add(at).write(key);
                    p.piece_indices.add(at).write(inverted);
                }
                j += ROW_THREADS;
            }
        }
        // SAFETY: the whole block: the next item's filter reuses the shared memory.
        unsafe { arch::sync_threads() };
        item += grid_dim() as u64;
    }
}

/// A block per split segment, grid-stride: the k best of its pieces' `pieces · k` results, sorted, written
/// as the segment's results.
///
/// # Safety
/// As [`select`], after it has written the pieces' buffer.
#[inline(always)]
pub unsafe fn merge<T: RowElement>(p: RowTopKParams<T>) {
    let pieces = p.pieces.max(1);
    let total = pieces * p.k;
    let mut s = block_idx() as u64;
    while s < p.count {
        // SAFETY: s < count.
        let (x, _) = unsafe { segment(&p, s) };
        // SAFETY: the shared memory (launch); the previous segment ended with a barrier.
        let mut f = unsafe { Filter::<T>::new(p.k) };
        let first = s * total;
        let mut j = 0;
        while j < total {
            // SAFETY: the whole block; 256 ≤ cap − k.
            unsafe { f.make_room(ROW_THREADS) };
            let at = j + thread_idx() as u64;
            let ok = at < total;
            let (key, inverted) = if ok {
                // SAFETY: first + at < count · pieces · k.
                unsafe {
                    (
                        p.piece_keys.add((first + at) as usize).read(),
                        p.piece_indices.add((first + at) as usize).read(),
                    )
                }
            } else {
                (0, 0)
            };
            // SAFETY: after make_room; a missing result (0, 0) is below every threshold.
            unsafe { f.offer(key, inverted, ok) };
            j += ROW_THREADS as u64;
        }
        // SAFETY: the whole block.
        let m = unsafe { f.finish(true) };
        // SAFETY: m ≤ k, sorted.
        unsafe { write_results(&p, &f, s, x, m) };
        // SAFETY: the whole block.
        unsafe { arch::sync_threads() };
        s += grid_dim() as u64;
    }
}

/// Splits the k = 1 answers, `(value, index)` pairs from the argmax (argmin) kernels, into top-k's value and
/// index outputs: a thread per pair, a grid-stride loop past the grid. A kernel rather than two strided
/// copies, whose speed on a tall, narrow copy (one line per segment) the driver does not promise.
///
/// # Safety
/// `p.pairs` valid for `p.count` reads, the outputs (`values_out` unless null) for `p.count` writes.
#[inline(always)]
pub unsafe fn unpair<T: Copy>(p: UnpairParams<T>) {
    let mut s = arch::global_thread_idx();
    while s < p.count {
        // SAFETY: s < count: in the pairs and the outputs (`values_out` only when not null; caller).
        unsafe {
            let pair = p.pairs.add(s as usize).read();
            p.indices_out.add(s as usize).write(pair.index);
            if !p.values_out.is_null() {
                p.values_out.add(s as usize).write(pair.value);
            }
        }
        s += arch::grid_threads();
    }
}
