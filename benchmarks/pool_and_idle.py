"""The CPU pools alone and calls after an idle gap, from magi2norm_bench in one process, each
benchmark repeated in random interleaving. Writes a Markdown page of two tables:
- `pool/<pool>/tasks<N>/work<ns>`: a loop of N equal tasks on two threads of the library's pool
  and of Halide's; its time, and its speedup over the same tasks run on the caller alone (2 is two
  threads without overhead);
- `<case>/<impl>/after_idle_5ms`: each call after 5 ms without calls, against the steady calls
  between them; the memcpy of as many bytes is the machine's own rate after the same gap.

    .venv/bin/python benchmarks/pool_and_idle.py --bench build-bench/benchmarks/magi2norm_bench \
        [--repetitions 7] [--output docs/benchmarks/pool.md]
"""
import argparse
from statistics import median
import sys

from bench_json import add_bench_arguments, iterations, run_bench, write_page
from machine import machine

IDLE_CASES = r"pre_norm/bf16_bf16/M1/T(16|256)/(ours|ours_planned|hand_avx512|hand_avx2|memcpy)/after_idle_5ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_arguments(parser, 7)
    args = parser.parse_args()
    report = run_bench(args.bench, "^(pool/.*|%s)" % IDLE_CASES, args.repetitions)
    pools, idle = {}, {}
    for b in iterations(report):
        name = b["run_name"]
        if name.startswith("pool/"):
            _, pool, tasks, work = name.split("/")[:4]
            pools.setdefault((tasks, work), {}).setdefault(pool, []).append((b["real_time"], b["speedup"]))
        else:
            parts = name.split("/")
            idle.setdefault(("/".join(parts[:4]), parts[4]), []).append(
                (b["real_time"], b["steady_us"], b["rate_of_steady"]))
    lines = ["# The CPU pool and calls after an idle gap", "",
             "Machine: %s. Regenerate: `%s`. Medians of %d interleaved repetitions." % (
                 machine(), " ".join(["python"] + sys.argv), args.repetitions), "",
             "## Pools: a loop of equal tasks on two threads", "",
             "| tasks x work | library us | Halide us | library speedup | Halide speedup |", "|---|---:|---:|---:|---:|"]
    for (tasks, work), r in sorted(pools.items(), key=lambda kv: (int(kv[0][0][5:]), int(kv[0][1][4:]))):
        cell = lambda pool, i: "%.2f" % median(v[i] for v in r[pool]) if pool in r else "-"  # noqa: E731
        lines.append("| %s x %s ns | %s | %s | %s | %s |" % (tasks[5:], work[4:], cell("library", 0), cell("halide", 0),
                                                             cell("library", 1), cell("halide", 1)))
    lines += ["", "## Calls after 5 ms idle", "",
              "| case | implementation | after idle us | steady us | rate of steady |", "|---|---|---:|---:|---:|"]
    for (case, impl), r in sorted(idle.items()):
        lines.append("| %s | %s | %.1f | %.1f | %.2f |" % (case, impl, median(v[0] for v in r), median(v[1] for v in r),
                                                            median(v[2] for v in r)))
    write_page(lines, args.output)


if __name__ == "__main__":
    main()
