#!/usr/bin/env bash
# Network partitions under load, on test hosts: every node of a raft group in a network namespace
# of its own (scripts/hosts.sh), started over ssh by scripts/cluster.sh, driven by qrstore-client
# with sessions from this namespace (which every host still reaches), links cut and healed by
# scripts/netsplit.sh while the client runs (dropped packets: connections go silent).
#   leader    3 nodes: the leader n0 isolated from both followers, still reached by its clients.
#             A follower leads within a few election timeouts and the client commits through it;
#             n0 steps down by its quorum check, acknowledges nothing more and answers or closes
#             its connections: a second client that never asks the others who leads
#             (client.silent_leader_ms at its maximum) must still move, so n0 did not leave it
#             hanging. Healed, n0 rejoins as a follower without deposing the new leader. Prints
#             the time from the cut to the client's first commit after it.
#   leader-unreachable  3 nodes: as leader, but n0 is cut off from this namespace too (its
#             clients hear nothing from it, as from a paused process): client 1 must notice the
#             silence, find the new leader by asking the others and move within a few election
#             timeouts (there is no second client: nothing can reach it).
#   follower  3 nodes, transfer workload: the follower n2 isolated. The leader keeps its term and
#             commits never stop for a second; healed, n2 catches up and agrees, and n0 still
#             leads in the same term (n2's pre-votes deposed nobody).
#   split     5 nodes: {n0 (the leader), n1} split from {n2, n3, n4}: the majority elects a
#             leader and the client follows it (the second client too, as in leader); healed,
#             n0 rejoins as a follower, n1 catches up.
#   bridge    5 nodes: n2 a bridge between {n0 (the leader), n1} and {n3, n4}. n3 and n4 hear
#             no leader; the group keeps committing (at most a few election timeouts without a
#             commit) and healed, everyone follows one leader.
#   oneway    5 nodes: the leader's packets to n1 dropped (n1's to it delivered), healed; then
#             n2's packets to the leader dropped, healed. As bridge.
# The ZooKeeper backend (configs/cluster-zookeeper.yaml: its 3 s session, elections by ephemeral
# znodes, fenced writes): 3 nodes and a fourth host running the ZooKeeper server
# (scripts/zk-server.sh --bind, its address), so netsplit.sh can cut a node off it:
#   zk-leader-from-zk  the leader n0 split from the ZooKeeper host only: its followers and
#             clients still reach it. It can acknowledge nothing (its batches never reach
#             ZooKeeper) and cannot know its session expired; once ZooKeeper expired it, a
#             follower leads (about the session timeout after the cut) and client 1 moves to it.
#             Healed, n0 hears its session expired, is deposed, answers what it held `failed`,
#             so client 2 (which never asks who leads) moves, and n0 rejoins as a follower.
#   zk-leader-from-followers  n0 split from both followers, not from ZooKeeper: the followers
#             read the batches from ZooKeeper, not from n0, so nothing changes: n0 keeps its
#             epoch, commits never stop for a second and the followers keep applying during the
#             cut (their digest reports to n0 are what is cut); healed, all agree.
# Partitioned rows (2 partitions x 3 replicas on 6 hosts): row-leader and row-peer run
# partition_row_hosts_test.sh, which says what they check.
# Checked after the heal, against every node's dump after a clean `down` of all of them: the
# dumps are identical; no txn in doubt at any client; YCSB: the update counters sum to exactly
# the write ops the clients saw committed (an acknowledged txn lost, as a cut-off leader
# acknowledging alone would, makes the sum smaller; one run twice, larger); transfer: the money
# is what it was. Never two leaders acknowledging is proved by these from outside.
# Needs root and network namespaces (CI runs as root): without them it fails, saying so.
# Usage: partition_hosts_test.sh leader|leader-unreachable|follower|split|bridge|oneway|
#                                zk-leader-from-zk|zk-leader-from-followers|row-leader|row-peer
#   QR_ELECTION_TICKS (default 100: 1-2 s elections, the tests' timing for a loaded host; the
#   shipped configs/cluster-raft.yaml has 20) and QR_HEARTBEAT_TICKS (default 10) set the timing.
kind="${1:-}"
case "$kind" in row-*) exec bash "$(dirname "$0")/partition_row_hosts_test.sh" "$@" ;; esac
source "$(dirname "$0")/lib.sh"

