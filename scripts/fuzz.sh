#!/usr/bin/env bash
# Runs each fuzz target of tests/fuzz (libFuzzer, in the ASan + UBSan build of
# scripts/test_asan.sh, built here if need be) for FUZZ_SECONDS (default 300) from its seed
# corpus, keeping what it finds in $ASAN_BUILD_DIR/fuzz/<target>/corpus across runs, and prints
# per target its executions, final coverage (cov: edges, ft: features) and corpus size. A crash
# stops that target and fails the script; its input is written to $ASAN_BUILD_DIR/fuzz/<target>/
# (crash-<sha1>): fix it and keep it in tests/fuzz/regressions/<target>/, which the `fuzz` tests
# replay. CI runs it with FUZZ_SECONDS=20 on all but mhc_logits (.ci/run). Targets: FUZZ_TARGETS
# (default: all five).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitize_env.sh
mkdir -p "$ASAN_BUILD_DIR"
BUILD_DIR=$ASAN_BUILD_DIR bash scripts/build.sh "${ASAN_CONFIG[@]}" >"$ASAN_BUILD_DIR/fuzz_build.log" 2>&1 ||
  { tail -40 "$ASAN_BUILD_DIR/fuzz_build.log"; exit 1; }
seconds=${FUZZ_SECONDS:-300}
status=0
printf '%-12s %12s %8s %8s %8s %10s %s\n' target executions exec/s cov ft corpus crashes
for target in ${FUZZ_TARGETS:-safetensors cli call backward mhc_logits}; do
  work=$ASAN_BUILD_DIR/fuzz/$target
  mkdir -p "$work/corpus"
  log=$work/last_run.log
  # -close_fd_mask=3: the targets' own output (the CLI's messages) stays out of the log.
  failed=0
  if ! "$ASAN_BUILD_DIR/tests/fuzz/magi2norm_fuzz_$target" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
       -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$work/" \
       "$work/corpus" "tests/fuzz/corpus/$target" "tests/fuzz/regressions/$target" >"$log" 2>&1; then
    failed=1
    status=1
  fi
  done_line=$(grep -E '^#[0-9]+' "$log" | tail -1)
  stat() { sed -n "s/^stat::$1: *//p" "$log"; }
  printf '%-12s %12s %8s %8s %8s %10s %s\n' "$target" "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" \
    "$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")" "$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")" \
    "$(find "$work/corpus" -type f | wc -l)" "$(find "$work" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \) | wc -l)"
  if [ "$failed" -ne 0 ]; then tail -40 "$log"; fi
done
exit $status
