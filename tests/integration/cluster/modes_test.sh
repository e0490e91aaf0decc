#!/usr/bin/env bash
# replication.mode speculative and sync give the same final state for the same client input (one
# connection, fixed seed), and both equal qrstore-bench's in-process run of the same sequence:
# the distributed engine is the single-node engine, replicated.
source "$(dirname "$0")/lib.sh"
workload=("ycsb:" "  records: 10000" "  ops_per_txn: 8" "  dep_ratio: 0.2" "  abort_ratio: 0.1" "batch:" "  txns: 500" "  timeout_ms: 5")
for mode in speculative sync; do
  qr_config "$QR_TMP/$mode.yaml" raft 2 "${workload[@]}"
  cfg="$QR_TMP/$mode.yaml"
  qr_up "$cfg" --replication.mode="$mode"
  qr_client "$cfg" --txns 8000 --connections 1 --outstanding 700 --seed 21 --json >"$QR_TMP/$mode.out" ||
    fail "client failed ($mode): $(tail -5 "$QR_TMP/$mode.out")"
  qr_down "$cfg"
  qr_same_dumps "$cfg"
  note "$mode: $(json_field "$QR_TMP/$mode.out" committed) committed"
done
cmp "$(qr_dump_dir "$QR_TMP/speculative.yaml")/n0.tsv" "$(qr_dump_dir "$QR_TMP/sync.yaml")/n0.tsv" ||
  fail "speculative and sync ended in different states"
note "speculative and sync: the same state"
"$QRSTORE_BIN/qrstore-bench" --txns 8000 --seed 21 --ycsb.records=10000 --ycsb.ops_per_txn=8 --ycsb.dep_ratio=0.2 \
  --ycsb.abort_ratio=0.1 --batch.txns=500 --dump-state "$QR_TMP/bench.tsv" >/dev/null 2>&1 || fail "qrstore-bench failed"
cmp "$QR_TMP/bench.tsv" "$(qr_dump_dir "$QR_TMP/sync.yaml")/n0.tsv" || fail "the cluster's state differs from qrstore-bench's"
note "and qrstore-bench in-process reaches the same state"
echo PASS
