#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer: the runtime, the tool and the tests built with
# clang's -fsanitize=address,undefined (the generated variant objects as they are, which no
# compiler sees), then every test labelled `asan` (the contract, runtime, C ABI, checkpoint,
# safetensors and CLI suites on the CPU variants, the backward's errors, layouts, special values
# and randomized slice, the guard-page and concurrency tests; docs/testing.md says
# why these) or `fuzz` (the fuzz targets' seeds and past crashes).
# The build folder (ASAN_BUILD_DIR, default build-asan) also holds the fuzz targets (tests/fuzz),
# so scripts/fuzz.sh runs in it. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitize_env.sh
BUILD_DIR=$ASAN_BUILD_DIR bash scripts/build.sh "${ASAN_CONFIG[@]}"
export PATH="$PWD/.venv/bin:$PATH"
ctest --test-dir "$ASAN_BUILD_DIR" -L "asan|fuzz" --output-on-failure --no-tests=error -j 2 "$@"
