#!/usr/bin/env bash
# failover-timeline.sh: what a leader's death costs, as a client sees it.
#
#   scripts/failover-timeline.sh CONFIG [--kill-at S] [--duration-s S] [--kills N] [--partition P]
#                                [--fault kill|pause|cut] [--pause-s S] [--restart-after S]
#                                [--hosts DIR] [--out DIR] [--key=value ...]
#
# Brings up a fresh cluster of CONFIG, runs qrstore-client against it for --duration-s (default
# 20) with the commit count sampled every 100 ms, and kills the current leader (of partition
# --partition, default 0, in a partitioned row: its group elects a successor that takes its place
# in the row) with SIGKILL at --kill-at seconds (default 5) after the client started; with
# --kills N, N times, spaced evenly from --kill-at to the end of the run (the group must keep a
# majority: 2N + 1 members at least). --fault pause: the leader is paused (SIGSTOP) instead, for
# --pause-s seconds (default 3), then resumed (SIGCONT): deposed, it rejoins as a follower by
# itself (server.rejoin_when_deposed), so its dump is compared too; the time to the first commit
# then includes the client noticing a silent leader (client.silent_leader_ms). --fault cut: the
# leader is cut off for --pause-s seconds while its clients still reach it: raft, from its peers
# (the transport's test hook replication.raft.test_isolate_file); ZooKeeper, from the ZooKeeper
# server (every node reaches it through scripts/zk-cut-proxy.py, which drops the leader's
# traffic; with replication.zookeeper.hosts empty this script starts a local server for it);
# healed, the deposed leader rejoins by itself. --hosts DIR: CONFIG's nodes are on the test hosts
# scripts/hosts.sh made in DIR (network namespaces; every node's host one of their addresses),
# started and stopped over ssh (QRSTORE_SSH_CONFIG=DIR/ssh_config); --fault cut (raft) is then a
# real cut: scripts/netsplit.sh isolates the leader's host from every other host (its clients in
# this namespace still reach it) and heals after --pause-s. --restart-after S: each killed leader is started
# again (`cluster.sh up`, from its checkpoint) S seconds after its kill, so N kills need a group
# of 3 (the issue's double failover: --kills 2 --restart-after 3).
# Then it stops the cluster (survivors' dumps) and writes into --out
# (default run/failover-timeline-<time>):
#   timeline.csv   t_s,committed (per 100 ms, t from the client's start), kills.csv (t_s,node)
#   timeline.png   the same, plotted, kills marked (python3-matplotlib, installed from Debian when
#                  missing and this runs as root; else skipped with a note)
#   summary.txt    per kill: time from the kill to the first commit by the new leader, time to
#                  90% of the throughput of the second before the kill; the client's failovers,
#                  retried and in-doubt txns, its longest time without a commit; the exactly-once
#                  check (YCSB: the update counters of every survivor's dump sum to exactly the
#                  write ops the client saw committed when no txn is in doubt (the client's
#                  sessions resend what a lost leader left unanswered), else to at least that and
#                  at most that plus those in doubt; transfer: the money is conserved; a row: summed
#                  over its partitions) and whether the survivors of each partition dump the same.
# Extra --key=value arguments go to the servers and the client (e.g. --replication.raft.election_ticks=20).
# Exit status: 0 measured and the checks passed; 1 a check failed or the run did not work; 2 bad
# input.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
usage() { sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "failover-timeline: $*" >&2; exit 1; }
bad() { echo "failover-timeline: $*" >&2; exit 2; }

config="" kill_at=5 duration=20 kills=1 out="" overrides=() victim_partition=0 fault=kill pause_s=3 restart_after=""
hosts_dir=""
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --kill-at) kill_at="${2:?--kill-at needs seconds}"; shift 2 ;;
    --duration-s) duration="${2:?--duration-s needs seconds}"; shift 2 ;;
    --kills) kills="${2:?--kills needs a count}"; shift 2 ;;
    --partition) victim_partition="${2:?--partition needs a partition}"; shift 2 ;;
    --fault) fault="${2:?--fault needs kill or pause}"; shift 2 ;;
    --pause-s) pause_s="${2:?--pause-s needs seconds}"; shift 2 ;;
    --restart-after) restart_after="${2:?--restart-after needs seconds}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --hosts) hosts_dir="${2:?--hosts needs the folder given to hosts.sh up}"; shift 2 ;;
    --*=*) overrides+=("$1"); shift ;;
    -*) bad "unknown flag $1 (see --help)" ;;
    *) [[ -z "$config" ]] || bad "one CONFIG only (got '$config' and '$1')"; config="$1"; shift ;;
  esac
