//! Typed kernel identity. Each kind of kernel is a type implementing [`Kernel`] (where it is) and
//! [`Takes`] (which parameter struct it is launched with). The host's one launch function requires
//! `K: Takes<P>`, so launching a kernel with another family's parameters does not compile; and each type
//! holds only keys that exist (the atomic kernel is [`SumAtomic`], a sum by construction; a reproducible
//! kernel takes a [`FloatElem`]), so an impossible kernel cannot be named.
use core::fmt::Debug;

use super::keys::{
    Counter, Elem, FloatElem, Key, Op, Place, Pred, ReducePass, ReproPass, ReproSegmentsPass,
    RowTopKPass, Sample, SeedVersion, SegmentedPass, SelectPass, Stat, TopKPass,
};
use super::module::Module;
use super::name::Name;
use crate::layout::Indexed;
use crate::params::{
    HistogramParams, LaneParams, ReduceParams, ReproParams, RowTopKParams, SegmentedParams,
    SelectParams, SpinParams, TopKParams, UnpairParams,
};

/// A kernel of the built-in images: its module and its slot there.
pub trait Kernel: Copy + Debug {
    /// The module that holds it.
    fn module(self) -> Module;

    /// Its position among the module's kernels ([`Module::kernel`]).
    fn slot(self) -> usize;

    /// The size in bytes of the parameter struct it takes: the `ptx` test compares it with the entry's
    /// declared parameter.
    fn param_bytes(self) -> usize;

    /// Its exported name.
    fn name(self) -> Name {
        self.module()
            .kernel(self.slot())
            .expect("a typed kernel's slot is in its module")
    }
}

/// `K: Takes<P>`: kernel `K` is launched with `P` by value. Only the pairings below exist.
pub trait Takes<P>: Kernel {}

/// A family of kernels that differ only by their pass: what the host's dispatch holds while it chooses
/// passes by the input's shape. Its passes' order is the slot order of its module, and of a user's kernels
/// of the same family.
pub trait Family: Copy + Debug {
    /// Which kernel of the family; its order is the slot order.
    type Pass: Key;
    /// The kernel type.
    type Kernel: Kernel;
    /// The kernel of `pass`.
    fn kernel(self, pass: Self::Pass) -> Self::Kernel;
}

/// Implements [`Kernel`] for `$k` from its module and slot, and [`Takes`] for each parameter struct,
/// sizing the parameter by the listed instance (the structs hold pointers and 64-bit words, so every
/// instance of one has the same size, except where the element is a field: `SelectParams<f32>`).
macro_rules! kernel {
    ($k:ty, |$s:ident| ($module:expr, $slot:expr), [$($g:ident),*] $p:ty, $sized:ty) => {
        impl Kernel for $k {
            #[allow(unused_variables)]
            fn module(self) -> Module {
                let $s = self;
                $module
            }
            #[allow(unused_variables)]
            fn slot(self) -> usize {
                let $s = self;
                $slot
            }
            fn param_bytes(self) -> usize {
                size_of::<$sized>()
            }
        }
        impl<$($g),*> Takes<$p> for $k {}
    };
}

/// A built-in device-wide reduction: an operator over an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// The operator.
    pub op: Op,
    /// The element.
    pub elem: Elem,
}

/// A pass of a built-in device-wide reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReduceKernel(pub Reduction, pub ReducePass);

impl Family for Reduction {
    type Pass = ReducePass;
    type Kernel = ReduceKernel;
    fn kernel(self, pass: ReducePass) -> ReduceKernel {
        ReduceKernel(self, pass)
    }
}

kernel!(ReduceKernel, |k| (Module::Reduce(k.0.op, k.0.elem), k.1.ordinal()),
    [In, Acc] ReduceParams<In, Acc>, ReduceParams<u8, u8>);

/// The single-pass sum with atomic adds into a zeroed `out`: sums only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SumAtomic(pub Elem);

kernel!(SumAtomic, |k| (Module::Reduce(Op::Sum, k.0), ReducePass::COUNT),
    [In, Acc] ReduceParams<In, Acc>, ReduceParams<u8, u8>);

