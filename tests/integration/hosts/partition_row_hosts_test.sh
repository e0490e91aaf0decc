#!/usr/bin/env bash
# Network partitions inside a partitioned row, on test hosts: configs/cluster-2x3-raft.yaml (2
# partitions x 3 replicas, raft, one group per partition) with every node on a network namespace
# of its own (scripts/hosts.sh: 6 hosts), started over ssh by scripts/cluster.sh, driven by
# qrstore-client with sessions from this namespace (which every host still reaches), YCSB with
# half the txns spanning both partitions; links cut and healed by scripts/netsplit.sh while the
# client runs. Names: p0 and p1 lead partitions 0 and 1 in the row (row 0); f0a, f0b follow p0 in
# partition 0's group, f1a, f1b follow p1 in partition 1's (docs/partitioned-rows.md, sections 6
# and 9: a follower replays its partition from its group's log alone and has no row peers).
#   row-leader  p0 split from its own group (f0a, f0b), still reaching its row peer p1, p1's
#             group and its clients. Group 0 elects f0a or f0b, which takes p0's place in the
#             row (it resumes with p1: RowResume) and the client moves partition 0's connections
#             to it; p0 steps down by its quorum check (it can replicate nothing, so it
#             acknowledges nothing and sends p1 nothing its group has not logged: Rule 1).
#             Healed, p0 rejoins its group as a follower. Partition 1 keeps its leader and term.
#   row-peer  p1 split from the rest of its row: its row peer p0 and every member of partition
#             0's group (f0a, f0b, which could take p0's place in the row), while p1 still reaches
#             its own group and its clients. Both groups keep their quorum, so nobody is elected:
#             the row stops (each batch needs both partitions) for the cut, shorter here than
#             row.peer_timeout_ms (10 s), and goes on after the heal with the same leaders and
#             terms. (Cutting p1's own group too is row-leader for partition 1.)
# Checked after the heal, against every node's dump after a clean `down`: within each partition
# every member's dump is identical; no txn in doubt or failed at the client; the replicas agree;
# the update counters of one dump per partition sum to exactly the write ops the client saw
# committed (an acknowledged txn lost makes the sum smaller, one run twice larger).
# Needs root and network namespaces (CI runs as root): without them it fails, saying so.
# Usage: partition_row_hosts_test.sh row-leader|row-peer (partition_hosts_test.sh runs it for
# these kinds). QR_ELECTION_TICKS (default 100: 1-2 s elections, the config's) sets the timing.
source "$(dirname "$0")/lib.sh"

kind="${1:-}"
case "$kind" in
  row-leader|row-peer) ;;
  *) echo "usage: $0 row-leader|row-peer" >&2; exit 2 ;;
esac
readonly n=6
election_ticks="${QR_ELECTION_TICKS:-100}"
readonly tick_ms=10
election_max_ms=$((2 * election_ticks * tick_ms))  # a follower's timeout is drawn from [E, 2E)
readonly cut_s=5                                  # row-peer: the cut, below row.peer_timeout_ms

started=$SECONDS
hosts_up "$n"

# configs/cluster-2x3-raft.yaml with the hosts' addresses, a 40,000-record table (20,000 a
# partition), half the txns multi-partition, a stats line a second and the election timing above.
cfg="$QR_TMP/part-$kind.yaml"
python3 - "$QR_SRC/configs/cluster-2x3-raft.yaml" "$cfg" "$QR_TMP/dump-part-$kind" "$kind" "$election_ticks" \
  "${addrs[@]}" <<'PY' ||
import re, sys
src, out, dump, kind, election, *addrs = sys.argv[1:]
text = open(src).read()
hosts = iter(addrs)
for pattern, repl, want in [
    (r"host: 127\.0\.0\.1", lambda m: "host: " + next(hosts), len(addrs)),
    (r"(?m)^(  name: )row2x3$", r"\g<1>part-" + kind, 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  records: )\d+", r"\g<1>40000", 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  mp_ratio: )[0-9.]+", r"\g<1>0.5", 1),
    (r'(?m)^(  dump_state_dir: )""', r"\g<1>" + dump, 1),
    (r"(?m)^(  stats_interval_ms: )\d+", r"\g<1>1000", 1),
    (r"(?m)^(    election_ticks: )\d+", r"\g<1>" + election, 1),
]:
    text, k = re.subn(pattern, repl, text)
    if k != want:
        sys.exit("configs/cluster-2x3-raft.yaml: %r matched %d times, not %d" % (pattern, k, want))
open(out, "w").write(text)
PY
  fail "could not write $cfg from configs/cluster-2x3-raft.yaml"
