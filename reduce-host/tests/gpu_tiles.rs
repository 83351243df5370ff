//! GPU tests of kernels-gpu's `Tile<W>` (and the block scan built on it): each `test_tile_<prim>_<W>` kernel
//! applies one primitive to one value per lane, and every lane's output is compared with a plain-Rust
//! simulation of the same lane arithmetic (shuffles with PTX's clamp semantics, the same reduction and scan
//! trees). Ignored without a GPU.
use std::fmt::Debug;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use reduce_host::{Gpu, LaneWord};

const WIDTHS: [usize; 4] = [32, 16, 8, 4];
/// Four warps: enough tiles per warp and warps per block to catch a tile or warp mix-up.
const LANES: usize = 128;

fn gpu() -> Gpu {
    Gpu::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

fn run<X: LaneWord>(gpu: &Gpu, name: &str, input: &[X], arg: u32) -> Vec<X> {
    gpu.run_lane_kernel(name, input, arg)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check<X: PartialEq + Debug>(what: &str, input: &[X], got: &[X], want: &[X]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            g,
            w,
            "{what}: lane {i} (input {:?})",
            &input[i / 32 * 32..i / 32 * 32 + 32]
        );
    }
}

/// Small integers, so u32 sums never wrap and f32 sums are exact.
fn small_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| r.random_range(0..1000)).collect()
}

fn small_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| r.random_range(-50i32..50) as f32).collect()
}

/// Inputs for the votes: tile `k` of width `w` is random, all odd or all even as `k % 3`.
fn vote_input(n: usize, w: usize, seed: u64) -> Vec<u32> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|i| match (i / w) % 3 {
            0 => r.random_range(0..100),
            1 => 2 * r.random_range(0..50) + 1,
            _ => 2 * r.random_range(0..50),
        })
        .collect()
}

// ---- The lane model: a block's lanes as a slice, cut into tiles of `w`. ----

/// `shfl`: every lane reads the lane of rank `src(rank) % w` of its tile.
fn m_shfl<T: Copy>(v: &[T], w: usize, src: impl Fn(usize) -> usize) -> Vec<T> {
    (0..v.len())
        .map(|i| v[i / w * w + src(i % w) % w])
        .collect()
}

/// `shfl_up`: rank `r` reads `r - d`, ranks below `d` keep their own.
fn m_up<T: Copy>(v: &[T], w: usize, d: usize) -> Vec<T> {
    (0..v.len())
        .map(|i| if i % w >= d { v[i - d] } else { v[i] })
        .collect()
}

/// `shfl_down`: rank `r` reads `r + d`, ranks at or past `w - d` keep their own (the clamp).
fn m_down<T: Copy>(v: &[T], w: usize, d: usize) -> Vec<T> {
    (0..v.len())
        .map(|i| if i % w + d < w { v[i + d] } else { v[i] })
        .collect()
}

/// `shfl_xor`: rank `r` reads `r ^ (m % w)`.
fn m_xor<T: Copy>(v: &[T], w: usize, m: usize) -> Vec<T> {
    (0..v.len())
        .map(|i| v[i / w * w + ((i % w) ^ (m & (w - 1)))])
        .collect()
}

fn zip<T: Copy>(a: &[T], b: &[T], op: impl Fn(T, T) -> T) -> Vec<T> {
    a.iter().zip(b).map(|(&x, &y)| op(x, y)).collect()
}

/// `reduce`: the shfl_down tree, every lane's value after every step (lane 0 of a tile holds the result).
fn m_reduce<T: Copy>(v: &[T], w: usize, op: impl Fn(T, T) -> T + Copy) -> Vec<T> {
    let mut v = v.to_vec();
    let mut off = w / 2;
    while off > 0 {
        v = zip(&v, &m_down(&v, w, off), op);
        off /= 2;
    }
    v
}

/// `all_reduce`: the shfl_xor butterfly.
fn m_all_reduce<T: Copy>(v: &[T], w: usize, op: impl Fn(T, T) -> T + Copy) -> Vec<T> {
    let mut v = v.to_vec();
    let mut off = w / 2;
    while off > 0 {
        v = zip(&v, &m_xor(&v, w, off), op);
        off /= 2;
    }
    v
}

