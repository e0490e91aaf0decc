# Shared by the cluster integration tests (sourced). Each test gets its own temporary run folder
# and config files with ports chosen free at run time on 127.0.0.1, and brings its clusters down
# (then kills leftovers) however it ends.
#   QRSTORE_BIN  the build's bin folder (set by CTest)
#   qr_config OUT BACKEND ROWS [YAML...]  writes a cluster config: ROWS nodes of partition 0
#                                         (row 0 leads), BACKEND none|raft|zookeeper, then the
#                                         given YAML lines appended (extra sections other than
#                                         replication and server, which it writes: a section
#                                         given twice is an error; use qr_up --key=value)
#   qr_row_config OUT PARTITIONS [YAML...]  the same for a partitioned row: PARTITIONS leaders
#                                         (p0, p1, ...), one row, backend none
#   qr_grid_config OUT BACKEND PARTITIONS ROWS [YAML...]  PARTITIONS x ROWS nodes named
#                                         p<partition>r<row>, each with a row_port
#   qr_up CONFIG [--key=value ...], qr_down CONFIG, qr_client CONFIG [args]: the scripts/programs
#   fail MESSAGE: prints it and exits 1
set -euo pipefail
QR_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
: "${QRSTORE_BIN:?set QRSTORE_BIN to the bin folder of a build}"
export QRSTORE_BIN
QR_TMP="$(mktemp -d /tmp/qrstore-cluster-test.XXXXXX)"
export QRSTORE_RUN_DIR="$QR_TMP/run"
QR_CONFIGS=()

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "-- $*"; }

