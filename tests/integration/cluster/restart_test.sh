#!/usr/bin/env bash
# Restarts from checkpoints (docs/recovery.md) under full load, a group of three (raft, rf = 2), every
# node writing checkpoints (server.checkpoint_dir):
#   all       the raft disk log (replication.raft.log: disk), and every node stopped (SIGSTOP,
#             so txns are surely in flight) then killed (SIGKILL) at once, then `up` again: each
#             loads its newest checkpoint, replays its own log past it, one is elected and
#             takes over; the client, running all along, finds it and sends again what was
#             unanswered (its sessions came back with the checkpoints and the log);
#   follower  the memory log, n2 killed and started again 2 s later: it loads its checkpoint,
#             catches up from the leader and agrees with it; the leader never stops; then once
#             more with `cluster.sh restart` (killed and started again at once);
#   all-steady  as `all`, with the shipped election timing (raft.election_ticks 20 of 10 ms,
#             heartbeats every 5 ticks) and a heavier table and batches, so every member spends
#             seconds loading its checkpoint and replaying its log beside the others: one member
#             is elected and keeps leading (no node deposed, one `leads from batch` after the
#             restart), then the checks of `all`;
#   all-memory  the memory log, every node killed and started again: the batches after the
#             checkpoints are gone with the logs, and each member, restarted without its log,
#             neither votes nor campaigns until a leader caught it up: nobody is elected, each
#             says why, nobody serves (a leader would refuse: it would serve a state that skipped
#             committed batches).
#   clean     the raft disk log, every node stopped cleanly (`down`: the leader replicates end
#             markers, the followers apply up to them) and started again (`up`), twice, with a
#             client run before each stop: the markers are an empty batch every node replays, one
#             member is elected and leads on after them; nothing acknowledged in any run is lost
#             or run twice, and the dumps of each stop are identical.
# Checked from outside:
#   - every restarted node's log says which checkpoint it restored;
#   - the client ends with no txn in doubt, having resent (all) what it had in flight, and the
#     replicas agree with the leader at its last batch;
#   - `down` stops every node cleanly; their dumps are identical;
#   - exactly once: YCSB's update counters sum to exactly the write ops the client saw
#     committed (a lost txn makes the sum smaller, one run twice larger).
#   follower-zk  as `follower`, with the zookeeper backend: n2 resumes from its checkpoint and
#             the batches ZooKeeper still keeps (those after its checkpoint, though it had read
#             past them).
# Usage: restart_test.sh all|all-steady|follower|all-memory|follower-zk|clean
source "$(dirname "$0")/lib.sh"
how="${1:?all, all-steady, follower, all-memory, follower-zk or clean}"
backend=raft
steady=0
[[ "$how" == follower-zk ]] && backend=zookeeper how=follower
[[ "$how" == all-steady ]] && steady=1 how=all
cfg="$QR_TMP/restart.yaml"
qr_config "$cfg" "$backend" 3 "ycsb:" "  records: 20000" "  ops_per_txn: 8" "batch:" "  txns: 2000" "  timeout_ms: 5"
ck="$QR_TMP/checkpoints"
opts=(--server.checkpoint_dir="$ck")
if [[ "$backend" == zookeeper ]]; then
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && opts+=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  # ZooKeeper keeps 128 MB (the default 32 MB is gone in the 2 s n2 is away at this load: a
  # follower further behind than the retained batches would come back by a checkpoint transfer,
  # which cluster_transfer_zookeeper_kill tests; this test is about resuming). Within it, the batches after n2's checkpoint stay even though n2 had read past
  # them before it was killed (its progress says where its restart starts: keep_from).
  opts+=(--replication.zookeeper.retain_bytes=134217728)
fi
if [[ "$how" == clean ]]; then
  opts+=(--server.checkpoint_every_batches=50 --replication.raft.log=disk --replication.raft.dir="$QR_TMP/raft")
elif [[ "$steady" == 1 ]]; then
  opts+=(--server.checkpoint_every_batches=100 --replication.raft.log=disk --replication.raft.dir="$QR_TMP/raft"
    --replication.raft.election_ticks=20 --replication.raft.heartbeat_ticks=5 --ycsb.records=200000
    --ycsb.ops_per_txn=16 --batch.txns=5000)
