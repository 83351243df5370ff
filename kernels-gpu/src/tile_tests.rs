//! Tiny kernels that apply one [`Tile`] primitive to one value per lane, for the host's GPU tests
//! (`reduce-host/tests/gpu_tiles.rs`), which compare every lane with a CPU model of the same lane arithmetic.
//!
//! Each is exported as `test_tile_<primitive>_<W>` and takes `LaneParams<X>` (`input`, `out`, `arg`), `X`
//! being `u32` or `f32`; one block, thread `t` reads `input[t]` and writes `out[t]`; `arg` is the shuffle's
//! source, delta or lane mask. `test_block_scan` does the same for the block scan.
use crate::arch;
use crate::op::{Max, Plus, Sum};
use crate::tile::Tile;
use reduce_contract::params::LaneParams;

/// Runs `f` on this thread's tile and input, and stores its answer.
///
/// # Safety
/// One block; `input` and `out` valid for `blockDim.x` elements; `f` upholds its collective's contract.
#[inline(always)]
unsafe fn per_lane<X: Copy, const W: u32>(
    input: *const X,
    out: *mut X,
    f: impl FnOnce(Tile<W>, X) -> X,
) {
    let t = arch::thread_idx() as usize;
    // SAFETY: t < blockDim.x, per the caller.
    unsafe { out.add(t).write(f(Tile::new(), input.add(t).read())) }
}

/// Exports one test kernel `test_tile_<name>_<W>` whose lanes compute `$body`.
macro_rules! tile_kernel {
    ($name:ident, $w:literal, $x:ty, |$tile:ident, $v:ident, $arg:ident| $body:expr) => {
        /// # Safety
        /// See the module docs.
        #[unsafe(export_name = reduce_contract::kernel_name!(tile_test $name $w))]
        pub unsafe extern "ptx-kernel" fn $name(p: LaneParams<$x>) {
            let $arg = p.arg;
            // SAFETY: the host launches one block over buffers of blockDim.x elements; every lane of every
            // tile runs the body unconditionally, so each collective is reached converged.
            unsafe { per_lane::<$x, $w>(p.input, p.out, |$tile, $v| $body) }
        }
    };
}

/// Exports every tile test kernel for each width.
macro_rules! tile_tests {
    ($($module:ident: $w:literal),*) => {$(
        mod $module {
            use super::*;

            tile_kernel!(ranks, $w, u32, |t, _v, _a| t.thread_rank() | t.meta_group_rank() << 10 | t.meta_group_size() << 20);
            tile_kernel!(shfl, $w, u32, |t, v, a| t.shfl(v, t.thread_rank() * 3 + a));
            tile_kernel!(shfl_up, $w, u32, |t, v, a| t.shfl_up(v, a));
            tile_kernel!(shfl_down, $w, u32, |t, v, a| t.shfl_down(v, a));
            tile_kernel!(shfl_xor, $w, u32, |t, v, a| t.shfl_xor(v, a));
            tile_kernel!(ballot, $w, u32, |t, v, _a| t.ballot(v & 1 != 0));
            tile_kernel!(any, $w, u32, |t, v, _a| t.any(v & 1 != 0) as u32);
            tile_kernel!(all, $w, u32, |t, v, _a| t.all(v & 1 != 0) as u32);
            // Each lane publishes in shared memory, the tile syncs, each lane reads its neighbour in the tile.
            tile_kernel!(sync, $w, u32, |t, v, _a| {
                let s = arch::shared::<u32>();
                let me = arch::thread_idx();
                s.add(me as usize).write_volatile(v);
                t.sync();
                let next = (me & !($w - 1)) | ((t.thread_rank() + 1) & ($w - 1));
                s.add(next as usize).read_volatile()
            });
            tile_kernel!(reduce_sum_u32, $w, u32, |t, v, _a| t.reduce::<Plus<u32>>(v));
            tile_kernel!(reduce_max_u32, $w, u32, |t, v, _a| t.reduce::<Max<u32>>(v));
            tile_kernel!(reduce_sum_f32, $w, f32, |t, v, _a| t.reduce::<Sum<f32>>(v));
            tile_kernel!(reduce_max_f32, $w, f32, |t, v, _a| t.reduce::<Max<f32>>(v));
            tile_kernel!(all_reduce_sum_u32, $w, u32, |t, v, _a| t.all_reduce::<Plus<u32>>(v));
            tile_kernel!(all_reduce_max_u32, $w, u32, |t, v, _a| t.all_reduce::<Max<u32>>(v));
            tile_kernel!(all_reduce_sum_f32, $w, f32, |t, v, _a| t.all_reduce::<Sum<f32>>(v));
            tile_kernel!(all_reduce_max_f32, $w, f32, |t, v, _a| t.all_reduce::<Max<f32>>(v));
            tile_kernel!(inclusive_scan_sum_u32, $w, u32, |t, v, _a| t.inclusive_scan::<Plus<u32>>(v));
            tile_kernel!(exclusive_scan_sum_u32, $w, u32, |t, v, _a| t.exclusive_scan::<Plus<u32>>(v));
            tile_kernel!(inclusive_scan_sum_f32, $w, f32, |t, v, _a| t.inclusive_scan::<Sum<f32>>(v));
            tile_kernel!(exclusive_scan_sum_f32, $w, f32, |t, v, _a| t.exclusive_scan::<Sum<f32>>(v));
            tile_kernel!(inclusive_scan_max_f32, $w, f32, |t, v, _a| t.inclusive_scan::<Max<f32>>(v));
        }
    )*};
}

tile_tests!(w32: 32, w16: 16, w8: 8, w4: 4);

/// `test_block_scan`: thread `t` writes its exclusive prefix sum in the low 16 bits and the block total in
/// the high 16 (inputs must keep both below 2^16).
///
/// # Safety
/// As the tile kernels.
#[unsafe(export_name = reduce_contract::kernel_name!(test block_scan))]
pub unsafe extern "ptx-kernel" fn test_block_scan(p: LaneParams<u32>) {
    // SAFETY: one block over blockDim.x elements; every thread calls the scan.
    unsafe {
        per_lane::<u32, 32>(p.input, p.out, |_, v| {
            let (before, total) = crate::block_scan::exclusive_scan::<Plus<u32>>(v);
            before | total << 16
        })
    }
}
