#!/usr/bin/env bash
# The main job on its built-in default: install, build, then run the MAGI-2 Preview norms on
# synthetic data, check sampled rows against the plain reference, and print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
# The install and build go to a log, shown if they fail (ninja prints compiler errors on stdout).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "demo: installing what is missing and building (a first run takes several minutes)..."
if ! bash scripts/build.sh -DMAGI2NORM_BUILD_TESTS=OFF -DMAGI2NORM_BUILD_BENCHMARKS=OFF >"$log" 2>&1; then
  cat "$log" >&2
  echo "demo: the build failed (output above)" >&2
  exit 1
fi
"${BUILD_DIR:-build}/tools/magi2-norm" demo "$@"
