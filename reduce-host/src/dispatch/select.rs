//! Stream compaction: the kernels' tiles (one kernel body for unordered and stable compaction), their tile
//! and look-back words, and the ordering of those words' reuse across streams.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{SelectBy, SelectFlagged, SelectKernel, SelectPass};
use reduce_contract::layout::{
    LOAD_BYTES, MAX_STABLE_THREADS, stable_shared_bytes, stable_vectors,
};
use reduce_contract::params::SelectParams;

use super::{Span, launch};
use crate::custom::OpKernels;
use crate::driver::{self, Launch, Order};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::select::SelectElement;
use crate::stream::StreamRef;
use crate::tuning::Policy;

/// What decides which elements are kept, and whether their order is kept. `F` is the byte mask: a view
/// as the handle takes it, a checked span as the dispatch runs it.
pub(crate) enum Selection<'k, T, F = Span<u8>> {
    /// By a predicate, output order unspecified.
    Unordered { by: Pick<'k>, threshold: T },
    /// By a predicate, in input order.
    Stable { by: Pick<'k>, threshold: T },
    /// By a byte mask as long as the input, in input order.
    Flagged(F),
}

/// Whose predicate: a built-in one (its kernels in the built-in images), or a user's (their kernel crate's,
/// resolved by the predicate's name, in [`SelectPass`] order).
#[derive(Clone, Copy)]
pub(crate) enum Pick<'k> {
    Builtin(SelectBy),
    User(&'k OpKernels),
}

impl<'k, T, F> Selection<'k, T, F> {
    /// Selection by the predicate `by` with `threshold`: in input order when `stable`.
    pub fn by_predicate(stable: bool, by: Pick<'k>, threshold: T) -> Self {
        if stable {
            Selection::Stable { by, threshold }
        } else {
            Selection::Unordered { by, threshold }
        }
    }

    /// The same selection with the mask `map`ped.
    pub fn try_map<G, E>(
        self,
        map: impl FnOnce(F) -> Result<G, E>,
    ) -> Result<Selection<'k, T, G>, E> {
        Ok(match self {
            Selection::Unordered { by, threshold } => Selection::Unordered { by, threshold },
            Selection::Stable { by, threshold } => Selection::Stable { by, threshold },
            Selection::Flagged(flags) => Selection::Flagged(map(flags)?),
        })
    }
}

/// Device temporaries: the compaction kernels' tile counter and look-back words, and the event that orders
/// their reuse across streams.
pub(crate) struct Scratch {
    /// The tile counter, then one word per tile.
    states: DeviceBuffer<u64>,
    last_use: LastUse,
}

impl Scratch {
    pub fn new() -> Result<Self> {
        Ok(Scratch {
            states: driver::zeroed(1)?,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Sizes the compaction kernels' grid (one block per tile of `threads`) and makes room for its words:
    /// the tile counter, then with `look_back` one look-back word per tile (the unordered kernel uses the
    /// counter alone, so it never grows the buffer), growing the buffer first if needed. Returns the grid,
    /// the words' address and their count, which the caller zeroes on its stream once it holds the claim.
    fn prepare<T>(
        &mut self,
        threads: u32,
        input: Span<T>,
        look_back: bool,
    ) -> Result<(u32, *mut u64, usize)> {
        let tiles = stable_tiles(threads, input.ptr, input.len, size_of::<T>() as u64);
        let grid = u32::try_from(tiles)
            .ok()
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{} elements need {tiles} tiles, more than a grid can hold; split the input",
                    input.len
                ))
            })?;
        let words = if look_back { tiles as usize + 1 } else { 1 };
        if self.states.len() < words {
            // The old buffer may still be in use by earlier work on any stream.
            self.last_use.synchronize()?;
            self.states = driver::zeroed(words.next_power_of_two())?;
        }
        let states = self.states.as_device_ptr().as_raw();
        Ok((grid, states as *mut u64, words))
    }
}

/// The kernel of a compaction.
#[derive(Clone, Copy)]
enum Which<'k> {
    Predicate(SelectKernel),
    Flags(SelectFlagged),
    User(&'k OpKernels, SelectPass),
}

impl<'k> Which<'k> {
    fn of(by: Pick<'k>, pass: SelectPass) -> Self {
        match by {
            Pick::Builtin(by) => Which::Predicate(SelectKernel(by, pass)),
            Pick::User(kernels) => Which::User(kernels, pass),
        }
    }
}