/// What a built-in per-segment reduction computes: an operator over an element, or the fused softmax
/// statistics of a sample type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PerSegment {
    /// A built-in operator.
    Op(Op, Elem),
    /// Max and Σ exp(x − max) per segment.
    Softmax(Sample),
}

/// A kernel of a built-in per-segment reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentedKernel(pub PerSegment, pub SegmentedPass);

impl Family for PerSegment {
    type Pass = SegmentedPass;
    type Kernel = SegmentedKernel;
    fn kernel(self, pass: SegmentedPass) -> SegmentedKernel {
        SegmentedKernel(self, pass)
    }
}

impl PerSegment {
    /// The module of its kernels.
    pub const fn module(self) -> Module {
        match self {
            PerSegment::Op(op, elem) => Module::Segmented(op, elem),
            PerSegment::Softmax(sample) => Module::Softmax(sample),
        }
    }
}

kernel!(SegmentedKernel, |k| (k.0.module(), k.1.ordinal()),
    [In, Acc, Partial] SegmentedParams<In, Acc, Partial>, SegmentedParams<u8, u8>);

/// Which kernel of a statistic's module: a device-wide pass or a per-segment one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatPass {
    /// `reduce_<pass>_<stat>_<elem>`, taking [`ReduceParams`].
    Reduce(ReducePass),
    /// `segmented_<pass>_<stat>_<elem>`, taking [`SegmentedParams`].
    Segmented(SegmentedPass),
}

/// A kernel of a statistic ([`crate::stats`]) over a float element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatKernel(pub Stat, pub FloatElem, pub StatPass);

impl Kernel for StatKernel {
    fn module(self) -> Module {
        Module::Stat(self.0, self.1)
    }
    fn slot(self) -> usize {
        match self.2 {
            StatPass::Reduce(p) => p.ordinal(),
            StatPass::Segmented(p) => ReducePass::COUNT + p.ordinal(),
        }
    }
    fn param_bytes(self) -> usize {
        match self.2 {
            StatPass::Reduce(_) => size_of::<ReduceParams<u8, u8>>(),
            StatPass::Segmented(_) => size_of::<SegmentedParams<u8, u8>>(),
        }
    }
}

/// A kernel of the reproducible sum of a float.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReproKernel(pub FloatElem, pub ReproPass);

kernel!(ReproKernel, |k| (Module::ReproSum(k.0), k.1.ordinal()),
    [In, Acc, Out] ReproParams<In, Acc, Out>, ReproParams<u8, u8, u8>);

/// The per-segment reproducible sums of a float: a family of its own, since its passes differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReproSegments(pub FloatElem);

/// A kernel of the per-segment reproducible sums of a float.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReproSegmentsKernel(pub FloatElem, pub ReproSegmentsPass);

impl Family for ReproSegments {
    type Pass = ReproSegmentsPass;
    type Kernel = ReproSegmentsKernel;
    fn kernel(self, pass: ReproSegmentsPass) -> ReproSegmentsKernel {
        ReproSegmentsKernel(self.0, pass)
    }
}

kernel!(ReproSegmentsKernel, |k| (Module::ReproSegments(k.0), k.1.ordinal()),
    [In, Acc, Partial] SegmentedParams<In, Acc, Partial>, SegmentedParams<u8, u8>);

/// An even-bin histogram kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistogramKernel {
    /// The sample type.
    pub sample: Sample,
    /// Where the counters live while counting.
    pub place: Place,
    /// The counter type.
    pub counter: Counter,
}

kernel!(HistogramKernel,
    |k| (Module::Histogram(k.sample), k.place.ordinal() * Counter::COUNT + k.counter.ordinal()),
    [T, C] HistogramParams<T, C>, HistogramParams<u8, u8>);

/// The byte histogram (256 bins of `u8` samples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistogramBytes(pub Counter);

kernel!(HistogramBytes, |k| (Module::HistogramBytes, k.0.ordinal()),
    [T, C] HistogramParams<T, C>, HistogramParams<u8, u8>);

