#!/usr/bin/env python3
"""Turns magi2norm_bench's JSON (--benchmark_format=json or --benchmark_out) into a report.

  python scripts/bench_report.py RESULTS.json [--out-dir DIR]

writes DIR/report.md (per case: GB/s of ours and of each peer, ours/peer, ours as a fraction
of each copy ceiling; benchmarks that failed, with their error) and DIR/report.png (GB/s
against T, one panel per norm and dtype pair, one line per implementation, the ceilings as
horizontal lines). DIR defaults to the JSON's folder. The plot needs matplotlib.
"""
import argparse
import json
import math
import os
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from model_norm_table import model_norms  # noqa: E402  (the model's norms, measure/model_norms.def)

OURS = "ours"
PLANNED = "ours_planned"  # a plan made once, run per call (benchmarks/ours.cpp), on the tiny calls
FORM_PREFIX = "ours_"  # ours through other views of the same memory (benchmarks/ours.cpp, ViewForm)
FORM_BOUND = 0.90      # "at the plain view's speed", within this machine's run-to-run noise
YARDSTICK = "memcpy"  # not a peer: memcpy of the input, for the tiny-call target
TINY_TOKENS = 16      # benchmarks/implementation.hpp kTinyTokens
LARGE_TOKENS = 4096   # the bandwidth targets apply from here, to the model's norms
MODEL_NORMS = {n.name for n in model_norms()}  # measure/model_norms.def
GROUPING_STYLES = {"M1": "-", "M3_sizes": "--", "M3_ids": ":"}
CEILINGS = [("memcpy", "ceiling_memcpy_GBps", "-."), ("copy", "ceiling_copy_GBps", "--"),
            ("streaming copy", "ceiling_streaming_copy_GBps", ":")]


def frac_key(ceiling_key):
    """'ceiling_<name>_GBps' -> 'frac_<name>', the benchmark's counter of that fraction."""
    return "frac_" + ceiling_key[len("ceiling_"):-len("_GBps")]


def parse_name(name):
    """'<norm>/<in>_<out>/<grouping>/T<tokens>/<impl>[/min_warmup_time:S][/real_time]' -> (case key, impl)."""
    parts = [p for p in name.split("/") if p != "real_time" and not p.startswith("min_warmup_time:")]
    if len(parts) != 5 or not parts[3].startswith("T"):
        return None
    norm, dtypes, grouping, tokens, impl = parts
    return (norm, dtypes, grouping, int(tokens[1:])), impl


def load(path):
    """Returns (context, cases, errors, implementations).

    cases: OrderedDict case key -> {impl: benchmark entry}, in the run's order;
    errors: OrderedDict (case key, impl) -> error message; implementations: in first-seen order.
    With repetitions, the median aggregate stands for a benchmark.
    """
    with open(path) as f:
        data = json.load(f)
    entries = data.get("benchmarks", [])
    have_medians = any(e.get("aggregate_name") == "median" for e in entries)
    cases, errors, implementations = OrderedDict(), OrderedDict(), []
    for e in entries:
        if have_medians and e.get("aggregate_name") != "median" and not e.get("error_occurred"):
            continue
        if not have_medians and e.get("run_type") == "aggregate":
            continue
        parsed = parse_name(e.get("run_name", e["name"]))
        if parsed is None:
            continue
        key, impl = parsed
        if impl not in implementations:
            implementations.append(impl)
        if e.get("error_occurred"):
            errors[(key, impl)] = e.get("error_message", "")
            continue
        cases.setdefault(key, {})[impl] = e
    return data.get("context", {}), cases, errors, implementations


def gbps(entry):
    return entry["bytes_per_second"] / 1e9


def micros(entry):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[entry.get("time_unit", "ns")]
    return entry["real_time"] * scale


def is_form(impl):
    """Ours through another view of the same memory (not the planned call)."""
    return impl.startswith(FORM_PREFIX) and impl != PLANNED


