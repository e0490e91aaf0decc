#!/usr/bin/env bash
# chaos.sh: runs qrstore-client against a replicated group (or a partitioned row's grid of groups)
# while it kills (SIGKILL), pauses (SIGSTOP/SIGCONT) and restarts random nodes on a schedule drawn
# from a seed, then checks that nothing was lost, run twice or left in doubt (docs/chaos.md).
#
#   scripts/chaos.sh CONFIG --duration-s S [--seed K] [options] [--key=value ...]
#
#   --duration-s S         the client's run (and the window of the events), seconds, >= 20; when
#                          the group takes longer than planned to settle after an event, the
#                          rest of the schedule and the run are pushed back by as much, up to
#                          3 x S in all (the ledger says by how much), so the whole schedule runs
#   --seed K               the schedule's seed and the client's workload seed (default 1); the
#                          same seed, CONFIG and options print the same schedule: a replay
#   --downtime-ms MIN-MAX  how long a killed node stays down before it is started again
#                          (default 500-3000; a node further behind than the leader's raft log,
#                          or than the batches ZooKeeper keeps, fetches the leader's checkpoint:
#                          docs/recovery.md)
#   --pause-ms MIN-MAX     how long a paused node stays stopped (default 500-3000)
#   --gap-ms MIN-MAX       quiet time before each event (default 1500-5000)
#   --events LIST          the kinds of event drawn, comma-separated, in any order (default
#                          kill,pause,restart): kill, pause, restart, and the network cuts isolate,
#                          split, bridge, oneway (below; they need --hosts)
#   --cut-ms MIN-MAX       how long a cut holds before it is healed (default 2000-8000)
#   --hosts DIR            the nodes run on the test hosts `scripts/hosts.sh up N --dir DIR` made,
#                          one node per host (the config's hosts are their addresses): cluster.sh
#                          reaches them over ssh with DIR/ssh_config (QRSTORE_SSH_CONFIG unless
#                          set), and the cuts are made by `scripts/netsplit.sh ... --dir DIR`
#   --warmup-s W           no event in the first W seconds (default 4: every node checkpoints)
#   --quiet-s Q            no event in the last Q seconds (default 8: the group settles)
#   --connections C, --outstanding K, --target-tps T
#                          the client's load (default 2, 2000, 0 = no limit)
#   --checkpoint-every N   server.checkpoint_every_batches (default 20: several per run)
#   --dir DIR              work folder: run/ (cluster.sh's run folder, unless QRSTORE_RUN_DIR is
#                          set), checkpoints/, dump/, client.out, client.err, chaos.log (default
#                          a new /tmp/qrstore-chaos.XXXXXX; its checkpoints and dumps are
#                          removed after a passing run)
#   --dry-run              print the schedule and exit
#   --key=value            overrides for every node and the client, as for cluster.sh up (e.g.
#                          --workload.kind=transfer, --replication.zookeeper.session_timeout_ms=2000)
#
# Events, one at a time, each waiting until the group is whole again (every node running and
# answering, one leader serving, every follower caught up) so that never more than one member
# (a minority of a group of three or more) is down or paused: kill (SIGKILL, then
# `cluster.sh up` after the downtime: it restarts from its newest checkpoint), pause (SIGSTOP,
# SIGCONT after the pause), restart (`cluster.sh restart`: killed and started at once). A target
# is a node of the group or "leader" (whoever leads when the event comes). In a partitioned row
# (P partitions x R >= 3 rows) "the group" is the whole grid: one node of it away at a time (so
# one partition fails over at a time), a target is any node or "leader:P" (partition P's leader
# then), and the dumps are compared within each partition. A deposed leader (paused
# past an election, say) rejoins by itself (server.rejoin_when_deposed: the process executes
# itself again and follows): the ledger counts these rejoins from the nodes' logs. A node that
# exits by itself fails the run (it is started again so that the run goes on).
# Network cuts (raft, one group of 3 or more members, on --hosts hosts; refused between nodes on
# 127.0.0.1, where no link can be cut): each is made by netsplit.sh, held for its drawn duration,
# then healed, and the run waits until the group is whole again before it goes on. A cut's
# targets are roles, resolved when it comes: L the node leading then, F1, F2, ... the others in
# config order. isolate L or isolate Fk: cut off from every other member, both ways; split
# A,B|C,D,E: no packet between the two sets, the first a minority with the leader in it or not;
# bridge M:A,B|C,D: that split with the follower M reaching both sets (the leader's set first);
# oneway X>Y: X's packets to Y dropped. This namespace (the client, cluster.sh) reaches every host
# throughout. The ledger counts the cuts by kind, the leader changes after them and the rejoins.
# Checked at the end: the client ran without error and has no txn in doubt,
# every node serving and caught up, `cluster.sh down` clean, every node's dump identical (within
# each partition), and exactly once: money conserved (workload.kind transfer) or YCSB's update
# counters (one dump per partition) summing to the client's update_ops_committed. A ledger of
# what happened is printed last.
# Set by chaos.sh (before the overrides, which win): server.checkpoint_dir=DIR/checkpoints,
# server.checkpoint_every_batches; after them: server.dump_state_dir=DIR/dump.
# Exit status: 0 every check passed; 1 a check failed; 2 bad input.
# Programs: $QRSTORE_BIN (default build/bin). Time-outs: QRSTORE_CHAOS_SETTLE_S (default 60) for
# the group to be whole again after an event.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
cluster_sh="$here/scripts/cluster.sh"
settle_timeout_s="${QRSTORE_CHAOS_SETTLE_S:-60}"
# A follower at most this many batches behind its leader counts as caught up (under load a
# follower is always a few batches behind).
readonly kCaughtUpLagBatches=50
readonly kEventsMax=10000