mkdir -p "$QR_TMP/dump-part-$kind"
QR_CONFIGS+=("$cfg")
declare -A part_of=()
while read -r name host _ _ part _; do addr_of["$name"]="$host" part_of["$name"]="$part"; done < <("$QRSTORE_BIN/qrstore-server" --config "$cfg" --list-nodes)
for x in p0 p1 f0a f0b f1a f1b; do [[ -n "${addr_of[$x]:-}" ]] || fail "no node $x in $cfg (configs/cluster-2x3-raft.yaml changed?)"; done
[[ "${part_of[p0]} ${part_of[f0a]} ${part_of[f0b]} ${part_of[p1]} ${part_of[f1a]} ${part_of[f1b]}" == "0 0 0 1 1 1" ]] ||
  fail "configs/cluster-2x3-raft.yaml's partitions are not as this test reads them"

# Checkpoints: the deposed p0 (row-leader) rejoins from its newest one.
qr_up "$cfg" --fresh --server.checkpoint_dir="$QR_TMP/checkpoints" --server.checkpoint_every_batches=100 \
  >"$QR_TMP/up.out" 2>&1 || fail "cluster.sh up failed: $(tail -5 "$QR_TMP/up.out")"
run="$QRSTORE_RUN_DIR/part-$kind"
note "$n hosts ${addrs[*]}, the 2 x 3 row up over ssh in $((SECONDS - started)) s (elections ${election_ticks}0-${election_max_ms} ms)"

# ---- what the nodes say -------------------------------------------------------------------------
# Settled: every node answers and serves, each partition has one leader that serves and every
# member of its group names it in one term. Prints "LEADER0@TERM LEADER1@TERM".
settled() {
  status | awk '
    BEGIN { split("p0 f0a f0b", g0); split("p1 f1a f1b", g1)
            for (i in g0) part[g0[i]] = 0; for (i in g1) part[g1[i]] = 1 }
    NR > 1 && ($1 in part) { rows++; p = part[$1]
             if ($3 != "serving") bad = 1
             if ($2 == "leader") { leaders[p]++; who[p] = $1 }
             named[p, $8]++; if (named[p, $8] == 1) kinds[p]++; name[p] = $8 }
    END { if (rows != 6 || bad) exit
          for (p = 0; p < 2; p++) if (leaders[p] != 1 || kinds[p] != 1 || index(name[p], who[p] "@") != 1) exit
          print name[0], name[1] }'
}
# The leader of partition $1 other than $2 that says it leads and serves, if any.
other_leader() {
  status | awk -v p="$1" -v not="$2" 'NR > 1 && $1 != not && $1 ~ ("^[pf]" p) && $2 == "leader" && $3 == "serving" { print $1; exit }'
}

start_state="$(wait_for 30 "one leader per partition (p0, p1) and every node serving before the load" settled)"
[[ "$start_state" == "p0@"*" p1@"* ]] || fail "p0 and p1 do not lead at the start: $start_state"
read -r lead0 lead1 <<<"$start_state"
note "settled: partition 0 $lead0, partition 1 $lead1"

# ---- the load ------------------------------------------------------------------------------------
# One client, 2 connections (one homed on each partition's leader) with sessions; commits counted
# per 100 ms.
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --connections 2 --outstanding 1000 --seed 7 --json \
  --client.progress_interval_ms=100 >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" &
client=$!
client_started=$SECONDS
sleep 3
kill -0 "$client" 2>/dev/null || fail "the client ended early: $(tail -3 "$QR_TMP/client.err")"

