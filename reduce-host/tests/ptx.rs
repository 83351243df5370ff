//! CPU tests of the embedded PTX: every arch holds every kernel, `ptxas` accepts it, and no kernel spills or
//! uses a local-memory stack frame.
use std::path::PathBuf;
use std::process::Command;

use reduce_host::ptx::{self, MODULES};

/// Finds ptxas: `$PTXAS`, then the PATH. `scripts/setup.sh` installs it and exports `PTXAS`.
fn ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("PTXAS") {
        return p.into();
    }
    let found = Command::new("ptxas")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "ptxas not found: set PTXAS or run `bash scripts/setup.sh` (installs the nvidia-cuda-nvcc wheel)"
    );
    "ptxas".into()
}

#[test]
fn one_module_per_arch() {
    let archs: Vec<u32> = MODULES.iter().map(|m| m.arch).collect();
    assert_eq!(archs, [75, 80, 90]);
    for m in MODULES {
        assert!(
            m.text().contains(&format!(".target sm_{}", m.arch)),
            "sm_{} module targets another arch",
            m.arch
        );
    }
}

#[test]
fn every_module_holds_every_kernel() {
    let mut names: Vec<String> = reduce_host::all_kernels()
        .iter()
        .map(|k| k.to_str().unwrap().to_owned())
        .collect();
    names.extend((0..=5).map(|v| format!("seed_v{v}")));
    names.extend(
        reduce_host::select_kernels()
            .iter()
            .map(|k| k.to_str().unwrap().to_owned()),
    );
    names.push("test_block_scan".into());
    for w in [32, 16, 8, 4] {
        for prim in TILE_TEST_PRIMITIVES {
            names.push(format!("test_tile_{prim}_{w}"));
        }
    }
    for m in MODULES {
        for name in &names {
            assert!(
                m.text().contains(&format!(".entry {name}(")),
                "sm_{}: no kernel {name}",
                m.arch
            );
        }
    }
}

#[test]
fn device_selection_picks_the_newest_module_not_newer_than_the_device() {
    assert!(
        ptx::best_for(61).is_none(),
        "Pascal is older than every module"
    );
    assert_eq!(ptx::best_for(75).unwrap().arch, 75);
    assert_eq!(ptx::best_for(86).unwrap().arch, 80);
    assert_eq!(ptx::best_for(89).unwrap().arch, 80);
    assert_eq!(ptx::best_for(90).unwrap().arch, 90);
    assert_eq!(ptx::best_for(120).unwrap().arch, 90);
}

#[test]
fn kernels_use_the_vector_loads_and_shuffles_they_rely_on() {
    for m in MODULES {
        let t = m.text();
        assert!(
            t.contains("ld.global.nc.L1::no_allocate.v4.u32"),
            "sm_{}: no 16-byte loads",
            m.arch
        );
        assert!(
            t.contains("shfl.sync.down.b32"),
            "sm_{}: no warp shuffles",
            m.arch
        );
        assert!(
            t.contains("fence.acq_rel.gpu"),
            "sm_{}: no fence for LastBlock",
            m.arch
        );
        assert!(
            t.contains("match.any.sync.b32") && t.contains("red.shared.add.u32"),
            "sm_{}: no shared-memory histogram or warp-aggregated global fallback",
            m.arch
        );
    }
}

#[test]
fn every_partials_kernel_reads_with_16_byte_loads() {
    for m in MODULES {
        let t = m.text();
        for name in reduce_host::all_kernels() {
            let name = name.to_str().unwrap();
            if !name.starts_with("reduce_partials_") {
                continue;
            }
            let start = t
                .find(&format!(".entry {name}("))
                .unwrap_or_else(|| panic!("sm_{}: no kernel {name}", m.arch));
            let body = &t[start..start + t[start..].find("\n}\n").expect("end of entry")];
            assert!(
                body.contains("ld.global.nc.L1::no_allocate.v4.u32"),
                "sm_{} {name}: no 16-byte loads",
                m.arch
            );
        }
    }
}

