#!/usr/bin/env bash
# One follower never stops the group (rf = 2). Under full load, follower n2 is paused
# (SIGSTOP) or killed and restarted, for longer than its backend keeps what it needs:
#   raft: the leader's log passes a small replication.raft.max_log_bytes, so the entries n2
#         needs are compacted away (no server.checkpoint_dir: nothing to continue it from;
#         transfer_test.sh brings such a follower back with checkpoints);
#   zookeeper: the leader's retained batches pass a small replication.zookeeper.retain_bytes,
#         and it deletes batches n2 has not read (the leader waits only for the live followers
#         a majority needs: n1).
# Checked from outside:
#   - the client's commits per second never drop to 0 (one dip allowed, at the resume), it ends
#     with no failed txn and no error;
#   - the leader reports n2 stranded (status, client summary), n2 itself says so (its state);
#   - the leader and n1 agree (digests, and their dumps are identical), n2 is not counted;
#   - `down` stops n0 and n1 cleanly and names n2 as the one it could not stop cleanly, fast.
# Usage: stranded_follower_test.sh raft|zookeeper pause|kill
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
how="${2:?pause or kill}"
cfg="$QR_TMP/stranded.yaml"
qr_config "$cfg" "$backend" 3 "ycsb:" "  records: 50000" "  ops_per_txn: 8" "batch:" "  txns: 2000" "  timeout_ms: 5"
if [[ "$backend" == raft ]]; then
  # 8 MB of log (a few seconds at full load here), and budgets that fit it.
  qr_up "$cfg" --replication.raft.max_log_bytes=8388608 --replication.raft.max_lag_bytes=2097152 \
    --replication.raft.max_uncommitted_bytes=2097152 --replication.max_payload_bytes=2097152
  why="no longer holds the entries this member needs"
else
  zk=()
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  # 16 MB kept in ZooKeeper (a few seconds at full load); a short session, so a killed or
  # paused follower stops counting as live soon (the server clamps it to 2 ticks at least).
  # (The leader waits only for the most advanced live follower, so n1 too is stranded if it
  # falls that far behind n2 before n2 goes away: with 4 MB, CI saw it on a busy host.)
  qr_up "$cfg" "${zk[@]+"${zk[@]}"}" --replication.zookeeper.retain_bytes=16777216 \
    --replication.zookeeper.session_timeout_ms=4000
  why="fell behind"
fi
# (a paused node never answers: ask with a short time-out)
status() { qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true; }
# n2's row of `cluster.sh status`: "n2 follower STATE batches committed lag DIGEST error..."
n2_row() { status | awk '$1 == "n2"'; }

# The load runs until n2 says it is stranded (25 s at least; 300 s: a bound), then is interrupted:
# a fixed 30 s could end before the steps below on a busy host.
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --connections 2 --outstanding 3000 --seed 41 --json \
  >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
client_start=$SECONDS
sleep 4
if [[ "$how" == pause ]]; then
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n2 STOP
else
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n2 KILL
fi
# The leader goes on and compacts past n2's position: it says n2 is stranded.
wait_n2_stranded "$cfg" "$client"
sleep 2
if [[ "$how" == pause ]]; then
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n2 CONT
else
  qr_up "$cfg"  # restarts n2 only
fi
# n2 learns it from the leader's heartbeats and says so itself.
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  [[ "$(n2_row | awk '{ print $3 }')" == stranded ]] && break
  sleep 0.1
done
row="$(n2_row)"
[[ "$(awk '{ print $3 }' <<<"$row")" == stranded ]] || fail "n2 does not say it is stranded: $row"
grep -q "$why" <<<"$row" || fail "n2's status does not say why: $row"
note "n2 says: $(cut -c1-160 <<<"$row")..."

qr_interrupt_client "$client" "$client_start" 25
wait "$client" || fail "client failed: $(tail -5 "$QR_TMP/client.err")"
out="$QR_TMP/client.out"
[[ "$(json_field "$out" failed)" == 0 ]] || fail "the client saw failed txns"
[[ "$(json_field "$out" errors)" == 0 ]] || fail "the client saw errors"
[[ "$(json_field "$out" replicas_agree)" == true ]] || fail "n0 and n1 do not agree: $(json_field "$out" replicas_detail)"
[[ "$(json_field "$out" digest_mismatches)" == 0 ]] || fail "digest mismatches"
[[ "$(json_field "$out" stranded_followers)" == "['n2']" ]] ||
  fail "the client summary does not name n2 stranded: $(json_field "$out" stranded_followers)"
# Commits per second: never 0, but for at most one dip (the resume); the first and last
# intervals are partial.
commits_never_stop "$out" || fail "the group stopped committing while n2 was away or after it came back"
note "client: $(json_field "$out" committed) committed, none failed; n0 and n1 agree"

# down: n0 and n1 stop cleanly; n2 is named, and does not hold the others up.
start=$SECONDS
if qr_down "$cfg" >"$QR_TMP/down.out" 2>&1; then fail "down did not report n2: $(cat "$QR_TMP/down.out")"; fi
cat "$QR_TMP/down.out" | grep -v '^[0-9]' || true
grep -q "node n0 stopped cleanly" "$QR_TMP/down.out" || fail "n0 did not stop cleanly"
grep -q "node n1 stopped cleanly" "$QR_TMP/down.out" || fail "n1 did not stop cleanly"
grep -q "not cleanly: n2" "$QR_TMP/down.out" || fail "down does not name n2"
grep -q "stranded, not waiting for the leader's end" "$QR_TMP/down.out" || fail "n2's log does not say why it stopped"
((SECONDS - start < 30)) || fail "down took $((SECONDS - start)) s"
dir="$(qr_dump_dir "$cfg")"
[[ ! -e "$dir/n2.tsv" ]] || fail "stranded n2 wrote a dump"
rm -f "$dir/n2.tsv"
qr_same_dumps "$cfg"
echo PASS
