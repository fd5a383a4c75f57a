"""The PyTorch package as a model calls it, not in a loop of its own: each norm right after a
torch op (a [256, 256] torch.mm, as a GEMM precedes every norm in the model), in one process with
interleaved rounds, 2 threads. Tables:

- after a torch op: each form of the norm timed right after the mm (a loop of both, the norm's
  calls timed alone), against the op on a preallocated output called alone (`kernel alone`: torch.ops.magi2norm.normalize_out in a
  loop of its own), for the module forward (no grad), the module forward + backward, and the
  formula eager and under torch.compile (inductor), forward and forward + backward;
- first result: a fresh process's import and first call, against the formula's first call under
  torch.compile;
- in a model: a small model of norms around projections (examples/python/swap_in.py's shape),
  the norms' time per training step with the module against upstream's formula.

    .venv/bin/python benchmarks/torch_in_model.py [--tokens 16,256,4096,16384] [--rounds 7] [--output FILE]
"""
import argparse
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

import magi2norm
from bench_json import write_page
from machine import machine
from torch_norms import NORMS, Case, compiled_formula, formula, timed

EPS = 1e-6


def norm_calls(name, t, m):
    """The forms of one norm call on fresh inputs of T tokens: a dict of name -> call."""
    c = Case(name, t, m)
    x, dy, sizes, module, dispatcher, out = c.x, c.dy, c.sizes, c.module, c.dispatcher, c.out
    dim, out_dtype, weight = c.dim, c.out_dtype, c.module.weight
    xr = x.detach().requires_grad_(True)

    def kernel():
        torch.ops.magi2norm.normalize_out(x, weight.detach(), sizes, None, dim, EPS, m, 1, out)

    def forward(fn):
        def call():
            with torch.no_grad():
                fn(x)
        return call

    def training(fn):
        def call():
            fn(xr).backward(dy)
            xr.grad = weight.grad = None
        return call

    module_call = lambda xi: module(xi, dispatcher)  # noqa: E731
    eager = lambda xi: formula(xi, weight, dim, EPS, m, sizes, out_dtype)  # noqa: E731
    inductor = lambda xi: compiled_formula(xi, weight, dim, EPS, m, sizes, out_dtype)  # noqa: E731
    return {"kernel alone": kernel,
            "module": forward(module_call), "formula eager": forward(eager), "formula inductor": forward(inductor),
            "module, fwd+bwd": training(module_call), "formula eager, fwd+bwd": training(eager),
            "formula inductor, fwd+bwd": training(inductor)}


def after(op, call, min_seconds=5e-3):
    """Seconds of one `call` right after `op`: a loop of both, timing the calls alone."""
    count, spent, start = 0, 0.0, time.perf_counter()
    while count < 3 or time.perf_counter() - start < min_seconds:
        op()
        begin = time.perf_counter()
        call()
        spent += time.perf_counter() - begin
        count += 1
    return spent / count


