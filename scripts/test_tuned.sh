#!/usr/bin/env bash
# Builds from tuning records (-DMAGI2NORM_TUNING) and runs the `tuning_build` tests on each:
# - a record the tuner writes here in a short run (two cases, 30 s): the configure takes it and
#   the library builds from it, with whatever classes it found significant;
# - the CPU, OpenCL and CUDA records the test suite configures with one class each
#   (tests/tuning_build), the CPU one with this machine's identity: their class variants are
#   built, calls within the CPU and OpenCL classes' bounds run them (PoCL), and the CUDA class's
#   PTX assembles (label ptx).
# scripts/test.sh makes the tuner and those records first.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
build=${BUILD_DIR:-build}
halide_dir=$(.venv/bin/python -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64", "cmake", "Halide"))')

tuned_build() {  # folder, records, GPU backends ON|OFF, test labels
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR="$halide_dir" -DMAGI2NORM_TUNING="$2" \
    -DMAGI2NORM_GENERATOR_CACHE="$PWD/.cache/generated" \
    -DMAGI2NORM_BUILD_TESTS=ON -DMAGI2NORM_OPENCL="$3" -DMAGI2NORM_CUDA="$3" -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_BUILD_TUNER=OFF
  cmake --build "$1" --target magi2norm magi2norm_class_selection_tests
  ctest --test-dir "$1" -L "$4" --output-on-failure --no-tests=error -j 2
}

smoke=$PWD/${TUNED_BUILD_DIR:-build-tuned}-smoke
mkdir -p "$smoke"
rm -f "$smoke/record.json" "$smoke/record.search.json"
"$build/tuning/magi2-tune" --budget 30 --tokens 16 --norms qk_norm --record "$smoke/record.json" --cache "$smoke/cache"
tuned_build "$smoke" "$smoke/record.json" OFF tuning_build
records=$PWD/$build/tests/tuning_build/records
tuned_build "${TUNED_BUILD_DIR:-build-tuned}" "$records/matching.json;$records/opencl_matching.json;$records/cuda_matching.json" \
  ON "tuning_build|ptx"
# The CUDA class's PTX is among those assembled.
ctest --test-dir "${TUNED_BUILD_DIR:-build-tuned}" -N -R "ptxas_.*cuda86_t[0-9]+_f32_f32" | grep -q "Total Tests: [1-9]"