usage() { sed -n "2,$(($(grep -n "^set -euo" "$0" | cut -d: -f1) - 1))p" "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "chaos.sh: $*" >&2; echo "chaos.sh: see scripts/chaos.sh --help" >&2; exit 2; }

# --- arguments ---------------------------------------------------------------------------------
config=""
duration_s=""
seed=1
downtime_ms="500-3000"
pause_ms="500-3000"
gap_ms="1500-5000"
events_arg="kill,pause,restart"
cut_ms="2000-8000"
hosts_dir=""
warmup_s=4
quiet_s=8
connections=2
outstanding=2000
target_tps=0
checkpoint_every=20
dir=""
dry_run=0
overrides=()
argv=()  # the command line less --dry-run: what replays this run
for a in "$@"; do [[ "$a" == --dry-run ]] || argv+=("$a"); done

is_uint() { [[ "$1" =~ ^[0-9]+$ ]] && ((${#1} <= 12)); }
is_range() { [[ "$1" =~ ^[0-9]{1,9}-[0-9]{1,9}$ ]] && ((${1%-*} <= ${1#*-})); }

while (($# > 0)); do
  a="$1"
  case "$a" in
    -h|--help) usage; exit 0 ;;
    --dry-run) dry_run=1; shift; continue ;;
    --*.*=*) overrides+=("$a"); shift; continue ;;
  esac
  # Flags with a value: --flag V or --flag=V.
  case "$a" in
    --duration-s|--seed|--downtime-ms|--pause-ms|--gap-ms|--warmup-s|--quiet-s|--connections|--outstanding|\
    --target-tps|--checkpoint-every|--dir|--events|--cut-ms|--hosts)
      (($# >= 2)) || bad "$a needs a value"
      flag="$a"; val="$2"; shift 2 ;;
    --duration-s=*|--seed=*|--downtime-ms=*|--pause-ms=*|--gap-ms=*|--warmup-s=*|--quiet-s=*|--connections=*|\
    --outstanding=*|--target-tps=*|--checkpoint-every=*|--dir=*|--events=*|--cut-ms=*|--hosts=*)
      flag="${a%%=*}"; val="${a#*=}"; shift ;;
    -*) bad "unknown flag '$a'" ;;
    *)
      [[ -z "$config" ]] || bad "one CONFIG only (got '$config' and '$a')"
      config="$a"; shift; continue ;;
  esac
  case "$flag" in
    --duration-s) is_uint "$val" || bad "--duration-s: expected whole seconds (got '$val')"; duration_s="$val" ;;
    --seed) is_uint "$val" || bad "--seed: expected a non-negative integer (got '$val')"; seed="$val" ;;
    --downtime-ms) is_range "$val" || bad "--downtime-ms: expected MIN-MAX in ms, MIN <= MAX (got '$val')"; downtime_ms="$val" ;;
    --pause-ms) is_range "$val" || bad "--pause-ms: expected MIN-MAX in ms, MIN <= MAX (got '$val')"; pause_ms="$val" ;;
    --gap-ms) is_range "$val" || bad "--gap-ms: expected MIN-MAX in ms, MIN <= MAX (got '$val')"; gap_ms="$val" ;;
    --warmup-s) is_uint "$val" || bad "--warmup-s: expected whole seconds (got '$val')"; warmup_s="$val" ;;
    --quiet-s) is_uint "$val" || bad "--quiet-s: expected whole seconds (got '$val')"; quiet_s="$val" ;;
    --connections) is_uint "$val" && ((val >= 1)) || bad "--connections: expected a count >= 1 (got '$val')"; connections="$val" ;;
    --outstanding) is_uint "$val" && ((val >= 1)) || bad "--outstanding: expected a count >= 1 (got '$val')"; outstanding="$val" ;;
    --target-tps) is_uint "$val" || bad "--target-tps: expected txns per second, 0 = no limit (got '$val')"; target_tps="$val" ;;
    --checkpoint-every) is_uint "$val" && ((val >= 1)) || bad "--checkpoint-every: expected batches >= 1 (got '$val')"; checkpoint_every="$val" ;;
    --dir) [[ -n "$val" ]] || bad "--dir: empty"; dir="$val" ;;
    --events) events_arg="$val" ;;
    --cut-ms) is_range "$val" || bad "--cut-ms: expected MIN-MAX in ms, MIN <= MAX (got '$val')"; cut_ms="$val" ;;
    --hosts) [[ -n "$val" ]] || bad "--hosts: empty"; hosts_dir="$val" ;;
  esac
