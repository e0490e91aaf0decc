#!/usr/bin/env bash
# A partitioned row with followers: 3 partitions x 2 rows (rf = 1) with BACKEND (raft |
# zookeeper), processes on 127.0.0.1 (docs/partitioned-rows.md, step 3). Partition p's group is
# (p, 0) and (p, 1); follower (p, 1) replays partition p from its group's streams alone (the
# sub-slices and its leader's batch-end records: docs/partitioned-rows.md 9.4), no row peers.
#  1. YCSB, 50% multi-partition over up to 3 partitions, 20% dependent writes: the client's
#     --verify replays the planned order serially (fates, reads, each leader's partition digest),
#     every follower agrees with its leader on every batch, and its dump equals its leader's.
#  2. YCSB with logic aborts (cascades across partitions), verified batch by batch with the row's
#     cascade rule: followers agree on every batch.
#  3. Transfers with short debits, verified the same way: money is conserved over the
#     partitions' dumps, and every follower's dump equals its leader's.
#  4. On a 2 x 3 grid (rf = 2) with checkpoints, a follower killed (SIGKILL) under load and
#     started again: with no row peers it rejoins its group alone and catches up (raft: from its
#     own checkpoint; ZooKeeper, its checkpoints lost: from its leader's, fetched) while the
#     leaders' row goes on: nothing failed, every follower agrees, dumps equal. A row leader
#     holding a checkpoint refuses to start, naming --fresh.
# Usage: row_replicated_test.sh BACKEND
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
zk=()
[[ "$backend" == zookeeper && -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")

# follower_dumps_equal CONFIG: p<i>r1.tsv equals p<i>r0.tsv for every partition.
follower_dumps_equal() {
  local dir; dir="$(qr_dump_dir "$1")"
  for p in 0 1 2; do
    [[ -s "$dir/p${p}r0.tsv" ]] || fail "no dump of p${p}r0"
    cmp -s "$dir/p${p}r0.tsv" "$dir/p${p}r1.tsv" || fail "follower p${p}r1's dump differs from its leader's"
  done
  note "every follower's dump equals its leader's"
}
agree() {  # agree CLIENT_JSON
  [[ "$(json_field "$1" replicas_agree)" == true ]] || fail "replicas did not agree"
  [[ "$(json_field "$1" digest_mismatches)" == 0 ]] || fail "digest mismatches"
  [[ "$(json_field "$1" failed)" == 0 ]] || fail "failed txns"
}
# (a zookeeper root per run: a leader refuses streams left by an earlier one)
root() { echo "--replication.zookeeper.root=/qrstore-row-test-$$-$1"; }

# 1. Verified against the serial reference.
qr_grid_config "$QR_TMP/grid-ycsb.yaml" "$backend" 3 2 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "  partitions_per_txn: 3" "batch:" "  txns: 1000" "  timeout_ms: 5" "engine:" "  key_space: 30000"
cfg="$QR_TMP/grid-ycsb.yaml"
qr_up "$cfg" "${zk[@]+"${zk[@]}"}" "$(root ycsb)"
qr_client "$cfg" --txns 30000 --connections 3 --outstanding 1500 --seed 51 --verify --json >"$QR_TMP/ycsb.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/ycsb.out")"
agree "$QR_TMP/ycsb.out"
verify="$(json_field "$QR_TMP/ycsb.out" verify)"
[[ "$verify" == ok:* ]] || fail "verify: $verify"
note "ycsb: $verify; followers agree"
# cluster.sh status: under the node table, each partition's leader and each row's state.
status="$("$QR_SRC/scripts/cluster.sh" status "$cfg" 2>&1)" || fail "status failed: $status"
for q in 0 1 2; do
  grep -Eq "^$q +p${q}r0@[0-9]+ +2 of 2\$" <<<"$status" || fail "status: partition $q's leader and members: $status"
done
for r in 0 1; do grep -Eq "^$r +serving\$" <<<"$status" || fail "status: row $r not serving: $status"; done
note "status: each partition's leader and each row serving"
qr_down "$cfg"
follower_dumps_equal "$cfg"

# 2. Aborts.
qr_grid_config "$QR_TMP/grid-abort.yaml" "$backend" 3 2 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "  abort_ratio: 0.1" "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/grid-abort.yaml"
qr_up "$cfg" "${zk[@]+"${zk[@]}"}" "$(root abort)"
qr_client "$cfg" --txns 20000 --connections 3 --outstanding 1500 --seed 52 --verify --json >"$QR_TMP/abort.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/abort.out")"
agree "$QR_TMP/abort.out"
aborted="$(json_field "$QR_TMP/abort.out" aborted)"
[[ "$aborted" -gt 0 ]] || fail "nothing aborted"
[[ "$(json_field "$QR_TMP/abort.out" verify)" == ok:* ]] || fail "verify: $(json_field "$QR_TMP/abort.out" verify)"
note "ycsb with aborts: $aborted aborted; followers agree"
qr_down "$cfg"
follower_dumps_equal "$cfg"

# 3. Money.
qr_grid_config "$QR_TMP/grid-transfer.yaml" "$backend" 3 2 \
  "workload:" "  kind: transfer" "transfer:" "  accounts: 3000" "  initial_balance: 1000" "  max_amount: 1500" "  mp_ratio: 0.5" \
  "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/grid-transfer.yaml"
