# Shared by the multi-host tests (sourced, after ../cluster/lib.sh's settings are wanted too: it
# sources that). The hosts are network namespaces of this machine made by scripts/hosts.sh in
# $hosts_dir; the clusters start over ssh through it; scripts/netsplit.sh cuts their links.
#   hosts_up N              needs root; makes N hosts, sets addrs (their addresses, in order)
#                           and hosts_started (SECONDS before it)
#   zk_dir                  set by a test that started a ZooKeeper server there: stopped at exit
#   status                  qrstore-client --status of $cfg, bounded (a node whose packets are
#                           dropped must not hang the test)
#   wait_for S WHAT CMD...  until CMD prints something (printed); fails after S seconds
#   node_log_time NODE TEXT the Unix time of the first line of $run/NODE.log holding TEXT
#   unix_of ISO, since T1 T0  times as netsplit.sh prints them; T1 - T0 in seconds (2 decimals)
#   a NODE, set_of NODE...  a node's address, a comma list of them (from addr_of[NODE])
#   netcut ARGS... / netheal  netsplit.sh, its line printed and kept in $QR_TMP/netsplit.log;
#                           cut_unix / heal_unix: the time it names; cuts / heals: every one
# At exit (trap): every cut healed (so `down` reaches every node), every config of QR_CONFIGS
# down while its hosts are still there, ZooKeeper stopped, on failure the clients' logs and the
# sshds' logs, the hosts removed, then ../cluster/lib.sh's cleanup.
source "$(dirname "${BASH_SOURCE[0]}")/../cluster/lib.sh"

hosts_dir="$QR_TMP/hosts"
export QRSTORE_SSH_CONFIG="$hosts_dir/ssh_config" QRSTORE_REMOTE_DIR="$QR_SRC"
zk_dir=""
addrs=()
declare -A addr_of=()
cut_unix="" heal_unix=""
cuts=()
heals=()

netsplit() { "$QR_SRC/scripts/netsplit.sh" "$@" --dir "$hosts_dir"; }

hosts_cleanup() {
  local code=$? c f
  set +e
  [[ -d "$hosts_dir" ]] && netsplit heal >/dev/null 2>&1  # (whoever cut: this test or chaos.sh)
  for c in "${QR_CONFIGS[@]+"${QR_CONFIGS[@]}"}"; do
    QRSTORE_STOP_TIMEOUT_S=20 "$QR_SRC/scripts/cluster.sh" down "$c" >/dev/null 2>&1
  done
  [[ -z "$zk_dir" ]] || "$QR_SRC/scripts/zk-server.sh" stop "$zk_dir" >/dev/null 2>&1
  if [[ -d "$hosts_dir" ]]; then
    if [[ $code -ne 0 ]]; then
      for f in "$QR_TMP"/client*.err; do
        [[ -f "$f" ]] && { echo "--- $f" >&2; grep -E "^[0-9]{2}:[0-9]{2}:" "$f" | grep -v " t=" | tail -n 15 >&2; }
      done
      for f in "$hosts_dir"/ssh/sshd-*.log; do [[ -s "$f" ]] && { echo "--- $f" >&2; tail -n 10 "$f" >&2; }; done
    fi
    "$QR_SRC/scripts/hosts.sh" down --dir "$hosts_dir" >&2 || code=1
  fi
  (exit "$code")
  qr_cleanup
}
trap hosts_cleanup EXIT

hosts_up() {
  local count="$1" out
  [[ "$(id -u)" -eq 0 ]] ||
    fail "needs root: the hosts are network namespaces with an sshd each (scripts/hosts.sh) and the cuts nftables rules in them; run it as root (CI does)"
  hosts_started=$SECONDS
  out="$("$QR_SRC/scripts/hosts.sh" up "$count" --dir "$hosts_dir")" ||
    fail "scripts/hosts.sh up $count failed (exit $?; 2: not root or no network namespaces here): above"
  read -r -d '' -a addrs <<<"$out" || true
  ((${#addrs[@]} == count)) || fail "hosts.sh up $count printed '${out//$'\n'/ }', not $count addresses"
}

status() { timeout 15 "$QRSTORE_BIN/qrstore-client" --config "$cfg" --status --client.connect_timeout_ms=1000 2>/dev/null || true; }

wait_for() {
  local limit="$1" what="$2" deadline got; shift 2
  deadline=$((SECONDS + limit))
  while :; do
    got="$("$@" || true)"
    [[ -n "$got" ]] && { echo "$got"; return 0; }
    ((SECONDS < deadline)) || fail "$what: not within $limit s; status: $(status)"
    sleep 0.2
  done
}

# (the logs say HH:MM:SS.mmm of this machine's clock, UTC here)
node_log_time() {
  python3 - "$run/$1.log" "$2" <<'PY'
import re, sys, calendar, time
for l in open(sys.argv[1], errors="replace"):
    m = re.match(r"(\d\d):(\d\d):(\d\d)\.(\d+) ", l)
    if m and sys.argv[2] in l:
        day = time.gmtime()
        t = calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, int(m[1]), int(m[2]), int(m[3]))) + int(m[4]) / 1000
        print("%.3f" % t)
        break
PY
}

unix_of() { python3 -c 'import sys, datetime; print("%.3f" % datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp())' "$1"; }
since() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) - float(sys.argv[2])))" "$1" "$2"; }
a() { echo "${addr_of[$1]}"; }
set_of() { local s="" x; for x in "$@"; do s+="${s:+,}$(a "$x")"; done; echo "$s"; }

netcut() {
  local line
  line="$(netsplit "$@")" || fail "netsplit.sh $* failed"
  echo "$line" | tee -a "$QR_TMP/netsplit.log"
  cut_unix="$(unix_of "${line%% *}")"
  cuts+=("$cut_unix $*")
}
netheal() {
  local line
  line="$(netsplit heal)" || fail "netsplit.sh heal failed"
  echo "$line" | tee -a "$QR_TMP/netsplit.log"
  heal_unix="$(unix_of "${line%% *}")"
  heals+=("$heal_unix")
}
