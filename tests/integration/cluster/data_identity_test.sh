#!/usr/bin/env bash
# A durable cluster's data knows what made it (cluster/recovery/data_identity.h, cluster.sh's made-with):
# a restart with another config is refused instead of becoming another database. A group of
# three, checkpoints and (raft) the disk log below the run folder, made with overrides
# (ycsb.records=12000 instead of the config's 20000):
#   1. load it, `down`;
#   2. `up` with no override: cluster.sh uses the ones the data was made with and says so; every
#      node restores its checkpoint of 12000 records; load it again, `down`: exactly once over
#      both runs (the update counters sum to every write op both clients saw committed), the
#      dumps identical;
#   3. `up --ycsb.records=5000`: refused (exit 2) naming the override and the data's;
#   4. a node started by hand without the overrides: refused (exit 2) naming ycsb.records, the
#      data's value and the config's, and the two ways on;
#   5. (raft) n0's checkpoints deleted, its log compacted past batch 0: it refuses to start from
#      the initial table (exit 1) naming its log, instead of serving a state that skipped
#      batches; the others, whose data is whole, still start and serve.
# Usage: data_identity_test.sh raft|zookeeper
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
cfg="$QR_TMP/ident.yaml"
qr_config "$cfg" "$backend" 3 "ycsb:" "  records: 20000" "  ops_per_txn: 8" "batch:" "  txns: 2000" "  timeout_ms: 5"
run="$QRSTORE_RUN_DIR/ident"
# A checkpoint every 5 batches: the runs below make 25 batches at least (50,000 txns of at most
# 2,000), however the batches are cut. With every 40 a slow (sanitizer) build made 34 batches in
# all, no checkpoint but the ones at the stops, so nothing let the log be compacted and step 5's
# premise did not hold.
made=(--ycsb.records=12000 --server.checkpoint_dir=data/checkpoints --server.checkpoint_every_batches=5)
if [[ "$backend" == raft ]]; then
  # A small log budget: the log is compacted past each checkpoint (step 5 needs that; the two
  # runs log about 2.7 MB).
  made+=(--replication.raft.log=disk --replication.raft.dir=data/raft
    --replication.raft.max_log_bytes=1048576 --replication.raft.segment_bytes=262144
    --replication.raft.max_lag_bytes=262144 --replication.raft.max_uncommitted_bytes=262144
    --replication.max_payload_bytes=262144)
else
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && made+=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  made+=(--replication.zookeeper.retain_bytes=134217728)
fi
qr_up "$cfg" --fresh "${made[@]}" >"$QR_TMP/up1.out" 2>&1 || fail "up 1: $(tail -20 "$QR_TMP/up1.out")"
grep -q "records 12000" "$QR_TMP/up1.out" || fail "up 1 did not load 12000 records: $(cat "$QR_TMP/up1.out")"
qr_client "$cfg" --txns 30000 --connections 2 --seed 31 --json >"$QR_TMP/c1.out" 2>"$QR_TMP/c1.err" ||
  fail "client 1: $(tail -5 "$QR_TMP/c1.err")"
[[ "$(json_field "$QR_TMP/c1.out" in_doubt)" == 0 ]] || fail "client 1 left txns in doubt"
qr_down "$cfg" >"$QR_TMP/down1.out" 2>&1 || fail "down 1 was not clean: $(cat "$QR_TMP/down1.out")"
for n in n0 n1 n2; do
  [[ -f "$run/data/checkpoints/$n/IDENTITY" ]] || fail "$n recorded no data identity"
done
grep -qx "ycsb.records=12000" "$run/data/checkpoints/n0/IDENTITY" || fail "n0's identity: $(cat "$run/data/checkpoints/n0/IDENTITY")"
note "every node recorded its data's identity: $(tr '\n' ' ' <"$run/data/checkpoints/n0/IDENTITY" | cut -c1-160)"

# 2. No override: the saved ones.
qr_up "$cfg" >"$QR_TMP/up2.out" 2>&1 || fail "up 2 (no override): $(tail -20 "$QR_TMP/up2.out")"
grep -q "data was made with .*--ycsb.records=12000.*: using them" "$QR_TMP/up2.out" ||
  fail "up 2 did not say it uses the data's overrides: $(cat "$QR_TMP/up2.out")"
grep -q "records 12000" "$QR_TMP/up2.out" || fail "up 2 did not load 12000 records: $(cat "$QR_TMP/up2.out")"
for n in n0 n1 n2; do
  grep -q "restored from" "$run/$n.log" || fail "$n did not restore its checkpoint: $(grep -h checkpoint "$run/$n.log" | tail -3)"
  ! grep -q "refused checkpoint" "$run/$n.log" || fail "$n refused a checkpoint: $(grep -h "refused checkpoint" "$run/$n.log" | head -1)"
done
note "up with no override: $(grep -h "using them" "$QR_TMP/up2.out" | cut -c1-160)"
qr_client "$cfg" --txns 20000 --connections 2 --seed 32 --json >"$QR_TMP/c2.out" 2>"$QR_TMP/c2.err" ||
  fail "client 2: $(tail -5 "$QR_TMP/c2.err")"