qr_cleanup() {
  local code=$?
  for c in "${QR_CONFIGS[@]+"${QR_CONFIGS[@]}"}"; do
    QRSTORE_STOP_TIMEOUT_S=20 "$QR_SRC/scripts/cluster.sh" down "$c" >/dev/null 2>&1 || true
  done
  # Anything still running from this test's run folder.
  pkill -KILL -f -- "--config $QR_TMP/" 2>/dev/null || true
  for d in "$QRSTORE_RUN_DIR"/*/zk; do [[ -d "$d" ]] && "$QR_SRC/scripts/zk-server.sh" stop "$d" >/dev/null 2>&1; done
  if [[ $code -ne 0 ]]; then
    echo "== logs of the failed test ($QR_TMP)" >&2
    for f in "$QRSTORE_RUN_DIR"/*/*.log; do [[ -f "$f" ]] && { echo "--- $f" >&2; tail -n 25 "$f" >&2; }; done
    # A node that did not stop (cluster.sh down saved its threads' stacks before SIGKILL).
    for f in "$QRSTORE_RUN_DIR"/*/*.stacks; do [[ -f "$f" ]] && { echo "--- $f" >&2; grep -E '^(Thread|#)' "$f" >&2; }; done
  fi
  # QR_KEEP=1 keeps a passing test's folder (its logs) too.
  [[ $code -eq 0 && -z "${QR_KEEP:-}" ]] && rm -rf "$QR_TMP"
  exit $code
}
trap qr_cleanup EXIT

source "$QR_SRC/scripts/lib.sh"  # free_ports

qr_config() {
  local out="$1" backend="$2" rows="$3"; shift 3
  qr_write_config "$out" "$backend" "$rows" 1 "$@"
}
qr_row_config() {
  local out="$1" partitions="$2"; shift 2
  qr_write_config "$out" none 1 "$partitions" "$@"
}
qr_grid_config() {
  local out="$1" backend="$2" partitions="$3" rows="$4"; shift 4
  qr_write_config "$out" "$backend" "$rows" "$partitions" "$@"
}
qr_write_config() {
  local out="$1" backend="$2" rows="$3" partitions="$4"; shift 4
  local n=$((rows * partitions))
  local ports; read -r -a ports <<<"$(free_ports $((3 * n)))"
  {
    echo "cluster:"
    echo "  name: $(basename "$out" .yaml)"
    echo "  nodes:"
    local i=0 r p name extra
    for ((r = 0; r < rows; r++)); do
      for ((p = 0; p < partitions; p++)); do
        extra=""
        if ((partitions == 1)); then
          name="n$r"
        elif ((rows == 1)); then
          name="p$p"
        else
          name="p${p}r$r"
          extra=", row_port: ${ports[$((3 * i + 2))]}"
        fi
        echo "    - {name: $name, host: 127.0.0.1, client_port: ${ports[$((3 * i))]}, peer_port: ${ports[$((3 * i + 1))]}$extra, partition: $p, row: $r}"
        i=$((i + 1))
      done
    done
    echo "replication:"
    echo "  backend: $backend"
    # QR_POINT (plan | input | writes): the replication point a test's clusters run with (ctest's *_input
    # variants set it).
    echo "  point: ${QR_POINT:-plan}"
    echo "  raft:"
    echo "    election_ticks: 100"
    echo "    heartbeat_ticks: 10"
    # The tests' ZooKeeper server is shared by the tests running at once: 32 MiB each. A 10 s
    # session unless a test chooses a shorter one (a loaded host misses pings).
    echo "  zookeeper:"
    echo "    retain_bytes: 33554432"
    echo "    session_timeout_ms: 10000"
    echo "server:"
    echo "  dump_state_dir: $QR_TMP/dump-$(basename "$out" .yaml)"
    echo "  stats_interval_ms: 2000"
    echo "  drain_timeout_ms: 20000"
    for line in "$@"; do echo "$line"; done
  } >"$out"
  mkdir -p "$QR_TMP/dump-$(basename "$out" .yaml)"
  QR_CONFIGS+=("$out")
}

qr_dump_dir() { echo "$QR_TMP/dump-$(basename "$1" .yaml)"; }
qr_up() { "$QR_SRC/scripts/cluster.sh" up "$@"; }
qr_down() { "$QR_SRC/scripts/cluster.sh" down "$@"; }
qr_client() { local c="$1"; shift; "$QRSTORE_BIN/qrstore-client" --config "$c" "$@"; }
qr_port() {  # client port of node N in CONFIG
  "$QRSTORE_BIN/qrstore-server" --config "$1" --list-nodes | awk -v n="$2" '$1 == n { print $3 }'
}

# Every node's dump equal (as files), and that file not empty.
qr_same_dumps() {
  local dir; dir="$(qr_dump_dir "$1")"
  local first="" f
  for f in "$dir"/*.tsv; do
    [[ -s "$f" ]] || fail "empty or missing dump $f"
    if [[ -z "$first" ]]; then first="$f"; continue; fi
    if ! cmp -s "$first" "$f"; then
      local d
      d="$(diff "$first" "$f" | head -5)"
      fail "dumps differ: $first vs $f: $d"
    fi
  done
  [[ -n "$first" ]] || fail "no dumps in $dir"
  note "dumps identical: $(cd "$dir" && echo *.tsv)"
}

# json_field FILE KEY: a field of the JSON object on the last line of FILE (python's repr for
# objects; true/false for booleans).
json_field() {
  python3 - "$1" "$2" <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
v = json.loads(line)
for k in sys.argv[2].split("."):
    v = v[k]
print(str(v).lower() if isinstance(v, bool) else v)
PY
}

# wait_n2_stranded CONFIG CLIENT_PID: until the leader's status row for n2 says stranded (60 s;
# fails if the client ends first).
wait_n2_stranded() {
  local deadline=$((SECONDS + 60)) state
  while ((SECONDS < deadline)); do
    state="$(qr_client "$1" --status --client.connect_timeout_ms=1000 2>/dev/null | awk '$1 == "n2" { print $7 }' || true)"
    [[ "$state" == stranded ]] && break
    kill -0 "$2" 2>/dev/null || fail "the client ended before n2 was stranded: $(tail -3 "$QR_TMP/client.err")"
    sleep 0.1
  done
  [[ "$state" == stranded ]] || fail "the leader never reported n2 stranded: $(qr_client "$1" --status 2>&1 || true)"
  note "the leader reports n2 stranded while it is away"
}

# qr_interrupt_client PID STARTED MIN_S: ends a client started (directly, not through qr_client,
# so that PID is the client's) with a long --duration-s: once it has run MIN_S seconds (STARTED is
# bash's SECONDS at its start) it gets SIGINT, which ends it as if its time were up. Tests whose
# steps take longer on a busy host end the load when those steps are done, not at a fixed time.
qr_interrupt_client() {
  local pid="$1" started="$2" min="$3"
  while ((SECONDS - started < min)) && kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  kill -0 "$pid" 2>/dev/null || fail "the client ended before it was interrupted: $(tail -5 "$QR_TMP/client.err")"
  kill -INT "$pid"
}

# commits_never_stop CLIENT_JSON: the client's commits per second (its --json summary) never
# 0 over at least 20 inner seconds, but for at most one dip (a resume); the first and last are
# partial.
commits_never_stop() {
  python3 - "$1" <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()][-1]
per = json.loads(line)["committed_per_interval"]
inner = per[1:-1]
zeros = sum(1 for c in inner if c == 0)
print("-- commits per second:", per)
sys.exit(0 if len(inner) >= 20 and zeros <= 1 else 1)
PY
}

# Sum of the counters (second column) of a dump: money, for the transfer workload.
dump_sum() { awk -F'\t' '{ s += $2 } END { print s + 0 }' "$1"; }
