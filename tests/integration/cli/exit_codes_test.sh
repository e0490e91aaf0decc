#!/usr/bin/env bash
# One exit code for bad input across all programs (docs/reliability.md): loops over every program in
# <build>/bin and checks that --help exits 0 with a usage line, an unknown flag exits 2 naming
# it, an unknown config key (--nosuch.key=1) exits 2 naming it, and, for programs with a
# --config flag, a missing config file exits 2 naming it. Test binaries (*_test, Catch2's own
# conventions) and the fuzz targets (fuzz_*: tests/fuzz, libFuzzer's conventions) are skipped
# and listed. A new program needs no change here unless it needs arguments to reach its config:
# then add them to base_args below.
# Usage: exit_codes_test.sh <build>/bin   (run from the source root: the configs are read)
set -u
BIN=${1:?usage: exit_codes_test.sh <build>/bin}
TMP=$(mktemp -d /tmp/qrstore-exit-codes.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Arguments that take each program past its own flag checks to the config stage.
declare -A base_args=(
  [qrstore-bench]="--txns 1"
  [qrstore-checkpoint]="--config configs/cluster-raft.yaml --node n0"
  [qrstore-client]="--config configs/cluster-raft.yaml --txns 1"
  [qrstore-server]="--config configs/cluster-raft.yaml --node n0"
  [qrstore-repl-bench]="--backend none"
)

failures=0
checks=0
fail() { echo "FAIL: $*"; echo "--- stderr:"; head -5 "$TMP/err"; failures=$((failures + 1)); }
# expect PROGRAM WANT_RC TEXT ARGS...: runs it (10 s at most), checks the status and that
# stdout+stderr contain TEXT.
expect() {
  local prog=$1 want=$2 text=$3; shift 3
  timeout 10 "$BIN/$prog" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne "$want" ]; then fail "$prog $*: exit $rc, expected $want"; return; fi
  if ! grep -qF -- "$text" "$TMP/out" "$TMP/err"; then fail "$prog $*: no '$text' in its output"; return; fi
}
skipped=()
programs=0
for path in "$BIN"/*; do
  prog=$(basename "$path")
  [ -f "$path" ] && [ -x "$path" ] || continue
  case "$prog" in
    *_test|fuzz_*) skipped+=("$prog"); continue ;;
  esac
  programs=$((programs + 1))
  read -r -a base <<<"${base_args[$prog]:-}"
  echo "== $prog"
  expect "$prog" 0 "usage: $prog" --help
  expect "$prog" 2 "--no-such-flag" --no-such-flag
  expect "$prog" 2 "nosuch.key" "${base[@]+"${base[@]}"}" --nosuch.key=1
  if "$BIN/$prog" --help 2>/dev/null | grep -q -- '^  --config '; then
    args=()
    skip_next=0
    for a in "${base[@]+"${base[@]}"}"; do  # base args without their --config FILE
      if [ "$skip_next" = 1 ]; then skip_next=0; continue; fi
      if [ "$a" = "--config" ]; then skip_next=1; continue; fi
      args+=("$a")
    done
    expect "$prog" 2 "$TMP/missing.yaml" "${args[@]+"${args[@]}"}" --config "$TMP/missing.yaml"
  fi
done
[ "$programs" -ge 4 ] || fail "only $programs programs found in $BIN (build first)"
echo "skipped (test binaries and fuzz targets): ${skipped[*]}"
if [ "$failures" -ne 0 ]; then echo "$failures of $checks checks failed"; exit 1; fi
echo "PASS: $checks checks over $programs programs"
