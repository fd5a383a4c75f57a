#!/usr/bin/env bash
# Installs the Python package into .venv: the C++ build (scripts/build.sh, with what it installs),
# torch and the package's build tools from PyPI (python/requirements.txt), the library installed
# into $BUILD_DIR/prefix, and `pip install ./python` built against it (no Halide needed there).
# Extra arguments go to the C++ configure step. Idempotent; a second run rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh "$@"
if ! .venv/bin/python - python/requirements.txt <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
pins = [l.split("==") for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")]
sys.exit(0 if all(version(n) == v.strip() for n, v in pins) else 1)
PYEOF
then
  echo "python_install: installing python/requirements.txt into .venv (torch: a few minutes)"
  .venv/bin/pip install -q --disable-pip-version-check -r python/requirements.txt
fi
build_dir=${BUILD_DIR:-build}
prefix="$PWD/$build_dir/prefix"
.venv/bin/cmake --install "$build_dir" --prefix "$prefix" >/dev/null
.venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  -C "cmake.define.CMAKE_PREFIX_PATH=$prefix" ./python
