#!/usr/bin/env bash
# Builds from tuning records (-DMAGI2NORM_TUNING) and runs the `tuning_build` tests on each:
# - a record the tuner writes here in a short run (two cases, 30 s): the configure takes it and
#   the library builds from it, with whatever classes it found significant;
# - the record the test suite configures with this machine's identity and one class
#   (tests/tuning_build): its class variants are built and calls within its bounds run them.
# scripts/test.sh makes the tuner and that record first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
build=${BUILD_DIR:-build}
halide_dir=$(.venv/bin/python -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64", "cmake", "Halide"))')

tuned_build() {  # folder, record
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR="$halide_dir" -DMAGI2NORM_TUNING="$2" \
    -DMAGI2NORM_BUILD_TESTS=ON -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_CUDA=OFF -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_BUILD_TUNER=OFF
  cmake --build "$1" --target magi2norm magi2norm_class_selection_tests
  ctest --test-dir "$1" -L tuning_build --output-on-failure --no-tests=error -j 2
}

smoke=$PWD/${TUNED_BUILD_DIR:-build-tuned}-smoke
mkdir -p "$smoke"
rm -f "$smoke/record.json"
"$build/tuning/magi2-tune" --budget 30 --tokens 16 --norms qk_norm --record "$smoke/record.json" --cache "$smoke/cache"
tuned_build "$smoke" "$smoke/record.json"
tuned_build "${TUNED_BUILD_DIR:-build-tuned}" "$PWD/$build/tests/tuning_build/records/matching.json"
