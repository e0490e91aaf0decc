#!/usr/bin/env bash
# scripts/checkpoint-dip.sh end to end on a small raft group of three with frequent checkpoints:
# it runs, finds the checkpoints in the nodes' logs and the client's 100 ms progress, and
# measures at least one (a ratio inside/around that is a number > 0), writing events.csv and
# summary.txt. Guards the log lines the script reads (a changed format leaves it nothing).
# Bad input exits 2.
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
assert measured and all(v > 0 for v in measured), rows
assert all(r["role"] in ("leader", "follower") and float(r["window_s"]) > 0 for r in rows), rows
print("ok - %d of %d checkpoints measured, ratios %s" % (len(measured), len(rows), measured))
PY
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --seconds x >/dev/null 2>&1 && fail "--seconds x accepted"
[[ $? -eq 2 ]] || fail "--seconds x: exit status is not 2"
"$QR_SRC/scripts/checkpoint-dip.sh" "$cfg" --out "$QR_TMP/none" >/dev/null 2>&1 && fail "a config without checkpoint_dir accepted"
echo "ok - bad input exits 2"