# ---- the cut -------------------------------------------------------------------------------------
new0=""
case "$kind" in
  row-leader)
    netcut split "$(a p0)" "$(set_of f0a f0b)"
    new0="$(wait_for 30 "another member of partition 0 leading after the cut" other_leader 0 p0)"
    t="$(node_log_time "$new0" "leads partition 0 in the row")"
    [[ -n "$t" ]] || t="$(wait_for 20 "$new0 taking p0's place in the row" node_log_time "$new0" "leads partition 0 in the row")"
    note "$new0 leads partition 0 in the row $(since "$t" "$cut_unix") s after the cut: $(grep -h "leads partition 0 in the row" "$run/$new0.log" | tail -1 | cut -c1-140)"
    # p0 steps down within two quorum checks (2 x 2 election timeouts) of the cut, plus a second.
    wait_for $((4 * election_max_ms / 2000 + 10)) "p0's log saying it was deposed" \
      grep -m1 "no longer leads the group" "$run/p0.log" >/dev/null
    d="$(since "$(node_log_time p0 "no longer leads the group")" "$cut_unix")"
    note "p0 stepped down $d s after the cut: $(grep -m1 "no longer leads the group" "$run/p0.log" | cut -c1-140)"
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 4 * $election_ticks * $tick_ms / 1000 + 1 else 1)" "$d" ||
      fail "p0 stepped down $d s after losing its group, more than two quorum checks + 1 s"
    wait_for 20 "p1 seeing partition 0's successor resume" \
      grep -m1 "partition 0's successor at .* resumed at batch" "$run/p1.log" >/dev/null
    note "p1: $(grep -m1 "partition 0's successor at .* resumed at batch" "$run/p1.log" | cut -c1-160)"
    wait_for 20 "the client moving partition 0's connections to $new0" \
      grep -m1 "failover: $new0 leads partition 0 now" "$QR_TMP/client.err" >/dev/null
    note "client: $(grep -m1 "failover: $new0" "$QR_TMP/client.err" | sed 's/.*failover/failover/')"
    [[ -z "$(status | awk '$1 == "p0" && $2 == "leader" && $3 == "serving"')" ]] ||
      fail "p0, cut off from its group, still says it leads and serves: $(status)"
    sleep 2  # the row commits with partition 0's new leader while the cut holds
    netheal
    ;;
  row-peer)
    netcut split "$(a p1)" "$(set_of p0 f0a f0b)"
    sleep "$cut_s"
    s="$(status)"
    note "during the cut: $(awk 'NR > 1 && NF >= 8 { printf "%s %s %s %s; ", $1, $2, $3, $8 }' <<<"$s")"
    [[ "$(awk '$1 == "p0" { print $2, $8 }' <<<"$s")" == "leader $lead0" ]] || fail "p0 no longer leads as $lead0 during the cut: $s"
    [[ "$(awk '$1 == "p1" { print $2, $8 }' <<<"$s")" == "leader $lead1" ]] || fail "p1 no longer leads as $lead1 during the cut: $s"
    netheal
    # The row goes on once TCP retransmits on its connections, after a back-off that grew through
    # the cut (on a loaded host longer than the 1.3-1.5 s seen here): the load goes on until p0
    # commits again, or the timeline check's bound passed, before the client is ended below.
    at_heal="$(status | awk '$1 == "p0" { print $5 }')"
    deadline=$((SECONDS + cut_s + 3))
    while ((SECONDS < deadline)) && [[ "$(status | awk '$1 == "p0" { print $5 }')" == "$at_heal" ]]; do sleep 0.2; done
    ;;
esac

# ---- after the heal ------------------------------------------------------------------------------
end_state="$(wait_for 60 "every node serving under one leader per partition after the heal" settled)"
note "after the heal: $end_state (settled $(python3 -c "import time; print('%.1f' % (time.time() - $heal_unix))") s after it)"
s="$(status)"
! grep -q MISMATCH <<<"$s" || fail "a follower's digest does not match its leader's: $s"
read -r end0 end1 <<<"$end_state"
[[ "$end1" == "$lead1" ]] || fail "partition 1 is led by $end1 after the heal, not $lead1 as before the cut"
case "$kind" in
  row-leader)
    [[ "$end0" == "$new0@"* ]] || fail "partition 0 is led by $end0 after the heal, not $new0 (the healed p0 deposed it?)"
    grep -q "rejoining its group as a follower" "$run/p0.log" || fail "p0's log does not say it rejoins as a follower"
    [[ ! -f "$run/p0.exit" ]] || fail "p0 exited with $(cat "$run/p0.exit") instead of rejoining"
    note "p0 rejoined as a follower: $(grep -h "rejoining its group as a follower" "$run/p0.log" | tail -1 | cut -c1-120)"
    ;;
  row-peer)
    [[ "$end0" == "$lead0" ]] || fail "partition 0 is led by $end0 after the heal, not $lead0 as before the cut"
    ;;
esac
# A few seconds of load with everyone back, then the client ends.
qr_interrupt_client "$client" "$SECONDS" 2
wait "$client" || fail "the client failed: $(grep -v ' t=' "$QR_TMP/client.err" | tail -5)"
note "the client ran $((SECONDS - client_started)) s"
c="$QR_TMP/client.out"
[[ "$(json_field "$c" in_doubt)" == 0 ]] || fail "$(json_field "$c" in_doubt) txns in doubt"
[[ "$(json_field "$c" failed)" == 0 ]] || fail "$(json_field "$c" failed) txns failed"
[[ "$(json_field "$c" replicas_agree)" == true ]] || fail "the replicas do not agree: $(json_field "$c" replicas_detail)"
case "$kind" in
  row-leader)
    [[ "$(json_field "$c" failovers)" == 1 ]] || fail "$(json_field "$c" failovers) failovers, not 1"
    (($(json_field "$c" retried) > 0)) || fail "the client sent nothing again after the failover (it had txns in flight at p0)"
    ;;
  row-peer)
    [[ "$(json_field "$c" failovers)" == 0 ]] || fail "the client failed over $(json_field "$c" failovers) times; no leader changed"
    ;;
