#!/usr/bin/env bash
# A damaged entry reaching the followers of a partitioned row (raft, 2 partitions x 3 rows):
# every leader damages its group's stream 0 entry of one batch on its way to replication (the
# test hook server.test_corrupt_slice_batch), so all four followers refuse it and stop applying,
# while the leaders, their execution untouched, go on committing (a failed follower still
# acknowledges its group's log). Then `down`: the failed followers stay voters until the leader
# they followed is gone (as on one partition, 6f613b1), so each leader's end markers still get a
# majority and both leaders stop cleanly; the followers exit with status 1, nothing hangs, no
# process is left; and the leaders' dumps hold every write the client saw acknowledged, once.
source "$(dirname "$0")/lib.sh"
bad_batch=20
qr_grid_config "$QR_TMP/rowbad.yaml" raft 2 3 \
  "ycsb:" "  records: 20000" "  mp_ratio: 0.5" "batch:" "  txns: 200" "  timeout_ms: 5" "engine:" "  key_space: 20000"
cfg="$QR_TMP/rowbad.yaml"
qr_up "$cfg" "--server.test_corrupt_slice_batch=$bad_batch"
# Past the damaged batch; the client's own verdict is not the point (the followers fail).
qr_client "$cfg" --txns 20000 --connections 2 --outstanding 400 --seed 7 --json >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" || true
committed="$(json_field "$QR_TMP/client.out" committed)"
[[ "$committed" =~ ^[0-9]+$ ]] && ((committed >= 10000)) || fail "the leaders did not go on committing: $(tail -3 "$QR_TMP/client.err")"
note "the leaders committed $committed txns past batch $bad_batch"
for f in p0r1 p0r2 p1r1 p1r2; do
  ok=0
  for ((i = 0; i < 300; i++)); do
    if "$QR_SRC/scripts/cluster.sh" logs "$cfg" "$f" --lines 400 2>/dev/null | grep -q "bad slice (batch $bad_batch,"; then ok=1; break; fi
    sleep 0.1
  done
  ((ok)) || fail "follower $f did not refuse batch $bad_batch: $("$QR_SRC/scripts/cluster.sh" logs "$cfg" "$f" --lines 20)"
done
note "every follower refused batch $bad_batch"
t0=$SECONDS
set +e
down="$(qr_down "$cfg" 2>&1)"
rc=$?
set -e
took=$((SECONDS - t0))
echo "$down"
for l in p0r0 p1r0; do
  grep -q "node $l stopped cleanly" <<<"$down" || fail "leader $l did not stop cleanly"
done
for f in p0r1 p0r2 p1r1 p1r2; do
  grep -q "node $f stopped with status 1" <<<"$down" || fail "failed follower $f did not exit with status 1"
done
((rc != 0)) || fail "down did not report the failed followers"
((took < 60)) || fail "down took $took s"
pgrep -f "$cfg" >/dev/null && fail "processes of $cfg are left"
note "down: both leaders stopped cleanly, the failed followers with status 1, in $took s"
# What the client saw acknowledged against the leaders' dumps (the followers stopped at the
# damaged batch: their tables are a prefix): nothing in doubt, every write there exactly once.
in_doubt="$(json_field "$QR_TMP/client.out" in_doubt)"
((in_doubt == 0)) || fail "$in_doubt txns in doubt"
dir="$(qr_dump_dir "$cfg")"
total=$(($(dump_sum "$dir/p0r0.tsv") + $(dump_sum "$dir/p1r0.tsv")))
acked="$(json_field "$QR_TMP/client.out" update_ops_committed)"
((acked > 0 && total == acked)) || fail "the leaders' update counters sum to $total; the client saw $acked write ops committed"
note "exactly once: the leaders' update counters sum to $total = the write ops acknowledged, 0 in doubt"
