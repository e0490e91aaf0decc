#!/usr/bin/env bash
# The leader of a group of three (rf = 2; raft, or ZooKeeper with its election) is lost under full
# load; a follower takes over and serves. With ZooKeeper a killed or paused leader is replaced
# once ZooKeeper expires its session (2 s here).
#   kill           SIGKILL n0 (YCSB load; SIGSTOP 0.3 s before, so txns are surely in flight);
#   kill-transfer  SIGKILL n0 (transfer load: money must be conserved);
#   pause          SIGSTOP n0 past the election timeout, then SIGCONT: the old leader must find
#                  itself deposed, acknowledge nothing more and rejoin by itself: it executes
#                  itself again (same pid, no exit), follows the new leader, catches up and at
#                  the end holds what the others hold (ZooKeeper: with checkpoints, so it can
#                  fetch one, the batches before it being gone from ZooKeeper);
#   cutoff         raft: n0 cut off from its peers, still reachable by clients (the transport's
#                  test hook replication.raft.test_isolate_file): with CheckQuorum it steps down
#                  within two quorum checks, acknowledges nothing more, and once the cut is
#                  healed rejoins by itself as above. zookeeper: n0 cut off from the ZooKeeper
#                  server while its followers and clients still reach it (every node reaches
#                  ZooKeeper through scripts/zk-cut-proxy.py, which drops n0's traffic both ways
#                  and leaves its connections silent, as a dropped link does): it can commit
#                  nothing more; a follower leads once ZooKeeper expired n0's session (2 s here,
#                  checked: within 6 s of the cut); healed, n0 finds its session expired, is
#                  deposed and rejoins by itself as above;
#   kill-before-reply  n0 kills itself once a slice has committed (replicated) but before it
#                  answers it (server.test_kill_before_reply_file): the client sends those txns
#                  again and the new leader answers them from its session table, without
#                  running them twice, and with the values they read, recomputed from its write
#                  histories (history reads: none answered without values); --verify checks every
#                  txn's fate and read values (the retries' too) against the serial reference;
#   kill-before-reply-short-history  the same with write histories far too short to reach back to
#                  the retried txns (server.session_history_bytes=64K): the retries are answered
#                  committed-no-values (fate and position; committed_no_values > 0), never run
#                  twice, and --verify checks their fates;
#   kill-before-reply-values  the same with server.session_read_values: the followers keep read
#                  values too, so the retries get their original values: none is answered without
#                  them, and --verify checks every txn's fate and read values (the retries' too)
#                  against the serial reference.
#   kill-at-end    (raft) n0 paused about 2 s before the client's 6 s are up and killed 0.3 s
#                  later, with a 3 s election time-out: the failover is under way when the
#                  client's time runs out (or, on a slow host, its leader dies during its drain);
#                  either way it finishes the failover (the new leader answers what n0 left
#                  unanswered) before it ends.
#   stop           SIGTERM n0 alone: a clean stop (its end markers are an empty batch to the
#                  others, who elect a leader that goes on after them); n0 exits 0 with a dump
#                  of its last batch (not compared: the others went on).
# Checked from outside:
#   - within 15 s another node says it leads and serves, and every live node names it;
#   - the client (driving n0) follows the leader: it moves to the new one (once), sends what it
#     had in flight at n0 again in its sessions (retried > 0), commits again, and ends with no
#     txn in doubt; the replicas agree (n0, down, is reported and not waited for); a fresh
#     client finds the new leader by itself;
#   - `down` stops the survivors (pause, cutoff: and the rejoined n0) cleanly; their dumps are
#     identical;
#   - exactly once: YCSB's update counters sum to exactly the write ops both clients saw
#     committed (a lost txn makes the sum smaller, one run twice larger); transfer: the total
#     balance is what it started with.
# Usage: failover_test.sh raft|zookeeper kill|kill-transfer|pause|stop|cutoff|kill-at-end|kill-before-reply[-values|-short-history]
#        (the last four: raft)
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
how="${2:?kill, kill-transfer, pause or cutoff}"
cfg="$QR_TMP/failover.yaml"
kind=ycsb
[[ "$how" == kill-transfer ]] && kind=transfer
qr_config "$cfg" "$backend" 3 "workload:" "  kind: $kind" "ycsb:" "  records: 20000" "  ops_per_txn: 8" \
  "transfer:" "  accounts: 20000" "  initial_balance: 1000" "batch:" "  txns: 2000" "  timeout_ms: 5"
