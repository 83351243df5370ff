//! The PyTorch comparator: `torch/torch_bench.py`, run with `python3` when it imports a CUDA build of torch.
use std::collections::HashMap;
use std::process::Command;

const SCRIPT: &str = include_str!("../torch/torch_bench.py");

/// Runs `op` at `sizes`; returns n → median µs, or the reason there are no numbers.
pub fn run(op: &str, sizes: &[u64]) -> Result<HashMap<u64, f64>, String> {
    let sizes: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    Ok(run_shapes(op, &sizes)?
        .into_iter()
        .filter_map(|(n, us)| Some((n.parse().ok()?, us)))
        .collect())
}

/// Runs `op` at `shapes` (sizes, or the `<rows>x<cols>` / `ragged<count>` of the segmented ops); returns
/// shape → median µs, or the reason there are no numbers.
pub fn run_shapes(op: &str, sizes: &[String]) -> Result<HashMap<String, f64>, String> {
    let path = std::env::temp_dir().join(format!("reduce-bench-torch-{}.py", std::process::id()));
    std::fs::write(&path, SCRIPT).map_err(|e| format!("cannot write the script: {e}"))?;
    let out = Command::new("python3")
        .arg(&path)
        .arg(op)
        .args(sizes)
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
                .then(|| Some((f[2].to_owned(), f[3].parse().ok()?)))?
        })
        .collect())
}
