"""The Python package against PyTorch on the model's norms (SPEC.md's table), in one process with
interleaved rounds. Passes and rows:

- forward, forward+backward: magi2norm's module (`module`), the C++ ops called straight (`op`:
  forward, normalize_out on an output made once; forward+backward, the forward op and the
  backward op from its inverse RMS, as a compiled graph calls them), the upstream formula eager
  (`formula eager`) and under torch.compile (`formula inductor`);
- backward: the backward op alone from the forward's inverse RMS (`op`) and from its own row
  sums (`op, own sums`), and the formula's backward graph alone, eager and inductor's (autograd
  of a graph built once, its saved tensors kept), its bytes x and dy read and dx written.

Each row, in each round, is called once before it is timed, so that it meets the caches as its
own call leaves them, and each round starts at another row, so that none always follows the copy. Each row:
the median time, the rate (the bytes the pass must move, over its time), its fraction
of this machine's copy bandwidth (`dst.copy_(src)` of 256 MiB in the same rounds, read + write),
and the time of the module over the row's (a speedup above 1). Prints a Markdown table.

    .venv/bin/python benchmarks/torch_norms.py [--tokens 16,256,4096,16384] [--modalities 1,3]
        [--norms pre_norm,qk_norm,mhc_norm,final_norm] [--rounds 7] [--threads 2] [--output FILE]
"""
import argparse
import statistics
import sys
import time

import torch

import magi2norm
from bench_json import write_page
from machine import machine
from model_norm_table import model_norms, torch_dtype
from magi2norm import _library

EPS = 1e-6

NORMS = {n.label: n for n in model_norms()}  # the model's norms, measure/model_norms.def


def formula(x, weight, dim, eps, m, sizes, out_dtype):
    """The upstream formula, grouped by sizes without host syncs (what torch.compile can trace)."""
    n = x.float()
    n = n * torch.rsqrt(n.square().mean(-1, keepdim=True) + eps)
    w = weight.view(m, 1, dim) + 1.0
    if m == 1:
        return (n * w[0]).to(out_dtype)
    rows = w.repeat_interleave(sizes, dim=0, output_size=x.shape[0])
    return (n * rows.view(x.shape[0], *([1] * (x.dim() - 2)), dim)).to(out_dtype)


# One compiled function for every case: dynamic shapes, so a new token count reuses its graph;
# room for a graph per norm, M and pass, the weights' sizes differing.
torch._dynamo.config.recompile_limit = 64
torch._dynamo.config.force_parameter_static_shapes = False
compiled_formula = torch.compile(formula, dynamic=True)
# The backward rows run a compiled backward again on the tensors it saved, which donated buffers
# (its saved tensors reused as scratch) forbid.
torch._functorch.config.donated_buffer = False


def timed(fn, min_seconds=2e-3):
    """Seconds of one call: a loop long enough to time, over its count."""
    count = 1
    while True:
        start = time.perf_counter()
        for _ in range(count):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / count
        count *= 2


