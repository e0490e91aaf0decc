#!/usr/bin/env bash
# A partitioned row of 3 leaders (rf = 0; docs/partitioned-rows.md, step 2) as processes on
# 127.0.0.1, through scripts/cluster.sh and qrstore-client:
#  1. YCSB, 50% multi-partition txns over up to 3 partitions, 20% dependent writes, node-level
#     synchronization (engine.sync: node, one batch at a time per node; the others run the
#     default, thread-level): the client's
#     --verify replays every txn serially in planned order (batch, home, planner, index): fates,
#     every read value, and each node's digest of its partition equal the serial reference's.
#  2. YCSB with logic aborts (resolved by cascade across partitions): every txn is answered, none
#     failed, some aborted; --verify replays each batch with the row's cascade rule and checks
#     every fate (aborted-logic vs aborted-cascade), every read and each partition's digest.
#  3. Transfers, half across partitions (transfer.mp_ratio), with short debits, range
#     partitioning: each node loads its own partition's accounts only; verified the same way;
#     each node dumps its own partition's accounts; together they hold every account once, and
#     the money is conserved.
#  4. A node killed under load: its peers fail with an error naming it, their clients get answers
#     (failed) rather than silence, and they stop when told.
#  5. A node stopped (SIGSTOP: hung, its connections open): its peers warn, then fail after
#     row.peer_timeout_ms naming it.
source "$(dirname "$0")/lib.sh"

# 1. Verified against the serial reference.
qr_row_config "$QR_TMP/row-ycsb.yaml" 3 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "  partitions_per_txn: 3" "batch:" "  txns: 1000" "  timeout_ms: 5" "engine:" "  key_space: 30000" "  sync: node"
cfg="$QR_TMP/row-ycsb.yaml"
qr_up "$cfg"
qr_client "$cfg" --txns 40000 --connections 3 --outstanding 2000 --seed 41 --verify --json >"$QR_TMP/ycsb.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/ycsb.out")"
[[ "$(json_field "$QR_TMP/ycsb.out" committed)" == 40000 ]] || fail "not every txn committed"
verify="$(json_field "$QR_TMP/ycsb.out" verify)"
[[ "$verify" == ok:* ]] || fail "verify: $verify"
note "ycsb across 3 partitions: $verify"
qr_down "$cfg"

# 2. Aborts across partitions.
qr_row_config "$QR_TMP/row-abort.yaml" 3 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "  partitions_per_txn: 2" "  abort_ratio: 0.1" "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/row-abort.yaml"
qr_up "$cfg"
qr_client "$cfg" --txns 30000 --connections 3 --outstanding 2000 --seed 42 --verify --json >"$QR_TMP/abort.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/abort.out")"
committed="$(json_field "$QR_TMP/abort.out" committed)"
aborted="$(json_field "$QR_TMP/abort.out" aborted)"
[[ $((committed + aborted)) == 30000 ]] || fail "committed $committed + aborted $aborted != 30000"
[[ "$(json_field "$QR_TMP/abort.out" failed)" == 0 ]] || fail "failed txns"
[[ "$aborted" -gt 0 ]] || fail "nothing aborted: the test would not show cascades"
verify="$(json_field "$QR_TMP/abort.out" verify)"
[[ "$verify" == ok:* ]] || fail "verify: $verify"
note "ycsb with aborts: $committed committed, $aborted aborted; $verify"
qr_down "$cfg"

# 3. Money across partitions.
qr_row_config "$QR_TMP/row-transfer.yaml" 3 \
  "workload:" "  kind: transfer" "transfer:" "  accounts: 3000" "  initial_balance: 1000" "  max_amount: 1500" "  mp_ratio: 0.5" \
  "batch:" "  txns: 1000" "  timeout_ms: 5" "engine:" "  range_function: range" "  key_space: 3000"
cfg="$QR_TMP/row-transfer.yaml"
qr_up "$cfg"
# Each node holds its own partition's accounts only (range partitioning: 1000 each).
for p in p0 p1 p2; do
  grep -q "^qrstore-server ready: node $p .* records 1000$" "$QRSTORE_RUN_DIR/row-transfer/$p.out" ||
    fail "$p does not hold exactly its partition's 1000 accounts: $(cat "$QRSTORE_RUN_DIR/row-transfer/$p.out")"
