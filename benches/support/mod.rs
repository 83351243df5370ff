//! Pieces of the benchmark harness: timing, input pools, the CUB comparator and the plot.
pub mod cub;
pub mod plot;
pub mod pool;
pub mod timing;
pub mod torch;
