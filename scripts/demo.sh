#!/usr/bin/env bash
# The main job on its built-in default: install, build, then run the MAGI-2 Preview norms on
# synthetic data, check sampled rows against the plain reference, and print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DMAGI2NORM_BUILD_TESTS=OFF -DMAGI2NORM_BUILD_BENCHMARKS=OFF >/dev/null
"${BUILD_DIR:-build}/tools/magi2-norm" demo "$@"