qr_up "$cfg" "${zk[@]+"${zk[@]}"}" "$(root transfer)"
qr_client "$cfg" --txns 20000 --connections 3 --outstanding 1500 --seed 53 --verify --json >"$QR_TMP/transfer.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/transfer.out")"
agree "$QR_TMP/transfer.out"
aborted="$(json_field "$QR_TMP/transfer.out" aborted)"
[[ "$aborted" -gt 0 ]] || fail "no transfer aborted"
[[ "$(json_field "$QR_TMP/transfer.out" verify)" == ok:* ]] || fail "verify: $(json_field "$QR_TMP/transfer.out" verify)"
qr_down "$cfg"
follower_dumps_equal "$cfg"
dir="$(qr_dump_dir "$cfg")"
total=0
for p in 0 1 2; do total=$((total + $(dump_sum "$dir/p${p}r0.tsv"))); done
[[ "$total" == 3000000 ]] || fail "money not conserved across the partitions: $total"
note "transfer: $aborted aborted, 3,000,000 conserved over 3 partitions, followers equal"

# 4. A follower killed and started again under load: 2 partitions x 3 rows (rf = 2: a group of 2
#    has no majority without its follower), checkpoints every 20 batches, the load held at
#    40,000 txn/s. Raft: it restarts from its own newest checkpoint and replays the group's log
#    after it. ZooKeeper: its checkpoints are deleted while it is down (a lost disk), and
#    ZooKeeper has deleted batch 0 (read by a majority): it fetches its leader's newest
#    checkpoint, restarts from it and catches up.
qr_grid_config "$QR_TMP/grid-restart.yaml" "$backend" 2 3 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "  abort_ratio: 0.05" "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/grid-restart.yaml"
ck=("--server.checkpoint_dir=$QR_TMP/ck" "--server.checkpoint_every_batches=20")
qr_up "$cfg" "${zk[@]+"${zk[@]}"}" "$(root restart)" "${ck[@]}"
qr_client "$cfg" --duration-s 12 --target-tps 40000 --connections 2 --outstanding 1500 --seed 54 --json \
  >"$QR_TMP/restart.out" 2>"$QR_TMP/restart.err" &
client=$!
sleep 3
"$QR_SRC/scripts/cluster.sh" kill "$cfg" p1r1 KILL
sleep 2
[[ "$backend" == zookeeper ]] && rm -rf "$QR_TMP/ck/p1r1"
qr_up "$cfg"  # restarts p1r1 only, with the first up's overrides
note "p1r1 killed and started again"
wait "$client" || fail "client failed: $(tail -5 "$QR_TMP/restart.err")"
agree "$QR_TMP/restart.out"
[[ "$(json_field "$QR_TMP/restart.out" committed)" -gt 0 ]] || fail "nothing committed"
log="$QRSTORE_RUN_DIR/grid-restart/p1r1.log"
[[ "$(grep -c "serving: partition 1 row 1" "$log")" -ge 2 ]] || fail "p1r1 did not start twice (see $log)"
grep -q "restored from" "$log" || fail "p1r1 did not restore a checkpoint (see $log)"
if [[ "$backend" == zookeeper ]]; then
  grep -q "fetching p1r0's newest checkpoint" "$log" || fail "p1r1 did not fetch its leader's checkpoint (see $log)"
  note "p1r1 fetched p1r0's checkpoint and restarted from it"
else
  note "p1r1 restarted from its own checkpoint"
fi
qr_down "$cfg"
dir="$(qr_dump_dir "$cfg")"
for p in 0 1; do
  for r in 1 2; do
    [[ -s "$dir/p${p}r0.tsv" ]] || fail "no dump of p${p}r0"
    cmp -s "$dir/p${p}r0.tsv" "$dir/p${p}r${r}.tsv" || fail "follower p${p}r${r}'s dump differs from its leader's"
  done
done
# Exactly once, from outside: the update counters over both partitions sum to the write ops the
# client saw committed (every write, dependent ones too, adds 1), and nothing is in doubt.
[[ "$(json_field "$QR_TMP/restart.out" in_doubt)" == 0 ]] || fail "txns in doubt"
total=$(($(dump_sum "$dir/p0r0.tsv") + $(dump_sum "$dir/p1r0.tsv")))
acked="$(json_field "$QR_TMP/restart.out" update_ops_committed)"
((total == acked)) || fail "the update counters sum to $total, the client saw $acked write ops committed"
note "exactly once: the update counters sum to $total, what the client saw committed"
# qrstore-checkpoint reads a row node's checkpoints (its partition's records only).
out="$("$QRSTORE_BIN/qrstore-checkpoint" --config "$cfg" --node p1r1 "${ck[@]}" 2>&1)" || fail "qrstore-checkpoint: $out"
grep -Eq "^checkpoint-[0-9]+\.qrc .* ok$" <<<"$out" || fail "qrstore-checkpoint found no valid checkpoint of p1r1: $out"
# A row's leader holding a checkpoint (each wrote one at its clean stop) does not start from it.
code=0
out="$("$QRSTORE_BIN/qrstore-server" --config "$cfg" --node p0r0 "${ck[@]}" "${zk[@]+"${zk[@]}"}" 2>&1)" || code=$?
[[ "$code" == 2 ]] || fail "a row leader with a checkpoint: exit $code (want 2): $out"
grep -q "which a row's leader cannot do" <<<"$out" || fail "no reason given: $out"
note "a row leader with a checkpoint refuses to start, naming --fresh"
note "restart: $(json_field "$QR_TMP/restart.out" committed) committed, nothing failed, the restarted follower agrees"
echo PASS
