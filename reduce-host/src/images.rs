//! The kernel images `build.rs` embeds, and the rule that picks the one a device runs.
//!
//! An image is one arch's code for every module: a cubin per module for sm_75, sm_80, sm_90, sm_100 and
//! sm_120 (when the build had `ptxas`), and PTX for the newest arch as the fallback (for every PTX arch
//! when it had not). Each module is deflated on its own, so a process inflates and loads only the modules
//! it uses.
use reduce_contract::Module;

use crate::error::{Error, Result};

/// Whether an image holds machine code or PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Cubin,
    Ptx,
}

/// One arch's code for every module.
pub(crate) struct Image {
    pub kind: Kind,
    /// `major * 10 + minor` of the arch it was built for.
    pub arch: u32,
    /// The deflated modules, back to back.
    blob: &'static [u8],
    /// Each module's `(offset, length)` in `blob`, in `Module::index` order.
    modules: &'static [(usize, usize)],
}

static IMAGES: &[Image] = include!(concat!(env!("OUT_DIR"), "/images.rs"));

/// The code a device runs, reported in [`DeviceInfo`](crate::DeviceInfo).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Machine code built ahead of time for `sm_{arch}`: loading it compiles nothing.
    Cubin {
        /// `major * 10 + minor`, e.g. 90.
        arch: u32,
    },
    /// PTX for `sm_{arch}`, JIT-compiled by the driver the first time each module is used (cached by the
    /// driver across processes unless `CUDA_CACHE_DISABLE=1`). Taken when no embedded cubin runs on the
    /// device, or when `REDUCE_HOST_FORCE_PTX=1` asks for it.
    Ptx {
        /// `major * 10 + minor`, e.g. 90.
        arch: u32,
    },
}

impl Code {
    /// The arch the code was built for, `major * 10 + minor` (for a cubin, the PTX it came from is that arch
    /// or older, never newer).
    pub(crate) fn arch(&self) -> u32 {
        match *self {
            Code::Cubin { arch } | Code::Ptx { arch } => arch,
        }
    }
}

impl Image {
    /// What [`Code`] this image is.
    pub fn code(&self) -> Code {
        match self.kind {
            Kind::Cubin => Code::Cubin { arch: self.arch },
            Kind::Ptx => Code::Ptx { arch: self.arch },
        }
    }

    /// The module's code, inflated: a cubin, or NUL-terminated PTX.
    pub fn module(&self, module: Module) -> Result<Vec<u8>> {
        let (start, len) = self.modules[module.index()];
        miniz_oxide::inflate::decompress_to_vec(&self.blob[start..start + len]).map_err(|e| {
            Error::ModuleLoad {
                module: module.name().to_string(),
                code: self.code(),
                message: format!("the embedded image does not inflate: {e:?}"),
            }
        })
    }
}

/// Whether `REDUCE_HOST_FORCE_PTX` asks for the PTX instead of the cubins (for the built-in kernels and a
/// user's alike).
pub(crate) fn force_ptx() -> bool {
    std::env::var_os("REDUCE_HOST_FORCE_PTX").is_some_and(|v| v != "0" && !v.is_empty())
}

/// The image for a device of compute capability `(major, minor)`: the newest cubin of the same major
/// version and a minor version no higher (the rule for running SASS), else the newest PTX not newer than
/// the device (PTX JIT-compiles forward). `force_ptx` skips the cubins. `None`: nothing runs there.
pub(crate) fn choose(major: u32, minor: u32, force_ptx: bool) -> Option<&'static Image> {
    choose_from(IMAGES, major, minor, force_ptx)
}

fn choose_from(
    images: &'static [Image],
    major: u32,
    minor: u32,
    force_ptx: bool,
) -> Option<&'static Image> {
    let i = pick(images.iter().map(|i| i.code()), major, minor, force_ptx)?;
    Some(&images[i])
}

