#!/usr/bin/env bash
# hosts.sh: test hosts on this machine for multi-host runs: N network namespaces joined by one
# bridge, each with its own address and its own sshd, so a cluster's nodes run "on other hosts"
# through scripts/cluster.sh's ssh path (docs/multi-host.md).
#
#   scripts/hosts.sh up N [--dir DIR]    make N hosts (idempotent: what exists is kept, what is
#                                        missing is made); prints their addresses, one a line
#   scripts/hosts.sh down [--dir DIR]    remove everything up made, and stop every process still
#                                        running in the hosts (nothing there: nothing to do)
#   scripts/hosts.sh status [--dir DIR]  one line per host: namespace, address, sshd; exit 1
#                                        unless every host is up
#
# For a subnet 10.213.X.0/24, up makes a bridge qrhb-X holding 10.213.X.1 (so this namespace
# reaches every host) and, for host I of 1..N, a namespace qrh-X-I with its loopback up, a veth
# pair (qrhX-I here on the bridge, eth0 in the namespace) with the address 10.213.X.(I+1), and an
# sshd listening on that address only: root logs in by the run's key only (no passwords). The
# subnet exists only on the bridge and in the namespaces. X is free at up: neither taken by
# another run (the registry $QRSTORE_HOSTS_REGISTRY, default /tmp/qrstore-hosts: a file per X
# naming its DIR, written under a lock) nor an address or route of this machine.
# DIR (default run/netns-hosts in this checkout) holds the run's keys, each sshd's config, pid
# file and log (DIR/ssh/), and DIR/ssh_config: `ssh -F DIR/ssh_config ADDRESS CMD` logs in as
# root (QRSTORE_SSH_CONFIG=DIR/ssh_config for scripts/cluster.sh). The namespaces share this
# machine's file system and processes, not its network: a checkout here is the same checkout on
# every host.
# Needs root, iproute2 and openssh-server/openssh-client (scripts/setup-deps.sh). Exit status 0;
# 2 when not root or network namespaces cannot be made here; 1 on any other failure, saying what.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
registry="${QRSTORE_HOSTS_REGISTRY:-/tmp/qrstore-hosts}"
readonly prefix=10.213
readonly hosts_max=200
readonly sshd_ready_timeout_s=30

hint=""  # said after a failure of up that left something made
die() { echo "hosts.sh: $*" >&2; [[ -z "$hint" ]] || echo "hosts.sh: $hint" >&2; exit 1; }
refuse() { echo "hosts.sh: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# must WHAT CMD...: runs CMD; on failure dies naming WHAT with CMD's error output.
must() {
  local what="$1" err; shift
  if ! err="$("$@" 2>&1)"; then die "$what failed: $err"; fi
}

[[ $# -ge 1 ]] || { usage; exit 2; }
cmd="$1"; shift
case "$cmd" in -h|--help|help) usage; exit 0 ;; up|down|status) ;; *)
  echo "hosts.sh: unknown command '$cmd' (up N|down|status; see --help)" >&2; exit 2 ;;
