#!/usr/bin/env bash
# What a former leader says while it starts again: n0, the config's row 0, executes itself again
# after it was deposed (QRSTORE_REJOINS=1, as server_main sets it) into a raft group of 3 whose
# other members are down, so no leader can be elected and its backend names none. Its status
# must not name n0 itself as the group's leader: a client that finds its leader silent asks the
# group who leads, and would move to n0 on its word. It must say rejoining, or follower, and
# name nobody; its ready line must not call it a follower of itself.
source "$(dirname "$0")/lib.sh"
qr_config "$QR_TMP/rejoin-status.yaml" raft 3 "ycsb:" "  records: 2000"
cfg="$QR_TMP/rejoin-status.yaml"
QRSTORE_REJOINS=1 "$QRSTORE_BIN/qrstore-server" --config "$cfg" --node n0 --replication.raft.log=memory \
  >"$QR_TMP/n0.out" 2>"$QR_TMP/n0.err" &
n0=$!
trap 'kill -KILL $n0 2>/dev/null || true; qr_cleanup' EXIT
for _ in $(seq 1 100); do
  grep -q "qrstore-server ready" "$QR_TMP/n0.out" && break
  kill -0 "$n0" 2>/dev/null || fail "n0 exited: $(tail -5 "$QR_TMP/n0.err")"
  sleep 0.1
done
ready="$(grep -h "qrstore-server ready" "$QR_TMP/n0.out" || true)"
[[ -n "$ready" ]] || fail "n0 did not print its ready line within 10 s: $(tail -5 "$QR_TMP/n0.err")"
[[ "$ready" != *"follower of n0"* ]] || fail "n0's ready line calls it a follower of itself: $ready"
note "ready: $ready"
# Asked a few times over a second (elections come and go without a majority).
for _ in 1 2 3 4 5; do
  row="$("$QRSTORE_BIN/qrstore-client" --config "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null |
    awk '$1 == "n0"' || true)"
  [[ -n "$row" ]] || fail "n0 did not answer --status"
  read -r _ role state _ _ _ _ leader _ <<<"$row"
  [[ "$role" != leader ]] || fail "n0 leads with 2 of 3 members down: $row"
  [[ "$leader" != n0@* ]] || fail "n0, not leading, names itself leader in its status: $row"
  sleep 0.2
done
note "n0 starting again: role $role, state $state, leader '$leader' (none: no one named)"
# (a follower without a leader would wait out its drain time to stop cleanly: not what this
# test is about)
kill -KILL "$n0"
wait "$n0" 2>/dev/null || true
