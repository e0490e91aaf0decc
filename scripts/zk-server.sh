#!/usr/bin/env bash
# zk-server.sh: start and stop throw-away ZooKeeper servers for qrstore tests and benchmarks.
#
#   scripts/zk-server.sh start DIR [--servers 1|3] [--heap-mb N] [--keep-data] [--bind ADDR]
#                                                     start one server or a 3-server ensemble;
#                                                     --keep-data: on the data an earlier start
#                                                     in DIR left (its znodes), new ports;
#                                                     --bind: listen on ADDR, not 127.0.0.1
#   scripts/zk-server.sh stop DIR                     stop every server start started (idempotent)
#   scripts/zk-server.sh kill-one DIR I               kill -9 server I (1-based) of DIR
#   scripts/zk-server.sh status DIR                   one line per server: I PORT MODE|down
#   scripts/zk-server.sh leader DIR                   the index I of the server in Mode: leader
#                                                     (or standalone); exit 1 if none
#
# Servers listen on 127.0.0.1 only (or on the one address --bind names), on ports chosen free at
# run time (never 2181). --bind ADDR serves nodes on other hosts: ADDR must be an address of the
# network namespace the script runs in (a test host of scripts/hosts.sh: run it there with
# `ip netns exec NS` or over ssh); every port of every server (client, peer, election) is on
# ADDR, never on every interface (0.0.0.0 is refused). The JVM runs QuorumPeerMain directly
# with a zoo.cfg written here (no zkServer.sh, no JMX, no admin server, heap capped, 256 MB by
# default). Everything lives under DIR: DIR/sI/{zoo.cfg,data,server.log,pid,port,addr},
# DIR/connect (the connect string) and DIR/pids; stop, kill-one, status and leader work from any
# namespace that reaches ADDR (the pids are this machine's). `start` waits (bounded) until every
# server answers the `srvr` four-letter word with a `Mode:` line, then prints the connect string
# ADDR:PORT[,ADDR:PORT...] (ADDR: 127.0.0.1 unless --bind) on stdout; on failure it prints the
# server log tail to stderr, stops what it started and exits non-zero.
# Options: start --heap-mb N (or env ZK_HEAP_MB; default 256) caps each server's heap: use
# 1024 for benchmarks with large batches (see HEAP_MB below). ZK_START_TIMEOUT_S (default 60)
# bounds the wait for start.
set -euo pipefail

readonly ZK_CLASSPATH="/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
readonly START_TIMEOUT_S="${ZK_START_TIMEOUT_S:-60}"
readonly PORT_ATTEMPTS=3
# Heap: ZooKeeper keeps every znode in memory (the backend's replication.zookeeper.retain_bytes
# bounds that, 32 MiB by default) AND its last 500 transactions, twice (ZooKeeper 3.8 refuses a
# smaller zookeeper.commitLogCount). 256 MB suffices for tests; sustained writes of batches of
# 100 KB and more need about 1 GB (--heap-mb 1024), or the server dies of OutOfMemoryError.
HEAP_MB="${ZK_HEAP_MB:-256}"
# The one address every port of the servers listens on (start --bind).
BIND_ADDR=127.0.0.1

die() { echo "zk-server.sh: $*" >&2; exit 1; }

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
}

# Prints N distinct free ports (scripts/free_ports.py: below the kernel's ephemeral range, which
# outgoing connections draw from, and reserved against concurrent tests until this script
# exits, by when its servers listen), never 2181, none listed in QRSTORE_ZK_AVOID_PORTS (ports
# the caller has handed out but nothing listens on yet: a cluster's nodes, which cluster.sh
# starts after its ZooKeeper). A server whose election port is taken exits 3 s after it started
# serving (ZooKeeper's "unable to bind quorum port", exit code 14).
pick_ports() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/free_ports.py" "$1" --owner "$$" --avoid "${QRSTORE_ZK_AVOID_PORTS:-}" ||
    die "could not find $1 free ports"
}

