//! The PTX modules built from `kernels-gpu` by `build.rs`, one per arch, and the rule that picks one.

/// A PTX module and the compute capability (`major * 10 + minor`) it targets.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// Target compute capability, e.g. `90` for sm_90.
    pub arch: u32,
    /// PTX text, NUL-terminated so it can go to the driver without a copy.
    pub source: &'static str,
}

macro_rules! modules {
    ($($arch:literal),*) => {
        /// Every embedded module, oldest arch first.
        pub const MODULES: &[PtxModule] = &[$(PtxModule {
            arch: $arch,
            source: concat!(include_str!(concat!(env!("OUT_DIR"), "/kernels_sm", $arch, ".ptx")), "\0"),
        }),*];
    };
}
modules!(75, 80, 90);

impl PtxModule {
    /// The PTX without its trailing NUL.
    pub fn text(&self) -> &'static str {
        self.source.trim_end_matches('\0')
    }
}

/// The newest module a device of compute capability `cc` (`major * 10 + minor`) can run: PTX for sm_XY
/// JIT-compiles on any device of capability X.Y or newer. `None` when the device is older than every module.
pub fn best_for(cc: u32) -> Option<&'static PtxModule> {
    MODULES.iter().rev().find(|m| m.arch <= cc)
}
