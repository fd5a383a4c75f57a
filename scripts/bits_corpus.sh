#!/usr/bin/env bash
# The same-bits corpus, larger than the tests' slice: the bits recorder's fixed calls and N random
# ones (default 600) on every target this machine has (each CPU ISA forced, OpenCL), each
# target's digests compared with the widest CPU ISA's. Prints the counts; fails on any
# difference. Needs a build (scripts/build.sh).
#   bash scripts/bits_corpus.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
bits="${BUILD_DIR:-build}/tests/bits/magi2norm_bits"
count="${1:-600}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
"$bits" print --target avx512_bf16 --random "$count" > "$out/avx512_bf16.txt"
echo "avx512_bf16: $(wc -l < "$out/avx512_bf16.txt") calls (the baseline)"
for target in avx512 avx2 sse41 opencl; do
  "$bits" print --target "$target" --random "$count" > "$out/$target.txt" || failed=1
  if grep -q '^SKIPPED' "$out/$target.txt"; then
    echo "$target: $(cat "$out/$target.txt")"
    continue
  fi
  differ=$(diff "$out/avx512_bf16.txt" "$out/$target.txt" | grep -c '^>' || true)
  echo "$target: $(wc -l < "$out/$target.txt") calls, $differ differ"
  [ "$differ" -eq 0 ] || { failed=1; diff "$out/avx512_bf16.txt" "$out/$target.txt" | head -20; }
done
exit "$failed"
