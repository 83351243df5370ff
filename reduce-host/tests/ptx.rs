//! CPU tests of the embedded PTX: every module holds its kernels and only them, the kernels use the
//! instructions they rely on, and `ptxas` accepts every module with no spills or local-memory stack frame.
//! (The embedded cubins are held to the same: the build assembles them with `--warning-as-error` on spills
//! and local memory.)
use std::path::PathBuf;
use std::process::Command;

use reduce_contract::kernels::{every_kernel, register_cap};
use reduce_contract::topk;
use reduce_contract::{Elem, FloatElem, Module, Op, Pred, Sample};
use reduce_host::images::embedded_ptx;

/// Finds ptxas as the build does: `$PTXAS`, the PATH, then what `scripts/setup.sh` installs in `.deps/`.
fn ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("PTXAS") {
        return p.into();
    }
    let runs = |p: &std::path::Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let setup = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.deps/nvcc/nvidia");
    let installed = std::fs::read_dir(setup)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("bin/ptxas"));
    std::iter::once(PathBuf::from("ptxas"))
        .chain(installed)
        .find(|p| runs(p))
        .expect("ptxas not found: set PTXAS or run `bash scripts/setup.sh` (installs the nvidia-cuda-nvcc wheel)")
}

/// The PTX of `module` in every embedded PTX image, as `(arch, text)`.
fn ptx(module: Module) -> Vec<(u32, String)> {
    let v = embedded_ptx(module);
    assert!(!v.is_empty(), "no PTX embedded");
    v
}

/// The body of kernel `name` in `text`.
fn body<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no kernel {name}"));
    &text[start..start + text[start..].find("\n}\n").expect("end of entry")]
}

#[test]
fn every_module_holds_exactly_its_kernels() {
    for m in Module::all() {
        for (arch, text) in ptx(m) {
            let entries = text.matches(".entry ").count();
            assert_eq!(
                entries,
                m.kernel_count(),
                "sm_{arch} {}: {entries} entries",
                m.name()
            );
            for k in m.kernels() {
                let name = k.as_str();
                assert!(
                    text.contains(&format!(".entry {name}(")),
                    "sm_{arch} {}: no {name}",
                    m.name()
                );
            }
        }
    }
}

#[test]
fn production_modules_hold_no_test_kernels() {
    for m in Module::all().filter(|m| !m.test_only()) {
        for (arch, text) in ptx(m) {
            assert!(!text.contains(".entry test_"), "sm_{arch} {}", m.name());
            assert!(!text.contains(".entry util_"), "sm_{arch} {}", m.name());
        }
    }
}

/// Every kernel takes one parameter, the struct its typed id `Takes`: the same size as the host's
/// `size_of` of that struct, 8-byte aligned.
#[test]
fn every_kernel_takes_its_parameter_struct() {
    let mut checked = 0;
    for (m, name, bytes) in every_kernel() {
        for (arch, text) in ptx(m) {
            let b = body(&text, name.as_str());
            let head = &b[..b.find(')').unwrap()];
            assert_eq!(
                head.matches(".param").count(),
                1,
                "sm_{arch} {name}: {head}"
            );
            let declared = format!(".param .align 8 .b8 {name}_param_0[{bytes}]");
            assert!(
                head.contains(&declared),
                "sm_{arch} {name}: {head} is not {bytes} bytes"
            );
            checked += 1;
        }
    }
    let kernels: usize = Module::all().map(|m| m.kernel_count()).sum();
    assert!(checked >= kernels, "{checked} checks of {kernels} kernels");
}

#[test]
fn kernels_use_the_instructions_they_rely_on() {
    let sum = Module::Reduce(Op::Sum, Elem::F32);
    let hist = Module::Histogram(Sample::F32);
    for (module, what, needle) in [
        (sum, "16-byte loads", "ld.global.nc.L1::no_allocate.v4.u32"),
        (sum, "warp shuffles", "shfl.sync.down.b32"),
        (sum, "a fence for LastBlock", "fence.acq_rel.gpu"),
        (
            hist,
            "warp-aggregated global fallback",
            "match.any.sync.b32",
        ),
        (hist, "shared-memory counters", "red.shared.add.u32"),
    ] {
        for (arch, text) in ptx(module) {
            assert!(
                text.contains(needle),
                "sm_{arch} {module:?}: no {what} ({needle})"
            );
        }
    }
}

#[test]
fn every_partials_kernel_reads_with_16_byte_loads() {
    for m in Module::all().filter(|m| matches!(m, Module::Reduce(..))) {
        for (arch, text) in ptx(m) {
            let name = m.kernel(0).unwrap();
            let name = name.as_str();
            assert!(name.starts_with("reduce_partials_"));
            assert!(
                body(&text, name).contains("ld.global.nc.L1::no_allocate.v4.u32"),
                "sm_{arch} {name}: no 16-byte loads"
            );
        }
    }
}

