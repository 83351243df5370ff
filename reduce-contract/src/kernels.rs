//! Which kernels exist, what they are called, and which module each is loaded in.
//!
//! A module is the unit the host loads, on first use: the kernels of one `(operator, element)` pair, one
//! histogram sample type, one compaction predicate, the reproducible sum of one float type, the seed
//! chapter, or the test-only kernels. A program
//! that only sums f32 therefore loads (and, without a matching cubin, JIT-compiles) four kernels.
//!
//! The lists ([`reduce_pairs!`], [`histogram_samples!`], [`select_predicates!`], [`repro_elems!`],
//! [`tile_test_primitives!`]) are the single source: `kernels-gpu` passes its entry-generating macros to them, and the tables below
//! are generated from them too.
use core::ffi::CStr;

/// The exported symbol of a kernel, as a string literal: `kernels-gpu` puts it in `export_name`, and the
/// tables of this module NUL-terminate it for the driver. The one place kernel names are spelled.
#[macro_export]
macro_rules! kernel_name {
    (reduce $kind:ident $op:ident $ty:ident) => {
        concat!(
            "reduce_",
            stringify!($kind),
            "_",
            stringify!($op),
            "_",
            stringify!($ty)
        )
    };
    (histogram $kind:ident $sample:ident $counter:ident) => {
        concat!(
            "histogram_",
            stringify!($kind),
            "_",
            stringify!($sample),
            "_",
            stringify!($counter)
        )
    };
    (histogram_bytes $counter:ident) => {
        concat!("histogram_bytes_", stringify!($counter))
    };
    (select $kind:ident $pred:ident $ty:ident) => {
        concat!(
            "select_",
            stringify!($kind),
            "_",
            stringify!($pred),
            "_",
            stringify!($ty)
        )
    };
    (segmented $kind:ident $op:ident $ty:ident) => {
        concat!(
            "segmented_",
            stringify!($kind),
            "_",
            stringify!($op),
            "_",
            stringify!($ty)
        )
    };
    (select_flagged $ty:ident) => {
        concat!("select_flagged_", stringify!($ty))
    };
    (seed $version:ident) => {
        concat!("seed_", stringify!($version))
    };
    (repro $kind:ident $ty:ident) => {
        concat!("repro_", stringify!($kind), "_", stringify!($ty))
    };
    (util $name:ident) => {
        concat!("util_", stringify!($name))
    };
    (test $name:ident) => {
        concat!("test_", stringify!($name))
    };
    (tile_test $prim:ident $width:literal) => {
        concat!("test_tile_", stringify!($prim), "_", stringify!($width))
    };
}

/// Calls `$cb! { op elem, ... }` with every `(operator, element)` pair that has reduction kernels, grouped
/// by element in [`Elem`] order, operators in [`Op`] order (the order of [`Module::index`]).
#[macro_export]
macro_rules! reduce_pairs {
    ($cb:ident) => {
        $cb! {
            sum f32, max f32, min f32, argmax f32, argmin f32,
            sum f64, max f64, min f64, argmax f64, argmin f64,
            sum f16, max f16, min f16, argmax f16, argmin f16,
            sum bf16, max bf16, min bf16, argmax bf16, argmin bf16,
            sum i32, max i32, min i32, argmax i32, argmin i32,
            sum u32, max u32, min u32, argmax u32, argmin u32,
            sum i64, max i64, min i64, argmax i64, argmin i64,
            sum u64, max u64, min u64, argmax u64, argmin u64,
            sum u8, max u8, min u8, argmax u8, argmin u8,
        }
    };
}

/// Calls `$cb! { ty, ... }` with every element type of the fused softmax statistics, in [`Sample`] order
/// (the float types that models keep activations in). Each has the four segmented kernels
/// ([`SegmentedKernel`] order), named with the operator `softmax`.
#[macro_export]
macro_rules! softmax_types {
    ($cb:ident) => {
        $cb! { f32, f16, bf16 }
    };
}

