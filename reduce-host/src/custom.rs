//! Your own operator: a [`ReduceOp`] defined once, in a `no_std` crate that both your kernel crate and your
//! program depend on, compiled by `reduce-builder` from your `build.rs`, and run by the same dispatch as the
//! built-in reductions (combine strategies, dependent launch, views and their checks, cudarc streams,
//! blocking and `*_async` calls, 64-bit lengths, any offset, and the three segment layouts).
//!
//! The two snippets below are not compiled as doctests: the first is a build script (it needs
//! `reduce-builder` and a kernel crate at `kernels/`), the second needs the `OUT_DIR` that build script
//! writes. `examples/custom-op` is the whole of it, built and run in CI. In `build.rs` (with
//! `reduce-builder` as a build dependency):
//!
//! ```ignore
//! fn main() -> Result<(), reduce_builder::Error> {
//!     reduce_builder::Builder::new("kernels").build().map(|_| ())
//! }
//! ```
//!
//! and in the program:
//!
//! ```ignore
//! use reduce_host::custom::{KernelImages, Kernels};
//! static KERNELS: KernelImages = reduce_host::include_kernels!("my_kernels");
//!
//! let mut reduce = reduce_host::DeviceReduce::new()?;
//! let kernels = Kernels::load(reduce.gpu(), &KERNELS)?;
//! let scale: f32 = reduce.reduce_with::<my_ops::AbsMax<f32>>(&kernels, &x)?;
//! ```
//!
//! The kernels are found by name: the device's `export_reduce!(absmax = AbsMax<_>; f32)` exports
//! `reduce_partials_absmax_f32` and the others, and the host asks for `reduce_partials_{NAME}_{element}`
//! of the operator it is given. An operator the kernel crate did not export is an
//! [`Error::MissingKernel`] naming the kernel.
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cust::memory::DeviceCopy;
use reduce_contract::kernels::{
    FloatElem, Key, ReducePass, SegmentedPass, SelectPass, Stat, StatKernel, StatPass,
};
use reduce_contract::layout::MAX_OP_ACC_BYTES;
pub use reduce_contract::op::{Element as OpElement, Float, Pod, ReduceOp, SelectOp};
use reduce_contract::stats::Statistic;

use crate::dispatch::Source;
use crate::dispatch::select::{Pick, Selection};
use crate::driver::{Function, Module};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::images::{self, Code};
use crate::reduce::DeviceReduce;
use crate::segmented::DeviceSegmentedReduce;
use crate::segments::Segments;
use crate::select::{DeviceSelect, SelectElement};
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};

/// One arch's code of a kernel crate, embedded by the file `reduce-builder` writes.
#[derive(Clone, Copy, Debug)]
pub struct Embedded {
    code: Code,
    bytes: &'static [u8],
}

impl Embedded {
    /// Machine code for `sm_{arch}` (`arch` = `major * 10 + minor`).
    pub const fn cubin(arch: u32, bytes: &'static [u8]) -> Embedded {
        Embedded {
            code: Code::Cubin { arch },
            bytes,
        }
    }

    /// PTX for `sm_{arch}`, NUL-terminated (the driver's format), JIT-compiled on first load.
    pub const fn ptx(arch: u32, bytes: &'static [u8]) -> Embedded {
        Embedded {
            code: Code::Ptx { arch },
            bytes,
        }
    }
}

/// A kernel crate's code for every arch it was built for: what [`include_kernels!`](crate::include_kernels)
/// gives, and [`Kernels::load`] takes.
#[derive(Clone, Copy, Debug)]
pub struct KernelImages {
    name: &'static str,
    images: &'static [Embedded],
}

impl KernelImages {
    /// The images of the kernel crate `name` (its library name, used in messages).
    pub const fn new(name: &'static str, images: &'static [Embedded]) -> KernelImages {
        KernelImages { name, images }
    }

    /// The kernel crate's library name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The images `reduce-builder` wrote for the kernel crate whose library is called `$name`, as a
/// [`KernelImages`]: `static KERNELS: KernelImages = reduce_host::include_kernels!("my_kernels");`. Use it
/// in the crate whose `build.rs` ran the builder.
#[macro_export]
macro_rules! include_kernels {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/", $name, "_images.rs"))
    };
}

/// A user operator's accumulator in device memory: the output of the `*_async` and per-segment calls.
/// `repr(transparent)`, so a buffer of them is a buffer of `A`; `.0` is the accumulator, and
/// [`ReduceOp::finalize`] turns it into the result.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(transparent)]
pub struct OpAcc<A>(pub A);