/// The partials and finalize kernels are launched as programmatic dependents of the kernel before them on
/// devices that run sm_90 code, so there each must wait for it before any memory access but its parameter,
/// and each lets the next kernel start. Older PTX has neither instruction (the host launches it in plain
/// stream order).
#[test]
fn reduce_kernels_wait_for_their_predecessor_from_sm_90() {
    for m in Module::all().filter(|m| matches!(m, Module::Reduce(..))) {
        for (arch, text) in ptx(m) {
            let (partials, finalize) = (m.kernel(0).unwrap(), m.kernel(1).unwrap());
            let (partials, finalize) = (partials.as_str(), finalize.as_str());
            assert!(partials.starts_with("reduce_partials_"), "{partials}");
            assert!(finalize.starts_with("reduce_finalize_"), "{finalize}");
            for name in [partials, finalize] {
                let b = body(&text, name);
                let (trigger, wait) = (
                    b.contains("griddepcontrol.launch_dependents;"),
                    b.find("griddepcontrol.wait;"),
                );
                if arch >= 90 {
                    assert!(trigger, "sm_{arch} {name}: no launch_dependents");
                    let wait = wait.unwrap_or_else(|| panic!("sm_{arch} {name}: no wait"));
                    // Before the wait nothing but the parameter may be read: no load or store of any state
                    // space (generic ones included), atomic, copy, prefetch or call.
                    for line in b[..wait].lines() {
                        let mut op = line.trim();
                        if op.starts_with('@') {
                            op = op
                                .split_once(char::is_whitespace)
                                .map_or("", |(_, rest)| rest.trim());
                        }
                        let touches = [
                            "ld.", "ldu.", "st.", "atom.", "red.", "cp.", "prefetch", "call",
                            "tex.", "suld.", "sust.", "sured.",
                        ]
                        .iter()
                        .any(|m| op.starts_with(m));
                        assert!(
                            !touches || op.starts_with("ld.param"),
                            "sm_{arch} {name}: `{op}` before the wait"
                        );
                    }
                } else {
                    assert!(
                        !trigger && wait.is_none(),
                        "sm_{arch} {name}: griddepcontrol"
                    );
                }
            }
        }
    }
}

#[test]
fn compaction_uses_votes_atomics_and_look_back() {
    // Both kernels of the module compact tiles and draw them with an atomic add; the stable one looks back
    // (its votes and volatile words), the unordered one places its tile with a second atomic add.
    let mut text = String::new();
    for (_, t) in ptx(Module::Select(Pred::Gt, Elem::F32)) {
        text += &t;
    }
    for (what, needle) in [
        ("ballot", "vote.sync.ballot.b32"),
        ("any vote", "vote.sync.any.pred"),
        ("64-bit atomic add", "atom.add.relaxed.gpu.global.u64"),
        ("population count", "popc.b32"),
        ("look-back load", "ld.volatile.b64"),
        ("look-back store", "st.volatile.b64"),
    ] {
        assert!(text.contains(needle), "no {what} ({needle})");
    }
}

