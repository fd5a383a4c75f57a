#!/usr/bin/env bash
# Builds the Python package's wheel into dist/: the library built and installed as
# scripts/python_install.sh does, then `pip wheel ./python` against it. The wheel holds
# libmagi2norm_torch.so with every variant inside, for any Python 3 and any torch >= 2.10 (tag
# py3-none-linux_x86_64): it installs where there is no compiler, Halide or LLVM. Prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python_install.sh "$@" >&2
prefix="$PWD/${BUILD_DIR:-build}/prefix"
rm -rf dist
.venv/bin/pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -C "cmake.define.CMAKE_PREFIX_PATH=$prefix" -w dist ./python >&2
ls "$PWD"/dist/magi2norm-*.whl
