//! Builds the kernels ahead of time and embeds them.
//!
//! 1. `kernels-gpu` (with its `builtin` feature, which exports this crate's kernels) is compiled to PTX by
//!    rustc's `nvptx64-nvidia-cuda` backend, once per PTX arch (sm_75, sm_80, sm_90), in parallel nested
//!    builds run by the pinned nightly (`rustup run <channel> cargo`), through `reduce-builder`, the
//!    library that builds users' kernel crates too; the rest of this crate builds on any toolchain.
//! 2. Each PTX is cut into the modules `reduce_contract` lists (`reduce_builder::ptx`), and the build
//!    fails if an entry belongs to no module or a module's kernel is missing.
//! 3. With `ptxas`, every module is compiled to a cubin for sm_75, sm_80, sm_90, sm_100 and sm_120, so a
//!    GPU of those families loads machine code instead of JIT-compiling PTX. Without it, the build still
//!    succeeds, embeds PTX only and says what that costs.
//! 4. Every module image is deflated separately (the host inflates only what it loads) and embedded with
//!    a generated table, `images.rs` (see `src/images.rs`).
//!
//! `DOCS_RS` skips all of it: the docs need no kernels, and a GPU call then reports that none are embedded.
use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use reduce_builder::ptx::Ptx;
use reduce_contract::Module;
use reduce_contract::kernels::register_cap;

/// The PTX each arch's kernels are compiled to (`-Ctarget-cpu=sm_XX`).
const PTX_ARCHS: [u32; 3] = [75, 80, 90];

/// Cubins: (the GPU arch, the PTX it is assembled from). A cubin runs on the GPUs of its major version
/// whose minor version is at least its own.
const CUBINS: [(u32, u32); 5] = [(75, 75), (80, 80), (90, 90), (100, 90), (120, 90)];

// The host marks launches of sm_90-and-later code as programmatic dependents (`Gpu::dependent_launch` reads
// the cubin's arch), which is right only if such a cubin comes from PTX that has `griddepcontrol.wait`, the
// sm_90 PTX, and an older one from PTX that has not.
const _: () = {
    let mut i = 0;
    while i < CUBINS.len() {
        assert!((CUBINS[i].0 >= 90) == (CUBINS[i].1 >= 90));
        i += 1;
    }
};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    println!("cargo:rerun-if-env-changed=PTXAS");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    if env::var_os("DOCS_RS").is_some() {
        write_table(&out, &[]);
        return;
    }
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let kernels = manifest
        .parent()
        .expect("the crate has a parent folder")
        .join("kernels-gpu");
    if !kernels.join("Cargo.toml").is_file() {
        // A published package: the images were built (and checked against a fresh build) when it was made.
        copy_prebuilt(&out);
        return;
    }
    // The nested builds keep their targets in `<target>/kernels-gpu/sm<arch>`, shared by the debug and the
    // release build of this crate.
    let builder = reduce_builder::Builder::new(&kernels)
        .feature("builtin")
        .target_dir("kernels-gpu");
    // kernels-gpu's sources, toolchain pin, and its path dependency reduce-contract.
    builder.rerun_if_changed();

    let ptx: Vec<(u32, Ptx)> = builder
        .build_ptx(&out, &PTX_ARCHS)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(arch, text)| {
            let parsed = Ptx::parse(&text).unwrap_or_else(|e| panic!("sm_{arch} PTX: {e}"));
            check_modules(arch, &parsed);
            (arch, parsed)
        })
        .collect();
    let ptx_of = |arch: u32| &ptx.iter().find(|(a, _)| *a == arch).expect("built above").1;

    let mut images = Vec::new();
    match reduce_builder::find_ptxas() {
        Some(ptxas) => {
            for (gpu, source) in CUBINS {
                images.push(Image {
                    kind: "Cubin",
                    arch: gpu,
                    modules: assemble(&ptxas, gpu, source, ptx_of(source), &out),
                });
            }
            // The newest PTX, for GPUs no cubin runs on (and REDUCE_HOST_FORCE_PTX).
            images.push(ptx_image(90, ptx_of(90)));
        }
        None => {
            println!(
                "cargo:warning=ptxas not found (set PTXAS or CUDA_PATH, or run `bash scripts/setup.sh`, which installs it unless SETUP_PTXAS=0): embedding PTX \
                 only. It works, but the driver JIT-compiles each kernel module the first time it is used \
                 (about 0.1 s per module, seconds in all), in every process that has no warm JIT cache."
            );
            for arch in PTX_ARCHS {
                images.push(ptx_image(arch, ptx_of(arch)));
            }
        }
    }
    write_table(&out, &images);
}

