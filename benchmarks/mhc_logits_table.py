"""The mHC logits' benchmark (benchmarks/mhc_logits.cpp: the model's case, M = 1 and 3, T = 16 to
16384) as a Markdown table: each case's median over repetitions in random interleaving, its
products a second and their fraction of this machine's FP64 FMA rate (the bound: 12288 x 24
products a token), x's rate and its fraction of the copy ceiling, and the unfused path in the
library (the norm to FP32 in memory, then the same products) over the fused call.

    .venv/bin/python benchmarks/mhc_logits_table.py --bench build-bench/benchmarks/magi2norm_bench
        [--repetitions 5] [--output docs/benchmarks/mhc_logits.md]
"""
import argparse
import re
import statistics
import sys
import time

from bench_json import add_bench_arguments, iterations, run_bench, write_page
from machine import machine


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_bench_arguments(p, repetitions=5)
    a = p.parse_args()
    runs = {}
    for b in iterations(run_bench(a.bench, r"^mhc_logits/", a.repetitions)):
        runs.setdefault(b["run_name"], []).append(b)
    lines = [f"# The mHC logits against this machine's FP64 FMA rate ({time.strftime('%Y-%m-%d')})", "",
             "`.venv/bin/python benchmarks/mhc_logits_table.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Machine: {machine()}; 2 threads (the library's pool). Medians of {a.repetitions} repetitions in "
             "random interleaving. x [T, 12288] BF16, phi [12288, 24] FP32. `of FMA`: products a second over a "
             "12-chain FP64 FMA loop's lanes a second on the same threads (measure/fma_rate.hpp), the bound "
             "here; `of copy`: x's bytes a second over the ordinary-store copy; `unfused`: the library's norm to "
             "FP32 in memory, then the same FP64 products in a plain loop, its time over the fused call's.", "",
             "| M | T | time | G products/s | of FMA | x GB/s | of copy | unfused |", "|---|---|---|---|---|---|---|---|"]
    for name, rs in sorted(runs.items(), key=lambda kv: [int(v) for v in re.findall(r"/[MT](\d+)", kv[0])]):
        m = re.match(r"mhc_logits/\w+/N\d+/M(\d+)/T(\d+)", name)
        med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
        lines.append(f"| {m[1]} | {m[2]} | {med('real_time'):.0f} us | {med('products_per_second') / 1e9:.1f} | "
                     f"{med('frac_fp64_fma'):.2f} | {med('x_bytes_per_second') / 1e9:.2f} | {med('frac_copy_x'):.3f} | "
                     f"{med('unfused_over_fused'):.2f}x |")
    write_page(lines, a.output)


if __name__ == "__main__":
    main()