backend=raft
case "$kind" in
  leader|leader-unreachable|follower) n=3 ;;
  split|bridge|oneway) n=5 ;;
  zk-leader-from-zk|zk-leader-from-followers) n=3 backend=zookeeper ;;
  *) echo "usage: $0 leader|leader-unreachable|follower|split|bridge|oneway|zk-leader-from-zk|zk-leader-from-followers|row-leader|row-peer" >&2; exit 2 ;;
esac
# ZooKeeper: one more host, the server's.
nhosts=$n
[[ "$backend" == zookeeper ]] && nhosts=$((n + 1))
election_ticks="${QR_ELECTION_TICKS:-100}"
heartbeat_ticks="${QR_HEARTBEAT_TICKS:-10}"
readonly tick_ms=10
election_max_ms=$((2 * election_ticks * tick_ms))  # a follower's timeout is drawn from [E, 2E)
workload=ycsb
[[ "$kind" == follower || "$kind" == zk-leader-from-followers ]] && workload=transfer
readonly accounts=20000 initial_balance=1000

started=$SECONDS
hosts_up "$nhosts"
zk_hosts=""
if [[ "$backend" == zookeeper ]]; then
  # The last host runs the ZooKeeper server, started there over ssh and listening on its address
  # only; the nodes are on the others.
  zk_addr="${addrs[$n]}"
  addrs=("${addrs[@]:0:n}")
  zk_dir="$QR_TMP/zk"
  zk_started=$SECONDS
  zk_hosts="$(ssh -F "$hosts_dir/ssh_config" "$zk_addr" \
    "$QR_SRC/scripts/zk-server.sh start $zk_dir --bind $zk_addr --heap-mb ${QRSTORE_ZK_HEAP_MB:-1024}" </dev/null)" ||
    fail "could not start ZooKeeper on the host $zk_addr (above)"
  note "ZooKeeper serving at $zk_hosts (its own host) $((SECONDS - zk_started)) s after its start"
fi

# configs/cluster-raft.yaml (raft, durable, checkpoints) with the hosts' addresses, n3 and n4 added
# for 5 nodes, a 50,000-record table (20,000 accounts for transfer) and the election timing above;
# or configs/cluster-zookeeper.yaml (durable, checkpoints, its 3 s session) with the server above.
cfg="$QR_TMP/part-$kind.yaml"
src_cfg="$QR_SRC/configs/cluster-$backend.yaml"
python3 - "$src_cfg" "$cfg" "$QR_TMP/dump-part-$kind" "$kind" "$workload" \
  "$election_ticks" "$heartbeat_ticks" "$accounts" "$initial_balance" "$zk_hosts" "${addrs[@]}" <<'PY' ||
import re, sys
src, out, dump, kind, workload, election, heartbeat, accounts, balance, zk_hosts, *addrs = sys.argv[1:]
text = open(src).read()
extra = "".join(
    "    - {name: n%d, host: 127.0.0.1, client_port: %d, peer_port: %d, partition: 0, row: %d}\n"
    % (i, 7100 + i, 7200 + i, i) for i in range(3, len(addrs)))
hosts = iter(addrs)
if zk_hosts:
    backend_keys = [
        (r'(?m)^(    hosts: )""', r"\g<1>" + zk_hosts, 1),
    ]
else:
    backend_keys = [
        (r"(?m)^(    election_ticks: )\d+", r"\g<1>" + election, 1),
        (r"(?m)^(    heartbeat_ticks: )\d+", r"\g<1>" + heartbeat, 1),
    ]
for pattern, repl, want in backend_keys + [
    (r"(?m)^(    - \{name: n2, .*\n)", lambda m: m.group(1) + extra, 1),
    (r"host: 127\.0\.0\.1", lambda m: "host: " + next(hosts), len(addrs)),
    (r"(?m)^(  name: )(raft|zk)3$", r"\g<1>part-" + kind, 1),
    (r"(?m)^(  kind: )ycsb( .*)?$", r"\g<1>" + workload, 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  records: )\d+", r"\g<1>50000", 1),
    (r"(?m)^(transfer:.*\n(?:  .*\n)*?  accounts: )\d+", r"\g<1>" + accounts, 1),
    (r"(?m)^(transfer:.*\n(?:  .*\n)*?  initial_balance: )\d+", r"\g<1>" + balance, 1),
    (r'(?m)^(  dump_state_dir: )""', r"\g<1>" + dump, 1),
    (r"(?m)^(  stats_interval_ms: )\d+", r"\g<1>1000", 1),
]:
    text, k = re.subn(pattern, repl, text)
    if k != want:
        sys.exit("%s: %r matched %d times, not %d" % (src, pattern, k, want))
