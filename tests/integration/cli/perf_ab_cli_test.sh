#!/usr/bin/env bash
# scripts/perf-ab.sh: --help exits 0; bad input (no commit, a name that is no commit, an unknown
# benchmark or flag, a pair count that is no positive integer) exits 2 naming it, before any
# build.
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scripts/perf-ab.sh --help | grep -q 'interleaved pairs' || { echo "FAIL: --help"; exit 1; }
expect2() {
  local want=$1; shift
  set +e
  scripts/perf-ab.sh "$@" --out "$out" > "$out/stdout" 2> "$out/stderr"
  local rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "FAIL: perf-ab.sh $* exited $rc, not 2"; cat "$out/stderr"; exit 1; }
  grep -q -- "$want" "$out/stderr" || { echo "FAIL: perf-ab.sh $*: no '$want' in"; cat "$out/stderr"; exit 1; }
  [ -z "$(ls "$out" | grep -v -e stdout -e stderr)" ] || { echo "FAIL: perf-ab.sh $* built something"; exit 1; }
}
expect2 "give BASE" 
expect2 "no-such-rev: not a commit" no-such-rev
expect2 "--bench nope" HEAD --bench nope
expect2 "--pairs 0" HEAD --pairs 0
expect2 "--seconds x" HEAD --seconds x
expect2 "unknown flag --frobnicate" HEAD --frobnicate
expect2 "--config nope.yaml: no such file" HEAD --bench cluster --config nope.yaml
expect2 "--config goes with --bench cluster" HEAD --config configs/cluster-2x3-raft.yaml
echo PASS
