//! The reduction chapter's teaching kernels, v0–v5: f32 sums to one partial per block, each version keeping
//! the property that defines it so that the bandwidth table shows what every step buys. The host combines
//! their partials with the production finalize kernel.
//!
//! v0–v4 need `blockDim.x * 4` bytes of dynamic shared memory; v4 needs `blockDim.x >= 64`; v5 needs a
//! 16-byte aligned input.
use crate::arch::{self, Vec16, block_dim, block_idx, sync_threads, thread_idx};
use crate::block;
use crate::op::Sum;
use crate::warp::{self, FULL_MASK};

/// Loads `input[i]`, or 0 past the end.
///
/// # Safety
/// `input` valid for `n` reads.
#[inline(always)]
unsafe fn load_or_zero(input: *const f32, i: u64, n: u64) -> f32 {
    // SAFETY: i < n.
    if i < n {
        unsafe { input.add(i as usize).read() }
    } else {
        0.0
    }
}

/// Parks this thread's value in its shared-memory slot and waits for the block: the start of v0–v4.
///
/// # Safety
/// Every thread of the block calls it; the launch provides `blockDim.x` floats of shared memory.
#[inline(always)]
unsafe fn stage(v: f32) -> *mut f32 {
    // SAFETY: slot `tid` is this thread's; the barrier publishes every slot.
    unsafe {
        let s = arch::shared::<f32>();
        s.add(thread_idx() as usize).write(v);
        sync_threads();
        s
    }
}

/// This thread's one element in v0–v2, or 0 past the end.
///
/// # Safety
/// `input` valid for `n` reads.
#[inline(always)]
unsafe fn load_one(input: *const f32, n: u64) -> f32 {
    // SAFETY: bounds checked inside.
    unsafe {
        load_or_zero(
            input,
            block_idx() as u64 * block_dim() as u64 + thread_idx() as u64,
            n,
        )
    }
}

/// Shared tail of v0–v3: thread 0 writes `s[0]`.
///
/// # Safety
/// `s[0]` final and visible (after a barrier); `out` valid for `gridDim.x` writes.
#[inline(always)]
unsafe fn write_block_result(s: *const f32, out: *mut f32) {
    if thread_idx() == 0 {
        // SAFETY: per the contract above.
        unsafe { out.add(block_idx() as usize).write(s.read()) };
    }
}

/// v0: interleaved addressing, `tid % (2*stride)` selects the working threads, so every warp diverges.
///
/// # Safety
/// `input` valid for `n` reads, `out` for `gridDim.x` writes, `blockDim.x * 4` bytes of shared memory.
pub unsafe fn v0(input: *const f32, n: u64, out: *mut f32) {
    let tid = thread_idx();
    // SAFETY: the launch provides blockDim.x floats of shared memory; barriers order every access.
    unsafe {
        let s = stage(load_one(input, n));
        let mut stride = 1;
        while stride < block_dim() {
            #[allow(clippy::manual_is_multiple_of)]
            // the seed's expression, kept as the lesson shows it
            if tid % (2 * stride) == 0 {
                *s.add(tid as usize) += *s.add((tid + stride) as usize);
            }
            sync_threads();
            stride *= 2;
        }
        write_block_result(s, out);
    }
}

/// v1: contiguous threads work at `2*stride*tid`: no divergence, but the strided shared-memory index makes
/// bank conflicts.
///
/// # Safety
/// As [`v0`].
pub unsafe fn v1(input: *const f32, n: u64, out: *mut f32) {
    let tid = thread_idx();
    // SAFETY: as v0.
    unsafe {
        let s = stage(load_one(input, n));
        let mut stride = 1;
        while stride < block_dim() {
            let idx = 2 * stride * tid;
            if idx < block_dim() {
                *s.add(idx as usize) += *s.add((idx + stride) as usize);
            }
            sync_threads();
            stride *= 2;
        }
        write_block_result(s, out);
    }
}