open(out, "w").write(text)
PY
  fail "could not write $cfg from $src_cfg"
mkdir -p "$QR_TMP/dump-part-$kind"
QR_CONFIGS+=("$cfg")
while read -r name host _; do addr_of["$name"]="$host"; done < <("$QRSTORE_BIN/qrstore-server" --config "$cfg" --list-nodes)
nodes=()
for ((i = 0; i < n; i++)); do nodes+=("n$i"); done

qr_up "$cfg" --fresh >"$QR_TMP/up.out" 2>&1 || fail "cluster.sh up failed: $(tail -5 "$QR_TMP/up.out")"
run="$QRSTORE_RUN_DIR/part-$kind"
if [[ "$backend" == zookeeper ]]; then
  session_ms="$("$QRSTORE_BIN/qrstore-server" --config "$cfg" --get replication.zookeeper.session_timeout_ms)"
  note "$n hosts ${addrs[*]} and ZooKeeper's, cluster up over ssh in $((SECONDS - started)) s (ZooKeeper session ${session_ms} ms)"
else
  note "$n hosts ${addrs[*]}, cluster up over ssh in $((SECONDS - started)) s (elections ${election_ticks}0-${election_max_ms} ms)"
fi

# ---- what the nodes say -------------------------------------------------------------------------
other_leader() { status | awk -v not="$1" 'NR > 1 && $1 != not && $2 == "leader" && $3 == "serving" { print $1; exit }'; }
# Settled: every node answers and serves (a follower caught up: not catching-up or rejoining),
# exactly one leads, and every node names it in the same term. Prints "LEADER@TERM".
settled() {
  status | awk -v n="$n" '
    NR > 1 { rows++; named[$8]++
             if ($2 == "leader" && $3 == "serving") leaders++
             else if ($2 == "follower" && $3 == "serving") followers++ }
    END { k = 0; for (x in named) { k++; who = x }
          if (rows == n && leaders == 1 && followers == n - 1 && k == 1) print who }'
}

start_state="$(wait_for 30 "one leader (n0) and every node serving before the load" settled)"
[[ "$start_state" == n0@* ]] || fail "n0 does not lead at the start: $start_state"
term0="${start_state#*@}"
note "settled: $start_state"

# ---- the load ------------------------------------------------------------------------------------
# Client 1 (the ledger and the timeline): 2 connections with sessions, commits counted per 100 ms.
# Client 2 (leader, split): one connection that never asks the others who leads, so it moves
# only when the cut-off leader answers or closes its connection.
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --connections 2 --outstanding 2000 --seed 7 --json \
  --client.progress_interval_ms=100 >"$QR_TMP/client1.out" 2>"$QR_TMP/client1.err" &
client1=$!
client1_started=$SECONDS
client2=""
if [[ "$kind" == leader || "$kind" == split || "$kind" == zk-leader-from-zk ]]; then
  "$QRSTORE_BIN/qrstore-client" --config "$cfg" --duration-s 300 --connections 1 --outstanding 200 --target-tps 2000 \
    --seed 8 --json --client.silent_leader_ms=600000 >"$QR_TMP/client2.out" 2>"$QR_TMP/client2.err" &
  client2=$!
fi
sleep 3
kill -0 "$client1" 2>/dev/null || fail "client 1 ended early: $(tail -3 "$QR_TMP/client1.err")"

