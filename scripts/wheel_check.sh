#!/usr/bin/env bash
# Installs the package's wheel (scripts/python_wheel.sh) into a fresh virtual environment with
# torch from PyPI and runs the package's tests there, from outside the source tree, but those
# that compile C++ (inductor, AOTInductor): what a user without a compiler gets. Lists the
# shared libraries the wheel's library needs.
#   scripts/wheel_check.sh [TORCH_VERSION ...]   (default: python/requirements.txt's torch)
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(bash scripts/python_wheel.sh | tail -n 1)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("$(sed -n 's/^torch==//p' python/requirements.txt)")
python=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
for version in "${versions[@]}"; do
  venv="$PWD/${BUILD_DIR:-build}/wheel-venv-$version"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "torch==$version" "$wheel" \
    "$(grep '^pytest==' python/requirements.txt)" "$(grep '^numpy==' python/requirements.txt)"
  library=$("$venv/bin/python" -c 'import magi2norm; print(magi2norm.library_path)')
  echo "wheel_check: torch $version, $(basename "$wheel"); $library needs:"
  readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/  \1/p'
  (cd "$venv" && "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not compiler" "$OLDPWD/python/tests" | tail -n 3)
done