#[test]
fn ptxas_accepts_every_module_without_spills_or_stack() {
    let ptxas = ptxas();
    let dir = std::env::temp_dir().join(format!("reduce-host-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for m in Module::all() {
        for (arch, text) in ptx(m) {
            let src = dir.join(format!("{}-sm{arch}.ptx", m.name()));
            std::fs::write(&src, &text).unwrap();
            let out = Command::new(&ptxas)
                .args(["-v", &format!("-arch=sm_{arch}"), "-o"])
                .arg(dir.join(format!("{}-sm{arch}.cubin", m.name())))
                .arg(&src)
                .output()
                .expect("run ptxas");
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "ptxas rejected {} sm_{arch}:\n{log}",
                m.name()
            );
            let mut kernels = 0;
            let mut current = String::new();
            for line in log.lines() {
                if let Some(name) = line.split("Function properties for ").nth(1) {
                    current = name.trim().to_owned();
                    kernels += 1;
                }
                // A kernel with a register cap trades a few spills for more blocks on an SM
                // (`register_cap`): at most 128 bytes a thread, through L1.
                if line.contains("bytes stack frame") && register_cap(&current, arch).is_some() {
                    let bytes: Vec<u32> = line
                        .split(',')
                        .filter_map(|f| f.split_whitespace().next()?.parse().ok())
                        .collect();
                    assert!(
                        bytes.len() == 3 && bytes.iter().all(|&b| b <= 128),
                        "sm_{arch} {current}: {}",
                        line.trim()
                    );
                } else if line.contains("bytes stack frame") {
                    assert!(
                        line.trim()
                            == "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                        "sm_{arch} {current}: {}",
                        line.trim()
                    );
                }
                // Top-k's one-block kernels launch a fixed block, not one fitted to their registers
                // (the others' waves are): the block's registers must fit an SM's 65536.
                let fixed = if current.starts_with("topk_sample_") {
                    Some(topk::SAMPLE_THREADS)
                } else if current.starts_with("topk_pick_") {
                    Some(topk::WIDE_THREADS)
                } else {
                    None
                };
                let used = line.split("Used ").nth(1);
                if let (Some(used), Some(threads)) = (used, fixed) {
                    let registers: u32 = used.split(' ').next().unwrap().parse().unwrap();
                    assert!(
                        registers * threads <= 65536,
                        "sm_{arch} {current}: {registers} registers, {threads} threads"
                    );
                }
            }
            assert_eq!(kernels, m.kernel_count(), "{} sm_{arch}", m.name());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn segmented_kernels_use_16_byte_loads_shuffles_and_no_panic_paths() {
    for m in Module::all().filter(|m| matches!(m, Module::Segmented(..) | Module::Softmax(_))) {
        for (arch, text) in ptx(m) {
            // Tile, block and rows read the segments; combine reads partials. Rows (a thread per row)
            // needs no shuffle.
            for (i, k) in m.kernels().enumerate().filter(|&(i, _)| i != 2) {
                let name = k.as_str();
                let b = body(&text, name);
                assert!(
                    b.contains("ld.global.nc.L1::no_allocate.v4.u32"),
                    "sm_{arch} {name}: no 16-byte loads"
                );
                // Argmax/argmin reduce values and indices by butterflies (`ArgExtreme::warp_reduce`), or,
                // for whole warps on sm_80 and later, by `redux.sync` on order keys and indices.
                assert!(
                    i == 3
                        || b.contains("shfl.sync.down.b32")
                        || b.contains("shfl.sync.bfly.b32")
                        || b.contains("redux.sync.max.u32"),
                    "sm_{arch} {name}: no shuffle tree"
                );
            }
            assert!(
                !text.contains("panic"),
                "sm_{arch} {}: a panic path",
                m.name()
            );
        }
    }
    for (_, text) in ptx(Module::Softmax(Sample::F32)) {
        assert!(text.contains("ex2.approx.f32"), "softmax without ex2");
    }
}

/// The reproducible sum's bits rest on its kernels doing exactly the contract's IEEE operations: every
/// float addition correctly rounded (`add.rn`), no fused multiply-add or flush-to-zero that the CPU would
/// not do, and scalar loads whose width is the element's (so alignment changes nothing) — except in the
/// kernel of short rows, which loads 16-byte vectors only where every row starts aligned and splits them
/// into the same elements.
#[test]
fn reproducible_kernels_round_every_addition_and_fuse_nothing() {
    for (elem, load) in [
        (FloatElem::F32, "ld.global.nc.L1::no_allocate.b32"),
        (FloatElem::F64, "ld.global.nc.L1::no_allocate.b64"),
        (FloatElem::F16, "ld.global.nc.L1::no_allocate.b16"),
        (FloatElem::BF16, "ld.global.nc.L1::no_allocate.b16"),
    ] {
        // The device-wide kernels and the per-segment ones rest on the same arithmetic.
        let texts = ptx(Module::ReproSum(elem))
            .into_iter()
            .chain(ptx(Module::ReproSegments(elem)));
        for (arch, text) in texts {
            assert!(text.contains(load), "sm_{arch} {elem:?}: no {load}");
            for entry in text.split(".entry ").skip(1) {
                if !entry.starts_with("repro_segment_rows_") {
                    assert!(
                        !entry.contains(".v4."),
                        "sm_{arch} {elem:?}: vector loads in {}",
                        &entry[..entry.find('(').unwrap_or(0)]
                    );
                }
            }
            for bad in ["fma.", ".ftz", "add.f64", "sub.f64", "add.f32"] {
                assert!(!text.contains(bad), "sm_{arch} {elem:?}: {bad}");
            }
            // Integer `mad.lo` computes addresses; a float `mad` would fuse.
            let float_mad = text
                .lines()
                .find(|l| l.contains("mad.") && (l.contains(".f32") || l.contains(".f64")));
            assert!(float_mad.is_none(), "sm_{arch} {elem:?}: {float_mad:?}");
            assert!(
                text.contains("add.rn.f64"),
                "sm_{arch} {elem:?}: no add.rn.f64"
            );
        }
    }
}