// SAFETY: `A: Pod` holds no pointers or references and has no padding, so its bytes mean the same on the
// device, and any value the device's operator code produced is a valid `A` on the host.
unsafe impl<A: Pod> DeviceCopy for OpAcc<A> {}

/// Which kernels of an operator: the device-wide ones, the per-segment ones, or a predicate's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpFamily {
    Reduce,
    Segmented,
    Select,
}

impl OpFamily {
    /// The kernels' names without the operator and element, in the order of the built-in family's passes
    /// (the slots the dispatch asks for): `reduce_partials`, … and `segmented_tile`, ….
    fn kernels(self) -> Vec<String> {
        fn named<K: Key>(family: &str) -> Vec<String> {
            K::ALL
                .iter()
                .map(|k| format!("{family}_{}", k.word()))
                .collect()
        }
        match self {
            OpFamily::Reduce => named::<ReducePass>("reduce"),
            OpFamily::Segmented => named::<SegmentedPass>("segmented"),
            OpFamily::Select => named::<SelectPass>("select"),
        }
    }
}

/// One operator's kernels of one family, resolved: what the dispatch launches.
pub(crate) struct OpKernels {
    functions: Functions,
    acc_bytes: usize,
    code: Code,
}

/// Where an operator's kernels are: resolved from a user's kernel crate, or a statistic's module of the
/// library's own images (loaded on first use, as every built-in module).
enum Functions {
    Loaded(Vec<Function>),
    Library {
        gpu: Gpu,
        stat: Stat,
        elem: FloatElem,
        family: OpFamily,
    },
}

impl OpKernels {
    /// The library's kernels of the statistic `O`, of `family` (device-wide or per segment).
    pub(crate) fn statistic<O: Statistic>(gpu: &Gpu, family: OpFamily) -> Result<OpKernels>
    where
        O::In: Element,
    {
        let elem = <O::In as Element>::ELEM
            .float()
            .ok_or_else(|| Error::InvalidArgument(format!("{} reads no float element", O::NAME)))?;
        Ok(OpKernels {
            functions: Functions::Library {
                gpu: gpu.clone(),
                stat: O::STAT,
                elem,
                family,
            },
            acc_bytes: size_of::<O::Acc>(),
            code: gpu.info().code,
        })
    }

    /// The kernel in `slot`, its pass's position in the family's order. The context must be current.
    pub fn function(&self, slot: usize) -> Result<&Function> {
        let missing =
            || Error::InvalidArgument(format!("an operator has no kernel in slot {slot}"));
        match &self.functions {
            Functions::Loaded(functions) => functions.get(slot).ok_or_else(missing),
            &Functions::Library {
                ref gpu,
                stat,
                elem,
                family,
            } => {
                let pass = match family {
                    OpFamily::Reduce => ReducePass::ALL.get(slot).map(|&p| StatPass::Reduce(p)),
                    OpFamily::Segmented => SegmentedPass::ALL
                        .get(slot)
                        .map(|&p| StatPass::Segmented(p)),
                    OpFamily::Select => None,
                };
                gpu.function(StatKernel(stat, elem, pass.ok_or_else(missing)?))
            }
        }
    }

    /// The operator's accumulator size, which sizes the kernels' shared memory.
    pub fn acc_bytes(&self) -> usize {
        self.acc_bytes
    }

    /// The code the kernels were loaded from.
    pub fn code(&self) -> Code {
        self.code
    }
}

/// One family of one operator, resolved: (family, operator name, element name, its kernels).
type Resolved = (OpFamily, &'static str, &'static str, Arc<OpKernels>);

/// A kernel crate loaded on one device: its module (the cubin for the device, else the PTX), and the kernels
/// of each operator resolved the first time a call uses it. Share it between handles of the same [`Gpu`].
pub struct Kernels {
    name: &'static str,
    code: Code,
    /// Resolved families, by (family, operator name, element name): a handful per program.
    resolved: Mutex<Vec<Resolved>>,
    // Declared after what it resolves: the module unloads (in its context) last.
    module: InContext<Module>,
    gpu: Gpu,
}

impl Kernels {
    /// Loads `images` on `gpu`: the newest cubin the device runs, else the newest PTX it can JIT-compile
    /// (`REDUCE_HOST_FORCE_PTX=1` forces the PTX), by the rule of the built-in kernels.
    pub fn load(gpu: &Gpu, images: &KernelImages) -> Result<Kernels> {
        let (major, minor) = gpu.info().compute_capability;
        let codes = images.images.iter().map(|e| e.code);
        let Some(i) = images::pick(codes, major, minor, images::force_ptx()) else {
            return Err(Error::ModuleLoad {
                module: images.name.to_string(),
                code: gpu.info().code,
                message: format!(
                    "the kernel crate was built for {:?}, none of which runs on sm_{major}{minor}",
                    images.images.iter().map(|e| e.code).collect::<Vec<_>>()
                ),
            });
        };
        let image = images.images[i];
        let _current = gpu.make_current()?;
        let module = Module::load_named(image.bytes, images.name, &[], image.code)?;
        Ok(Kernels {
            name: images.name,
            code: image.code,
            resolved: Mutex::new(Vec::new()),
            module: InContext::new(gpu, module),
            gpu: gpu.clone(),
        })
    }