# Sends a four-letter word to ADDR:PORT and prints the answer (empty on failure).
four_letter() {
  local addr="$1" port="$2" word="$3"
  timeout 3 bash -c "exec 3<>/dev/tcp/$addr/$port && printf '%s' '$word' >&3 && cat <&3" 2>/dev/null || true
}

# The address server I of DIR listens on (127.0.0.1 for a DIR started before --bind existed).
server_addr() {
  cat "$1/s$2/addr" 2>/dev/null || echo 127.0.0.1
}

# server_mode DIR I: what server I of DIR says it is (leader, follower, standalone), or nothing.
server_mode() {
  four_letter "$(server_addr "$1" "$2")" "$(cat "$1/s$2/port")" srvr | sed -n 's/^Mode: *//p'
}

# Whether PID is alive and is the JVM started for DIR/sI (guards against PID reuse).
is_our_server() {
  local pid="$1" cfg="$2"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$cfg"
}

# Whether PID is a live process (not gone, not a zombie: a server that died during start stays
# a zombie child of this script until it exits). Unlike is_our_server, it does not read the
# command line, which a process in the middle of an exec (the fork before java's, or java's own
# launcher) may show as empty or as the script's: CI twice judged a starting server dead that way.
process_alive() {
  local pid="$1" stat
  [[ -n "$pid" ]] && stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  [[ "${stat##*) }" != Z* ]]
}

num_servers() {
  local dir="$1" n=0
  while [[ -d "$dir/s$((n + 1))" ]]; do n=$((n + 1)); done
  echo "$n"
}

write_server_files() {
  local dir="$1" i="$2" n="$3" client_port="$4"; shift 4
  local peers=("$@")  # "peer election" pairs, flattened, for servers 1..n
  local sdir="$dir/s$i"
  mkdir -p "$sdir/data"
  echo "$i" >"$sdir/data/myid"
  echo "$client_port" >"$sdir/port"
  echo "$BIND_ADDR" >"$sdir/addr"
  cat >"$sdir/zoo.cfg" <<EOF
# Written by scripts/zk-server.sh for a throw-away test server.
tickTime=1000
maxSessionTimeout=60000
initLimit=10
syncLimit=5
dataDir=$sdir/data
clientPort=$client_port
clientPortAddress=$BIND_ADDR
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr,conf,cons
preAllocSize=4096
snapCount=20000
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
  if ((n > 1)); then
    local j
    for ((j = 1; j <= n; j++)); do
      echo "server.$j=$BIND_ADDR:${peers[$(((j - 1) * 2))]}:${peers[$(((j - 1) * 2 + 1))]}" >>"$sdir/zoo.cfg"
    done
  fi
  cat >"$sdir/log4j.properties" <<EOF
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
EOF
}

launch_server() {
  local dir="$1" i="$2" sdir="$1/s$2"
  # setsid: the server survives the caller's terminal and is not hit by its signals.
  setsid java "-Xmx${HEAP_MB}m" -XX:+UseSerialGC \
    -Dzookeeper.jmx.log4j.disable=true -Dzookeeper.admin.enableServer=false \
    -Dlog4j.configuration="file:$sdir/log4j.properties" \
    -cp "$ZK_CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$sdir/zoo.cfg" \
    >"$sdir/server.log" 2>&1 </dev/null &
  echo $! >"$sdir/pid"
}

stop_all() {
  local dir="$1" n i pid sdir
  n="$(num_servers "$dir")"
  for ((i = 1; i <= n; i++)); do
    sdir="$dir/s$i"
    pid="$(cat "$sdir/pid" 2>/dev/null || true)"
    if is_our_server "$pid" "$sdir/zoo.cfg"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for ((i = 1; i <= n; i++)); do
    sdir="$dir/s$i"
    pid="$(cat "$sdir/pid" 2>/dev/null || true)"
    local waited=0
    while is_our_server "$pid" "$sdir/zoo.cfg" && ((waited < 50)); do
      sleep 0.1
      waited=$((waited + 1))
    done
    if is_our_server "$pid" "$sdir/zoo.cfg"; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$sdir/pid"
  done
  rm -f "$dir/pids"
}