class Case:
    """One norm call's inputs: x and dy of T tokens, the group sizes (M > 1), the module with a
    random weight, a dispatcher of those sizes and an output made once."""

    def __init__(self, name, t, m):
        n = NORMS[name]
        row, in_dtype, self.out_dtype = n.row, torch_dtype(n.x), torch_dtype(n.out)
        self.dim = row[-1]
        g = torch.Generator().manual_seed(t)
        self.x = torch.randn((t, *row), generator=g).to(in_dtype)
        self.dy = torch.randn((t, *row), generator=g).to(self.out_dtype)
        self.sizes = torch.tensor([t // 2, t // 4, t - t // 2 - t // 4], dtype=torch.int32) if m > 1 else None
        self.module = magi2norm.MultiModalityRMSNorm(self.dim, num_modality=m, out_dtype=self.out_dtype)
        self.module.weight.data.normal_(0, 0.1)
        self.dispatcher = type("Dispatcher", (), {"group_size": self.sizes})() if m > 1 else None
        self.out = torch.empty((t, *row), dtype=self.out_dtype)


def case_calls(name, t, m, pass_name):
    c = Case(name, t, m)
    x, dy, sizes, module, dispatcher, out = c.x, c.dy, c.sizes, c.module, c.dispatcher, c.out
    dim, out_dtype, weight = c.dim, c.out_dtype, c.module.weight
    code = _library.dtype_code(out_dtype)
    w = weight.detach()
    _, inverse_rms = torch.ops.magi2norm.forward(x, w, sizes, None, dim, EPS, m, 1, code)

    def op_backward(saved=inverse_rms):
        torch.ops.magi2norm.backward(dy, x, w, saved, sizes, None, dim, EPS, m, 1)

    def graph_backward(fn):
        """The backward of `fn`'s graph alone (eager autograd's, or the one inductor compiled),
        built once and run again with its saved tensors kept."""
        xr = x.detach().requires_grad_(True)
        y = fn(xr, weight, dim, EPS, m, sizes, out_dtype)
        return lambda: torch.autograd.grad(y, (xr, weight), dy, retain_graph=True)

    if pass_name == "backward":
        calls = {"op": op_backward, "op, own sums": lambda: op_backward(None),
                 "formula eager": graph_backward(formula), "formula inductor": graph_backward(compiled_formula)}
        return calls, x.nbytes + dy.nbytes + x.nbytes

    def run(fn):
        def call():
            if pass_name == "forward":
                with torch.no_grad():
                    fn(x)
            else:
                xr = x.detach().requires_grad_(True)
                fn(xr).backward(dy)
                weight.grad = None
        return call

    def op():
        if pass_name == "forward":
            torch.ops.magi2norm.normalize_out(x, w, sizes, None, dim, EPS, m, 1, out)
        else:
            torch.ops.magi2norm.forward(x, w, sizes, None, dim, EPS, m, 1, code)
            op_backward()

    calls = {
        "module": run(lambda xi: module(xi, dispatcher)),
        "op": op,
        "formula eager": run(lambda xi: formula(xi, weight, dim, EPS, m, sizes, out_dtype)),
        "formula inductor": run(lambda xi: compiled_formula(xi, weight, dim, EPS, m, sizes, out_dtype)),
    }
    moved = x.nbytes + out.nbytes + (2 * x.nbytes + dy.nbytes if pass_name != "forward" else 0)  # x, dy read, dx written
    return calls, moved


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="16,256,4096,16384")
    p.add_argument("--modalities", default="1,3")
    p.add_argument("--norms", default=",".join(dict.fromkeys(n.name for n in NORMS.values())))
    p.add_argument("--passes", default="forward,forward+backward,backward")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    src, dst = torch.ones(256 << 20, dtype=torch.uint8), torch.empty(256 << 20, dtype=torch.uint8)
    lines = [f"# The PyTorch package against PyTorch ({time.strftime('%Y-%m-%d')})", "",
             "`.venv/bin/python benchmarks/torch_norms.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Machine: {machine()}; torch {torch.__version__}, {a.threads} threads (torch's); {a.rounds} interleaved rounds, medians. GB/s decimal over the bytes the pass must move "
             "(forward: x, y; forward+backward: also x, dy, dx; backward: x, dy, dx); `of copy`: over "
             "`dst.copy_(src)` of 256 MiB timed in the same rounds (read + write); `speedup`: "
             "the row's time over the module's (backward: over the op's).", "",
             "| norm | M | T | pass | row | time | GB/s | of copy | speedup |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in (label for label, n in NORMS.items() if n.name in a.norms.split(",")):
        for m in (int(v) for v in a.modalities.split(",")):
            if m > 1 and not NORMS[name].grouped:
                continue
            for t in (int(v) for v in a.tokens.split(",")):
                for pass_name in a.passes.split(","):
                    calls, moved = case_calls(name, t, m, pass_name)
                    for call in calls.values():
                        call()  # warm: compile, fault the pages in
                    samples = {k: [] for k in calls}
                    copies = []
                    names = list(calls)
                    for r in range(a.rounds):
                        copies.append(timed(lambda: dst.copy_(src)))
                        # Each round starts at another row, so that none always follows the copy.
                        for k in names[r % len(names):] + names[:r % len(names)]:
                            calls[k]()  # each row timed in the state its own call leaves, not its predecessor's
                            samples[k].append(timed(calls[k]))
                    copy_rate = 2 * src.nbytes / statistics.median(copies)
                    med = {k: statistics.median(v) for k, v in samples.items()}
                    for k, seconds in med.items():
                        rate = moved / seconds
                        ours = med["module"] if "module" in med else med["op"]
                        speedup = f"{seconds / ours:.2f}x"
                        lines.append(f"| {name} | {m} | {t} | {pass_name} | {k} | {seconds * 1e6:.1f} us | "
                                     f"{rate / 1e9:.1f} | {rate / copy_rate:.2f} | {speedup} |")
                    print("\n".join(lines[-len(med):]), flush=True)
    write_page(lines, a.output)


if __name__ == "__main__":
    main()