/// `inclusive_scan`: Hillis–Steele on shfl_up, the earlier operand on the left.
fn m_inclusive<T: Copy>(v: &[T], w: usize, op: impl Fn(T, T) -> T) -> Vec<T> {
    let mut v = v.to_vec();
    let mut d = 1;
    while d < w {
        let earlier = m_up(&v, w, d);
        v = (0..v.len())
            .map(|i| {
                if i % w >= d {
                    op(earlier[i], v[i])
                } else {
                    v[i]
                }
            })
            .collect();
        d *= 2;
    }
    v
}

/// `exclusive_scan`: the inclusive scan shifted up one rank, the identity at rank 0.
fn m_exclusive<T: Copy>(v: &[T], w: usize, op: impl Fn(T, T) -> T, identity: T) -> Vec<T> {
    let shifted = m_up(&m_inclusive(v, w, op), w, 1);
    (0..v.len())
        .map(|i| if i % w == 0 { identity } else { shifted[i] })
        .collect()
}

fn add_u32(a: u32, b: u32) -> u32 {
    a.wrapping_add(b)
}
fn max_u32(a: u32, b: u32) -> u32 {
    a.max(b)
}
fn add_f32(a: f32, b: f32) -> f32 {
    a + b
}
/// The device's Max on numbers: the right operand wins only when strictly greater.
fn max_f32(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

// ---- The tests. ----

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn ranks_follow_tiled_partition() {
    let gpu = gpu();
    for w in WIDTHS {
        for lanes in [32, LANES, 1024] {
            let input = vec![0u32; lanes];
            let want: Vec<u32> = (0..lanes)
                .map(|t| (t % w) as u32 | ((t / w) as u32) << 10 | ((lanes / w) as u32) << 20)
                .collect();
            let name = format!("test_tile_ranks_{w}");
            check(
                &format!("{name} on {lanes} lanes"),
                &input,
                &run(&gpu, &name, &input, 0),
                &want,
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn shuffles_match_the_lane_model() {
    let gpu = gpu();
    for w in WIDTHS {
        let input = small_u32(LANES, w as u64);
        for a in [0, 1, 2, 3, 5, w / 2, w - 1, w, 31].map(|a| a.min(31)) {
            let arg = a as u32;
            let cases: [(&str, Vec<u32>); 4] = [
                ("shfl", m_shfl(&input, w, |r| r * 3 + a)),
                ("shfl_up", m_up(&input, w, a)),
                ("shfl_down", m_down(&input, w, a)),
                ("shfl_xor", m_xor(&input, w, a)),
            ];
            for (prim, want) in cases {
                let name = format!("test_tile_{prim}_{w}");
                check(
                    &format!("{name}({a})"),
                    &input,
                    &run(&gpu, &name, &input, arg),
                    &want,
                );
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn votes_see_only_their_tile() {
    let gpu = gpu();
    for w in WIDTHS {
        let input = vote_input(LANES, w, 7 + w as u64);
        let odd = |i: usize| input[i] & 1 != 0;
        let tile = |i: usize| i / w * w..i / w * w + w;
        let ballot: Vec<u32> = (0..LANES)
            .map(|i| tile(i).map(|j| (odd(j) as u32) << (j % w)).sum())
            .collect();
        let any: Vec<u32> = (0..LANES).map(|i| tile(i).any(odd) as u32).collect();
        let all: Vec<u32> = (0..LANES).map(|i| tile(i).all(odd) as u32).collect();
        for (prim, want) in [("ballot", ballot), ("any", any), ("all", all)] {
            let name = format!("test_tile_{prim}_{w}");
            check(&name, &input, &run(&gpu, &name, &input, 0), &want);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn sync_orders_shared_memory_within_the_tile() {
    let gpu = gpu();
    for w in WIDTHS {
        let input = small_u32(LANES, 11 + w as u64);
        let name = format!("test_tile_sync_{w}");
        let want = m_shfl(&input, w, |r| r + 1);
        check(&name, &input, &run(&gpu, &name, &input, 0), &want);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn reductions_match_the_lane_model() {
    let gpu = gpu();
    for w in WIDTHS {
        let u = small_u32(LANES, 21 + w as u64);
        let f = small_f32(LANES, 31 + w as u64);
        for (name, want) in [
            ("reduce_sum_u32", m_reduce(&u, w, add_u32)),
            ("reduce_max_u32", m_reduce(&u, w, max_u32)),
            ("all_reduce_sum_u32", m_all_reduce(&u, w, add_u32)),
            ("all_reduce_max_u32", m_all_reduce(&u, w, max_u32)),
        ] {
            let name = format!("test_tile_{name}_{w}");
            check(&name, &u, &run(&gpu, &name, &u, 0), &want);
        }
        for (name, want) in [
            ("reduce_sum_f32", m_reduce(&f, w, add_f32)),
            ("reduce_max_f32", m_reduce(&f, w, max_f32)),
            ("all_reduce_sum_f32", m_all_reduce(&f, w, add_f32)),
            ("all_reduce_max_f32", m_all_reduce(&f, w, max_f32)),
        ] {
            let name = format!("test_tile_{name}_{w}");
            check(&name, &f, &run(&gpu, &name, &f, 0), &want);
        }
        // The documented results, independent of the model: lane 0 of each tile (reduce), every lane
        // (all_reduce).
        let sums: Vec<u32> = u.chunks(w).map(|c| c.iter().sum()).collect();
        let reduced = run(&gpu, &format!("test_tile_reduce_sum_u32_{w}"), &u, 0);
        let all = run(&gpu, &format!("test_tile_all_reduce_sum_u32_{w}"), &u, 0);
        for (k, s) in sums.iter().enumerate() {
            assert_eq!(reduced[k * w], *s, "reduce_sum_u32_{w}: tile {k}");
            assert!(
                all[k * w..k * w + w].iter().all(|x| x == s),
                "all_reduce_sum_u32_{w}: tile {k}"
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn scans_match_the_lane_model_and_prefix_sums() {
    let gpu = gpu();
    for w in WIDTHS {
        let u = small_u32(LANES, 41 + w as u64);
        let f = small_f32(LANES, 51 + w as u64);
        for (name, want) in [
            ("inclusive_scan_sum_u32", m_inclusive(&u, w, add_u32)),
            ("exclusive_scan_sum_u32", m_exclusive(&u, w, add_u32, 0)),
        ] {
            let name = format!("test_tile_{name}_{w}");
            check(&name, &u, &run(&gpu, &name, &u, 0), &want);
        }
        for (name, want) in [
            ("inclusive_scan_sum_f32", m_inclusive(&f, w, add_f32)),
            ("exclusive_scan_sum_f32", m_exclusive(&f, w, add_f32, 0.0)),
            ("inclusive_scan_max_f32", m_inclusive(&f, w, max_f32)),
        ] {
            let name = format!("test_tile_{name}_{w}");
            check(&name, &f, &run(&gpu, &name, &f, 0), &want);
        }
        // Independent of the model: plain prefix sums per tile.
        let mut inclusive = Vec::new();
        let mut exclusive = Vec::new();
        for c in u.chunks(w) {
            let mut acc = 0;
            for &x in c {
                exclusive.push(acc);
                acc += x;
                inclusive.push(acc);
            }
        }
        let name = format!("test_tile_inclusive_scan_sum_u32_{w}");
        check(&name, &u, &run(&gpu, &name, &u, 0), &inclusive);
        let name = format!("test_tile_exclusive_scan_sum_u32_{w}");
        check(&name, &u, &run(&gpu, &name, &u, 0), &exclusive);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn block_scan_gives_prefix_and_total_in_every_thread() {
    let gpu = gpu();
    for lanes in [32, 64, 96, 256, 1024] {
        let mut r = SmallRng::seed_from_u64(lanes as u64);
        let input: Vec<u32> = (0..lanes).map(|_| r.random_range(0..4)).collect();
        let total: u32 = input.iter().sum();
        let mut acc = 0;
        let want: Vec<u32> = input
            .iter()
            .map(|&x| {
                let before = acc;
                acc += x;
                before | total << 16
            })
            .collect();
        check(
            &format!("test_block_scan on {lanes} threads"),
            &input,
            &run(&gpu, "test_block_scan", &input, 0),
            &want,
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn lane_kernel_launch_rejects_bad_requests() {
    let gpu = gpu();
    for (name, lanes) in [
        ("reduce_partials_sum_f32", 32),
        ("test_tile_shfl_32", 33),
        ("test_tile_shfl_32", 0),
        ("test_tile_shfl_32", 2048),
    ] {
        let r = gpu.run_lane_kernel(name, &vec![0u32; lanes], 0);
        assert!(
            matches!(r, Err(reduce_host::Error::InvalidArgument(_))),
            "{name} on {lanes} lanes: {r:?}"
        );
    }
}
