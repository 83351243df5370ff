//! The parameters of each kernel family, as one `#[repr(C)]` struct passed by value: the kernel declares
//! `fn(p: Params)`, rustc's PTX backend passes it as one `.param .b8 [size]` array, and the host hands the
//! driver a pointer to the same struct. Fields a kernel does not read are ignored by it; the host fills
//! them with nulls and zeros.
//!
//! Pointers are device addresses. They are raw pointers on both sides so the struct is the same type on
//! both; the host never dereferences them.
use crate::layout::Indexed;

/// Every reduction kernel (`reduce_*`) and the seed kernels.
#[repr(C)]
#[derive(Debug)]
pub struct ReduceParams<In, Acc> {
    /// `n` elements to reduce (`partials`, `last_block`, `atomic`, the seed kernels).
    pub input: *const In,
    /// Elements of `input`.
    pub n: u64,
    /// One accumulator per block: written by `partials` (with one block, the result itself) and
    /// `last_block`, read by `finalize`.
    pub partials: *mut Acc,
    /// Partials `finalize` combines.
    pub count: u64,
    /// The last-block ticket: zero at launch, and zero again after `last_block` (its increments wrap at
    /// the grid size).
    pub ticket: *mut u32,
    /// The result (`finalize`, `last_block`, `atomic`; zeroed before `atomic`).
    pub out: *mut Acc,
}

/// The reproducible sum's kernels (`repro_chunks_*`, `repro_combine_*`; see [`crate::reproducible`]).
#[repr(C)]
#[derive(Debug)]
pub struct ReproParams<In, Acc, Out> {
    /// `n` elements (`chunks`).
    pub input: *const In,
    /// Elements of `input`.
    pub n: u64,
    /// One accumulator per chunk of `input`: written by `chunks`, read by `combine`.
    pub partials: *mut Acc,
    /// Partials `combine` reads.
    pub count: u64,
    /// The result (`combine`).
    pub out: *mut Out,
    /// Nonzero: `chunks` prefetches each batch's successor into L2 (a tuning switch; never changes the
    /// bits).
    pub prefetch: u32,
}

// Copy whatever the element types: the struct holds only pointers to them and plain numbers.
impl<In, Acc, Out> Clone for ReproParams<In, Acc, Out> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<In, Acc, Out> Copy for ReproParams<In, Acc, Out> {}

/// The histogram kernels: even bins (`histogram_shared_*`, `histogram_global_*`) and bytes
/// (`histogram_bytes_*`, which read only `input`, `n`, `out` and `copies_log2`).
#[repr(C)]
#[derive(Debug)]
pub struct HistogramParams<T, C> {
    /// Samples.
    pub input: *const T,
    /// Samples in `input`.
    pub n: u64,
    /// `bins` counters, zeroed before the launch.
    pub out: *mut C,
    /// Number of bins.
    pub bins: u32,
    /// Inclusive lower bound.
    pub lower: f32,
    /// Exclusive upper bound.
    pub upper: f32,
    /// `bins / (upper - lower)`, rounded to f32 once, on the host.
    pub scale: f32,
    /// `log2` of the private copies of the counters per block (shared kernels): shared memory holds
    /// `4 · bins · 2^copies_log2` bytes.
    pub copies_log2: u32,
}

/// The compaction kernels: by predicate (`select_unordered_*`, `select_stable_*`) or by flags
/// (`select_flagged_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SelectParams<T> {
    /// Elements; unmodified while the kernel runs (read through the non-coherent cache).
    pub input: *const T,
    /// Elements of `input`.
    pub n: u64,
    /// `n` bytes, nonzero for elements to keep (flagged kernel only).
    pub flags: *const u8,
    /// The predicate's parameter (those that have one).
    pub threshold: T,
    /// Room for `n` elements; the kept ones go to the front.
    pub out: *mut T,
    /// Where the number kept goes (zeroed before the unordered kernel).
    pub count: *mut u64,
    /// The tile counter then one look-back word per tile (the unordered kernel uses only the counter), all
    /// zeroed before the launch; the grid is one block per tile.
    pub states: *mut u64,
}

