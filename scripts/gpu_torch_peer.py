#!/usr/bin/env python3
"""PyTorch peers of scripts/gpu_check.sh: the model's formula in eager mode and under
torch.compile, and its autograd backward (the gradients of x and the weight for a given dy, the
forward's graph kept), on the same MAGI-2 norms and token counts as magi2norm_gpu_bench. One
JSON line per case and pass on stdout: pass, name, tokens, eager_ms, compile_ms (best of
--iters, CUDA events)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from model_norm_table import model_norms, torch_dtype  # noqa: E402  (measure/model_norms.def)

CASES = [(n.label, n.row, torch_dtype(n.x), torch_dtype(n.out)) for n in model_norms()]  # name, row shape, dtypes (M = 1)


def formula(x, weight, eps: float, out_dtype: torch.dtype):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * (weight + 1).float()).to(out_dtype)


def best_ms(fn, iters):
    fn()  # warm-up (and compilation)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def report(pass_name, name, tokens, make, compiled, iters):
    """One JSON line: best ms of make(formula)() and of make(compiled)()."""
    eager = best_ms(make(formula), iters)
    try:
        comp = best_ms(make(compiled), iters)
    except Exception as error:  # a machine without a working Triton/compiler: keep eager
        print(f"gpu_torch_peer: torch.compile failed for {name} ({pass_name}): {error}", file=sys.stderr)
        comp = float("nan")
    print(json.dumps({"pass": pass_name, "name": name, "tokens": tokens, "eager_ms": eager, "compile_ms": comp}),
          flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="16384,65536")
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    compiled = torch.compile(formula, dynamic=True)
    for name, row, in_dtype, out_dtype in CASES:
        weight = torch.zeros(row[-1], dtype=torch.bfloat16 if in_dtype == torch.bfloat16 else torch.float32,
                             device="cuda")
        for tokens in (int(t) for t in args.tokens.split(",")):
            x = (torch.rand((tokens, *row), device="cuda") * 4 - 2).to(in_dtype)
            report("forward", name, tokens, lambda f: (lambda: f(x, weight, 1e-6, out_dtype)), compiled, args.iters)
            # The backward: autograd of the same graph for a dy in the output's dtype.
            xg, wg = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)
            dy = (torch.rand((tokens, *row), device="cuda") * 2 - 1).to(out_dtype)

            def backward_of(f):
                y = f(xg, wg, 1e-6, out_dtype)
                return lambda: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)

            report("backward", name, tokens, backward_of, compiled, args.iters)
            del x, xg, wg, dy


if __name__ == "__main__":
    main()
