"""The backward benchmark's model cases (benchmarks/backward.cpp: each model norm at T = 4096, with
its own row sums and from the forward's inverse RMS, `/inv`) as a Markdown table: each case's
median over repetitions in random interleaving, its rate over the bytes it must move (x and dy
read, dx written, the FP32 partials written and read, the inverse RMS read), its fraction of the
ordinary-store copy measured around it, and the best peer's time over the library's.

    .venv/bin/python benchmarks/backward_table.py --bench build-bench/benchmarks/magi2norm_bench
        [--repetitions 5] [--filter REGEX] [--output docs/benchmarks/backward.md]
"""
import argparse
import re
import statistics
import sys
import time

from bench_json import add_bench_arguments, iterations, run_bench, write_page
from machine import machine

TARGET = 0.8  # of the ordinary-store copy, from the forward's inverse RMS at T >= 4096


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_bench_arguments(p, repetitions=5)
    p.add_argument("--filter", default=r"^backward/[a-z_]+/[a-z0-9_]+/M[13]/T(4096|32768)(/inv)?/real_time$")
    a = p.parse_args()
    runs = {}
    for b in iterations(run_bench(a.bench, a.filter, a.repetitions)):
        runs.setdefault(b["run_name"], []).append(b)
    lines = [f"# The backward against the ordinary-store copy ({time.strftime('%Y-%m-%d')})", "",
             "`.venv/bin/python benchmarks/backward_table.py " + " ".join(sys.argv[1:]) + "`", "",
             f"Machine: {machine()}; 2 threads (the library's pool). Medians of {a.repetitions} repetitions "
             "in random interleaving. GB/s decimal over the bytes the case must move; `of copy`: over the "
             "ordinary-store copy measured around each repetition; `inv`: from the forward's inverse RMS "
             f"(the target, {TARGET} of the copy at T >= 4096, applies there); `best peer`: the fastest of "
             "Halide's autodiff peers built, its time over the library's.", "",
             "| case (x_dy_dx, M, T) | from | time | GB/s | copy around it | of copy | best peer |",
             "|---|---|---|---|---|---|---|"]
    order = ("pre_norm", "qk_norm", "mhc_norm", "final_norm")
    for name, rs in sorted(runs.items(), key=lambda kv: (order.index(kv[0].split("/")[1]), kv[0])):
        m = re.match(r"backward/(\w+)/(\w+)/M(\d+)/T(\d+)(/inv)?", name)
        med = lambda key: statistics.median(r[key] for r in rs if key in r)  # noqa: E731
        peers = [k[:-len("_over_ours")] for k in rs[0] if k.endswith("_over_ours")]
        best = min(peers, key=lambda k: med(k + "_over_ours")) if peers else None
        peer = f"{best} {med(best + '_over_ours'):.1f}x" if best else "-"
        lines.append(f"| {m[1]} {m[2]} M{m[3]} T{m[4]} | {'inverse RMS' if m[5] else 'own sums'} | "
                     f"{med('real_time') / 1e3:.2f} ms | {med('bytes_per_second') / 1e9:.1f} | "
                     f"{med('copy_ceiling_bps') / 1e9:.1f} GB/s | {med('frac_copy'):.2f} | {peer} |")
    write_page(lines, a.output)


if __name__ == "__main__":
    main()