/// The per-segment kernels (`segmented_*`). A segment is either row `s` of a row-major matrix (`begin` null:
/// elements `s · stride .. s · stride + len`) or `begin[s] .. end[s]` of `input` (offsets).
#[repr(C)]
#[derive(Debug)]
pub struct SegmentedParams<In, Acc, Partial = Acc> {
    /// The elements every segment lies in.
    pub input: *const In,
    /// Elements of `input`: offsets past it mark a segment as bad (see `error`).
    pub n: u64,
    /// Segments (and results in `out`).
    pub count: u64,
    /// Rows: elements per segment.
    pub len: u64,
    /// Rows: elements from one segment's start to the next's.
    pub stride: u64,
    /// Offsets: `count` segment starts, or null for rows.
    pub begin: *const u64,
    /// Offsets: `count` segment ends (exclusive).
    pub end: *const u64,
    /// Where a kernel writes 1 when a segment's offsets are bad (`end < begin` or `end > n`); such a
    /// segment is reduced as empty, never read.
    pub error: *mut u32,
    /// Offsets' reproducible sums (`repro_segment_block` with more than one segment a group): a counter,
    /// zeroed before the launch, from which warps claim segments one at a time. Null elsewhere.
    pub claims: *mut u64,
    /// `tile`: lanes per segment (a power of two, 1 … 32).
    pub width: u32,
    /// `block`/`combine`: blocks (and partials) per segment.
    pub pieces: u32,
    /// `block`: 16-byte chunks per piece (`u64::MAX` for one piece per segment).
    pub piece: u64,
    /// `block`/`combine`: `count · pieces` partials, segment-major (`out` itself with one piece). The
    /// reproducible sums' split rows keep their chunk accumulators here (`Partial`, wider than the result).
    pub partials: *mut Partial,
    /// `count` results.
    pub out: *mut Acc,
}

/// The device-wide top-k kernels (`topk_*`; see [`crate::topk`]).
#[repr(C)]
#[derive(Debug)]
pub struct TopKParams<T> {
    /// Elements; unmodified while the kernels run.
    pub input: *const T,
    /// Elements of `input`.
    pub n: u64,
    /// How many to select: `1 ≤ k ≤ n`.
    pub k: u64,
    /// The state the passes share, zeroed before the first.
    pub state: *mut crate::topk::State,
    /// Room for `k` value keys: the selected pairs, the sort's input.
    pub keys: *mut u64,
    /// Room for `k` indices, beside `keys`.
    pub indices: *mut u64,
    /// A second pair of `k` keys and indices, for the merge passes (k above [`crate::topk::SORT_TILE`]).
    pub keys_alt: *mut u64,
    /// See `keys_alt`.
    pub indices_alt: *mut u64,
    /// The two candidate buffers' value keys, `capacity` each.
    pub candidate_keys: [*mut u64; 2],
    /// The two candidate buffers' indices, beside `candidate_keys`.
    pub candidate_indices: [*mut u64; 2],
    /// Entries of each candidate buffer: [`crate::topk::capacity`] of `n`.
    pub capacity: u64,
    /// `k` values, best first; null for indices only.
    pub values_out: *mut T,
    /// `k` indices, best first.
    pub indices_out: *mut u64,
    /// `merge`: the length of the source's sorted runs.
    pub run: u64,
    /// `pick`: the level (0 for the first digit).
    pub level: u32,
    /// Nonzero for the greatest elements (`max_k`), zero for the least.
    pub largest: u32,
    /// Bits of the composite keys' index part: [`crate::topk::index_bits`] of `n`.
    pub index_bits: u32,
    /// Bits of the first digit: [`crate::topk::first_bits`] of the device, at most the value key's bits.
    pub first_bits: u32,
    /// `merge`/`gather`: nonzero when the source is the `_alt` pair.
    pub from_alt: u32,
}

// Copy whatever the element type: the struct holds only pointers to it and plain numbers.
impl<T> Clone for TopKParams<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for TopKParams<T> {}

