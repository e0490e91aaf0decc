#!/usr/bin/env bash
# checkpoint-dip.sh: the client's throughput while a checkpoint is written (issue 21, section 3),
# against the seconds around it. Brings up a fresh cluster of CONFIG (checkpoints on:
# server.checkpoint_dir), runs qrstore-client at full load with a progress line every 100 ms,
# stops the cluster, then takes every checkpoint the nodes logged during the measured window
# ("checkpoint of batch B: ... copy C ms, written in W s": the window is the W + C before the
# line) and compares the committed txn/s inside it with the A s before and the A s after it
# (--around, default 1; events whose surroundings hold another checkpoint are left out). Prints each event and the
# mean ratio (inside / around) for the leader's checkpoints, the followers' and all.
#
#   scripts/checkpoint-dip.sh [CONFIG] [--seconds S] [--warmup S] [--around A] [--out DIR] [--key=value ...]
#
# CONFIG: default configs/cluster-raft.yaml. --seconds: the measured window (default 60),
# --warmup: before it (default 3). Extra --key=value arguments go to the servers and the client
# (e.g. --server.checkpoint_every_batches=100 for more events). Nothing else should run
# meanwhile. Programs: build/bin (Release), or QRSTORE_BIN. Writes OUT (default
# run/checkpoint-dip-<time>): client.err, the nodes' logs (run/), events.csv, summary.txt.
# Exit status: 0 measured; 1 the run did not work or held no checkpoint to measure; 2 bad input.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "checkpoint-dip: $*" >&2; exit 2; }
die() { echo "checkpoint-dip: $*" >&2; exit 1; }

config="$here/configs/cluster-raft.yaml" seconds=60 warmup=3 around=1 out="" extra=()
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a number}"; shift 2 ;;
    --around) around="${2:?--around needs seconds}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --*=*) extra+=("$1"); shift ;;
    -*) bad "unknown flag $1 (see --help)" ;;
    *) config="$1"; shift ;;
  esac
done
[[ -f "$config" ]] || bad "no config file '$config'"
[[ "$seconds" =~ ^[1-9][0-9]*$ && "$warmup" =~ ^[0-9]+$ ]] || bad "--seconds/--warmup: whole seconds"
[[ "$around" =~ ^[0-9]+(\.[0-9]+)?$ ]] && [[ "$around" != 0 ]] || bad "--around: seconds > 0 (got '$around')"
[[ -x "$bin/qrstore-server" && -x "$bin/qrstore-client" ]] || bad "no programs in $bin (build first)"
get() { "$bin/qrstore-server" --config "$config" "${extra[@]+"${extra[@]}"}" --get "$1"; }
[[ -n "$(get server.checkpoint_dir)" ]] || bad "$config: no server.checkpoint_dir (nothing to measure)"
name="$(get cluster.name)"
out="${out:-$here/run/checkpoint-dip-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
export QRSTORE_RUN_DIR="$out/run"
rm -rf "$QRSTORE_RUN_DIR"
opts=("${extra[@]+"${extra[@]}"}")

echo "checkpoint-dip: $config, ${seconds} s measured after ${warmup} s, ${around} s around each checkpoint; host: $(lscpu | sed -n 's/^Model name: *//p'); options: ${opts[*]-}"
"$here/scripts/cluster.sh" up "$config" --fresh "${opts[@]+"${opts[@]}"}" >"$out/up.log" 2>&1 ||
  die "the cluster did not start: $(tail -5 "$out/up.log")"
"$bin/qrstore-client" --config "$config" "${opts[@]+"${opts[@]}"}" --duration-s "$seconds" --warmup-s "$warmup" \
  --client.progress_interval_ms=100 --json >"$out/client.json" 2>"$out/client.err" || true
"$here/scripts/cluster.sh" down "$config" >"$out/down.log" 2>&1 || echo "checkpoint-dip: down was not clean (see $out/down.log)" >&2

python3 - "$out" "$QRSTORE_RUN_DIR/$name" "$around" <<'EOF'
import glob, os, re, sys
out, run, A = sys.argv[1], sys.argv[2], float(sys.argv[3])