elif [[ "$how" == all ]]; then
  # A 2 MiB log budget in 256 KiB segments (about 70 batches of this load) and a checkpoint every
  # 200 batches: the byte budget alone would compact past each node's last checkpoint; the log
  # keeps what a restart replays (RetainFrom), or the replay could not get past it.
  opts+=(--server.checkpoint_every_batches=200 --replication.raft.log=disk --replication.raft.dir="$QR_TMP/raft"
    --replication.raft.max_log_bytes=2097152 --replication.raft.segment_bytes=262144
    --replication.raft.max_lag_bytes=524288 --replication.raft.max_uncommitted_bytes=524288
    --replication.max_payload_bytes=524288)
else
  opts+=(--server.checkpoint_every_batches=20)
fi
qr_up "$cfg" "${opts[@]}"
run="$QRSTORE_RUN_DIR/restart"

# Every node has written a checkpoint (the sanitizer builds run several times slower).
wait_checkpoints() {
  local n
  for n in n0 n1 n2; do
    for _ in $(seq 1 300); do compgen -G "$ck/$n/checkpoint-*.qrc" >/dev/null && break; sleep 0.1; done
    compgen -G "$ck/$n/checkpoint-*.qrc" >/dev/null || fail "$n wrote no checkpoint within 30 s: $(tail -3 "$run/$n.log")"
  done
}

if [[ "$how" == clean ]]; then
  dir="$(qr_dump_dir "$cfg")"
  acked=0
  for round in 1 2 3; do
    if ((round > 1)); then
      # `down` forgot the overrides: this `up` gives the same ones (the cluster's data is kept).
      qr_up "$cfg" "${opts[@]}" >"$QR_TMP/up$round.out" 2>&1 || fail "up $round failed: $(tail -20 "$QR_TMP/up$round.out")"
      for n in n0 n1 n2; do
        (($(grep -c "restored from" "$run/$n.log") >= round - 1)) ||
          fail "$n did not restore a checkpoint in up $round: $(grep -h "checkpoint" "$run/$n.log" | tail -3)"
      done
    fi
    qr_client "$cfg" --txns 30000 --connections 2 --seed "$((20 + round))" --json >"$QR_TMP/client$round.out" \
      2>"$QR_TMP/client$round.err" || fail "the client of round $round failed: $(tail -5 "$QR_TMP/client$round.err")"
    c="$QR_TMP/client$round.out"
    [[ "$(json_field "$c" in_doubt)" == 0 ]] || fail "round $round: $(json_field "$c" in_doubt) txns in doubt"
    acked=$((acked + $(json_field "$c" update_ops_committed)))
    if ((round > 1)); then
      leads="$(grep -h "leads from batch" "$run"/n*.log | tail -1)"
      [[ -n "$leads" ]] || fail "round $round: no node says it leads on after the restart"
      note "round $round: $(echo "$leads" | cut -c1-160)"
      note "round $round: $(grep -h "applied as an empty batch" "$run"/n*.log | tail -1 | cut -c1-160)"
    fi
    qr_down "$cfg" >"$QR_TMP/down$round.out" 2>&1 || fail "down $round was not clean: $(cat "$QR_TMP/down$round.out")"
    qr_same_dumps "$cfg"
    total="$(dump_sum "$dir/n0.tsv")"
    ((total == acked)) ||
      fail "round $round: the update counters sum to $total, the clients saw $acked committed (lost or run twice)"
    note "round $round: exactly once over every run so far: the counters sum to $total, what the clients saw committed"
  done
  echo PASS
  exit 0
