"""magi2norm_bench run once for the scripts that tabulate it: their shared arguments, the
benchmarks matching a filter, each repeated in random interleaving, read back as its JSON
report, and the Markdown page they write."""
import json
import subprocess
import tempfile


def add_bench_arguments(parser, repetitions, bench_help="the magi2norm_bench executable"):
    """--bench, --repetitions (default `repetitions`) and --output."""
    parser.add_argument("--bench", required=True, help=bench_help)
    parser.add_argument("--repetitions", type=int, default=repetitions)
    parser.add_argument("--output", help="Markdown file to write (default: print)")


def write_page(lines, output):
    """The page of `lines`, written to `output` where given, and printed."""
    text = "\n".join(lines) + "\n"
    if output:
        open(output, "w").write(text)
    print(text)


def run_bench(bench, pattern, repetitions, min_time=0.2):
    """The report of `bench` on the benchmarks matching `pattern` (Google Benchmark's JSON)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, "--benchmark_filter=" + pattern, "--benchmark_repetitions=%d" % repetitions,
                        "--benchmark_enable_random_interleaving=true", "--benchmark_min_time=%g" % min_time,
                        "--benchmark_out=" + out.name, "--benchmark_out_format=json"], check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out.name))


def iterations(report):
    """The report's per-repetition runs (no aggregates, no errors)."""
    return [b for b in report["benchmarks"] if b.get("run_type") == "iteration" and not b.get("error_occurred")]
