#!/usr/bin/env bash
# A dead row leader started again rejoins its group as a follower (issue 22, item 2;
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
# has one fate or is in doubt; every node stops cleanly; every member of each group, p1r0
# included, dumps the same state as its leader; money summed over the partitions is conserved.
# ZooKeeper deletes the batches a majority read, so there p1r0 needs its checkpoint: the default
# is that variant alone (plain ends with p1r0 stranded, as any follower restarted from batch 0).
# Usage: row_rejoin_test.sh BACKEND [VARIANT ...]   (VARIANT: plain | checkpoint; default both,
# zookeeper: checkpoint)
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
shift
variants=("$@")
if ((${#variants[@]} == 0)); then
  variants=(plain checkpoint)
  [[ "$backend" == zookeeper ]] && variants=(checkpoint)
fi
zk=()
[[ "$backend" == zookeeper && -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")

for variant in "${variants[@]}"; do
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
    grep -q "cannot restart from checkpoints" "$log" && fail "p1r0 refused its checkpoint (see $log)"
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
