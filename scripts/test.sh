#!/usr/bin/env bash
# Install, build and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DMAGI2NORM_BUILD_BENCHMARKS=OFF
# The ctest of the CMake that configured the build (.venv): gtest's test discovery needs it.
export PATH="$PWD/.venv/bin:$PATH"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j 2 "$@"
