//! Launch policy: threads per block and resident blocks per SM for the device-wide kernels, kept apart from
//! the kernel bodies. One row per arch family, newest first, falling back to the oldest.
use reduce_contract::layout::{LOAD_BYTES, UNROLL};

/// How a device-wide reduction is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Threads per block: a multiple of 32, at most 1024. Under the tuning table's policy, a grid-stride
    /// kernel whose registers leave much of an SM idle at this size (another multiple of 64 keeps at least
    /// a quarter more threads resident) takes the largest of the sizes that keep the most, and the grid
    /// follows: the heavy statistics of 16-bit input, for example. A policy given to `set_policy` is not
    /// fitted so (until `reset_policy`).
    pub threads: u32,
    /// Blocks per SM at most; the grid is `sm_count * blocks_per_sm` for large inputs (for a kernel fitted
    /// to its registers, as many blocks of its size as hold `blocks_per_sm · threads` threads an SM), at
    /// most one resident wave.
    pub blocks_per_sm: u32,
    /// Threads of the one-block finalize kernel.
    pub finalize_threads: u32,
}

/// (minimum compute capability, policy).
const TABLE: &[(u32, Policy)] = &[
    // H200 (sm_90): 256 × 8 fills the SM's 2048 threads. Measured 2026-11-30 at 2^15 / 2^18 / 2^20 f32
    // (docs/PERFORMANCE.md, "Every size"): 2.94 / 3.12 / 3.93 µs; 128 × 16 2.87 / 3.18 / 4.19, 512 × 4
    // 3.06 / 3.20 / 4.00; a 64- or 32-thread finalize no faster (2.96, 3.16–3.42, 4.71–5.72).
    (
        90,
        Policy {
            threads: 256,
            blocks_per_sm: 8,
            finalize_threads: 256,
        },
    ),
    // Ampere and Turing: same shape, fewer threads per SM on sm_75 (1024), so 4 blocks fill it.
    (
        80,
        Policy {
            threads: 256,
            blocks_per_sm: 8,
            finalize_threads: 256,
        },
    ),
    (
        0,
        Policy {
            threads: 256,
            blocks_per_sm: 4,
            finalize_threads: 256,
        },
    ),
];

/// Inputs of at most this many bytes are reduced by one block (of [`single_block_threads`]) in one launch,
/// whatever the combine strategy: one trip of four 16-byte loads per thread covers them, and a multi-block
/// grid would add a round of partials (a second launch, or a fence and a ticket) to microseconds of work.
pub const SINGLE_BLOCK_BYTES: u64 = 64 * 1024;

/// Where the code image has no programmatic dependent launch (built from PTX before sm_90, or a driver
/// before CUDA 12.3), [`Combine::Auto`](crate::Combine::Auto) uses `TwoPass` up to this many input bytes and
/// `LastBlock` above; with it, `TwoPass` at every size (run F, 2026-12-01: TwoPass / LastBlock 9.9 / 11.0 µs
/// at 2^22, 65.9 / 66.3 at 2^26 + 3, 241.8 / 242.6 at 2^28). The rule was measured 2026-11-30, before
/// dependent launch (graphs of 100, f32, docs/PERFORMANCE.md run D): TwoPass / LastBlock at 2^15 / 2^18 /
/// 2^20 3.3 / 3.4, 3.4 / 3.4 and 4.3 / 4.4 µs, at 2^22 11.5 / 10.8. (Before LastBlock's ticket wrapped to
/// zero by itself, 4.84 / 4.99 / 5.94 µs against 2.94 / 3.12 / 3.93: a captured LastBlock launch needed a
/// memset of its graph ticket ahead of it.) At 2^28 the two are within 0.6 %.
pub const AUTO_TWO_PASS_BYTES: u64 = 4 << 20;

/// Most threads of the single-block path (fewer when a kernel's registers allow fewer).
pub const SINGLE_BLOCK_THREADS: u32 = 1024;