/// Calls `$cb! { elem, ... }` with every element type of the reproducible sum, in [`Elem`] order (the
/// floats, which lead it). Each has a `chunks` and a `combine` kernel ([`ReproKernel`]).
#[macro_export]
macro_rules! repro_elems {
    ($cb:ident) => {
        $cb! { f32, f64, f16, bf16 }
    };
}

/// Calls `$cb! { sample, ... }` with every sample type of the even-bin histogram, in [`Sample`] order. Each
/// has a `shared` and a `global` kernel per counter type (`u32`, `u64`).
#[macro_export]
macro_rules! histogram_samples {
    ($cb:ident) => {
        $cb! { f32, f16, bf16 }
    };
}

/// Calls `$cb! { pred elem, ... }` with every compaction predicate and element, in [`Pred`] order. Each has
/// an `unordered` and a `stable` kernel.
#[macro_export]
macro_rules! select_predicates {
    ($cb:ident) => {
        $cb! { gt f32, lt f32, nonzero f32, finite f32 }
    };
}

/// Calls `$cb! { prim, ... }` with every tile primitive that has a test kernel per tile width (32, 16, 8,
/// 4), named by [`kernel_name!`]`(tile_test prim width)`.
#[macro_export]
macro_rules! tile_test_primitives {
    ($cb:ident) => {
        $cb! {
            ranks, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all, sync,
            reduce_sum_u32, reduce_max_u32, reduce_sum_f32, reduce_max_f32,
            all_reduce_sum_u32, all_reduce_max_u32, all_reduce_sum_f32, all_reduce_max_f32,
            inclusive_scan_sum_u32, exclusive_scan_sum_u32, inclusive_scan_sum_f32, exclusive_scan_sum_f32,
            inclusive_scan_max_f32,
        }
    };
}

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Sum (f16/bf16 accumulate in f32, integers in 64 bits).
    Sum,
    /// Greatest element.
    Max,
    /// Least element.
    Min,
    /// Greatest element and its index.
    ArgMax,
    /// Least element and its index.
    ArgMin,
}

/// An element type with reduction kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Elem {
    F32,
    F64,
    F16,
    BF16,
    I32,
    U32,
    I64,
    U64,
    U8,
}

/// A 32- or 16-bit float type: the samples of the even-bin histogram, and the elements of the fused softmax
/// statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Sample {
    F32,
    F16,
    BF16,
}

/// A compaction predicate (on f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pred {
    /// `x > threshold`.
    Gt,
    /// `x < threshold`.
    Lt,
    /// `x != 0`.
    NonZero,
    /// `x` is finite.
    Finite,
}

/// A module: the kernels the host loads together, the first time it needs one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// `partials`, `finalize`, `last_block` ([`ReduceKernel`] order), and for sums `atomic`.
    Reduce(Op, Elem),
    /// `shared_u32`, `shared_u64`, `global_u32`, `global_u64` ([`HistogramKernel`] order).
    Histogram(Sample),
    /// `bytes_u32`, `bytes_u64`.
    HistogramBytes,
    /// `unordered`, `stable`.
    Select(Pred),
    /// `select_flagged_f32`.
    SelectFlagged,
    /// The seed chapter's `v0` … `v5`.
    Seed,
    /// Kernels only tests and benchmarks use: `util_spin`, `test_block_scan`, then the tile tests.
    Testing,
    /// Per-segment reductions: `tile`, `block`, `combine`, `rows` ([`SegmentedKernel`] order).
    Segmented(Op, Elem),
    /// Per-segment softmax statistics (max and Σ exp(x − max)), the same four kernels.
    Softmax(Sample),
    /// The reproducible sum of a float element (f32, f64, f16 or bf16): `chunks`, `combine`
    /// ([`ReproKernel`] order).
    ReproSum(Elem),
    /// Per-segment reproducible sums of a float element: `segment_warp`, `segment_block`,
    /// `segment_chunks`, `segment_combine` ([`ReproSegmentsKernel`] order); they take
    /// [`crate::params::SegmentedParams`].
    ReproSegments(Elem),
}