/// What a compaction by predicate keeps: a comparison of any element type, or the finite floats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectBy {
    /// `gt`, `lt` or `nonzero` (against the `threshold` parameter where it has one).
    Compare(Pred, Elem),
    /// The finite values of a float.
    Finite(FloatElem),
}

impl SelectBy {
    /// The module of its kernels.
    pub const fn module(self) -> Module {
        match self {
            SelectBy::Compare(pred, elem) => Module::Select(pred, elem),
            SelectBy::Finite(elem) => Module::SelectFinite(elem),
        }
    }
}

/// A compaction by a predicate. Its parameters, [`SelectParams<T>`], hold the element type's threshold;
/// the struct has the same layout for every element type (the threshold takes one aligned 8-byte word),
/// which the host builds with the element of the kernel's [`SelectBy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectKernel(pub SelectBy, pub SelectPass);

kernel!(SelectKernel, |k| (k.0.module(), k.1.ordinal()), [T] SelectParams<T>, SelectParams<u8>);

/// Compaction by a byte mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectFlagged(pub Elem);

kernel!(SelectFlagged, |k| (Module::SelectFlagged(k.0), 0), [T] SelectParams<T>, SelectParams<u8>);

// Every element type packs the select parameters alike (the host and device build them with their own `T`).
const _: () = {
    assert!(size_of::<SelectParams<u8>>() == size_of::<SelectParams<f64>>());
    assert!(size_of::<SelectParams<u16>>() == size_of::<SelectParams<u64>>());
    assert!(
        core::mem::offset_of!(SelectParams<u8>, out)
            == core::mem::offset_of!(SelectParams<u64>, out)
    );
};

/// A kernel of the device-wide top-k of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopKKernel(pub Elem, pub TopKPass);

kernel!(TopKKernel, |k| (Module::TopK(k.0), k.1.ordinal()), [T] TopKParams<T>, TopKParams<u8>);

/// A kernel of the per-segment top-k of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowTopKKernel(pub Elem, pub RowTopKPass);

kernel!(RowTopKKernel, |k| (Module::RowTopK(k.0), k.1.ordinal()), [T] RowTopKParams<T>,
    RowTopKParams<u8>);

/// Splits top-k's k = 1 answers, which the argmax (argmin) kernels write as pairs, into the value and
/// index outputs: in the per-segment top-k's module, after its passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unpair(pub Elem);

kernel!(Unpair, |k| (Module::RowTopK(k.0), RowTopKPass::COUNT), [T] UnpairParams<T>,
    UnpairParams<u8>);

/// A version of the seed chapter's f32 sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeedKernel(pub SeedVersion);

kernel!(SeedKernel, |k| (Module::Seed, k.0.ordinal()), [] ReduceParams<f32, f32>,
    ReduceParams<f32, f32>);

/// `util_spin`: one thread busy-waits (benchmarks queue work behind it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spin;

kernel!(Spin, |k| (Module::Testing, 0), [] SpinParams, SpinParams);

/// One of the test-only one-block kernels (`test_…`), found by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TestKernel(usize);

impl TestKernel {
    /// The test kernel called `name`, if there is one (`util_spin` is not one).
    pub fn named(name: &str) -> Option<TestKernel> {
        (1..Module::Testing.kernel_count())
            .find(|&slot| Module::Testing.kernel(slot).is_some_and(|n| n == *name))
            .map(TestKernel)
    }
}

kernel!(TestKernel, |k| (Module::Testing, k.0), [X] LaneParams<X>, LaneParams<u32>);

