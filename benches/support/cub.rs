//! The CUB comparator: `cub/cub_bench.cu`, compiled with `nvcc` at run time so its numbers come from the same
//! GPU in the same run. Without `nvcc` the CUB column is reported missing, with the reason. With
//! `CCCL_INCLUDE` set to a CCCL include folder (e.g. the `cuda-cccl` 1.2.1 wheel's
//! `cuda/cccl/headers/include`, CCCL 3.6), the comparator compiles against it instead of the toolkit's
//! CCCL; CCCL ≥ 3.6 adds the `sum_f32_gpu_to_gpu` op.
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = include_str!("../cub/cub_bench.cu");

/// One CUB measurement.
#[derive(Clone, Copy, Debug)]
pub struct CubResult {
    pub us: f64,
    pub gbps: f64,
    pub pass: bool,
}

/// A compiled comparator, or why there is none.
pub enum Cub {
    Ready(PathBuf),
    Missing(String),
}

impl Cub {
    /// Compiles the comparator for compute capability `cc` (e.g. 90).
    pub fn build(cc: u32) -> Cub {
        Self::compile(cc, "cub_bench", SOURCE)
    }

    /// Compiles `source` as `name` for compute capability `cc`. `CCCL_INCLUDE`, when set, is searched
    /// before the toolkit's headers: a newer CCCL than the toolkit ships (the `cuda-cccl` wheel's
    /// `cuda/cccl/headers/include`).
    pub fn compile(cc: u32, name: &str, source: &str) -> Cub {
        // One folder per (source, arch, CCCL): a later run of the same bench (the three runs of a spread)
        // reuses the comparator instead of compiling it again (about a minute).
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (source, cc, std::env::var_os("CCCL_INCLUDE")).hash(&mut h);
            h.finish()
        };
        let dir = std::env::temp_dir().join(format!("reduce-bench-cub-{key:016x}"));
        let src = dir.join(format!("{name}.cu"));
        let exe = dir.join(name);
        if exe.is_file() {
            return Cub::Ready(exe);
        }
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&src, source)) {
            return Cub::Missing(format!("cannot write the comparator source: {e}"));
        }
        let mut nvcc = Command::new("nvcc");
        if let Some(dir) = std::env::var_os("CCCL_INCLUDE") {
            // Ahead of the toolkit's own CCCL, which nvcc adds after the user's -I folders.
            nvcc.arg("-I").arg(dir);
        }
        let out = nvcc
            .args(["-O3", "-std=c++17", &format!("-arch=sm_{cc}"), "-o"])
            .arg(&exe)
            .arg(&src)
            .output();
        match out {
            Err(e) => Cub::Missing(format!(
                "nvcc is not on the PATH ({e}); install the CUDA toolkit to get the CUB column"
            )),
            Ok(o) if !o.status.success() => Cub::Missing(format!(
                "nvcc failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            )),
            Ok(_) => Cub::Ready(exe),
        }
    }

    /// Runs the comparator with `args`; its stdout's CSV lines starting with `cub`, split at commas (none
    /// when it is missing or fails; a note on stderr).
    pub fn lines(&self, args: &[String]) -> Vec<Vec<String>> {
        let Cub::Ready(exe) = self else {
            return Vec::new();
        };
        match Command::new(exe).args(args).output() {
            Ok(out) => {
                if !out.status.success() {
                    eprintln!(
                        "{} {args:?} exited with {}:\n{}",
                        exe.display(),
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.starts_with("cub,"))
                    .map(|l| l.split(',').map(str::to_owned).collect())
                    .collect()
            }
            Err(e) => {
                eprintln!("{}: {e}", exe.display());
                Vec::new()
            }
        }
    }

    /// Runs `op` (e.g. `sum_f32`) at `sizes`; a missing comparator or a failed run gives an empty map and
    /// a note on stderr.
    pub fn run(&self, op: &str, sizes: &[u64]) -> HashMap<u64, CubResult> {
        let Cub::Ready(exe) = self else {
            return HashMap::new();
        };
        let out = match Command::new(exe)
            .arg(op)
            .args(sizes.iter().map(|n| n.to_string()))
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("cub_bench {op}: {e}");
                return HashMap::new();
            }
        };
        if !out.status.success() {
            eprintln!(
                "cub_bench {op} exited with {}:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(',').collect();
                (f.len() == 6 && f[0] == "cub").then(|| {
                    Some((
                        f[2].parse().ok()?,
                        CubResult {
                            us: f[3].parse().ok()?,
                            gbps: f[4].parse().ok()?,
                            pass: f[5] == "PASS",
                        },
                    ))
                })?
            })
            .collect()
    }
}
