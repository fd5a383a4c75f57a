#!/usr/bin/env bash
# Builds the benchmark suite, runs it and writes its report.
#   scripts/bench.sh [--with-torch] [--tuning RECORD] [--filter REGEX] [--min-time SECONDS] [-- BENCHMARK FLAGS...]
#     --with-torch  also install PyTorch into .venv (pip; the PyPI wheel is several GB with its
#                   CUDA libraries) so that the PyTorch peers are built and run; or set
#                   MAGI2NORM_TORCH_DIR to a torch package folder installed elsewhere
#     --tuning      build the library from this tuning record (-DMAGI2NORM_TUNING; docs/tuning.md)
#                   and, after the suite, check its shipped wins (benchmarks/tuning_check.py,
#                   tuning_check.md beside the report); without it, the defaults (a build
#                   folder configured with a record before is configured without it again)
#     --filter      run only the benchmarks whose names match (Google Benchmark regex), e.g.
#                   'pre_norm/.*/T4096/'
#     --min-time    seconds per benchmark (default 0.2; a call that takes longer runs once)
#     after --      flags passed to magi2norm_bench as they are
# BUILD_DIR (default build-bench) is the build folder; each run writes
# $BUILD_DIR/results/<date-time>/{benchmarks.json,report.md,report.png[,tuning_check.md]}.
# The whole suite takes about 6 minutes on 2 cores without PyTorch, about 15 with it, plus about
# 10 minutes of the first build for the backward's Adams2019 peers (MAGI2NORM_BACKWARD_AUTOSCHEDULERS).
set -euo pipefail
cd "$(dirname "$0")/.."

with_torch=0
tuning=""
filter=""
min_time=0.2
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-torch) with_torch=1 ;;
    --tuning) tuning=$(realpath "$2"); shift ;;
    --filter) filter=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bash scripts/setup.sh
if [ "$with_torch" = 1 ] && ! .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)'; then
  echo "bench: installing torch into .venv"
  .venv/bin/pip install -q --disable-pip-version-check torch==2.15.0
fi
if ! .venv/bin/python -c 'import matplotlib' 2>/dev/null; then
  echo "bench: installing matplotlib into .venv"
  .venv/bin/pip install -q --disable-pip-version-check matplotlib==3.11.2
fi

# The suite measures the CPU backend: the GPU and cross-compiled ARM variants and the tests
# would only lengthen the build. CMake finds libtorch in .venv by itself.
export BUILD_DIR=${BUILD_DIR:-build-bench}
torch_dir=()
if [ -n "${MAGI2NORM_TORCH_DIR:-}" ]; then torch_dir=(-DMAGI2NORM_TORCH_DIR="$MAGI2NORM_TORCH_DIR"); fi
bash scripts/build.sh -DMAGI2NORM_BUILD_BENCHMARKS=ON -DMAGI2NORM_BUILD_TESTS=OFF \
  -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_CUDA=OFF -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_TUNING="$tuning" "${torch_dir[@]}"

out="$BUILD_DIR/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
args=(--benchmark_min_time="$min_time" --benchmark_out="$out/benchmarks.json" --benchmark_out_format=json)
if [ -n "$filter" ]; then args+=(--benchmark_filter="$filter"); fi
"$BUILD_DIR/benchmarks/magi2norm_bench" "${args[@]}" "${extra[@]}"
.venv/bin/python scripts/bench_report.py "$out/benchmarks.json"
# The record's shipped wins, each against the untuned variant in the same process.
if [ -n "$tuning" ]; then
  .venv/bin/python benchmarks/tuning_check.py --record "$tuning" --bench "$BUILD_DIR/benchmarks/magi2norm_bench" \
    --output "$out/tuning_check.md"
fi