const OPS: usize = 5;
const ELEMS: usize = 9;
const REDUCE_BASE: usize = 0;
const HISTOGRAM_BASE: usize = REDUCE_BASE + OPS * ELEMS;
const BYTES_INDEX: usize = HISTOGRAM_BASE + 3;
const SELECT_BASE: usize = BYTES_INDEX + 1;
const FLAGGED_INDEX: usize = SELECT_BASE + 4;
const SEED_INDEX: usize = FLAGGED_INDEX + 1;
const TESTING_INDEX: usize = SEED_INDEX + 1;
const SEGMENTED_BASE: usize = TESTING_INDEX + 1;
const SOFTMAX_BASE: usize = SEGMENTED_BASE + OPS * ELEMS;
const REPRO_BASE: usize = SOFTMAX_BASE + 3;
const REPRO_ELEMS: usize = 4;
const REPRO_SEGMENTS_BASE: usize = REPRO_BASE + REPRO_ELEMS;

impl Module {
    /// How many modules there are: [`index`](Self::index) is below this.
    pub const COUNT: usize = REPRO_SEGMENTS_BASE + REPRO_ELEMS;

    /// A dense index in `0..COUNT`, the module's position in [`modules`].
    pub const fn index(self) -> usize {
        match self {
            Module::Reduce(op, elem) => REDUCE_BASE + elem as usize * OPS + op as usize,
            Module::Histogram(sample) => HISTOGRAM_BASE + sample as usize,
            Module::HistogramBytes => BYTES_INDEX,
            Module::Select(pred) => SELECT_BASE + pred as usize,
            Module::SelectFlagged => FLAGGED_INDEX,
            Module::Seed => SEED_INDEX,
            Module::Testing => TESTING_INDEX,
            Module::Segmented(op, elem) => SEGMENTED_BASE + elem as usize * OPS + op as usize,
            Module::Softmax(sample) => SOFTMAX_BASE + sample as usize,
            Module::ReproSum(elem) => REPRO_BASE + elem as usize,
            Module::ReproSegments(elem) => REPRO_SEGMENTS_BASE + elem as usize,
        }
    }

    /// Its kernels and name.
    pub fn spec(self) -> &'static ModuleSpec {
        let i = self.index();
        match self {
            Module::Reduce(..) => &REDUCE[i - REDUCE_BASE],
            Module::Histogram(..) => &HISTOGRAM[i - HISTOGRAM_BASE],
            Module::Select(..) => &SELECT[i - SELECT_BASE],
            Module::HistogramBytes => &SINGLES[0],
            Module::SelectFlagged => &SINGLES[1],
            Module::Seed => &SINGLES[2],
            Module::Testing => &SINGLES[3],
            Module::Segmented(..) => &SEGMENTED[i - SEGMENTED_BASE],
            Module::Softmax(..) => &SOFTMAX[i - SOFTMAX_BASE],
            Module::ReproSum(..) => &REPRO[i - REPRO_BASE],
            Module::ReproSegments(..) => &REPRO_SEGMENTS[i - REPRO_SEGMENTS_BASE],
        }
    }

    /// Whether only tests and benchmarks use it (production code never loads it).
    pub const fn test_only(self) -> bool {
        matches!(self, Module::Testing)
    }
}

/// A module's name (used in file names and messages) and its kernels, in slot order.
#[derive(Debug)]
pub struct ModuleSpec {
    /// Which module.
    pub module: Module,
    /// Its name, e.g. `reduce_sum_f32`.
    pub name: &'static str,
    /// Its kernels' exported names, indexed by [`Kernel::slot`].
    pub kernels: &'static [&'static CStr],
}