# ---- the cuts ------------------------------------------------------------------------------------
# The old leader deposed: its log says so within two quorum checks (2 x 2 election timeouts) of
# the cut, plus a second for a loaded host.
check_deposed() {
  local old="$1" t d
  wait_for $((4 * election_ticks * tick_ms / 1000 + 10)) "$old's log saying it was deposed" \
    grep -m1 "no longer leads the group" "$run/$old.log" >/dev/null
  t="$(node_log_time "$old" "no longer leads the group")"
  d="$(python3 -c "print('%.2f' % ($t - $cut_unix))")"
  note "$old stepped down $d s after the cut: $(grep -m1 "no longer leads the group" "$run/$old.log" | cut -c1-140)"
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 4 * $election_ticks * $tick_ms / 1000 + 1 else 1)" "$d" ||
    fail "$old stepped down $d s after losing its quorum, more than two quorum checks ($((4 * election_ticks * tick_ms)) ms) + 1 s"
}
# Client 2 moved off the cut-off leader because it answered or closed, not by looking around.
check_client2_moved() {
  local new="$1"
  wait_for 30 "client 2 (which never asks who leads) moving to $new" grep -m1 "failover: $new leads now" "$QR_TMP/client2.err" >/dev/null
  note "client 2 lost n0: $(grep -m1 "lost the leader" "$QR_TMP/client2.err" | sed 's/.*lost the leader/lost the leader/' | cut -c1-200)"
}

