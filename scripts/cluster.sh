#!/usr/bin/env bash
# cluster.sh: launch, inspect and stop a qrstore cluster described by a config file.
#
#   scripts/cluster.sh up CONFIG [--fresh] [--key=value ...]
#                                                       start every node of CONFIG's cluster.nodes;
#                                                       --fresh first deletes the cluster's raft logs
#                                                       and checkpoints (a new, empty cluster)
#   scripts/cluster.sh down CONFIG                      stop what `up` started, leaders first
#   scripts/cluster.sh status CONFIG                    role, state, batches, lag, digest agreement,
#                                                       newest checkpoint per node
#   scripts/cluster.sh logs CONFIG [NODE] [--lines N]   the tail of every node's log (or one node's)
#   scripts/cluster.sh kill CONFIG NODE [SIGNAL]        send SIGNAL (default KILL) to one node (tests)
#   scripts/cluster.sh restart CONFIG NODE              kill NODE (SIGKILL, as a crash) and start it again:
#                                                       with server.checkpoint_dir it restarts from its newest
#                                                       checkpoint and catches up (docs/recovery.md)
#
# up: applies the overrides to every node, waits until each prints its ready line (on a
# time-out or an early exit it names the node and prints the tail of its log), and, when the
# effective backend is zookeeper and replication.zookeeper.hosts is empty, first starts a local
# ZooKeeper (scripts/zk-server.sh) and gives its address to every node. `up` is idempotent: nodes
# already running are left alone, so `up` after a node died restarts just that node (with the
# overrides of the first up). The overrides are saved in the run folder and used by
# down/status/logs and scripts/ycsb.sh.
# Data: a relative replication.raft.dir or server.checkpoint_dir (e.g. --replication.raft.dir=data/raft)
# is taken below the run folder, so every run folder has its own. A cluster with such data is
# durable: an `up` with no node running resumes what its data holds (each node loads its newest
# checkpoint and replays its raft log, or with ZooKeeper reads on from the same root, on the
# same local server's data: docs/recovery.md) unless --fresh, which deletes each node's
# <dir>/<node> first (and starts a new ZooKeeper root). The data remembers the overrides it was
# made with (RUN/made-with): an `up` given none uses those and says so; one given an override
# that contradicts them is refused (exit 2) unless --fresh; new keys are added. Each node checks
# its data's identity itself too (cluster/recovery/data_identity.h: exit 2 naming the key). A cluster
# without data folders starts empty at every `up` (a fresh ZooKeeper root each time). The
# scripts that need a new cluster (main-job, cluster-bench, failover-timeline, catchup-bench,
# chaos) pass --fresh.
#
# Run folder: $QRSTORE_RUN_DIR/<cluster.name> (default run/<cluster.name> in this checkout):
# per node <node>.pid, <node>.log (stderr), <node>.out (stdout), <node>.exit (exit code);
# overrides (the running cluster's, removed by down); made-with (a durable cluster's data's);
# zk/ when a local ZooKeeper was started. Programs: $QRSTORE_BIN (default build/bin).
#
# Nodes on other hosts: a node whose host is not this machine (127.0.0.1, localhost, ::1, this
# hostname or one of its addresses) is started over ssh on that host (`ssh HOST`: keys and
# ~/.ssh/config decide the login, or the file $QRSTORE_SSH_CONFIG when set, as `ssh -F`; never a
# password prompt). There, paths below this checkout (the config, the run folder, data folders,
# $QRSTORE_BIN) are taken below $QRSTORE_REMOTE_DIR (default: this checkout's path), where the
# same checkout must be built; any other path (a config or QRSTORE_RUN_DIR elsewhere) must be the
# same there, as on a shared file system. Such a node's pid, log, out and exit files are in its
# host's run folder, and up/down/status/logs/kill/restart act on it over ssh. Its ports must be
# reachable from here (status, down, the client) and from the other nodes; a ZooKeeper that up
# starts listens on 127.0.0.1, so with such nodes give replication.zookeeper.hosts.
# docs/multi-host.md; scripts/hosts.sh makes test hosts (network namespaces) on this machine.
# A local ZooKeeper gets QRSTORE_ZK_HEAP_MB of heap (default 1024: it keeps its last 500
# transactions in memory, and a planned batch is up to a few MB).
# Time-outs: QRSTORE_READY_TIMEOUT_S (default 90) for up, QRSTORE_STOP_TIMEOUT_S (default 60)
# per node for down (then SIGKILL, reported; with gdb installed, the node's thread stacks are
# saved first to RUN/NODE.stacks).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
ready_timeout="${QRSTORE_READY_TIMEOUT_S:-90}"
stop_timeout="${QRSTORE_STOP_TIMEOUT_S:-60}"

