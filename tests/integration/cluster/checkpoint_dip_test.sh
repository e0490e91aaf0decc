#!/usr/bin/env bash
# scripts/checkpoint-dip.sh end to end on a small raft group of three with frequent checkpoints:
# it runs, finds the checkpoints in the nodes' logs and the client's 100 ms progress, and
# measures at least one (a ratio inside/around that is a number > 0), writing events.csv and
# summary.txt. Guards the log lines the script reads (a changed format leaves it nothing).
# --from analyses the run again to the same summary; --control runs without checkpoints and
# measures windows at a fixed pace. Bad input exits 2.
source "$(dirname "$0")/lib.sh"
cfg="$QR_TMP/dip.yaml"
qr_config "$cfg" raft 3 "ycsb:" "  records: 20000" "batch:" "  txns: 2000" "  timeout_ms: 5"
out="$QR_TMP/dip"
set +e
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --seconds 10 --warmup 1 --around 0.2 --out "$out" \
  --server.checkpoint_dir="$QR_TMP/ck" --server.checkpoint_every_batches=300 >"$QR_TMP/dip.out" 2>&1
rc=$?
set -e
cat "$QR_TMP/dip.out"
((rc == 0)) || fail "checkpoint-dip.sh exited $rc"
summary="$(cat "$out/summary.txt")"
[[ "$summary" =~ ([0-9]+)\ checkpoints\ measured ]] && ((BASH_REMATCH[1] >= 1)) ||
  fail "no checkpoint measured: $summary"
python3 - "$out/events.csv" <<'PY' || fail "events.csv does not hold measured ratios"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
measured = [float(r["ratio"]) for r in rows if r["ratio"]]
# (A single window can hold no commit at all when a loaded host stalls the group for its 0.1-0.2 s:
# a ratio of 0 is a measurement; the run as a whole must have committed around its checkpoints.)
assert measured and all(v >= 0 for v in measured) and any(v > 0 for v in measured), rows
assert all(r["role"] in ("leader", "follower", "together") and float(r["window_s"]) > 0 for r in rows), rows
print("ok - %d of %d checkpoints measured, ratios %s" % (len(measured), len(rows), measured))
PY
# --from: the same run analysed again gives the same summary.
"$QR_SRC/scripts/checkpoint-dip.sh" --from "$out" --around 0.2 >/dev/null 2>&1 || fail "--from $out failed"
[[ "$(cat "$out/summary.txt")" == "$summary" ]] || fail "--from gave another summary: $(cat "$out/summary.txt")"
echo "ok - --from reproduces the summary"
# --control: no checkpoints, windows at a fixed pace, measured the same way.
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --seconds 6 --warmup 1 --around 0.2 --out "$QR_TMP/ctl" --control 1:0.3 \
  --server.checkpoint_dir="$QR_TMP/ck2" >"$QR_TMP/ctl.out" 2>&1 || { cat "$QR_TMP/ctl.out"; fail "--control run failed"; }
grep -q "checkpoint of batch" "$QR_TMP/ctl/run"/*/*.log && fail "--control: a node wrote checkpoints"
[[ "$(cat "$QR_TMP/ctl/summary.txt")" =~ ([0-9]+)\ control\ windows ]] && ((BASH_REMATCH[1] >= 2)) ||
  fail "--control measured no windows: $(cat "$QR_TMP/ctl/summary.txt")"
echo "ok - --control: $(cat "$QR_TMP/ctl/summary.txt")"
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --control 1:2 >/dev/null 2>&1 && fail "--control 1:2 accepted"
[[ $? -eq 2 ]] || fail "--control 1:2 (a window longer than its period): exit status is not 2"
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --seconds x >/dev/null 2>&1 && fail "--seconds x accepted"
[[ $? -eq 2 ]] || fail "--seconds x: exit status is not 2"
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --out "$QR_TMP/none" >/dev/null 2>&1 && fail "a config without checkpoint_dir accepted"
echo "ok - bad input exits 2"
