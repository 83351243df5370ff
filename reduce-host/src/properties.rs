//! CPU properties of the host-side arithmetic every call relies on, checked on random inputs: histogram
//! bins against CUB's formula, grid and tile plans, view slicing, overlap, policy checks. A failure prints
//! the seed and the shrunk input (proptest's report).
use proptest::prelude::*;

use crate::dispatch::select::stable_tiles;
use crate::tuning::{self, MAX_BLOCKS_PER_SM, Policy};
use crate::view::{DeviceView, overlap};
use crate::{EvenBins, cpu};

/// f32 values that include the awkward ones: NaN, ±∞, ±0, subnormals, huge magnitudes, and ordinary
/// values near the histogram ranges the tests draw.
fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::from_bits(1)),
        Just(f32::MAX),
        Just(f32::MIN),
        any::<u32>().prop_map(f32::from_bits),
        -1000.0f32..1000.0,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bins_follow_cubs_formula(bins in 1usize..5000, lower in -100.0f32..100.0, width in 0.001f32..500.0,
                                xs in prop::collection::vec(any_f32(), 0..200)) {
        let upper = lower + width;
        prop_assume!(upper > lower);
        let Ok(even) = EvenBins::new(bins, lower, upper) else { return Ok(()) };
        let counts = cpu::histogram_even(&xs, bins, lower, upper).unwrap();
        let mut by_bin = vec![0u64; bins];
        for &x in &xs {
            // EvenBins::bin (the documented rule the device follows) against the reference's own formula.
            if let Some(b) = even.bin(x) {
                prop_assert!(x >= lower && x < upper, "{x} binned outside [{lower}, {upper})");
                by_bin[b] += 1;
            } else {
                prop_assert!(!(x >= lower && x < upper), "{x} dropped inside [{lower}, {upper})");
            }
        }
        prop_assert_eq!(counts, by_bin);
    }

    #[test]
    fn grids_cover_the_input_within_the_resident_limit(threads in (1u32..=32).prop_map(|w| w * 32),
                                                        blocks_per_sm in 1u32..=MAX_BLOCKS_PER_SM,
                                                        sm_count in 1u32..200, n in 0u64..(1 << 40),
                                                        size in prop::sample::select(vec![1usize, 2, 4, 8])) {
        let p = Policy { threads, blocks_per_sm, finalize_threads: 256 };
        let grid = tuning::grid_for(&p, sm_count, n, size) as u64;
        prop_assert!(grid >= 1 && grid <= (sm_count * blocks_per_sm) as u64);
        let trip = tuning::elements_per_block_trip(threads, size);
        // Never more blocks than trips of work, unless one block is the floor.
        prop_assert!(grid == 1 || (grid - 1) * trip < n);
        // Monotone in n.
        prop_assert!(tuning::grid_for(&p, sm_count, n / 2, size) as u64 <= grid);
    }

    #[test]
    fn stable_tiles_are_the_fewest_that_cover_the_vectors(threads in (1u32..=23).prop_map(|w| w * 32),
                                                           addr in (0u64..1 << 20).prop_map(|a| a * 4),
                                                           n in 1u64..(1 << 36)) {
        let tiles = stable_tiles(threads, addr, n, 4);
        let per_tile = threads as u64 * 4 * 4; // vectors per tile × f32 per vector
        let covered = (addr % 16) / 4 + n; // elements from the aligned start
        prop_assert!(tiles * per_tile >= covered);
        prop_assert!((tiles - 1) * per_tile < covered);
    }

    #[test]
    fn view_slices_index_like_slices(len in 0usize..1000, a in 0usize..1100, b in 0usize..1100) {
        let host: Vec<usize> = (0..len).collect();
        // SAFETY: never dereferenced; only the address arithmetic is checked.
        let view = unsafe { DeviceView::<u32>::from_raw_parts(0x10_0000, len) };
        match (host.get(a..b), view.get(a..b)) {
            (Some(s), Some(v)) => {
                prop_assert_eq!(v.len(), s.len());
                prop_assert_eq!(v.as_raw(), 0x10_0000 + 4 * a as u64);
            }
            (None, None) => {}
            (s, v) => prop_assert!(false, "{a}..{b} of {len}: slice {:?}, view {:?}", s.map(|s| s.len()), v),
        }
    }

    #[test]
    fn overlap_matches_a_byte_by_byte_check(a in 0u64..64, la in 0u64..16, b in 0u64..64, lb in 0u64..16) {
        let brute = (a..a + la).any(|x| (b..b + lb).contains(&x));
        prop_assert_eq!(overlap((a, la), (b, lb)), brute);
    }

    #[test]
    fn policies_are_accepted_exactly_when_launchable(threads in 0u32..1100, finalize in 0u32..1100,
                                                     blocks_per_sm in 0u32..40) {
        let p = Policy { threads, blocks_per_sm, finalize_threads: finalize };
        let block = |t: u32| t.is_multiple_of(32) && (32..=1024).contains(&t);
        let ok = block(threads) && block(finalize) && (1..=MAX_BLOCKS_PER_SM).contains(&blocks_per_sm);
        prop_assert_eq!(p.check().is_ok(), ok);
    }
}
