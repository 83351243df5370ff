//! What the examples share: the exit protocol, the size argument, opening the GPU (or one clear line
//! without one), a clock-seeded generator and a timing loop.
#![allow(dead_code)] // each example uses part of it

use std::time::Instant;

use rand::{SeedableRng, rngs::SmallRng};

mod exit;
pub use exit::{BoxError, main, open};

/// The element count from the first argument (default 2^28), at least 1.
pub fn size_arg() -> Result<usize, BoxError> {
    let n = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("size must be a positive integer, got {s:?}"))?,
        None => 1 << 28,
    };
    if n == 0 {
        return Err("size must be at least 1".into());
    }
    Ok(n)
}

/// A generator seeded from the clock: every run checks new data.
pub fn rng() -> SmallRng {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    SmallRng::seed_from_u64(seed)
}

/// Calls `f` once (the warm-up, whose answer is returned), then `runs` times: (answer, seconds per call).
pub fn timed<R, E>(runs: u32, mut f: impl FnMut() -> Result<R, E>) -> Result<(R, f64), E> {
    let answer = f()?;
    let start = Instant::now();
    for _ in 0..runs {
        f()?;
    }
    Ok((answer, start.elapsed().as_secs_f64() / runs as f64))
}
