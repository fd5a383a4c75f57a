#!/usr/bin/env python3
"""Runs magi2-tune twice on one small class and checks the record it writes: every schedule is
either measured (with the library's times beside its own) or rejected with a reason; Halide's
three autoschedulers are among them; a schedule whose generator parameters change the results
(the test adds sum_steps=64 through MAGI2NORM_TUNE_TEST_PARAMS) is rejected for its bits; the
second run, resumed from the record, measures no schedule again; on the CPU the norm's backward is
a class of its own, searched over the backward's knobs and bit-checked as the forward; every class's pick
went through the confirmation (a class ships only with a confirmed interval above 1) and the
record says what each class cost, with the machine's keys.

With `budget` in place of the backend: one run over three classes of different sizes (one of
them from memory), whose budget reaches every class (each measures knob candidates) and is kept.

With `three`: the GPU workflow on OpenCL in its three processes, as CUDA takes it across two
machines: `magi2-tune --batch-only` makes the candidates and measures none,
`magi2-tune-measure` times every one (its --help first), `magi2-tune --select` keeps each
class's best, and the configure's record check (cmake/check_tuning_record.cmake, with this
build's sources and OpenCL) accepts the record.

  check_tuning_run.py MAGI2_TUNE WORK_DIR -- cpu|opencl|budget
  check_tuning_run.py MAGI2_TUNE WORK_DIR -- three MAGI2_TUNE_MEASURE CMAKE CHECK_SCRIPT GENERATOR_VERSION CPU ISA
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tuning"))
from tuning_record import load, search_log_path  # noqa: E402  (the record merged with its search log)

MIN_CANDIDATES = 3  # tuning/search.hpp, kMinCandidates
MIN_ROUNDS = 10     # tuning/confirm.hpp, ConfirmOptions::min_rounds


def run(tune, work, backend, budget, extra_env=None, norm="final_norm", strategy="coordinate", tokens="16",
        passes="forward,backward"):
    env = dict(os.environ, **(extra_env or {}))
    args = [tune, "--budget", str(budget), "--tokens", tokens, "--norms", norm, "--rounds", "3",
            "--record", os.path.join(work, "record.json"), "--cache", os.path.join(work, "cache"), "--backend", backend]
    if backend == "cpu":
        args += ["--strategy", strategy, "--passes", passes]
    if backend != "cpu":
        args += ["--random", "1"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    print(done.stdout[-3000:])
    if done.returncode != 0:
        print(done.stderr[-3000:])
        sys.exit(f"magi2-tune exited with {done.returncode}")
    return load(os.path.join(work, "record.json"))


def check_cpu_classes(record):
    """The confirmation's verdict and the budget's spend on every class of a CPU record."""
    machine = record["machine"]
    for key in ("vendor", "family", "model", "stepping", "cores", "threads"):
        assert key in machine, key
    assert machine["threads"] >= machine["cores"] >= 1 and machine["caches"]["l3"] >= 0, machine
    for k in record["classes"]:
        c, spend = k["confirmation"], k["spend"]
        assert c["status"], k["name"]
        assert k["significant"] == c["status"].startswith("shipped"), (k["name"], c["status"])
        if not k.get("best"):
            assert c["status"].startswith("no pick"), (k["name"], c["status"])
        elif not c["status"].startswith("not shipped: the record") and "cannot load" not in c["status"]:
            assert c["speedup"]["rounds"] >= MIN_ROUNDS, (k["name"], c)
            assert all(case["rounds"] == c["speedup"]["rounds"] for case in c["cases"].values()), c
            lower, upper = c["speedup"]["lower"], c["speedup"]["upper"]
            assert 0 < lower <= c["speedup"]["estimate"] <= upper, c
            assert k["significant"] == (lower > 1 and all(x["upper"] >= 1 for x in c["cases"].values())), (k["name"], c)
        assert spend["visits"] >= 1 and spend["seconds"] > 0 and spend["start"], (k["name"], spend)
        measured = [m for m in record["candidates"] if m["class"] == k["name"]]
        assert spend["candidates"] == len(measured), (k["name"], spend, len(measured))
        # Every class measures knob candidates, whatever the autoschedulers took.
        knob_runs = [m for m in measured if m["schedule"]["kind"] == "knobs"]
        assert len(knob_runs) >= MIN_CANDIDATES, (k["name"], len(knob_runs))


def check_backward(record):
    """The backward's class beside the forward's: its case is the forward case's backward, its
    candidates set the backward's knobs only (no autoscheduler), and they were timed."""
    backward = [k for k in record["classes"] if k["pass"] == "backward"]
    assert len(backward) == 1 and backward[0]["name"].startswith("backward/"), [k["name"] for k in record["classes"]]
    assert backward[0]["dx"] == backward[0]["in"], backward[0]
    assert any(c["pass"] == "backward" and c["id"].endswith("/backward") for c in record["cases"]), record["cases"]
    measured = [m for m in record["candidates"] if m["class"] == backward[0]["name"]]
    assert measured and all(m["schedule"]["kind"] == "knobs" for m in measured), measured
    assert any(m["status"] == "ok" for m in measured), [m["status"] for m in measured]
    for m in measured:
        assert all(name.startswith("cpu_backward_") for name in m["schedule"].get("params", {})), m["schedule"]


