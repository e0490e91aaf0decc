#!/usr/bin/env bash
# A follower killed with SIGKILL under load (raft, rf = 2): the leader keeps committing and the
# client sees no error; the follower, restarted, catches up (from batch 0: the leader's Raft log
# still holds every batch, replication.raft.max_log_bytes is raised so it does) and agrees on the
# digest; after `down` every dump is identical.
source "$(dirname "$0")/lib.sh"
# (qr_config writes the replication section; a second one would be a key given twice.)
qr_config "$QR_TMP/kill.yaml" raft 3 "ycsb:" "  records: 50000" "  ops_per_txn: 8" "batch:" "  txns: 2000" \
  "  timeout_ms: 5"
cfg="$QR_TMP/kill.yaml"
qr_up "$cfg" --replication.raft.max_log_bytes=4294967296
qr_client "$cfg" --duration-s 12 --connections 2 --outstanding 3000 --seed 31 --json >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
sleep 3
"$QR_SRC/scripts/cluster.sh" kill "$cfg" n2 KILL
sleep 3
qr_up "$cfg"  # restarts n2 only
note "n2 restarted"
wait "$client" || fail "client failed: $(tail -5 "$QR_TMP/client.err")"
[[ "$(json_field "$QR_TMP/client.out" failed)" == 0 ]] || fail "the client saw failed txns"
[[ "$(json_field "$QR_TMP/client.out" committed)" -gt 0 ]] || fail "nothing committed"
[[ "$(json_field "$QR_TMP/client.out" replicas_agree)" == true ]] || fail "the restarted follower did not catch up and agree"
[[ "$(json_field "$QR_TMP/client.out" digest_mismatches)" == 0 ]] || fail "digest mismatches"
note "client: $(json_field "$QR_TMP/client.out" committed) committed, no error, replicas agree"
qr_down "$cfg"
qr_same_dumps "$cfg"
echo PASS
