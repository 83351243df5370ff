"""PyTorch comparator for the histogram and select benchmarks (run by `cargo bench` when python3 with a CUDA
build of torch is on the PATH).

Usage: torch_bench.py <op> <n> [<n> ...] with op one of histc_uniform, histc_skewed, masked_select.
Prints one line per n: torch,<op>,<n>,<median_us>,<gbps>. Method as the CUB comparator: inputs random,
rotated over copies totalling >= 3x L2, CUDA events around each call, warm-up, median of >= 21 samples.
GB/s counts the input bytes read (masked_select: input + mask... only the f32 input, as for ours).
"""
import sys

import torch


def inputs(op, n, copies):
    g = torch.Generator(device="cuda").manual_seed(2024)
    out = []
    for _ in range(copies):
        x = torch.rand(n, device="cuda", generator=g)
        if op == "histc_skewed":
            hot = torch.rand(n, device="cuda", generator=g) < 0.9
            x = torch.where(hot, torch.full_like(x, 77.5 / 256), x)
        out.append(x)
    return out


def run(op, x):
    if op.startswith("histc"):
        return torch.histc(x, bins=256, min=0.0, max=1.0)
    if op == "masked_select":
        return torch.masked_select(x, x > 0.5)
    raise SystemExit(f"unknown op {op}")


def main():
    op, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for n in sizes:
        copies = max(1, min(64, -(-3 * l2 // (4 * n))))
        xs = inputs(op, n, copies)
        for i in range(5):
            run(op, xs[i % copies])
        torch.cuda.synchronize()
        times = []
        samples = max(21, min(2000, int(0.3e6 / max(1.0, n * 4 / 4e3))))
        for i in range(samples):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run(op, xs[i % copies])
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        times.sort()
        us = times[len(times) // 2]
        print(f"torch,{op},{n},{us:.3f},{n * 4 / us / 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