done
[[ -n "$config" ]] || bad "missing CONFIG (see --help)"
[[ -f "$config" ]] || bad "no config file '$config'"
[[ "$kills" =~ ^[1-9][0-9]*$ ]] || bad "--kills: a count >= 1 (got '$kills')"
[[ "$fault" == kill || "$fault" == pause || "$fault" == cut ]] || bad "--fault: kill, pause or cut (got '$fault')"
if [[ -n "$restart_after" ]]; then
  [[ "$fault" == kill ]] || bad "--restart-after goes with --fault kill"
  python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) <= 600 else 1)" "$restart_after" 2>/dev/null ||
    bad "--restart-after: seconds in (0, 600] (got '$restart_after')"
fi
python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) <= 600 else 1)" "$pause_s" 2>/dev/null ||
  bad "--pause-s: seconds in (0, 600] (got '$pause_s')"
python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if 0<a<b<=3600 else 1)" "$kill_at" "$duration" ||
  bad "--kill-at and --duration-s: 0 < kill-at < duration <= 3600 (got $kill_at and $duration)"
[[ -x "$bin/qrstore-server" && -x "$bin/qrstore-client" ]] || die "no programs in $bin (build first: cmake --build build)"
if [[ -n "$hosts_dir" ]]; then
  [[ -f "$hosts_dir/ssh_config" ]] || bad "--hosts: no $hosts_dir/ssh_config (make the hosts first: scripts/hosts.sh up N --dir $hosts_dir)"
  hosts_dir="$(cd "$hosts_dir" && pwd)"
  export QRSTORE_SSH_CONFIG="$hosts_dir/ssh_config" QRSTORE_REMOTE_DIR="${QRSTORE_REMOTE_DIR:-$here}"
fi

nodes="$("$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" --list-nodes)" || bad "$config: not a valid cluster config"
[[ "$victim_partition" =~ ^[0-9]+$ ]] || bad "--partition: a partition number (got '$victim_partition')"
members=$(awk -v p="$victim_partition" '$5 == p' <<<"$nodes" | wc -l)
((members > 0)) || bad "$config has no partition $victim_partition"
if [[ -n "$restart_after" || "$fault" != kill ]]; then
  # Each lost leader comes back (started again, or rejoining by itself): three keep a majority.
  ((members >= 3)) || bad "a group of at least 3 members keeps a majority; $config has $members"
else
  ((members >= 2 * kills + 1)) || bad "$kills kill(s) need a group of at least $((2 * kills + 1)) members to keep a majority; $config has $members"
fi
name="$("$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" --get cluster.name)"
kind="$("$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" --get workload.kind)"

