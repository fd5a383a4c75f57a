"""The BF16 outputs on a CPU with AVX-512 BF16: the library (its AVX-512 BF16 family), the same
plans through the variant it would run without that family (`ours_integer_bf16`: the paired-word
or element form with the integer encoder, in the stores the library chose), and the hand kernels
of the same arithmetic (AVX2; AVX-512 with the native conversion), from magi2norm_bench in one
process, each benchmark repeated in random interleaving. Writes a Markdown table: the median
GB/s of each, its fraction of this machine's copy bandwidth measured beside it (frac_copy), and
the library's time over each other's inverse (above 1: the library is faster).

    .venv/bin/python benchmarks/bf16_encoders.py --bench build-bench/benchmarks/magi2norm_bench \
        [--repetitions 7] [--output docs/benchmarks/native_bf16.md]
"""
import argparse
import statistics
import sys

from bench_json import add_bench_arguments, iterations, run_bench, write_page
from machine import machine

CASES = r"(pre_norm/bf16_bf16/(M1|M3_sizes)/T(16|256|4096|16384)|mhc_norm/bf16_bf16/M1/T(256|4096))"
IMPLEMENTATIONS = ["ours", "ours_integer_bf16", "hand_avx2", "hand_avx512"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_arguments(parser, 7)
    args = parser.parse_args()
    pattern = "^%s/(%s)/(min_warmup_time:[0-9.]+/)?real_time$" % (CASES, "|".join(IMPLEMENTATIONS))
    report = run_bench(args.bench, pattern, args.repetitions)
    runs = {}
    for b in iterations(report):
        parts = b["run_name"].split("/")
        case, impl = "/".join(parts[:4]), parts[4]
        runs.setdefault(case, {}).setdefault(impl, []).append((b["real_time"], b["bytes_per_second"], b["frac_copy"]))
    lines = ["# BF16 outputs on AVX-512 BF16", "",
             "Machine: %s, %s threads (magi2norm_bench's context). Regenerate: `%s`." % (
                 machine(), report["context"].get("magi2norm_threads", "?"), " ".join(["python"] + sys.argv)), "",
             "Median GB/s of %d interleaved repetitions (fraction of the copy bandwidth measured beside each); "
             "`ours / x`: x's time over the library's." % args.repetitions, "",
             "| case | " + " | ".join(IMPLEMENTATIONS) + " | ours / ours_integer_bf16 | ours / hand_avx512 |",
             "|---|" + "---:|" * (len(IMPLEMENTATIONS) + 2)]
    for case in sorted(runs, key=lambda c: (c.split("/")[0], c.split("/")[2], int(c.split("/")[3][1:]))):
        r = runs[case]
        med = {i: (statistics.median(t for t, _, _ in r[i]), statistics.median(b for _, b, _ in r[i]) / 1e9,
                   statistics.median(f for _, _, f in r[i])) for i in IMPLEMENTATIONS if i in r}
        cells = ["%.1f (%.2f)" % (med[i][1], med[i][2]) if i in med else "-" for i in IMPLEMENTATIONS]
        ratio = lambda other: "%.2f" % (med[other][0] / med["ours"][0]) if other in med and "ours" in med else "-"
        lines.append("| %s | %s | %s | %s |" % (case, " | ".join(cells), ratio("ours_integer_bf16"), ratio("hand_avx512")))
    write_page(lines, args.output)


if __name__ == "__main__":
    main()
