#!/usr/bin/env bash
# overload.sh: overload and bad input against the running engine (docs/reliability.md).
# Each case runs real programs, prints what happened with its figures, and checks the expected
# behaviour; the script exits 1 if any case misbehaved.
#
#   producer         qrstore-bench with a producer far faster than the engine
#                    (bench.outstanding=100000000) for S seconds: VmRSS sampled once per second,
#                    min/max printed; the resident set must stop growing
#   server-producer  qrstore-client (4 connections x 200000 txns in flight, twice what the server
#                    admits per connection) against one qrstore-server for S seconds: the
#                    server's VmRSS, as above
#   big-config       a 100 MB config file: refused at once naming the size limit; time and peak RSS
#   repeated-key     a config with a key given twice: refused naming the key and both lines
#   anchor-bomb      a YAML alias bomb ("billion laughs"): refused; time and peak RSS
#   raft-garbage     a raft disk log (replication.raft.log=disk) filled with garbage: the node
#                    refuses to start (exit 1) naming the file; no crash
#   raft-full-disk   a leader's raft disk log on a 2 MB tmpfs (mounted in `unshare -rm`): the disk
#                    fills, the client is told 'failed' with ENOSPC at once, and nothing
#                    acknowledged is lost (the follower has every acknowledged txn, same digest)
#
# Usage: tests/integration/overload/overload.sh [--seconds S] [--bin DIR] [CASE ...]
#   --seconds S  length of the producer runs (default 60); --bin DIR programs (default build/bin)
#   no CASE: every case. Needs a build (cmake --build build). Ports are chosen free at run time.
set -uo pipefail
cd "$(dirname "$0")/../../.."
root=$(pwd)
seconds=60
bin="$root/build/bin"
cases=()
all=(producer server-producer big-config repeated-key anchor-bomb raft-garbage raft-full-disk)
inner=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --bin) bin="$(cd "$2" && pwd)"; shift 2 ;;
    --inner-full-disk) inner="$2"; shift 2 ;;  # internal: the raft-full-disk body, in its namespace
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) echo "overload.sh: unknown flag $1" >&2; exit 2 ;;
    *) [[ " ${all[*]} " == *" $1 "* ]] || { echo "overload.sh: unknown case $1 (cases: ${all[*]})" >&2; exit 2; }
       cases+=("$1"); shift ;;
  esac
