#!/usr/bin/env bash
# thread-cpu.sh PID SECONDS: CPU seconds each thread group of process PID used over the next
# SECONDS (user + system, from /proc/PID/task/*/stat; threads named "executor-0",
# "executor-1" count as "executor"), one "name seconds" line per group, largest first.
# Divide by the transactions committed in the window for CPU per transaction per thread group
# (docs/benchmarks.md, "The leader's replication overhead").
# thread-cpu.sh --group NAME...: the group of each thread name, one a line.
set -euo pipefail
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }
# The grouping rule is common/thread_cpu.cc's ThreadGroup (what qrstore-bench's cpu figures
# use), written again here so that this script needs no build; the common unit tests check that
# both give the same group for a list of names.
group_py='
import re
def group(name):
    return re.sub(r"-[0-9]+$", "", name.rstrip("\n "))
'
if [[ $# -ge 1 && "$1" == --group ]]; then
  shift
  python3 -c "$group_py"'
import sys
for name in sys.argv[1:]:
    print(group(name))' "$@"
  exit 0
fi
if [[ $# -ne 2 || "$1" == -h || "$1" == --help ]]; then usage; exit $([[ $# -eq 2 ]] && echo 0 || echo 2); fi
pid="$1"; seconds="$2"
[[ "$pid" =~ ^[0-9]+$ && -d /proc/$pid ]] || { echo "thread-cpu.sh: no process $pid" >&2; exit 2; }
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "thread-cpu.sh: SECONDS must be a positive integer" >&2; exit 2; }
snap() {  # name ticks, per thread; threads that exit meanwhile are skipped
  for t in /proc/"$pid"/task/*; do
    { n=$(cat "$t/comm") && v=$(awk '{print $14 + $15}' "$t/stat") && echo "$n $v"; } 2>/dev/null || true
  done
}
before=$(snap)
sleep "$seconds"
after=$(snap)
python3 -c "$group_py"'
import collections, sys
hz = int(sys.argv[1])
def load(path):
    d = collections.Counter()
    for line in open(path):
        name, ticks = line.rsplit(" ", 1)
        d[group(name)] += int(ticks)
    return d
a, b = load(sys.argv[2]), load(sys.argv[3])
for name in sorted(b, key=lambda k: -(b[k] - a.get(k, 0))):
    if b[name] > a.get(name, 0):
        print(f"{name} {(b[name] - a.get(name, 0)) / hz:.2f}")' "$(getconf CLK_TCK)" <(echo "$before") <(echo "$after")
