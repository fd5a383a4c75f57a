"""The mHC logits through PyTorch on the model's case (x [T, 12288] BF16, S = 4 streams of
C = 3072, phi [12288, 24] FP32, M = 1 and 3), forward and forward + backward (the gradients of x,
the norm's weight and phi for a random dlogits), in one process with interleaved rounds. Rows:

- `fused`: magi2norm.mhc_logits with this package's module (torch.ops.magi2norm.mhc_logits);
- `unfused`: the path a user has today, this package's norm to FP32, then torch.matmul;
- `formula eager`, `formula inductor`: upstream's formula, norm(x).float() @ phi, eager and
  under torch.compile.

Each call is timed right after a torch op on the token's activations (an add of x's size, as
the layer before it leaves the caches), and each row is called once before it is timed. Each
row: the median time, x's rate, and the time of the fastest other row over its own (`fused`
only: above 1, the fused call is faster than all of them). Prints a Markdown table.

    .venv/bin/python benchmarks/torch_mhc_logits.py [--tokens 16,256,4096,16384] [--modalities 1,3]
        [--passes forward,forward+backward] [--rounds 7] [--threads 2] [--output FILE]
"""
import argparse
import functools
import statistics
import sys
import time

import torch

import magi2norm
from bench_json import write_page
from machine import machine

S, C, N = 4, 3072, 24
D = S * C
EPS = 1e-6


def formula(x, weight, m, sizes, phi):
    """Upstream's norm to FP32 (grouped by sizes without host syncs), then the product."""
    n = x.float()
    n = n * torch.rsqrt(n.square().mean(-1, keepdim=True) + EPS)
    w = weight.view(m, D) + 1.0
    rows = w[0] if m == 1 else w.repeat_interleave(sizes, dim=0, output_size=x.shape[0])
    return (n * rows) @ phi


torch._dynamo.config.recompile_limit = 64
compiled_formula = torch.compile(formula, dynamic=True)


def timed(fn, before, min_seconds=2e-3):
    """Seconds of one call of `fn`, each after `before` (untimed): a loop long enough to time."""
    count, total = 1, 0.0
    while True:
        total = 0.0
        for _ in range(count):
            before()
            start = time.perf_counter()
            fn()
            total += time.perf_counter() - start
        if total >= min_seconds:
            return total / count
        count *= 2


def calls_of(t, m, pass_name):
    g = torch.Generator().manual_seed(t)
    x = torch.randn(t, D, generator=g).to(torch.bfloat16)
    phi = torch.randn(D, N, generator=g) * 0.01
    dlogits = torch.randn(t, N, generator=g)
    sizes = torch.tensor([t // 2, t // 4, t - t // 2 - t // 4], dtype=torch.int32) if m > 1 else None
    module = magi2norm.MultiModalityRMSNorm(D, num_modality=m, out_dtype=torch.float32)
    module.weight.data.normal_(0, 0.1)
    dispatcher = type("Dispatcher", (), {"group_size": sizes})() if m > 1 else None
    norm = functools.partial(module, modality_dispatcher=dispatcher) if m > 1 else module
    weight = module.weight

    def run(fn):
        def call():
            if pass_name == "forward":
                with torch.no_grad():
                    fn(x, phi)
                return
            xr, pr = x.detach().requires_grad_(True), phi.detach().requires_grad_(True)
            fn(xr, pr).backward(dlogits)
            weight.grad = None
        return call

    return x, {
        "fused": run(lambda a, p: magi2norm.mhc_logits(a, norm, p)),
        "unfused": run(lambda a, p: torch.matmul(norm(a), p)),
        "formula eager": run(lambda a, p: formula(a, weight, m, sizes, p)),
        "formula inductor": run(lambda a, p: compiled_formula(a, weight, m, sizes, p)),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="16,256,4096,16384")
    p.add_argument("--modalities", default="1,3")
    p.add_argument("--passes", default="forward,forward+backward")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    lines = [f"# The mHC logits through PyTorch ({time.strftime('%Y-%m-%d')})", "",
             "`.venv/bin/python benchmarks/torch_mhc_logits.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Machine: {machine()}; torch {torch.__version__}, {a.threads} threads (torch's); {a.rounds} interleaved "
             "rounds, medians; each call after an add of x's size. x [T, 12288] BF16, phi [12288, 24] FP32. "
             "`speedup` (fused): the fastest other row's time over the fused call's.", "",
             "| M | T | pass | row | time | x GB/s | speedup |", "|---|---|---|---|---|---|---|"]
    for pass_name in a.passes.split(","):
        for m in (int(v) for v in a.modalities.split(",")):
            for t in (int(v) for v in a.tokens.split(",")):
                x, calls = calls_of(t, m, pass_name)
                activations = torch.randn(t, D)
                before = lambda: activations.add_(1.0)  # noqa: E731
                for call in calls.values():
                    call()  # warm: compile, fault the pages in
                samples = {k: [] for k in calls}
                names = list(calls)
                for r in range(a.rounds):
                    for k in names[r % len(names):] + names[:r % len(names)]:
                        calls[k]()
                        samples[k].append(timed(calls[k], before))
                med = {k: statistics.median(v) for k, v in samples.items()}
                fastest_other = min(v for k, v in med.items() if k != "fused")
                for k, seconds in med.items():
                    speedup = f"{fastest_other / seconds:.2f}x" if k == "fused" else ""
                    lines.append(f"| {m} | {t} | {pass_name} | {k} | {seconds * 1e6:.0f} us | {x.nbytes / seconds / 1e9:.2f} | "
                                 f"{speedup} |")
                print("\n".join(lines[-len(med):]), flush=True)
    write_page(lines, a.output)


if __name__ == "__main__":
    main()