def tiny_budget_us(memcpy_entry):
    """The tiny-call budget: 2x a memcpy of the same bytes plus 5 microseconds."""
    return 2 * micros(memcpy_entry) + 5.0


def case_label(key):
    norm, dtypes, grouping, tokens = key
    return f"{norm} {dtypes.replace('_', '->')} {grouping} T={tokens}"


def targets(cases, peers, errors):
    """The suite's targets, each as: met in how many cases, and the worst case."""
    large = [(k, v[OURS]) for k, v in cases.items()
             if OURS in v and k[0] in MODEL_NORMS and k[3] >= LARGE_TOKENS and not v[OURS].get("cache_resident")]
    tiny = [(k, v[OURS], v[YARDSTICK]) for k, v in cases.items()
            if OURS in v and YARDSTICK in v and k[3] <= TINY_TOKENS]
    rows = []
    for label, column, bound in [("of copy >= 0.90", "frac_copy", 0.90), ("of memcpy >= 0.85", "frac_memcpy", 0.85)]:
        if large:
            worst = min(large, key=lambda kv: kv[1][column])
            met = sum(1 for _, e in large if e[column] >= bound)
            rows.append((f"model norms, T >= {LARGE_TOKENS}: {label}", f"{met} of {len(large)}",
                         f"{case_label(worst[0])}: {worst[1][column]:.2f}"))
    if tiny:
        ratios = [(k, micros(o) / tiny_budget_us(m)) for k, o, m in tiny]
        worst = max(ratios, key=lambda kr: kr[1])
        met = sum(1 for _, r in ratios if r <= 1)
        rows.append((f"T <= {TINY_TOKENS}: time <= 2 x memcpy + 5 us", f"{met} of {len(ratios)}",
                     f"{case_label(worst[0])}: {worst[1]:.2f} of the budget"))
    pairs = [(k, p, gbps(v[OURS]) / gbps(v[p])) for k, v in cases.items() if OURS in v for p in peers if p in v]
    # Pairs whose peer failed are counted as misses, not dropped.
    failed = sum(1 for k, v in cases.items() if OURS in v for p in peers if p not in v and (k, p) in errors)
    if pairs:
        worst = min(pairs, key=lambda kpr: kpr[2])
        met = sum(1 for _, _, r in pairs if r > 1)
        rows.append(("faster than the peer (case x peer)",
                     f"{met} of {len(pairs) + failed}" + (f" ({failed} where the peer failed)" if failed else ""),
                     f"{case_label(worst[0])} vs {worst[1]}: {worst[2]:.2f}x"))
    planned = [(k, p, gbps(v[PLANNED]) / gbps(v[p])) for k, v in cases.items() if PLANNED in v for p in peers if p in v]
    if planned:
        worst = min(planned, key=lambda kpr: kpr[2])
        met = sum(1 for _, _, r in planned if r > 1)
        rows.append((f"planned calls, T <= {TINY_TOKENS}: faster than the peer (case x peer)", f"{met} of {len(planned)}",
                     f"{case_label(worst[0])} vs {worst[1]}: {worst[2]:.2f}x"))
    forms = [(k, f, gbps(v[f]) / gbps(v[OURS])) for k, v in cases.items() if OURS in v for f in v if is_form(f)]
    # A view that failed counts as a miss, as a failed peer does above.
    failed_forms = sum(1 for (k, f) in errors if is_form(f))
    if forms:
        worst = min(forms, key=lambda kfr: kfr[2])
        met = sum(1 for _, _, r in forms if r >= FORM_BOUND)
        rows.append((f"other views of the same memory: >= {FORM_BOUND:.2f} of the plain view",
                     f"{met} of {len(forms) + failed_forms}" + (f" ({failed_forms} failed)" if failed_forms else ""),
                     f"{case_label(worst[0])} {worst[1]}: {worst[2]:.2f}"))
    lines = ["## Targets", "", "| target | met | worst case |", "|---|---:|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    if tiny:
        lines += ["", "Tiny calls: budget = 2 x the time of a memcpy moving the norm's bytes (half read, "
                  "half written) + 5 us; `planned us`: the same call through a plan made once.", "",
                  "| case | ours us | planned us | memcpy us | budget us | of budget |", "|---|---:|---:|---:|---:|---:|"]
        for k, o, m in tiny:
            p = cases[k].get(PLANNED)
            lines.append(f"| {case_label(k)} | {micros(o):.2f} | {f'{micros(p):.2f}' if p else '-'} | {micros(m):.2f} | "
                         f"{tiny_budget_us(m):.2f} | {micros(o) / tiny_budget_us(m):.2f} |")
    if forms:
        names = list(OrderedDict.fromkeys(f for _, f, _ in forms))
        lines += ["", "Other views of the same memory (one modality): `ours_one_sequence` is [1, T, ...], "
                  "`ours_heads_major` [rows, T, D] (the heads axis first). GB/s (form / plain view).", "",
                  "| case | ours GB/s | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
        for k, v in cases.items():
            if OURS in v and any(n in v for n in names):
                cells = [f"{gbps(v[n]):.2f} ({gbps(v[n]) / gbps(v[OURS]):.2f})" if n in v else "-" for n in names]
                lines.append(f"| {case_label(k)} | {gbps(v[OURS]):.2f} | " + " | ".join(cells) + " |")
    losses = [(k, p, r) for k, p, r in pairs if r <= 1]
    if losses:
        lines += ["", "Cases where a peer is as fast or faster: " +
                  "; ".join(f"{case_label(k)} vs {p} ({r:.2f}x)" for k, p, r in losses)]
    return lines


def markdown(context, cases, errors, implementations):
    peers = [i for i in implementations if i not in (OURS, YARDSTICK) and not i.startswith(FORM_PREFIX)]
    lines = ["# magi2norm benchmark", ""]
    ceilings = ", ".join(f"{label} {float(context[k]):.1f} GB/s" for label, k, _ in CEILINGS if k in context)
    lines.append(f"- Ceilings at start ({context.get('ceiling_threads', '?')} threads, "
                 f"{int(context.get('ceiling_bytes', 0)) >> 20} MiB copies, best of 3): {ceilings}. "
                 "The `of ...` columns of cases that come from memory divide by the same ceilings "
                 "measured just before and just after the case, averaged (the same copy size, mean "
                 "of 3 each; the `copy GB/s` column is the copy ceiling the `of copy` ratio implies), "
                 "so that changing load on this shared machine moves both sides of each ratio.")
    lines.append(f"- Library threads: {context.get('magi2norm_threads', '?')}; last-level cache "
                 f"{int(context.get('last_level_cache_bytes', 0)) >> 20} MiB; CPUs {context.get('num_cpus', '?')}; "
                 f"load average at start {', '.join(f'{x:.1f}' for x in context.get('load_avg', []))}")
    lines.append(f"- PyTorch peers: {context.get('torch_peers', 'unknown')}")
    lines.append(f"- Run {context.get('date', '')} on {context.get('host_name', '')}")
    lines.append("- GB/s counts the input read once, the output written once and the scale rows used; "
                 "copies count bytes read + written. Peer cells: GB/s (ours / peer). "
                 "`*`: buffers stay in cache (T small), so the ceilings do not bound them.")
    lines.append("")
    lines += targets(cases, peers, errors)
    lines += ["", "## All cases", ""]
    header = ["case", "ours GB/s", "copy GB/s", "of memcpy", "of copy", "of streaming copy"] + peers
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for key, by_impl in cases.items():
        ours = by_impl.get(OURS)
        label = case_label(key) + (" *" if ours and ours.get("cache_resident") else "")
        row = [label]
        if ours:
            # Each median field is taken on its own, so the median copy ceiling need not belong to
            # the repetition of the median ratio: the column shows the ceiling the ratio implies.
            copy_now = gbps(ours) / ours["frac_copy"] if ours.get("frac_copy") else None
            row += [f"{gbps(ours):.2f}", f"{copy_now:.2f}" if copy_now else "-"]
            row += [f"{ours[frac_key(k)]:.2f}" for _, k, _ in CEILINGS]
        else:
            row += ["-"] * 5
        for peer in peers:
            entry = by_impl.get(peer)
            if entry is None:
                row.append("fails" if (key, peer) in errors else "-")
            elif ours:
                row.append(f"{gbps(entry):.2f} ({gbps(ours) / gbps(entry):.1f}x)")
            else:
                row.append(f"{gbps(entry):.2f}")
        lines.append("| " + " | ".join(row) + " |")
    if errors:
        lines += ["", "## Failed benchmarks", ""]
        for (key, impl), message in errors.items():
            lines.append(f"- {case_label(key)}, {impl}: {message}")
    return "\n".join(lines) + "\n"


def plot(context, cases, implementations, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")  # 0.5, 2, 10 rather than powers of ten

    panels = OrderedDict()  # (norm, dtypes) -> {(impl, grouping): [(T, GB/s)]}
    for key, by_impl in cases.items():
        norm, dtypes, grouping, tokens = key
        for impl, entry in by_impl.items():
            if impl not in implementations:
                continue
            panels.setdefault((norm, dtypes), {}).setdefault((impl, grouping), []).append((tokens, gbps(entry)))
    colors = {impl: plt.get_cmap("tab10")(i % 10) for i, impl in enumerate(implementations)}

    columns = 4
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for ax, ((norm, dtypes), lines) in zip(axes.flat, panels.items()):
        for (impl, grouping), points in sorted(lines.items()):
            points.sort()
            ax.plot([t for t, _ in points], [g for _, g in points], marker="o", markersize=3,
                    color=colors[impl], linestyle=GROUPING_STYLES.get(grouping, "-"), linewidth=1.4)
        for label, k, style in CEILINGS:
            if k in context:
                ax.axhline(float(context[k]), color="grey", linestyle=style, linewidth=1)
        ax.set_xscale("log", base=2)
        tokens = sorted({t for points in lines.values() for t, _ in points})
        ax.set_xticks(tokens, [str(t) for t in tokens])
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{norm} {dtypes.replace('_', ' -> ')}", fontsize=10)
        ax.set_xlabel("T (tokens)")
        ax.set_ylabel("GB/s")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")

    handles = [Line2D([], [], color=colors[i], label=i) for i in implementations]
    handles += [Line2D([], [], color="black", linestyle=s, label=g) for g, s in GROUPING_STYLES.items()]
    handles += [Line2D([], [], color="grey", linestyle=s, label=f"{label} ceiling") for label, _, s in CEILINGS]
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 8), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / (3.8 * rows)))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="JSON written by magi2norm_bench")
    parser.add_argument("--out-dir", help="where report.md and report.png go (default: the JSON's folder)")
    args = parser.parse_args()
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.results))
    os.makedirs(out_dir, exist_ok=True)

    context, cases, errors, implementations = load(args.results)
    plotted = [i for i in implementations if i != YARDSTICK and not i.startswith(FORM_PREFIX)]
    if not cases and not errors:
        with open(args.results) as f:
            if not json.load(f).get("benchmarks"):
                sys.exit(f"{args.results}: no magi2norm_bench results in it")
        # A run of other benchmarks only (--filter '^backward/'): their counters are in the JSON.
        print(f"{args.results}: no forward cases, so no report; the results are in that file")
        return
    md_path = os.path.join(out_dir, "report.md")
    with open(md_path, "w") as f:
        f.write(markdown(context, cases, errors, implementations))
    print(f"wrote {md_path}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("matplotlib is missing, no plot (scripts/bench.sh installs it into .venv)")
    png_path = os.path.join(out_dir, "report.png")
    plot(context, cases, plotted, png_path)
    print(f"wrote {png_path}")


if __name__ == "__main__":
    main()
