//! What the README's first snippet does, from a crate outside the workspace: sum, argmax and a sub-slice's
//! min of a small f32 buffer, through `reduce-host` and the `cust` it re-exports.
//!
//! Without a GPU it prints why and exits 0: that is the path CI runs. With one it checks the results and
//! prints `downstream: correct`.
use reduce_host::cust::memory::DeviceBuffer;
use reduce_host::{DeviceReduce, DeviceView, Error};

fn main() -> Result<(), Error> {
    let mut reduce = match DeviceReduce::new() {
        Ok(r) => r,
        Err(Error::NoDevice(e)) => {
            println!("downstream: built and linked; no CUDA GPU to run on ({e})");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let x = DeviceBuffer::from_slice(&[1.0f32, 5.0, -2.0, 5.0])?;
    assert_eq!(reduce.sum(&x)?, 9.0);
    let m = reduce.argmax(&x)?.expect("non-empty"); // ties go to the smallest index
    assert_eq!((m.index, m.value), (1, 5.0));
    assert_eq!(reduce.min(DeviceView::from(&x).slice(1..))?, Some(-2.0));
    println!("downstream: correct ({:?})", reduce.device_info().code);
    Ok(())
}