done
((${#cases[@]} > 0)) || cases=("${all[@]}")
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 4 ]] || { echo "overload.sh: --seconds must be an integer >= 4" >&2; exit 2; }
for p in qrstore-bench qrstore-server qrstore-client; do
  [[ -x "$bin/$p" ]] || { echo "overload.sh: $bin/$p not found: build first" >&2; exit 2; }
done

failures=0
bad() { echo "   FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "   ok: $*"; }

source "$root/scripts/lib.sh"  # free_ports

# measure OUT ERR CMD...: runs CMD, prints "rc seconds peak_rss_kb" (peak RSS of CMD itself).
measure() {
  local out=$1 err=$2; shift 2
  python3 - "$out" "$err" "$@" <<'PY'
import resource, subprocess, sys, time
out, err = open(sys.argv[1], "w"), open(sys.argv[2], "w")
t = time.time()
r = subprocess.run(sys.argv[3:], stdout=out, stderr=err, timeout=120)
print(r.returncode, "%.2f" % (time.time() - t), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}

# sample_rss PID SECONDS OUT: VmRSS (kB) of PID once per second into OUT, while it runs.
sample_rss() {
  local pid=$1 n=$2 out=$3
  : >"$out"
  for ((i = 0; i < n; i++)); do
    sleep 1
    awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null >>"$out" || break
  done
}

# check_rss_bounded FILE WHAT: prints min/max; passes if the resident set stopped growing: the
# largest sample of the last half is at most 10% (+16 MB) above the largest of the first half
# (the first 2 s, while the table loads, are left out).
check_rss_bounded() {
  local file=$1 what=$2
  python3 - "$file" "$what" <<'PY'
import sys
s = [int(x) for x in open(sys.argv[1]) if x.strip()]
what = sys.argv[2]
if len(s) < 4:
    print("   FAIL: %s: only %d RSS samples" % (what, len(s))); sys.exit(1)
print("   %s VmRSS over %d samples (1/s): min %.1f MB, max %.1f MB, first %.1f MB, last %.1f MB"
      % (what, len(s), min(s) / 1024, max(s) / 1024, s[0] / 1024, s[-1] / 1024))
body = s[2:]
half = len(body) // 2
first, last = max(body[:half]), max(body[half:])
if last > first * 1.10 + 16 * 1024:
    print("   FAIL: %s: the resident set still grows: max %.1f MB in the first half, %.1f MB in the second"
          % (what, first / 1024, last / 1024)); sys.exit(1)
print("   ok: bounded (max %.1f MB in the first half, %.1f MB in the second)" % (first / 1024, last / 1024))
PY
}

TMP=$(mktemp -d /tmp/qrstore-overload.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# A cluster config: N nodes (row 0 leads) with BACKEND, small table; extra YAML lines after.
write_config() {
  local out=$1 backend=$2 rows=$3; shift 3
  local ports; read -r -a ports <<<"$(free_ports $((2 * rows)))"
  {
    echo "cluster:"
    echo "  name: overload"
    echo "  nodes:"
    for ((r = 0; r < rows; r++)); do
      echo "    - {name: n$r, host: 127.0.0.1, client_port: ${ports[$((2 * r))]}, peer_port: ${ports[$((2 * r + 1))]}, partition: 0, row: $r}"
    done
    echo "replication:"
    echo "  backend: $backend"
    for line in "$@"; do echo "$line"; done
  } >"$out"
}

# start_node CONFIG NODE LOGPREFIX [--key=value ...]: starts qrstore-server, waits for its ready
# line (20 s); prints its pid. Fails (returns 1) if it exits or is not ready in time.
start_node() {
  local cfg=$1 node=$2 log=$3; shift 3
  "$bin/qrstore-server" --config "$cfg" --node "$node" "$@" >"$log.out" 2>"$log.err" &
  local pid=$!
  for ((i = 0; i < 200; i++)); do
    if grep -q "ready" "$log.out" 2>/dev/null; then echo "$pid"; return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

stop_node() {  # stop_node PID: SIGTERM, wait (30 s), then SIGKILL
  local pid=$1
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
}

case_producer() {
  echo "== producer: qrstore-bench, a producer far faster than the engine, ${seconds} s"
  echo "   command: qrstore-bench --duration-s $seconds --bench.outstanding=100000000 --log-level=warn"
  "$bin/qrstore-bench" --duration-s "$seconds" --bench.outstanding=100000000 --log-level=warn \
    >"$TMP/producer.out" 2>"$TMP/producer.err" &
  local pid=$!
  pids+=("$pid")
  sample_rss "$pid" "$seconds" "$TMP/producer.rss"
  wait "$pid"
  local rc=$?
  [[ $rc -eq 0 ]] || bad "qrstore-bench exited $rc: $(tail -3 "$TMP/producer.err")"
  grep -E "throughput|committed" "$TMP/producer.out" | sed 's/^ */   /'
  check_rss_bounded "$TMP/producer.rss" "qrstore-bench" || failures=$((failures + 1))
}

case_server_producer() {
  echo "== server-producer: qrstore-client (4 x 200000 txns in flight) against one qrstore-server, ${seconds} s"
  write_config "$TMP/none.yaml" none 1
  echo "   command: qrstore-client --config CFG --duration-s $seconds --connections 4 --outstanding 200000"
  local pid
  pid=$(start_node "$TMP/none.yaml" n0 "$TMP/sp-n0") || { bad "the server did not start: $(tail -3 "$TMP/sp-n0.err")"; return; }
  pids+=("$pid")
  "$bin/qrstore-client" --config "$TMP/none.yaml" --duration-s "$seconds" --connections 4 --outstanding 200000 \
    --log-level=warn >"$TMP/sp-client.out" 2>"$TMP/sp-client.err" &
  local cpid=$!
  pids+=("$cpid")
  sample_rss "$pid" "$seconds" "$TMP/sp.rss"
  wait "$cpid"
  local rc=$?
  stop_node "$pid"
  [[ $rc -eq 0 ]] || bad "qrstore-client exited $rc: $(tail -3 "$TMP/sp-client.err")"
  grep -E "throughput|committed" "$TMP/sp-client.out" | head -2 | sed 's/^ */   /'
  check_rss_bounded "$TMP/sp.rss" "qrstore-server" || failures=$((failures + 1))
}

case_big_config() {
  echo "== big-config: a 100 MB config file"
  { echo "batch:"; echo "  txns: 100"; head -c $((100 << 20)) /dev/zero | tr '\0' '#'; echo; } >"$TMP/big.yaml"
  local r; read -r -a r <<<"$(measure "$TMP/big.out" "$TMP/big.err" "$bin/qrstore-bench" --config "$TMP/big.yaml" --txns 1)"
  echo "   exit ${r[0]} in ${r[1]} s, peak RSS $((r[2] / 1024)) MB: $(head -c 300 "$TMP/big.err")"
  [[ ${r[0]} -eq 2 ]] || bad "exit ${r[0]}, expected 2"
  grep -q "more than the limit of" "$TMP/big.err" && ok "refused naming the limit" || bad "no size-limit error"
  ((r[2] < 200 * 1024)) || bad "peak RSS $((r[2] / 1024)) MB: the file was read"
  rm -f "$TMP/big.yaml"
}

case_repeated_key() {
  echo "== repeated-key: a config with a key given twice"
  printf 'batch:\n  txns: 100\nycsb:\n  theta: 0.5\n  theta: 0.9\n' >"$TMP/dup.yaml"
  "$bin/qrstore-bench" --config "$TMP/dup.yaml" --txns 1 >/dev/null 2>"$TMP/dup.err"
  local rc=$?
  echo "   exit $rc: $(tr '\n' ' ' <"$TMP/dup.err")"
  [[ $rc -eq 2 ]] || bad "exit $rc, expected 2"
  grep -qF "ycsb.theta: given twice (lines 4 and 5)" "$TMP/dup.err" && ok "names the key and both lines" || bad "key/lines not named"
}

case_anchor_bomb() {
  echo "== anchor-bomb: a YAML alias bomb (10^9 leaves once expanded)"
  {
    echo "l0: &l0 {a: lol, b: lol, c: lol, d: lol, e: lol, f: lol, g: lol, h: lol, i: lol, j: lol}"
    for i in 1 2 3 4 5 6 7 8 9; do
      p="*l$((i - 1))"
      echo "l$i: &l$i {a: $p, b: $p, c: $p, d: $p, e: $p, f: $p, g: $p, h: $p, i: $p, j: $p}"
    done
  } >"$TMP/bomb.yaml"
  local r; read -r -a r <<<"$(measure "$TMP/bomb.out" "$TMP/bomb.err" "$bin/qrstore-bench" --config "$TMP/bomb.yaml" --txns 1)"
  echo "   $(wc -c <"$TMP/bomb.yaml") bytes; exit ${r[0]} in ${r[1]} s, peak RSS $((r[2] / 1024)) MB: $(grep -m1 expands "$TMP/bomb.err")"
  [[ ${r[0]} -eq 2 ]] || bad "exit ${r[0]}, expected 2"
  grep -q "the document expands to more than" "$TMP/bomb.err" && ok "refused" || bad "not refused as an expansion"
  python3 -c "import sys; sys.exit(0 if float('${r[1]}') < 10 else 1)" || bad "took ${r[1]} s"
  ((r[2] < 500 * 1024)) || bad "peak RSS $((r[2] / 1024)) MB"
}

# A leader and a follower, raft with a disk log (fsync always). The drain is short: these cases
# stop a follower whose leader failed, which waits that long for a stream end that cannot come.
raft_two_nodes() {  # raft_two_nodes CFG
  write_config "$1" raft 2 "  raft:" "    log: disk" "    fsync: always" "ycsb:" "  records: 10000" \
    "engine:" "  key_space: 10000" "batch:" "  txns: 1000" "server:" "  drain_timeout_ms: 3000"
}

# start_raft_pair CFG PREFIX LEADER_DIR FOLLOWER_DIR: starts n1 then n0 of CFG with those raft
# dirs (logs PREFIX-n0/n1.{out,err}); sets p0 and p1. Returns 1 (and says so) if one fails.
start_raft_pair() {
  local cfg=$1 prefix=$2
  p1=$(start_node "$cfg" n1 "$prefix-n1" --replication.raft.dir="$4") || { bad "n1 did not start"; return 1; }
  pids+=("$p1")
  p0=$(start_node "$cfg" n0 "$prefix-n0" --replication.raft.dir="$3") || { bad "n0 did not start"; return 1; }
  pids+=("$p0")
}

case_raft_garbage() {
  echo "== raft-garbage: a raft disk log filled with garbage"
  raft_two_nodes "$TMP/raft.yaml"
  local p0 p1
  start_raft_pair "$TMP/raft.yaml" "$TMP/rg" "$TMP/rg-raft-n0" "$TMP/rg-raft-n1" || return
  "$bin/qrstore-client" --config "$TMP/raft.yaml" --txns 5000 --log-level=warn >/dev/null 2>"$TMP/rg-client.err" ||
    bad "the client failed before the garbage: $(tail -2 "$TMP/rg-client.err")"
  stop_node "$p0"
  stop_node "$p1"
  local seg
  seg=$(ls "$TMP"/rg-raft-n0/n0/group-0/seg-*.log | head -1)  # (each node logs in <dir>/<node>)
  head -c "$(stat -c %s "$seg")" /dev/urandom >"$seg"
  expect_start_refused "garbage segment" "not a raft log segment" "$TMP/rg-again.err"
  head -c 36 /dev/urandom >"$TMP/rg-raft-n0/n0/group-0/hardstate"
  expect_start_refused "garbage hard state" "hardstate: bad magic" "$TMP/rg-hs.err"
}

# expect_start_refused WHAT TEXT ERRFILE: n0 of $TMP/raft.yaml on $TMP/rg-raft-n0 must exit 1
# (a failed start, 30 s at most) saying TEXT.
expect_start_refused() {
  timeout 30 "$bin/qrstore-server" --config "$TMP/raft.yaml" --node n0 --replication.raft.dir="$TMP/rg-raft-n0" \
    >/dev/null 2>"$3"
  local rc=$?
  echo "   $1: exit $rc: $(tail -1 "$3" | cut -c1-240)"
  [[ $rc -eq 1 ]] || bad "exit $rc, expected 1 (a failed start)"
  grep -qF "$2" "$3" && ok "refused: $2" || bad "no clear error ('$2')"
}

case_raft_full_disk() {
  echo "== raft-full-disk: the leader's raft disk log on a 2 MB tmpfs"
  if [[ $(id -u) -eq 0 ]] && unshare -m true 2>/dev/null; then
    unshare -m "$0" --bin "$bin" --inner-full-disk "$TMP"
  elif unshare -rm true 2>/dev/null; then
    unshare -rm "$0" --bin "$bin" --inner-full-disk "$TMP"
  else
    bad "cannot mount a tmpfs: needs root or user namespaces (unshare -rm)"
    return
  fi
  [[ $? -eq 0 ]] || failures=$((failures + 1))
}

full_disk_inner() {  # in a private mount namespace
  local tmp=$1
  mkdir -p "$tmp/full"
  mount -t tmpfs -o size=2m tmpfs "$tmp/full" || { bad "mount tmpfs failed"; return; }
  raft_two_nodes "$tmp/full.yaml"
  local p0 p1
  start_raft_pair "$tmp/full.yaml" "$tmp/fd" "$tmp/full/raft-n0" "$tmp/fd-raft-n1" || return
  # Two members (rf = 1) cannot elect a new leader: the client, which follows its leader, looks
  # for one for client.failover_timeout_ms (3 s here), then gives up.
  local r; read -r -a r <<<"$(measure "$tmp/fd-client.out" "$tmp/fd-client.err" "$bin/qrstore-client" --config "$tmp/full.yaml" --txns 100000 --json --log-level=warn --client.failover_timeout_ms=3000 --client.settle_timeout_ms=2000)"
  echo "   client: exit ${r[0]} after ${r[1]} s: $(tail -1 "$tmp/fd-client.err" | cut -c1-260)"
  echo "   $(df -k "$tmp/full" | tail -1 | awk '{ print "tmpfs " $3 " of " $2 " kB used" }')"
  stop_node "$p0"
  stop_node "$p1"
  [[ ${r[0]} -eq 1 ]] || bad "client exit ${r[0]}, expected 1 (txns failed)"
  grep -q "No space left on device" "$tmp/fd-client.err" && ok "the client was told: No space left on device" ||
    bad "the client was not told why"
  python3 -c "import sys; sys.exit(0 if float('${r[1]}') < 20 else 1)" || bad "the client took ${r[1]} s to learn it (stalled?)"
  grep -q "No space left on device" "$tmp/fd-n0.err" && ok "the leader's log names it" || bad "the leader's log does not name ENOSPC"
  # Nothing acknowledged is lost: the follower applied every txn the client saw committed. The
  # follower may be one batch or more ahead of the leader's commits: a batch replicated just before
  # the failure, whose clients were told "not acknowledged" (its fate unknown to them, never
  # "aborted"). Where both stopped at the same batch their digests must agree, and the leader's
  # per-batch comparison of the follower's reported digests must have found no mismatch.
  local acked f_committed f_batches f_digest l_batches l_digest l_checks
  acked=$(tail -n 1 "$tmp/fd-client.out" | python3 -c "import json,sys; print(json.load(sys.stdin)['committed'])")
  f_committed=$(grep -o 'committed=[0-9]*' "$tmp/fd-n1.err" | tail -1 | cut -d= -f2)
  f_batches=$(grep -o ' batches=[0-9]*' "$tmp/fd-n1.err" | tail -1 | cut -d= -f2)
  f_digest=$(grep -o 'digest=[0-9a-f]*' "$tmp/fd-n1.err" | tail -1 | cut -d= -f2)
  l_batches=$(grep -o ' batches=[0-9]*' "$tmp/fd-n0.err" | tail -1 | cut -d= -f2)
  l_digest=$(grep -o 'digest=[0-9a-f]*' "$tmp/fd-n0.err" | tail -1 | cut -d= -f2)
  l_checks=$(grep -o 'checked=[0-9]* mismatches=[0-9]*' "$tmp/fd-n0.err" | tail -1)
  echo "   acknowledged $acked txns; leader ${l_batches:-?} batches (digest ${l_digest:-?}, follower ${l_checks:-?});" \
    "follower ${f_batches:-?} batches, committed ${f_committed:-?} (digest ${f_digest:-?})"
  [[ -n "$acked" && -n "$f_committed" && "$f_committed" -ge "$acked" && "$acked" -gt 0 ]] &&
    ok "every acknowledged txn is on the follower" || bad "acknowledged txns missing on the follower"
  if [[ -n "$f_batches" && "$f_batches" == "$l_batches" ]]; then
    [[ -n "$f_digest" && "$f_digest" == "$l_digest" ]] && ok "leader and follower stopped at the same batch and digest" ||
      bad "digests differ at the same batch"
  elif [[ -n "$f_batches" && -n "$l_batches" && "$f_batches" -gt "$l_batches" ]]; then
    ok "the follower holds $((f_batches - l_batches)) replicated batch(es) the leader did not acknowledge"
  else
    bad "the follower is behind the leader's acknowledged batches"
  fi
  [[ "$l_checks" =~ checked=([0-9]+)\ mismatches=0$ && ${BASH_REMATCH[1]} -gt 0 ]] &&
    ok "the leader checked the follower's digest for ${BASH_REMATCH[1]} batches: no mismatch" ||
    bad "digest check: ${l_checks:-no stats line}"
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  umount "$tmp/full"
}

if [[ -n "$inner" ]]; then
  rm -rf "$TMP"
  TMP=$inner
  trap 'for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null; done' EXIT
  full_disk_inner "$inner"
  exit $((failures > 0))
fi

for c in "${cases[@]}"; do
  "case_${c//-/_}"
done
if [[ $failures -ne 0 ]]; then
  echo "== overload.sh: $failures check(s) failed"
  exit 1
fi
echo "== overload.sh: every case behaved"
