#!/usr/bin/env bash
# Chaos with network cuts (scripts/chaos.sh --events isolate,split,bridge,oneway --hosts DIR;
# docs/chaos.md, "Network cuts") on 5 test hosts: a raft group of 5, each node in a network
# namespace of its own (scripts/hosts.sh), started over ssh by scripts/cluster.sh, driven by
# qrstore-client with sessions from this namespace while chaos.sh cuts links between the hosts
# with scripts/netsplit.sh on a schedule drawn from a fixed seed, heals each cut after its drawn
# duration and waits until the group is whole again. chaos.sh itself checks the end: the client
# exited 0 with no txn in doubt, every replica agreed, every node serving and caught up, `down`
# clean, every node's dump identical, and exactly once (the update counters sum to the client's
# update_ops_committed: an acknowledged txn lost, as a cut-off leader acknowledging alone would
# lose it, makes the sum smaller; one run twice, larger). Here, on top: the cuts ran (four kinds
# at least), one of them gave the group a new leader, and a deposed member rejoined.
# Seed 41 (scripts/chaos.sh CONFIG --duration-s 45 --seed 41 --events isolate,split,bridge,oneway
# --cut-ms 2000-4000 --gap-ms 3000-5000 --quiet-s 6 --dry-run prints it): a follower isolated,
# a split with the leader in the minority, a bridge, the leader isolated, then the leader's
# packets to a follower dropped. QRSTORE_CHAOS_SEED picks another seed.
# Needs root and network namespaces (CI runs as root): without them it fails, saying so.
source "$(dirname "$0")/lib.sh"

readonly n=5
seed="${QRSTORE_CHAOS_SEED:-41}"
hosts_up "$n"
note "hosts ${addrs[*]} up in $((SECONDS - hosts_started)) s"

# configs/cluster-raft.yaml (raft, the disk log, checkpoints) with the hosts' addresses, n3 and n4
# added, a small table and batches (a deposed leader re-executes from its checkpoint and catches
# up well within a second) and elections of 1-2 s (lib.sh's timing for a loaded host).
cfg="$QR_TMP/chaoshosts.yaml"
python3 - "$QR_SRC/configs/cluster-raft.yaml" "$cfg" "$QR_TMP/dump-chaoshosts" "${addrs[@]}" <<'PY' ||
import re, sys
src, out, dump, *addrs = sys.argv[1:]
text = open(src).read()
extra = "".join(
    "    - {name: n%d, host: 127.0.0.1, client_port: %d, peer_port: %d, partition: 0, row: %d}\n"
    % (i, 7100 + i, 7200 + i, i) for i in range(3, len(addrs)))
hosts = iter(addrs)
for pattern, repl, want in [
    (r"(?m)^(    - \{name: n2, .*\n)", lambda m: m.group(1) + extra, 1),
    (r"host: 127\.0\.0\.1", lambda m: "host: " + next(hosts), len(addrs)),
    (r"(?m)^(  name: )raft3$", r"\g<1>chaoshosts", 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  records: )\d+", r"\g<1>20000", 1),
    (r"(?m)^(ycsb:.*\n(?:  .*\n)*?  ops_per_txn: )\d+", r"\g<1>8", 1),
    (r"(?m)^(batch:.*\n(?:  .*\n)*?  txns: )\d+", r"\g<1>2000", 1),
    (r"(?m)^(batch:.*\n(?:  .*\n)*?  timeout_ms: )\d+", r"\g<1>5", 1),
    (r'(?m)^(  dump_state_dir: )""', r"\g<1>" + dump, 1),
    (r"(?m)^(  stats_interval_ms: )\d+", r"\g<1>2000", 1),
    (r"(?m)^(    election_ticks: )\d+", r"\g<1>100", 1),
    (r"(?m)^(    heartbeat_ticks: )\d+", r"\g<1>10", 1),
]:
    text, k = re.subn(pattern, repl, text)
    if k != want:
        sys.exit("configs/cluster-raft.yaml: %r matched %d times, not %d" % (pattern, k, want))
open(out, "w").write(text)
PY
  fail "could not write $cfg from configs/cluster-raft.yaml"
mkdir -p "$QR_TMP/dump-chaoshosts"
QR_CONFIGS+=("$cfg")

# The load is capped (10,000 txn/s) so that five nodes, the client and the other tests share the
# 2 cores without a starved heartbeat passing for a cut.
out="$QR_TMP/chaos.out"
set +e
"$QR_SRC/scripts/chaos.sh" "$cfg" --duration-s 45 --seed "$seed" --hosts "$hosts_dir" \
  --events isolate,split,bridge,oneway --cut-ms 2000-4000 --gap-ms 3000-5000 --quiet-s 6 \
  --dir "$QR_TMP/chaos" --target-tps 10000 2>&1 | tee "$out"
code=${PIPESTATUS[0]}
set -e
((code == 0)) || fail "chaos.sh failed (exit $code): see its problems above; replay with the seed $seed"
grep -q "^chaos: PASS" "$out" || fail "chaos.sh did not say PASS"
cuts="$(awk '$2 == "cuts" { print $3 }' "$out" | tr -d ,)"
((cuts >= 4)) || fail "the schedule did not run: ${cuts:-no} cut(s)"
kinds_cut=0
for k in isolate split bridge oneway; do grep -q "event [0-9]*/[0-9]*: $k" "$out" && kinds_cut=$((kinds_cut + 1)); done
((kinds_cut >= 4)) || fail "only $kinds_cut kind(s) of cut ran, not 4"
after="$(grep '^chaos:   after cuts' "$out")"
new_leaders="$(awk '{ print $4 }' <<<"$after")"
rejoins="$(grep -o '[0-9]* rejoin(s)' <<<"$after" | awk '{ print $1 }')"
((new_leaders >= 1)) || fail "no cut gave the group a new leader: $after"
((rejoins >= 1)) || fail "no deposed member rejoined after a cut: $after"
note "$cuts cut(s) of $kinds_cut kinds; $new_leaders with a new leader; $rejoins rejoin(s)"
note "ran in $((SECONDS - hosts_started)) s"
echo PASS