esac
count=""
dir="$here/run/netns-hosts"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) [[ $# -ge 2 ]] || { echo "hosts.sh: --dir needs a folder" >&2; exit 2; }; dir="$2"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    *)
      if [[ "$cmd" == up && -z "$count" && "$1" =~ ^[0-9]+$ ]]; then count="$1"; shift; continue; fi
      echo "hosts.sh: unexpected argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ "$cmd" == up ]]; then
  [[ -n "$count" ]] || { echo "hosts.sh: up needs N, the number of hosts (see --help)" >&2; exit 2; }
  ((count >= 1 && count <= hosts_max)) || { echo "hosts.sh: N must be 1..$hosts_max, not $count" >&2; exit 2; }
fi
# The folder is written into ssh and sshd configs, where blanks, quotes and % (ssh's tokens) would
# need quoting of their own.
[[ "$dir" =~ ^[A-Za-z0-9._/+@,:=-]+$ ]] || { echo "hosts.sh: DIR '$dir' may hold only letters, digits and ._/+@,:=-" >&2; exit 2; }

[[ "$(id -u)" -eq 0 ]] || refuse "needs root: network namespaces, a bridge and sshd on them are made as root (run it as root or with sudo)"
command -v ip >/dev/null 2>&1 || refuse "no 'ip' command: install iproute2"
if [[ "$cmd" == up ]]; then
  # Can namespaces be made here at all (a container without CAP_SYS_ADMIN cannot)?
  if ! err="$(ip netns add "qrh-probe-$$" 2>&1)"; then
    refuse "network namespaces cannot be made here (ip netns add: $err)"
  fi
  ip netns del "qrh-probe-$$" 2>/dev/null || true
fi

# The registry names DIR by its absolute path.
[[ "$cmd" != up ]] || mkdir -p "$dir" 2>/dev/null || die "cannot make the folder $dir"
if [[ -d "$dir" ]]; then dir="$(cd "$dir" && pwd -P)"; elif [[ "$dir" != /* ]]; then dir="$PWD/$dir"; fi
ssh_dir="$dir/ssh"

# Every up and down holds the registry's lock throughout, so two runs never pick one subnet and
# one run's hosts are never made and removed at once. Processes that outlive this script (sshd,
# ssh's connection masters) are started with the lock's descriptor closed.
mkdir -p "$registry" || die "cannot make the registry folder $registry"
exec 9>"$registry/.lock"
flock 9

subnet_of_dir() {  # prints X of the registry entry naming DIR, if any
  local f
  for f in "$registry"/[0-9]*; do
    [[ -f "$f" && "$(cat "$f" 2>/dev/null)" == "$dir" ]] && { basename "$f"; return 0; }
  done
  return 0
}

namespaces_of() {  # the namespaces of subnet X, sorted by host number
  ip netns list 2>/dev/null | awk -v p="qrh-$1-" 'index($1, p) == 1 { print $1 }' | sort -t- -k3,3n
}

kernel_has() {  # true when anything of subnet X exists (its bridge or one of its namespaces)
  ip link show "qrhb-$1" >/dev/null 2>&1 || [[ -n "$(namespaces_of "$1")" ]]
}

subnet_in_use() {  # true when this machine has an address or a route inside 10.213.X.0/24
  [[ -n "$(ip -4 -o addr show to "$prefix.$1.0/24" 2>/dev/null)" ||
     -n "$(ip -4 route show root "$prefix.$1.0/24" 2>/dev/null)" ]]
}

pick_subnet() {  # prints a free X and records it for DIR (the lock is held)
  local x f
  for ((x = 1; x <= 254; x++)); do
    f="$registry/$x"
    # Taken while any of its hosts exists. An entry without any (a run never taken down, then a
    # reboot; an up that failed before making its bridge) is free: an up in progress holds the lock.
    kernel_has "$x" && continue
    subnet_in_use "$x" && continue
    echo "$dir" >"$f" || die "cannot write $f"
    echo "$x"
    return 0
  done
  die "no free subnet $prefix.X.0/24 (every X in 1..254 is taken: see $registry)"
}

sshd_pid() {  # prints the pid of host I's sshd if it runs
  local i="$1" p
  p="$(cat "$ssh_dir/sshd-$i.pid" 2>/dev/null || true)"
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null &&
    tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | grep -qF -- "$ssh_dir/sshd-$i.config" && echo "$p"
  return 0
}

write_ssh_config() {  # the client side: every host's address, the run's key and known hosts
  local x="$1" n="$2" i addrs=""
  for ((i = 1; i <= n; i++)); do addrs+=" $prefix.$x.$((i + 1))"; done
  {
    echo "# Made by scripts/hosts.sh for the hosts of $dir: ssh -F $dir/ssh_config ADDRESS"
    echo "Host$addrs"
    echo "  User root"
    echo "  IdentityFile $ssh_dir/client_key"
    echo "  IdentitiesOnly yes"
    echo "  IdentityAgent none"
    echo "  UserKnownHostsFile $ssh_dir/known_hosts"
    echo "  GlobalKnownHostsFile /dev/null"
    echo "  StrictHostKeyChecking accept-new"
    echo "  BatchMode yes"
    echo "  ConnectTimeout 10"
    echo "  LogLevel ERROR"
    # One connection per host, reused by every ssh that follows for a minute: scripts/cluster.sh
    # runs one ssh per check. A socket's path (plus the 17 characters ssh adds while making it)
    # must fit in 108 bytes: a longer DIR goes without.
    if (( ${#ssh_dir} + 40 < 108 )); then
      echo "  ControlMaster auto"
      echo "  ControlPath $ssh_dir/mux-%h"
      echo "  ControlPersist 60"
    fi
  } >"$dir/ssh_config.tmp" && mv -f "$dir/ssh_config.tmp" "$dir/ssh_config"
}

write_sshd_config() {  # host I's sshd: its address only, root by the run's key only
  local x="$1" i="$2" pam=no
  # Without PAM, sshd refuses every login to an account whose password is locked ('!...'), keys
  # included; PAM does not.
  [[ "$(getent shadow root 2>/dev/null | cut -d: -f2)" == '!'* ]] && pam=yes
  cat >"$ssh_dir/sshd-$i.config" <<EOF
# Made by scripts/hosts.sh: the sshd of host $i ($prefix.$x.$((i + 1)), namespace qrh-$x-$i)
ListenAddress $prefix.$x.$((i + 1)):22
HostKey $ssh_dir/host_key
PidFile $ssh_dir/sshd-$i.pid
AuthorizedKeysFile $ssh_dir/authorized_keys
AllowUsers root
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM $pam
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowAgentForwarding no
AllowTcpForwarding no
PermitTunnel no
MaxSessions 64
MaxStartups 64:30:128
EOF
}

cmd_up() {
  local x n_had i ns addr err
  if ! command -v ssh >/dev/null 2>&1 || ! command -v ssh-keygen >/dev/null 2>&1; then
    die "no ssh or ssh-keygen: install openssh-client (scripts/setup-deps.sh)"
  fi
  local sshd; sshd="$(command -v sshd || echo /usr/sbin/sshd)"
  [[ -x "$sshd" ]] || die "no sshd: install openssh-server (scripts/setup-deps.sh)"

  x="$(subnet_of_dir)"
  if [[ -n "$x" ]]; then
    n_had="$(namespaces_of "$x" | wc -l)"
    ((n_had <= count)) || die "$dir has $n_had hosts, not $count: take them down first (hosts.sh down --dir $dir)"
  else
    x="$(pick_subnet)"
  fi
  hint="\`scripts/hosts.sh down --dir $dir\` removes what up made"

  # Keys made for this run: one host key for every host, one client key for root's login.
  mkdir -p "$ssh_dir" && chmod 700 "$ssh_dir"
  [[ -f "$ssh_dir/host_key" ]] || must "making the host key" ssh-keygen -q -t ed25519 -N '' -C "qrstore-hosts host" -f "$ssh_dir/host_key"
  [[ -f "$ssh_dir/client_key" ]] || must "making the client key" ssh-keygen -q -t ed25519 -N '' -C "qrstore-hosts client" -f "$ssh_dir/client_key"
  cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
  write_ssh_config "$x" "$count"
  # sshd's privilege-separation folder (Debian's own sshd makes it at boot; nothing else here).
  mkdir -p /run/sshd && chmod 755 /run/sshd

  local br="qrhb-$x"
  if ! ip link show "$br" >/dev/null 2>&1; then
    must "making the bridge $br" ip link add "$br" type bridge
  fi
  ip -4 -o addr show dev "$br" | grep -q " $prefix.$x.1/24 " ||
    must "giving $br the address $prefix.$x.1/24" ip addr add "$prefix.$x.1/24" dev "$br"
  must "bringing $br up" ip link set "$br" up

  for ((i = 1; i <= count; i++)); do
    ns="qrh-$x-$i"
    addr="$prefix.$x.$((i + 1))"
    ip netns list | awk -v ns="$ns" '$1 == ns { f = 1 } END { exit !f }' || must "making the namespace $ns" ip netns add "$ns"
    must "bringing up loopback in $ns" ip -n "$ns" link set lo up
    if ! ip link show "qrh$x-$i" >/dev/null 2>&1; then
      ip -n "$ns" link del eth0 2>/dev/null || true  # the half of a pair whose other half went
      must "making the veth pair qrh$x-$i/eth0 into $ns" ip link add "qrh$x-$i" type veth peer name eth0 netns "$ns"
    fi
    must "putting qrh$x-$i on $br" ip link set "qrh$x-$i" master "$br" up
    ip -n "$ns" -4 -o addr show dev eth0 | grep -q " $addr/24 " ||
      must "giving eth0 in $ns the address $addr/24" ip -n "$ns" addr add "$addr/24" dev eth0
    must "bringing eth0 up in $ns" ip -n "$ns" link set eth0 up
    if [[ -z "$(sshd_pid "$i")" ]]; then
      write_sshd_config "$x" "$i"
      must "checking the sshd config of $ns" "$sshd" -t -f "$ssh_dir/sshd-$i.config"
      rm -f "$ssh_dir/sshd-$i.pid"
      # It binds the address at once: an IPv4 address is usable as soon as it is added.
      must "starting sshd in $ns" ip netns exec "$ns" "$sshd" -f "$ssh_dir/sshd-$i.config" -E "$ssh_dir/sshd-$i.log" 9>&-
    fi
  done

  # Ready means a login works (and records each host key: accept-new).
  local deadline
  for ((i = 1; i <= count; i++)); do
    addr="$prefix.$x.$((i + 1))"
    deadline=$((SECONDS + sshd_ready_timeout_s))
    until err="$(ssh -F "$dir/ssh_config" "$addr" true 2>&1 </dev/null 9>&-)"; do
      if ((SECONDS >= deadline)); then
        echo "hosts.sh: no ssh login to $addr (namespace qrh-$x-$i) within ${sshd_ready_timeout_s} s: $err" >&2
        echo "hosts.sh: its sshd's log ($ssh_dir/sshd-$i.log):" >&2
        tail -n 15 "$ssh_dir/sshd-$i.log" >&2 2>/dev/null || true
        die "up failed"
      fi
      sleep 0.2
    done
  done
  hint=""
  for ((i = 1; i <= count; i++)); do echo "$prefix.$x.$((i + 1))"; done
}

# Stops PIDS (TERM, then KILL after 5 s).
stop_pids() {
  (($# > 0)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  local p left
  for _ in $(seq 50); do
    left=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left=1; done
    ((left)) || return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
}

cmd_down() {
  local x ns i p failed=0 s
  x="$(subnet_of_dir)"
  # ssh's connection masters first (each ends when told, or when its host goes).
  for s in "$ssh_dir"/mux-*; do
    [[ -S "$s" ]] && { ssh -S "$s" -O exit _ >/dev/null 2>&1 </dev/null || true; }
    rm -f "$s"
  done
  # This run's sshds, wherever they are (their pid files name them).
  local pids=()
  for s in "$ssh_dir"/sshd-*.pid; do
    [[ -f "$s" ]] || continue
    i="${s##*/sshd-}"; i="${i%.pid}"
    p="$(sshd_pid "$i")"
    [[ -n "$p" ]] && pids+=("$p")
  done
  stop_pids "${pids[@]+"${pids[@]}"}"
  if [[ -n "$x" ]]; then
    # Whatever still runs in a host (a node, an ssh session) would keep its namespace alive.
    for ns in $(namespaces_of "$x"); do
      pids=()
      for p in $(ip netns pids "$ns" 2>/dev/null); do pids+=("$p"); done
      if ((${#pids[@]} > 0)); then
        echo "hosts.sh: stopping what still runs in $ns: $(for p in "${pids[@]}"; do
          printf '%s(%s) ' "$(cat /proc/"$p"/comm 2>/dev/null || echo '?')" "$p"; done)" >&2
        stop_pids "${pids[@]}"
      fi
      i="${ns##*-}"
      ip link del "qrh$x-$i" 2>/dev/null || true  # and eth0, its other half
      if ! err="$(ip netns del "$ns" 2>&1)"; then echo "hosts.sh: removing the namespace $ns failed: $err" >&2; failed=1; fi
    done
    # veths whose namespace is gone already.
    for s in $(ip -o link show 2>/dev/null | awk -F': ' -v p="qrh$x-" 'index($2, p) == 1 { sub(/@.*/, "", $2); print $2 }'); do
      ip link del "$s" 2>/dev/null || true
    done
    if ip link show "qrhb-$x" >/dev/null 2>&1; then
      if ! err="$(ip link del "qrhb-$x" 2>&1)"; then echo "hosts.sh: removing the bridge qrhb-$x failed: $err" >&2; failed=1; fi
    fi
    if ((failed)); then die "down of $dir left some of subnet $prefix.$x.0/24 behind (above)"; fi
    rm -f "$registry/$x"
  fi
  rm -rf "$ssh_dir" "$dir/ssh_config" "$dir/ssh_config.tmp"
  rmdir "$dir" 2>/dev/null || true
  if [[ -n "$x" ]]; then echo "hosts.sh: removed the hosts of $dir ($prefix.$x.0/24)"; else echo "hosts.sh: no hosts in $dir"; fi
}

cmd_status() {
  local x ns i addr p ok=1
  x="$(subnet_of_dir)"
  [[ -n "$x" ]] || { echo "hosts.sh: no hosts in $dir"; exit 1; }
  if ip link show "qrhb-$x" >/dev/null 2>&1; then
    echo "bridge qrhb-$x $prefix.$x.1/24"
  else
    echo "bridge qrhb-$x missing"; ok=0
  fi
  local list; list="$(namespaces_of "$x")"
  [[ -n "$list" ]] || { echo "no namespaces"; ok=0; }
  for ns in $list; do
    i="${ns##*-}"
    addr="$prefix.$x.$((i + 1))"
    p="$(sshd_pid "$i")"
    if ! ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | grep -q " $addr/24 "; then
      echo "$ns $addr address-missing sshd ${p:-down}"; ok=0
    elif [[ -z "$p" ]]; then
      echo "$ns $addr sshd down"; ok=0
    else
      echo "$ns $addr sshd $p"
    fi
  done
  ((ok)) || exit 1
}

case "$cmd" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
esac