/// The tile primitives `tests/gpu_tiles.rs` launches, one `test_tile_<primitive>_<W>` kernel each.
const TILE_TEST_PRIMITIVES: [&str; 22] = [
    "ranks",
    "shfl",
    "shfl_up",
    "shfl_down",
    "shfl_xor",
    "ballot",
    "any",
    "all",
    "sync",
    "reduce_sum_u32",
    "reduce_max_u32",
    "reduce_sum_f32",
    "reduce_max_f32",
    "all_reduce_sum_u32",
    "all_reduce_max_u32",
    "all_reduce_sum_f32",
    "all_reduce_max_f32",
    "inclusive_scan_sum_u32",
    "exclusive_scan_sum_u32",
    "inclusive_scan_sum_f32",
    "exclusive_scan_sum_f32",
    "inclusive_scan_max_f32",
];

#[test]
fn compaction_uses_votes_atomics_and_look_back() {
    for m in MODULES {
        let t = m.text();
        for (what, needle) in [
            ("ballot", "vote.sync.ballot.b32"),
            ("any vote", "vote.sync.any.pred"),
            ("all vote", "vote.sync.all.pred"),
            ("64-bit atomic add", "atom.add.relaxed.gpu.global.u64"),
            ("lane mask", "%lanemask_lt"),
            ("population count", "popc.b32"),
            ("look-back load", "ld.volatile.global.b64"),
            ("look-back store", "st.volatile.global.b64"),
        ] {
            assert!(t.contains(needle), "sm_{}: no {what} ({needle})", m.arch);
        }
    }
}

#[test]
fn compaction_constants_match_the_kernel_crate() {
    let select = include_str!("../../kernels-gpu/src/select.rs");
    for want in [
        format!(
            "pub const STABLE_VECTORS: usize = {};",
            reduce_host::select::STABLE_VECTORS
        ),
        format!(
            "pub const STAGE_OFFSET: usize = {};",
            reduce_host::select::STAGE_OFFSET
        ),
    ] {
        assert!(
            select.contains(&want),
            "kernels-gpu's select constants differ from reduce-host's ({want})"
        );
    }
}

#[test]
fn shared_memory_size_matches_the_kernel_crate() {
    let lib = include_str!("../../kernels-gpu/src/lib.rs");
    let want = format!(
        "pub const SMEM_BYTES: u32 = {};",
        reduce_host::KERNEL_SHARED_BYTES
    );
    assert!(
        lib.contains(&want),
        "kernels-gpu's SMEM_BYTES differs from reduce-host's ({want})"
    );
}

#[test]
fn ptxas_accepts_every_module_without_spills_or_stack() {
    let ptxas = ptxas();
    let dir = std::env::temp_dir().join(format!("reduce-host-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for m in MODULES {
        let src = dir.join(format!("sm{}.ptx", m.arch));
        std::fs::write(&src, m.text()).unwrap();
        let out = Command::new(&ptxas)
            .args(["-v", &format!("-arch=sm_{}", m.arch), "-o"])
            .arg(dir.join(format!("sm{}.cubin", m.arch)))
            .arg(&src)
            .output()
            .expect("run ptxas");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ptxas rejected sm_{}:\n{log}", m.arch);
        let mut kernels = 0;
        let mut current = String::new();
        for line in log.lines() {
            if let Some(name) = line.split("Function properties for ").nth(1) {
                current = name.trim().to_owned();
                kernels += 1;
            }
            if line.contains("bytes stack frame") {
                assert!(
                    line.trim() == "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                    "sm_{} {current}: {}",
                    m.arch,
                    line.trim()
                );
            }
        }
        assert!(
            kernels >= reduce_host::all_kernels().len(),
            "sm_{}: ptxas reported {kernels} kernels",
            m.arch
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
