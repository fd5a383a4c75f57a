#!/usr/bin/env bash
# The backward's long checks, beyond the slices ctest runs: the randomized differential test's
# 10,000 cases (tests/backward/backward_random_test.cpp; ctest runs its first 300) and ModelB2 at
# T = 65536 (up to 9.6 GB; ctest runs its first 2048 tokens). Prints each one's counts and worst
# errors; fails on any failure. Needs a build with tests (scripts/test.sh or scripts/build.sh
# -DMAGI2NORM_BUILD_TESTS=ON).
#   bash scripts/backward_long.sh [CASES]
set -euo pipefail
cd "$(dirname "$0")/.."
tests="${BUILD_DIR:-build}/tests/backward"
MAGI2NORM_BACKWARD_RANDOM_CASES="${1:-10000}" "$tests/magi2norm_backward_random_tests"
MAGI2NORM_BACKWARD_LARGE=1 "$tests/magi2norm_backward_large_test"
