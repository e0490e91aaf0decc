#!/usr/bin/env bash
# netsplit.sh: cuts and heals network links between the test hosts of scripts/hosts.sh (network
# namespaces of this machine), as a network partition would: packets are dropped, never refused.
#
#   scripts/netsplit.sh isolate A [--from-client] [--dir DIR]
#                           A hears nothing from, and reaches nothing of, every other host of
#                           DIR, both ways; this namespace (the bridge address 10.213.X.1, where
#                           the client, cluster.sh and the tests run) still reaches A unless
#                           --from-client is given too (that cuts ssh to A as well)
#   scripts/netsplit.sh split A,B C,D,E [--dir DIR]
#                           two sets: no packet between a host of one and a host of the other
#   scripts/netsplit.sh bridge M A,B C,D [--dir DIR]
#                           the split of A,B from C,D, with M (in neither) reaching both
#   scripts/netsplit.sh oneway A B [--dir DIR]
#                           A's packets to B are dropped; B's packets to A are delivered
#   scripts/netsplit.sh heal [--dir DIR]     removes every cut of every host of DIR
#   scripts/netsplit.sh status [--dir DIR]   one line per host of DIR: what it drops
#
# Hosts are named by their addresses (10.213.X.(I+1), as `hosts.sh up` printed them); a
# cluster config's node names are not read here: `qrstore-server --config F --list-nodes` maps
# them to hosts. DIR is the folder given to `hosts.sh up` (default run/netns-hosts in this
# checkout). Cuts add up: a second cut adds to the first until heal. Each command prints one
# line, starting with the UTC time (ms) at which its cut was in force (heal: removed).
#
# How: each host's namespace gets an nftables table of its own, `netdev qrsplit`, bound to its
# eth0 (its one link to the bridge), with a set of addresses whose packets it drops on arrival
# (ingress hook) and a set of addresses it drops packets to on departure (egress hook). Every
# packet is matched, not only new connections, so established TCP connections go silent too.
# Drops at the device hooks are invisible to the sender (a drop in the output hook would fail
# a UDP send with EPERM at once, which no real partition does); ARP is not IP and still passes,
# as it would across a partition that drops IP traffic only. heal deletes the table; nothing
# else in the namespaces or in this namespace is touched.
#
# Needs root and nft (Debian's nftables). Exit status: 0 done (status: also when nothing is cut);
# 2 bad arguments, not root, no nft, or no hosts in DIR; 1 an nft command failed, saying which.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
registry="${QRSTORE_HOSTS_REGISTRY:-/tmp/qrstore-hosts}"
readonly prefix=10.213
readonly table=qrsplit

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
bad() { echo "netsplit.sh: $*" >&2; exit 2; }
die() { echo "netsplit.sh: $*" >&2; exit 1; }
now_utc() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }

[[ $# -ge 1 ]] || { usage >&2; exit 2; }
cmd="$1"; shift
case "$cmd" in
  -h|--help|help) usage; exit 0 ;;
  isolate|split|bridge|oneway|heal|status) ;;
  *) bad "unknown command '$cmd' (isolate, split, bridge, oneway, heal or status; see --help)" ;;
esac
dir="$here/run/netns-hosts"
from_client=0
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) [[ $# -ge 2 ]] || bad "--dir needs a folder"; dir="$2"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --from-client)
      [[ "$cmd" == isolate ]] || bad "--from-client goes with isolate only"
      from_client=1; shift ;;
    -*) bad "unknown flag '$1' (see --help)" ;;
    *) args+=("$1"); shift ;;
  esac
done
want=0
case "$cmd" in
  isolate) want=1 ;; split) want=2 ;; bridge) want=3 ;; oneway) want=2 ;; heal|status) want=0 ;;
