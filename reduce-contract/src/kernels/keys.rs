//! The values that pick a module or a kernel within it: operators, element types, passes. Each is an enum
//! declared by `keys!`, which also gives it `ALL` (its values in declaration order), `COUNT`, its
//! position in `ALL` and the word it is spelled with in kernel names. Module indices, kernel slots and
//! names are all derived from those, so none is numbered by hand.

/// What every key enum has, for code generic over one (a family's passes).
pub trait Key: Copy + core::fmt::Debug + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];
    /// Its position in [`ALL`](Self::ALL): a pass's slot.
    fn ordinal(self) -> usize;
    /// How kernel and module names spell it.
    fn word(self) -> &'static str;
}

/// Declares a key enum: `Name { Variant = "word", … }`.
macro_rules! keys {
    ($($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $w:literal),* $(,)? })*) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vm])* $v),*
        }

        impl Key for $name {
            const ALL: &'static [$name] = $name::ALL;
            fn ordinal(self) -> usize {
                $name::ordinal(self)
            }
            fn word(self) -> &'static str {
                $name::word(self)
            }
        }

        impl $name {
            /// Every value, in declaration order: the order of module indices and kernel slots.
            pub const ALL: &'static [$name] = &[$($name::$v),*];
            /// How many values there are.
            pub const COUNT: usize = Self::ALL.len();

            /// Its position in [`ALL`](Self::ALL).
            pub const fn ordinal(self) -> usize {
                self as usize
            }

            /// How kernel and module names spell it.
            pub const fn word(self) -> &'static str {
                match self {
                    $($name::$v => $w),*
                }
            }
        }
    )*};
}

