#!/usr/bin/env bash
# Install, build and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests ON explicitly: demo.sh configures the same build without them, and CMake keeps that. So
# are the targets the tests cover (OpenCL on PoCL, CUDA's PTX, arm64, streaming stores): a build
# folder configured by another script or by hand keeps whatever it was given.
bash scripts/build.sh -DMAGI2NORM_BUILD_TESTS=ON -DMAGI2NORM_BUILD_BENCHMARKS=OFF -DMAGI2NORM_OPENCL=ON \
  -DMAGI2NORM_CUDA=ON -DMAGI2NORM_ARM64=ON -DMAGI2NORM_STREAMING_STORES=ON
# The ctest of the CMake that configured the build (.venv): gtest's test discovery needs it.
export PATH="$PWD/.venv/bin:$PATH"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --no-tests=error -j 2 "$@"
# The Python package, installed against this build (scripts/python_install.sh), and its tests.
bash scripts/python_install.sh
.venv/bin/python -m pytest -q python/tests
