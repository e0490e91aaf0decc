#!/usr/bin/env bash
# A short chaos run (scripts/chaos.sh, docs/chaos.md) on a group of three (rf = 2) under load:
# for 45 s its nodes are killed, paused and restarted one at a time on a schedule drawn from a
# fixed seed (printed, with the command that replays it), the leader among them; the client
# follows every failover. chaos.sh itself checks the end: the client exited 0 with no txn in
# doubt, every node serving and caught up, `down` clean, every node's dump identical, exactly
# once (YCSB: the update counters sum to the client's update_ops_committed; transfer: money
# conserved). Here, on top: the schedule was run (kills, pauses and a failover happened) and
# restarted nodes loaded a checkpoint.
#   raft       the memory log; YCSB
#   zookeeper  a 2 s session (a killed or paused leader is replaced 2 s after it went silent);
#              the transfer workload
#   raft row   a partitioned row, 2 partitions x 3 rows (docs/partitioned-rows.md 9.5-9.6): YCSB
#              with half the txns multi-partition and 20% dependent writes; one node of the grid
#              away at a time, partition leaders among them (each fails over in its row; the
#              dead leader rejoins as a follower); dumps compared within each partition
#   zookeeper row  the same grid with ZooKeeper (a 2 s session) and transfers (half of them
#              across the partitions): money conserved over the partitions
# QRSTORE_CHAOS_SEED overrides the fixed seed (e.g. to try a few more by hand).
# Usage: chaos_test.sh raft|zookeeper [row]
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
shape="${2:-group}"
cfg="$QR_TMP/chaos.yaml"
# A small table and batches, so a restart (load a checkpoint, catch up) takes well under a second.
if [[ "$shape" == row ]]; then
  qr_grid_config "$cfg" "$backend" 2 3 "ycsb:" "  records: 20000" "  ops_per_txn: 8" "  mp_ratio: 0.5" \
    "  dep_ratio: 0.2" "batch:" "  txns: 2000" "  timeout_ms: 5"
else
  qr_config "$cfg" "$backend" 3 "ycsb:" "  records: 20000" "  ops_per_txn: 8" \
    "transfer:" "  accounts: 20000" "  initial_balance: 1000" "batch:" "  txns: 2000" "  timeout_ms: 5"
fi
# Seed 2: the leader killed (2.6 s), restarted, paused four times (1.0-2.4 s: the longer ones
# past the election timeout or the ZooKeeper session, so it comes back deposed and exits 3),
# then a follower killed (scripts/chaos.sh ... --seed 2 --dry-run prints it).
# Row, seed 1: partition 0's leader restarted, then killed, then paused; partition 1's leader
# paused, then killed; a follower restarted and killed; partition 0's new leader killed.
seed="${QRSTORE_CHAOS_SEED:-2}"
[[ "$shape" == row ]] && seed="${QRSTORE_CHAOS_SEED:-1}"
opts=()
if [[ "$backend" == zookeeper ]]; then
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && opts+=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  opts+=(--replication.zookeeper.session_timeout_ms=2000 --workload.kind=transfer)
fi
# The load is capped (20,000 txn/s) so the other tests sharing the 2 cores keep theirs, and so a
# node away for 3 s is well within what the leader's log (raft) or ZooKeeper's retained batches
# (32 MiB) still hold for it.
out="$QR_TMP/chaos.out"
set +e
"$QR_SRC/scripts/chaos.sh" "$cfg" --duration-s 45 --seed "$seed" --dir "$QR_TMP/chaos" --target-tps 20000 \
  "${opts[@]+"${opts[@]}"}" 2>&1 | tee "$out"
code=${PIPESTATUS[0]}
set -e
((code == 0)) || fail "chaos.sh failed (exit $code): see its problems above; replay with the seed $seed"
grep -q "^chaos: PASS" "$out" || fail "chaos.sh did not say PASS"
count() { awk -v k="$1" '$2 == k { print $3 }' "$out"; }
kills="$(count kills)" pauses="$(count pauses)"
((kills > 0 && pauses > 0)) || fail "the schedule did not run: $kills kill(s), $pauses pause(s)"
promotions="$(awk '$2 == "failovers" { print $3 }' "$out")"
((promotions >= 1)) || fail "no failover happened (no node logged 'leads from batch' or 'leads partition N in the row')"
restored="$(awk '$2 == "checkpoints" { print $3 }' "$out")"
((restored >= 1)) || fail "no restarted node loaded a checkpoint"
note "$kills kill(s), $pauses pause(s), $promotions promotion(s), $restored restart(s) from a checkpoint"
echo PASS