/// Every module, in [`Module::index`] order.
pub fn modules() -> impl Iterator<Item = &'static ModuleSpec> {
    REDUCE
        .iter()
        .chain(&HISTOGRAM)
        .chain(&SINGLES[..1])
        .chain(&SELECT)
        .chain(&SINGLES[1..])
        .chain(&SEGMENTED)
        .chain(&SOFTMAX)
        .chain(&REPRO)
        .chain(&REPRO_SEGMENTS)
}

/// A kernel: its module and its position there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// The module that holds it.
    pub module: Module,
    /// Its index in the module's [`ModuleSpec::kernels`].
    pub slot: u8,
}

/// The kernels of a reduction module, in slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKernel {
    /// Per-block partials ([`crate::params::ReduceParams`]: `input`, `n`, `partials`).
    Partials,
    /// One block combining `count` partials into `out`.
    Finalize,
    /// Single pass; the block that draws the last ticket combines.
    LastBlock,
    /// Single pass with atomic adds into a zeroed `out` (sums only).
    Atomic,
}

/// The kernels of a segmented module, in slot order. Every one takes
/// [`crate::params::SegmentedParams`]; which one runs depends only on the segments' length (see the host's
/// `dispatch::segmented`), so a segment's reduction order, and its bits, repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentedKernel {
    /// Groups of `width` lanes (1 … 32, a power of two) per segment, `256 / width` segments per block.
    Tile,
    /// `pieces` blocks per segment, each reducing `piece` chunks into `partials[s · pieces + p]`: with one
    /// piece (and `partials` = `out`) a block per segment; with more, the first pass of very long segments.
    Block,
    /// One block per segment combining its `pieces` partials in a fixed order (second pass).
    Combine,
    /// Rows of one whole 16-byte chunk and a partial one (4 … 7 f32): a thread per row,
    /// [`crate::layout::LANE_ROWS`] rows a trip, with the bits of `Tile` at width 1. A kernel of its own,
    /// so that its registers (every row's loads in flight) do not lower the tile's occupancy.
    Rows,
}

/// The kernels of a reproducible-sum module, in slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReproKernel {
    /// One partial per chunk of the input ([`crate::params::ReproParams`]: `input`, `n`, `partials`).
    Chunks,
    /// One block combining `count` partials into `out`.
    Combine,
}

/// The kernels of a per-segment reproducible-sum module, in slot order. Both give every segment the bits of
/// the reproducible sum of its elements; which one runs changes only the speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReproSegmentsKernel {
    /// A warp per segment of at most one chunk.
    Warp,
    /// Any lengths: a block per group of `width` segments (at most its warps; offsets take eight, rows
    /// longer than a chunk one), a warp per segment of at most one chunk and the whole block per longer one.
    Block,
    /// Rows split into chunks, first pass: a warp per (row, chunk) pair, any grid; `pieces` chunks per
    /// row, their accumulators into `partials`, row-major.
    SplitChunks,
    /// Rows split into chunks, second pass: a block per row combines its `pieces` partials.
    SplitCombine,
}

/// The kernels of a histogram module, in slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HistogramKernel {
    /// Private copies of the counters in shared memory, `u32` counters.
    SharedU32,
    /// As `SharedU32` with `u64` counters.
    SharedU64,
    /// Global atomics (too many bins for shared memory), `u32` counters.
    GlobalU32,
    /// As `GlobalU32` with `u64` counters.
    GlobalU64,
}

/// The kernels of a compaction module, in slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectKernel {
    /// Warp-aggregated atomics; output order unspecified.
    Unordered,
    /// Single pass with decoupled look-back; input order.
    Stable,
}

impl Kernel {
    /// A reduction kernel. `Atomic` exists for [`Op::Sum`] only.
    pub const fn reduce(op: Op, elem: Elem, kernel: ReduceKernel) -> Kernel {
        Kernel {
            module: Module::Reduce(op, elem),
            slot: kernel as u8,
        }
    }