def check_budget(tune, work):
    """Three classes (the Q/K norm at T = 16, 256, 4096: under 4 MiB, under 32 MiB, and from
    memory): every class is visited and measures knob candidates, and the run keeps its budget
    but for the last setups (seconds)."""
    budget = 40
    start = time.monotonic()
    record = run(tune, work, "cpu", budget, norm="qk_norm", strategy="knobs", tokens="16,256,4096", passes="forward")
    elapsed = time.monotonic() - start
    names = {k["name"] for k in record["classes"]}
    assert len(names) == 3, names
    check_cpu_classes(record)
    spent = sum(k["spend"]["seconds"] for k in record["classes"])
    assert spent <= budget, spent
    assert elapsed < budget + 60, elapsed
    print(f"budget run: {elapsed:.0f} s, classes' spend " +
          ", ".join(f"{k['name']} {k['spend']['candidates']} in {k['spend']['seconds']:.0f} s" for k in record["classes"]))


def step(args):
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print(done.stdout[-2000:])
    if done.returncode != 0:
        print(done.stderr[-2000:])
        sys.exit(f"{os.path.basename(args[0])} exited with {done.returncode}")
    return done.stdout


def check_three_steps(tune, work, measure, cmake, check, version, cpu, isa):
    record_path, cache = os.path.join(work, "record.json"), os.path.join(work, "cache")
    common = ["--record", record_path, "--cache", cache]
    assert "magi2-tune-measure" in step([measure, "--help"])
    made = step([tune, "--backend", "opencl", "--batch-only", "--budget", "20", "--tokens", "16", "--norms", "final_norm",
                 "--random", "1", "--rounds", "3"] + common)
    assert "magi2-tune-measure" in made and "--select" in made, made
    record = load(record_path)
    assert record["candidates"] and all(c["status"] == "pending" or c["status"].startswith("rejected: ")
                                        for c in record["candidates"]), "--batch-only measured"
    step([measure, "--backend", "opencl", "--rounds", "3"] + common)
    record = load(record_path)
    measured = [c for c in record["candidates"] if c["status"] == "ok"]
    assert measured and not any(c["status"] == "pending" for c in record["candidates"])
    step([tune, "--select", "--record", record_path])
    record = load(record_path)
    assert record["backend"] == "opencl" and record["classes"], record.get("classes")
    checked = subprocess.run([cmake, "-DRECORD=" + record_path, "-DEXPECT_GENERATOR_VERSION=" + version, "-DEXPECT_CPU=" + cpu,
                              "-DEXPECT_ISA=" + isa, "-DGPU_BACKENDS=opencl", "-P", check], capture_output=True, text=True)
    print(checked.stdout + checked.stderr)
    assert checked.returncode == 0 and "accepted" in checked.stdout + checked.stderr, "the build refuses the record"


def main():
    tune, work = sys.argv[1], sys.argv[2]
    backend = sys.argv[4] if len(sys.argv) > 4 else "cpu"
    os.makedirs(work, exist_ok=True)
    for name in ("record.json", "record.search.json"):
        if os.path.exists(os.path.join(work, name)):
            os.remove(os.path.join(work, name))
    if backend == "budget":
        check_budget(tune, work)
        return
    if backend == "three":
        check_three_steps(tune, work, *sys.argv[5:11])
        print("tuning run: three steps checked")
        return
    record = run(tune, work, backend, 20)
    candidates = record["candidates"]
    assert candidates, "no schedule measured"
    for c in candidates:
        assert c["status"] == "ok" or c["status"].startswith("rejected: "), c["status"]
        if c["status"] == "ok":
            for case, t in c["cases"].items():
                assert t["library_s"] > 0 and t["schedule_s"] > 0, (case, t)
                # Fewer rounds than asked only for a candidate cut as hopeless: over twice the
                # library's time (its slowest sample, so the median's ratio is above 1).
                assert t["rounds"] == 3 or (1 <= t["rounds"] < 3 and t["ratio"] > 1), (case, t)
    assert record["classes"] and all(k["name"] for k in record["classes"])
    # The record holds what a build reads; the measured schedules are the log's.
    alone = json.load(open(os.path.join(work, "record.json")))
    assert "candidates" not in alone and "cases" not in alone, sorted(alone)
    if backend == "cpu":
        kinds = {c["schedule"]["kind"] for c in candidates}
        assert {"adams2019", "li2018", "mullapudi2016"} <= kinds, kinds
        assert record["runtime"]["streaming_min_output_bytes"] > 0
        check_cpu_classes(record)
        check_backward(record)
    seen = len(candidates)
    again = run(tune, work, backend, 3)
    keys = [(c["class"], json.dumps(c["schedule"], sort_keys=True)) for c in again["candidates"]]
    assert len(keys) == len(set(keys)), "a resumed run measured a schedule again"
    assert len(again["candidates"]) >= seen
    if backend == "cpu":
        # Results that change: every schedule of the third run differs from the library's bits.
        # Rows of 128 (the Q/K norm's): on long rows the FP64 sum of FP32 partials often rounds
        # to the same FP32 value for any grouping of the squares. Knobs only: the autoschedulers'
        # compiles could spend the whole budget before the first knob candidate.
        os.remove(os.path.join(work, "record.json"))
        os.remove(search_log_path(os.path.join(work, "record.json")))
        bad = run(tune, work, backend, 8, {"MAGI2NORM_TUNE_TEST_PARAMS": "sum_steps=64"}, "qk_norm", "knobs")
        assert not any(c["schedule"]["kind"] != "knobs" for c in bad["candidates"]), "knobs ran an autoscheduler"
        knob_runs = [c for c in bad["candidates"] if c["schedule"]["kind"] == "knobs"]
        statuses = [c["status"] for c in knob_runs]
        assert knob_runs and all(st.startswith("rejected: ") for st in statuses), statuses
        assert any("differs from the library" in st for st in statuses), statuses
        assert not any(k["significant"] for k in bad["classes"])
        assert all(k["confirmation"]["status"].startswith("no pick") for k in bad["classes"]), bad["classes"]
    print("tuning run: record checked")


if __name__ == "__main__":
    main()
