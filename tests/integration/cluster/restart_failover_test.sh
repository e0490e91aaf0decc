#!/usr/bin/env bash
# Two failovers in a row on a group of three (rf = 2), each dead leader started again: under
# full load the leader is killed (SIGKILL) and started again 3 s later; 9 s after the first kill
# the leader that took over is killed and started again 3 s later too. Each restarted member
# must come back (from its checkpoint and the batches kept after it, or a fetched checkpoint),
# so that when the second leader dies the group still has a majority that can catch up. The
# nodes are durable (checkpoints below the run folder; raft: the disk log), as in the shipped
# configs.
# Checked from outside:
#   - after each kill another node leads, in a higher term;
#   - each restarted node is serving again (as a follower or leader) before the next kill, and
#     at the end every node is serving;
#   - the client follows both failovers, ends with no txn in doubt and without an error, and saw
#     every replica agree;
#   - `down` stops all three cleanly; their dumps are identical;
#   - exactly once: YCSB's update counters sum to exactly the write ops the client saw committed.
# Usage: restart_failover_test.sh raft|zookeeper
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
cfg="$QR_TMP/refail.yaml"
qr_config "$cfg" "$backend" 3 "ycsb:" "  records: 20000" "  ops_per_txn: 8" "batch:" "  txns: 2000" "  timeout_ms: 5"
opts=(--server.checkpoint_dir=data/checkpoints --server.checkpoint_every_batches=40)
if [[ "$backend" == zookeeper ]]; then
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && opts+=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  opts+=(--replication.zookeeper.session_timeout_ms=2000)
else
  opts+=(--replication.raft.log=disk --replication.raft.dir=data/raft)
fi
qr_up "$cfg" --fresh "${opts[@]}" >"$QR_TMP/up.out" 2>&1 || fail "up: $(tail -20 "$QR_TMP/up.out")"
run="$QRSTORE_RUN_DIR/refail"
status() { qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true; }
leader_except() { status | awk -v x="$1" 'NR > 1 && $1 != x && $2 == "leader" && $3 == "serving" { print $1; exit }'; }
term_of() { status | awk -v n="$1" '$1 == n { split($8, a, "@"); print a[2] }'; }
wait_leader() {  # wait_leader DEAD: prints the new leader
  local start=$SECONDS l=""
  while ((SECONDS - start < 30)); do
    l="$(leader_except "$1")"
    [[ -n "$l" ]] && { echo "$l"; return 0; }
    sleep 0.1
  done
  return 1
}
serving_again() {  # serving_again NODE: waits (60 s) until NODE is serving as a member again
  local deadline=$((SECONDS + 60)) st=""
  while ((SECONDS < deadline)); do
    st="$(status | awk -v n="$1" '$1 == n { print $2, $3 }')"
    [[ "$st" == "follower serving" || "$st" == "leader serving" ]] && return 0
    sleep 0.2
  done
  fail "$1 did not serve again within 60 s of its restart (last: '$st'): $(tail -5 "$run/$1.log")"
}

"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --connections 2 --outstanding 3000 --seed 11 --json \
  --client.progress_interval_ms=250 >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
sleep 3
first="$(status | awk 'NR > 1 && $2 == "leader" { print $1; exit }')"
[[ -n "$first" ]] || fail "no leader before the first kill: $(status)"
t1="$(term_of "$first")"
kill_at=$SECONDS
"$QR_SRC/scripts/cluster.sh" kill "$cfg" "$first" KILL >/dev/null
second="$(wait_leader "$first")" || fail "nobody took over from $first: $(status)"
t2="$(term_of "$second")"
((t2 > t1)) || fail "the second leader's term $t2 is not above the first's $t1"
note "killed $first (term $t1): $second leads in term $t2"
while ((SECONDS - kill_at < 3)); do sleep 0.1; done
qr_up "$cfg" >>"$QR_TMP/up.out" 2>&1 || fail "starting $first again: $(tail -20 "$QR_TMP/up.out")"
serving_again "$first"
note "$first serves again: $(grep -h "restored from\|fetched" "$run/$first.log" | tail -1 | cut -c1-150)"
while ((SECONDS - kill_at < 9)); do sleep 0.1; done
kill_at=$SECONDS
"$QR_SRC/scripts/cluster.sh" kill "$cfg" "$second" KILL >/dev/null
third="$(wait_leader "$second")" || fail "nobody took over from $second: $(status)"
t3="$(term_of "$third")"
((t3 > t2)) || fail "the third leader's term $t3 is not above the second's $t2"
note "killed $second (term $t2): $third leads in term $t3"
while ((SECONDS - kill_at < 3)); do sleep 0.1; done
qr_up "$cfg" >>"$QR_TMP/up.out" 2>&1 || fail "starting $second again: $(tail -20 "$QR_TMP/up.out")"
serving_again "$second"
note "$second serves again: $(grep -h "restored from\|fetched" "$run/$second.log" | tail -1 | cut -c1-150)"
for n in n0 n1 n2; do serving_again "$n"; done
sleep 2  # the client commits with the whole group back
kill -0 "$client" 2>/dev/null || fail "the client ended before it was interrupted: $(tail -5 "$QR_TMP/client.err")"
kill -INT "$client"
wait "$client" || fail "the client failed: $(tail -5 "$QR_TMP/client.err")"
out="$QR_TMP/client.out"
(($(json_field "$out" failovers) >= 2)) || fail "the client made $(json_field "$out" failovers) failovers, not 2"
[[ "$(json_field "$out" in_doubt)" == 0 ]] || fail "the client ended with $(json_field "$out" in_doubt) txns in doubt"
[[ "$(json_field "$out" replicas_agree)" == true ]] || fail "the replicas do not agree: $(json_field "$out" replicas_detail)"
note "client: $(json_field "$out" committed_total) committed, $(json_field "$out" retried) sent again, none in doubt, longest without a commit $(json_field "$out" unavailable_ms) ms"
qr_down "$cfg" >"$QR_TMP/down.out" 2>&1 || fail "down was not clean: $(cat "$QR_TMP/down.out")"
qr_same_dumps "$cfg"
dir="$(qr_dump_dir "$cfg")"
total="$(dump_sum "$dir/n0.tsv")"
acked="$(json_field "$out" update_ops_committed)"
((total == acked)) || fail "the update counters sum to $total, the client saw $acked committed (lost or run twice)"
note "exactly once: the update counters sum to $total, what the client saw committed"
echo PASS
