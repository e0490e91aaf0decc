#!/usr/bin/env bash
# replication.mode speculative and sync, each with replication.point plan and input, and writes
# (speculative), give the same final state for the same client input (one connection, fixed seed),
# and all equal qrstore-bench's in-process run of the same sequence: the distributed engine is the
# single-node engine, replicated.
source "$(dirname "$0")/lib.sh"
workload=("ycsb:" "  records: 10000" "  ops_per_txn: 8" "  dep_ratio: 0.2" "  abort_ratio: 0.1" "batch:" "  txns: 500" "  timeout_ms: 5")
# (replication.point writes replicates execution's result: speculative only)
for run in plan-speculative plan-sync input-speculative input-sync writes-speculative; do
  point="${run%-*}"
  mode="${run#*-}"
  qr_config "$QR_TMP/$run.yaml" raft 2 "${workload[@]}"
  cfg="$QR_TMP/$run.yaml"
  qr_up "$cfg" --replication.mode="$mode" --replication.point="$point"
  qr_client "$cfg" --txns 8000 --connections 1 --outstanding 700 --seed 21 --json >"$QR_TMP/$run.out" ||
    fail "client failed ($run): $(tail -5 "$QR_TMP/$run.out")"
  [[ "$(json_field "$QR_TMP/$run.out" replication_point)" == "$point" ]] || fail "$run: not replicating at $point"
  qr_down "$cfg"
  qr_same_dumps "$cfg"
  note "$run: $(json_field "$QR_TMP/$run.out" committed) committed"
done
for run in plan-sync input-speculative input-sync writes-speculative; do
  cmp "$(qr_dump_dir "$QR_TMP/plan-speculative.yaml")/n0.tsv" "$(qr_dump_dir "$QR_TMP/$run.yaml")/n0.tsv" ||
    fail "plan-speculative and $run ended in different states"
done
note "speculative and sync, replicating plans, inputs or writes: the same state"
"$QRSTORE_BIN/qrstore-bench" --txns 8000 --seed 21 --ycsb.records=10000 --ycsb.ops_per_txn=8 --ycsb.dep_ratio=0.2 \
  --ycsb.abort_ratio=0.1 --batch.txns=500 --dump-state "$QR_TMP/bench.tsv" >/dev/null 2>&1 || fail "qrstore-bench failed"
cmp "$QR_TMP/bench.tsv" "$(qr_dump_dir "$QR_TMP/plan-sync.yaml")/n0.tsv" || fail "the cluster's state differs from qrstore-bench's"
note "and qrstore-bench in-process reaches the same state"
echo PASS
