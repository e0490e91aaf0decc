#!/usr/bin/env bash
# The main job's workload on 3 hosts over ssh. scripts/hosts.sh makes 3 network namespaces of
# this machine (a bridge, an address and an sshd each); the config is configs/cluster-raft.yaml's
# (a leader and two followers, raft, durable) with those addresses as the nodes' hosts and a
# smaller table; scripts/cluster.sh starts each node over ssh on its host (QRSTORE_SSH_CONFIG,
# QRSTORE_REMOTE_DIR: this checkout, which the namespaces share), and qrstore-client drives it
# from this namespace. Checks: each node runs in the namespace holding its host's address;
# status and logs answer over ssh; the client's summary (every txn committed or aborted, none
# failed, replicas agree); `down` stops every node cleanly; every node's dump is identical; and
# hosts.sh down leaves no namespace, bridge, veth, sshd or registry entry. Needs root and
# network namespaces (CI runs as root): without them it fails, saying so.
source "$(dirname "$0")/lib.sh"

txns=30000
hosts_up 3
subnet="${addrs[0]%.*}"
x="${subnet##*.}"
note "hosts ${addrs[*]} up in $((SECONDS - hosts_started)) s"

# configs/cluster-raft.yaml with the hosts' addresses, a name and dump folder of this test's, the
# table cut to 50,000 records (the light main job) and lib.sh's election timeout for tests (1-2 s:
# a loaded CI host misses heartbeats).
cfg="$QR_TMP/hosts3.yaml"
python3 - "$QR_SRC/configs/cluster-raft.yaml" "$cfg" "$QR_TMP/dump-hosts3" "${addrs[@]}" <<'PY' ||
import re, sys
src, out, dump, *addrs = sys.argv[1:]
text = open(src).read()
hosts = iter(addrs)
for pattern, repl, want in [
    (r"host: 127\.0\.0\.1", lambda m: "host: " + next(hosts), 3),
    (r"(?m)^(  name: )raft3$", r"\g<1>hosts3", 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  records: )\d+", r"\g<1>50000", 1),
    (r'(?m)^(  dump_state_dir: )""', r"\g<1>" + dump, 1),
    (r"(?m)^(    election_ticks: )\d+", r"\g<1>100", 1),
    (r"(?m)^(    heartbeat_ticks: )\d+", r"\g<1>10", 1),
]:
    text, n = re.subn(pattern, repl, text)
    if n != want:
        sys.exit("configs/cluster-raft.yaml: %r matched %d times, not %d" % (pattern, n, want))
open(out, "w").write(text)
PY
  fail "could not write $cfg from configs/cluster-raft.yaml"
mkdir -p "$QR_TMP/dump-hosts3"
QR_CONFIGS+=("$cfg")

qr_up "$cfg" --fresh
run="$QRSTORE_RUN_DIR/hosts3"
nodes="$("$QRSTORE_BIN/qrstore-server" --config "$cfg" --list-nodes)"
while read -r n host _; do
  pid="$(cat "$run/$n.pid")"
  ns="$(ip netns identify "$pid" 2>/dev/null || true)"
  [[ -n "$ns" ]] || fail "node $n (pid $pid) runs in no named network namespace: not on its host $host"
  ip -n "$ns" -4 -o addr show | grep -q " inet $host/" ||
    fail "node $n runs in namespace $ns, which does not hold its host's address $host"
  ip netns pids "$ns" | grep -qx -- "$pid" || fail "ip netns pids $ns does not list node $n's pid $pid"
  note "node $n: pid $pid runs in $ns ($host)"
done <<<"$nodes"

deadline=$((SECONDS + 20))
until status="$("$QR_SRC/scripts/cluster.sh" status "$cfg" 2>&1)" &&
      [[ "$(awk 'NR > 1 && $2 == "leader"' <<<"$status" | wc -l)" -eq 1 &&
         "$(awk 'NR > 1 && $3 == "serving"' <<<"$status" | wc -l)" -eq 3 ]]; do
  ((SECONDS < deadline)) || fail "cluster.sh status does not show one leader and 3 nodes serving: $status"
  sleep 0.5
done
logs="$("$QR_SRC/scripts/cluster.sh" logs "$cfg" --lines 5)" || fail "cluster.sh logs failed"
for n in n0 n1 n2; do
  grep -q "^==> $n " <<<"$logs" || fail "cluster.sh logs shows no log of $n: $logs"
done
note "status and logs answer"

load_started=$SECONDS
qr_client "$cfg" --txns "$txns" --json >"$QR_TMP/client.out" 2>"$QR_TMP/client.err" ||
  fail "client failed: $(tail -5 "$QR_TMP/client.err") $(tail -2 "$QR_TMP/client.out")"
committed="$(json_field "$QR_TMP/client.out" committed)"
aborted="$(json_field "$QR_TMP/client.out" aborted)"
[[ $((committed + aborted)) -eq $txns ]] || fail "committed $committed + aborted $aborted != $txns"
[[ "$(json_field "$QR_TMP/client.out" failed)" == 0 ]] || fail "failed txns: $(json_field "$QR_TMP/client.out" failed)"
[[ "$(json_field "$QR_TMP/client.out" replicas_agree)" == true ]] || fail "replicas did not agree"
note "client from this namespace: $committed committed, $aborted aborted, none failed, replicas agree ($((SECONDS - load_started)) s)"

down="$(qr_down "$cfg" 2>&1)" || fail "cluster.sh down failed: $down"
[[ "$(grep -c 'stopped cleanly' <<<"$down")" -eq 3 ]] || fail "not every node stopped cleanly: $down"
note "down: every node stopped cleanly"
qr_same_dumps "$cfg"

"$QR_SRC/scripts/hosts.sh" down --dir "$hosts_dir" >/dev/null || fail "scripts/hosts.sh down failed"
left="$(ip netns list | awk -v p="qrh-$x-" 'index($1, p) == 1')"
[[ -z "$left" ]] || fail "hosts.sh down left namespaces: $left"
! ip link show "qrhb-$x" >/dev/null 2>&1 || fail "hosts.sh down left the bridge qrhb-$x"
left="$(ip -o link show | awk -F': ' -v p="qrh$x-" 'index($2, p) == 1 { print $2 }')"
[[ -z "$left" ]] || fail "hosts.sh down left veths: $left"
left="$(pgrep -af -- "$hosts_dir/ssh/" || true)"
[[ -z "$left" ]] || fail "hosts.sh down left processes: $left"
[[ ! -e "${QRSTORE_HOSTS_REGISTRY:-/tmp/qrstore-hosts}/$x" ]] || fail "hosts.sh down left its registry entry for $subnet.0/24"
note "hosts.sh down: no namespace, bridge, veth, sshd or registry entry left"
note "ran in $((SECONDS - hosts_started)) s"
echo PASS
