#!/usr/bin/env bash
# scripts/paper-figures.sh: bad input exits 2 naming the problem before any cluster starts; then
# `--figure 13 --quick` runs real clusters (rf 1 and rf 2, speculative and sync, 3 repetitions):
# every run succeeded and carries its command, both modes are in the CSVs with 3 runs each at each
# point, the ratios are taken per repetition, Eq. (1)'s hidden share of replication is 0 for sync
# and within [0, 1] for speculative, and the figure's PNG and host record are written.
set -euo pipefail
cd "$(dirname "$0")/../../.."
: "${QRSTORE_BIN:?set QRSTORE_BIN to the bin folder of a build}"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/qrstore-paper-figures.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

expect_bad() {  # expect_bad WORDS-IN-MESSAGE ARGS...
  local want="$1"; shift
  local rc=0
  scripts/paper-figures.sh "$@" >"$tmp/bad.out" 2>&1 || rc=$?
  [[ $rc == 2 ]] || fail "paper-figures.sh $*: exit $rc, expected 2: $(cat "$tmp/bad.out")"
  grep -q -- "$want" "$tmp/bad.out" || fail "paper-figures.sh $*: no '$want' in: $(cat "$tmp/bad.out")"
}
expect_bad "figure 5 is not one this script reproduces" --figure 5
expect_bad "--reps must be a whole number >= 3" --reps 2
expect_bad "unknown argument" --figures 13
expect_bad "not found: build first" --figure 13 --build "$tmp/nowhere"
# (Into a file: grep -q closing a pipe early would fail the pipeline under pipefail.)
scripts/paper-figures.sh --help >"$tmp/help.out"
grep -q "speculative vs synchronous" "$tmp/help.out" || fail "--help does not list figure 13"
echo "-- bad input: exit 2, named"

out="$tmp/out"
scripts/paper-figures.sh --figure 13 --quick --out "$out" --build "$QRSTORE_BIN/.." >"$tmp/run.out" 2>&1 ||
  fail "the quick figure 13 failed: $(tail -20 "$tmp/run.out")"
for f in fig13-runs.csv fig13.csv fig13.md fig13.png host.txt; do
  [[ -s "$out/$f" ]] || fail "$f was not written"
done
[[ "$(head -c 8 "$out/fig13.png" | od -An -tx1 | tr -d ' ')" == 89504e470d0a1a0a ]] || fail "fig13.png is not a PNG"
grep -q "^model: " "$out/host.txt" || fail "host.txt: $(cat "$out/host.txt")"
/usr/bin/env python3 - "$out" <<'PY' || fail "the CSVs: $(cat "$out/fig13.csv")"
import csv, sys
out = sys.argv[1]
runs = list(csv.DictReader(open(out + "/fig13-runs.csv")))
assert len(runs) == 12, len(runs)
for r in runs:
    assert r["ok"] == "1" and float(r["txn_per_s"]) > 0 and float(r["p99_ms"]) > 0, r
    cfg = {"rf1": "configs/cluster-raft-rf1.yaml", "rf2": "configs/cluster-raft.yaml"}[r["x"]]
    assert "--replication.mode=" + r["series"] in r["command"] and cfg in r["command"], r
    assert r["command"].startswith("scripts/cluster.sh up "), r["command"]
    # The leader's phases and the mode it really ran (its loaded config), for Eq. (1).
    assert r["mode"] == r["series"] and r["backend"] == "raft", r
    assert float(r["repl_ms"]) > 0 and float(r["exec_ms"]) > 0, r
assert {(r["x"], r["series"]) for r in runs} == {(x, s) for x in ("rf1", "rf2") for s in ("speculative", "sync")}
# Interleaved: in each repetition both modes ran at each point, and the order alternates.
for x in ("rf1", "rf2"):
    firsts = [r["series"] for r in runs if r["x"] == x and r["order"] == "0"]
    assert firsts == ["speculative", "sync", "speculative"], (x, firsts)
summary = list(csv.DictReader(open(out + "/fig13.csv")))
assert len(summary) == 4, summary
for s in summary:
    assert s["runs"] == "3", s
    ratios = [float(v) for v in s["ratios"].split()]
    assert len(ratios) == 3, s
    hidden = float(s["median_repl_hidden"])
    if s["series"] == "speculative":
        assert ratios == [1.0, 1.0, 1.0], s
        assert 0 <= hidden <= 1, s
    else:  # the median of the per-repetition ratios of sync to speculative
        assert hidden == 0, s  # sync replicates before it executes: nothing hidden
        assert abs(float(s["ratio_to_speculative"]) - sorted(ratios)[1]) < 1e-3, s
        mine = sorted(float(r["txn_per_s"]) for r in runs if r["x"] == s["x"] and r["series"] == "sync")
        assert float(s["median_txn_per_s"]) == mine[1], (s, mine)
PY
echo "-- figure 13, quick: 12 runs, both modes at rf 1 and rf 2, ratios per repetition, PNG written"
echo PASS
