#!/usr/bin/env bash
# cut-vs-kill.sh: what cutting a raft leader off its followers costs the client, beside killing
# it, on test hosts (network namespaces of this machine, scripts/hosts.sh), in interleaved pairs.
#
#   scripts/cut-vs-kill.sh [--runs N] [--duration-s S] [--fault-at S] [--pause-s S]
#                          [--config CONFIG] [--hosts DIR] [--out DIR] [--key=value ...]
#
# Makes 3 test hosts (or uses the ones hosts.sh made in --hosts DIR), writes CONFIG (default
# configs/cluster-raft.yaml: 3 nodes, raft, durable, the shipped 200-400 ms elections) with the
# hosts' addresses as its nodes' hosts, and runs scripts/failover-timeline.sh --hosts on it N
# times (default 5) for each fault, a cut then a kill, pair after pair, so that a drift of the
# host falls on both alike: --fault cut isolates the leader's host from the other hosts for
# --pause-s (default 3) while its clients still reach it (scripts/netsplit.sh), --fault kill
# SIGKILLs it; each at --fault-at (default 5) of a --duration-s (default 15) client run.
# Every run checks what failover-timeline.sh checks (nothing lost or run twice, dumps equal).
# Writes into --out (default run/cut-vs-kill-<time>): cut-K/ and kill-K/ (each run's
# failover-timeline output; a passing run's raft logs and checkpoints removed: 1.6 GB a run),
# runs.csv (fault, run, seconds to the first commit by the new leader, seconds back to 90% of the
# throughput before, the run's exit), summary.txt (median and worst of each fault, the host's
# lscpu model, the commit, this command) and cut-vs-kill.png (each fault's median run's commits
# per 100 ms around its fault; python3-matplotlib).
# Extra --key=value arguments go to the servers and the client (e.g. --ycsb.records=200000).
# Needs root (network namespaces, nftables). Exit status: 0 every run measured and passed its
# checks; 1 a run failed; 2 bad input or not root.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "cut-vs-kill: $*" >&2; exit 2; }
die() { echo "cut-vs-kill: $*" >&2; exit 1; }

runs=5 duration=15 fault_at=5 pause_s=3 config="$here/configs/cluster-raft.yaml" hosts_dir="" out="" overrides=()
command_line="scripts/cut-vs-kill.sh $*"
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --runs) runs="${2:?--runs needs a count}"; shift 2 ;;
    --duration-s) duration="${2:?--duration-s needs seconds}"; shift 2 ;;
    --fault-at) fault_at="${2:?--fault-at needs seconds}"; shift 2 ;;
    --pause-s) pause_s="${2:?--pause-s needs seconds}"; shift 2 ;;
    --config) config="${2:?--config needs a file}"; shift 2 ;;
    --hosts) hosts_dir="${2:?--hosts needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --*=*) overrides+=("$1"); shift ;;
    *) bad "unknown argument $1 (see --help)" ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]?$ ]] || bad "--runs: a count from 1 to 99 (got '$runs')"
[[ -f "$config" ]] || bad "no config file '$config'"
[[ "$(id -u)" -eq 0 ]] || bad "needs root: the hosts are network namespaces and the cut is nftables rules in them"
[[ -x "$bin/qrstore-server" ]] || die "no programs in $bin (build first: cmake --build build)"
n="$("$bin/qrstore-server" --config "$config" --list-nodes | wc -l)" || bad "$config: not a valid cluster config"