[[ "$(json_field "$QR_TMP/c2.out" in_doubt)" == 0 ]] || fail "client 2 left txns in doubt"
qr_down "$cfg" >"$QR_TMP/down2.out" 2>&1 || fail "down 2 was not clean: $(cat "$QR_TMP/down2.out")"
qr_same_dumps "$cfg"
dir="$(qr_dump_dir "$cfg")"
[[ "$(wc -l <"$dir/n0.tsv")" -le 12000 ]] || fail "the dump holds more than 12000 records"
total="$(dump_sum "$dir/n0.tsv")"
acked=$(($(json_field "$QR_TMP/c1.out" update_ops_committed) + $(json_field "$QR_TMP/c2.out" update_ops_committed)))
((total == acked)) || fail "the update counters sum to $total, the clients saw $acked committed (lost or run twice)"
note "exactly once over both runs: the counters sum to $total, what the clients saw committed"

# 3. Another value for an override the data was made with.
if qr_up "$cfg" --ycsb.records=5000 >"$QR_TMP/up3.out" 2>&1; then fail "up with --ycsb.records=5000 was not refused"; fi
code=0; qr_up "$cfg" --ycsb.records=5000 >/dev/null 2>&1 || code=$?
((code == 2)) || fail "up with a contradicting override exited $code, not 2"
grep -q -- "--ycsb.records=5000 (the data: --ycsb.records=12000)" "$QR_TMP/up3.out" ||
  fail "the refusal does not name both values: $(cat "$QR_TMP/up3.out")"
grep -q -- "--fresh" "$QR_TMP/up3.out" || fail "the refusal does not say --fresh"
note "refused: $(cut -c1-200 "$QR_TMP/up3.out")"

# 4. A node started by hand with the config alone (the overrides forgotten).
data_keys=(--server.checkpoint_dir="$run/data/checkpoints")
[[ "$backend" == raft ]] && data_keys+=(--replication.raft.log=disk --replication.raft.dir="$run/data/raft")
code=0
"$QRSTORE_BIN/qrstore-server" --config "$cfg" --node n1 "${data_keys[@]}" >/dev/null 2>"$QR_TMP/n1.err" || code=$?
((code == 2)) || fail "n1 started with another table's config exited $code, not 2: $(tail -3 "$QR_TMP/n1.err")"
grep -q "ycsb.records: 12000 in the data, 20000 in the config" "$QR_TMP/n1.err" ||
  fail "n1's refusal does not name the key and both values: $(tail -5 "$QR_TMP/n1.err")"
grep -q -- "--ycsb.records=12000" "$QR_TMP/n1.err" && grep -q -- "--fresh" "$QR_TMP/n1.err" ||
  fail "n1's refusal does not give both ways on: $(tail -5 "$QR_TMP/n1.err")"
note "n1 by hand: $(grep -h "in the data" "$QR_TMP/n1.err" | head -1)"

# 5. raft: a node whose checkpoints are gone and whose log no longer starts at batch 0.
if [[ "$backend" == raft ]]; then
  rm -f "$run"/data/checkpoints/n0/checkpoint-*.qrc
  code=0
  qr_up "$cfg" >"$QR_TMP/up5.out" 2>&1 || code=$?
  # The premise: n0's log no longer starts at its first entry (raft's "restored ... log [first,
  # last]" line of this start).
  first="$(grep -o "restored term [0-9]* vote [0-9]* commit [0-9]* log \[[0-9]*" "$run/n0.log" | tail -1 | grep -o "[0-9]*$" || true)"
  [[ -n "$first" && "$first" -gt 1 ]] ||
    fail "the test's premise failed: n0's raft log was not compacted (it starts at entry ${first:-?}): $(grep -h "restored term" "$run/n0.log" | tail -1)"
  ((code != 0)) || fail "up with n0's checkpoints gone succeeded: n0 started from the initial table"
  grep -q "no longer starts at batch 0" "$run/n0.log" || fail "n0 does not say why it refuses: $(tail -5 "$run/n0.log")"
  [[ "$(cat "$run/n0.exit" 2>/dev/null)" == 1 ]] || fail "n0 exited with $(cat "$run/n0.exit" 2>/dev/null), not 1"
  note "n0 refuses: $(grep -h "no longer starts at batch 0" "$run/n0.log" | tail -1 | cut -c1-200)"
  # n1 and n2 hold whole data: they start (the cluster.sh up above stopped waiting at n0).
  deadline=$((SECONDS + 60))
  # (the status exits 1 while n0 does not answer)
  until { qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true; } | awk '$2 == "leader" && $3 == "serving"' | grep -q .; do
    ((SECONDS < deadline)) || fail "n1 and n2 did not elect a serving leader: $(qr_client "$cfg" --status 2>&1 || true)"
    sleep 0.3
  done
  note "n1 and n2 serve without n0: $({ qr_client "$cfg" --status 2>/dev/null || true; } | awk '$2 == "leader" { print $1 " leads" }')"
  qr_down "$cfg" >"$QR_TMP/down5.out" 2>&1 || true
fi
echo PASS