done
# The kinds of event and their weights in the draw: the chance of a kind is its weight over the
# sum of the chosen kinds' weights. The list is taken in this order whatever order --events gives,
# so a set of kinds always draws the same schedule from a seed (and kill, pause, restart alone draw
# the schedule they always drew: 40, 35 and 25 in 100).
readonly kinds_all=(kill pause restart isolate split bridge oneway)
readonly kind_weights=(40 35 25 30 25 20 25)
declare -A want_kind=()
IFS=, read -r -a kinds_given <<<"$events_arg"
((${#kinds_given[@]} > 0)) || bad "--events: empty (expected a comma-separated list of ${kinds_all[*]})"
for k in "${kinds_given[@]}"; do
  [[ " ${kinds_all[*]} " == *" $k "* ]] || bad "--events: unknown kind '$k' (expected a comma-separated list of ${kinds_all[*]})"
  [[ -z "${want_kind[$k]+x}" ]] || bad "--events: '$k' named twice"
  want_kind[$k]=1
done
kinds=() weights=() weight_sum=0 cut_kinds=0
for ((k = 0; k < ${#kinds_all[@]}; k++)); do
  [[ -n "${want_kind[${kinds_all[$k]}]+x}" ]] || continue
  kinds+=("${kinds_all[$k]}") weights+=("${kind_weights[$k]}")
  weight_sum=$((weight_sum + kind_weights[k]))
  ((k < 3)) || cut_kinds=1
done
[[ -n "$config" ]] || bad "no CONFIG given"
[[ -f "$config" ]] || bad "config '$config' is not a file"
[[ -n "$duration_s" ]] || bad "--duration-s S is required"
((duration_s >= 20)) || bad "--duration-s: at least 20 s (got $duration_s)"
((warmup_s + quiet_s < duration_s)) || bad "--warmup-s $warmup_s + --quiet-s $quiet_s leave no time for events in $duration_s s"
config="$(cd "$(dirname "$config")" && pwd)/$(basename "$config")"
[[ -x "$bin/qrstore-server" && -x "$bin/qrstore-client" ]] || {
  echo "chaos.sh: no $bin/qrstore-server or qrstore-client: build first (cmake --build build)" >&2; exit 2; }

server() { "$bin/qrstore-server" --config "$config" "${overrides[@]+"${overrides[@]}"}" "$@"; }
get() { server --get "$1"; }
name="$(get cluster.name 2>/dev/null)" || { get cluster.name >/dev/null || true; bad "CONFIG or an override is invalid (above)"; }
backend="$(get replication.backend)"
kind="$(get workload.kind)"
list="$(server --list-nodes)" || bad "the node list of $config is invalid (above)"
nodes=() node_part=() node_host=()
partitions=1
while read -r n h _ _ part _; do
  nodes+=("$n") node_part+=("$part") node_host+=("$h")
  ((part + 1 <= partitions)) || partitions=$((part + 1))
done <<<"$list"
grid=${#nodes[@]}            # every node
group=$((grid / partitions))  # the members of each partition's group
parts_of=""                   # "node:partition ..." for the status parsers
for ((i = 0; i < grid; i++)); do parts_of+="${nodes[$i]}:${node_part[$i]} "; done
[[ "$backend" == raft || "$backend" == zookeeper ]] ||
  bad "replication.backend is '$backend': chaos needs one that fails over (raft or zookeeper)"
((group >= 3)) || bad "$group member(s) per group: chaos needs groups of at least 3 (a majority stays up while one is away)"
if ((cut_kinds)); then
  [[ "$backend" == raft ]] ||
    bad "--events: the network cuts (isolate, split, bridge, oneway) run with raft only, not $backend (a ZooKeeper server sits outside the hosts' links)"
  ((partitions == 1)) || bad "--events: the network cuts run on one group, not on a partitioned row's grid ($partitions partitions)"
  # Between nodes on one machine's loopback there is no link to cut: the cuts need test hosts.
  [[ -n "$hosts_dir" || "$dry_run" == 1 ]] ||
    bad "--events: the network cuts (isolate, split, bridge, oneway) are made between the test hosts of scripts/hosts.sh, not between nodes on 127.0.0.1: give --hosts DIR (scripts/hosts.sh up $group --dir DIR, and a config whose nodes' hosts are the addresses it prints; docs/chaos.md, \"Network cuts\")"
fi

# --- the schedule: from the seed only ----------------------------------------------------------
# A 64-bit LCG (Knuth's MMIX constants) in bash arithmetic, which wraps modulo 2^64: the same
# numbers from a seed on every machine and bash version (bash's $RANDOM sequence changed in 5.1;
# awk's rand differs between mawk and gawk).
rng=$((seed * 2862933555777941757 + 3037000493))
rand() {  # rand N: sets r to a number in [0, N)
  rng=$((rng * 6364136223846793005 + 1442695040888963407))
  r=$((((rng >> 33) & 0x7fffffff) % $1))
}
rand_in() {  # rand_in MIN-MAX: sets r to a number in [MIN, MAX]
  local lo="${1%-*}" hi="${1#*-}"
  rand $((hi - lo + 1)); r=$((lo + r))
}

is_cut() { [[ "$1" == isolate || "$1" == split || "$1" == bridge || "$1" == oneway ]]; }

# draw_followers COUNT [EXCLUDE]: draws COUNT distinct follower numbers from 1..group-1 (less
# EXCLUDE); sets picked to them and pool to the rest, both ascending.
draw_followers() {
  local count="$1" exclude="${2:-0}" j
  pool=() picked=()
  for ((j = 1; j < group; j++)); do ((j == exclude)) || pool+=("$j"); done
  for ((j = 0; j < count; j++)); do
    rand "${#pool[@]}"
    picked+=("${pool[$r]}")
    pool=("${pool[@]:0:r}" "${pool[@]:r+1}")
  done
  ((${#picked[@]} == 0)) || mapfile -t picked < <(printf '%s\n' "${picked[@]}" | sort -n)
}
# roles L F1 F3 ...: the roles as a comma-separated set ("L,F1,F3"); "F" prefixes each number.
roles() {
  local s="" x
  for x in "$@"; do [[ "$x" == L ]] && s+="${s:+,}L" || s+="${s:+,}F$x"; done
  echo "$s"
}
# draw_cut KIND: sets target to a cut's shape in roles (L the leader, Fk the k-th other member).
draw_cut() {
  local minority=$(((group - 1) / 2)) mid
  case "$1" in
    isolate)
      rand 2
      if ((r == 0)); then target=L; else rand $((group - 1)); target="F$((r + 1))"; fi ;;
    split)  # the minority first, the leader in it or in the majority
      rand 2
      if ((r == 0)); then
        draw_followers $((minority - 1))
        target="$(roles L "${picked[@]+"${picked[@]}"}")|$(roles "${pool[@]}")"
      else
        draw_followers "$minority"
        target="$(roles "${picked[@]}")|$(roles L "${pool[@]}")"
      fi ;;
    bridge)  # a follower reaching both sets, the leader's set first
      rand $((group - 1)); mid=$((r + 1))
      draw_followers $((group / 2 - 1)) "$mid"
      target="F$mid:$(roles L "${picked[@]+"${picked[@]}"}")|$(roles "${pool[@]}")" ;;
    oneway)  # the leader's packets to a follower, or a follower's to the leader
      rand 2; local dir=$r
      rand $((group - 1))
      if ((dir == 0)); then target="L>F$((r + 1))"; else target="F$((r + 1))>L"; fi ;;
  esac
}

ev_at=() ev_action=() ev_target=() ev_ms=()
t=$((warmup_s * 1000))
end_ms=$(((duration_s - quiet_s) * 1000))
for ((i = 0; i < kEventsMax; i++)); do
  rand_in "$gap_ms"; t=$((t + r))
  rand "$weight_sum"
  for ((k = 0; k < ${#kinds[@]}; k++)); do
    ((r < weights[k])) && { action="${kinds[$k]}"; break; }
    r=$((r - weights[k]))
  done
  case "$action" in
    kill) rand_in "$downtime_ms"; ms=$r ;;
    pause) rand_in "$pause_ms"; ms=$r ;;
    restart) ms=0 ;;
    *) rand_in "$cut_ms"; ms=$r ;;
  esac
  if is_cut "$action"; then
    draw_cut "$action"
  else
    # One event in three aims at whoever leads then (in a row: a partition drawn too); the others
    # at a node drawn from the group (the grid), which may be a leader too.
    rand 3
    if ((r == 0)); then
      target=leader
      if ((partitions > 1)); then rand "$partitions"; target="leader:$r"; fi
    else
      rand "$grid"; target="${nodes[$r]}"
    fi
  fi
  ((t + ms <= end_ms)) || break
  ev_at+=("$t") ev_action+=("$action") ev_target+=("$target") ev_ms+=("$ms")
  t=$((t + ms))
done
events=${#ev_at[@]}

secs() { printf '%d.%01d' $(($1 / 1000)) $((($1 % 1000) / 100)); }
if ((partitions > 1)); then
  echo "chaos: $config (cluster $name, $backend, $kind, $partitions partitions x $group rows: ${nodes[*]}; one node away at a time)"
else
  away_note="one member away at a time"
  ((cut_kinds == 0)) || away_note="one member away or one cut at a time"
  echo "chaos: $config (cluster $name, $backend, $kind, group of $group: ${nodes[*]}; $away_note)"
fi
echo "chaos: seed $seed, $duration_s s, $events events ($(IFS=,; echo "${kinds[*]}")); replay: scripts/chaos.sh ${argv[*]}"
echo "chaos: schedule (offset, action, node, duration; each event also waits until the group is whole):"
((cut_kinds == 0)) ||
  echo "chaos: (a cut's targets: L the node leading when it comes, F1..F$((group - 1)) the others in config order; split A|B: A the minority; bridge M:A|B: M reaches both, A holds the leader; oneway X>Y: X's packets to Y dropped)"
for ((i = 0; i < events; i++)); do
  d="$(secs "${ev_ms[$i]}")s"
  [[ "${ev_action[$i]}" == restart ]] && d="-"
  printf 'chaos:   %7ss  %-8s %-8s %s\n' "+$(secs "${ev_at[$i]}")" "${ev_action[$i]}" "${ev_target[$i]}" "$d"
done
if ((dry_run)); then
  ((cut_kinds == 0)) || [[ -n "$hosts_dir" ]] || echo "chaos: (a run of these cuts needs --hosts DIR)"
  exit 0
fi

# --- the hosts ---------------------------------------------------------------------------------
hosts_sh="$here/scripts/hosts.sh"
netsplit_sh="$here/scripts/netsplit.sh"
declare -A addr_of=()
if [[ -n "$hosts_dir" ]]; then
  [[ -d "$hosts_dir" ]] || bad "--hosts: no folder $hosts_dir (make the hosts first: scripts/hosts.sh up $group --dir DIR)"
  hosts_dir="$(cd "$hosts_dir" && pwd -P)"
  hs="$("$hosts_sh" status --dir "$hosts_dir" 2>&1)" || bad "--hosts: not every host of $hosts_dir is up (scripts/hosts.sh status): ${hs//$'\n'/; }"
  host_addrs=" $(awk '$1 ~ /^qrh-/ { printf "%s ", $2 }' <<<"$hs")"
  for ((j = 0; j < grid; j++)); do
    n="${nodes[$j]}" h="${node_host[$j]}"
    [[ "$host_addrs" == *" $h "* ]] ||
      bad "--hosts: node $n's host $h is not a host of $hosts_dir (its hosts:$host_addrs); on 127.0.0.1 no link between nodes can be cut: give the config the hosts' addresses"
    for m in "${!addr_of[@]}"; do
      [[ "${addr_of[$m]}" != "$h" ]] || bad "--hosts: nodes $m and $n are both on $h: each node needs a host of its own (a cut separates hosts)"
    done
    addr_of[$n]="$h"
  done
  export QRSTORE_SSH_CONFIG="${QRSTORE_SSH_CONFIG:-$hosts_dir/ssh_config}"
  if ((cut_kinds)); then
    hs="$("$netsplit_sh" status --dir "$hosts_dir" 2>&1)" || bad "--hosts: scripts/netsplit.sh status --dir $hosts_dir failed: ${hs//$'\n'/; }"
    grep -q "nothing is cut" <<<"$hs" ||
      bad "--hosts: links between the hosts of $hosts_dir are cut already (${hs//$'\n'/; }): heal them first (scripts/netsplit.sh heal --dir $hosts_dir)"
  fi
fi

# --- the run -----------------------------------------------------------------------------------
if [[ -z "$dir" ]]; then
  dir="$(mktemp -d /tmp/qrstore-chaos.XXXXXX)"
else
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
fi
export QRSTORE_RUN_DIR="${QRSTORE_RUN_DIR:-$dir/run}"
run="$QRSTORE_RUN_DIR/$name"
dump="$dir/dump"
# A cluster of this name already running from this run folder is not chaos.sh's to kill or stop.
for n in "${nodes[@]}"; do
  p="$(cat "$run/$n.pid" 2>/dev/null || true)"
  if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--node $n"; then
    echo "chaos.sh: node $n of $name is already running (pid $p, run folder $run): stop it first (scripts/cluster.sh down $config)" >&2
    exit 2
  fi
done
rm -rf "$dir/checkpoints" "$dump"
mkdir -p "$dump" "$QRSTORE_RUN_DIR"
node_opts=(--server.checkpoint_dir="$dir/checkpoints" --server.checkpoint_every_batches="$checkpoint_every"
  "${overrides[@]+"${overrides[@]}"}" --server.dump_state_dir="$dump")
exec 3>>"$dir/chaos.log"
t0_s=$SECONDS
start_ms=$(($(date +%s%N) / 1000000))
now_ms() { echo $(($(date +%s%N) / 1000000 - start_ms)); }
say() { local line; line="chaos: [+$(secs "$(now_ms)")s] $*"; echo "$line"; echo "$line" >&3; }

# Counts for the ledger.
kills=0 pauses=0 restarts=0 starts=0 deposed=0 leader_hits=0 skipped=0 unsettled=0
# The cuts: by kind and shape, and what followed each heal.
cuts=0 cut_isolate_leader=0 cut_isolate_follower=0 cut_split_leader_minority=0 cut_split_leader_majority=0
cut_bridge=0 cut_oneway_from_leader=0 cut_oneway_to_leader=0
cut_new_leader=0 cut_reelected=0 cut_kept=0 cut_rejoins=0 heal_whole_min_ms="" heal_whole_max_ms=0
late_ms=0        # how far the schedule (and the run's end) is pushed back: slow settling
readonly max_run_ms=$((3 * duration_s * 1000))
problems=()
problem() { problems+=("$*"); say "PROBLEM: $*"; }

paused=""        # the node now stopped by SIGSTOP, if any
cut_active=0     # a cut is in force (to be healed however the run ends)
away=""          # the node now killed on purpose, if any
client_pid=""
downed=0
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [[ -n "$paused" ]]; then "$cluster_sh" kill "$config" "$paused" CONT >/dev/null 2>&1 || true; fi
  if ((cut_active)); then "$netsplit_sh" heal --dir "$hosts_dir" >>"$dir/events.out" 2>&1 || true; fi
  if [[ -n "$client_pid" ]] && kill -0 "$client_pid" 2>/dev/null; then kill -TERM "$client_pid" 2>/dev/null || true; fi
  if ((downed == 0)); then
    QRSTORE_STOP_TIMEOUT_S=20 "$cluster_sh" down "$config" >>"$dir/down.out" 2>&1 || true
  fi
  if [[ -n "$client_pid" ]]; then
    for _ in $(seq 50); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$client_pid" 2>/dev/null || true
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

say "work folder $dir; run folder $run"
"$cluster_sh" up "$config" --fresh "${node_opts[@]}" >"$dir/up.out" 2>&1 || { cat "$dir/up.out" >&2; problem "cluster.sh up failed"; exit 1; }
say "$grid nodes up (cluster.sh up: $dir/up.out)"

pace=()
((target_tps > 0)) && pace=(--target-tps "$target_tps")  # 0: no limit (the client takes no 0)
# The client's own time is the bound (3 x S); chaos.sh ends it with SIGINT (as if its time were
# up) S seconds in, plus however much the schedule was pushed back.
"$bin/qrstore-client" --config "$config" "${overrides[@]+"${overrides[@]}"}" --duration-s "$((3 * duration_s))" \
  --connections "$connections" --outstanding "$outstanding" "${pace[@]+"${pace[@]}"}" --seed "$seed" --json \
  >"$dir/client.out" 2>"$dir/client.err" &
client_pid=$!
client_t0_ms=$(now_ms)
say "client started (pid $client_pid): $duration_s s, $connections connections x $outstanding in flight, target $target_tps txn/s (0: no limit)"

# Status rows: node role state batches committed lag digest leader error... (a paused node never
# answers: a short connect time-out).
status() {
  timeout 20 "$bin/qrstore-client" --config "$config" "${overrides[@]+"${overrides[@]}"}" --status \
    --client.connect_timeout_ms=1000 2>/dev/null || true
}
# The node table's rows only (a row's status adds a partition and a row table below it).
# leader_now [P]: the node leading (and serving) partition P (default 0).
leader_now() {
  status | awk -v map="$parts_of" -v want="${1:-0}" '
    BEGIN { k = split(map, a, " "); for (i = 1; i <= k; i++) { split(a[i], b, ":"); part[b[1]] = b[2] } }
    ($1 in part) && part[$1] == want && $2 == "leader" && $3 == "serving" { print $1; exit }'
}
# Whole: every node answers, exactly one leader serving per partition, every follower serving,
# caught up and not disagreeing.
whole() {
  status | awk -v lag_max="$kCaughtUpLagBatches" -v map="$parts_of" -v n="$grid" -v parts="$partitions" '
    BEGIN { k = split(map, a, " "); for (i = 1; i <= k; i++) { split(a[i], b, ":"); part[b[1]] = b[2] } }
    !($1 in part) { next }
    { rows++ }
    $2 == "leader" && $3 == "serving" && $7 != "MISMATCH" { leaders[part[$1]]++; next }
    $2 == "follower" && $3 == "serving" && $6 ~ /^[0-9]+$/ && $6 <= lag_max && ($7 == "agrees" || $7 == "behind") { ok++; next }
    { bad++ }
    END {
      for (p = 0; p < parts; p++) if (leaders[p] != 1) exit 1
      exit !(rows == n && ok == n - parts && bad == 0)
    }'
}

# The checkpoint NODE's last start loaded, as its log says.
restored() {
  grep -ho 'restored from [^ ]*: the state after batch [0-9]*' "$run/$1.log" | tail -1 |
    sed 's|restored from .*/\(checkpoint-[0-9]*\.qrc\):|restored from \1:|' || true
}

# A node that ended without being killed by us: note its exit status and start it again.
restart_exited() {
  local n code p
  for n in "${nodes[@]}"; do
    [[ "$n" != "$away" && -f "$run/$n.exit" ]] || continue
    # (the .exit of a process `cluster.sh restart` killed may land just after the new one started)
    p="$(cat "$run/$n.pid" 2>/dev/null || true)"
    if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; then rm -f "$run/$n.exit"; continue; fi
    code="$(cat "$run/$n.exit")"
    if [[ "$code" == 3 ]]; then
      deposed=$((deposed + 1))
      problem "$n exited with status 3 (deposed) instead of rejoining by itself: $(grep -h 'stopping by itself\|waited to rejoin' "$run/$n.log" | tail -1 | cut -c1-160)"
    else
      problem "$n exited by itself with status $code: $(tail -n 3 "$run/$n.log" | tr '\n' ' ' | cut -c1-400)"
    fi
    if "$cluster_sh" up "$config" "${node_opts[@]}" >>"$dir/up.out" 2>&1; then
      starts=$((starts + 1))
      say "started $n again: $(restored "$n")"
    else
      problem "cluster.sh up could not start $n again: $(tail -n 5 "$dir/up.out" | tr '\n' ' ')"
    fi
  done
}

# Sleeps MS milliseconds, watching for nodes that exit meanwhile.
watch_for() {
  local until=$(($(now_ms) + $1))
  while (($(now_ms) < until)); do
    restart_exited
    sleep 0.2
  done
}

# Waits (bounded) until the group is whole; returns 1 if it never became so.
settle() {
  local deadline=$((SECONDS + settle_timeout_s))
  while ((SECONDS < deadline)); do
    restart_exited
    whole && return 0
    sleep 0.3
  done
  return 1
}

client_running() { kill -0 "$client_pid" 2>/dev/null; }

# The serving leader as the leader names itself: "NODE@TERM".
leader_term() {
  status | awk -v map="$parts_of" '
    BEGIN { k = split(map, a, " "); for (i = 1; i <= k; i++) { split(a[i], b, ":"); part[b[1]] = b[2] } }
    ($1 in part) && $2 == "leader" && $3 == "serving" { print $8; exit }'
}
# Rejoins of deposed members so far, from the nodes' logs.
rejoin_count() { cat "$run"/*.log 2>/dev/null | grep -c 'W \[server\] rejoining (rejoin [0-9]* of this process)' || true; }
# role_name L|Fk: the node in that role now (lead and others set by run_cut).
role_name() { if [[ "$1" == L ]]; then echo "$lead"; else echo "${others[$((${1#F} - 1))]}"; fi; }
# names_of / addrs_of SET: a comma-separated set of roles as node names / as host addresses.
names_of() {
  local s="" x; local -a xs
  IFS=, read -r -a xs <<<"$1"
  for x in "${xs[@]}"; do s+="${s:+,}$(role_name "$x")"; done
  echo "$s"
}
addrs_of() {
  local s="" x; local -a xs
  IFS=, read -r -a xs <<<"$1"
  for x in "${xs[@]}"; do s+="${s:+,}${addr_of[$(role_name "$x")]}"; done
  echo "$s"
}
netsplit() { "$netsplit_sh" "$@" --dir "$hosts_dir" 2>&1; }

# run_cut I: event I, a network cut: made, held for its duration, healed, then the group waited
# for (bounded) and what changed noted. Returns 1 when the group is not whole after the heal.
run_cut() {
  local i="$1" action="${ev_action[$1]}" spec="${ev_target[$1]}" ms="${ev_ms[$1]}"
  local before after what line heal_ms whole_ms r0 r1 a b m x outcome
  lead="$(leader_now 0)"
  if [[ -z "$lead" ]]; then
    problem "event $((i + 1)): no leader serving to cut around: $(status | tr -s ' ' | tr '\n' ';')"
    return 0
  fi
  before="$(leader_term)"
  others=()
  for x in "${nodes[@]}"; do [[ "$x" == "$lead" ]] || others+=("$x"); done
  case "$action" in
    isolate)
      x="$(role_name "$spec")"
      cut_args=(isolate "${addr_of[$x]}")
      if [[ "$spec" == L ]]; then
        what="isolate $x (leader)"; cut_isolate_leader=$((cut_isolate_leader + 1)); leader_hits=$((leader_hits + 1))
      else
        what="isolate $x (follower)"; cut_isolate_follower=$((cut_isolate_follower + 1))
      fi ;;
    split)
      a="${spec%|*}" b="${spec#*|}"
      cut_args=(split "$(addrs_of "$a")" "$(addrs_of "$b")")
      if [[ "$a" == L* ]]; then
        what="split $(names_of "$a") | $(names_of "$b") (the leader $lead in the minority)"
        cut_split_leader_minority=$((cut_split_leader_minority + 1)); leader_hits=$((leader_hits + 1))
      else
        what="split $(names_of "$a") | $(names_of "$b") (the leader $lead in the majority)"
        cut_split_leader_majority=$((cut_split_leader_majority + 1))
      fi ;;
    bridge)
      m="${spec%%:*}" x="${spec#*:}"; a="${x%|*}" b="${x#*|}"
      cut_args=(bridge "${addr_of[$(role_name "$m")]}" "$(addrs_of "$a")" "$(addrs_of "$b")")
      what="bridge $(role_name "$m") between $(names_of "$a") (the leader's side) and $(names_of "$b")"
      cut_bridge=$((cut_bridge + 1)) ;;
    oneway)
      a="${spec%>*}" b="${spec#*>}"
      cut_args=(oneway "${addr_of[$(role_name "$a")]}" "${addr_of[$(role_name "$b")]}")
      if [[ "$a" == L ]]; then
        what="oneway: the leader $lead's packets to $(role_name "$b") dropped"; cut_oneway_from_leader=$((cut_oneway_from_leader + 1))
      else
        what="oneway: $(role_name "$a")'s packets to the leader $lead dropped"; cut_oneway_to_leader=$((cut_oneway_to_leader + 1))
      fi ;;
  esac
  r0="$(rejoin_count)"
  say "event $((i + 1))/$events: $what, for $(secs "$ms") s ($spec; $lead leads, ${before#*@} its term)"
  cut_active=1
  if ! line="$(netsplit "${cut_args[@]}")"; then
    problem "event $((i + 1)): netsplit.sh ${cut_args[*]} failed: ${line//$'\n'/ }"
  else
    echo "$line" >>"$dir/events.out"
    cuts=$((cuts + 1))
    watch_for "$ms"
  fi
  # (a heal that failed is tried again on the way out)
  if line="$(netsplit heal)"; then cut_active=0; else problem "event $((i + 1)): netsplit.sh heal failed: ${line//$'\n'/ }"; fi
  echo "$line" >>"$dir/events.out"
  heal_ms=$(now_ms)
  say "healed: every cut removed"
  if ! settle; then
    problem "the group was not whole ${settle_timeout_s} s after the heal of event $((i + 1)): $(status | tr -s ' ' | tr '\n' ';')"
    return 1
  fi
  whole_ms=$(($(now_ms) - heal_ms))
  ((whole_ms <= heal_whole_max_ms)) || heal_whole_max_ms=$whole_ms
  [[ -n "$heal_whole_min_ms" ]] && ((whole_ms >= heal_whole_min_ms)) || heal_whole_min_ms=$whole_ms
  after="$(leader_term)"
  r1="$(rejoin_count)"
  cut_rejoins=$((cut_rejoins + r1 - r0))
  if [[ "${after%@*}" != "${before%@*}" ]]; then
    cut_new_leader=$((cut_new_leader + 1)); outcome="${after%@*} leads now, in term ${after#*@} ($lead led in term ${before#*@})"
  elif [[ "$after" != "$before" ]]; then
    cut_reelected=$((cut_reelected + 1)); outcome="$lead leads again, in term ${after#*@} (was ${before#*@})"
  else
    cut_kept=$((cut_kept + 1)); outcome="$lead still leads, in term ${before#*@}"
  fi
  say "whole again $(secs "$whole_ms") s after the heal: $outcome; $((r1 - r0)) rejoin(s) of a deposed member"
  return 0
}

for ((i = 0; i < events; i++)); do
  at=$((client_t0_ms + ev_at[i] + late_ms))
  ((at <= $(now_ms))) || watch_for $((at - $(now_ms)))
  if ! settle; then
    problem "the group was not whole ${settle_timeout_s} s after the last event: $(status | tr -s ' ' | tr '\n' ';')"
    skipped=$((events - i))
    unsettled=1
    break
  fi
  # The group took longer than planned to settle: the rest of the schedule moves back by as much.
  settled_ms=$(now_ms)
  ((settled_ms <= at)) || late_ms=$((late_ms + settled_ms - at))
  if ! client_running; then
    skipped=$((events - i))
    say "skipping the last $skipped event(s): the client has ended"
    break
  fi
  if (($(now_ms) - client_t0_ms + ev_ms[i] + quiet_s * 1000 / 2 > max_run_ms)); then
    skipped=$((events - i))
    say "skipping the last $skipped event(s): the run would pass 3 x --duration-s (the group took $(secs "$late_ms") s longer than planned to settle)"
    break
  fi
  action="${ev_action[$i]}" target="${ev_target[$i]}" ms="${ev_ms[$i]}"
  if is_cut "$action"; then
    if ! run_cut "$i"; then
      skipped=$((events - i - 1))
      unsettled=1
      break
    fi
    continue
  fi
  node="$target"
  if [[ "$target" == leader || "$target" == leader:* ]]; then
    aim=0; [[ "$target" == leader:* ]] && aim="${target#leader:}"
    node="$(leader_now "$aim")"
    [[ -n "$node" ]] || { problem "event $((i + 1)): no leader serving to aim at: $(status | tr -s ' ' | tr '\n' ';')"; continue; }
  fi
  for ((j = 0; j < grid; j++)); do [[ "${nodes[$j]}" == "$node" ]] && p_of="${node_part[$j]}"; done
  lead="$(leader_now "$p_of")"
  [[ "$node" == "$lead" ]] && leader_hits=$((leader_hits + 1))
  role="follower"; [[ "$node" == "$lead" ]] && role="leader"
  case "$action" in
    kill)
      say "event $((i + 1))/$events: kill $node ($role), down for $(secs "$ms") s"
      away="$node"
      "$cluster_sh" kill "$config" "$node" KILL >>"$dir/events.out" 2>&1 || say "(kill: $node was not running)"
      kills=$((kills + 1))
      watch_for "$ms"
      away=""
      rm -f "$run/$node.exit"  # (killed on purpose: not an exit by itself)
      if "$cluster_sh" up "$config" "${node_opts[@]}" >>"$dir/up.out" 2>&1; then
        restarts=$((restarts + 1))
        say "started $node again: $(restored "$node")"
      else
        problem "cluster.sh up could not start $node again: $(tail -n 5 "$dir/up.out" | tr '\n' ' ')"
      fi
      ;;
    pause)
      say "event $((i + 1))/$events: pause $node ($role) for $(secs "$ms") s"
      paused="$node"
      "$cluster_sh" kill "$config" "$node" STOP >>"$dir/events.out" 2>&1 || say "(pause: $node was not running)"
      pauses=$((pauses + 1))
      watch_for "$ms"
      "$cluster_sh" kill "$config" "$node" CONT >>"$dir/events.out" 2>&1 || true
      paused=""
      say "resumed $node"
      ;;
    restart)
      say "event $((i + 1))/$events: restart $node ($role): killed and started at once"
      away="$node"
      if "$cluster_sh" restart "$config" "$node" >>"$dir/up.out" 2>&1; then
        restarts=$((restarts + 1))
        say "restarted $node: $(restored "$node")"
      else
        problem "cluster.sh restart $node failed: $(tail -n 5 "$dir/up.out" | tr '\n' ' ')"
      fi
      away=""
      ;;
  esac
done
say "events done: $kills kill(s), $pauses pause(s), $((restarts - kills)) restart(s), $cuts cut(s); waiting for the group and the client"
((unsettled)) || settle || problem "the group was not whole ${settle_timeout_s} s after the last event: $(status | tr -s ' ' | tr '\n' ';')"
# The run ends S seconds after the client started, pushed back as the schedule was (at most 3 x S,
# the client's own bound): SIGINT ends it as if its time were up.
run_end_ms=$((client_t0_ms + duration_s * 1000 + late_ms))
((run_end_ms <= client_t0_ms + max_run_ms)) || run_end_ms=$((client_t0_ms + max_run_ms))
((late_ms == 0)) || say "the run ends $(secs "$late_ms") s later than planned: the group took that much longer to settle"
while client_running && (($(now_ms) < run_end_ms)); do restart_exited; sleep 0.2; done
client_running && kill -INT "$client_pid" 2>/dev/null || true

# --- the end: the client's verdict, the nodes' state, their dumps ------------------------------
deadline=$((SECONDS + duration_s + 120))
while client_running && ((SECONDS < deadline)); do restart_exited; sleep 0.5; done
if client_running; then
  problem "the client did not end within $((duration_s + 120)) s of the last event"
  kill -TERM "$client_pid" 2>/dev/null || true
fi
client_code=0
wait "$client_pid" || client_code=$?
client_pid=""
out="$dir/client.out"
field() {
  python3 - "$out" "$1" <<'PY' 2>/dev/null || echo "?"
import json, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip().startswith("{")]
v = json.loads(lines[-1])
for k in sys.argv[2].split("."):
    v = v[k]
print(str(v).lower() if isinstance(v, bool) else v)
PY
}
checks=()
pass() { checks+=("ok    $*"); }
flunk() { checks+=("FAIL  $*"); problems+=("$*"); }

((client_code == 0)) && pass "the client exited 0" ||
  flunk "the client exited with $client_code: $(grep -E '^qrstore-client:| E \[' "$dir/client.err" | tail -n 3 | tr '\n' ' ' | cut -c1-400)"
in_doubt="$(field in_doubt)"
[[ "$in_doubt" == 0 ]] && pass "in_doubt 0" || flunk "in_doubt $in_doubt (the client's json)"
[[ "$(field replicas_agree)" == true ]] && pass "the client saw every replica agree" ||
  flunk "replicas_agree $(field replicas_agree): $(field replicas_detail)"
final_status="$(status)"
if whole; then pass "every node serving, the followers caught up (status)"; else flunk "not every node serving or caught up: $(echo "$final_status" | tr -s ' ' | tr '\n' ';')"; fi

# Failovers seen: each promotion is logged by the node that took over ("leads from batch").
promotions="$(cat "$run"/*.log 2>/dev/null | grep -c 'leads from batch\|leads partition [0-9]* in the row' || true)"
restored="$(cat "$run"/*.log 2>/dev/null | grep -c 'restored from' || true)"
stranded="$(cat "$run"/*.log 2>/dev/null | grep -ci 'stranded' || true)"
fetched="$(cat "$run"/*.log 2>/dev/null | grep -c 'I \[server\].* fetched .*checkpoint-.* from ' || true)"
offers="$(cat "$run"/*.log 2>/dev/null | grep -c "takes the leader's snapshot offer" || true)"
rejoins="$(cat "$run"/*.log 2>/dev/null | grep -c 'W \[server\] rejoining (rejoin [0-9]* of this process)' || true)"

downed=1
if QRSTORE_STOP_TIMEOUT_S=60 "$cluster_sh" down "$config" >"$dir/down.out" 2>&1; then
  pass "cluster.sh down stopped every node cleanly"
else
  flunk "cluster.sh down was not clean: $(grep -v 'stopped cleanly' "$dir/down.out" | head -n 8 | tr '\n' ' ' | cut -c1-600)"
fi
same=1 total=0 dumped=0
for ((p = 0; p < partitions; p++)); do
  first=""
  for ((j = 0; j < grid; j++)); do
    ((node_part[j] == p)) || continue
    n="${nodes[$j]}" f="$dump/${nodes[$j]}.tsv"
    if [[ ! -s "$f" ]]; then flunk "no dump from $n ($f)"; same=0; continue; fi
    if [[ -z "$first" ]]; then first="$f"
    elif ! cmp -s "$first" "$f"; then flunk "dumps differ: $(basename "$first") vs $n.tsv: $(diff "$first" "$f" | head -3 | tr '\n' ' ')"; same=0
    fi
  done
  # (one dump per partition: each holds its partition's records only)
  [[ -n "$first" ]] && total=$((total + $(awk -F'\t' '{ s += $2 } END { printf "%d", s }' "$first"))) && dumped=$((dumped + 1))
done
((same)) && pass "every node's dump identical$( ((partitions > 1)) && echo " within its partition") (${nodes[*]})"
if ((dumped == partitions)); then
  if [[ "$kind" == transfer ]]; then
    want=$(($(get transfer.accounts) * $(get transfer.initial_balance)))
    [[ "$total" == "$want" ]] && pass "money conserved: $total" || flunk "money not conserved: $total, want $want"
  else
    acked="$(field update_ops_committed)"
    [[ "$total" == "$acked" ]] && pass "exactly once: the update counters sum to $total = update_ops_committed" ||
      flunk "the update counters sum to $total, the client saw $acked update ops committed (lost if less, twice if more)"
  fi
fi

echo "chaos: ledger (seed $seed, $duration_s s, $config, cluster $name, $backend, $kind):"
echo "chaos:   events           $((events - skipped)) of $events run ($leader_hits aimed at the leader); pushed back by $(secs "$late_ms") s in all (slow settling)"
echo "chaos:   kills            $kills (each started again after its downtime)"
echo "chaos:   pauses           $pauses"
echo "chaos:   restarts         $restarts (after a kill or cluster.sh restart), $starts more of nodes that exited by themselves"
echo "chaos:   rejoins          $rejoins (a deposed leader that executed itself again and followed: 'rejoining (rejoin N')"
echo "chaos:   deposed exits    $deposed (status 3 instead of a rejoin: each one a problem)"
echo "chaos:   failovers        $promotions promotion(s) in the nodes' logs ('leads from batch'); the client moved $(field failovers) time(s)"
echo "chaos:   checkpoints      $restored restart(s) from a checkpoint ('restored from'); $fetched checkpoint transfer(s) ('fetched'); $offers snapshot offer(s) taken (raft)"
echo "chaos:   stranded         $stranded log line(s) naming a stranded member"
if ((cut_kinds)); then
  echo "chaos:   cuts             $cuts, each healed after its duration: isolate $((cut_isolate_leader + cut_isolate_follower)) (the leader $cut_isolate_leader, a follower $cut_isolate_follower), split $((cut_split_leader_minority + cut_split_leader_majority)) (the leader in the minority $cut_split_leader_minority, in the majority $cut_split_leader_majority), bridge $cut_bridge, oneway $((cut_oneway_from_leader + cut_oneway_to_leader)) (from the leader $cut_oneway_from_leader, to it $cut_oneway_to_leader)"
  echo "chaos:   after cuts       $cut_new_leader with a new leader, $cut_reelected the same leader in a new term, $cut_kept the same leader and term; $cut_rejoins rejoin(s) of a deposed member; whole again $(secs "${heal_whole_min_ms:-0}")-$(secs "$heal_whole_max_ms") s after a heal"
fi
echo "chaos:   txns             $(field committed_total) committed ($(field throughput_tps) txn/s), $(field aborted_total) aborted, $(field retried) sent again, in_doubt $(field in_doubt), longest without a commit $(field unavailable_ms) ms"
for c in "${checks[@]}"; do echo "chaos:   $c"; done
if ((${#problems[@]} > 0)); then
  echo "chaos: FAILED (${#problems[@]} problem(s)); replay: scripts/chaos.sh ${argv[*]}; logs in $run, the client's in $dir" >&2
  for p in "${problems[@]}"; do echo "chaos:   - $p" >&2; done
  exit 1
fi
rm -rf "$dir/checkpoints" "$dump"
echo "chaos: PASS ($(($SECONDS - t0_s)) s; logs in $run)"
