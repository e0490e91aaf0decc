#!/usr/bin/env bash
# A whole partitioned row killed at once and started again (docs/partitioned-rows.md, docs/recovery.md),
# processes on 127.0.0.1: a 2 partitions x 3 rows raft grid with the disk log (fsync per batch)
# and checkpoints, YCSB with half the txns multi-partition and 20% dependent writes, the load held
# steady. Every node is stopped (SIGSTOP, so txns are surely in flight) then killed (SIGKILL) at
# once, then `cluster.sh up` starts them all again: each loads its newest checkpoint and replays
# its raft log past it; each group elects a leader, which replays its group's log as a follower
# first and then takes its place in the row together with the other partitions' (each a
# successor answering the others' resumes: docs/partitioned-rows.md 9.5); the client, running
# all along, follows each partition's leader and sends again what was unanswered, with its
# sessions (which came back with the checkpoints and the logs).
# Checked from outside: every node restored a checkpoint; both partitions lead again in the row;
# the client ends with nothing in doubt, having sent something again, and sees every replica
# agree; every node stops cleanly and every member of a partition dumps the same state; exactly
# once: the update counters over one dump per partition sum to the write ops the client saw
# committed (nothing acknowledged lost, nothing run twice).
# Usage: row_restart_test.sh
source "$(dirname "$0")/lib.sh"
qr_grid_config "$QR_TMP/whole.yaml" raft 2 3 \
  "ycsb:" "  records: 20000" "  ops_per_txn: 8" "  write_ratio: 0.4" "  dep_ratio: 0.2" "  mp_ratio: 0.5" \
  "batch:" "  txns: 500" "  timeout_ms: 5"
cfg="$QR_TMP/whole.yaml"
run="$QRSTORE_RUN_DIR/whole"
opts=(--replication.raft.log=disk --replication.raft.dir=raft --server.checkpoint_dir="$QR_TMP/ck"
      --server.checkpoint_every_batches=20)
qr_up "$cfg" "${opts[@]}" >"$QR_TMP/up1.out" 2>&1 || fail "up failed: $(tail -20 "$QR_TMP/up1.out")"
# The client runs until interrupted (SIGINT to the client itself; the summary follows) a few
# seconds after the restarted row serves: how long the restart takes varies (a loaded machine).
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --target-tps 10000 --connections 2 --outstanding 500 \
  --seed 63 --json --client.txns_per_request=20 --client.progress_interval_ms=500 \
  >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
nodes=(p0r0 p1r0 p0r1 p1r1 p0r2 p1r2)
# Every node has written a checkpoint (every 20 batches): the restart loads them.
for _ in $(seq 1 200); do
  n=0
  for node in "${nodes[@]}"; do [[ -n "$(ls "$QR_TMP/ck/$node" 2>/dev/null | grep '\.qrc$')" ]] && n=$((n + 1)); done
  ((n == ${#nodes[@]})) && break
  sleep 0.1
done
((n == ${#nodes[@]})) || fail "only $n of ${#nodes[@]} nodes wrote a checkpoint"
sleep 2
# At once: one kill for all six (as a power loss would). Stopped one `cluster.sh kill` at a time,
# leaders first, the stops spread over a second on a busy host, and partition 1's leader, still
# running, committed its batch-end record of a batch whose slice partition 0's stopped leader
# had not committed in its group: that slice was lost, and the restarted row waited forever for
# its values (a gap in the whole-row restart that this makes rare, not impossible: the note of
# stop 43 and docs/partitioned-rows.md 9, "Known gap").
pids=()
for node in "${nodes[@]}"; do pids+=("$(cat "$run/$node.pid")"); done
kill -STOP "${pids[@]}"
sleep 0.3
kill -KILL "${pids[@]}"
for node in "${nodes[@]}"; do
  for _ in $(seq 1 50); do [[ -f "$run/$node.exit" ]] && break; sleep 0.1; done
  [[ -f "$run/$node.exit" ]] || fail "$node did not die"
done
note "every node of the row stopped, then killed at once"
sleep 1
qr_up "$cfg" "${opts[@]}" >"$QR_TMP/up2.out" 2>&1 || fail "the restart failed: $(tail -20 "$QR_TMP/up2.out")"
for node in "${nodes[@]}"; do
  grep -q "restored from" "$run/$node.log" || fail "$node did not restore a checkpoint: $(grep -h checkpoint "$run/$node.log" | tail -2)"
done
note "every node restored its checkpoint: $(grep -h "restored from" "$run/p0r0.log" | tail -1 | grep -o "the state after batch [0-9]*")"
led=0
for _ in $(seq 1 300); do
  led=0
  for p in 0 1; do
    # After the restart (the logs are appended to): a promotion of this run.
    # (awk reads every line: no early exit for pipefail to report)
    awk -v p="$p" 'FNR == 1 { on = 0 } /restored from/ { on = 1 } on && $0 ~ "leads partition " p " in the row" { n++ } END { exit !n }' \
      "$run"/p${p}r*.log && led=$((led + 1))
  done
  ((led == 2)) && break
  sleep 0.2
done
((led == 2)) || fail "the row did not lead again within 60 s: $(grep -h " E \| W " "$run"/p*r0.log | tail -6)"
for p in 0 1; do note "$(grep -h "leads partition $p in the row" "$run"/p${p}r*.log | tail -1 | cut -c14-140)"; done
sleep 4
kill -0 "$client" 2>/dev/null || fail "the client ended before it was interrupted: $(tail -5 "$QR_TMP/client.err")"
kill -INT "$client"
wait "$client" || fail "the client failed: $(tail -5 "$QR_TMP/client.err")"
out="$QR_TMP/client.out"
python3 - "$out" <<'PY' || fail "no commits after the restart"
import json, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
per = json.loads(line)["committed_per_interval"]
sys.exit(0 if sum(per[-6:-1]) > 0 else 1)
PY
in_doubt="$(json_field "$out" in_doubt)"
retried="$(json_field "$out" retried)"
((in_doubt == 0)) || fail "$in_doubt txns in doubt after the restart"
((retried > 0)) || fail "nothing was sent again: no txn was in flight when the row died (the test proves less)"
[[ "$(json_field "$out" replicas_agree)" == true ]] || fail "the replicas do not agree: $(json_field "$out" replicas_detail)"
note "client: $(json_field "$out" committed_total) committed, $retried sent again, 0 in doubt, replicas agree"
qr_down "$cfg" >"$QR_TMP/down.out" 2>&1 || fail "down was not clean: $(tail -8 "$QR_TMP/down.out")"
dir="$(qr_dump_dir "$cfg")"
for p in 0 1; do
  for r in 1 2; do
    cmp -s "$dir/p${p}r0.tsv" "$dir/p${p}r${r}.tsv" || fail "p${p}r${r}'s dump differs from p${p}r0's"
  done
done
total=$(($(dump_sum "$dir/p0r0.tsv") + $(dump_sum "$dir/p1r0.tsv")))
acked="$(json_field "$out" update_ops_committed)"
((acked > 0 && total == acked)) || fail "the update counters sum to $total; the client saw $acked write ops committed"
note "exactly once: the update counters sum to $total = the write ops acknowledged; every member dumps its partition's state"
echo PASS