def secs(hms):
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)

series, measure_from = [], None
for line in open(os.path.join(out, "client.err")):
    m = re.match(r"(\d\d:\d\d:\d\d\.\d+) I \[client\] (.*)", line)
    if not m:
        continue
    t, rest = secs(m.group(1)), m.group(2)
    if rest.startswith("warm-up done"):
        measure_from = t
    c = re.match(r"t=\S+ committed=(\d+) ", rest)
    if c:
        series.append((t, int(c.group(1))))
if len(series) < 20 or measure_from is None:
    sys.exit("checkpoint-dip: the client printed no usable progress (see %s/client.err)" % out)
# A run across midnight: times after the first that are smaller belong to the next day.
t0 = series[0][0]
series = [(t + 86400 if t < t0 - 43200 else t, c) for t, c in series]
measure_to = series[-1][0]

def committed_at(t):
    for (ta, ca), (tb, cb) in zip(series, series[1:]):
        if ta <= t <= tb:
            return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else ca
    return None

events = []
pat = re.compile(r"(\d\d:\d\d:\d\d\.\d+) I \[server\] \[(\S+) (\w+)\] checkpoint of batch (\d+): \S+ "
                 r"\(([\d.]+) MB, copy ([\d.]+) ms, written in ([\d.]+) s")
for path in sorted(glob.glob(os.path.join(run, "*.log"))):
    for line in open(path):
        m = pat.match(line)
        if not m:
            continue
        end = secs(m.group(1))
        end = end + 86400 if end < t0 - 43200 else end
        start = end - float(m.group(7)) - float(m.group(6)) / 1000
        events.append(dict(node=m.group(2), role=m.group(3), batch=int(m.group(4)), mb=float(m.group(5)),
                           copy_ms=float(m.group(6)), start=start, end=end))
events.sort(key=lambda e: e["start"])
rows, kept = [], {"leader": [], "follower": []}
for e in events:
    a, b = e["start"], e["end"]
    why = ""
    if a - A < measure_from or b + A > measure_to:
        why = "outside the measured window"
    elif any(o is not e and o["start"] < b + A and o["end"] > a - A for o in events):
        why = "another checkpoint within %g s" % A
    ratio = None
    if not why:
        ca, cb = committed_at(a), committed_at(b)
        around = (ca - committed_at(a - A) + committed_at(b + A) - cb) / (2 * A)
        inside = (cb - ca) / (b - a)
        ratio = inside / around if around > 0 else None
        if ratio is not None:
            kept.setdefault(e["role"], []).append(ratio)
    rows.append((e, ratio, why))
with open(os.path.join(out, "events.csv"), "w") as f:
    f.write("node,role,batch,mb,copy_ms,window_s,ratio,left_out\n")
    for e, r, why in rows:
        f.write("%s,%s,%d,%.1f,%.1f,%.2f,%s,%s\n" % (e["node"], e["role"], e["batch"], e["mb"], e["copy_ms"],
                                                    e["end"] - e["start"], "" if r is None else "%.3f" % r, why))
        print("checkpoint-dip: %s (%s) batch %d, %.1f MB, copy %.0f ms, window %.2f s: %s" % (
            e["node"], e["role"], e["batch"], e["mb"], e["copy_ms"], e["end"] - e["start"],
            "inside/around %.3f" % r if r is not None else "left out (%s)" % why))
def mean(v):
    return sum(v) / len(v) if v else float("nan")
every = kept["leader"] + kept["follower"]
run_tps = (series[-1][1] - committed_at(measure_from)) / (measure_to - measure_from)
summary = ("checkpoint-dip: %d checkpoints measured (%d left out): mean inside/around %.3f "
           "(leader's %d: %.3f; followers' %d: %.3f); the run's throughput %.0f txn/s" % (
               len(every), len(rows) - len(every), mean(every), len(kept["leader"]), mean(kept["leader"]),
               len(kept["follower"]), mean(kept["follower"]), run_tps))
print(summary)
open(os.path.join(out, "summary.txt"), "w").write(summary + "\n")
sys.exit(0 if every else 1)
EOF