    /// A per-segment reduction kernel.
    pub const fn segmented(op: Op, elem: Elem, kernel: SegmentedKernel) -> Kernel {
        Kernel {
            module: Module::Segmented(op, elem),
            slot: kernel as u8,
        }
    }

    /// A per-segment softmax-statistics kernel.
    pub const fn softmax(sample: Sample, kernel: SegmentedKernel) -> Kernel {
        Kernel {
            module: Module::Softmax(sample),
            slot: kernel as u8,
        }
    }

    /// A reproducible-sum kernel; `elem` must be a float (f32, f64, f16, bf16).
    pub const fn repro(elem: Elem, kernel: ReproKernel) -> Kernel {
        Kernel {
            module: Module::ReproSum(elem),
            slot: kernel as u8,
        }
    }

    /// A per-segment reproducible-sum kernel; `elem` must be a float (f32, f64, f16, bf16).
    pub const fn repro_segments(elem: Elem, kernel: ReproSegmentsKernel) -> Kernel {
        Kernel {
            module: Module::ReproSegments(elem),
            slot: kernel as u8,
        }
    }

    /// An even-bin histogram kernel.
    pub const fn histogram(sample: Sample, kernel: HistogramKernel) -> Kernel {
        Kernel {
            module: Module::Histogram(sample),
            slot: kernel as u8,
        }
    }

    /// The byte histogram, counting in `u32` (`wide = false`) or `u64`.
    pub const fn histogram_bytes(wide: bool) -> Kernel {
        Kernel {
            module: Module::HistogramBytes,
            slot: wide as u8,
        }
    }

    /// A compaction kernel by predicate.
    pub const fn select(pred: Pred, kernel: SelectKernel) -> Kernel {
        Kernel {
            module: Module::Select(pred),
            slot: kernel as u8,
        }
    }

    /// Compaction by a byte mask (f32).
    pub const SELECT_FLAGGED: Kernel = Kernel {
        module: Module::SelectFlagged,
        slot: 0,
    };

    /// Seed kernel `v{version}`, `version` in 0..=5.
    pub const fn seed(version: u8) -> Kernel {
        Kernel {
            module: Module::Seed,
            slot: version,
        }
    }

    /// `util_spin`: one thread busy-waits ([`crate::params::SpinParams`]).
    pub const SPIN: Kernel = Kernel {
        module: Module::Testing,
        slot: 0,
    };

    /// Its exported name.
    pub fn name(self) -> &'static CStr {
        self.module.spec().kernels[self.slot as usize]
    }

    /// The test-only kernel called `name`, if there is one.
    pub fn testing(name: &str) -> Option<Kernel> {
        let kernels = Module::Testing.spec().kernels;
        let slot = kernels
            .iter()
            .position(|k| k.to_bytes() == name.as_bytes())?;
        Some(Kernel {
            module: Module::Testing,
            slot: slot as u8,
        })
    }
}

/// `s` (a literal ending in NUL) as a `CStr`, checked at compile time.
#[doc(hidden)]
pub const fn cstr(s: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(s.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("kernel names are NUL-terminated and hold no other NUL"),
    }
}

/// `kernel_name!(...)` as a `&'static CStr`.
macro_rules! name {
    ($($t:tt)*) => {
        cstr(concat!(kernel_name!($($t)*), "\0"))
    };
}

macro_rules! op {
    (sum) => {
        Op::Sum
    };
    (max) => {
        Op::Max
    };
    (min) => {
        Op::Min
    };
    (argmax) => {
        Op::ArgMax
    };
    (argmin) => {
        Op::ArgMin
    };
}

