//! The PyTorch comparator: `torch/torch_bench.py`, run with `python3` when it imports a CUDA build of torch.
use std::collections::HashMap;
use std::process::Command;

const SCRIPT: &str = include_str!("../torch/torch_bench.py");

/// Runs `op` at `sizes`; returns n → median µs, or the reason there are no numbers.
pub fn run(op: &str, sizes: &[u64]) -> Result<HashMap<u64, f64>, String> {
    let path = std::env::temp_dir().join(format!("reduce-bench-torch-{}.py", std::process::id()));
    std::fs::write(&path, SCRIPT).map_err(|e| format!("cannot write the script: {e}"))?;
    let out = Command::new("python3")
        .arg(&path)
        .arg(op)
        .args(sizes.iter().map(|n| n.to_string()))
        .output()
        .map_err(|e| format!("python3 is not on the PATH ({e})"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "torch_bench.py {op} failed: {}",
            err.lines().last().unwrap_or("")
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() == 5 && f[0] == "torch")
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
        })
        .collect())
}
