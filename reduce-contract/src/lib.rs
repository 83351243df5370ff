//! The contract between `reduce-host` and `kernels-gpu`, in one `no_std` crate that both depend on: the
//! host is built for the CPU, the kernels for `nvptx64-nvidia-cuda`, and this crate for both.
//!
//! | module | what both sides take from it |
//! |---|---|
//! | [`op`] | [`ReduceOp`], the operator a user brings, and the [`Element`] names of its inputs |
//! | [`builtin`] | the built-in `sum`, `max`, `min`, `argmax` and `argmin`, written as [`ReduceOp`]s |
//! | [`kernels`] | every kernel as a type ([`Kernel`], [`Takes`]): its module, its slot, its name and its parameters |
//! | [`params`] | one `#[repr(C)]` parameter struct per kernel family: each kernel takes one by value |
//! | [`math`] | `mul_add`, one rounding on the GPU, for operators' inner loops |
//! | [`layout`] | accumulator layouts ([`Indexed`]) and the constants both sides size memory and grids by |
//! | [`stats`] | the statistics (`var_mean`, `aminmax`, norms, `logsumexp`) as [`ReduceOp`]s |
//! | [`topk`] | top-k's order-preserving keys, its composite-key rule and the state its passes share |
//! | [`reproducible`] | the reproducible sum's fixed partition and accumulator arithmetic, run by both sides |
//!
//! Names are spelled by one rule: the device names its entries with [`kernel_name!`] in `export_name`, and
//! the module tables here derive the names the host loads from the same words ([`kernels::name::Name`]).
//! The lists of kernels ([`reduce_pairs!`] and the others) are written once, and the device generates its
//! entries from them.
//! The host's build script splits the compiled PTX by [`Module::all`] and refuses a build in which an
//! entry is in no module, or a module's kernel is missing.
#![no_std]
// The GPU build (nightly) fuses `math::mul_add` and has IEEE `maximum`; the host build stays on stable.
#![cfg_attr(
    target_arch = "nvptx64",
    feature(core_float_math, asm_experimental_arch, float_minimum_maximum)
)]
#![warn(missing_docs)]

pub mod builtin;
pub mod kernels;
pub mod layout;
pub mod math;
pub mod op;
pub mod params;
pub mod reproducible;
pub mod stats;
pub mod topk;

pub use kernels::{Elem, FloatElem, Kernel, Module, Op, Pred, Sample, Takes};
pub use layout::{Indexed, SoftmaxStats};
pub use op::{Element, Float, Pod, ReduceOp, SelectOp};