keys! {
    /// A built-in reduction operator.
    Op {
        /// Sum (f16/bf16 accumulate in f32, integers in 64 bits).
        Sum = "sum",
        /// Greatest element.
        Max = "max",
        /// Least element.
        Min = "min",
        /// Greatest element and its index.
        ArgMax = "argmax",
        /// Least element and its index.
        ArgMin = "argmin",
    }

    /// A statistic of [`crate::stats`]: an operator written as a user's [`ReduceOp`](crate::op::ReduceOp),
    /// whose kernels the library's images hold (`statistics!` lists them with their words).
    Stat {
        /// [`crate::stats::Welford`]: count, mean, M2.
        Welford = "var_mean",
        /// [`crate::stats::MinMax`]: min and max with their indices.
        MinMax = "aminmax",
        /// [`crate::stats::Summary`]: both of the above.
        Summary = "stats",
        /// [`crate::stats::AbsSum`]: Σ|x|.
        AbsSum = "norm_l1",
        /// [`crate::stats::SquareSum`]: a scaled Σx².
        SquareSum = "norm_l2",
        /// [`crate::stats::AbsMax`]: max |x|.
        AbsMax = "norm_inf",
        /// [`crate::stats::LogSumExp`]: max and Σexp(x − max).
        LogSumExp = "logsumexp",
    }

    /// An element type with built-in reduction kernels.
    #[allow(missing_docs)]
    Elem {
        F32 = "f32",
        F64 = "f64",
        F16 = "f16",
        BF16 = "bf16",
        I32 = "i32",
        U32 = "u32",
        I64 = "i64",
        U64 = "u64",
        U8 = "u8",
    }

    /// A float element type: the elements of the reproducible sum. A separate key, so a reproducible module
    /// of an integer cannot be named.
    #[allow(missing_docs)]
    FloatElem {
        F32 = "f32",
        F64 = "f64",
        F16 = "f16",
        BF16 = "bf16",
    }

    /// A 32- or 16-bit float type: the samples of the even-bin histogram, and the elements of the fused
    /// softmax statistics.
    #[allow(missing_docs)]
    Sample {
        F32 = "f32",
        F16 = "f16",
        BF16 = "bf16",
    }

    /// A compaction predicate of every element type (the float-only `finite` is
    /// [`SelectBy::Finite`](super::SelectBy::Finite)).
    Pred {
        /// `x > threshold`.
        Gt = "gt",
        /// `x < threshold`.
        Lt = "lt",
        /// `x != 0`.
        NonZero = "nonzero",
    }

    /// The passes of a device-wide reduction, each a kernel taking [`crate::params::ReduceParams`].
    ReducePass {
        /// Per-block partials (`input`, `n`, `partials`); with one block, the result itself.
        Partials = "partials",
        /// One block combining `count` partials into `out`.
        Finalize = "finalize",
        /// Single pass; the block that draws the last ticket combines.
        LastBlock = "last_block",
    }

    /// The kernels of a per-segment reduction, each taking [`crate::params::SegmentedParams`]. Which one runs
    /// depends only on the segments' length (see the host's `dispatch::segmented`), so a segment's
    /// reduction order, and its bits, repeat.
    SegmentedPass {
        /// Groups of `width` lanes (1 … 32, a power of two) per segment, `256 / width` segments per block.
        Tile = "tile",
        /// `pieces` blocks per segment, each reducing `piece` chunks into `partials[s · pieces + p]`: with
        /// one piece (and `partials` = `out`) a block per segment; with more, the first pass of very long
        /// segments.
        Block = "block",
        /// One block per segment combining its `pieces` partials in a fixed order (second pass).
        Combine = "combine",
        /// Rows of one whole 16-byte chunk and a partial one (4 … 7 f32): a thread per row,
        /// [`crate::layout::LANE_ROWS`] rows a trip, with the bits of `Tile` at width 1. A kernel of its
        /// own, so that its registers (every row's loads in flight) do not lower the tile's occupancy.
        Rows = "rows",
    }

    /// The kernels of the reproducible sum, each taking [`crate::params::ReproParams`].
    ReproPass {
        /// One partial per chunk of the input (`input`, `n`, `partials`).
        Chunks = "chunks",
        /// One block combining `count` partials into `out`.
        Combine = "combine",
    }

    /// The kernels of per-segment reproducible sums, each taking [`crate::params::SegmentedParams`]. All
    /// give every segment the bits of the reproducible sum of its elements; which one runs changes only the
    /// speed.
    ReproSegmentsPass {
        /// A warp per segment of at most one chunk.
        Warp = "segment_warp",
        /// Any lengths: a block per group of `width` segments (at most its warps; offsets take eight, rows
        /// longer than a chunk one); a warp sums a segment alone up to one chunk (up to four when the block
        /// takes a group), the whole block a longer one.
        Block = "segment_block",
        /// Rows split into chunks, first pass: a warp per (row, chunk) pair, any grid; `pieces` chunks per
        /// row, their accumulators into `partials`, row-major.
        SplitChunks = "segment_chunks",
        /// Rows split into chunks, second pass: a block per row combines its `pieces` partials.
        SplitCombine = "segment_combine",
        /// Rows of at most [`crate::reproducible::THREAD_ROW`] elements: a thread per row, four rows of up
        /// to 4 elements a trip or two of up to 8. A kernel of its own, so that its registers (every row's
        /// loads in flight) do not lower the occupancy of `Warp`, whose one-chunk rows need every warp.
        Rows = "segment_rows",
    }

    /// Where a histogram kernel keeps its counters while it counts.
    Place {
        /// Private copies in shared memory, merged at the end.
        Shared = "shared",
        /// Global atomics (too many bins for shared memory).
        Global = "global",
    }

    /// A histogram's counter type.
    #[allow(missing_docs)]
    Counter {
        U32 = "u32",
        U64 = "u64",
    }

    /// The kernels of a compaction, each taking [`crate::params::SelectParams`].
    SelectPass {
        /// Tiles placed by one atomic add each; output order unspecified.
        Unordered = "unordered",
        /// Single pass with decoupled look-back; input order.
        Stable = "stable",
    }

    /// The kernels of a device-wide top-k, each taking [`crate::params::TopKParams`] (see [`crate::topk`]).
    TopKPass {
        /// One block: reads a sample of the input and chooses the bound (a value key, and an index limit
        /// among ties) above which `Sieve` buffers.
        Sample = "sample",
        /// Copies every element at or above the sample's key to a candidate buffer, counting them by their
        /// first digit.
        Sieve = "sieve",
        /// Counts the first digit of every value key, and the least and greatest key.
        Histogram = "histogram",
        /// One block: finds the bucket of the k-th key and decides the next pass.
        Pick = "pick",
        /// After the first digit: selects what lies above the chosen bucket and counts (and buffers) what
        /// lies in it, reading the input.
        Split = "split",
        /// As `Split`, after a later digit: reading a candidate buffer (or the input again); after the
        /// first digit, when the sieve's buffer holds the candidates.
        Level = "level",
        /// One block, after `Sieve` where its buffer is short: selects the k from it, every digit in turn,
        /// so that the later passes return at once.
        Finish = "finish",
        /// Writes the first k elements: every key is equal.
        Fill = "fill",
        /// One block: sorts at most [`crate::topk::SORT_TILE`] selected pairs and writes the results.
        Sort = "sort",
        /// A block per tile: sorted runs of [`crate::topk::SORT_TILE`] pairs.
        SortBlock = "sort_block",
        /// Merges sorted runs pairwise.
        Merge = "merge",
        /// Writes the results from the sorted pairs.
        Gather = "gather",
    }

    /// The kernels of a per-segment top-k, each taking [`crate::params::RowTopKParams`] (see
    /// [`crate::topk`]'s per-segment section).
    RowTopKPass {
        /// A block per segment (or piece of one): its k best, sorted into the outputs, or unsorted into the
        /// pieces' buffer when segments are split.
        Select = "select",
        /// A block per split segment: the k best of its pieces' results, sorted into the outputs.
        Merge = "merge",
    }

    /// A version of the seed chapter's sum, each taking [`crate::params::ReduceParams`].
    #[allow(missing_docs)]
    SeedVersion {
        V0 = "v0",
        V1 = "v1",
        V2 = "v2",
        V3 = "v3",
        V4 = "v4",
        V5 = "v5",
    }
}

impl Elem {
    /// The same type as a [`FloatElem`], if it is a float.
    pub const fn float(self) -> Option<FloatElem> {
        match self {
            Elem::F32 => Some(FloatElem::F32),
            Elem::F64 => Some(FloatElem::F64),
            Elem::F16 => Some(FloatElem::F16),
            Elem::BF16 => Some(FloatElem::BF16),
            _ => None,
        }
    }
}

impl FloatElem {
    /// The same type as an [`Elem`].
    pub const fn elem(self) -> Elem {
        match self {
            FloatElem::F32 => Elem::F32,
            FloatElem::F64 => Elem::F64,
            FloatElem::F16 => Elem::F16,
            FloatElem::BF16 => Elem::BF16,
        }
    }
}

// A key's word is how the device's `kernel_name!` spells it: the lists name them by these words.
const _: () = {
    let mut i = 0;
    while i < FloatElem::COUNT {
        let f = FloatElem::ALL[i];
        assert!(crate::op::same_name(f.word(), f.elem().word()));
        assert!(f.elem().ordinal() == i);
        i += 1;
    }
};