    /// The code that was loaded: a cubin, or PTX the driver compiled.
    pub fn code(&self) -> Code {
        self.code
    }

    /// `O`'s kernels of `family`, resolved on first use; refused for a handle on another device.
    fn family<O: ReduceOp>(&self, gpu: &Gpu, family: OpFamily) -> Result<Arc<OpKernels>> {
        let elem = <O::In as OpElement>::NAME;
        self.resolve(
            gpu,
            family,
            O::NAME,
            elem,
            Some(size_of::<O::Acc>()),
            || std::any::type_name::<O>(),
        )
    }

    /// The compaction kernels of the predicate `S`, resolved on first use.
    fn select<S: SelectOp>(&self, gpu: &Gpu) -> Result<Arc<OpKernels>> {
        let elem = <S::In as OpElement>::NAME;
        self.resolve(gpu, OpFamily::Select, S::NAME, elem, None, || {
            std::any::type_name::<S>()
        })
    }

    /// The kernels of `family` for the operator or predicate `op` over `elem`, resolved on first use, and,
    /// for reductions, their accumulator checked against the host's `acc_bytes`.
    fn resolve(
        &self,
        gpu: &Gpu,
        family: OpFamily,
        op: &'static str,
        elem: &'static str,
        acc_bytes: Option<usize>,
        type_name: impl Fn() -> &'static str,
    ) -> Result<Arc<OpKernels>> {
        if gpu.raw_context() != self.gpu.raw_context() {
            return Err(Error::InvalidArgument(format!(
                "the kernels of {} were loaded on device {}, but this handle runs on device {}",
                self.name,
                self.gpu.info().ordinal,
                gpu.info().ordinal
            )));
        }
        let mut resolved = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((.., k)) = resolved
            .iter()
            .find(|(f, o, e, _)| (*f, *o, *e) == (family, op, elem))
        {
            return Ok(k.clone());
        }
        let _current = self.gpu.make_current()?;
        let c_name = |name: String| {
            CString::new(name).map_err(|_| {
                Error::InvalidArgument(format!("the operator name {op:?} holds a NUL"))
            })
        };
        let functions = family
            .kernels()
            .into_iter()
            .map(|kind| {
                self.module
                    .resolve(&c_name(format!("{kind}_{op}_{elem}"))?, self.name)
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some(acc_bytes) = acc_bytes {
            // The kernels' accumulator must be the host's: kernels built from another version of the
            // operator would write more (or fewer) bytes than the buffers the host sizes by `O::Acc`.
            let global = c_name(format!("reduce_acc_bytes_{op}_{elem}"))?;
            match self.module.global_size(&global)? {
                Some(bytes) if bytes == acc_bytes && acc_bytes <= MAX_OP_ACC_BYTES => {}
                Some(bytes) => {
                    return Err(Error::InvalidArgument(format!(
                        "the kernels of {op} for {elem} in {} keep a {bytes}-byte accumulator, but this \
                         program's {} is {acc_bytes} bytes: rebuild the kernel crate from the same operator",
                        self.name,
                        type_name()
                    )));
                }
                None => {
                    return Err(Error::MissingKernel {
                        kernel: global.to_string_lossy().into_owned(),
                        module: self.name.to_string(),
                        source: crate::error::DriverError::from(cust::error::CudaError::NotFound),
                    });
                }
            }
        }
        let kernels = Arc::new(OpKernels {
            functions: Functions::Loaded(functions),
            acc_bytes: acc_bytes.unwrap_or(0),
            code: self.code,
        });
        resolved.push((family, op, elem, kernels.clone()));
        Ok(kernels)
    }
}

impl DeviceReduce {
    /// Reduces `input` with your operator `O`, whose kernels `kernels` holds, and returns
    /// [`O::finalize`](ReduceOp::finalize) of the result (of the identity for an empty input). Runs on the
    /// handle's stream and waits, as [`sum`](Self::sum) does; the combine strategy is the handle's
    /// ([`Combine::Atomic`](crate::Combine::Atomic) is for the built-in sums only).
    pub fn reduce_with<'a, O: ReduceOp<Acc: Pod>>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, O::In>>,
    ) -> Result<O::Out>
    where
        O::In: Element,
    {
        let ops = kernels.family::<O>(self.gpu(), OpFamily::Reduce)?;
        let acc: O::Acc = self.blocking_with(Source::User(&ops), input.into())?;
        Ok(O::finalize(acc))
    }

    /// Enqueues the reduction of `input` by `O` into `out[0]` (the accumulator, not finalized) on `stream`
    /// and returns without waiting; an empty input writes [`O::identity`](ReduceOp::identity).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn reduce_with_async<'s, 'a, 'b, O: ReduceOp<Acc: Pod>>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, O::In>>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = kernels.family::<O>(self.gpu(), OpFamily::Reduce)?;
        self.enqueue_into_with(Source::User(&ops), input.into(), out.into(), stream.into())
    }
}