esac
((${#args[@]} == want)) || {
  case "$cmd" in
    isolate) bad "isolate takes one host address (isolate A [--from-client]), got ${#args[@]} arguments" ;;
    split) bad "split takes two comma-separated sets of host addresses (split A,B C,D,E), got ${#args[@]} arguments" ;;
    bridge) bad "bridge takes a host and two sets (bridge M A,B C,D), got ${#args[@]} arguments" ;;
    oneway) bad "oneway takes two host addresses (oneway A B: A's packets to B dropped), got ${#args[@]} arguments" ;;
    *) bad "$cmd takes no host addresses (got '${args[*]}')" ;;
  esac
}

[[ "$(id -u)" -eq 0 ]] || bad "needs root: the cuts are nftables rules inside the hosts' network namespaces (run it as root or with sudo)"
command -v nft >/dev/null 2>&1 || bad "no 'nft' command: install nftables (apt-get install nftables)"
command -v ip >/dev/null 2>&1 || bad "no 'ip' command: install iproute2"

# DIR's subnet X, from hosts.sh's registry (a file per X naming its DIR by its absolute path).
[[ -d "$dir" ]] || bad "no folder $dir: no hosts there (make them with scripts/hosts.sh up N --dir $dir)"
dir="$(cd "$dir" && pwd -P)"
x=""
for f in "$registry"/[0-9]*; do
  [[ -f "$f" && "$(cat "$f" 2>/dev/null)" == "$dir" ]] && { x="${f##*/}"; break; }
done
[[ -n "$x" ]] || bad "no hosts in $dir (hosts.sh's registry $registry names none; make them with scripts/hosts.sh up N --dir $dir)"
client_addr="$prefix.$x.1"

# Every host of DIR: its address and namespace, by host number.
declare -A ns_of=()
hosts=()
for ns in $(ip netns list 2>/dev/null | awk -v p="qrh-$x-" 'index($1, p) == 1 { print $1 }' | sort -t- -k3,3n); do
  i="${ns##*-}"
  addr="$prefix.$x.$((i + 1))"
  ns_of["$addr"]="$ns"
  hosts+=("$addr")
