"""magi2norm_bench run once for the scripts that tabulate it: the benchmarks matching a filter,
each repeated in random interleaving, read back as its JSON report."""
import json
import subprocess
import tempfile


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