new_leader=""
case "$kind" in
  leader|leader-unreachable|split)
    if [[ "$kind" == leader ]]; then
      netcut isolate "$(a n0)"
    elif [[ "$kind" == leader-unreachable ]]; then
      netcut isolate "$(a n0)" --from-client
    else
      netcut split "$(set_of n0 n1)" "$(set_of n2 n3 n4)"
    fi
    new_leader="$(wait_for 20 "another node leading after the cut" other_leader n0)"
    note "$new_leader leads: $(grep -h "leads from batch" "$run/$new_leader.log" | tail -1 | cut -c1-140)"
    [[ "$kind" != split || "$new_leader" == n[234] ]] || fail "$new_leader, in the minority, leads"
    check_deposed n0
    wait_for 20 "client 1 moving to $new_leader" grep -m1 "failover: $new_leader leads now" "$QR_TMP/client1.err" >/dev/null
    note "client 1: $(grep -m1 "lost the leader" "$QR_TMP/client1.err" | sed 's/.*lost the leader/lost the leader/' | cut -c1-140)"
    note "client 1: $(grep -m1 "failover: $new_leader" "$QR_TMP/client1.err" | sed 's/.*failover/failover/')"
    [[ -z "$client2" ]] || check_client2_moved "$new_leader"
    # Nothing on the cut-off side (n0; split: n0 and n1) says it leads and serves meanwhile.
    cut_off="n0"
    [[ "$kind" == split ]] && cut_off="n0 n1"
    [[ -z "$(status | awk -v c=" $cut_off " 'NR > 1 && index(c, " " $1 " ") && $2 == "leader" && $3 == "serving"')" ]] ||
      fail "a node of the cut-off side ($cut_off) says it leads and serves: $(status)"
    sleep 2  # the client commits through the new leader while the cut holds
    netheal
    ;;
  zk-leader-from-zk)
    # n0 split from the ZooKeeper host alone: its followers and both clients still reach it.
    netcut split "$(a n0)" "$zk_addr"
    new_leader="$(wait_for $((3 * session_ms / 1000 + 20)) "another node leading after the cut" other_leader n0)"
    t="$(node_log_time "$new_leader" "leads from batch")"
    d="$(python3 -c "print('%.2f' % ($t - $cut_unix))")"
    note "$new_leader leads $d s after the cut (session ${session_ms} ms): $(grep -h "leads from batch" "$run/$new_leader.log" | tail -1 | cut -c1-140)"
    # ZooKeeper expires n0's session once it has heard nothing for the session timeout; the next
    # candidate in line then bumps the epoch, applies what it had not read yet (followers read
    # behind a loaded leader) and leads.
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 2 * $session_ms / 1000 + 4 else 1)" "$d" ||
      fail "$new_leader led $d s after n0 was cut off from ZooKeeper, more than twice the session timeout + 4 s"
    # n0 cannot tell its session expired (it hears nothing from ZooKeeper): it may still say it
    # leads, but nothing it takes reaches ZooKeeper, so it acknowledges nothing (the ledger below).
    note "n0 meanwhile: $(status | awk '$1 == "n0" { print $2, $3, $8 }')"
    wait_for 20 "client 1 moving to $new_leader" grep -m1 "failover: $new_leader leads now" "$QR_TMP/client1.err" >/dev/null
    note "client 1: $(grep -m1 "lost the leader" "$QR_TMP/client1.err" | sed 's/.*lost the leader/lost the leader/' | cut -c1-140)"
    note "client 1: $(grep -m1 "failover: $new_leader" "$QR_TMP/client1.err" | sed 's/.*failover/failover/')"
    sleep 2  # the client commits through the new leader while the cut holds
    ! grep -q "no longer leads the group" "$run/n0.log" || note "n0 was deposed before the heal: $(grep -m1 "no longer leads the group" "$run/n0.log" | cut -c1-160)"
    netheal
    # Healed: n0's ZooKeeper client reconnects and hears its session expired: n0 is deposed,
    # answers what it held `failed`, and client 2 (which never asks who leads) moves.
    wait_for $((session_ms / 1000 + 20)) "n0's log saying it was deposed after the heal" \
      grep -m1 "no longer leads the group" "$run/n0.log" >/dev/null
    t="$(node_log_time n0 "no longer leads the group")"
    note "n0 deposed $(python3 -c "print('%.2f' % ($t - ${heals[-1]}))") s after the heal: $(grep -m1 "no longer leads the group" "$run/n0.log" | cut -c1-160)"
    grep -q "session expired" "$run/n0.log" || fail "n0's log does not say its ZooKeeper session expired"
    check_client2_moved "$new_leader"
    ;;
  zk-leader-from-followers)
    # n0 split from both followers; all three still reach ZooKeeper and the clients reach all.
    before="$(status)"
    netcut split "$(a n0)" "$(set_of n1 n2)"
    sleep 5
    s="$(status)"
    [[ "$(awk '$1 == "n0" { print $2, $3, $8 }' <<<"$s")" == "leader serving n0@$term0" ]] ||
      fail "n0 does not lead in epoch $term0 while cut off from its followers: $s"
    # The followers keep applying: each at least half as many batches as n0 committed meanwhile
    # (they read ZooKeeper behind a loaded leader, never from it).
    l0="$(awk '$1 == "n0" { print $4 }' <<<"$before")" l1="$(awk '$1 == "n0" { print $4 }' <<<"$s")"
    for f in n1 n2; do
      [[ "$(awk -v f="$f" '$1 == f { print $2, $8 }' <<<"$s")" == "follower n0@$term0" ]] ||
        fail "$f does not follow n0 in epoch $term0 while cut off from it: $s"
      b0="$(awk -v f="$f" '$1 == f { print $4 }' <<<"$before")" b1="$(awk -v f="$f" '$1 == f { print $4 }' <<<"$s")"
      ((2 * (b1 - b0) >= l1 - l0 && b1 > b0)) ||
        fail "$f applied batches $b0 -> $b1 while cut off from n0, which committed $l0 -> $l1: it did not keep reading ZooKeeper"
      note "$f applied batches $b0 -> $b1 during the cut, from ZooKeeper (n0 committed $l0 -> $l1)"
    done
    note "n0 cut off from its followers for 5 s: it still leads in epoch $term0"
    netheal
    ;;
  follower)
    netcut isolate "$(a n2)"
    sleep 5
    s="$(status)"
    [[ "$(awk '$1 == "n0" { print $2, $3, $8 }' <<<"$s")" == "leader serving n0@$term0" ]] ||
      fail "n0 does not lead in term $term0 while n2 is cut off: $s"
    [[ "$(awk '$1 == "n1" { print $8 }' <<<"$s")" == "n0@$term0" ]] || fail "n1 does not follow n0 in term $term0: $s"
    note "n2 cut off for 5 s: n0 still leads in term $term0"
    netheal
    ;;
  bridge)
    netcut bridge "$(a n2)" "$(set_of n0 n1)" "$(set_of n3 n4)"
    sleep 6
    note "during the bridge: $(status | awk 'NR > 1 { printf "%s %s %s %s; ", $1, $2, $3, $8 }')"
    netheal
    ;;
  oneway)
    netcut oneway "$(a n0)" "$(a n1)"
    sleep 5
    note "n0 -> n1 dropped: $(status | awk 'NR > 1 { printf "%s %s %s %s; ", $1, $2, $3, $8 }')"
    netheal
    mid="$(wait_for 60 "every node serving under one leader after the first heal" settled)"
    note "healed: $mid"
    leader_now="${mid%@*}"
    # From a follower to whoever leads now.
    follower=n2
    [[ "$leader_now" == n2 ]] && follower=n3
    netcut oneway "$(a "$follower")" "$(a "$leader_now")"
    sleep 5
    note "$follower -> $leader_now dropped: $(status | awk 'NR > 1 { printf "%s %s %s %s; ", $1, $2, $3, $8 }')"
    netheal
    ;;
