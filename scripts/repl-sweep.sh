#!/usr/bin/env bash
# repl-sweep.sh: the paper's figure-4 replication sweep with qrstore-repl-bench.
#
#   scripts/repl-sweep.sh [--build DIR] [--duration-s S] [--out DIR] [--sizes "100 1000 ..."]
#                         [--only raft|zookeeper] [--settle-s S]
#
# For payloads of 100 B, 1 KB, 10 KB, 100 KB, 400 KB and 800 KB with 100 batches in flight it
# measures: raft, 3 replicas, memory log; raft, 3 replicas, disk log with fsync=always; raft
# with Snappy (every raft row first, before any ZooKeeper runs); then ZooKeeper (one server
# started here for its rows, 2 follower processes) without and with Snappy. Then the two target rows: 100 KB with 100 in flight (raft batches/s / ZooKeeper
# batches/s, target >= 5) and 100 KB with 1 in flight (raft p50, target < 2 ms).
# The disk-log rows write under $TMPDIR (default /tmp): it must be a real disk, not tmpfs, or
# fsync costs nothing (the script warns). Prints a markdown table (with the exact command of every row) and writes it, a CSV and every
# run's output under --out (default sweep-<date> in the current directory). Each point runs
# about --duration-s (default 3) plus start-up, after a --settle-s pause (default 3 s) that lets
# the previous point's processes and ZooKeeper's JVM go quiet; the whole sweep takes ~5 minutes. Run it on
# a quiet machine: the numbers are only as good as the machine is idle.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

build=build
duration=3
out=""
sizes="100 1000 10000 100000 400000 800000"
only=""
settle=3
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --duration-s) duration="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --settle-s) settle="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "repl-sweep.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
case "$only" in ""|raft|zookeeper) ;; *) echo "repl-sweep.sh: --only must be raft or zookeeper" >&2; exit 1 ;; esac

bench="$root/$build/bin/qrstore-repl-bench"
[ -x "$bench" ] || { echo "repl-sweep.sh: $bench not found: build first (cmake --build $build --target qrstore-repl-bench)" >&2; exit 1; }
[ -n "$out" ] || out="sweep-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
csv="$out/sweep.csv"
md="$out/sweep.md"

if df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2{exit !($2=="tmpfs")}'; then
  echo "repl-sweep.sh: warning: ${TMPDIR:-/tmp} is tmpfs: the raft-disk-fsync rows will not measure a disk (set TMPDIR)" >&2
fi

