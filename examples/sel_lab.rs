//! Temporary tuning lab for the select kernels (not for commit).
use std::ffi::c_void;

use cust::event::{Event, EventFlags};
use cust::prelude::*;
use rand::{Rng, SeedableRng, rngs::SmallRng};

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ctx = cust::quick_init()?;
    let dev = Device::get_device(0)?;
    let sms = dev.get_attribute(cust::device::DeviceAttribute::MultiprocessorCount)? as u32;
    let ptx = reduce_host::ptx::best_for(90).unwrap().text();
    let cap: u32 = std::env::args().nth(2).map_or(0, |a| a.parse().unwrap());
    let module = if cap > 0 {
        Module::from_ptx(ptx, &[cust::module::ModuleJitOption::MaxRegisters(cap)])?
    } else {
        Module::from_ptx(ptx, &[])?
    };
    println!("register cap {cap}");
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None)?;
    const N: usize = 1 << 28;
    let mut rng = SmallRng::seed_from_u64(77);
    let host: Vec<f32> = (0..N).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let want: Vec<f32> = host.iter().copied().filter(|&x| x > 0.5).collect();
    let want_sum: f64 = want.iter().map(|&x| x as f64).sum();
    let input = DeviceBuffer::from_slice(&host)?;
    let out = DeviceBuffer::<f32>::zeroed(N)?;
    let count = DeviceBuffer::<u64>::zeroed(1)?;
    let states = DeviceBuffer::<u64>::zeroed(N / 64 + 2)?;
    let (e0, e1) = (Event::new(EventFlags::DEFAULT)?, Event::new(EventFlags::DEFAULT)?);
    let mut got = vec![0f32; N];
    let one = std::env::args().nth(1).as_deref() == Some("one");
    for (kind, vs) in [("unordered", &[4u64, 8][..]), ("staged", &[2, 4])] {
        for &v in vs {
            let name = format!("lab_{kind}_{v}");
            let f = module.get_function(&name)?;
            for threads in [128u32, 256, 512] {
                if one && (threads != 256 || kind != "staged") {
                    continue;
                }
                let smem = if kind != "unordered" && kind != "stable" { 384 + threads * v as u32 * 16 } else { 1024 };
                if smem > 48 * 1024 {
                    continue;
                }
                let fit = f.max_active_blocks_per_multiprocessor(threads.into(), smem as usize)? as u32;
                let vectors = (N / 4) as u64;
                let grid = if kind != "unordered" {
                    vectors.div_ceil(threads as u64 * v) as u32
                } else {
                    sms * fit
                };
                let words = grid as usize + 1;
                let mut times = Vec::new();
                for it in 0..(if one { 1 } else { 15 }) {
                    let (mut p, mut n, mut th, mut o, mut c, mut st) = (
                        input.as_device_ptr().as_raw(),
                        N as u64,
                        0.5f32,
                        out.as_device_ptr().as_raw(),
                        count.as_device_ptr().as_raw(),
                        states.as_device_ptr().as_raw(),
                    );
                    let mut args: Vec<*mut c_void> = vec![
                        &mut p as *mut _ as _,
                        &mut n as *mut _ as _,
                        &mut th as *mut _ as _,
                        &mut o as *mut _ as _,
                        &mut c as *mut _ as _,
                    ];
                    if kind != "unordered" {
                        args.push(&mut st as *mut _ as _);
                    }
                    unsafe {
                        cust::sys::cuMemsetD8Async(count.as_device_ptr().as_raw(), 0, 8, stream.as_inner());
                        cust::sys::cuMemsetD8Async(states.as_device_ptr().as_raw(), 0, words * 8, stream.as_inner());
                    }
                    e0.record(&stream)?;
                    unsafe { stream.launch(&f, grid, threads, smem, &args)? };
                    e1.record(&stream)?;
                    e1.synchronize()?;
                    if it >= 3 {
                        times.push(e1.elapsed_time_f32(&e0)? * 1000.0);
                    }
                }
                let mut c = [0u64];
                count.copy_to(&mut c)?;
                out.copy_to(&mut got)?;
                let k = c[0] as usize;
                let ok = if k != want.len() {
                    false
                } else if kind != "unordered" {
                    got[..k] == want[..]
                } else {
                    let s: f64 = got[..k].iter().map(|&x| x as f64).sum();
                    (s - want_sum).abs() < 1e-6 * want_sum
                };
                if one {
                    return Ok(());
                }
                let us = median(times);
                let bytes = N * 4 + want.len() * 4;
                println!(
                    "{name:<16} thr {threads:>4} grid {grid:>7} fit {fit:>2} {us:>8.1} us {:>6.0} GB/s{}",
                    bytes as f64 / us as f64 / 1e3,
                    if ok { "" } else { "  WRONG" }
                );
            }
        }
    }
    Ok(())
}
