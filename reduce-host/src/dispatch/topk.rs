//! Top-k: the scratch (the select's state, the selected pairs and the candidate buffers), and the passes'
//! launches.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{TopKKernel, TopKPass};
use reduce_contract::layout::SMEM_BYTES;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    self, DIGIT_BITS, LEVEL_SHARED, MERGE_ITEMS, SORT_TILE, State, THREADS, WIDE_THREADS,
};

use super::row_topk::RowScratch;
use super::top_one::TopOne;
use super::{Span, resident};
use crate::driver::{self, Launch, Order};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::stream::StreamRef;
use crate::topk::TopKElement;

/// Device temporaries: the state the passes share; room for the selected pairs (value keys and indices,
/// twice over for the merge passes), grown to the largest k seen; and two candidate buffers of keys and
/// indices, grown to the largest input's [`topk::capacity`].
pub(crate) struct Scratch {
    state: DeviceBuffer<u64>,
    pairs: DeviceBuffer<u64>,
    candidates: DeviceBuffer<u64>,
    /// The per-segment top-k's temporaries.
    rows: RowScratch,
    /// The temporaries of k = 1, made with the handle: a device-wide call never grows them, and per segment
    /// they grow to the most segments (and row pieces) seen, so a graph is captured after a call as large.
    top_one: TopOne,
    last_use: LastUse,
}

/// `u64` words of the state.
const STATE_WORDS: usize = size_of::<State>().div_ceil(8);

/// Grows `buffer` to at least `words`, waiting first for the work that may still use the old one.
fn grow(buffer: &mut DeviceBuffer<u64>, words: usize, last_use: &LastUse) -> Result<*mut u64> {
    if buffer.len() < words {
        // The old buffer may still be in use by earlier work on any stream.
        last_use.synchronize()?;
        *buffer = driver::zeroed(words.next_power_of_two())?;
    }
    Ok(buffer.as_device_ptr().as_raw() as *mut u64)
}

impl Scratch {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Scratch {
            state: driver::zeroed(STATE_WORDS)?,
            pairs: driver::zeroed(4 * SORT_TILE as usize)?,
            candidates: driver::zeroed(4 * 4096)?,
            rows: RowScratch::new()?,
            top_one: TopOne::new(gpu)?,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// The per-segment temporaries, and the last use that orders every reuse of the scratch.
    pub fn rows(&mut self) -> (&mut RowScratch, &mut LastUse) {
        (&mut self.rows, &mut self.last_use)
    }

    /// The temporaries of k = 1, and the last use that orders every reuse of the scratch.
    pub fn top_one(&mut self) -> (&mut TopOne, &mut LastUse) {
        (&mut self.top_one, &mut self.last_use)
    }

