//! Examples and benchmarks of [`reduce_host`] live in `examples/` and `benches/`.