/// Sequential addressing from `first`: the low half adds the high half, halving down to `stop`.
///
/// # Safety
/// `s` holds `blockDim.x` floats written before a barrier; all threads call this.
#[inline(always)]
unsafe fn sequential_halving(s: *mut f32, stop: u32) {
    let tid = thread_idx();
    let mut stride = block_dim() / 2;
    while stride > stop {
        if tid < stride {
            // SAFETY: tid + stride < blockDim.x.
            unsafe { *s.add(tid as usize) += *s.add((tid + stride) as usize) };
        }
        // SAFETY: every thread reaches it.
        unsafe { sync_threads() };
        stride >>= 1;
    }
}

/// v2: sequential addressing: the low half adds the high half, no divergence within warps, no conflicts.
///
/// # Safety
/// As [`v0`].
pub unsafe fn v2(input: *const f32, n: u64, out: *mut f32) {
    // SAFETY: as v0.
    unsafe {
        let s = stage(load_one(input, n));
        sequential_halving(s, 0);
        write_block_result(s, out);
    }
}

/// Loads two elements a block apart and adds them: the first add happens during the load.
///
/// # Safety
/// `input` valid for `n` reads.
#[inline(always)]
unsafe fn load_pair(input: *const f32, n: u64) -> f32 {
    let i = block_idx() as u64 * (2 * block_dim() as u64) + thread_idx() as u64;
    // SAFETY: forwarded bounds checks.
    unsafe { load_or_zero(input, i, n) + load_or_zero(input, i + block_dim() as u64, n) }
}

/// v3: each block covers `2 * blockDim.x` elements and adds pairs while loading, halving the idle threads.
///
/// # Safety
/// As [`v0`].
pub unsafe fn v3(input: *const f32, n: u64, out: *mut f32) {
    // SAFETY: as v0.
    unsafe {
        let s = stage(load_pair(input, n));
        sequential_halving(s, 0);
        write_block_result(s, out);
    }
}

/// v4: v3, but the last 64 → 1 steps run in warp 0 with shuffles: no barriers and no volatile shared memory.
///
/// # Safety
/// As [`v0`], and `blockDim.x >= 64`.
pub unsafe fn v4(input: *const f32, n: u64, out: *mut f32) {
    let tid = thread_idx();
    // SAFETY: as v0.
    unsafe {
        let s = stage(load_pair(input, n));
        sequential_halving(s, 32);
        if tid < 32 {
            let v = *s.add(tid as usize) + *s.add(tid as usize + 32);
            let v = warp::reduce::<Sum<f32>>(v, 32, FULL_MASK);
            if tid == 0 {
                out.add(block_idx() as usize).write(v);
            }
        }
    }
}

/// v5: grid-stride loop over float4 loads, then warp shuffle → shared memory → warp shuffle, one barrier.
///
/// # Safety
/// `input` valid for `n` reads and 16-byte aligned; `out` valid for `gridDim.x` writes; [`crate::SMEM_BYTES`]
/// of shared memory.
pub unsafe fn v5(input: *const f32, n: u64, out: *mut f32) {
    let (t, threads) = (arch::global_thread_idx(), arch::grid_threads());
    let quads = n / 4;
    let in4 = input as *const Vec16<[f32; 4]>;
    let mut v = 0.0f32;
    let mut i = t;
    while i < quads {
        // SAFETY: i < n / 4 and the input is 16-byte aligned.
        let q = unsafe { arch::load_vec16(in4.add(i as usize)) }.0;
        v += (q[0] + q[1]) + (q[2] + q[3]);
        i += threads;
    }
    let mut i = quads * 4 + t;
    while i < n {
        // SAFETY: i < n.
        v += unsafe { input.add(i as usize).read() };
        i += threads;
    }
    // SAFETY: every thread of the block gets here.
    let v = unsafe { block::reduce::<Sum<f32>>(v) };
    if thread_idx() == 0 {
        // SAFETY: block_idx < gridDim.x.
        unsafe { out.add(block_idx() as usize).write(v) };
    }
}
