#!/usr/bin/env bash
# ThreadSanitizer: the runtime and the tests built with clang's -fsanitize=thread, then every test
# labelled `tsan` (calls from several threads, forward and backward, the thread settings and the
# host's parallel loop; an executable joins by giving its tests that label). tests/tsan.supp says
# what is suppressed and why. TSAN_BUILD_DIR (default build-tsan) is the build folder; extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitize_env.sh
export BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
bash scripts/build.sh "${SANITIZE_CONFIG[@]}" -DMAGI2NORM_SANITIZE=thread -DMAGI2NORM_BUILD_TESTS=ON
export PATH="$PWD/.venv/bin:$PATH"
ctest --test-dir "$BUILD_DIR" -L tsan --output-on-failure --no-tests=error -j 2 "$@"
