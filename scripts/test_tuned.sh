#!/usr/bin/env bash
# A build that takes a tuning record (-DMAGI2NORM_TUNING): the configure's check passes, the
# record's class variant families are built beside the untuned ones, and calls within a class's
# bounds run them (ctest label tuning_build). The record is the one the test suite configures
# with this machine's identity (tests/tuning_build); scripts/test.sh makes it first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
record="$PWD/${BUILD_DIR:-build}/tests/tuning_build/records/matching.json"
tuned=${TUNED_BUILD_DIR:-build-tuned}
halide_dir=$(.venv/bin/python -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64", "cmake", "Halide"))')
cmake -S . -B "$tuned" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR="$halide_dir" -DMAGI2NORM_TUNING="$record" \
  -DMAGI2NORM_BUILD_TESTS=ON -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_CUDA=OFF -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_BUILD_TUNER=OFF
cmake --build "$tuned" --target magi2norm_class_selection_tests
ctest --test-dir "$tuned" -L tuning_build --output-on-failure --no-tests=error -j 2