/// Every `.entry` belongs to exactly one module, and every module's kernels are there.
fn check_modules(arch: u32, ptx: &Ptx) {
    let listed: Vec<String> = Module::all()
        .flat_map(|m| m.kernels().map(|k| k.to_string()))
        .collect();
    for entry in ptx.entries() {
        let owners = listed.iter().filter(|k| *k == entry).count();
        assert!(
            owners == 1,
            "sm_{arch}: kernel {entry} is in {owners} modules of reduce_contract::kernels; it must be in exactly one"
        );
    }
    for k in &listed {
        assert!(
            ptx.entries().any(|e| e == k),
            "sm_{arch}: reduce_contract lists {k}, which kernels-gpu does not export"
        );
    }
}

/// The embedded images of one (kind, arch): one deflated blob per module, in `Module::index` order.
struct Image {
    kind: &'static str,
    arch: u32,
    modules: Vec<Vec<u8>>,
}

fn ptx_image(arch: u32, ptx: &Ptx) -> Image {
    let modules = Module::all()
        .map(|m| {
            let mut text = piece(ptx, m).into_bytes();
            text.push(0); // the driver takes NUL-terminated PTX
            deflate(&text)
        })
        .collect();
    Image {
        kind: "Ptx",
        arch,
        modules,
    }
}

fn piece(ptx: &Ptx, m: Module) -> String {
    let names: Vec<_> = m.kernels().collect();
    let names: Vec<&str> = names.iter().map(|k| k.as_str()).collect();
    ptx.extract(&names)
        .unwrap_or_else(|e| panic!("module {}: {e}", m.name()))
}

/// Assembles every module of `ptx` into a cubin for sm_`gpu`, on all cores.
///
/// A module whose PTX and ptxas are those of the cubin already in `cubin-sm<gpu>/` keeps that cubin: a
/// rerun of this script (a changed kernel source, the one rerun after an install) assembles only the modules
/// whose machine code can differ, not all of them for every arch (minutes on two cores).
fn assemble(ptxas: &Path, gpu: u32, source: u32, ptx: &Ptx, out: &Path) -> Vec<Vec<u8>> {
    let dir = out.join(format!("cubin-sm{gpu}"));
    std::fs::create_dir_all(&dir).expect("create the cubin folder");
    let base = [format!("-arch=sm_{gpu}"), "-O3".to_owned()];
    // Spills and local memory fail the build: every kernel keeps its state in registers (but a module with
    // a register cap: see below).
    let strict = [
        "--warn-on-spills".to_owned(),
        "--warn-on-local-memory-usage".to_owned(),
        "--warning-as-error".to_owned(),
    ];
    let args = [&base[..], &strict[..]].concat();
    // Which ptxas, run how: a cached cubin counts only if this matches the one it was made with.
    let stamp = dir.join("ptxas.id");
    let id = ptxas_id(ptxas, &args);
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(id.as_str()) {
        // Another ptxas: nothing here is reusable. The id is written back once every module assembled.
        let _ = std::fs::remove_file(&stamp);
        for entry in std::fs::read_dir(&dir)
            .expect("list the cubin folder")
            .flatten()
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let specs: Vec<Module> = Module::all().collect();
    let results: Vec<Mutex<Option<Vec<u8>>>> = specs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&m) = specs.get(i) else { break };
                    let text = piece(ptx, m);
                    // `<m>.ptx` and `<m>.cubin` are a pair: both are renamed into place only after ptxas
                    // succeeded, so a failed or interrupted run leaves no cubin beside PTX it was not made from.
                    let input = dir.join(format!("{}.ptx", m.name()));
                    let cubin = dir.join(format!("{}.cubin", m.name()));
                    let cached = std::fs::read_to_string(&input).is_ok_and(|t| t == text)
                        .then(|| std::fs::read(&cubin).ok())
                        .flatten();
                    let bytes = match cached {
                        Some(bytes) => bytes,
                        None => {
                            let new_input = dir.join(format!("{}.ptx.new", m.name()));
                            let new_cubin = dir.join(format!("{}.cubin.new", m.name()));
                            std::fs::write(&new_input, &text).expect("write a module's PTX");
                            // A kernel with a register cap trades its spills for more blocks on an SM
                            // (`reduce_contract::kernels::register_cap`): its module is not held to it.
                            let capped = m
                                .kernels()
                                .any(|k| register_cap(k.as_str(), source).is_some());
                            let run = Command::new(ptxas)
                                .args(&base)
                                .args(if capped { &[][..] } else { &strict[..] })
                                .arg(&new_input)
                                .arg("-o")
                                .arg(&new_cubin)
                                .output()
                                .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
                            assert!(
                                run.status.success(),
                                "ptxas -arch=sm_{gpu} failed on module {} (from sm_{source} PTX):\n{}",
                                m.name(),
                                String::from_utf8_lossy(&run.stderr)
                            );
                            let bytes = std::fs::read(&new_cubin).expect("ptxas wrote the cubin");
                            std::fs::rename(&new_cubin, &cubin).expect("keep the cubin");
                            std::fs::rename(&new_input, &input).expect("keep the module's PTX");
                            bytes
                        }
                    };
                    *results[i].lock().expect("no panics while held") = Some(deflate(&bytes));
                }
            });
        }
    });
    std::fs::write(&stamp, id).expect("write the ptxas id");
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .expect("not poisoned")
                .expect("every module assembled")
        })
        .collect()
}

