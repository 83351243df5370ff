//! Device-wide reduction bodies: every block reduces its grid-stride share to one partial, and the partials
//! are combined by one of three strategies (the host picks):
//!
//! - **two-pass** ([`partials`] then [`finalize`]): a second one-block kernel reduces the partials in a fixed
//!   order. Deterministic.
//! - **last block** ([`last_block`]): one kernel; each block writes its partial, fences, takes a ticket, and
//!   the block that draws the last ticket (from a counter that wraps back to zero as it does, so no launch
//!   needs a reset ahead of it) reduces all partials in a fixed order. Deterministic.
//! - **atomic** ([`atomic`]): one kernel; each block adds its partial into a zeroed result. Floating-point
//!   results depend on the order the blocks arrive in, so they are not reproducible.
use crate::arch::{self, AtomicAdd};
use crate::block;
use crate::op::DeviceOp;
use crate::thread::{self, Vectorize};
use reduce_contract::layout::LAST_BLOCK_FLAG_OFFSET;

/// One block's reduction of its grid-stride share of `input[0..n]`; valid in thread 0.
///
/// # Safety
/// As [`thread::reduce`] and [`block::reduce`]; called by every thread of the block.
#[inline(always)]
unsafe fn block_partial<Op: DeviceOp>(input: *const Op::In, n: u64) -> Op::Acc
where
    Op::In: Vectorize,
{
    // SAFETY: forwarded to the caller.
    let v =
        unsafe { thread::reduce::<Op>(input, n, arch::global_thread_idx(), arch::grid_threads()) };
    // SAFETY: every thread of the block gets here.
    unsafe { block::reduce::<Op>(v) }
}

/// Reduces `items[0..count]` with one block, each thread striding by `blockDim.x` in a fixed order, and
/// returns the result in thread 0. `load` reads one item.
///
/// # Safety
/// Called by every thread of the block; `load(i)` must be valid for `i < count`.
#[inline(always)]
unsafe fn block_over<Op: DeviceOp>(count: u64, load: impl Fn(u64) -> Op::Acc) -> Op::Acc {
    let mut acc = Op::identity();
    let mut i = arch::thread_idx() as u64;
    while i < count {
        acc = Op::combine(acc, load(i));
        i += arch::block_dim() as u64;
    }
    // SAFETY: every thread of the block gets here.
    unsafe { block::reduce::<Op>(acc) }
}

/// First pass: block `b` writes its partial to `partials[b]`. It may be launched as a programmatic
/// dependent of whatever kernel precedes it on the stream (sm_90 and later), and lets the next one start.
///
/// # Safety
/// `input` valid for `n` reads; `partials` valid for `gridDim.x` writes.
#[inline(always)]
pub unsafe fn partials<Op: DeviceOp>(input: *const Op::In, n: u64, partials: *mut Op::Acc)
where
    Op::In: Vectorize,
{
    // Programmatic dependent launch (the host uses it on sm_90 and later): let the next kernel on the
    // stream (the finalize, or the next call's first kernel) start its blocks now, so that its launch
    // overlaps this pass; and, launched so ourselves, touch no memory before the kernel before us is done.
    arch::launch_dependents();
    arch::wait_for_primary();
    // SAFETY: forwarded to the caller.
    let p = unsafe { block_partial::<Op>(input, n) };
    if arch::thread_idx() == 0 {
        // `Op::write` stores whole results (an argmax's padding too): a sector written in part makes the
        // finalize's read of it wait for DRAM.
        // SAFETY: block_idx < gridDim.x.
        unsafe { Op::write(partials.add(arch::block_idx() as usize), p) };
    }
}