/// Which of `codes` a device of compute capability `(major, minor)` runs (by position): the newest cubin of
/// the same major version and a minor version no higher (the rule for running SASS), else the newest PTX
/// not newer than the device (PTX JIT-compiles forward). `force_ptx` skips the cubins. The built-in images
/// and a user's ([`crate::custom::KernelImages`]) are chosen by this one rule.
pub(crate) fn pick(
    codes: impl Iterator<Item = Code> + Clone,
    major: u32,
    minor: u32,
    force_ptx: bool,
) -> Option<usize> {
    let best = |fits: &dyn Fn(Code) -> bool| {
        codes
            .clone()
            .enumerate()
            .filter(|&(_, c)| fits(c))
            .max_by_key(|&(_, c)| c.arch())
            .map(|(i, _)| i)
    };
    let cubin = |c: Code| matches!(c, Code::Cubin { arch } if !force_ptx && arch / 10 == major && arch % 10 <= minor);
    let ptx = |c: Code| matches!(c, Code::Ptx { arch } if arch <= major * 10 + minor);
    best(&cubin).or_else(|| best(&ptx))
}

/// Every embedded image's code, for tests.
#[cfg(feature = "testing")]
pub fn embedded_codes() -> Vec<Code> {
    IMAGES.iter().map(Image::code).collect()
}

/// Module `module` of every embedded PTX image, as text, for the CPU tests that read the PTX.
#[cfg(feature = "testing")]
pub fn embedded_ptx(module: Module) -> Vec<(u32, String)> {
    IMAGES
        .iter()
        .filter(|i| i.kind == Kind::Ptx)
        .map(|i| {
            let mut text = i.module(module).expect("embedded modules inflate");
            text.pop(); // the NUL
            (i.arch, String::from_utf8(text).expect("PTX is ASCII"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static SET: [Image; 4] = [
        Image {
            kind: Kind::Cubin,
            arch: 75,
            blob: &[],
            modules: &[],
        },
        Image {
            kind: Kind::Cubin,
            arch: 80,
            blob: &[],
            modules: &[],
        },
        Image {
            kind: Kind::Cubin,
            arch: 90,
            blob: &[],
            modules: &[],
        },
        Image {
            kind: Kind::Ptx,
            arch: 90,
            blob: &[],
            modules: &[],
        },
    ];

    fn pick(major: u32, minor: u32, force_ptx: bool) -> Option<Code> {
        choose_from(&SET, major, minor, force_ptx).map(Image::code)
    }

    #[test]
    fn cubins_run_on_their_major_version_at_or_above_their_minor() {
        assert_eq!(pick(7, 5, false), Some(Code::Cubin { arch: 75 }));
        assert_eq!(pick(8, 0, false), Some(Code::Cubin { arch: 80 }));
        assert_eq!(pick(8, 6, false), Some(Code::Cubin { arch: 80 }));
        assert_eq!(pick(8, 9, false), Some(Code::Cubin { arch: 80 }));
        assert_eq!(pick(9, 0, false), Some(Code::Cubin { arch: 90 }));
    }

    #[test]
    fn newer_majors_and_forced_runs_take_the_ptx() {
        assert_eq!(pick(10, 0, false), Some(Code::Ptx { arch: 90 }));
        assert_eq!(pick(12, 0, false), Some(Code::Ptx { arch: 90 }));
        assert_eq!(pick(9, 0, true), Some(Code::Ptx { arch: 90 }));
    }

    #[test]
    fn older_devices_have_nothing() {
        assert_eq!(pick(7, 0, false), None);
        assert_eq!(pick(6, 1, false), None);
        // sm_90 PTX does not JIT for an sm_86 device; only its cubin runs there.
        assert_eq!(pick(8, 6, true), None);
    }

    #[test]
    fn the_build_embeds_every_cubin_and_the_newest_ptx() {
        let archs = |cubin: bool| -> Vec<u32> {
            embedded_codes()
                .into_iter()
                .filter_map(|c| match c {
                    Code::Cubin { arch } if cubin => Some(arch),
                    Code::Ptx { arch } if !cubin => Some(arch),
                    _ => None,
                })
                .collect()
        };
        assert!(
            archs(false).contains(&90),
            "the sm_90 PTX is always embedded"
        );
        if !archs(true).is_empty() {
            assert_eq!(
                archs(true),
                [75, 80, 90, 100, 120],
                "a build with ptxas has every cubin"
            );
        }
    }
}