# Removes what an earlier start left in DIR; with keep=1 each server's data folder stays.
clear_dir() {
  local dir="$1" keep="$2" s
  if ((keep)); then
    for s in "$dir"/s[0-9]*; do
      [[ -d "$s" ]] || continue
      find "$s" -mindepth 1 -maxdepth 1 ! -name data -exec rm -rf {} +
    done
  else
    rm -rf "$dir"/s[0-9]*
  fi
  rm -f "$dir/connect" "$dir/pids"
}

cmd_start() {
  local dir="" n=1 keep=0
  while (($#)); do
    case "$1" in
      --keep-data) keep=1; shift ;;
      --servers) [[ $# -ge 2 ]] || die "--servers needs a value"; n="$2"; shift 2 ;;
      --servers=*) n="${1#--servers=}"; shift ;;
      --heap-mb) [[ $# -ge 2 ]] || die "--heap-mb needs a value"; HEAP_MB="$2"; shift 2 ;;
      --heap-mb=*) HEAP_MB="${1#--heap-mb=}"; shift ;;
      --bind) [[ $# -ge 2 ]] || die "--bind needs an address"; BIND_ADDR="$2"; shift 2 ;;
      --bind=*) BIND_ADDR="${1#--bind=}"; shift ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) [[ -z "$dir" ]] || die "unexpected argument $1"; dir="$1"; shift ;;
    esac
  done
  [[ -n "$dir" ]] || die "start needs DIR"
  [[ "$n" == 1 || "$n" == 3 ]] || die "--servers must be 1 or 3 (got $n)"
  [[ "$HEAP_MB" =~ ^[0-9]+$ ]] && ((HEAP_MB >= 64)) || die "--heap-mb must be an integer >= 64 (got $HEAP_MB)"
  # One IPv4 address of this namespace: it goes into zoo.cfg, the connect string and bash's
  # /dev/tcp probes as it is.
  [[ "$BIND_ADDR" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "--bind takes an IPv4 address (got '$BIND_ADDR')"
  [[ "$BIND_ADDR" != 0.0.0.0 ]] || die "--bind 0.0.0.0 would listen on every interface: name one address"
  if ! ip -4 -o addr show 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4 }' | grep -qxF -- "$BIND_ADDR"; then
    [[ "$BIND_ADDR" == 127.* ]] || die "--bind $BIND_ADDR: not an address of this network namespace ($(ip -4 -o addr show 2>/dev/null | awk '{ sub(/\/.*/, "", $4); printf "%s ", $4 }'))"
  fi
  command -v java >/dev/null || die "java not found (install a Java runtime)"
  [[ -r /usr/share/java/zookeeper.jar ]] || die "/usr/share/java/zookeeper.jar missing (apt-get install zookeeper)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local existing i
  existing="$(num_servers "$dir")"
  for ((i = 1; i <= existing; i++)); do
    if is_our_server "$(cat "$dir/s$i/pid" 2>/dev/null || true)" "$dir/s$i/zoo.cfg"; then
      die "servers already running in $dir (run: $0 stop $dir)"
    fi
  done
  if ((keep)) && ((existing > 0 && existing != n)); then
    die "--keep-data: $dir holds the data of $existing server(s), not $n"
  fi
  clear_dir "$dir" "$keep"

  local attempt
  for ((attempt = 1; attempt <= PORT_ATTEMPTS; attempt++)); do
    local ports
    read -r -a ports <<<"$(pick_ports $((n * 3)))"
    local peers=()
    for ((i = 0; i < n; i++)); do peers+=("${ports[$((n + 2 * i))]}" "${ports[$((n + 2 * i + 1))]}"); done
    for ((i = 1; i <= n; i++)); do
      write_server_files "$dir" "$i" "$n" "${ports[$((i - 1))]}" "${peers[@]}"
      launch_server "$dir" "$i"
    done
    for ((i = 1; i <= n; i++)); do cat "$dir/s$i/pid"; done >"$dir/pids"

    # Bounded wait until every server serves (srvr prints Mode:).
    local deadline=$((SECONDS + START_TIMEOUT_S)) ready=0 bind_failed=0 dead=0
    while ((SECONDS < deadline)); do
      ready=0
      for ((i = 1; i <= n; i++)); do
        if ! process_alive "$(cat "$dir/s$i/pid")"; then
          dead="$i"
          grep -q "Address already in use" "$dir/s$i/server.log" 2>/dev/null && bind_failed=1
          break 2
        fi
        [[ -n "$(server_mode "$dir" "$i")" ]] && ready=$((ready + 1))
      done
      ((ready == n)) && break
      sleep 0.2
    done
    if ((ready == n)); then
      local connect=""
      for ((i = 1; i <= n; i++)); do connect+="${connect:+,}$BIND_ADDR:$(cat "$dir/s$i/port")"; done
      echo "$connect" >"$dir/connect"
      echo "$connect"
      return 0
    fi
    if ((bind_failed)) && ((attempt < PORT_ATTEMPTS)); then
      echo "zk-server.sh: port taken while starting (attempt $attempt), retrying with new ports" >&2
      stop_all "$dir"
      clear_dir "$dir" "$keep"
      continue
    fi
    for ((i = 1; i <= n; i++)); do
      echo "---- tail of $dir/s$i/server.log ----" >&2
      tail -n 25 "$dir/s$i/server.log" >&2 || true
    done
    stop_all "$dir"
    if ((dead)); then die "server $dead exited during start (log tail above)"; fi
    die "servers not serving after ${START_TIMEOUT_S}s ($ready of $n ready; log tail above)"
  done
}

cmd_stop() {
  local dir="${1:-}"
  [[ -n "$dir" ]] || die "stop needs DIR"
  [[ -d "$dir" ]] || return 0
  stop_all "$dir"
}

cmd_kill_one() {
  local dir="${1:-}" i="${2:-}" pid
  [[ -n "$dir" && -n "$i" ]] || die "kill-one needs DIR and I"
  [[ -d "$dir/s$i" ]] || die "no server $i in $dir"
  pid="$(cat "$dir/s$i/pid" 2>/dev/null || true)"
  is_our_server "$pid" "$dir/s$i/zoo.cfg" || die "server $i in $dir is not running"
  kill -KILL "$pid"
  local waited=0
  while is_our_server "$pid" "$dir/s$i/zoo.cfg" && ((waited < 50)); do sleep 0.1; waited=$((waited + 1)); done
  echo "killed server $i (pid $pid, port $(cat "$dir/s$i/port"))" >&2
}

cmd_status() {
  local dir="${1:-}" n i mode
  [[ -n "$dir" ]] || die "status needs DIR"
  n="$(num_servers "$dir")"
  ((n > 0)) || die "no servers in $dir"
  for ((i = 1; i <= n; i++)); do
    mode=""
    if is_our_server "$(cat "$dir/s$i/pid" 2>/dev/null || true)" "$dir/s$i/zoo.cfg"; then
      mode="$(server_mode "$dir" "$i")"
      mode="${mode:-not-serving}"
    fi
    echo "$i $(cat "$dir/s$i/port") ${mode:-down}"
  done
}

cmd_leader() {
  local line
  line="$(cmd_status "$@" | awk '$3 == "leader" || $3 == "standalone" {print $1; exit}')"
  [[ -n "$line" ]] || { echo "zk-server.sh: no leader serving" >&2; return 1; }
  echo "$line"
}

main() {
  local cmd="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    kill-one) cmd_kill_one "$@" ;;
    status) cmd_status "$@" ;;
    leader) cmd_leader "$@" ;;
    -h | --help | help) usage ;;
    "") usage >&2; exit 2 ;;
    *) echo "zk-server.sh: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
  esac
}

main "$@"