fi
if [[ "$how" == all-memory ]]; then
  qr_client "$cfg" --txns 60000 --connections 2 --seed 12 >/dev/null 2>"$QR_TMP/client.err" ||
    fail "the client failed: $(tail -3 "$QR_TMP/client.err")"
  wait_checkpoints
  for n in n0 n1 n2; do "$QR_SRC/scripts/cluster.sh" kill "$cfg" "$n" KILL; done
  for n in n0 n1 n2; do
    for _ in $(seq 1 50); do [[ -f "$run/$n.exit" ]] && break; sleep 0.1; done
  done
  qr_up "$cfg" "${opts[@]}" >"$QR_TMP/up2.out" 2>&1 || fail "the restart failed: $(tail -20 "$QR_TMP/up2.out")"
  # Each restarted without its log (and so may have forgotten its votes): none votes before a
  # leader caught it up, so none is elected (were one elected, it would refuse to lead: the
  # batches after the checkpoints are gone; Promote checks that too).
  waiting() { grep -l "neither votes nor campaigns until a leader has caught it up" "$run"/n*.log 2>/dev/null | wc -l; }
  deadline=$((SECONDS + 40))
  while ((SECONDS < deadline)) && (($(waiting) < 3)); do sleep 0.2; done
  (($(waiting) == 3)) || fail "$(waiting) member(s) say they wait to be caught up before voting, not 3: $(tail -n 3 "$run"/n*.log)"
  note "$(grep -h "neither votes" "$run/n0.log" | head -1 | cut -c1-200)"
  sleep 3  # several election timeouts
  for f in "$run"/n*.log; do
    if sed -n '/restored from/,$p' "$f" | grep -q "leader term"; then
      fail "a member was elected after the restart: $(grep -h "leader term" "$f" | tail -1)"
    fi
  done
  status="$(qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true)"
  serving="$(awk 'NR > 1 && $2 == "leader" && $3 == "serving"' <<<"$status")"
  [[ -z "$serving" ]] || fail "a member serves a state that skipped committed batches: $serving"
  # The survivor cannot reach its group's end (a clean stop would wait server.drain_timeout_ms).
  for n in n0 n1 n2; do "$QR_SRC/scripts/cluster.sh" kill "$cfg" "$n" KILL >/dev/null 2>&1 || true; done
  echo PASS
  exit 0
fi
# `all` runs until the test interrupts it (SIGINT to the client itself, not to a shell function
# around it; the summary follows) a few seconds after the restarted group serves: how long the
# restart takes varies a lot (ASan, a loaded machine).
duration=16
[[ "$how" == all ]] && duration=300
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s "$duration" --connections 2 --outstanding 3000 --seed 11 --json --client.progress_interval_ms=250 \
  >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
sleep 2
wait_checkpoints
sleep 1
if [[ "$how" == all ]]; then
  nodes=(n0 n1 n2)
  for n in "${nodes[@]}"; do "$QR_SRC/scripts/cluster.sh" kill "$cfg" "$n" STOP; done
  sleep 0.3
  for n in "${nodes[@]}"; do "$QR_SRC/scripts/cluster.sh" kill "$cfg" "$n" KILL; done
else
  nodes=(n2)
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n2 KILL
fi
for n in "${nodes[@]}"; do
  for _ in $(seq 1 50); do [[ -f "$run/$n.exit" ]] && break; sleep 0.1; done
  [[ -f "$run/$n.exit" ]] || fail "$n did not die"