esac

# ---- after the heal ------------------------------------------------------------------------------
end_state="$(wait_for 60 "every node serving, caught up, under one leader after the heal" settled)"
note "after the heal: $end_state (settled $(python3 -c "import time; print('%.1f' % (time.time() - ${heals[-1]}))") s after it)"
s="$(status)"
! grep -q MISMATCH <<<"$s" || fail "a follower's digest does not match its leader's: $s"
end_leader="${end_state%@*}"
end_term="${end_state#*@}"
case "$kind" in
  leader|leader-unreachable|split|zk-leader-from-zk)
    [[ "$end_leader" == "$new_leader" ]] || fail "$end_leader leads after the heal, not $new_leader (the healed n0 deposed it?)"
    grep -q "rejoining its group as a follower" "$run/n0.log" || fail "n0's log does not say it rejoins as a follower"
    [[ ! -f "$run/n0.exit" ]] || fail "n0 exited with $(cat "$run/n0.exit") instead of rejoining"
    note "n0 rejoined as a follower: $(grep -h "rejoining its group as a follower" "$run/n0.log" | tail -1 | cut -c1-120)"
    ;;
  follower|zk-leader-from-followers)
    [[ "$end_state" == "n0@$term0" ]] || fail "after the heal $end_state leads, not n0 in term $term0"
    ;;
esac
# A few seconds of load with everyone back, then the clients end.
qr_interrupt_client "$client1" "$SECONDS" 2
[[ -z "$client2" ]] || kill -INT "$client2" 2>/dev/null || true
wait "$client1" || fail "client 1 failed: $(grep -v ' t=' "$QR_TMP/client1.err" | tail -5)"
if [[ -n "$client2" ]]; then wait "$client2" || fail "client 2 failed: $(grep -v ' t=' "$QR_TMP/client2.err" | tail -5)"; fi
note "clients ran $((SECONDS - client1_started)) s"
c1="$QR_TMP/client1.out"
clients=("$c1")
[[ -n "$client2" ]] && clients+=("$QR_TMP/client2.out")
for c in "${clients[@]}"; do
  [[ "$(json_field "$c" in_doubt)" == 0 ]] || fail "$c: $(json_field "$c" in_doubt) txns in doubt"
  [[ "$(json_field "$c" failed)" == 0 ]] || fail "$c: $(json_field "$c" failed) txns failed"
  [[ "$(json_field "$c" replicas_agree)" == true ]] || fail "$c: the replicas do not agree: $(json_field "$c" replicas_detail)"
  [[ "$(json_field "$c" leader)" == "$end_leader" ]] || fail "$c: the client ended on $(json_field "$c" leader), not $end_leader"
done
case "$kind" in
  leader|leader-unreachable|split|zk-leader-from-zk)
    for c in "${clients[@]}"; do
      [[ "$(json_field "$c" failovers)" == 1 ]] || fail "$c: $(json_field "$c" failovers) failovers, not 1"
    done
    (($(json_field "$c1" retried) > 0)) || fail "client 1 sent nothing again after the failover (it had txns in flight at n0)"
    ;;
  follower|zk-leader-from-followers)
    [[ "$(json_field "$c1" failovers)" == 0 ]] || fail "client 1 failed over $(json_field "$c1" failovers) times; the leader never changed"
    ;;
esac