impl DeviceSegmentedReduce {
    /// Writes the accumulator of each segment by your operator `O` to `out[s]` and waits (an empty segment
    /// gives [`O::identity`](ReduceOp::identity)); [`O::finalize`](ReduceOp::finalize) turns each into its
    /// result. The `index` each element is lifted with is its position within its segment.
    pub fn reduce_with<'a, 'b, O: ReduceOp<Acc: Pod>>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, O::In>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = kernels.family::<O>(self.gpu(), OpFamily::Segmented)?;
        self.run(Source::User(&ops), input, segments, out, None)
    }

    /// Enqueues [`reduce_with`](Self::reduce_with) on `stream` and returns without waiting. Bad offsets are
    /// not reported (their segments reduce as empty).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn reduce_with_async<'s, 'a, 'b, O: ReduceOp<Acc: Pod>>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, O::In>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = kernels.family::<O>(self.gpu(), OpFamily::Segmented)?;
        self.run(
            Source::User(&ops),
            input,
            segments,
            out,
            Some(stream.into()),
        )
    }
}

impl DeviceSelect {
    /// Copies the elements of `input` that your predicate `S` keeps (given `threshold`), whose kernels
    /// `kernels` holds, to `out[..count]` **in unspecified order**, and returns `count`, as
    /// [`select_if`](Self::select_if) does with a built-in predicate. `out` must hold at least
    /// `input.len()` elements.
    pub fn select_if_with<'a, 'b, S: SelectOp>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, S::In>>,
        threshold: S::In,
        out: impl Into<DeviceViewMut<'b, S::In>>,
    ) -> Result<u64>
    where
        S::In: SelectElement,
    {
        let ops = kernels.select::<S>(self.gpu())?;
        let selection = Selection::by_predicate(false, Pick::User(&ops), threshold);
        self.blocking(selection, input.into(), out.into())
    }

    /// As [`select_if_with`](Self::select_if_with), in input order (as
    /// [`select_if_stable`](Self::select_if_stable)).
    pub fn select_if_stable_with<'a, 'b, S: SelectOp>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, S::In>>,
        threshold: S::In,
        out: impl Into<DeviceViewMut<'b, S::In>>,
    ) -> Result<u64>
    where
        S::In: SelectElement,
    {
        let ops = kernels.select::<S>(self.gpu())?;
        let selection = Selection::by_predicate(true, Pick::User(&ops), threshold);
        self.blocking(selection, input.into(), out.into())
    }

    /// Enqueues [`select_if_with`](Self::select_if_with) on `stream`, with the count written to
    /// `count[0]`, and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async).
    pub unsafe fn select_if_with_async<'s, 'a, 'b, S: SelectOp>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, S::In>>,
        threshold: S::In,
        out: impl Into<DeviceViewMut<'b, S::In>>,
        count: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        S::In: SelectElement,
    {
        let ops = kernels.select::<S>(self.gpu())?;
        let selection = Selection::by_predicate(false, Pick::User(&ops), threshold);
        self.enqueue_into(
            selection,
            input.into(),
            out.into(),
            count.into(),
            stream.into(),
        )
    }

    /// Enqueues [`select_if_stable_with`](Self::select_if_stable_with) on `stream`, with the count written
    /// to `count[0]`, and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async).
    pub unsafe fn select_if_stable_with_async<'s, 'a, 'b, S: SelectOp>(
        &mut self,
        kernels: &Kernels,
        input: impl Into<DeviceView<'a, S::In>>,
        threshold: S::In,
        out: impl Into<DeviceViewMut<'b, S::In>>,
        count: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        S::In: SelectElement,
    {
        let ops = kernels.select::<S>(self.gpu())?;
        let selection = Selection::by_predicate(true, Pick::User(&ops), threshold);
        self.enqueue_into(
            selection,
            input.into(),
            out.into(),
            count.into(),
            stream.into(),
        )
    }
}