/// Compacts `input` into `out` by `selection` and writes the count to `count`.
///
/// # Safety
/// `input` (and the flags) must be valid for reads, `out` for `input.len` writes and `count` for one
/// `u64`, until `stream` has passed this work.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T: SelectElement>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    policy: &Policy,
    selection: Selection<'_, T>,
    input: Span<T>,
    out: Span<T>,
    count: *mut u64,
    stream: StreamRef<'_>,
) -> Result<()> {
    if input.is_empty() {
        // Nothing to launch; the count is 0.
        // SAFETY: `count` is valid for one u64 (the caller).
        return unsafe { driver::memset_zero(count as u64, 8, stream) };
    }
    let null = std::ptr::null();
    let (kernel, threshold, flags, unordered) = match selection {
        Selection::Unordered { by, threshold } => {
            (Which::of(by, SelectPass::Unordered), threshold, null, true)
        }
        Selection::Stable { by, threshold } => {
            (Which::of(by, SelectPass::Stable), threshold, null, false)
        }
        Selection::Flagged(flags) => (
            Which::Flags(SelectFlagged(T::ELEM)),
            T::default(),
            flags.as_ptr(),
            false,
        ),
    };
    let params = SelectParams {
        input: input.as_ptr(),
        n: input.len,
        flags,
        threshold,
        out: out.as_mut_ptr(),
        count,
        states: std::ptr::null_mut(),
    };
    let f = match kernel {
        Which::Predicate(k) => gpu.function(k)?,
        Which::Flags(k) => gpu.function(k)?,
        Which::User(kernels, pass) => kernels.function(pass.ordinal())?,
    };
    // SAFETY (every launch): as `launch`, which the callers below establish; a user's kernels take the
    // `SelectParams` of their element, `T` (the handle resolved them by `T`'s name).
    let launch = |shape, params| unsafe {
        match kernel {
            Which::Predicate(k) => launch(gpu, k, shape, stream, params),
            Which::Flags(k) => launch(gpu, k, shape, stream, params),
            Which::User(..) => driver::launch(f, shape, stream, &params, Order::Stream),
        }
    };
    // The kernel's registers may cap its block below the policy's, and the staging of a whole tile must fit
    // in shared memory: size the tiles for the block it really launches with. Their words (the tile counter,
    // and the stable kernels' look-back states) are grown, waiting for their last use, before the claim.
    let block = stable_threads(f.fit_block(policy.threads));
    let (grid, states, words) = scratch.prepare(block, input, !unordered)?;
    scratch.last_use.claim(stream, || {
        let shape = Launch {
            grid,
            block,
            shared_bytes: stable_shared_bytes(block),
        };
        // SAFETY: the buffer holds `words` u64s (the counter, and a word per tile for the stable kernels),
        // this launch's alone (serialised across streams by the claim); the kernels need them zeroed, with
        // one block per tile.
        unsafe { driver::memset_zero(states as u64, words * 8, stream)? };
        if unordered {
            // SAFETY: `count` is valid for one u64 (the caller); the unordered kernel adds to it from 0.
            unsafe { driver::memset_zero(count as u64, 8, stream)? };
        }
        // SAFETY: `input` is valid for n reads, `out` for n writes, `count` for one u64 (the caller).
        launch(shape, SelectParams { states, ..params })
    })
}

/// `threads` capped so a compaction block's staging (a whole tile) fits the shared memory a block gets
/// without opting in: at most `MAX_STABLE_THREADS` (736).
fn stable_threads(threads: u32) -> u32 {
    threads.min(MAX_STABLE_THREADS)
}

/// Tiles of the compaction kernels with blocks of `threads`, for `n` elements of `size` bytes at `addr`: the
/// input is cut into 16-byte vectors from the aligned address at or below it, and a tile is
/// `threads × stable_vectors(size)` vectors.
pub(crate) fn stable_tiles(threads: u32, addr: u64, n: u64, size: u64) -> u64 {
    let lanes = LOAD_BYTES / size;
    let head = (addr % LOAD_BYTES) / size;
    let vectors = (head + n).div_ceil(lanes);
    vectors.div_ceil(threads.max(32) as u64 * stable_vectors(size as usize) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning;
    use reduce_contract::layout::SHARED_LIMIT;

    #[test]
    fn stable_blocks_stage_a_whole_tile_within_48_kib() {
        assert_eq!(stable_threads(tuning::SELECT_THREADS), 512);
        assert_eq!(stable_threads(1024), 736);
        assert_eq!(stable_threads(32), 32);
        for threads in (32..=1024).step_by(32) {
            let t = stable_threads(threads);
            assert!(t.is_multiple_of(32) && t <= threads);
            assert!(stable_shared_bytes(t) <= SHARED_LIMIT, "{t} threads");
        }
    }

    #[test]
    fn tiles_cover_every_vector_of_the_slice() {
        // 512 × 4 vectors = 8192 f32 per tile; a slice starting 4 bytes past a 16-byte boundary has one
        // element in the vector before, so it reaches a second tile one element sooner.
        assert_eq!(stable_tiles(512, 0, 8192, 4), 1);
        assert_eq!(stable_tiles(512, 0, 8193, 4), 2);
        assert_eq!(stable_tiles(512, 4, 8191, 4), 1);
        assert_eq!(stable_tiles(512, 4, 8192, 4), 2);
        // No block size divides by zero.
        assert_eq!(stable_tiles(0, 0, 1, 4), 1);
    }
}