/// Every built-in kernel, as its [`Kernel::name`] and [`Kernel::param_bytes`], for the checks of the
/// compiled images.
pub fn every_kernel() -> impl Iterator<Item = (Module, Name, usize)> {
    fn entry<K: Kernel>(k: K) -> (Module, Name, usize) {
        (k.module(), k.name(), k.param_bytes())
    }
    let reductions = Elem::ALL
        .iter()
        .flat_map(|&elem| Op::ALL.iter().map(move |&op| Reduction { op, elem }));
    let reduce = reductions
        .clone()
        .flat_map(|r| ReducePass::ALL.iter().map(move |&p| entry(r.kernel(p))));
    let atomic = Elem::ALL.iter().map(|&e| entry(SumAtomic(e)));
    let segments = reductions
        .map(|r| PerSegment::Op(r.op, r.elem))
        .chain(Sample::ALL.iter().map(|&s| PerSegment::Softmax(s)));
    let segmented =
        segments.flat_map(|s| SegmentedPass::ALL.iter().map(move |&p| entry(s.kernel(p))));
    let repro = FloatElem::ALL.iter().flat_map(|&f| {
        ReproPass::ALL
            .iter()
            .map(move |&p| entry(ReproKernel(f, p)))
            .chain(
                ReproSegmentsPass::ALL
                    .iter()
                    .map(move |&p| entry(ReproSegmentsKernel(f, p))),
            )
    });
    let histogram = Sample::ALL.iter().flat_map(|&sample| {
        Place::ALL.iter().flat_map(move |&place| {
            Counter::ALL.iter().map(move |&counter| {
                entry(HistogramKernel {
                    sample,
                    place,
                    counter,
                })
            })
        })
    });
    let bytes = Counter::ALL.iter().map(|&c| entry(HistogramBytes(c)));
    let by = Elem::ALL
        .iter()
        .flat_map(|&e| Pred::ALL.iter().map(move |&p| SelectBy::Compare(p, e)))
        .chain(FloatElem::ALL.iter().map(|&f| SelectBy::Finite(f)));
    let select = by.flat_map(|b| {
        SelectPass::ALL
            .iter()
            .map(move |&s| entry(SelectKernel(b, s)))
    });
    let flagged = Elem::ALL.iter().map(|&e| entry(SelectFlagged(e)));
    let seed = SeedVersion::ALL.iter().map(|&v| entry(SeedKernel(v)));
    let passes = ReducePass::ALL
        .iter()
        .map(|&p| StatPass::Reduce(p))
        .chain(SegmentedPass::ALL.iter().map(|&p| StatPass::Segmented(p)));
    let stats = Stat::ALL.iter().flat_map(move |&stat| {
        let passes = passes.clone();
        FloatElem::ALL.iter().flat_map(move |&elem| {
            passes
                .clone()
                .map(move |pass| entry(StatKernel(stat, elem, pass)))
        })
    });
    let testing = (1..Module::Testing.kernel_count()).map(|s| entry(TestKernel(s)));
    let topk = Elem::ALL
        .iter()
        .flat_map(|&e| TopKPass::ALL.iter().map(move |&p| entry(TopKKernel(e, p))));
    let row_topk = Elem::ALL.iter().flat_map(|&e| {
        RowTopKPass::ALL
            .iter()
            .map(move |&p| entry(RowTopKKernel(e, p)))
            .chain([entry(Unpair(e))])
    });
    reduce
        .chain(atomic)
        .chain(segmented)
        .chain(repro)
        .chain(histogram)
        .chain(bytes)
        .chain(select)
        .chain(flagged)
        .chain(seed)
        .chain([entry(Spin)])
        .chain(testing)
        .chain(stats)
        .chain(topk)
        .chain(row_topk)
}

// `Indexed` is the accumulator of the arg-reductions: the params of a family are sized by pointers alone.
const _: () =
    assert!(size_of::<ReduceParams<u8, u8>>() == size_of::<ReduceParams<f64, Indexed<f64>>>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_every_slot_of_every_module_once() {
        let mut count = 0;
        for (module, name, bytes) in every_kernel() {
            assert!(
                module.kernels().any(|k| k == name),
                "{name} not in {module:?}"
            );
            assert!(bytes > 0);
            count += 1;
        }
        assert_eq!(
            count,
            Module::all().map(|m| m.kernel_count()).sum::<usize>()
        );
        assert_eq!(SumAtomic(Elem::U8).name().as_str(), "reduce_atomic_sum_u8");
        assert_eq!(TestKernel::named("test_block_scan"), Some(TestKernel(1)));
        assert_eq!(TestKernel::named("util_spin"), None);
    }
}