done
((${#hosts[@]} > 0)) || bad "no host namespaces qrh-$x-* for $dir (taken down? scripts/hosts.sh status --dir $dir)"

host_ok() {  # ADDRESS: exits 2 unless it is a host of DIR
  [[ -n "${ns_of[$1]+x}" ]] ||
    bad "'$1' is not a host of $dir (its hosts: ${hosts[*]}; the client's address $client_addr is not a host)"
}
set_of() {  # LIST: prints the comma-separated addresses of LIST, one a line, each checked
  local a seen=" "
  [[ -n "$1" && "$1" != *,,* && "$1" != ,* && "$1" != *, ]] || bad "'$1' is not a comma-separated list of host addresses"
  IFS=, read -r -a list <<<"$1"
  for a in "${list[@]}"; do
    host_ok "$a"
    [[ "$seen" != *" $a "* ]] || bad "$a is named twice in '$1'"
    seen+="$a "
    echo "$a"
  done
}

nsx() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

# drop ADDRESS FROM_LIST TO_LIST: the host at ADDRESS drops packets arriving from FROM_LIST and
# leaving for TO_LIST (space-separated addresses; either may be empty), in one nft transaction.
# The table is made on first use; adding an address already in a set changes nothing.
drop() {
  local addr="$1" from="$2" to="$3" ns="${ns_of[$1]}" script="" err
  if ! nsx "$ns" nft list table netdev "$table" >/dev/null 2>&1; then
    script+="table netdev $table {
  set drop_from { type ipv4_addr; }
  set drop_to { type ipv4_addr; }
  chain ingress { type filter hook ingress device \"eth0\" priority -500; policy accept; ip saddr @drop_from drop; }
  chain egress { type filter hook egress device \"eth0\" priority -500; policy accept; ip daddr @drop_to drop; }
}
"
  fi
  [[ -z "$from" ]] || script+="add element netdev $table drop_from { ${from// /, } }
"
  [[ -z "$to" ]] || script+="add element netdev $table drop_to { ${to// /, } }
"
  err="$(nsx "$ns" nft -f - <<<"$script" 2>&1)" || die "nft in $ns ($addr) failed: $err"
}

# elements ADDRESS SET: the addresses in SET of the host's table, space-separated (none: empty).
elements() {
  nsx "${ns_of[$1]}" nft -j list set netdev "$table" "$2" 2>/dev/null | python3 -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for item in doc.get("nftables", []):
    if "set" in item:
        print(" ".join(sorted(str(e) for e in item["set"].get("elem", []))))' || true
}

except() {  # ADDRESS LIST...: LIST without ADDRESS
  local a="$1" b out=(); shift
  for b in "$@"; do [[ "$b" == "$a" ]] || out+=("$b"); done
  echo "${out[*]}"
}

case "$cmd" in
  isolate)
    a="${args[0]}"
    host_ok "$a"
    others="$(except "$a" "${hosts[@]}")"
    [[ -n "$others" ]] || bad "$dir has one host ($a): nothing to isolate it from"
    peers="$others"
    ((from_client)) && peers="$others $client_addr"
    drop "$a" "$peers" "$peers"
    if ((from_client)); then
      echo "$(now_utc) netsplit: isolate $a from every other host ($others) and from this namespace ($client_addr), both ways"
    else
      echo "$(now_utc) netsplit: isolate $a from every other host ($others), both ways; this namespace ($client_addr) still reaches it"
    fi
    ;;
  split|bridge)
    m=""
    if [[ "$cmd" == bridge ]]; then
      m="${args[0]}"; host_ok "$m"
      left_arg="${args[1]}" right_arg="${args[2]}"
    else
      left_arg="${args[0]}" right_arg="${args[1]}"
    fi
    left="$(set_of "$left_arg")"; left="${left//$'\n'/ }"
    right="$(set_of "$right_arg")"; right="${right//$'\n'/ }"
    for a in $left; do
      [[ " $right " != *" $a "* ]] || bad "$a is in both sets ($left_arg and $right_arg)"
    done
    if [[ -n "$m" ]]; then
      [[ " $left $right " != *" $m "* ]] || bad "the bridge $m must be in neither set ($left_arg, $right_arg)"
    fi
    # Rules on one side are enough: every packet between the sets passes the eth0 of a host of
    # the first one.
    for a in $left; do drop "$a" "$right" "$right"; done
    if [[ "$cmd" == bridge ]]; then
      echo "$(now_utc) netsplit: bridge $m: $left_arg and $right_arg no longer reach each other, both ways; $m reaches both"
    else
      echo "$(now_utc) netsplit: split $left_arg from $right_arg, both ways"
    fi
    ;;
  oneway)
    a="${args[0]}" b="${args[1]}"
    host_ok "$a"; host_ok "$b"
    [[ "$a" != "$b" ]] || bad "oneway needs two different hosts (got $a twice)"
    drop "$a" "" "$b"
    echo "$(now_utc) netsplit: oneway $a to $b dropped; $b to $a still delivered"
    ;;
  heal)
    healed=()
    for a in "${hosts[@]}"; do
      ns="${ns_of[$a]}"
      if nsx "$ns" nft list table netdev "$table" >/dev/null 2>&1; then
        err="$(nsx "$ns" nft delete table netdev "$table" 2>&1)" || die "nft in $ns ($a) failed: $err"
        healed+=("$a")
      fi
    done
    if ((${#healed[@]} > 0)); then
      echo "$(now_utc) netsplit: heal: removed the cuts of ${healed[*]}"
    else
      echo "$(now_utc) netsplit: heal: nothing was cut in $dir (${hosts[*]})"
    fi
    ;;
  status)
    any=0
    for a in "${hosts[@]}"; do
      ns="${ns_of[$a]}"
      if ! nsx "$ns" nft list table netdev "$table" >/dev/null 2>&1; then
        echo "$a ($ns): no cut"
        continue
      fi
      from="$(elements "$a" drop_from)"; to="$(elements "$a" drop_to)"
      [[ -n "$from$to" ]] && any=1
      echo "$a ($ns): drops packets from: ${from:--}; drops packets to: ${to:--}"
    done
    ((any)) || echo "netsplit: nothing is cut in $dir"
    ;;
esac