/// Threads of the single-block path for `bytes` of input. Sums, maxima and minima take one trip of
/// `UNROLL` 16-byte loads per thread, between 256 and 1024 threads: a smaller block spends less on its
/// block reduction, which is what these sizes wait for. Measured on the H200 (graphs of 100, f32 sum, µs per
/// call for 256 / 512 / 1024 threads): 2^10 1.38 / 1.44 / 1.61, 2^12 1.67 / 2.01 / 1.87, 2^13
/// 2.16 / 1.83 / 2.28, 2^14 3.24 / 2.34 / 2.14 (`docs/PERFORMANCE.md`). Argmax and argmin keep 1024: each
/// element costs them more, and fewer elements per thread won there (2^12: 3.49 / 3.53 / 3.18).
pub(crate) fn single_block_threads(bytes: u64, indexed: bool) -> u32 {
    if indexed {
        return SINGLE_BLOCK_THREADS;
    }
    (bytes / (LOAD_BYTES * UNROLL))
        .next_power_of_two()
        .clamp(256, SINGLE_BLOCK_THREADS as u64) as u32
}

/// Threads per block of the histogram kernels, on every arch. A block's 32 private copies of 256 bins take
/// 32 KiB of shared memory, so blocks of 256 threads would fill only 7/8 of an H200 SM's threads; 512-thread
/// blocks fill 3/4 (limited by registers) and measured fastest for both the f32 and the byte histogram
/// (docs/PERFORMANCE.md). The grid holds as many as fit.
pub const HISTOGRAM_THREADS: u32 = 512;

/// Threads per block of the compaction kernels (`DeviceSelect`'s default policy). A tile is `threads × 4`
/// vectors: larger tiles mean fewer look-backs (and atomics, unordered), whose latency every block waits
/// out at a barrier; 512 measured fastest on the H200 (docs/PERFORMANCE.md).
pub const SELECT_THREADS: u32 = 512;

/// Threads of the reproducible sum's one-block combine: as many as a block holds, so that the block has
/// one thread per virtual lane of the combine and the most partials in flight (its arithmetic does not
/// depend on it).
pub const REPRO_COMBINE_THREADS: u32 = 1024;

/// Largest input, in bytes, for which the reproducible sum's chunk kernel prefetches each next batch into
/// L2 by default. With f32 batches of 64 loads a thread, on the H200 the prefetch lifted 2^24 f32 (64 MiB)
/// from 92–93 % of the default sum's rate to 97–98 % and 2^26 + 3 (256 MiB) from 96 % to 99–101 %, but
/// took 2^27 (512 MiB) from 97 % down to 90–92 % and 2^28 (1 GiB) from 98 % down to 91–93 %
/// (docs/PERFORMANCE.md): the cut lies between 256 and 512 MiB. `cargo bench --bench reduce` times both
/// ("reprosum" and "reprosumprefetch").
pub const REPRO_PREFETCH_L2_MAX_BYTES: u64 = 384 << 20;

/// Most resident blocks per SM on any supported GPU: a larger `blocks_per_sm` could only allocate partials
/// that no launch uses.
pub const MAX_BLOCKS_PER_SM: u32 = 32;

impl Policy {
    /// Checks a policy a caller forces: block sizes multiples of 32 in 32..=1024 and `blocks_per_sm` in
    /// 1..=32.
    pub(crate) fn check(&self) -> crate::Result<()> {
        let block_ok = |t: u32| t.is_multiple_of(32) && (32..=1024).contains(&t);
        if !block_ok(self.threads)
            || !block_ok(self.finalize_threads)
            || !(1..=MAX_BLOCKS_PER_SM).contains(&self.blocks_per_sm)
        {
            return Err(crate::Error::InvalidArgument(format!(
                "{self:?}: threads and finalize_threads must be multiples of 32 in 32..=1024, and blocks_per_sm \
                 in 1..={MAX_BLOCKS_PER_SM}"
            )));
        }
        Ok(())
    }
}

