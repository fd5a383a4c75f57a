#!/usr/bin/env python3
"""A tuning record and its search log as a report: per case, the library's shipped defaults, the tuned schedule of
its class, the best of Halide's autoschedulers and (with --anchor) the best schedule of the
Adams2019 sampling run, in GB/s, beside the copy ceiling measured in the same rounds.

  python scripts/tune_report.py RECORD.json [--anchor ANCHOR.json] [--out DIR]

RECORD.search.json, the search's log the tuner writes beside the record, must be there.

Each GB/s is the case's bytes over a time; a schedule's time is its ratio to the library's variant
(from interleaved rounds) times the library's time in the tuned schedule's rounds, so every column
of a row shares one reference. Writes DIR/report.md (printed too) and, with matplotlib,
DIR/report.png.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tuning"))
from tuning_record import load  # noqa: E402  (the record merged with its search log)


def best_ratios(record, keep):
    """case id -> (ratio, candidate) of the fastest accepted candidate `keep` admits."""
    best = {}
    for c in record["candidates"]:
        if c["status"] != "ok" or not keep(c):
            continue
        for case, t in c["cases"].items():
            if case not in best or t["ratio"] < best[case][0]:
                best[case] = (t["ratio"], c)
    return best


def describe(candidate):
    s = candidate["schedule"]
    if s["kind"] == "knobs":
        return " ".join(f"{k}={v}" for k, v in sorted(s["params"].items())) or "defaults"
    seed = s.get("dropout_seed", 0)
    return s["kind"] + (f" sample {seed}" if seed else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record")
    parser.add_argument("--anchor")
    parser.add_argument("--out")
    args = parser.parse_args()
    record = load(args.record, need_log=True)
    anchor = load(args.anchor, need_log=True) if args.anchor else None
    out = args.out or os.path.dirname(os.path.abspath(args.record))
    os.makedirs(out, exist_ok=True)

    by_id = {c["id"]: c for c in record["candidates"]}
    classes = {k["name"]: k for k in record["classes"]}
    autos = best_ratios(record, lambda c: c["schedule"]["kind"] != "knobs")
    anchors = best_ratios(anchor, lambda c: True) if anchor else {}
    m = record["machine"]
    lines = [f"# Tuning report", "",
             f"- Machine: {m['cpu']}, {m['cores']} cores, L3 {m['caches']['l3'] >> 20} MiB; code {m['isa']}; "
             f"backend {record['backend']}",
             f"- Generator {record['generator_version'][:12]}, seed {record['seed']}, budget {record['budget_seconds']:.0f} s, "
             f"{len(record['candidates'])} schedules measured"
             + (f"; anchor: Adams2019 sampling, {len(anchor['candidates'])} schedules, budget {anchor['budget_seconds']:.0f} s"
                if anchor else ""),
             f"- Runtime knobs: " + ", ".join(f"{k} = {v}" for k, v in sorted(record["runtime"].items())),
             ] + [f"- {n}" for n in record.get("notes", [])] + ["",
             "GB/s: input and output bytes over the time of a call; `x`: over the defaults. The tuned schedule "
             "is its class's (the defaults where none beat them); **bold** where it beats the defaults on "
             "the case by more than the case's noise (the difference between two runs of the defaults in "
             "the same rounds).", "",
             "| case | copy GB/s | defaults GB/s | tuned GB/s | best autoscheduler GB/s | "
             + ("anchor GB/s | " if anchor else "") + "noise | tuned schedule |",
             "|---|---:|---:|---:|---:|" + ("---:|" if anchor else "") + "---:|---|"]
    rows = []
    for case in record["cases"]:
        cid, klass = case["id"], classes.get(case["class"])
        if klass is None:
            continue
        tuned = by_id.get(klass.get("best", ""))
        times = tuned["cases"].get(cid) if tuned else None
        reference = times or next((c["cases"][cid] for c in record["candidates"] if cid in c["cases"]), None)
        if reference is None:
            continue
        library_s = reference["library_s"]
        gbps = lambda ratio: case["bytes"] / (ratio * library_s) / 1e9
        tuned_ratio = times["ratio"] if times and klass["significant"] else 1.0
        noise = reference["noise"]
        auto = autos.get(cid)
        anc = anchors.get(cid)
        win = tuned_ratio < 1 - max(noise, 0.01)
        cells = [cid, f"{reference['copy_gbps']:.1f}", f"{gbps(1.0):.2f}", f"{gbps(tuned_ratio):.2f} ({1 / tuned_ratio:.2f}x)",
                 f"{gbps(auto[0]):.2f} ({auto[1]['schedule']['kind']})" if auto else "-"]
        if anchor:
            cells.append(f"{gbps(anc[0]):.2f}" if anc else "-")
        schedule = describe(tuned) if tuned and klass["significant"] else "defaults"
        cells += [f"{noise:.3f}", f"**{schedule}**" if win else schedule]
        lines.append("| " + " | ".join(cells) + " |")
        rows.append((cid, reference["copy_gbps"], gbps(1.0), gbps(tuned_ratio), gbps(auto[0]) if auto else math.nan,
                     gbps(anc[0]) if anc else math.nan))
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "report.md"), "w").write(text)
    print(text)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no plot (scripts/bench.sh installs it into .venv)")
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows)), 5))
    labels = ["copy", "defaults", "tuned", "best autoscheduler"] + (["anchor"] if anchor else [])
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        ax.bar([i + k * width for i in range(len(rows))], [r[1 + k] for r in rows], width, label=label)
    ax.set_xticks([i + 0.4 for i in range(len(rows))])
    ax.set_xticklabels([r[0] for r in rows], rotation=80, fontsize=7)
    ax.set_ylabel("GB/s")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "report.png"), dpi=110)


if __name__ == "__main__":
    main()