die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

[[ $# -ge 1 ]] || { usage; exit 2; }
cmd="$1"; shift
case "$cmd" in -h|--help|help) usage; exit 0 ;; esac
[[ $# -ge 1 ]] || { echo "cluster.sh: $cmd needs a CONFIG file (see --help)" >&2; exit 2; }
config="$1"; shift
[[ -f "$config" ]] || { echo "cluster.sh: config '$config' is not a file" >&2; exit 2; }
config="$(cd "$(dirname "$config")" && pwd)/$(basename "$config")"
[[ -x "$bin/qrstore-server" ]] || die "no $bin/qrstore-server: build first (cmake -S . -B build && cmake --build build)"

overrides=()
extra=()
fresh=0
for a in "$@"; do
  case "$a" in
    --fresh) fresh=1 ;;
    --*.*=*) overrides+=("$a") ;;
    *) extra+=("$a") ;;
  esac
done

server() { "$bin/qrstore-server" --config "$config" "$@"; }

# The cluster's name and run folder: from the config with the overrides given now.
name="$(server "${overrides[@]+"${overrides[@]}"}" --get cluster.name 2>/dev/null)" ||
  { server "${overrides[@]+"${overrides[@]}"}" --get cluster.name >/dev/null; exit 2; }
run="${QRSTORE_RUN_DIR:-$here/run}/$name"

# Overrides saved by the first `up`, then the ones given now.
saved=()
if [[ -f "$run/overrides" ]]; then
  while IFS= read -r line; do [[ -n "$line" ]] && saved+=("$line"); done <"$run/overrides"
fi
all=("${saved[@]+"${saved[@]}"}" "${overrides[@]+"${overrides[@]}"}")

# The node list: name host client_port peer_port partition row (validated by the server).
nodes() { server "${all[@]+"${all[@]}"}" --list-nodes; }

is_local() {
  local h="$1"
  case "$h" in 127.*|localhost|::1|"$(hostname)") return 0 ;; esac
  hostname -I 2>/dev/null | tr ' ' '\n' | grep -qx -- "$h"
}

remote_dir="${QRSTORE_REMOTE_DIR:-$here}"
remote_dir="${remote_dir%/}"
ssh_opts=(-o BatchMode=yes)
if [[ -n "${QRSTORE_SSH_CONFIG:-}" ]]; then
  [[ -f "$QRSTORE_SSH_CONFIG" ]] || { echo "cluster.sh: QRSTORE_SSH_CONFIG '$QRSTORE_SSH_CONFIG' is not a file" >&2; exit 2; }
  ssh_opts=(-F "$QRSTORE_SSH_CONFIG" "${ssh_opts[@]}")
fi
# A path (or a command's text) as another host sees it: this checkout is at $remote_dir there.
to_remote() { local s="$1"; printf '%s' "${s//"$here/"/"$remote_dir/"}"; }
# Runs COMMAND on another host as it is. Its stdin is /dev/null: ssh reads its own otherwise,
# which in a `while read` loop is the rest of the node list.
# shellcheck disable=SC2029  # the command is built here, for the other host's shell
on_remote() { local host="$1"; shift; ssh "${ssh_opts[@]}" "$host" "$*" </dev/null; }
# Runs a shell snippet where the node lives (here, or over ssh with this checkout's paths in it
# as that host sees them).
on_host() {
  local host="$1"; shift
  if is_local "$host"; then bash -c "$*"; else on_remote "$host" "$(to_remote "$*")"; fi
}

