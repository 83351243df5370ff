"""PyTorch comparator for the histogram and select benchmarks (run by `cargo bench` when python3 with a CUDA
build of torch is on the PATH).

Usage: torch_bench.py <op> <n> [<n> ...] with op one of histc_uniform, histc_skewed, masked_select,
abs_max (`x.abs().max()`), sum_squares (`(x * x).sum()`), var_mean (`torch.var_mean(x, correction=0)`),
aminmax, logsumexp, norm_l1/norm_l2/norm_inf (`torch.linalg.vector_norm`), five_calls (sum, min, max, argmin,
argmax: five reductions), topk_<distribution>_<k> (`torch.topk(x, k, sorted=True)` on the distributions
of benches/topk.rs; or topk_<distribution> with shapes `<n>:<k>`, every size and k in one process; or
rowtopk_f32/rowtopk_bf16 with shapes `<rows>x<cols>:<k>`, `torch.topk(x, k, dim=1)` of N(0, 1) logits);
or torch_bench.py <op> <shape> [<shape> ...] with op rows_sum or rows_argmax (`x.sum(dim=1)`,
`x.argmax(dim=1)` of a rows × cols float matrix, shape `<rows>x<cols>`) or ragged_sum
(`torch.segment_reduce` over `ragged<count>`: count segments of lengths splitmix64(i) % 10001, as
benches/segmented.rs and cub_segmented.cu build them), or rows_var_mean_bf16 (`torch.var_mean(x, dim=1,
correction=0)` of a rows × cols bfloat16 matrix: benches/custom.rs), rows_mean_square_bf16 (`mean(x * x,
dim=1, dtype=float32)`, RMSNorm's statistic) or rows_logsumexp_bf16 (`logsumexp(x, dim=1)`), and the same
three with `_f32` for an f32 matrix.
Prints one line per n or shape: torch,<op>,<n or shape>,<median_us>,<gbps>. Method as the CUB comparator: inputs random,
rotated over copies totalling >= 3x L2, CUDA events around each call, warm-up, median of >= 21 samples.
GB/s counts the input bytes read (masked_select: input + mask... only the f32 input, as for ours).
"""
import sys

import torch


MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def segmented_inputs(op, shape, copies):
    """(inputs, n elements, extra argument) of a segmented op at `shape`."""
    g = torch.Generator(device="cuda").manual_seed(2024)
    if shape.startswith("ragged"):
        count = int(shape[len("ragged"):])
        lengths = torch.tensor([splitmix64(i) % 10001 for i in range(count)], device="cuda")
        n = int(lengths.sum())
        return [torch.rand(n, device="cuda", generator=g) for _ in range(copies)], n, lengths
    rows, cols = (int(v) for v in shape.split("x"))
    if op.endswith("_bf16"):
        xs = [torch.rand(rows, cols, device="cuda", generator=g).to(torch.bfloat16) for _ in range(copies)]
        return xs, rows * cols, None
    return [torch.rand(rows, cols, device="cuda", generator=g) for _ in range(copies)], rows * cols, None


def run_segmented(op, x, extra):
    if op == "rows_sum":
        return x.sum(dim=1)
    if op == "rows_argmax":
        return x.argmax(dim=1)
    if op == "ragged_sum":
        return torch.segment_reduce(x, "sum", lengths=extra)
    # The per-row statistics, of a bf16 or an f32 matrix (the op's suffix).
    stat = op.removesuffix("_bf16").removesuffix("_f32")
    if stat == "rows_var_mean":
        return torch.var_mean(x, dim=1, correction=0)
    if stat == "rows_mean_square":
        return torch.mean(x * x, dim=1, dtype=torch.float32)
    if stat == "rows_logsumexp":
        return torch.logsumexp(x, dim=1)
    raise SystemExit(f"unknown op {op}")


