#!/usr/bin/env bash
# A dead row leader started again rejoins its group as a follower (see
# docs/partitioned-rows.md 9.6 step 4), processes on 127.0.0.1: a 2 partitions x 3 rows grid with
# BACKEND (raft | zookeeper), transfers with half the txns multi-partition, the load held steady.
# Partition 1's leader p1r0 is killed (SIGKILL) mid-run; once the client saw a follower of its
# group take over, p1r0 is started again (`cluster.sh up`, which starts the nodes that are not
# running). Configured as row 0 it used to wait to lead its group and fail; it must start as the
# new leader's follower, replay the group's log (VARIANT plain: from batch 0; checkpoint: from its
# own newest checkpoint, with server.checkpoint_dir, which a row 0 used to refuse to start from)
# and agree with its leader. Checks, from outside: p1r0's log says it follows and (checkpoint)
# that it restored; `cluster.sh status` shows it a serving follower of the new leader whose digest
# agrees, and partition 1 with 3 of 3 members serving; the client finishes and every txn it sent
# has one fate, none in doubt; a client started afterwards finds each partition's leader as it is
# now (not the config's row 0) and sees every replica agree; every node stops cleanly; every member of each group, p1r0
# included, dumps the same state as its leader; money summed over the partitions is conserved.
# ZooKeeper deletes the batches a majority read, so there p1r0 needs its checkpoint: the default
# is that variant alone (plain ends with p1r0 stranded, as any follower restarted from batch 0).
# VARIANT reelected (raft): its group elects p1r0 itself again after its restart (its log the
# longest: p1r1 was paused while the others committed, p1r2 is paused while p1r0 restarts); it
# must replay the log from its checkpoint as a follower first, then take its place in the row as
# any elected follower; then a client runs, every replica agrees, and the dumps match.
# Usage: row_rejoin_test.sh BACKEND [VARIANT ...]   (VARIANT: plain | checkpoint | reelected;
# default: raft all three, zookeeper: checkpoint)
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
shift
variants=("$@")
if ((${#variants[@]} == 0)); then
  variants=(plain checkpoint reelected)
  [[ "$backend" == zookeeper ]] && variants=(checkpoint)
fi

# Its group makes the restarted leader leader again (raft, a disk log: p1r0's log is the longest).
reelected() {
  qr_grid_config "$QR_TMP/rejoin-reelected.yaml" raft 2 3 \
    "workload:" "  kind: transfer" "transfer:" "  accounts: 4000" "  initial_balance: 1000" "  max_amount: 1500" \
    "  mp_ratio: 0.5" "batch:" "  txns: 500" "  timeout_ms: 5"
  local cfg="$QR_TMP/rejoin-reelected.yaml" cs="$QR_SRC/scripts/cluster.sh"
  local run="$QRSTORE_RUN_DIR/rejoin-reelected"
  local o=(--server.checkpoint_dir="$QR_TMP/ck-reelected" --server.checkpoint_every_batches=20
    --replication.raft.log=disk --replication.raft.dir="$QR_TMP/raft-reelected")
  qr_up "$cfg" "${o[@]}"
  qr_client "$cfg" --duration-s 2 --target-tps 10000 --connections 2 --seed 73 --json >"$QR_TMP/r1.out" \
    2>"$QR_TMP/r1.err" || fail "reelected: the first client failed: $(tail -5 "$QR_TMP/r1.err")"
  # p1r1 falls behind while p1r0 and p1r2 commit more (the client says p1r1 does not agree: expected).
  "$cs" kill "$cfg" p1r1 STOP
  qr_client "$cfg" --duration-s 2 --target-tps 10000 --connections 2 --seed 74 --json >"$QR_TMP/r2.out" \
    2>"$QR_TMP/r2.err" || true
  [[ "$(json_field "$QR_TMP/r2.out" committed)" -gt 0 ]] || fail "reelected: nothing committed with p1r1 paused"
  # p1r0 dies with the longest log; p1r2 cannot campaign (paused), p1r1 cannot win (behind).
  # Signalled by pid, at once: with p1r1 and p1r2 paused, p1r0 steps down (CheckQuorum) and exits
  # by itself after an election time-out, which cluster.sh's steps outlasted on a busy host.
  kill -STOP "$(cat "$run/p1r2.pid")"
  kill -KILL "$(cat "$run/p1r0.pid")"
  "$cs" kill "$cfg" p1r1 CONT
  qr_up "$cfg"  # p1r0 again
  local deadline=$((SECONDS + 30))
  until grep -q "leads partition 1 in the row" "$run/p1r0.log"; do
    ((SECONDS < deadline)) || fail "reelected: p1r0 did not take its place in the row again (see $run/p1r0.log)"
    sleep 0.2
  done
  "$cs" kill "$cfg" p1r2 CONT
  grep -q "its group made it leader again (term [0-9]*) while its log holds batches" "$run/p1r0.log" ||
    fail "reelected: p1r0 does not say its group elected it again (see $run/p1r0.log)"
  grep -q "restored from .*checkpoint-" "$run/p1r0.log" || fail "reelected: p1r0 did not restore its checkpoint"
  note "reelected: $(grep -o "its group made it leader again (term [0-9]*)" "$run/p1r0.log" | tail -1); it replayed" \
    "its log as a follower, then led in the row"
  qr_client "$cfg" --duration-s 3 --target-tps 10000 --connections 2 --seed 75 --json >"$QR_TMP/r3.out" \
    2>"$QR_TMP/r3.err" || fail "reelected: a client after the re-election failed: $(tail -5 "$QR_TMP/r3.err")"
  [[ "$(json_field "$QR_TMP/r3.out" replicas_agree)" == true ]] ||
    fail "reelected: replicas do not agree: $(json_field "$QR_TMP/r3.out" replicas_detail)"
  [[ "$(json_field "$QR_TMP/r3.out" committed)" -gt 0 ]] || fail "reelected: nothing committed after it"
  qr_down "$cfg" || fail "reelected: not every node stopped cleanly"
  local dir n
  dir="$(qr_dump_dir "$cfg")"
  for n in p0r1 p0r2; do cmp -s "$dir/p0r0.tsv" "$dir/$n.tsv" || fail "reelected: $n's dump differs from p0r0's"; done
  for n in p1r1 p1r2; do cmp -s "$dir/p1r0.tsv" "$dir/$n.tsv" || fail "reelected: $n's dump differs from p1r0's"; done
  [[ "$(($(dump_sum "$dir/p0r0.tsv") + $(dump_sum "$dir/p1r0.tsv")))" == 4000000 ]] ||
    fail "reelected: money not conserved"
  note "reelected: $(json_field "$QR_TMP/r3.out" committed) committed after it, replicas agree, dumps equal per group"
  QR_CONFIGS=()
}
zk=()
[[ "$backend" == zookeeper && -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")

for variant in "${variants[@]}"; do
  if [[ "$variant" == reelected ]]; then
    [[ "$backend" == raft ]] || fail "the reelected variant is raft's"
    reelected
    continue
  fi
  qr_grid_config "$QR_TMP/rejoin-$variant.yaml" "$backend" 2 3 \
    "workload:" "  kind: transfer" "transfer:" "  accounts: 4000" "  initial_balance: 1000" "  max_amount: 1500" \
    "  mp_ratio: 0.5" "batch:" "  txns: 500" "  timeout_ms: 5"
  cfg="$QR_TMP/rejoin-$variant.yaml"
  run="$QRSTORE_RUN_DIR/rejoin-$variant"
  ck=()
  [[ "$variant" == checkpoint ]] &&
    ck=("--server.checkpoint_dir=$QR_TMP/ck-$variant" "--server.checkpoint_every_batches=20")
  qr_up "$cfg" "${zk[@]+"${zk[@]}"}" "--replication.zookeeper.root=/qrstore-row-rejoin-$$-$variant" \
    --replication.zookeeper.session_timeout_ms=2000 "${ck[@]+"${ck[@]}"}"
  qr_client "$cfg" --duration-s 20 --target-tps 10000 --connections 2 --outstanding 500 --seed 71 --json \
    >"$QR_TMP/rejoin.out" 2>"$QR_TMP/rejoin.err" &
  client=$!
  sleep 5
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" p1r0 KILL
  note "$variant: p1r0 (partition 1's leader) killed"
  deadline=$((SECONDS + 30))
  until grep -q "failover: p1r[12] leads partition 1 now" "$QR_TMP/rejoin.err"; do
    ((SECONDS < deadline)) || fail "the client saw no failover of partition 1: $(tail -5 "$QR_TMP/rejoin.err")"
    kill -0 "$client" 2>/dev/null || fail "the client ended before the failover: $(tail -5 "$QR_TMP/rejoin.err")"
    sleep 0.2
  done
  leader="$(grep -o "failover: p1r[12] leads partition 1 now" "$QR_TMP/rejoin.err" | tail -1 | cut -d' ' -f2)"
  note "$variant: the client follows $leader; p1r0 started again"
  qr_up "$cfg"  # starts p1r0 only, with the first up's overrides
  log="$run/p1r0.log"
  [[ "$(grep -c "serving: partition 1 row 0" "$log")" == 2 ]] || fail "p1r0 did not start twice (see $log)"
  grep -q "$leader leads partition 1 (term [0-9]*): this node, its leader before a restart, starts as its follower" \
    "$log" || fail "p1r0 does not say it follows $leader (see $log)"
  if [[ "$variant" == checkpoint ]]; then
    grep -q "restored from .*checkpoint-" "$log" || fail "p1r0 did not restore its checkpoint (see $log)"
    grep -q "which a row's leader cannot do" "$log" && fail "p1r0 refused its checkpoint (see $log)"
    note "checkpoint: $(grep -o "restored from .*: the state after batch [0-9]*" "$log" | tail -1 | sed 's|/.*/||')"
  fi
  wait "$client" || fail "client failed: $(tail -15 "$QR_TMP/rejoin.err")"
  out="$QR_TMP/rejoin.out"
  [[ "$(json_field "$out" failovers)" -ge 1 ]] || fail "the client saw no failover"
  # The client is done: p1r0 catches up with its leader (a serving follower whose digest agrees,
  # as its leader's monitor sees it), and partition 1 has all three members serving again.
  deadline=$((SECONDS + 60))
  while :; do
    status="$("$QR_SRC/scripts/cluster.sh" status "$cfg" 2>&1)" || true
    row="$(awk '$1 == "p1r0"' <<<"$status")"
    read -r _ role state _ _ _ digest follows _ <<<"$row"
    [[ "$role" == follower && "$state" == serving && "$digest" == agrees && "$follows" == "$leader"@* ]] && break
    ((SECONDS < deadline)) || fail "p1r0 is not a serving follower of $leader that agrees: $status"
    sleep 0.5
  done
  note "status: $row"
  grep -Eq "^1 +$leader@[0-9]+ +3 of 3\$" <<<"$status" || fail "status: partition 1's leader and members: $status"
  grep -Eq "^0 +serving\$" <<<"$status" || fail "status: row 0 not serving: $status"
  in_doubt="$(json_field "$out" in_doubt)"
  committed="$(json_field "$out" committed_total)"
  aborted="$(json_field "$out" aborted_total)"
  submitted="$(json_field "$out" submitted)"
  ((committed > 0)) || fail "nothing committed"
  ((committed + aborted + in_doubt == submitted)) ||
    fail "submitted $submitted, but committed $committed + aborted $aborted + in doubt $in_doubt"
  note "client: $submitted submitted, $committed committed, $aborted aborted, $in_doubt in doubt"
  ((in_doubt == 0)) || fail "$in_doubt txns in doubt (sessions carry them to the successor)"
  # A client started now finds each partition's leader as it is (p1r0 is not), and the
  # rejoined p1r0 keeps up with what it runs.
  qr_client "$cfg" --txns 4000 --connections 2 --outstanding 500 --seed 72 --json >"$QR_TMP/after.out" \
    2>"$QR_TMP/after.err" || fail "a client started after the rejoin failed: $(tail -5 "$QR_TMP/after.err")"
  [[ "$(json_field "$QR_TMP/after.out" replicas_agree)" == true ]] ||
    fail "after the rejoin: replicas do not agree: $(json_field "$QR_TMP/after.out" replicas_detail)"
  note "a client started after the rejoin: $(json_field "$QR_TMP/after.out" committed) committed, replicas agree"
  qr_down "$cfg" || fail "not every node stopped cleanly (p1r0 included)"
  dir="$(qr_dump_dir "$cfg")"
  for n in p0r0 p0r1 p0r2 p1r0 p1r1 p1r2; do [[ -s "$dir/$n.tsv" ]] || fail "no dump of $n"; done
  for n in p0r1 p0r2; do cmp -s "$dir/p0r0.tsv" "$dir/$n.tsv" || fail "$n's dump differs from p0r0's"; done
  for n in p1r0 p1r1 p1r2; do
    cmp -s "$dir/$leader.tsv" "$dir/$n.tsv" || fail "$n's dump differs from its leader $leader's: $(
      diff "$dir/$leader.tsv" "$dir/$n.tsv" | head -4)"
  done
  note "$variant: every member of each group dumps its leader's state, p1r0 included"
  total=$(($(dump_sum "$dir/p0r0.tsv") + $(dump_sum "$dir/p1r0.tsv")))
  [[ "$total" == 4000000 ]] || fail "money not conserved across the partitions: $total"
  note "$variant: 4,000,000 conserved over both partitions (p1r0's dump)"
  QR_CONFIGS=()
done
echo PASS
