#!/usr/bin/env bash
# scripts/failover-timeline.sh refuses what it cannot run, before it starts a cluster: exit 2
# and a line naming the flag (the measurements themselves are docs/reliability.md's).
# Usage: failover_timeline_cli_test.sh   (run from the source root; QRSTORE_BIN: the build's bin)
set -u
out="$(mktemp -d /tmp/qrstore-ft-cli.XXXXXX)"
trap 'rm -rf "$out"' EXIT
failures=0
# expect_of SCRIPT WANT_RC TEXT ARGS...: SCRIPT ARGS exits WANT_RC and prints TEXT.
expect_of() {
  local script=$1 want=$2 text=$3; shift 3
  timeout 30 "scripts/$script" "$@" --out "$out/run" >"$out/o" 2>&1 </dev/null
  local rc=$?
  if [[ $rc -ne $want ]] || ! grep -qF -- "$text" "$out/o"; then
    echo "FAIL: $script $*: exit $rc (want $want), output: $(head -3 "$out/o")"
    failures=$((failures + 1))
  else
    echo "ok - $script $* -> $rc: $(grep -F -- "$text" "$out/o" | head -1)"
  fi
}
expect() { expect_of failover-timeline.sh "$@"; }
expect 0 "--restart-after S" --help
expect 2 "--fault: kill, pause or cut (got 'nope')" configs/cluster-raft.yaml --fault nope
expect 2 "--restart-after goes with --fault kill" configs/cluster-raft.yaml --fault pause --restart-after 3
expect 2 "--restart-after: seconds in (0, 600] (got '0')" configs/cluster-raft.yaml --restart-after 0
expect 2 "2 kill(s) need a group of at least 5 members" configs/cluster-raft.yaml --kills 2
expect 2 "a group of at least 3 members keeps a majority" configs/cluster-none.yaml --fault cut
# A cut needs a backend with peers or a ZooKeeper server to be cut off from.
expect 2 "--fault cut needs replication.backend raft or zookeeper (got none)" configs/cluster-raft.yaml --fault cut \
  --replication.backend=none
expect 2 "--hosts: no /nonexistent/ssh_config" configs/cluster-raft.yaml --fault cut --hosts /nonexistent
# scripts/cut-vs-kill.sh (failover-timeline.sh --hosts, cut then kill, in pairs) refuses bad
# input before it makes any host.
ck() { expect_of cut-vs-kill.sh "$@"; }
ck 0 "interleaved pairs" --help
ck 2 "--runs: a count from 1 to 99 (got '0')" --runs 0
ck 2 "no config file 'nope.yaml'" --config nope.yaml
ck 2 "unknown argument --speed" --speed
((failures == 0)) && echo PASS || exit 1