zkdir=""
cleanup() {
  if [ -n "$zkdir" ]; then
    scripts/zk-server.sh stop "$zkdir" >/dev/null 2>&1 || true
    rm -rf "$zkdir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

zk_hosts=""
start_zk() {
  zkdir=$(mktemp -d /tmp/qrstore-sweep-zk.XXXXXX)
  echo "== starting one ZooKeeper server on 127.0.0.1" >&2
  # ZooKeeper keeps its last 500 transactions in memory: 800 KB batches need a 1 GB heap.
  zk_hosts=$(scripts/zk-server.sh start "$zkdir" --heap-mb 1024)
  echo "   at $zk_hosts" >&2
}

# The value of a numeric or string field of the bench's JSON line.
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1" | head -1; }

echo "config,payload_bytes,inflight,batches_per_s,mb_per_s,p50_ms,p99_ms,followers_complete,follower_errors,ok,command" >"$csv"
rows=()
declare -A result_bps result_p50

run() {  # run NAME PAYLOAD INFLIGHT ARGS...
  local name="$1" payload="$2" inflight="$3"
  shift 3
  local cmd=("$bench" --payload-bytes "$payload" --inflight "$inflight" --duration-s "$duration" --json "$@")
  local log="$out/$name-$payload-$inflight.log"
  echo "== $name payload=$payload inflight=$inflight" >&2
  # Let the previous point's processes (and the ZooKeeper JVM's cleanup and GC) settle first:
  # on 2 cores a busy JVM otherwise takes CPU from the next point.
  sleep "$settle"
  local json="" rc=0
  "${cmd[@]}" >"$log" 2>&1 || rc=$?
  json=$(grep '^{' "$log" | tail -1 || true)
  local shown="${cmd[*]}"
  shown="${shown/#$root\//}"
  if [ -z "$json" ]; then
    echo "   FAILED (exit $rc), see $log" >&2
    echo "$name,$payload,$inflight,,,,,,,false,\"$shown\"" >>"$csv"
    rows+=("| $name | $payload | $inflight | FAILED (exit $rc) | | | | | \`$shown\` |")
    return 0
  fi
  local bps mbps p50 p99 complete errors ok
  bps=$(field "$json" batches_per_s); mbps=$(field "$json" mb_per_s)
  p50=$(field "$json" p50_ms); p99=$(field "$json" p99_ms)
  complete=$(field "$json" followers_complete); errors=$(field "$json" follower_errors); ok=$(field "$json" ok)
  echo "   $bps batches/s, $mbps MB/s, p50 $p50 ms, p99 $p99 ms, ok=$ok" >&2
  echo "$name,$payload,$inflight,$bps,$mbps,$p50,$p99,$complete,$errors,$ok,\"$shown\"" >>"$csv"
  rows+=("| $name | $payload | $inflight | $bps | $mbps | $p50 | $p99 | $ok | \`$shown\` |")
  result_bps["$name/$payload/$inflight"]=$bps
  result_p50["$name/$payload/$inflight"]=$p50
}

# Every raft row first, with no ZooKeeper JVM on the machine; then ZooKeeper's rows with its
# server started for them (on 2 cores a JVM that is merely idle-collecting takes CPU from the
# Raft processes, and the other way round).
if [ "$only" != zookeeper ]; then
  for size in $sizes; do
    run raft-memory "$size" 100 --backend raft --replicas 3
    run raft-disk-fsync "$size" 100 --backend raft --replicas 3 --replication.raft.log=disk --replication.raft.fsync=always
    run raft-snappy "$size" 100 --backend raft --replicas 3 --compression snappy
  done
  [ -n "${result_bps[raft-memory/100000/100]:-}" ] || run raft-memory 100000 100 --backend raft --replicas 3
  run raft-memory 100000 1 --backend raft --replicas 3
fi
if [ "$only" != raft ]; then
  start_zk
  for size in $sizes; do
    run zookeeper "$size" 100 --backend zookeeper --replicas 3 --zk-hosts "$zk_hosts"
    run zookeeper-snappy "$size" 100 --backend zookeeper --replicas 3 --zk-hosts "$zk_hosts" --compression snappy
  done
  [ -n "${result_bps[zookeeper/100000/100]:-}" ] || run zookeeper 100000 100 --backend zookeeper --replicas 3 --zk-hosts "$zk_hosts"
  cleanup
  zkdir=""
fi

# Target rows.
target_lines=()
if [ "$only" = "" ]; then
  r=${result_bps[raft-memory/100000/100]:-}
  z=${result_bps[zookeeper/100000/100]:-}
  if [ -n "$r" ] && [ -n "$z" ] && awk "BEGIN{exit !($z > 0)}"; then
    ratio=$(awk "BEGIN{printf \"%.2f\", $r / $z}")
    target_lines+=("- 100 KB, 100 in flight: raft $r batches/s vs ZooKeeper $z batches/s = **${ratio}x** (target >= 5x)")
  else
    target_lines+=("- 100 KB, 100 in flight: raft vs ZooKeeper ratio not available (a run failed)")
  fi
fi
if [ "$only" != zookeeper ]; then
  p=${result_p50[raft-memory/100000/1]:-}
  target_lines+=("- 100 KB, 1 in flight: raft p50 **${p:-n/a} ms** (target < 2 ms)")
fi

{
  echo "## Replication sweep ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${duration} s per point)"
  echo
  echo "| config | payload B | in flight | batches/s | MB/s | p50 ms | p99 ms | ok | command |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Targets:"
  printf '%s\n' "${target_lines[@]}"
} | tee "$md"
echo >&2
echo "written: $md $csv (per-run logs in $out/)" >&2