out="${out:-$here/run/failover-timeline-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out/dump"
export QRSTORE_RUN_DIR="$out/run"
cluster() { "$here/scripts/cluster.sh" "$@"; }
all=("${overrides[@]+"${overrides[@]}"}" "--server.dump_state_dir=$out/dump")
backend="$("$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" --get replication.backend)"
zk_dir=""
netsplit() { "$here/scripts/netsplit.sh" "$@" --dir "$hosts_dir"; }
cleanup() {
  # Healed first, so that `down` reaches every node and every node can stop cleanly.
  [[ -z "$hosts_dir" || "$fault" != cut ]] || netsplit heal >>"$out/netsplit.log" 2>&1 || true
  cluster down "$config" >"$out/down.log" 2>&1 || true
  [[ -z "$zk_dir" ]] || "$here/scripts/zk-server.sh" stop "$zk_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [[ "$fault" == cut && -n "$hosts_dir" ]]; then
  [[ "$backend" == raft ]] || bad "--fault cut with --hosts cuts raft peers' links (got replication.backend $backend)"
  command -v nft >/dev/null || bad "--fault cut with --hosts needs nft (Debian's nftables)"
elif [[ "$fault" == cut && "$backend" == raft ]]; then
  all+=("--replication.raft.test_isolate_file=$out/isolate")
elif [[ "$fault" == cut && "$backend" == zookeeper ]]; then
  # Every node reaches ZooKeeper through the relay, which can cut one process off it.
  zk="$("$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" --get replication.zookeeper.hosts)"
  if [[ -z "$zk" ]]; then
    zk_dir="$out/zk"
    zk="$("$here/scripts/zk-server.sh" start "$zk_dir" --heap-mb "${QRSTORE_ZK_HEAP_MB:-1024}")" || die "could not start a local ZooKeeper"
  fi
  [[ "$zk" != *,* ]] || bad "--fault cut relays one ZooKeeper server, not $zk"
  relay_port="$(source "$here/scripts/lib.sh"; free_ports 1)"
  python3 "$here/scripts/zk-cut-proxy.py" --listen-port "$relay_port" --server "$zk" --cut-file "$out/zk-cut" \
    --ready-file "$out/relay.ready" --exit-with $$ >"$out/relay.log" 2>&1 &
  for _ in $(seq 1 100); do [[ -f "$out/relay.ready" ]] && break; sleep 0.05; done
  [[ -f "$out/relay.ready" ]] || die "the ZooKeeper relay did not start: $(cat "$out/relay.log")"
  all+=("--replication.zookeeper.hosts=127.0.0.1:$relay_port")
elif [[ "$fault" == cut ]]; then
  bad "--fault cut needs replication.backend raft or zookeeper (got $backend)"
fi
cluster up "$config" --fresh "${all[@]}" >"$out/up.log" 2>&1 || { cat "$out/up.log" >&2; die "the cluster did not start"; }
status() { "$bin/qrstore-client" --config "$config" "${all[@]}" --status --client.connect_timeout_ms=1000 2>/dev/null || true; }
# The serving leader of the victim partition (--list-nodes: name host cport pport partition row).
leader() {
  local in_partition
  in_partition="$(awk -v p="$victim_partition" '$5 == p { print $1 }' <<<"$nodes" | tr '\n' ' ')"
  status | awk -v names=" $in_partition" 'NR > 1 && $2 == "leader" && $3 == "serving" && index(names, " " $1 " ") { print $1; exit }'
}

echo "failover-timeline: $config ($members members, $kind), ${duration} s, $kills kill(s) from t = ${kill_at} s; output in $out"
"$bin/qrstore-client" --config "$config" "${all[@]}" --duration-s "$duration" --json --client.progress_interval_ms=100 \
  >"$out/client.json" 2>"$out/client.log" &
client=$!
pending=()
# The client's clock starts after it connects: kill times are taken from its timeline start.
step=$(python3 -c "print(($duration - $kill_at) / ($kills + 1))")
: >"$out/kills.unix"
started="$(date +%s.%N)"
for ((k = 0; k < kills; k++)); do
  at=$(python3 -c "print($kill_at + $k * $step)")
  sleep "$(python3 -c "import time; print(max(0.0, $started + $at - time.time()))")"
  victim="$(leader)"
  [[ -n "$victim" ]] || die "no node leads partition $victim_partition at t = $at s: $(status)"
  # A node of this host is signalled here, right after the time is taken (cluster.sh kill takes
  # a few hundred ms on a busy host, which the figures would count); others through cluster.sh.
  signal() {
    local pid
    pid="$(cat "$QRSTORE_RUN_DIR/$name/$victim.pid" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill "-$1" "$pid"; else cluster kill "$config" "$victim" "$1" >/dev/null; fi
  }
  t="$(date +%s.%N)"
  if [[ "$fault" == pause ]]; then
    signal STOP
    (sleep "$pause_s"; signal CONT 2>/dev/null || true) &
    pending+=($!)
    echo "$t $victim" >>"$out/kills.unix"
    echo "failover-timeline: paused the leader $victim (partition $victim_partition) at t = ${at} s for ${pause_s} s"
  elif [[ "$fault" == cut && -n "$hosts_dir" ]]; then
    addr="$(awk -v n="$victim" '$1 == n { print $2 }' <<<"$nodes")"
    netsplit isolate "$addr" >>"$out/netsplit.log" 2>&1 || die "netsplit.sh isolate $addr failed: $(tail -2 "$out/netsplit.log")"
    (sleep "$pause_s"; netsplit heal >>"$out/netsplit.log" 2>&1) &
    pending+=($!)
    echo "$t $victim" >>"$out/kills.unix"
    echo "failover-timeline: cut the leader $victim ($addr) off every other host at t = ${at} s for ${pause_s} s"
  elif [[ "$fault" == cut && "$backend" == raft ]]; then
    row="$(awk -v n="$victim" '$1 == n { print $6 }' <<<"$nodes")"  # its raft node id
    touch "$out/isolate.$row"
    (sleep "$pause_s"; rm -f "$out/isolate.$row") &
    pending+=($!)
    echo "$t $victim" >>"$out/kills.unix"
    echo "failover-timeline: cut the leader $victim (partition $victim_partition) off its peers at t = ${at} s for ${pause_s} s"
  elif [[ "$fault" == cut ]]; then
    cat "$QRSTORE_RUN_DIR/$name/$victim.pid" >"$out/zk-cut"
    (sleep "$pause_s"; rm -f "$out/zk-cut") &
    pending+=($!)
    echo "$t $victim" >>"$out/kills.unix"
    echo "failover-timeline: cut the leader $victim (partition $victim_partition) off ZooKeeper at t = ${at} s for ${pause_s} s"
  else
    signal KILL
    echo "$t $victim" >>"$out/kills.unix"
    echo "failover-timeline: killed the leader $victim (partition $victim_partition) at t = ${at} s"
    if [[ -n "$restart_after" ]]; then
      (sleep "$restart_after"; cluster up "$config" >>"$out/restarts.log" 2>&1 ||
         echo "failover-timeline: starting $victim again failed (restarts.log)" >&2) &
      pending+=($!)
      echo "failover-timeline: $victim starts again ${restart_after} s later"
    fi
  fi
done
wait "$client" && client_code=0 || client_code=$?
# A resume, heal or restart still pending (not the relay, which lives as long as this script).
for p in "${pending[@]+"${pending[@]}"}"; do wait "$p" || true; done
cleanup
trap - EXIT

# Debian's python (matplotlib comes from its packages), else whatever python3 is on PATH.
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
if ! "$py" -c "import matplotlib" 2>/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-matplotlib >"$out/apt.log" 2>&1 || true
fi
printf '%s\n' "$nodes" >"$out/nodes.txt"
"$py" - "$out" "$kind" "$client_code" "$config" "$fault" <<'PY'
import glob, json, os, sys
out, kind, client_code, config, fault = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
# node -> partition (--list-nodes: name host cport pport partition row)
partition_of = {l.split()[0]: int(l.split()[4]) for l in open(os.path.join(out, "nodes.txt")) if l.strip()}
lines = [l for l in open(os.path.join(out, "client.json")).read().splitlines() if l.strip().startswith("{")]
if not lines:
    sys.exit("failover-timeline: the client printed no JSON (exit %d); see %s/client.log" % (client_code, out))
j = json.loads(lines[-1])
per = j["committed_per_interval"]
dt = j["progress_interval_ms"] / 1000.0
t0 = float(j["timeline_start_unix_s"])
kills = []
for l in open(os.path.join(out, "kills.unix")):
    t, node = l.split()
    kills.append((float(t) - t0, node))
with open(os.path.join(out, "timeline.csv"), "w") as f:
    f.write("t_s,committed\n")
    for i, c in enumerate(per):
        f.write("%.1f,%d\n" % ((i + 1) * dt, c))
with open(os.path.join(out, "kills.csv"), "w") as f:
    f.write("t_s,node\n")
    for t, n in kills:
        f.write("%.3f,%s\n" % (t, n))
report = []
def say(s):
    print(s)
    report.append(s)
say("config: %s; client exit %d; %d committed, %d in doubt (%d write ops), retried %d, failovers %d, longest time without a commit %.0f ms"
    % (config, client_code, j["committed_total"], j["in_doubt"],
       j["update_ops_in_doubt"], j["retried"], j["failovers"], j["unavailable_ms"]))
ok = client_code == 0
for t, node in kills:
    k = int(t / dt)  # the interval the kill fell in
    before = per[max(0, k - int(1 / dt)):k]
    base = sum(before) / len(before) if before else 0
    # The outage: the longest run of intervals without a commit that starts after the fault and
    # before the next one (a short dip can come first: commits of batches already replicated,
    # or a slow interval); the first commit after it is the new leader's.
    end = len(per)
    for t2, _ in kills:
        if t2 > t:
            end = min(end, int(t2 / dt))
    i, longest, q = k + 1, -1, k + 1
    while q < end:
        if per[q] == 0:
            z = q
            while z < len(per) and per[z] == 0:
                z += 1
            if z - q > longest:
                longest, i = z - q, z
            q = z
        else:
            q += 1
    if longest < 0:
        i = k + 1  # no interval without a commit: the client never waited a whole interval
    # per[i] counts the commits of [i dt, (i + 1) dt): the first came by the interval's end (an
    # upper bound, off by at most one interval).
    first = ((i + 1) * dt - t) if i < len(per) else None
    r = i
    while r < len(per) and per[r] < 0.9 * base:
        r += 1
    back = ((r + 1) * dt - t) if r < len(per) else None
    say("%s of %s at t = %.2f s: first commit by the new leader after %s; back at 90%% of the second before (%.0f txn/s) after %s"
        % (fault, node, t, "%.2f s" % first if first is not None else "NEVER", base / dt,
           "%.2f s" % back if back is not None else "NEVER"))
    ok = ok and first is not None
dumps = sorted(glob.glob(os.path.join(out, "dump", "*.tsv")))
sums = {}
for d in dumps:
    s = 0
    with open(d) as f:
        for line in f:
            s += int(line.split("\t")[1])
    sums[os.path.basename(d)[:-4]] = s
# The survivors of each partition dump the same state; totals add one survivor per partition.
by_partition = {}
for d in dumps:
    by_partition.setdefault(partition_of.get(os.path.basename(d)[:-4], -1), []).append(d)
partitions = sorted(set(partition_of.values()))
same = bool(dumps) and sorted(by_partition) == partitions and all(
    len(set(open(d, "rb").read() for d in ds)) == 1 for ds in by_partition.values())
say("survivors' dumps: %s, %s" % (", ".join(sorted(sums)) or "none",
                                  ("identical" if len(partitions) == 1 else "identical within each partition")
                                  if same else "DIFFER or missing"))
ok = ok and same
if sums and same:
    total = sum(sums[os.path.basename(ds[0])[:-4]] for ds in by_partition.values())
    if kind == "transfer":
        say("exactly once: the total balance is %d (conserved if equal to the initial total)" % total)
    else:
        acked, doubt = j["update_ops_committed"], j["update_ops_in_doubt"]
        if j["in_doubt"] == 0:
            good = total == acked
            say("exactly once: update counters sum to %d, the client saw %d committed, none in doubt -> %s"
                % (total, acked, "ok (nothing lost, nothing run twice)" if good else "VIOLATED"))
        else:
            good = acked <= total <= acked + doubt
            say("exactly once: update counters sum to %d; %d acknowledged + %d in doubt -> %s"
                % (total, acked, doubt, "ok (nothing acknowledged lost, nothing from nowhere)" if good else "VIOLATED"))
        ok = ok and good
open(os.path.join(out, "summary.txt"), "w").write("\n".join(report) + "\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([(i + 1) * dt for i in range(len(per))], [c / dt for c in per], lw=1)
    for t, node in kills:
        ax.axvline(t, color="red", ls="--", lw=1)
        ax.text(t, ax.get_ylim()[1] * 0.95, " %s %s" % (fault, node), color="red", va="top")
    ax.set_xlabel("s since the client started")
    ax.set_ylabel("committed txn/s (per 100 ms)")
    ax.set_title("qrstore failover: %s" % os.path.basename(out))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "timeline.png"), dpi=100)
    print("plot: %s" % os.path.join(out, "timeline.png"))
except ImportError:
    print("no plot: python3-matplotlib is not installed (apt-get install python3-matplotlib); timeline.csv has the data")
sys.exit(0 if ok else 1)
PY