def after_torch_op(a, lines):
    lines += ["## Each norm right after a torch op", "",
              "Microseconds of a norm call right after a [256, 256] `torch.mm` (a loop of both, each norm call "
              "timed alone); `kernel alone`: the op on a preallocated output in a loop of its own, no torch op "
              "between calls. `module - kernel`: the module forward's time after the mm less the kernel's alone.", "",
              "| norm | M | T | kernel alone | module | module, fwd+bwd | formula eager | formula inductor | "
              "formula eager, fwd+bwd | formula inductor, fwd+bwd | module - kernel |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    a_mm, b_mm = torch.randn(256, 256), torch.randn(256, 256)
    mm = lambda: torch.mm(a_mm, b_mm)  # noqa: E731
    for name in (label for label, n in NORMS.items() if n.name in a.norms.split(",")):
        for m in (int(v) for v in a.modalities.split(",")):
            if m > 1 and not NORMS[name].grouped:
                continue
            for t in (int(v) for v in a.tokens.split(",")):
                calls = norm_calls(name, t, m)
                for call in calls.values():
                    call()
                    call()  # compile, fault the pages in
                samples = {k: [] for k in calls}
                names = list(calls)
                for r in range(a.rounds):
                    for k in names[r % len(names):] + names[:r % len(names)]:
                        calls[k]()
                        samples[k].append(timed(calls[k], 5e-3) if k == "kernel alone" else after(mm, calls[k]))
                added = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
                cells = " | ".join(f"{added[k]:.1f}" for k in calls)
                lines.append(f"| {name} | {m} | {t} | {cells} | {added['module'] - added['kernel alone']:.1f} |")
                print(lines[-1], flush=True)
    lines.append("")


FIRST_CALL = """
import time
start = time.perf_counter()
import torch
torch.set_num_threads(2)
x = torch.randn(256, 3072).to(torch.bfloat16)
weight = torch.zeros(3 * 3072)
sizes = torch.tensor([128, 64, 64], dtype=torch.int32)
ready = time.perf_counter()
if "{form}" == "module":
    import magi2norm
    norm = magi2norm.MultiModalityRMSNorm(3072, num_modality=3)
    dispatcher = type("Dispatcher", (), {{"group_size": sizes}})()
    imported = time.perf_counter()
    with torch.no_grad():
        norm(x, dispatcher)
else:
    def formula(x, weight, dim, eps, m, sizes, out_dtype):  # torch_norms.formula
        n = x.float()
        n = n * torch.rsqrt(n.square().mean(-1, keepdim=True) + eps)
        rows = (weight.view(m, 1, dim) + 1.0).repeat_interleave(sizes, dim=0, output_size=x.shape[0])
        return (n * rows.view(x.shape[0], dim)).to(out_dtype)
    compiled_formula = torch.compile(formula, dynamic=True)
    imported = time.perf_counter()
    compiled_formula(x, weight, 3072, 1e-6, 3, sizes, torch.bfloat16)
done = time.perf_counter()
print(imported - ready, done - imported)
"""


def first_result(a, lines):
    lines += ["## Time to first result in a fresh process", "",
              "Pre-norm, T = 256, M = 3, bf16, after `import torch`: seconds to import the package (or define the "
              "compiled formula), and from there to the first result; medians of 3 fresh processes (inductor's "
              "cache is the machine's: a warm cache shortens its first call).", "",
              "| form | import | first call |", "|---|---|---|"]
    for form in ("module", "formula inductor"):
        runs = [list(map(float, subprocess.run([sys.executable, "-c", FIRST_CALL.format(form=form)],
                                               check=True, capture_output=True, text=True).stdout.split()))
                for _ in range(3)]
        lines.append(f"| {form} | {statistics.median(r[0] for r in runs):.3f} s | "
                     f"{statistics.median(r[1] for r in runs):.3f} s |")
        print(lines[-1], flush=True)
    lines.append("")


class UpstreamNorm(nn.Module):
    """vLLM-Omni's formula (torch_norms.formula) as a module with the same parameter."""

    def __init__(self, dim, num_modality=1, out_dtype=None):
        super().__init__()
        self.dim, self.num_modality, self.out_dtype = dim, num_modality, out_dtype
        self.weight = nn.Parameter(torch.zeros(num_modality * dim))

    def forward(self, x, dispatcher):
        sizes = dispatcher.group_size if self.num_modality > 1 else None
        return formula(x, self.weight, self.dim, EPS, self.num_modality, sizes, self.out_dtype or x.dtype)


class Layer(nn.Module):
    """Pre-norm, QKV projection, per-head Q/K norm, output projection, as a MAGI-2 layer's norms
    sit around its GEMMs (no attention: the norms' neighbourhood, not the model)."""

    def __init__(self, norm, width, heads):
        super().__init__()
        self.heads = heads
        self.pre = norm(width, num_modality=3, out_dtype=torch.bfloat16)
        self.qkv = nn.Linear(width, 3 * width, bias=False, dtype=torch.bfloat16)
        self.qk = norm(width // heads, num_modality=3, out_dtype=torch.float32)
        self.out = nn.Linear(width, width, bias=False, dtype=torch.bfloat16)

    def forward(self, x, dispatcher):
        q, k, v = self.qkv(self.pre(x, dispatcher)).chunk(3, dim=-1)
        q = self.qk(q.reshape(x.shape[0], self.heads, -1), dispatcher).to(torch.bfloat16)
        k = self.qk(k.reshape(x.shape[0], self.heads, -1), dispatcher).to(torch.bfloat16)
        return x + self.out((q * k).reshape(x.shape[0], -1) + v)


def model_step(norm, x, dispatcher, width, heads, layers):
    """A model of `norm` layers: its step(grad) and the list its norms' forward times go to."""
    torch.manual_seed(1)
    model = nn.ModuleList(Layer(norm, width, heads) for _ in range(layers))
    spent = []

    def start(module, args):
        spent.append(-time.perf_counter())

    def end(module, args, output):
        spent[-1] += time.perf_counter()

    for module in model.modules():
        if isinstance(module, norm):
            module.register_forward_pre_hook(start)
            module.register_forward_hook(end)

    def step(grad=True):
        with torch.set_grad_enabled(grad):
            h = x.detach().requires_grad_(grad)
            for layer in model:
                h = layer(h, dispatcher)
            if grad:
                h.float().square().mean().backward()
                model.zero_grad(set_to_none=True)
    return step, spent


def in_a_model(a, lines, width=1536, heads=12, layers=4, tokens=512):
    lines += ["## Norms inside a model", "",
              f"{layers} layers of pre-norm, QKV projection, Q/K norm and output projection (width {width}, {heads} "
              f"heads, M = 3 by group sizes, T = {tokens}, bf16): the norms' own forward time in a training step "
              "(from each norm call's start to its end, by forward hooks), the training step's time (forward, "
              "backward) and an inference step's (no grad); medians of the rounds.", "",
              "| norms | norms' forward per step | step (forward + backward) | step, no grad |", "|---|---|---|---|"]
    torch.manual_seed(0)
    x = torch.randn(tokens, width).to(torch.bfloat16)
    sizes = torch.tensor([tokens // 2, tokens // 4, tokens - tokens // 2 - tokens // 4], dtype=torch.int32)
    dispatcher = magi2norm.ModalityDispatcher(torch.repeat_interleave(torch.arange(3, dtype=torch.int32), sizes.long()), 3)
    results = {label: model_step(norm, x, dispatcher, width, heads, layers)
               for label, norm in (("upstream formula", UpstreamNorm), ("magi2norm module", magi2norm.MultiModalityRMSNorm))}
    for step, _ in results.values():
        step()
        step(False)
    samples = {k: ([], [], []) for k in results}
    for _ in range(a.rounds):
        for label, (step, spent) in results.items():
            spent.clear()
            begin = time.perf_counter()
            step()
            samples[label][1].append(time.perf_counter() - begin)
            samples[label][0].append(sum(spent))
            begin = time.perf_counter()
            step(False)
            samples[label][2].append(time.perf_counter() - begin)
    for label, (norms, steps, inference) in samples.items():
        lines.append(f"| {label} | {statistics.median(norms) * 1e3:.2f} ms | {statistics.median(steps) * 1e3:.2f} ms | "
                     f"{statistics.median(inference) * 1e3:.2f} ms |")
        print(lines[-1], flush=True)
    lines.append("")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="16,256,4096,16384")
    p.add_argument("--modalities", default="1,3")
    p.add_argument("--norms", default="pre_norm,qk_norm")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    lines = [f"# The PyTorch package inside a model ({time.strftime('%Y-%m-%d')})", "",
             "`.venv/bin/python benchmarks/torch_in_model.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Machine: {machine()}; torch {torch.__version__}, {a.threads} threads (torch's); "
             f"{a.rounds} interleaved rounds, medians.", ""]
    after_torch_op(a, lines)
    first_result(a, lines)
    in_a_model(a, lines)
    write_page(lines, a.output)


if __name__ == "__main__":
    main()