macro_rules! elem {
    (f32) => {
        Elem::F32
    };
    (f64) => {
        Elem::F64
    };
    (f16) => {
        Elem::F16
    };
    (bf16) => {
        Elem::BF16
    };
    (i32) => {
        Elem::I32
    };
    (u32) => {
        Elem::U32
    };
    (i64) => {
        Elem::I64
    };
    (u64) => {
        Elem::U64
    };
    (u8) => {
        Elem::U8
    };
}

macro_rules! pred {
    (gt) => {
        Pred::Gt
    };
    (lt) => {
        Pred::Lt
    };
    (nonzero) => {
        Pred::NonZero
    };
    (finite) => {
        Pred::Finite
    };
}

/// The kernels of one reduction module: sums have the atomic kernel too.
macro_rules! reduce_kernels {
    (sum $ty:ident) => {
        &[
            name!(reduce partials sum $ty),
            name!(reduce finalize sum $ty),
            name!(reduce last_block sum $ty),
            name!(reduce atomic sum $ty),
        ]
    };
    ($op:ident $ty:ident) => {
        &[name!(reduce partials $op $ty), name!(reduce finalize $op $ty), name!(reduce last_block $op $ty)]
    };
}

macro_rules! reduce_table {
    ($($op:ident $ty:ident),* $(,)?) => {
        static REDUCE: [ModuleSpec; OPS * ELEMS] = [$(ModuleSpec {
            module: Module::Reduce(op!($op), elem!($ty)),
            name: concat!("reduce_", stringify!($op), "_", stringify!($ty)),
            kernels: reduce_kernels!($op $ty),
        }),*];
    };
}
reduce_pairs!(reduce_table);

/// The four kernels of one segmented module, for operator `$op` (`softmax` included).
macro_rules! segmented_kernels {
    ($op:ident $ty:ident) => {
        &[
            name!(segmented tile $op $ty),
            name!(segmented block $op $ty),
            name!(segmented combine $op $ty),
            name!(segmented rows $op $ty),
        ]
    };
}

macro_rules! segmented_table {
    ($($op:ident $ty:ident),* $(,)?) => {
        static SEGMENTED: [ModuleSpec; OPS * ELEMS] = [$(ModuleSpec {
            module: Module::Segmented(op!($op), elem!($ty)),
            name: concat!("segmented_", stringify!($op), "_", stringify!($ty)),
            kernels: segmented_kernels!($op $ty),
        }),*];
    };
}
reduce_pairs!(segmented_table);

macro_rules! histogram_table {
    ($($s:ident),* $(,)?) => {
        static HISTOGRAM: [ModuleSpec; 3] = [$(ModuleSpec {
            module: Module::Histogram(histogram_sample!($s)),
            name: concat!("histogram_", stringify!($s)),
            kernels: &[
                name!(histogram shared $s u32),
                name!(histogram shared $s u64),
                name!(histogram global $s u32),
                name!(histogram global $s u64),
            ],
        }),*];
    };
}
macro_rules! histogram_sample {
    (f32) => {
        Sample::F32
    };
    (f16) => {
        Sample::F16
    };
    (bf16) => {
        Sample::BF16
    };
}
histogram_samples!(histogram_table);

macro_rules! softmax_table {
    ($($ty:ident),* $(,)?) => {
        static SOFTMAX: [ModuleSpec; 3] = [$(ModuleSpec {
            module: Module::Softmax(histogram_sample!($ty)),
            name: concat!("segmented_softmax_", stringify!($ty)),
            kernels: segmented_kernels!(softmax $ty),
        }),*];
    };
}
softmax_types!(softmax_table);

macro_rules! select_table {
    ($($p:ident $ty:ident),* $(,)?) => {
        static SELECT: [ModuleSpec; 4] = [$(ModuleSpec {
            module: Module::Select(pred!($p)),
            name: concat!("select_", stringify!($p), "_", stringify!($ty)),
            kernels: &[name!(select unordered $p $ty), name!(select stable $p $ty)],
        }),*];
    };
}
select_predicates!(select_table);