/// The policy for compute capability `cc`.
pub fn policy(cc: u32) -> Policy {
    TABLE
        .iter()
        .find(|(min, _)| cc >= *min)
        .map(|(_, p)| *p)
        .unwrap_or(TABLE[TABLE.len() - 1].1)
}

/// Elements one block consumes per loop trip: threads × 16-byte vectors × the kernels' unroll (at least
/// one, whatever the arguments).
pub(crate) fn elements_per_block_trip(threads: u32, elem_size: usize) -> u64 {
    (threads as u64 * (LOAD_BYTES / elem_size.max(1) as u64) * UNROLL).max(1)
}

/// Grid size for `n` elements: enough blocks for one trip each, at most the resident maximum, at least 1.
pub(crate) fn grid_for(policy: &Policy, sm_count: u32, n: u64, elem_size: usize) -> u32 {
    let max = sm_count.saturating_mul(policy.blocks_per_sm).max(1);
    let want = n.div_ceil(elements_per_block_trip(policy.threads, elem_size));
    want.clamp(1, max as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_sized_from_the_sm_count() {
        let p = Policy {
            threads: 256,
            blocks_per_sm: 8,
            finalize_threads: 256,
        };
        assert_eq!(grid_for(&p, 132, 0, 4), 1);
        assert_eq!(grid_for(&p, 132, 1, 4), 1);
        assert_eq!(
            grid_for(&p, 132, 4096, 4),
            1,
            "one trip of 256 threads × 16 floats"
        );
        assert_eq!(grid_for(&p, 132, 4097, 4), 2);
        assert_eq!(grid_for(&p, 132, 1 << 28, 4), 132 * 8);
        assert_eq!(
            grid_for(&p, 132, (1 << 32) + 5, 4),
            132 * 8,
            "no overflow past 2^32"
        );
        assert_eq!(grid_for(&p, 132, 4096, 8), 2, "doubles: 2 per vector");
    }

    #[test]
    fn single_block_threads_follow_the_measured_sizes() {
        // f32 bytes of 2^10 … 2^14 elements: 256, 256, 256, 512, 1024 threads (the measured best but at
        // 2^11, where 256 still beat CUB).
        let threads: Vec<u32> = (10..=14)
            .map(|l| single_block_threads(4u64 << l, false))
            .collect();
        assert_eq!(threads, [256, 256, 256, 512, 1024]);
        assert_eq!(single_block_threads(SINGLE_BLOCK_BYTES, false), 1024);
        assert_eq!(single_block_threads(1, false), 256, "tiny inputs");
        assert_eq!(
            single_block_threads(4096, true),
            1024,
            "argmax/argmin keep 1024"
        );
        // Every answer is a legal block size of the single-block path.
        for bytes in [0, 1, 17, 4095, 65_536, 1 << 40] {
            let t = single_block_threads(bytes, false);
            assert!(t.is_power_of_two() && (256..=SINGLE_BLOCK_THREADS).contains(&t));
        }
    }

    #[test]
    fn degenerate_policies_neither_divide_by_zero_nor_overflow() {
        let p = Policy {
            threads: 0,
            blocks_per_sm: u32::MAX,
            finalize_threads: 0,
        };
        assert_eq!(grid_for(&p, 132, 1 << 20, 4), (1 << 20) as u32);
        assert_eq!(grid_for(&p, u32::MAX, 0, 0), 1);
    }

    #[test]
    fn tuning_table_falls_back_by_compute_capability() {
        assert_eq!(policy(90).blocks_per_sm, 8);
        assert_eq!(policy(120), policy(90));
        assert_eq!(policy(75).blocks_per_sm, 4);
        for cc in [75, 80, 86, 90] {
            let p = policy(cc);
            assert_eq!(p.threads % 32, 0);
            assert!(p.threads <= 1024 && p.finalize_threads <= 1024);
        }
    }
}
