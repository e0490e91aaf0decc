#!/usr/bin/env bash
# thread-cpu.sh PID SECONDS: CPU seconds each thread group of process PID used over the next
# SECONDS (user + system, from /proc/PID/task/*/stat; threads named "executor-0",
# "executor-1" count as "executor"), one "name seconds" line per group, largest first.
# Divide by the transactions committed in the window for CPU per transaction per thread group
# (docs/benchmarks.md, "The leader's replication overhead").
set -euo pipefail
if [[ $# -ne 2 || "$1" == -h || "$1" == --help ]]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit $([[ $# -eq 2 ]] && echo 0 || echo 2); fi
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
python3 - "$(getconf CLK_TCK)" <(echo "$before") <(echo "$after") <<'PY'
import collections, re, sys
hz = int(sys.argv[1])
def load(path):
    d = collections.Counter()
    for line in open(path):
        name, ticks = line.rsplit(" ", 1)
        d[re.sub(r"-\d+$", "", name)] += int(ticks)
    return d
a, b = load(sys.argv[2]), load(sys.argv[3])
for name in sorted(b, key=lambda k: -(b[k] - a.get(k, 0))):
    if b[name] > a.get(name, 0):
        print(f"{name} {(b[name] - a.get(name, 0)) / hz:.2f}")
PY