macro_rules! testing_kernels {
    ($($prim:ident),* $(,)?) => {
        &[
            name!(util spin),
            name!(test block_scan),
            $(
                name!(tile_test $prim 32),
                name!(tile_test $prim 16),
                name!(tile_test $prim 8),
                name!(tile_test $prim 4),
            )*
        ]
    };
}

macro_rules! repro_table {
    ($($ty:ident),* $(,)?) => {
        static REPRO: [ModuleSpec; REPRO_ELEMS] = [$(ModuleSpec {
            module: Module::ReproSum(elem!($ty)),
            name: concat!("repro_sum_", stringify!($ty)),
            kernels: &[name!(repro chunks $ty), name!(repro combine $ty)],
        }),*];
    };
}
repro_elems!(repro_table);

macro_rules! repro_segments_table {
    ($($ty:ident),* $(,)?) => {
        static REPRO_SEGMENTS: [ModuleSpec; REPRO_ELEMS] = [$(ModuleSpec {
            module: Module::ReproSegments(elem!($ty)),
            name: concat!("repro_segments_", stringify!($ty)),
            kernels: &[
                name!(repro segment_warp $ty),
                name!(repro segment_block $ty),
                name!(repro segment_chunks $ty),
                name!(repro segment_combine $ty),
            ],
        }),*];
    };
}
repro_elems!(repro_segments_table);

/// The modules that are not one of a family's many: bytes, flagged, seed, testing.
static SINGLES: [ModuleSpec; 4] = [
    ModuleSpec {
        module: Module::HistogramBytes,
        name: "histogram_bytes",
        kernels: &[name!(histogram_bytes u32), name!(histogram_bytes u64)],
    },
    ModuleSpec {
        module: Module::SelectFlagged,
        name: "select_flagged_f32",
        kernels: &[name!(select_flagged f32)],
    },
    ModuleSpec {
        module: Module::Seed,
        name: "seed",
        kernels: &[
            name!(seed v0),
            name!(seed v1),
            name!(seed v2),
            name!(seed v3),
            name!(seed v4),
            name!(seed v5),
        ],
    },
    ModuleSpec {
        module: Module::Testing,
        name: "testing",
        kernels: tile_test_primitives!(testing_kernels),
    },
];

// Every table entry sits at its module's index, so `spec` and `modules` agree with `index`.
const _: () = {
    let mut i = 0;
    while i < REDUCE.len() {
        assert!(REDUCE[i].module.index() == REDUCE_BASE + i);
        i += 1;
    }
    let mut i = 0;
    while i < HISTOGRAM.len() {
        assert!(HISTOGRAM[i].module.index() == HISTOGRAM_BASE + i);
        i += 1;
    }
    let mut i = 0;
    while i < SELECT.len() {
        assert!(SELECT[i].module.index() == SELECT_BASE + i);
        i += 1;
    }
    assert!(SINGLES[0].module.index() == BYTES_INDEX);
    assert!(SINGLES[1].module.index() == FLAGGED_INDEX);
    assert!(SINGLES[2].module.index() == SEED_INDEX);
    assert!(SINGLES[3].module.index() == TESTING_INDEX);
    let mut i = 0;
    while i < SEGMENTED.len() {
        assert!(SEGMENTED[i].module.index() == SEGMENTED_BASE + i);
        i += 1;
    }
    let mut i = 0;
    while i < SOFTMAX.len() {
        assert!(SOFTMAX[i].module.index() == SOFTMAX_BASE + i);
        i += 1;
    }
    let mut i = 0;
    while i < REPRO.len() {
        assert!(REPRO[i].module.index() == REPRO_BASE + i);
        i += 1;
    }
    assert!(
        REDUCE.len()
            + HISTOGRAM.len()
            + SELECT.len()
            + SINGLES.len()
            + SEGMENTED.len()
            + SOFTMAX.len()
            + REPRO.len()
            + REPRO_SEGMENTS.len()
            == Module::COUNT
    );
};