/// What makes two ptxas runs on the same PTX give the same cubin: the program (its path, size and time)
/// and the arguments.
fn ptxas_id(ptxas: &Path, args: &[String]) -> String {
    let path = std::fs::canonicalize(ptxas).unwrap_or_else(|_| ptxas.to_owned());
    let meta = std::fs::metadata(&path).ok();
    let size = meta.as_ref().map_or(0, |m| m.len());
    let time = meta
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{} {size} {time} {}\n", path.display(), args.join(" "))
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    miniz_oxide::deflate::compress_to_vec(bytes, 9)
}

/// The images a published package carries in `prebuilt/` (written there by `scripts/package.sh` from a
/// build of the kernels), copied where `src/images.rs` includes them from.
fn copy_prebuilt(out: &Path) {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let prebuilt = manifest.join("prebuilt");
    println!("cargo:rerun-if-changed={}", prebuilt.display());
    let entries = std::fs::read_dir(&prebuilt).unwrap_or_else(|e| {
        panic!(
            "neither the kernel sources (../kernels-gpu) nor prebuilt kernels ({}) are here: {e}",
            prebuilt.display()
        )
    });
    for entry in entries {
        let path = entry.expect("list prebuilt/").path();
        let name = path.file_name().expect("a file name");
        std::fs::copy(&path, out.join(name))
            .unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
    }
    assert!(
        out.join("images.rs").is_file(),
        "prebuilt/ holds no images.rs"
    );
}

/// Writes each image's blob and `images.rs`, the table `src/images.rs` includes.
fn write_table(out: &Path, images: &[Image]) {
    // Blobs of an earlier build (say a PTX-only one, before ptxas was installed) must not linger beside the
    // new table: scripts/package.sh ships this folder's blobs.
    for entry in std::fs::read_dir(out).expect("list OUT_DIR").flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().ends_with(".bin") {
            std::fs::remove_file(entry.path()).expect("remove a stale image blob");
        }
    }
    let mut table = String::from("// Generated by build.rs.\n&[\n");
    for image in images {
        let blob_name = format!("{}-sm{}.bin", image.kind.to_lowercase(), image.arch);
        let blob_path = out.join(&blob_name);
        let mut blob = Vec::new();
        let mut spans = String::new();
        for m in &image.modules {
            write!(spans, "({}, {}), ", blob.len(), m.len()).unwrap();
            blob.extend_from_slice(m);
        }
        std::fs::write(&blob_path, &blob).expect("write an image blob");
        writeln!(
            table,
            "    Image {{ kind: Kind::{}, arch: {}, blob: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{blob_name}\")), \
             modules: &[{spans}] }},",
            image.kind, image.arch
        )
        .unwrap();
    }
    table.push_str("]\n");
    std::fs::write(out.join("images.rs"), table).expect("write images.rs");
}
