#!/usr/bin/env bash
# Installs everything the build needs that is not already here:
#   - Debian packages (compiler toolchain, GoogleTest, Google Benchmark, JSON, OpenCL on the CPU,
#     and clang 15 with its sanitizer and libFuzzer runtimes and llvm-symbolizer for the
#     sanitizer and fuzzing builds: clang 15 is bookworm's first with x86 _Float16, which the
#     test reference uses);
#   - Halide (pinned wheel from PyPI, a full C++ SDK with its LLVM), a recent CMake (Halide's CMake
#     package needs CMake >= 3.28) and llvmlite (compiles the streaming-store variants,
#     cmake/ir_steps.py), into the project-local virtual environment .venv/.
# Idempotent: a second run installs nothing and takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

HALIDE_VERSION=21.0.0
CMAKE_VERSION=4.4.5
LLVMLITE_VERSION=0.50.0
DEB_PACKAGES=(build-essential ninja-build python3-venv googletest libgtest-dev libbenchmark-dev
              nlohmann-json3-dev pocl-opencl-icd ocl-icd-opencl-dev libdlpack-dev pkg-config
              clang-15 libclang-common-15-dev llvm-15)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Root installs directly (CI); anyone else through sudo.
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then as_root=(sudo --preserve-env=DEBIAN_FRONTEND); fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
want="halide==${HALIDE_VERSION} cmake==${CMAKE_VERSION} llvmlite==${LLVMLITE_VERSION}"
if ! .venv/bin/python - $want <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if all(version(n) == v for n, v in (a.split("==") for a in sys.argv[1:])) else 1)
PYEOF
then
  echo "setup: installing ${want} into .venv"
  .venv/bin/pip install -q --disable-pip-version-check $want
fi