/// The parameters of the per-segment top-k kernels ([`crate::kernels::RowTopKPass`]): segments as rows
/// (`begin` null: segment `s` is `input[s · stride ..][..len]`) or offsets (`begin[s] .. end[s]`, checked on
/// the device), each with `k` results in `values_out`/`indices_out[s · k ..]`.
#[repr(C)]
#[derive(Debug)]
pub struct RowTopKParams<T> {
    /// Elements; unmodified while the kernels run.
    pub input: *const T,
    /// Elements of `input`.
    pub n: u64,
    /// Segments.
    pub count: u64,
    /// Rows: each row's length (at most [`crate::topk::ROW_MAX_LEN`], checked by the host).
    pub len: u64,
    /// Rows: elements from one row's start to the next's.
    pub stride: u64,
    /// Offsets: `count` segment starts, or null for rows.
    pub begin: *const u64,
    /// Offsets: `count` segment ends.
    pub end: *const u64,
    /// Offsets: set to 1 when a segment is out of range or longer than [`crate::topk::ROW_MAX_LEN`]; that
    /// segment is treated as empty.
    pub error: *mut u32,
    /// Results per segment: `1 ≤ k ≤ [`crate::topk::ROW_K_MAX`]`.
    pub k: u64,
    /// Blocks per segment of `select`: 1 writes the results; more write each piece's k best to
    /// `piece_keys`/`piece_indices` for `merge`.
    pub pieces: u64,
    /// `count · pieces · k` value keys of the pieces' results (unsorted; a missing one is key 0 and inverted
    /// index 0).
    pub piece_keys: *mut u64,
    /// The inverted indices (in the segment) beside `piece_keys`.
    pub piece_indices: *mut u32,
    /// `count · k` values, best first per segment; null for indices only.
    pub values_out: *mut T,
    /// `count · k` indices in the segment, best first; `u64::MAX` past a short segment's length.
    pub indices_out: *mut u64,
    /// Nonzero for the greatest elements (`max_k`), zero for the least.
    pub largest: u32,
}

// Copy whatever the element type: the struct holds only pointers to it and plain numbers.
impl<T> Clone for RowTopKParams<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RowTopKParams<T> {}

/// `row_topk_unpair_*` ([`crate::kernels::Unpair`]): splits `count` [`Indexed`] pairs, the answers of
/// top-k with k = 1 that the argmax (argmin) kernels wrote, into top-k's two outputs.
#[repr(C)]
#[derive(Debug)]
pub struct UnpairParams<T> {
    /// `count` pairs; unmodified while the kernel runs.
    pub pairs: *const Indexed<T>,
    /// Pairs, and elements of each output.
    pub count: u64,
    /// `count` values; null for indices only.
    pub values_out: *mut T,
    /// `count` indices.
    pub indices_out: *mut u64,
}

// Copy whatever the element type: the struct holds only pointers to it and a number.
impl<T> Clone for UnpairParams<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for UnpairParams<T> {}

/// `util_spin`: one thread busy-waits this long.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SpinParams {
    /// Nanoseconds.
    pub ns: u64,
}

/// The one-block tile and block-scan test kernels: thread `t` reads `input[t]` and writes `out[t]`.
#[repr(C)]
#[derive(Debug)]
pub struct LaneParams<X> {
    /// One value per thread.
    pub input: *const X,
    /// One result per thread.
    pub out: *mut X,
    /// The shuffle's source, delta or lane mask.
    pub arg: u32,
}

// Copy whatever the element types: the struct holds only pointers to them and plain numbers.
impl<In, Acc> Clone for ReduceParams<In, Acc> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<In, Acc> Copy for ReduceParams<In, Acc> {}

// Copy whatever the element types: the struct holds only pointers to them and plain numbers.
impl<In, Acc, Partial> Clone for SegmentedParams<In, Acc, Partial> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<In, Acc, Partial> Copy for SegmentedParams<In, Acc, Partial> {}

// Copy whatever the element types: the struct holds only pointers to them and plain numbers.
impl<T, C> Clone for HistogramParams<T, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, C> Copy for HistogramParams<T, C> {}

// Copy whatever the element types: the struct holds only pointers to them and plain numbers.
impl<X> Clone for LaneParams<X> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<X> Copy for LaneParams<X> {}