esac

# The timeline: the longest stretch without a commit after the cut, the first commit after it,
# and (row-peer) the first commit after the heal.
python3 - "$c" "$cut_unix" "$heal_unix" "$kind" "$election_max_ms" <<'PY' || fail "the timeline check failed (above)"
import json, sys
cfile, cut, heal, kind, election_max_ms = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
j = json.loads([l for l in open(cfile).read().splitlines() if l.strip()][-1])
per, dt, t0 = j["committed_per_interval"], j["progress_interval_ms"] / 1000.0, float(j["timeline_start_unix_s"])
k, h = int((cut - t0) / dt), int((heal - t0) / dt)
longest, end_of_longest, x = 0, None, k + 1
while x < len(per):
    if per[x] == 0:
        z = x
        while z < len(per) and per[z] == 0:
            z += 1
        if z - x > longest:
            longest, end_of_longest = z - x, z
        x = z
    else:
        x += 1
after_heal = next((i for i in range(h + 1, len(per)) if per[i] > 0), None)
first = None if end_of_longest is None or end_of_longest >= len(per) else (end_of_longest + 1) * dt - (cut - t0)
print("-- longest time without a commit after the cut %.1f s; first commit after it %s after the cut; %d committed until the heal %.1f s after the cut; first commit after the heal %s"
      % (longest * dt, "%.2f s" % first if first is not None else "-", sum(per[k + 1:h + 1]), heal - cut,
         "%.2f s after it" % ((after_heal + 1) * dt - (heal - t0)) if after_heal is not None else "NEVER"))
print("-- client: %d committed, %d retried, failovers %d, longest without a commit %.0f ms, in doubt %d"
      % (j["committed_total"], j["retried"], j["failovers"], j["unavailable_ms"], j["in_doubt"]))
ok = after_heal is not None
if kind == "row-leader":
    # the successor resumes the row within a few election timeouts; the client commits through it
    bound = 3 * election_max_ms / 1000 + 2
    if first is None or first > bound or sum(per[k + 1:h + 1]) == 0:
        print("FAIL: no commit through partition 0's new leader within %.1f s of the cut" % bound)
        ok = False
else:
    # the row waits out the cut and goes on soon after the heal: TCP retransmits what the row's
    # connections had unacknowledged with a back-off that doubles from 200 ms, so its next try
    # comes at most about as long after the heal as the cut lasted; 2 s more for a loaded host.
    bound = (heal - cut) + 2.0
    if after_heal is None or (after_heal + 1) * dt - (heal - t0) > bound:
        print("FAIL: the row did not commit within %.1f s of the heal" % bound)
        ok = False
sys.exit(0 if ok else 1)
PY

# ---- every node's dump ---------------------------------------------------------------------------
down="$(qr_down "$cfg" 2>&1)" || fail "cluster.sh down failed: $down"
[[ "$(grep -c 'stopped cleanly' <<<"$down")" -eq "$n" ]] || fail "not every node stopped cleanly: $down"
dir="$(qr_dump_dir "$cfg")"
for p in 0 1; do
  members=("p$p" "f${p}a" "f${p}b")
  for x in "${members[@]}"; do [[ -s "$dir/$x.tsv" ]] || fail "$x wrote no dump at down"; done
  for x in "${members[@]:1}"; do
    cmp -s "$dir/p$p.tsv" "$dir/$x.tsv" || fail "partition $p: $x's dump differs from p$p's: $(diff "$dir/p$p.tsv" "$dir/$x.tsv" | head -3)"
  done
  note "partition $p: p$p, f${p}a and f${p}b dump the same state"
done
total=$(($(dump_sum "$dir/p0.tsv") + $(dump_sum "$dir/p1.tsv")))
acked="$(json_field "$c" update_ops_committed)"
((total >= acked)) || fail "acknowledged updates lost: the counters of both partitions sum to $total, the client saw $acked committed"
((total == acked)) || fail "updates run twice or from nowhere: the counters of both partitions sum to $total, the client saw $acked committed"
note "exactly once: the update counters of both partitions sum to $total, what the client saw committed"
note "ran in $((SECONDS - started)) s"
echo PASS