done
qr_client "$cfg" --txns 30000 --connections 3 --outstanding 1500 --seed 43 --verify --json >"$QR_TMP/transfer.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/transfer.out")"
aborted="$(json_field "$QR_TMP/transfer.out" aborted)"
[[ "$aborted" -gt 0 ]] || fail "no transfer aborted: the test would not show fates"
verify="$(json_field "$QR_TMP/transfer.out" verify)"
[[ "$verify" == ok:* ]] || fail "verify: $verify"
qr_down "$cfg"
dir="$(qr_dump_dir "$cfg")"
for p in p0 p1 p2; do [[ -s "$dir/$p.tsv" ]] || fail "no dump of $p"; done
keys="$(cat "$dir"/p*.tsv | cut -f1 | sort -n | uniq | wc -l)"
lines="$(cat "$dir"/p*.tsv | wc -l)"
[[ "$keys" == 3000 && "$lines" == 3000 ]] || fail "the dumps hold $lines lines, $keys distinct accounts (want 3000 each)"
total=0
for f in "$dir"/p*.tsv; do total=$((total + $(dump_sum "$f"))); done
[[ "$total" == 3000000 ]] || fail "money not conserved across the partitions: $total"
note "transfer: $aborted aborted, 3,000,000 conserved over 3 partitions"

# 4. A node killed under load.
qr_row_config "$QR_TMP/row-kill.yaml" 3 \
  "ycsb:" "  records: 30000" "  ops_per_txn: 8" "  mp_ratio: 0.5" "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/row-kill.yaml"
qr_up "$cfg"
# (settle: the client polls every leader's status for its summary; a dead one answers nothing)
qr_client "$cfg" --duration-s 6 --connections 3 --outstanding 1000 --seed 44 --client.stall_timeout_ms=3000 \
  --client.settle_timeout_ms=1000 --json >"$QR_TMP/kill.out" 2>"$QR_TMP/kill.err" &
client=$!
sleep 2
"$QR_SRC/scripts/cluster.sh" kill "$cfg" p1 KILL
t0=$SECONDS
if wait "$client"; then fail "the client reported success with a node of the row killed"; fi
((SECONDS - t0 < 20)) || fail "the client took $((SECONDS - t0)) s to notice"
run="$QRSTORE_RUN_DIR/row-kill"
# Whichever comes first names the peer: its closed connection, or a send to it that failed.
for p in p0 p2; do
  grep -Eq "row peer 1 \(127.0.0.1:[0-9]+\) closed its connection|could not send to row peer 1 \(127.0.0.1:[0-9]+\)" \
    "$run/$p.log" || fail "$p did not report the dead peer: $(tail -5 "$run/$p.log")"
done
status="$(qr_client "$cfg" --status 2>&1 || true)"
grep -q "failed" <<<"$status" || fail "no node reports failed: $status"
grep -Eq "^0 +not serving: .*p1 down" <<<"$status" || fail "status: row 0 does not name p1 down: $status"
note "p1 killed: p0 and p2 failed naming it; the client stopped after $((SECONDS - t0)) s"
if qr_down "$cfg" >"$QR_TMP/down.out" 2>&1; then fail "down reported a clean stop after a failure"; fi
grep -q "stopped after a failure: .*row peer 1" "$run/p0.log" || fail "p0's exit does not name the failure"

# 5. A hung node.
qr_row_config "$QR_TMP/row-hung.yaml" 2 "ycsb:" "  records: 30000" "batch:" "  txns: 1000" "  timeout_ms: 5" "row:" \
  "  peer_timeout_ms: 1500"
cfg="$QR_TMP/row-hung.yaml"
qr_up "$cfg"
qr_client "$cfg" --txns 5000 --connections 2 --seed 45 >"$QR_TMP/hung.out" 2>&1 || fail "the client failed before the hang: $(tail -3 "$QR_TMP/hung.out")"
"$QR_SRC/scripts/cluster.sh" kill "$cfg" p1 STOP
run="$QRSTORE_RUN_DIR/row-hung"
for ((i = 0; i < 100; i++)); do
  grep -q "row peer 1 (127.0.0.1:[0-9]*) sent nothing for [0-9]* ms (row.peer_timeout_ms 1500)" "$run/p0.log" && break
  sleep 0.1
done
grep -q "nothing from row peer 1" "$run/p0.log" || fail "p0 did not warn about the silent peer"
grep -q "row peer 1 (127.0.0.1:[0-9]*) sent nothing for" "$run/p0.log" ||
  fail "p0 did not fail on the hung peer: $(tail -5 "$run/p0.log")"
"$QR_SRC/scripts/cluster.sh" kill "$cfg" p1 KILL
note "p1 hung: p0 warned, then failed naming it after row.peer_timeout_ms"
qr_down "$cfg" >/dev/null 2>&1 || true
echo PASS
