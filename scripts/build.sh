#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures with the project's Halide and CMake
# from .venv, and builds with ninja. Extra arguments go to the CMake configure step.
# BUILD_DIR (default: build) selects the build folder. Every build folder shares the generator's
# outputs cached in .cache/generated (cmake/Magi2normGeneratorCache.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
halide_dir=$(.venv/bin/python -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "lib64", "cmake", "Halide"))')
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHalide_DIR="$halide_dir" \
  -DMAGI2NORM_GENERATOR_CACHE="$PWD/.cache/generated" "$@"
cmake --build "$build_dir"
