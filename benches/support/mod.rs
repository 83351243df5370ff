//! Pieces of the benchmark harness: timing, input pools, the CUB comparator and the plot.
pub mod cub;
pub mod plot;
pub mod pool;
pub mod timing;
pub mod torch;

use reduce_host::Gpu;

#[path = "../../examples/support/exit.rs"]
mod exit;
pub use exit::{BoxError, main};

/// GPU 0, or an error that says plainly there is none.
pub fn open_gpu() -> Result<Gpu, BoxError> {
    exit::open(Gpu::new())
}
