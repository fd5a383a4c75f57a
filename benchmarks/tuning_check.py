"""Whether a tuning record's shipped wins hold in the build made from it: for each class the
record ships (significant), its confirmed cases timed as the build runs them ("ours") and as a
build without the record would ("ours_untuned"), in one magi2norm_bench process, each benchmark
repeated in random interleaving. A class's speedup per repetition is the geometric mean over its
cases of untuned time / ours; its 95% interval is Student's t over those logs, as the tuner's
confirmation computes it (tuning/interval.hpp). A class's win holds when its measured interval
lies above 1 and overlaps the interval the record confirmed (the two measurements agree within
their noise); it is slower beyond the noise when its whole interval lies below 1. Exits 1 when a
class's win does not hold.

    .venv/bin/python benchmarks/tuning_check.py --record RECORD \
        --bench build-bench/benchmarks/magi2norm_bench [--repetitions 11] [--output FILE.md]
"""
import argparse
import json
import math
import re
import statistics
import sys

from bench_json import add_bench_arguments, iterations, run_bench, write_page
from machine import machine

# Student's t at 0.975 for 1..30 degrees of freedom; 1.96 past them.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def interval(logs):
    """(estimate, lower, upper) of exp over the logs' t interval."""
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    t = T975[len(logs) - 2] if len(logs) - 1 <= len(T975) else 1.96
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def bench_case(case_id):
    """The benchmark's name of a tuner case: its M > 1 cases are grouped by sizes (tuning/bench.cpp);
    a backward case ("<norm>/<x>_<y>/M<m>/T<t>/backward") is "backward/<norm>/<x>_<y>_<x>/M<m>/T<t>"
    (dy in the forward's output dtype, dx in x's: benchmarks/backward.cpp)."""
    name = re.sub(r"/M([2-9]|[1-9][0-9]+)/", r"/M\1_sizes/", case_id)
    backward = re.fullmatch(r"([a-z_]+)/([a-z0-9]+)_([a-z0-9]+)/(M[^/]+/T[0-9]+)/backward", name)
    if backward:
        norm, x, y, rest = backward.groups()
        name = "backward/%s/%s_%s_%s/%s" % (norm, x, y, x, rest)
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", required=True, help="the tuning record the build was made from")
    add_bench_arguments(parser, 11, "magi2norm_bench of that build")
    args = parser.parse_args()
    record = json.load(open(args.record))
    shipped = [c for c in record["classes"] if c.get("significant")]
    if not shipped:
        print("the record ships no class: the build is the default build")
        return 0
    cases = sorted({bench_case(case) for c in shipped for case in c["confirmation"]["cases"]})
    pattern = "^(%s)/(ours|ours_untuned)/(min_warmup_time:[0-9.]+/)?real_time$" % "|".join(re.escape(c) for c in cases)
    report = run_bench(args.bench, pattern, args.repetitions)
    times = {}
    for b in iterations(report):
        parts = b["run_name"].split("/")
        at = next(i for i, part in enumerate(parts) if part in ("ours", "ours_untuned"))
        times.setdefault("/".join(parts[:at]), {}).setdefault(parts[at], []).append(b["real_time"])
    lines = ["# Shipped tuning wins in the build", "",
             "Machine: %s. Record: `%s`. Regenerate: `%s`." % (machine(), args.record,
                                                               " ".join(["python"] + sys.argv)), "",
             "Speedup: untuned time / the build's, geometric mean over the class's confirmed cases, %d interleaved "
             "repetitions, with its 95%% interval; `confirmed`: the record's. A win holds where the measured "
             "interval lies above 1 and overlaps the confirmed one." % args.repetitions, "",
             "| class | cases | measured | confirmed | holds |", "|---|---|---:|---:|---|"]
    failures = 0
    for c in shipped:
        ids = [bench_case(i) for i in c["confirmation"]["cases"]]
        ids = [i for i in ids if i in times and {"ours", "ours_untuned"} <= times[i].keys()]
        if not ids:
            lines.append("| %s | - | not run | - | no |" % c["name"])
            failures += 1
            continue
        n = min(min(len(times[i]["ours"]), len(times[i]["ours_untuned"])) for i in ids)
        logs = [statistics.fmean(math.log(times[i]["ours_untuned"][r] / times[i]["ours"][r]) for i in ids) for r in range(n)]
        est, lo, hi = interval(logs)
        conf = c["confirmation"]["speedup"]
        upper = conf["upper"] if conf["upper"] is not None else math.inf
        holds = lo > 1 and lo <= upper and hi >= conf["lower"]
        slower = hi < 1
        failures += not holds
        lines.append("| %s | %s | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %s |" % (
            c["name"], ", ".join(ids), est, lo, hi, conf["estimate"], conf["lower"], upper,
            "yes" if holds else ("no, slower than the default" if slower else "no")))
    write_page(lines, args.output)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