out="${out:-$here/run/cut-vs-kill-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
made_hosts=0
cleanup() {
  ((made_hosts == 0)) || "$here/scripts/hosts.sh" down --dir "$hosts_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [[ -z "$hosts_dir" ]]; then
  hosts_dir="$out/hosts"
  made_hosts=1
  addrs="$("$here/scripts/hosts.sh" up "$n" --dir "$hosts_dir")" || die "scripts/hosts.sh up $n failed (above)"
else
  addrs="$("$here/scripts/hosts.sh" status --dir "$hosts_dir" | awk '{ print $2 }')" ||
    die "the hosts in $hosts_dir are not all up (scripts/hosts.sh status --dir $hosts_dir)"
fi

# CONFIG with its nodes' hosts replaced, in order, by the hosts' addresses.
cfg="$out/$(basename "$config")"
python3 - "$config" "$cfg" $addrs <<'PY' || die "could not write $cfg"
import re, sys
src, dst, *addrs = sys.argv[1:]
text = open(src).read()
hosts = re.findall(r"\bhost: *\S+", text)
if len(hosts) > len(addrs):
    sys.exit("%s has %d nodes; there are %d hosts" % (src, len(hosts), len(addrs)))
it = iter(addrs)
open(dst, "w").write(re.sub(r"\bhost: *[^,}\s]+", lambda m: "host: " + next(it), text))
PY
echo "cut-vs-kill: $runs pairs on $n hosts ($(echo $addrs)); config $cfg; output in $out"

: >"$out/runs.csv.tmp"
failed=0
for ((k = 1; k <= runs; k++)); do
  for fault in cut kill; do
    dir="$out/$fault-$k"
    code=0
    "$here/scripts/failover-timeline.sh" "$cfg" --hosts "$hosts_dir" --fault "$fault" --pause-s "$pause_s" \
      --kill-at "$fault_at" --duration-s "$duration" --out "$dir" "${overrides[@]+"${overrides[@]}"}" \
      >"$dir.log" 2>&1 || code=$?
    first="$(sed -n 's/.*first commit by the new leader after \([0-9.]*\) s.*/\1/p' "$dir/summary.txt" 2>/dev/null | head -1 || true)"
    back="$(sed -n 's/.*back at 90% .* after \([0-9.]*\) s$/\1/p' "$dir/summary.txt" 2>/dev/null | head -1 || true)"
    echo "$fault,$k,${first:-},${back:-},$code" >>"$out/runs.csv.tmp"
    echo "cut-vs-kill: run $k, $fault: first commit after ${first:-NEVER} s, back at 90% after ${back:-NEVER} s (exit $code)"
    ((code == 0)) || { failed=1; echo "cut-vs-kill: $fault run $k failed; its output: $dir.log" >&2; tail -n 5 "$dir.log" >&2; }
    # A passing run's raft logs and checkpoints (about 1.6 GB each) go; its logs, dumps, CSVs stay.
    ((code != 0)) || rm -rf "$dir"/run/*/data
  done
done
{ echo "fault,run,first_commit_s,back_90_s,exit"; cat "$out/runs.csv.tmp"; } >"$out/runs.csv"
rm -f "$out/runs.csv.tmp"

py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
model="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
commit="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"$py" - "$out" "$model" "$commit" "$command_line" "$fault_at" <<'PY'
import csv, os, statistics, sys
out, model, commit, command, fault_at = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
rows = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
lines = ["cut-vs-kill: %s" % command, "host: %s; commit %s" % (model, commit)]
median_run = {}
for fault in ("cut", "kill"):
    rs = [r for r in rows if r["fault"] == fault]
    got = [(float(r["first_commit_s"]), r["run"]) for r in rs if r["first_commit_s"]]
    backs = [float(r["back_90_s"]) for r in rs if r["back_90_s"]]
    if not got:
        lines.append("%s: no run measured" % fault)
        continue
    firsts = sorted(v for v, _ in got)
    med = statistics.median(firsts)
    median_run[fault] = min(got, key=lambda g: abs(g[0] - med))[1]
    lines.append("%s: first commit by the new leader after %.2f s median, %.2f s worst, of %d runs (%s);"
                 " back at 90%% after %s s median" % (
                     fault, med, firsts[-1], len(firsts), " ".join("%.2f" % v for v in sorted(firsts)),
                     "%.2f" % statistics.median(backs) if backs else "-"))
    missing = len(rs) - len(got)
    if missing:
        lines.append("%s: %d run(s) without a measured first commit" % (fault, missing))
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no plot: python3-matplotlib is not installed")
    sys.exit(0)
fig, ax = plt.subplots(figsize=(10, 4))
for fault, color in (("cut", "tab:blue"), ("kill", "tab:red")):
    k = median_run.get(fault)
    if k is None:
        continue
    d = os.path.join(out, "%s-%s" % (fault, k))
    tl = list(csv.DictReader(open(os.path.join(d, "timeline.csv"))))
    at = float(next(csv.DictReader(open(os.path.join(d, "kills.csv"))))["t_s"])
    ax.plot([float(r["t_s"]) - at for r in tl], [int(r["committed"]) * 10 for r in tl], color=color, lw=1,
            label="%s (run %s, the median)" % (fault, k))
ax.axvline(0, color="gray", ls="--", lw=1)
ax.set_xlim(-2, 6)
ax.set_xlabel("s since the fault (the leader cut off its followers, or killed)")
ax.set_ylabel("committed txn/s (per 100 ms)")
ax.set_title("raft leader cut off vs killed, 3 namespace hosts (%s)" % model)
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(out, "cut-vs-kill.png"), dpi=100)
print("plot: %s" % os.path.join(out, "cut-vs-kill.png"))
PY
exit "$failed"
