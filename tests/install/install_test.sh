#!/usr/bin/env bash
# The installed package as a host sees it: installs the build tree into a fresh prefix, then,
# in an environment that holds nothing but that prefix (no Halide, no LLVM, no CMAKE_PREFIX_PATH,
# no user package registry), builds and runs examples/host with find_package and
# examples/pkgconfig with the pkg-config flags alone. The host's checksum must equal the one the
# same program prints when built in the build tree.
#
# usage: install_test.sh BUILD_DIR EXAMPLES_DIR CMAKE GENERATOR MAKE_PROGRAM CXX PKG_CONFIG LIBDIR BUILD_TREE_EXAMPLE
set -euo pipefail
build=$1 examples=$2 cmake=$3 generator=$4 make_program=$5 cxx=$6 pkg_config=$7 libdir=$8 build_tree_example=$9

work=$(mktemp -d "${TMPDIR:-/tmp}/magi2norm-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
mkdir "$work/home"

fail() { echo "FAIL: $*" >&2; exit 1; }
# Runs a command in the clean environment, its output kept in $work/<name>.log and shown on failure.
clean() {
  local name=$1; shift
  echo "== $name"
  env -i PATH=/usr/bin:/bin HOME="$work/home" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name"; }
}

clean install "$cmake" --install "$build" --prefix "$prefix"
if grep -rnE '#[[:space:]]*include[[:space:]]*[<"](Halide|nlohmann)' "$prefix/include"; then
  fail "an installed header includes Halide or nlohmann"
fi

clean host-configure "$cmake" -S "$examples/host" -B "$work/host" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
clean host-build "$cmake" --build "$work/host"
if ldd "$work/host/host_example" | grep -iE 'halide|llvm'; then fail "the host loads Halide or LLVM at run time"; fi
clean host-run "$work/host/host_example" "$work/host.safetensors"
cat "$work/host-run.log"
got=$(sed -n 's/^checksum //p' "$work/host-run.log")
want=$("$build_tree_example" "$work/build-tree.safetensors" | sed -n 's/^checksum //p')
[ -n "$want" ] && [ "$got" = "$want" ] || fail "installed host checksum '$got', build tree '$want'"

clean pkgconfig-build env PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" sh -c \
  '"$0" "$1" $("$2" --cflags --libs magi2norm) -o "$3"' \
  "$cxx" "$examples/pkgconfig/pkgconfig_example.cpp" "$pkg_config" "$work/pkgconfig_example"
clean pkgconfig-run "$work/pkgconfig_example"
cat "$work/pkgconfig-run.log"
echo "PASS: installed package builds and runs both hosts (checksum $got)"