/// Second pass, launched with one block: reduces `partials[0..count]` in a fixed order into `*out`. It may be
/// launched as a programmatic dependent of the first pass (sm_90 and later), and lets the next one start.
///
/// # Safety
/// `partials` valid for `count` reads, `out` for one write; one block.
#[inline(always)]
pub unsafe fn finalize<Op: DeviceOp>(partials: *const Op::Acc, count: u64, out: *mut Op::Acc) {
    // Launched as a programmatic dependent of `partials`, this block may be running before the partials
    // are written: nothing is read or written before the first pass has completed. The next kernel on the
    // stream may start meanwhile, as after `partials`.
    arch::launch_dependents();
    arch::wait_for_primary();
    // SAFETY: i < count.
    let r = unsafe { block_over::<Op>(count, |i| partials.add(i as usize).read()) };
    if arch::thread_idx() == 0 {
        // SAFETY: the caller provides `out`.
        unsafe { Op::write(out, r) };
    }
}

/// Single pass with the last-block-done protocol. Every block takes a ticket from `*ticket` with an
/// increment that wraps at `gridDim.x` (`atom.inc`); the one that draws `gridDim.x - 1` combines, and its
/// increment has put the counter back to zero. So no launch needs a reset ahead of it, nor the host to
/// know the counter's value: a launch replayed from a CUDA graph works as one enqueued directly.
///
/// # Safety
/// `input` valid for `n` reads, `partials` for `gridDim.x` elements, `out` for one write, `ticket` a valid
/// `u32` that no other kernel uses concurrently, zero at launch (every completed launch leaves it so).
#[inline(always)]
pub unsafe fn last_block<Op: DeviceOp>(
    input: *const Op::In,
    n: u64,
    partials: *mut Op::Acc,
    ticket: *mut u32,
    out: *mut Op::Acc,
) where
    Op::In: Vectorize,
{
    // SAFETY: forwarded to the caller.
    let p = unsafe { block_partial::<Op>(input, n) };
    // The "am I last" flag lives past the block-reduce slots (see crate::SMEM_BYTES).
    // SAFETY: the launch provides SMEM_BYTES, which holds the flag past 32 accumulators of up to 16 bytes
    // (asserted in reduce_contract::layout).
    let flag = unsafe { arch::shared::<u32>().add(LAST_BLOCK_FLAG_OFFSET / 4) };
    if arch::thread_idx() == 0 {
        // SAFETY: block_idx < gridDim.x; `ticket` is valid.
        unsafe {
            Op::write(partials.add(arch::block_idx() as usize), p);
            // Publish the partial before taking a ticket: whoever draws the last ticket must see it.
            arch::fence_gpu();
            let last = arch::grid_dim() - 1;
            let t = arch::atomic_inc_u32(ticket, last);
            flag.write_volatile((t == last) as u32);
        }
    }
    // SAFETY: every thread reaches this barrier; it also orders the flag write before the reads below.
    unsafe { arch::sync_threads() };
    // SAFETY: written by thread 0 before the barrier.
    if unsafe { flag.read_volatile() } == 0 {
        return;
    }
    // Acquire side: every other block fenced before its ticket, so all partials are visible now.
    arch::fence_gpu();
    let count = arch::grid_dim() as u64;
    // SAFETY: i < gridDim.x; the loads bypass L1 so no stale line is read.
    let r = unsafe { block_over::<Op>(count, |i| arch::load_coherent(partials.add(i as usize))) };
    if arch::thread_idx() == 0 {
        // SAFETY: `out` is valid for one write.
        unsafe { Op::write(out, r) };
    }
}

/// Single pass with atomics: every block adds its partial into `*out`, which must be zeroed at launch.
///
/// # Safety
/// `input` valid for `n` reads; `out` a valid global accumulator.
#[inline(always)]
pub unsafe fn atomic<Op: DeviceOp>(input: *const Op::In, n: u64, out: *mut Op::Acc)
where
    Op::In: Vectorize,
    Op::Acc: AtomicAdd,
{
    // SAFETY: forwarded to the caller.
    let p = unsafe { block_partial::<Op>(input, n) };
    if arch::thread_idx() == 0 {
        // SAFETY: `out` is valid.
        unsafe { Op::Acc::atomic_add(out, p) };
    }
}
