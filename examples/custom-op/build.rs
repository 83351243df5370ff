//! Compiles the kernel crate (`kernels/`) to PTX and cubins with the kernels' pinned nightly, and writes
//! `custom_op_kernels_images.rs` for `reduce_host::include_kernels!`.
fn main() -> Result<(), reduce_builder::Error> {
    reduce_builder::Builder::new("kernels").build()?;
    Ok(())
}