def topk_input(dist, n, g):
    """An f32 input of distribution `dist`, as benches/topk.rs draws it."""
    if dist == "normal":
        return torch.randn(n, device="cuda", generator=g)
    if dist == "bits":
        return torch.randint(-(2**31), 2**31, (n,), device="cuda", generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
    if dist == "equal":
        return torch.full((n,), 0.5, device="cuda")
    if dist == "distinct16":
        return torch.randint(0, 16, (n,), device="cuda", generator=g).to(torch.float32)
    if dist == "ascending":
        return torch.arange(n, device="cuda", dtype=torch.float32)
    if dist == "descending":
        return torch.arange(n, 0, -1, device="cuda", dtype=torch.float32)
    x = torch.rand(n, device="cuda", generator=g)
    if dist == "nan1":
        x[torch.rand(n, device="cuda", generator=g) < 0.01] = float("nan")
    return x


def inputs(op, n, copies):
    g = torch.Generator(device="cuda").manual_seed(2024)
    out = []
    for _ in range(copies):
        if op.startswith("topk_"):
            out.append(topk_input(op.split("_")[1], n, g))
            continue
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
    if op == "abs_max":
        return x.abs().max()
    if op == "sum_squares":
        return (x * x).sum()
    if op == "var_mean":
        return torch.var_mean(x, correction=0)
    if op == "aminmax":
        return torch.aminmax(x)
    if op == "logsumexp":
        return torch.logsumexp(x, dim=0)
    if op == "norm_l1":
        return torch.linalg.vector_norm(x, ord=1)
    if op == "norm_l2":
        return torch.linalg.vector_norm(x, ord=2)
    if op == "norm_inf":
        return torch.linalg.vector_norm(x, ord=float("inf"))
    if op.startswith("topk_"):
        return torch.topk(x, int(op.split("_")[2]), sorted=True)
    if op == "five_calls":
        return (x.sum(), x.min(), x.max(), x.argmin(), x.argmax())
    raise SystemExit(f"unknown op {op}")


def time_calls(call, copies, n):
    """Median µs of `call(copy)` with the method above."""
    for i in range(5):
        call(i % copies)
    torch.cuda.synchronize()
    times = []
    samples = max(21, min(2000, int(0.3e6 / max(1.0, n * 4 / 4e3))))
    for i in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        call(i % copies)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main_segmented(op, shapes, l2):
    elem = 2 if op.endswith("_bf16") else 4  # bytes per element of the input
    for shape in shapes:
        if shape.startswith("ragged"):
            n = sum(splitmix64(i) % 10001 for i in range(int(shape[len("ragged"):])))
        else:
            rows, cols = (int(v) for v in shape.split("x"))
            n = rows * cols
        copies = max(1, min(64, -(-3 * l2 // (elem * n))))
        xs, n, extra = segmented_inputs(op, shape, copies)
        us = time_calls(lambda k: run_segmented(op, xs[k], extra), copies, n)
        print(f"torch,{op},{shape},{us:.3f},{n * elem / us / 1e3:.3f}", flush=True)
        del xs


def main_topk(op, shapes, l2):
    """topk_<distribution> over shapes `<n>:<k>`: one process for every size and k of a distribution, each
    size's inputs drawn once."""
    pairs = [tuple(int(v) for v in shape.split(":")) for shape in shapes]
    for n in dict.fromkeys(n for n, _ in pairs):
        copies = max(1, min(64, -(-3 * l2 // (4 * n))))
        xs = inputs(op, n, copies)
        for k in (k for m, k in pairs if m == n):
            us = time_calls(lambda c: torch.topk(xs[c], k, sorted=True), copies, n)
            print(f"torch,{op},{n}:{k},{us:.3f},{n * 4 / us / 1e3:.3f}", flush=True)
        del xs


def main_rowtopk(op, shapes, l2):
    """rowtopk_<dtype> over shapes `<rows>x<cols>:<k>`: torch.topk(x, k, dim=1) of N(0, 1) logits, each
    shape's inputs drawn once."""
    dtype = torch.bfloat16 if op.endswith("_bf16") else torch.float32
    elem = 2 if dtype == torch.bfloat16 else 4
    pairs = [(shape.split(":")[0], int(shape.split(":")[1])) for shape in shapes]
    g = torch.Generator(device="cuda").manual_seed(2024)
    for dims in dict.fromkeys(d for d, _ in pairs):
        rows, cols = (int(v) for v in dims.split("x"))
        n = rows * cols
        copies = max(1, min(64, -(-3 * l2 // (elem * n))))
        xs = [torch.randn(rows, cols, device="cuda", generator=g).to(dtype) for _ in range(copies)]
        for k in (k for d, k in pairs if d == dims):
            us = time_calls(lambda c: torch.topk(xs[c], k, dim=1, sorted=True), copies, n)
            print(f"torch,{op},{dims}:{k},{us:.3f},{n * elem / us / 1e3:.3f}", flush=True)
        del xs


def main():
    op = sys.argv[1]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    if op.startswith("rows_") or op.startswith("ragged_"):
        return main_segmented(op, sys.argv[2:], l2)
    if op.startswith("rowtopk_"):
        return main_rowtopk(op, sys.argv[2:], l2)
    if op.startswith("topk_") and op.count("_") == 1:
        return main_topk(op, sys.argv[2:], l2)
    sizes = [int(s) for s in sys.argv[2:]]
    for n in sizes:
        copies = max(1, min(64, -(-3 * l2 // (4 * n))))
        xs = inputs(op, n, copies)
        us = time_calls(lambda k: run(op, xs[k]), copies, n)
        print(f"torch,{op},{n},{us:.3f},{n * 4 / us / 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