done
sleep 2
# `up` starts what is not running: with nodes still running, with the first up's overrides; with
# none running, with the ones given now (the same).
again=()
[[ "$how" == all ]] && again=("${opts[@]}")
restarted_at="$(date +%T.%3N)"
qr_up "$cfg" "${again[@]+"${again[@]}"}" >"$QR_TMP/up2.out" 2>&1 || fail "the restart failed: $(tail -20 "$QR_TMP/up2.out")"
if [[ "$how" == all && "$steady" == 0 ]]; then
  # The raft logs were compacted (they start past their first entry), yet not past the batch
  # after each node's checkpoint (or the replay below would not reach the leader's state).
  starts="$(grep -ho "restored term [0-9]* vote [0-9-]* commit [0-9]* log \[[0-9]*" "$run"/n*.log | grep -o "[0-9]*$" | sort -n | tail -1)"
  ((${starts:-0} > 1)) || fail "no raft log was compacted before the restart (log starts: ${starts:-none}): the test proves nothing"
  note "raft logs restored from index up to $starts (compacted below each node's checkpoint)"
fi
for n in "${nodes[@]}"; do
  line="$(grep -h "restored from" "$run/$n.log" | tail -1)"
  [[ -n "$line" ]] || fail "$n did not restore a checkpoint: $(grep -h "checkpoint" "$run/$n.log" | tail -3)"
  note "$(echo "$line" | cut -c1-200)"
done

if [[ "$how" == all ]]; then
  serving=""
  for _ in $(seq 1 300); do
    serving="$(qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null |
      awk 'NR > 1 && $2 == "leader" && $3 == "serving" {print $1}' || true)"
    [[ -n "$serving" ]] && break
    sleep 0.2
  done
  [[ -n "$serving" ]] || fail "no restarted node leads and serves within 60 s: $(tail -n 3 "$run"/n*.log)"
  more=4
  [[ "$steady" == 1 ]] && more=8  # long enough to see a new leader deposed (1-8 s after it led, seen)
  note "$serving leads the restarted group; the client runs $more s more"
  sleep "$more"
  if [[ "$steady" == 1 ]]; then
    # One leader, kept: every node's log lines since the restart (HH:MM:SS.mmm, one day).
    since() { awk -v t="$restarted_at" 'substr($0, 1, 12) > t' "$run"/n*.log; }
    leads="$(since | grep -c "leads from batch" || true)"
    deposed="$(since | grep -h "stopping by itself" || true)"
    since | grep -h "leader none (silent" | cut -c1-200 | sed 's/^/-- (a member lost its leader a moment) /' || true
    [[ -z "$deposed" ]] || fail "a leader elected after the restart was deposed: $(head -2 <<<"$deposed" | cut -c1-200)"
    [[ "$leads" == 1 ]] || fail "$leads promotions after the restart, not 1: $(since | grep -h "leads from batch" | cut -c1-160)"
    note "one leader after the restart, kept: $(since | grep -h "leads from batch" | cut -c1-160)"
  fi
  kill -0 "$client" 2>/dev/null || fail "the client ended before it was interrupted: $(tail -5 "$QR_TMP/client.err")"
  kill -INT "$client"
fi
if [[ "$how" == follower ]]; then
  # Once more, with the command made for it: killed and started again at once.
  sleep 2
  "$QR_SRC/scripts/cluster.sh" restart "$cfg" n2 >"$QR_TMP/restart.out" 2>&1 ||
    fail "cluster.sh restart failed: $(tail -20 "$QR_TMP/restart.out")"
  (($(grep -c "restored from" "$run/n2.log") >= 2)) || fail "n2 did not restore a checkpoint after cluster.sh restart"
  note "cluster.sh restart: $(grep -h "restored from" "$run/n2.log" | tail -1 | cut -c1-160)"
fi

wait "$client" || fail "the client failed: $(tail -5 "$QR_TMP/client.err")"
c="$QR_TMP/client.out"
python3 - "$c" <<'PY' || fail "the client committed nothing after the restart"
import json, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
j = json.loads(line)
per = j["committed_per_interval"]
print("-- commits per 250 ms:", per)
print("-- unavailable_ms %.0f, in doubt %d txns, retried %d, failovers %d" %
      (j["unavailable_ms"], j["in_doubt"], j["retried"], j["failovers"]))
sys.exit(0 if sum(per[-8:-1]) > 0 else 1)
PY
[[ "$(json_field "$c" in_doubt)" == 0 ]] || fail "the client ended with $(json_field "$c" in_doubt) txns in doubt"
[[ "$(json_field "$c" replicas_agree)" == true ]] || fail "the replicas do not agree: $(json_field "$c" replicas_detail)"
if [[ "$how" == all ]]; then
  (($(json_field "$c" retried) > 0)) || fail "the client sent nothing again after the restart (it had txns in flight)"
  (($(json_field "$c" failovers) >= 1)) || fail "the client never moved to a leader of the restarted group"
  [[ "$(json_field "$c" interrupted)" == true ]] || fail "the client's summary does not say it was interrupted"
fi

qr_down "$cfg" >"$QR_TMP/down.out" 2>&1 || fail "down was not clean: $(cat "$QR_TMP/down.out")"
qr_same_dumps "$cfg"
dir="$(qr_dump_dir "$cfg")"
total="$(dump_sum "$dir/n0.tsv")"
acked="$(json_field "$c" update_ops_committed)"
((total >= acked)) || fail "acknowledged updates lost: the counters sum to $total, the client saw $acked committed"
((total == acked)) || fail "updates run twice or from nowhere: the counters sum to $total, the client saw $acked committed"
note "exactly once: the update counters sum to $total, what the client saw committed"
echo PASS