    /// Room for four arrays of `k` words (keys, indices, and the merge passes' second pair) and four of
    /// `capacity` (the two candidate buffers' keys and indices), grown first if needed. Returns the first
    /// word of each.
    fn prepare(&mut self, k: u64, capacity: u64) -> Result<([*mut u64; 4], [*mut u64; 4])> {
        let k = k.max(SORT_TILE) as usize;
        let base = grow(&mut self.pairs, 4 * k, &self.last_use)?;
        let cap = capacity as usize;
        let candidates = grow(&mut self.candidates, 4 * cap, &self.last_use)?;
        // Four slices of `k` (then `cap`) words each inside the buffers.
        Ok((
            [0, 1, 2, 3].map(|i| base.wrapping_add(i * k)),
            [0, 1, 2, 3].map(|i| candidates.wrapping_add(i * cap)),
        ))
    }
}

/// Whether the select starts with the sample (`sample` and `sieve`, see [`topk`]) for an input of `n`:
/// from [`topk::SAMPLE_FROM`] on. `REDUCE_HOST_TOPK_SAMPLE` overrides it, for the tests and benchmarks that
/// compare the two paths in one build: `0` never samples, any other value samples wherever the contract
/// allows (from [`topk::SAMPLE_MIN`]).
fn sample_first(n: u64) -> bool {
    match std::env::var_os("REDUCE_HOST_TOPK_SAMPLE") {
        Some(v) if v == "0" => false,
        Some(v) if !v.is_empty() => true,
        _ => n >= topk::SAMPLE_FROM,
    }
}

/// Whether a sampled select runs `finish` where the contract's [`topk::finishes`] allows: always, unless
/// `REDUCE_HOST_TOPK_FINISH=0`, which the tests and benchmarks use to compare with the `pick` and `level`
/// passes in one build.
fn finish_allowed() -> bool {
    std::env::var_os("REDUCE_HOST_TOPK_FINISH").is_none_or(|v| v != "0")
}

/// Writes the `k` greatest elements of `input` (`largest`) or the `k` least, best first, with their
/// indices; values only where `values` is given.
///
/// # Safety
/// `input` valid for reads, `values` (if any) and `indices` for `k` writes, until `stream` has passed this
/// work; `1 ≤ k ≤ input.len`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T: TopKElement>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    input: Span<T>,
    k: u64,
    largest: bool,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let capacity = topk::capacity(input.len);
    let ([keys, idx, keys_alt, idx_alt], [ck0, ci0, ck1, ci1]) = scratch.prepare(k, capacity)?;
    let state = scratch.state.as_device_ptr().as_raw();
    let kernel = |pass| TopKKernel(T::ELEM, pass);
    let key_bits = 8 * T::KEY_BYTES;
    let index_bits = topk::index_bits(input.len);
    let first_bits = topk::first_bits(gpu.shared_optin()).min(key_bits);
    let params = TopKParams {
        input: input.as_ptr(),
        n: input.len,
        k,
        state: state as *mut State,
        keys,
        indices: idx,
        keys_alt,
        indices_alt: idx_alt,
        candidate_keys: [ck0, ck1],
        candidate_indices: [ci0, ci1],
        capacity,
        values_out: values.map_or(std::ptr::null_mut(), |v| v.as_mut_ptr()),
        indices_out: indices.as_mut_ptr(),
        run: SORT_TILE,
        level: 0,
        largest: largest as u32,
        index_bits,
        first_bits,
        from_alt: 0,
    };
    // A resident wave of `threads`-thread blocks over the input.
    let wave = |pass, threads: u32, shared: u32| -> Result<Launch> {
        let f = gpu.function(kernel(pass))?;
        let grid = input.len.div_ceil(threads as u64 * 4).min(u32::MAX as u64) as u32;
        resident(gpu, f, grid, threads, shared)
    };
    let first_shared = (4u32 << first_bits).max(SMEM_BYTES);
    let counting = wave(TopKPass::Histogram, WIDE_THREADS, first_shared)?;
    // A sample first where it can bound the k-th key (large n, k small beside it).
    let sampling = topk::samples(input.len, k) && sample_first(input.len);
    // `split` and `level` share their shape (the level's occupancy, the larger kernel, bounds both).
    let leveling = wave(TopKPass::Level, THREADS, LEVEL_SHARED)?;
    // The sieve, a read of the input like the histogram, at its own occupancy (it needs fewer registers
    // than `level`). So launched, the sampled select took 1.3–2.1 reads at 2^28 on an H100 (2026-12-05),
    // the sieve about three quarters of it (ncu, clocks locked: 505 µs of 660).
    let sieving = wave(TopKPass::Sieve, THREADS, LEVEL_SHARED)?;
    let one_block = |shared_bytes: u32| Launch {
        grid: 1,
        block: THREADS,
        shared_bytes,
    };
    let picking = Launch {
        block: WIDE_THREADS,
        ..one_block(SMEM_BYTES)
    };
    let sampler = Launch {
        grid: topk::SAMPLE_BLOCKS,
        block: topk::SAMPLE_THREADS,
        ..one_block(topk::SAMPLE_SHARED)
    };
    // `finish` after the sieve where its buffer is expected short, on a device with its
    // shared memory; its block as wide as its registers allow (it loops over the block: any size serves).
    let finishing = sampling
        && topk::finishes(input.len, k)
        && finish_allowed()
        && topk::FINISH_SHARED <= gpu.shared_optin();
    let finisher = if finishing {
        Some(Launch {
            block: gpu
                .function(kernel(TopKPass::Finish))?
                .fit_block(WIDE_THREADS),
            ..one_block(topk::FINISH_SHARED)
        })
    } else {
        None
    };
    // The first digit, then digits of DIGIT_BITS down to the composite key's last bit: the most levels a
    // select can take (a jump to the index's digits only shortens it).
    let levels = 1 + (key_bits + index_bits - first_bits).div_ceil(DIGIT_BITS);
    let sort_shared = (2 * SORT_TILE as usize * size_of::<u64>()) as u32;
    // The sort's blocks: a thread for each pair a bitonic stage compares, from `THREADS` (a short sort's
    // barriers cost more with more warps: k = 64 sorted 1.2 µs slower on 1024 threads than on 256, ncu,
    // H100, 2026-12-07) to `WIDE_THREADS` (a tile of `SORT_TILE`, see `topk::SORT_ITEMS`).
    let sorting = |pairs: u64| Launch {
        block: (pairs.next_power_of_two() / 2).clamp(THREADS as u64, WIDE_THREADS as u64) as u32,
        ..one_block(sort_shared)
    };
    // A resident wave of a thread per output (the results' writers: `fill`, `gather`).
    let over_k = |pass| -> Result<Launch> {
        let f = gpu.function(kernel(pass))?;
        resident(
            gpu,
            f,
            k.div_ceil(THREADS as u64) as u32,
            THREADS,
            SMEM_BYTES,
        )
    };
    // Every pass waits for the one before it (`griddepcontrol.wait` first thing, entry.rs), so each can
    // go as a programmatic dependent launch: most of the later passes return at once, and their launches
    // overlap the passes before them instead of adding up.
    let order = if gpu.dependent_launch() {
        Order::Programmatic
    } else {
        Order::Stream
    };
    // SAFETY: as `driver::launch`; every top-k kernel takes `TopKParams<T>` (the contract's family), and
    // waits for its predecessor before it reads anything.
    // SAFETY (every launch): the kernels read `input` (n elements) and write the state, the pairs (k of
    // each), the candidate buffers (`capacity` each, inside the scratch claimed below) and the k outputs, all
    // valid (the caller, `prepare`); each launch gets the shared memory its body documents.
    let launch = |pass, shape, p: TopKParams<T>| unsafe {
        driver::launch(gpu.function(kernel(pass))?, shape, stream, &p, order)
    };
    scratch.last_use.claim(stream, || {
        // SAFETY: the state is scratch claimed here, `STATE_WORDS` words.
        unsafe {
            // The sieve's counts (the state's last field) are zeroed only where it runs.
            let zeroed = if sampling {
                STATE_WORDS * 8
            } else {
                std::mem::offset_of!(State, sieved)
            };
            driver::memset_zero(state, zeroed, stream)?;
            if sampling {
                launch(TopKPass::Sample, sampler, params)?;
                launch(TopKPass::Sieve, sieving, params)?;
                if let Some(finisher) = finisher {
                    launch(TopKPass::Finish, finisher, params)?;
                }
            }
            // Each pass returns at once where the state says another did its work: the histogram and
            // `split` after a sieve that holds, the first `level` after one that does not, every `pick`
            // and `level` after a `finish` that selected.
            launch(TopKPass::Histogram, counting, params)?;
            for level in 0..levels {
                let p = TopKParams { level, ..params };
                launch(TopKPass::Pick, picking, p)?;
                if level == 0 {
                    launch(TopKPass::Split, leveling, p)?;
                }
                if level > 0 || sampling {
                    launch(TopKPass::Level, leveling, p)?;
                }
            }
            launch(TopKPass::Fill, over_k(TopKPass::Fill)?, params)?;
            if k <= SORT_TILE {
                return launch(TopKPass::Sort, sorting(k), params);
            }
            let tiles = k.div_ceil(SORT_TILE) as u32;
            let sort = Launch {
                grid: tiles,
                ..sorting(SORT_TILE)
            };
            launch(TopKPass::SortBlock, sort, params)?;
            let (mut run, mut from_alt) = (SORT_TILE, 0);
            let merge = Launch {
                grid: k.div_ceil(MERGE_ITEMS * THREADS as u64) as u32,
                ..one_block(SMEM_BYTES)
            };
            while run < k {
                let p = TopKParams {
                    run,
                    from_alt,
                    ..params
                };
                launch(TopKPass::Merge, merge, p)?;
                run *= 2;
                from_alt ^= 1;
            }
            launch(
                TopKPass::Gather,
                over_k(TopKPass::Gather)?,
                TopKParams { from_alt, ..params },
            )
        }
    })
}