# The timeline: per cut, the client's first commit after the longest stretch without one (the
# new leader's, for a cut-off leader), and whether commits stopped for a whole second.
printf '%s\n' "${cuts[@]}" >"$QR_TMP/cuts.txt"
printf '%s\n' "${heals[@]}" >"$QR_TMP/heals.txt"
# A new leader's first commit: within 3 x 2 election timeouts + 1 s (raft); within twice the
# session timeout + 4 s (ZooKeeper: the session expires, the successor applies what it had not
# read yet, then the client asks who leads).
leader_bound_s=$((3 * election_max_ms / 1000 + 1))
[[ "$backend" == zookeeper ]] && leader_bound_s=$((2 * session_ms / 1000 + 4))
python3 - "$c1" "$QR_TMP/cuts.txt" "$QR_TMP/heals.txt" "$kind" "$election_max_ms" "$leader_bound_s" <<'PY' || fail "the timeline check failed (above)"
import json, sys
cfile, cuts_f, heals_f, kind, election_max_ms = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
leader_bound_s = float(sys.argv[6])
j = json.loads([l for l in open(cfile).read().splitlines() if l.strip()][-1])
per, dt, t0 = j["committed_per_interval"], j["progress_interval_ms"] / 1000.0, float(j["timeline_start_unix_s"])
cuts = [(float(l.split()[0]) - t0, " ".join(l.split()[1:])) for l in open(cuts_f) if l.strip()]
heals = [float(l) - t0 for l in open(heals_f) if l.strip()]
ok = True
for (t, what), h in zip(cuts, heals):
    k, end = int(t / dt), min(len(per), int(h / dt) + 1)
    # the longest run of intervals without a commit after the cut (up to its heal)
    i, longest, x = None, 0, k + 1
    while x < end:
        if per[x] == 0:
            z = x
            while z < len(per) and per[z] == 0:
                z += 1
            if z - x > longest:
                longest, i = z - x, z
            x = z
        else:
            x += 1
    during = sum(per[k + 1:end])
    if i is None:
        print("-- %s: commits never stopped for %d ms until the heal %.1f s later (%d committed meanwhile)"
              % (what, dt * 1000, h - t, during))
        gap = 0.0
    else:
        first = (i + 1) * dt - t if i < len(per) else None
        gap = longest * dt
        print("-- %s: longest time without a commit %.1f s; first commit after it %s after the cut; %d committed until the heal %.1f s after the cut"
              % (what, gap, "%.2f s" % first if first is not None else "NEVER", during, h - t))
        if first is None:
            ok = False
    if kind in ("leader", "leader-unreachable", "split", "zk-leader-from-zk"):
        # a new leader within a few election timeouts (or the session), the client moved,
        # commits through it
        bound = leader_bound_s
        if i is None or (i + 1) * dt - t > bound:
            print("FAIL: the client's first commit after the cut of its leader came later than %.1f s" % bound)
            ok = False
    else:
        # the leader keeps its quorum (follower, bridge) or loses it for at most a few election
        # timeouts (one-way)
        bound = 1.0 if kind in ("follower", "zk-leader-from-followers") else 3 * election_max_ms / 1000 + 1
        if gap >= bound:
            print("FAIL: %.1f s without a commit during the cut (bound %.1f s)" % (gap, bound))
            ok = False
    if during == 0:
        print("FAIL: nothing committed between the cut and its heal")
        ok = False
print("-- client 1: %d committed, %d retried, failovers %d, longest without a commit %.0f ms, in doubt %d"
      % (j["committed_total"], j["retried"], j["failovers"], j["unavailable_ms"], j["in_doubt"]))
sys.exit(0 if ok else 1)
PY

# ---- every node's dump ---------------------------------------------------------------------------
down="$(qr_down "$cfg" 2>&1)" || fail "cluster.sh down failed: $down"
[[ "$(grep -c 'stopped cleanly' <<<"$down")" -eq "$n" ]] || fail "not every node stopped cleanly: $down"
dir="$(qr_dump_dir "$cfg")"
for x in "${nodes[@]}"; do [[ -s "$dir/$x.tsv" ]] || fail "$x wrote no dump at down"; done
qr_same_dumps "$cfg"
total="$(dump_sum "$dir/n0.tsv")"
if [[ "$workload" == transfer ]]; then
  [[ "$total" == $((accounts * initial_balance)) ]] || fail "money not conserved: $total, not $((accounts * initial_balance))"
  note "money conserved: $total"
else
  acked=0
  for c in "${clients[@]}"; do acked=$((acked + $(json_field "$c" update_ops_committed))); done
  ((total >= acked)) || fail "acknowledged updates lost: the counters sum to $total, the clients saw $acked committed"
  ((total == acked)) || fail "updates run twice or from nowhere: the counters sum to $total, the clients saw $acked committed"
  note "exactly once: the update counters sum to $total, what the clients saw committed"
fi
note "ran in $((SECONDS - started)) s"
echo PASS