if [[ "$backend" == zookeeper ]]; then
  zk=()
  [[ -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")
  # A short session: a killed or paused leader's ephemeral znodes go 2 s after it went silent.
  # pause, cutoff: n0 rejoins from a checkpoint it fetches (ZooKeeper no longer holds batch 0).
  [[ "$how" == pause || "$how" == cutoff ]] &&
    zk+=(--server.checkpoint_dir="$QR_TMP/checkpoints" --server.checkpoint_every_batches=100)
  if [[ "$how" == cutoff ]]; then
    # Every node reaches ZooKeeper through the relay; writing n0's pid to the cut file cuts it off.
    server="${QRSTORE_ZK_HOSTS:-}"
    if [[ -z "$server" ]]; then
      mkdir -p "$QRSTORE_RUN_DIR/zkcut"
      server="$("$QR_SRC/scripts/zk-server.sh" start "$QRSTORE_RUN_DIR/zkcut/zk")"
    fi
    [[ "$server" != *,* ]] || fail "the cutoff test relays one ZooKeeper server, not $server"
    read -r relay_port <<<"$(free_ports 1)"
    python3 "$QR_SRC/scripts/zk-cut-proxy.py" --listen-port "$relay_port" --server "$server" \
      --cut-file "$QR_TMP/zkcut" --ready-file "$QR_TMP/relay.ready" --exit-with $$ >"$QR_TMP/relay.out" 2>&1 &
    for _ in $(seq 1 100); do [[ -f "$QR_TMP/relay.ready" ]] && break; sleep 0.05; done
    [[ -f "$QR_TMP/relay.ready" ]] || fail "the ZooKeeper relay did not start: $(cat "$QR_TMP/relay.out")"
    via=("--replication.zookeeper.hosts=127.0.0.1:$relay_port")
    for a in "${zk[@]}"; do [[ "$a" == --replication.zookeeper.hosts=* ]] || via+=("$a"); done
    zk=("${via[@]}")
  fi
  qr_up "$cfg" "${zk[@]+"${zk[@]}"}" --replication.zookeeper.session_timeout_ms=2000
else
  values=()
  [[ "$how" == kill-before-reply* ]] && values=(--server.stats_interval_ms=1000)
  [[ "$how" == kill-before-reply-values ]] && values+=(--server.session_read_values=true)
  [[ "$how" == kill-before-reply-short-history ]] && values+=(--server.session_history_bytes=65536)
  # kill-at-end: no election within 3 s of n0's last heartbeat (300 ticks of 10 ms, up to 6 s
  # randomized), so the failover surely outlasts the client's last second.
  [[ "$how" == kill-at-end ]] && values+=(--replication.raft.election_ticks=300)
  # pause, cutoff: n0 rejoins from its newest checkpoint, or fetches one when the leader's log
  # no longer holds what it lacks (on a fast host the log passes max_log_bytes in seconds).
  [[ "$how" == pause || "$how" == cutoff ]] &&
    values+=(--server.checkpoint_dir="$QR_TMP/checkpoints" --server.checkpoint_every_batches=100)
  qr_up "$cfg" --replication.raft.test_isolate_file="$QR_TMP/isolate" --server.test_kill_before_reply_file="$QR_TMP/kill" \
    "${values[@]+"${values[@]}"}"
fi
verify=()
[[ "$how" == kill-before-reply* ]] && verify=(--verify)
run="$QRSTORE_RUN_DIR/failover"
# (a paused node never answers: ask with a short time-out)
status() { qr_client "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true; }
# The node that says it leads and serves (column 2: role, 3: state), if any but n0.
new_leader() { status | awk 'NR > 1 && $1 != "n0" && $2 == "leader" && $3 == "serving" { print $1; exit }'; }

duration=12
[[ "$how" == kill-at-end ]] && duration=6
qr_client "$cfg" --duration-s "$duration" --connections 2 --outstanding 3000 --seed 7 --json --client.progress_interval_ms=250 \
  "${verify[@]+"${verify[@]}"}" \
  >"$QR_TMP/client1.out" 2>"$QR_TMP/client1.err" &
client=$!
if [[ "$how" == kill-at-end ]]; then
  # The client's own clock: its progress line "t=4s" comes 3.5 to 4.5 s into its 6 s. n0 is
  # paused and killed by its pid (cluster.sh takes a second or more on a busy host); with no
  # election before 3 s after the pause, the new leader comes after the client's time is up.
  for _ in $(seq 1 300); do grep -q " t=4s " "$QR_TMP/client1.err" && break; sleep 0.05; done
  grep -q " t=4s " "$QR_TMP/client1.err" || fail "the client never reached t=4s: $(tail -3 "$QR_TMP/client1.err")"
  n0_pid="$(cat "$run/n0.pid")"
  kill -STOP "$n0_pid"
  note "$(date +%T.%3N): n0 paused; the client said $(grep -m1 " t=4s " "$QR_TMP/client1.err" | cut -c1-30)"
else
  sleep 2.5
fi
if [[ "$how" == pause ]]; then
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n0 STOP
elif [[ "$how" == cutoff && "$backend" == zookeeper ]]; then
  cat "$run/n0.pid" >"$QR_TMP/zkcut"  # n0's packets to and from ZooKeeper are dropped
elif [[ "$how" == cutoff ]]; then
  touch "$QR_TMP/isolate.0"  # n0 (raft node id 0) hears from no peer, and no peer from it
elif [[ "$how" == kill-before-reply* ]]; then
  touch "$QR_TMP/kill.n0"  # the leader dies with a committed slice unanswered
elif [[ "$how" == stop ]]; then
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n0 TERM
elif [[ "$how" == kill-at-end ]]; then
  sleep 0.3
  kill -KILL "$n0_pid"
else
  # Stopped first, killed 0.3 s later: the client's senders fill their windows meanwhile, so it
  # surely has txns unanswered at n0 when it dies (killed at once, it could find both
  # connections between a reply and the next request on a busy machine, and resend nothing).
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n0 STOP
  sleep 0.3
  "$QR_SRC/scripts/cluster.sh" kill "$cfg" n0 KILL
fi
start=$SECONDS
leader=""
while ((SECONDS - start < 15)); do
  leader="$(new_leader)"
  [[ -n "$leader" ]] && break
  sleep 0.1
done
[[ -n "$leader" ]] || fail "no other node leads 15 s after n0 was lost: $(status)"
note "$leader leads after about $((SECONDS - start)) s: $(grep -h "leads from batch" "$run/$leader.log" | tail -1 | cut -c1-160)"
[[ "$(status | awk -v n="$leader" '$1 == n { print $8 }')" != *"@1" ]] || fail "the new leader's term did not move on: $(status)"
# Every live node names it (column 8: leader@term).
for n in n1 n2; do
  named="$(status | awk -v n="$n" '$1 == n { print $8 }')"
  [[ "$named" == "$leader@"* ]] || fail "$n names ${named:-nobody} as its leader, not $leader: $(status)"
done

if [[ "$how" == cutoff && "$backend" == zookeeper ]]; then
  # The group went on once ZooKeeper expired n0's session: from the relay's cut to the new
  # leader's first batch.
  python3 - "$QR_TMP/relay.out" "$run/$leader.log" <<'PY' || fail "the new leader took too long after the cut"
import re, sys
from datetime import datetime
def first(path, text):
    for l in open(path):
        m = re.match(r"(\d\d:\d\d:\d\d\.\d+) ", l)
        if m and text in l:
            return datetime.strptime(m.group(1), "%H:%M:%S.%f")
    sys.exit("no '%s' in %s" % (text, path))
d = (first(sys.argv[2], "leads from batch") - first(sys.argv[1], " cut: ")).total_seconds()
print("-- a follower led %.2f s after n0 was cut off from ZooKeeper (session 2 s)" % d)
sys.exit(0 if 0 <= d <= 6.0 else 1)
PY
  grep -q "leader" <<<"$(status | awk '$1 == "n0" { print $2 }')" &&
    note "n0, cut off, still says it leads (it cannot know its session expired): $(status | awk '$1 == "n0"')"
  sleep 1.5  # the client moves away from the silent n0 meanwhile
  rm -f "$QR_TMP/zkcut"  # healed: n0's ZooKeeper client reconnects and learns its session expired
fi
if [[ "$how" == pause || "$how" == cutoff ]]; then
  if [[ "$how" == pause ]]; then
    sleep 1.5  # the client moves away from the silent n0 meanwhile
    "$QR_SRC/scripts/cluster.sh" kill "$cfg" n0 CONT
  fi
  deadline=$((SECONDS + 20))
  while ((SECONDS < deadline)) && ! grep -q "stopping by itself" "$run/n0.log"; do sleep 0.1; done
  grep -q "stopping by itself" "$run/n0.log" || fail "the resumed old leader did not stop by itself: $(tail -5 "$run/n0.log")"
  grep -q "deposed" "$run/n0.log" || fail "n0's log does not say it was deposed"
  note "n0 found itself deposed: $(grep -h "stopping by itself" "$run/n0.log" | cut -c1-150)"
  [[ "$how" == cutoff ]] && rm -f "$QR_TMP/isolate.0"  # (raft) healed: n0 can rejoin
  # It rejoins by itself: the same process executes itself again (no exit), follows the new
  # leader and catches up; status shows it `rejoining` meanwhile, then `serving`.
  n0_state=""
  deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    [[ ! -f "$run/n0.exit" ]] || fail "the deposed n0 exited with $(cat "$run/n0.exit") instead of rejoining: $(tail -5 "$run/n0.log")"
    n0_row="$(status | awk '$1 == "n0"')"
    n0_state="$(awk '{ print $2, $3 }' <<<"$n0_row")"
    # While it starts again it holds the config's row 0 (itself) as its guess: a client asking
    # the group who leads must never hear n0 name itself without leading.
    [[ "$(awk '$2 != "leader" { print $8 }' <<<"$n0_row")" != n0@* ]] ||
      fail "n0, not leading, names itself leader in its status: $n0_row"
    [[ "$n0_state" == rejoining || "$n0_state" == *" rejoining" ]] && seen_rejoining=1
    [[ "$n0_state" == "follower serving" ]] && break
    sleep 0.2
  done
  [[ "$n0_state" == "follower serving" ]] || fail "n0 did not rejoin as a serving follower within 60 s (last: '$n0_state'): $(tail -5 "$run/n0.log")"
  grep -q "rejoining (rejoin 1 of this process)" "$run/n0.log" || fail "n0's log does not say it rejoins"
  grep -q "rejoining its group as a follower (rejoin 1" "$run/n0.log" || fail "n0 did not start again as a rejoining follower"
  [[ -n "${seen_rejoining:-}" ]] || note "(status never caught n0 rejoining: it was quick)"
  note "n0 rejoined as a follower: $(grep -h "rejoining (rejoin 1" "$run/n0.log" | cut -c1-120)"
  # Its ready line names the leader it follows, never itself (the config's row 0 is n0).
  ready="$(grep -h "qrstore-server ready" "$run/n0.out" | tail -1)"
  [[ "$ready" == *"follower of "* && "$ready" != *"follower of n0)"* ]] ||
    fail "n0's ready line after its rejoin does not name the leader it follows: '$ready'"
  if [[ "$how" == cutoff && "$backend" == zookeeper ]]; then
    grep -q "session expired" "$run/n0.log" || fail "n0's log does not say its ZooKeeper session expired"
    note "n0 healed: $(grep -h "session expired" "$run/n0.log" | head -1 | cut -c1-150)"
  elif [[ "$how" == cutoff ]]; then
    grep -q "test hook: cut off from every peer" "$run/n0.log" || fail "n0 was never cut off"
    # It stepped down within two quorum checks of two election timeouts (100 ticks of 10 ms
    # here: at most 4 s) plus the watch thread's poll, and acknowledged nothing after: the bound
    # below checks the first from outside.
    python3 - "$run/n0.log" <<'PY' || fail "n0 took too long to step down"
import re, sys
from datetime import datetime
t = {}
for l in open(sys.argv[1]):
    m = re.match(r"(\d\d:\d\d:\d\d\.\d+) ", l)
    if not m:
        continue
    if "cut off from every peer" in l and "cut" not in t:
        t["cut"] = datetime.strptime(m.group(1), "%H:%M:%S.%f")
    if "deposed" in l and "dep" not in t:
        t["dep"] = datetime.strptime(m.group(1), "%H:%M:%S.%f")
d = (t["dep"] - t["cut"]).total_seconds()
print("-- n0 deposed %.2f s after it was cut off" % d)
sys.exit(0 if 0 <= d <= 5.0 else 1)
PY
  fi
fi

# The client followed the leader: it lost n0, moved to the new leader and ran on.
wait "$client" || fail "the client failed: $(tail -5 "$QR_TMP/client1.err")"
c1="$QR_TMP/client1.out"
[[ "$(json_field "$c1" leader)" == "$leader" ]] || fail "the client ended on $(json_field "$c1" leader), not $leader"
[[ "$(json_field "$c1" failovers)" == 1 ]] || fail "the client made $(json_field "$c1" failovers) failovers, not 1"
[[ "$(json_field "$c1" replicas_agree)" == true ]] || fail "the survivors do not agree: $(json_field "$c1" replicas_detail)"
if [[ "$how" == pause || "$how" == cutoff ]]; then
  # n0 rejoined during the run: down at the client's end, or back.
  [[ "$(json_field "$c1" down_followers)" == "['n0']" || "$(json_field "$c1" down_followers)" == "[]" ]] ||
    fail "the client reports down: $(json_field "$c1" down_followers)"
else
  [[ "$(json_field "$c1" down_followers)" == "['n0']" ]] || fail "n0 is not reported down: $(json_field "$c1" down_followers)"
fi
grep -q "failover: $leader leads now" "$QR_TMP/client1.err" || fail "the client's log does not say it moved to $leader"
if [[ "$how" == kill-at-end ]]; then
  # The failover spanned the end of the run: the client says which way it met it.
  grep -q "s are up during a failover\|the leader was lost during the drain" "$QR_TMP/client1.err" ||
    fail "the client's time did not run out during the failover (the test's timing missed): $(grep -h "lost the leader\|failover:" "$QR_TMP/client1.err")"
  note "the client finished the failover at its end: $(grep -h "s are up during a failover\|lost during the drain" "$QR_TMP/client1.err" | cut -c1-150)"
else
python3 - "$c1" <<'PY' || fail "the client committed nothing after the failover"
import json, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
j = json.loads(line)
per = j["committed_per_interval"]
print("-- commits per 250 ms:", per)
print("-- unavailable_ms %.0f, in doubt %d txns, retried %d" % (j["unavailable_ms"], j["in_doubt"], j["retried"]))
sys.exit(0 if sum(per[-8:-1]) > 0 and j["unavailable_ms"] > 0 else 1)
PY
fi
[[ "$(json_field "$c1" in_doubt)" == 0 ]] || fail "the client ended with $(json_field "$c1" in_doubt) txns in doubt"
if [[ "$how" == stop ]]; then
  for _ in $(seq 1 100); do [[ -f "$run/n0.exit" ]] && break; sleep 0.1; done
  [[ "$(cat "$run/n0.exit" 2>/dev/null)" == 0 ]] || fail "n0 did not stop cleanly: exit $(cat "$run/n0.exit" 2>/dev/null)"
  for n in n1 n2; do
    grep -q "applied as an empty batch" "$run/$n.log" || fail "$n's log does not say it applied n0's end markers"
  done
  note "n0 stopped cleanly; $(grep -h "applied as an empty batch" "$run/n1.log" | tail -1 | cut -c1-150)"
else
  (($(json_field "$c1" retried) > 0)) || fail "the client sent nothing again after the failover (it had txns in flight)"
fi
# The leader's newest stats line's counter $1 (0 if none).
leader_stat() { local v; v="$(grep -ho " $1=[0-9]*" "$run/$leader.log" | tail -1 | cut -d= -f2)"; echo "${v:-0}"; }
if [[ "$how" == kill-before-reply ]]; then
  grep -q "test hook: killing itself before answering" "$run/n0.log" || fail "n0 did not die by the hook"
  sleep 1.2  # a stats line after the client's last retry
  (($(leader_stat history_reads) > 0)) ||
    fail "the new leader planned no history read (n0 died with a committed slice unanswered): $(grep -h duplicates= "$run/$leader.log" | tail -1)"
  [[ "$(json_field "$c1" committed_no_values)" == 0 ]] ||
    fail "$(json_field "$c1" committed_no_values) retries were answered without their read values ($(leader_stat history_misses) history misses)"
  [[ "$(json_field "$c1" verify)" == ok:* ]] || fail "verify: $(json_field "$c1" verify)"
  note "$(leader_stat history_reads) retries answered with values from the write histories; verify: $(json_field "$c1" verify | cut -c1-150)"
elif [[ "$how" == kill-before-reply-short-history ]]; then
  grep -q "test hook: killing itself before answering" "$run/n0.log" || fail "n0 did not die by the hook"
  (($(json_field "$c1" committed_no_values) > 0)) ||
    fail "no retry was answered committed-no-values, with 64 KB of write history"
  [[ "$(json_field "$c1" verify)" == ok:* ]] || fail "verify: $(json_field "$c1" verify)"
  note "$(json_field "$c1" committed_no_values) retried txns answered from the session table without values; verify: $(json_field "$c1" verify | cut -c1-150)"
elif [[ "$how" == kill-before-reply-values ]]; then
  grep -q "test hook: killing itself before answering" "$run/n0.log" || fail "n0 did not die by the hook"
  [[ "$(json_field "$c1" committed_no_values)" == 0 ]] ||
    fail "$(json_field "$c1" committed_no_values) retries were answered without their read values"
  dups="$(grep -ho "duplicates=[0-9]*" "$run/$leader.log" | tail -1 | cut -d= -f2)"
  ((${dups:-0} > 0)) || fail "the new leader answered no retry from its session table (its stats: duplicates=${dups:-none})"
  [[ "$(json_field "$c1" verify)" == ok:* ]] || fail "verify: $(json_field "$c1" verify)"
  note "$dups retries answered from the session table with their read values; verify: $(json_field "$c1" verify | cut -c1-150)"
fi
note "client: $(json_field "$c1" committed_total) committed, $(json_field "$c1" retried) sent again, none in doubt, failed over to $leader"

# A fresh client finds the new leader by itself.
qr_client "$cfg" --txns 2000 --connections 1 --seed 8 --json >"$QR_TMP/client2.out" 2>"$QR_TMP/client2.err" ||
  fail "client 2 failed: $(tail -5 "$QR_TMP/client2.err")"
c2="$QR_TMP/client2.out"
[[ "$(json_field "$c2" leader)" == "$leader" ]] || fail "client 2 drove $(json_field "$c2" leader), not $leader"
[[ "$(json_field "$c2" in_doubt)" == 0 ]] || fail "client 2 has txns in doubt"

qr_down "$cfg" >"$QR_TMP/down.out" 2>&1 || fail "down was not clean: $(cat "$QR_TMP/down.out")"
dir="$(qr_dump_dir "$cfg")"
if [[ "$how" == stop ]]; then
  [[ -s "$dir/n0.tsv" ]] || fail "n0, stopped cleanly, wrote no dump"
  rm -f "$dir/n0.tsv"  # its last batch is behind the others'
elif [[ "$how" == pause || "$how" == cutoff ]]; then
  [[ -s "$dir/n0.tsv" ]] || fail "n0, rejoined as a follower, wrote no dump at down"
else
  [[ ! -e "$dir/n0.tsv" ]] || fail "the lost leader n0 wrote a dump"
fi
qr_same_dumps "$cfg"

total="$(dump_sum "$dir/n1.tsv")"
if [[ "$kind" == transfer ]]; then
  [[ "$total" == $((20000 * 1000)) ]] || fail "money not conserved: $total"
  note "money conserved: $total"
else
  acked=$(($(json_field "$c1" update_ops_committed) + $(json_field "$c2" update_ops_committed)))
  ((total >= acked)) || fail "acknowledged updates lost: the counters sum to $total, the clients saw $acked committed"
  ((total == acked)) || fail "updates run twice or from nowhere: the counters sum to $total, the clients saw $acked committed"
  note "exactly once: the update counters sum to $total, what the clients saw committed"
fi
echo PASS