node_pid() {  # prints the pid if the node is running
  local n="$1" host="$2"
  on_host "$host" "p=\$(cat '$run/$n.pid' 2>/dev/null) && [ -n \"\$p\" ] && kill -0 \"\$p\" 2>/dev/null && tr '\\0' ' ' 2>/dev/null </proc/\$p/cmdline | grep -q -- '--node $n' && echo \$p" || true
}

start_node() {
  local n="$1" host="$2"; shift 2
  local args=(--config "$config" --node "$n" "$@")
  if is_local "$host"; then
    mkdir -p "$run"
    rm -f "$run/$n.exit" "$run/$n.exit.tmp" "$run/$n.out"
    # The wrapper records the server's pid and, when it ends, its exit code: written aside and
    # renamed, so a reader that finds <node>.exit finds the code in it (CI once read it between
    # its creation and its write: "stopped with status unknown" for a node that exited 0).
    setsid bash -c 'exe="$1"; dir="$2"; n="$3"; shift 3
      "$exe" "$@" >"$dir/$n.out" 2>>"$dir/$n.log" </dev/null & pid=$!
      echo "$pid" >"$dir/$n.pid"; wait "$pid"; echo $? >"$dir/$n.exit.tmp"; mv -f "$dir/$n.exit.tmp" "$dir/$n.exit"' \
      _ "$bin/qrstore-server" "$run" "$n" "${args[@]}" </dev/null >/dev/null 2>&1 &
  else
    # The same launcher on the node's host, in the checkout there (and in this working folder's
    # counterpart, when there is one: relative paths of the config mean the same), every word
    # quoted for the remote shell. Only the launcher runs in the background: the ssh session ends
    # once the rest is done, and the launcher holds none of its descriptors.
    local a rargs=() rrun exe launcher
    for a in "${args[@]}"; do rargs+=("$(to_remote "$a")"); done
    rrun="$(to_remote "$run")"
    exe="$(to_remote "$bin")/qrstore-server"
    # shellcheck disable=SC2016  # expanded by the launcher's shell
    launcher='exe="$1"; dir="$2"; n="$3"; shift 3; "$exe" "$@" >"$dir/$n.out" 2>>"$dir/$n.log" </dev/null & pid=$!; echo "$pid" >"$dir/$n.pid"; wait "$pid"; echo $? >"$dir/$n.exit.tmp"; mv -f "$dir/$n.exit.tmp" "$dir/$n.exit"'
    on_remote "$host" "cd $(printf %q "$(to_remote "$PWD/")") 2>/dev/null || cd $(printf %q "$remote_dir") || exit 1
      [ -x $(printf %q "$exe") ] || { echo \"no $(printf %q "$exe") on \$(hostname)\" >&2; exit 1; }
      mkdir -p $(printf %q "$rrun") && rm -f $(printf '%q ' "$rrun/$n.exit" "$rrun/$n.exit.tmp" "$rrun/$n.out")|| exit 1
      setsid bash -c $(printf %q "$launcher") _ $(printf '%q ' "$exe" "$rrun" "$n" "${rargs[@]}")</dev/null >/dev/null 2>&1 &" ||
      die "could not start node $n on $host over ssh (above)"
  fi
}

tail_log() {
  local n="$1" host="$2" lines="${3:-20}"
  on_host "$host" "tail -n $lines '$run/$n.log' 2>/dev/null" || true
}

cmd_up() {
  local list running=0 n host cport pport part row
  list="$(nodes)" || exit 2
  mkdir -p "$run"
  while read -r n host cport pport part row; do
    [[ -n "$(node_pid "$n" "$host")" ]] && running=$((running + 1))
  done <<<"$list"
  if ((running == 0)); then
    # A start of the whole cluster. Its durable data (raft disk logs, checkpoints) remembers the
    # overrides it was made with ($run/made-with): given none now, those are used; given others
    # that contradict them, up refuses (the data would not be this config's) unless --fresh.
    local made="$run/made-with" saved_user=() saved_root="" line
    if ((!fresh)) && [[ -f "$made" ]]; then
      while IFS= read -r line; do
        case "$line" in
          zookeeper.root=*) saved_root="${line#zookeeper.root=}" ;;
          --*) saved_user+=("$line") ;;
        esac
      done <"$made"
    fi
    local merged=("${saved_user[@]+"${saved_user[@]}"}") o k conflicts=""
    for o in "${overrides[@]+"${overrides[@]}"}"; do
      k="${o%%=*}"
      local known=0 sv
      for sv in "${saved_user[@]+"${saved_user[@]}"}"; do
        if [[ "${sv%%=*}" == "$k" ]]; then
          known=1
          [[ "$sv" == "$o" ]] || conflicts+=" $o (the data: $sv)"
        fi
      done
      ((known)) || merged+=("$o")
    done
    if [[ -n "$conflicts" ]]; then
      echo "cluster.sh: $name's data was made with ${saved_user[*]}; now given:$conflicts. Give the same ones (or none: the saved ones are used), or start anew with --fresh (it deletes the data)" >&2
      exit 2
    fi
    if ((${#saved_user[@]} > 0 && ${#overrides[@]} == 0)); then
      echo "cluster.sh: $name's data was made with ${saved_user[*]}: using them (up --fresh starts anew)"
    fi
    all=("${merged[@]+"${merged[@]}"}")
    # Durable: a data folder is configured (the nodes resume from it at the next up).
    local key dir durable=0
    for key in replication.raft.dir server.checkpoint_dir; do
      [[ "$key" == replication.raft.dir && "$(server "${all[@]+"${all[@]}"}" --get replication.raft.log)" != disk ]] && continue
      [[ -n "$(server "${all[@]+"${all[@]}"}" --get "$key" 2>/dev/null || true)" ]] && durable=1
    done
    local user_all=("${all[@]+"${all[@]}"}")
    local backend hosts root
    backend="$(server "${all[@]+"${all[@]}"}" --get replication.backend)"
    # ZooKeeper holds the group's log: a durable cluster resumes on the same root (and, when
    # cluster.sh runs the server, on its data); otherwise each start gets a fresh root.
    local resume_zk=0
    [[ "$backend" == zookeeper ]] && ((durable && !fresh)) && [[ -n "$saved_root" ]] && resume_zk=1
    if [[ -d "$run/zk" ]]; then  # a ZooKeeper left by an earlier up of this cluster
      "$here/scripts/zk-server.sh" stop "$run/zk" >/dev/null 2>&1 || true
      ((resume_zk)) || rm -rf "$run/zk"
    fi
    if [[ "$backend" == zookeeper ]]; then
      hosts="$(server "${all[@]+"${all[@]}"}" --get replication.zookeeper.hosts)"
      if [[ -z "$hosts" ]]; then
        while read -r n host _; do
          is_local "$host" && continue
          echo "cluster.sh: node $n runs on $host, and a ZooKeeper started here listens on 127.0.0.1 only: give replication.zookeeper.hosts (a server every node reaches)" >&2
          exit 2
        done <<<"$list"
        # ZooKeeper keeps its last 500 transactions in its heap: batches of ~1 MB need ~1 GB.
        # Its ports must not be the nodes' (not listening yet: they start after it).
        local keep=()
        if ((resume_zk)); then
          if [[ -d "$run/zk" ]]; then
            keep=(--keep-data)
          else
            echo "cluster.sh: $name's ZooKeeper data ($run/zk) is gone: its log starts anew (the nodes resume from their checkpoints or refuse)" >&2
          fi
        fi
        hosts="$(QRSTORE_ZK_AVOID_PORTS="$(awk '{ print $3, $4 }' <<<"$list" | tr '\n' ' ')" \
          "$here/scripts/zk-server.sh" start "$run/zk" --heap-mb "${QRSTORE_ZK_HEAP_MB:-1024}" "${keep[@]+"${keep[@]}"}")" ||
          die "could not start a local ZooKeeper (see $run/zk)"
        echo "cluster.sh: started ZooKeeper at $hosts for $name (stopped by down)${keep:+, on the data of its last run}"
        all+=("--replication.zookeeper.hosts=$hosts")
      fi
      if ((resume_zk)); then
        root="$saved_root"
        echo "cluster.sh: $name resumes on its ZooKeeper root $root"
      else
        root="$(server "${all[@]+"${all[@]}"}" --get replication.zookeeper.root)"
        root="${root%/}/$name-$(date +%Y%m%d%H%M%S)-$$"
      fi
      all+=("--replication.zookeeper.root=$root")
    fi
    # Relative data folders live in the run folder (absolute from now on: saved below).
    for key in replication.raft.dir server.checkpoint_dir; do
      dir="$(server "${all[@]+"${all[@]}"}" --get "$key" 2>/dev/null || true)"
      if [[ -n "$dir" && "$dir" != /* ]]; then
        dir="$run/$dir"
        all+=("--$key=$dir")
      fi
      if ((fresh)) && [[ -n "$dir" ]]; then
        while read -r n host _; do on_host "$host" "rm -rf '$dir/$n'"; done <<<"$list"
        echo "cluster.sh: --fresh: deleted each node's $key folder below $dir"
      fi
    done
    printf '%s\n' "${all[@]+"${all[@]}"}" >"$run/overrides"
    if ((durable)); then
      { printf '%s\n' "${user_all[@]+"${user_all[@]}"}"; [[ "$backend" == zookeeper ]] && echo "zookeeper.root=$root"; } >"$made"
    else
      rm -f "$made"
    fi
  elif ((fresh)); then
    die "--fresh with $running node(s) of $name running: stop them first (down)"
  elif ((${#overrides[@]} > 0)); then
    echo "cluster.sh: $running node(s) already running: the new overrides apply to the nodes started now" >&2
  fi
  # Row 0 first: it leads a fresh cluster (a raft member that campaigns at once); the others follow.
  local started=()
  while read -r n host cport pport part row; do
    if [[ -n "$(node_pid "$n" "$host")" ]]; then continue; fi
    start_node "$n" "$host" "${all[@]+"${all[@]}"}"
    started+=("$n $host")
  done < <(sort -k6,6n <<<"$list")
  local deadline=$((SECONDS + ready_timeout)) entry pending
  for entry in "${started[@]+"${started[@]}"}"; do
    read -r n host <<<"$entry"
    while true; do
      if on_host "$host" "grep -q '^qrstore-server ready' '$run/$n.out' 2>/dev/null"; then
        echo "cluster.sh: $(on_host "$host" "grep '^qrstore-server ready' '$run/$n.out'")"
        break
      fi
      if on_host "$host" "test -f '$run/$n.exit'"; then
        echo "cluster.sh: node $n exited with status $(on_host "$host" "cat '$run/$n.exit'") before it was ready; its log ($run/$n.log):" >&2
        tail_log "$n" "$host" 30 >&2
        exit 1
      fi
      if ((SECONDS >= deadline)); then
        echo "cluster.sh: node $n not ready within ${ready_timeout} s; its log ($run/$n.log):" >&2
        tail_log "$n" "$host" 30 >&2
        exit 1
      fi
      sleep 0.1
    done
  done
  ((${#started[@]} > 0)) || echo "cluster.sh: every node of $name is already running"
}

cmd_down() {
  local list n host cport pport part row pid code failed=0 any=0 unclean=()
  list="$(nodes)" || exit 2
  # Every node gets SIGTERM at once, leaders first: a leader finishes its batches, replicates an
  # end marker and waits for its connected followers to apply everything; a follower waits for
  # that end marker and then stops. Signalling the followers only after their leader exited left
  # them up to an election time-out to elect one of themselves (slow hosts: a follower won,
  # promoted itself, lost its majority as the others stopped and exited "deposed"); a follower
  # that is stopping never promotes itself. Who leads is what the nodes say now (the backend
  # elects; row 0 only leads a fresh cluster), else row order; nodes are then waited for in
  # that order.
  local leaders=""
  if [[ -x "$bin/qrstore-client" ]]; then
    leaders="$("$bin/qrstore-client" --config "$config" "${all[@]+"${all[@]}"}" --status 2>/dev/null |
               awk 'NR > 1 && $2 == "leader" { print $1 }')" || true
  fi
  local ordered
  ordered="$(awk -v leaders=" $(tr '\n' ' ' <<<"$leaders")" \
                 '{ print (index(leaders, " " $1 " ") > 0 ? 0 : 1), $0 }' <<<"$list" | sort -k1,1n -k7,7n)"
  # Nodes running now: one that exits by itself while the others stop (a follower that failed
  # and then won an election fail-stops) is reported with its exit status, not skipped.
  local -A running=() pids=()
  local -a local_pids=()
  while read -r _ n host _; do
    pid="$(node_pid "$n" "$host")"
    [[ -n "$pid" ]] || continue
    running[$n]=1
    pids[$n]="$pid"
    if is_local "$host"; then local_pids+=("$pid"); fi
  done <<<"$ordered"
  # The signals go out together, found first: this host's nodes in one kill (leaders first, no
  # process started between them: on a busy host, finding and signalling the nodes in turn can
  # take seconds, long enough for a follower signalled last to win an election meanwhile).
  ((${#local_pids[@]} == 0)) || kill -TERM "${local_pids[@]}" 2>/dev/null || true
  while read -r _ n host _; do
    [[ -n "${running[$n]:-}" ]] || continue
    is_local "$host" || on_host "$host" "kill -TERM ${pids[$n]}" || true
  done <<<"$ordered"
  while read -r _ n host _; do
    [[ -n "${running[$n]:-}" ]] || continue
    pid="${pids[$n]}"
    # A paused node (SIGSTOP, a debugger) cannot act on SIGTERM: let it run so it stops cleanly.
    if [[ "$(on_host "$host" "ps -o stat= -p $pid" 2>/dev/null || true)" == T* ]]; then
      echo "cluster.sh: node $n was paused (stopped by a signal): sent SIGCONT so it can act on SIGTERM"
      on_host "$host" "kill -CONT $pid" || true
    fi
  done <<<"$ordered"
  local deadline
  while read -r _ n host cport pport part row; do
    [[ -n "${running[$n]:-}" ]] || continue
    any=1
    pid="${pids[$n]}"
    deadline=$((SECONDS + stop_timeout))
    while [[ -n "$(node_pid "$n" "$host")" ]]; do
      if ((SECONDS >= deadline)); then
        # Where it hangs, before the evidence goes: every thread's stack, when gdb is there.
        if on_host "$host" "command -v gdb >/dev/null && timeout 30 gdb -p $pid -batch -ex 'thread apply all bt' >'$run/$n.stacks' 2>&1"; then
          echo "cluster.sh: node $n did not stop within ${stop_timeout} s: its threads' stacks are in $run/$n.stacks; SIGKILL" >&2
        else
          echo "cluster.sh: node $n did not stop within ${stop_timeout} s: SIGKILL" >&2
        fi
        on_host "$host" "kill -KILL $pid" || true
        failed=1
        break
      fi
      sleep 0.1
    done
    # The wrapper writes the exit code just after the server ends (up to 30 s on a busy host).
    for _ in $(seq 300); do on_host "$host" "test -f '$run/$n.exit'" && break; sleep 0.1; done
    code="$(on_host "$host" "cat '$run/$n.exit' 2>/dev/null" || true)"
    if [[ "$code" == 0 ]]; then
      echo "cluster.sh: node $n stopped cleanly"
    else
      echo "cluster.sh: node $n stopped with status ${code:-unknown}; its log ($run/$n.log):" >&2
      tail_log "$n" "$host" 15 >&2
      failed=1
      unclean+=("$n")
    fi
  done <<<"$ordered"
  if [[ -d "$run/zk" ]]; then
    "$here/scripts/zk-server.sh" stop "$run/zk" >/dev/null 2>&1 || true
    echo "cluster.sh: stopped the local ZooKeeper"
  fi
  ((any)) || echo "cluster.sh: no node of $name was running"
  if ((${#unclean[@]} > 0)); then
    echo "cluster.sh: every node of $name is down; not cleanly: ${unclean[*]} (their logs above say why)" >&2
  fi
  # The next up starts the whole cluster again (a durable one resumes its data: made-with).
  rm -f "$run/overrides"
  return $failed
}

cmd_status() {
  [[ -x "$bin/qrstore-client" ]] || die "no $bin/qrstore-client"
  "$bin/qrstore-client" --config "$config" "${all[@]+"${all[@]}"}" --status
}

cmd_logs() {
  local lines=40 only="" list n host rest
  for ((i = 0; i < ${#extra[@]}; i++)); do
    case "${extra[$i]}" in
      --lines) lines="${extra[$((i + 1))]:-40}"; i=$((i + 1)) ;;
      --lines=*) lines="${extra[$i]#--lines=}" ;;
      *) only="${extra[$i]}" ;;
    esac
  done
  list="$(nodes)" || exit 2
  while read -r n host rest; do
    [[ -z "$only" || "$only" == "$n" ]] || continue
    echo "==> $n ($host) $run/$n.log"
    tail_log "$n" "$host" "$lines"
  done <<<"$list"
}

cmd_kill() {
  local target="${extra[0]:-}" sig="${extra[1]:-KILL}" list n host rest pid
  [[ -n "$target" ]] || { echo "cluster.sh: kill CONFIG NODE [SIGNAL]" >&2; exit 2; }
  list="$(nodes)" || exit 2
  while read -r n host rest; do
    [[ "$n" == "$target" ]] || continue
    pid="$(node_pid "$n" "$host")"
    [[ -n "$pid" ]] || die "node $n is not running"
    on_host "$host" "kill -$sig $pid"
    echo "cluster.sh: sent SIG$sig to node $n (pid $pid)"
    return 0
  done <<<"$list"
  echo "cluster.sh: no node $target in $config" >&2
  exit 2
}

cmd_restart() {
  local target="${extra[0]:-}" list n host rest pid
  [[ -n "$target" ]] || { echo "cluster.sh: restart CONFIG NODE" >&2; exit 2; }
  list="$(nodes)" || exit 2
  awk -v t="$target" '$1 == t { f = 1 } END { exit !f }' <<<"$list" ||
    { echo "cluster.sh: no node $target in $config" >&2; exit 2; }
  while read -r n host rest; do
    [[ "$n" == "$target" ]] || continue
    pid="$(node_pid "$n" "$host")"
    if [[ -n "$pid" ]]; then
      on_host "$host" "kill -KILL $pid"
      for _ in $(seq 100); do [[ -z "$(node_pid "$n" "$host")" ]] && break; sleep 0.1; done
      [[ -z "$(node_pid "$n" "$host")" ]] || die "node $n (pid $pid) did not die"
      # Its launcher writes <node>.exit just after: wait for it, or it could land after `up`
      # started the node again and read as the new process's exit.
      for _ in $(seq 50); do on_host "$host" "test -f '$run/$n.exit'" && break; sleep 0.1; done
      echo "cluster.sh: killed node $n (pid $pid)"
    fi
  done <<<"$list"
  extra=()
  cmd_up  # starts what is not running: this node, with the cluster's saved overrides
}

case "$cmd" in
  up) cmd_up ;;
  restart) cmd_restart ;;
  down) cmd_down ;;
  status) cmd_status ;;
  logs) cmd_logs ;;
  kill) cmd_kill ;;
  *) echo "cluster.sh: unknown command '$cmd' (up|down|status|logs|kill|restart; see --help)" >&2; exit 2 ;;
esac
