#!/usr/bin/env bash
# checkpoint-dip.sh: the client's throughput while a checkpoint is written (docs/benchmarks.md),
# against the seconds around it. Brings up a fresh cluster of CONFIG (checkpoints on:
# server.checkpoint_dir), runs qrstore-client at full load with a progress line every 100 ms,
# stops the cluster, then takes every checkpoint the nodes logged during the measured window
# ("checkpoint of batch B: ... copy C ms, written in W s": the window is the W + C before the
# line) and compares the committed txn/s inside it with the A s before and the A s after it
# (--around, default 1). Checkpoints whose windows overlap (unstaggered members write at one
# batch) count as one event, their windows joined; events whose surroundings hold another are
# left out. Prints each event and the mean ratio (inside / around) for the leader's checkpoints
# alone, the followers' alone and all.
#
#   scripts/checkpoint-dip.sh [CONFIG] [--seconds S] [--warmup S] [--around A] [--out DIR]
#                             [--control EVERY:WIDTH] [--from DIR] [--keep-data] [--key=value ...]
#
# CONFIG: default configs/cluster-raft.yaml. --seconds: the measured window (default 60),
# --warmup: before it (default 3). --control EVERY:WIDTH: the measurement's own floor: the run
# takes no checkpoints (server.checkpoint_dir empty) and the same analysis runs on windows of
# WIDTH s placed every EVERY s (e.g. 4:0.5); a ratio away from 1 there is noise or a pattern of
# the workload, not a checkpoint's cost. --from DIR: analyse DIR (an earlier run's --out) again,
# running nothing. Extra --key=value arguments go to the servers and the client (e.g.
# --server.checkpoint_every_batches=100 for more events). Nothing else should run meanwhile.
# Programs: build/bin (Release), or QRSTORE_BIN. Writes OUT (default
# run/checkpoint-dip-<time>): client.err, the nodes' logs (run/), events.csv, summary.txt; the
# nodes' data (checkpoints and raft logs: about 1.5 GB a run of the default config) is removed
# once the cluster is down, unless --keep-data.
# Exit status: 0 measured; 1 the run did not work or held no checkpoint to measure; 2 bad input.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/lib.sh"  # host_model
bin="${QRSTORE_BIN:-$here/build/bin}"
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "checkpoint-dip: $*" >&2; exit 2; }
die() { echo "checkpoint-dip: $*" >&2; exit 1; }

config="$here/configs/cluster-raft.yaml" seconds=60 warmup=3 around=1 out="" extra=() control="" from="" keep_data=0
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a number}"; shift 2 ;;
    --around) around="${2:?--around needs seconds}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --control) control="${2:?--control needs EVERY:WIDTH}"; shift 2 ;;
    --from) from="${2:?--from needs a folder}"; shift 2 ;;
    --keep-data) keep_data=1; shift ;;
    --*=*) extra+=("$1"); shift ;;
    -*) bad "unknown flag $1 (see --help)" ;;
    *) config="$1"; shift ;;
  esac
done
[[ "$around" =~ ^[0-9]+(\.[0-9]+)?$ ]] && [[ "$around" != 0 ]] || bad "--around: seconds > 0 (got '$around')"
num='^[0-9]+(\.[0-9]+)?$'
if [[ -n "$control" ]]; then
  [[ "$control" == *:* && "${control%%:*}" =~ $num && "${control#*:}" =~ $num ]] ||
    bad "--control: EVERY:WIDTH in seconds, e.g. 4:0.5 (got '$control')"
  python3 -c 'import sys; e, w = map(float, sys.argv[1].split(":")); sys.exit(0 if 0 < w < e else 1)' "$control" ||
    bad "--control: needs 0 < WIDTH < EVERY (got '$control')"
fi
if [[ -n "$from" ]]; then
  [[ -f "$from/client.err" && -d "$from/run" ]] || bad "--from $from: not an earlier run's folder (no client.err and run/)"
  out="$from"
  run_dir="$(find "$from/run" -mindepth 1 -maxdepth 1 -type d | head -1)"
  [[ -f "$out/control" ]] && control="$(cat "$out/control")"
else
  [[ -f "$config" ]] || bad "no config file '$config'"
  [[ "$seconds" =~ ^[1-9][0-9]*$ && "$warmup" =~ ^[0-9]+$ ]] || bad "--seconds/--warmup: whole seconds"
  [[ -x "$bin/qrstore-server" && -x "$bin/qrstore-client" ]] || bad "no programs in $bin (build first)"
  if [[ -n "$control" ]]; then
    extra+=("--server.checkpoint_dir=")
  fi
  get() { "$bin/qrstore-server" --config "$config" "${extra[@]+"${extra[@]}"}" --get "$1"; }
  [[ -n "$control" || -n "$(get server.checkpoint_dir)" ]] || bad "$config: no server.checkpoint_dir (nothing to measure)"
  name="$(get cluster.name)"
  out="${out:-$here/run/checkpoint-dip-$(date +%Y%m%d-%H%M%S)}"
  mkdir -p "$out"
  export QRSTORE_RUN_DIR="$out/run"
  rm -rf "$QRSTORE_RUN_DIR"
  run_dir="$QRSTORE_RUN_DIR/$name"
  opts=("${extra[@]+"${extra[@]}"}")
  if [[ -n "$control" ]]; then echo "$control" >"$out/control"; else rm -f "$out/control"; fi

  echo "checkpoint-dip: $config, ${seconds} s measured after ${warmup} s, ${around} s around each checkpoint${control:+ (control: no checkpoints, windows $control)}; host: $(host_model); options: ${opts[*]-}"
  "$here/scripts/cluster.sh" up "$config" --fresh "${opts[@]+"${opts[@]}"}" >"$out/up.log" 2>&1 ||
    die "the cluster did not start: $(tail -5 "$out/up.log")"
  "$bin/qrstore-client" --config "$config" "${opts[@]+"${opts[@]}"}" --duration-s "$seconds" --warmup-s "$warmup" \
    --client.progress_interval_ms=100 --json >"$out/client.json" 2>"$out/client.err" || true
  "$here/scripts/cluster.sh" down "$config" >"$out/down.log" 2>&1 || echo "checkpoint-dip: down was not clean (see $out/down.log)" >&2
  ((keep_data)) || rm -rf "$run_dir/data"
fi

python3 - "$out" "$run_dir" "$around" "$control" <<'EOF'
import glob, os, re, statistics, sys
out, run, A, control = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]

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
if control:  # the floor: windows at a fixed pace, no checkpoint in any of them
    every_s, width = map(float, control.split(":"))
    t = measure_from + A
    while t + width + A <= measure_to:
        events.append(dict(node="control", role="control", batch=0, mb=0.0, copy_ms=0.0, start=t, end=t + width))
        t += every_s
events.sort(key=lambda e: e["start"])
# Overlapping windows (members checkpointing at one batch) are one event, their windows joined.
merged = []
for e in events:
    if merged and e["start"] < merged[-1]["end"]:
        m = merged[-1]
        m["end"] = max(m["end"], e["end"])
        m["node"] += "+" + e["node"]
        m["mb"] += e["mb"]
        m["copy_ms"] = max(m["copy_ms"], e["copy_ms"])
        m["role"] = "together"  # several members' checkpoints (control windows never overlap)
    else:
        merged.append(dict(e))
events = merged
rows, kept = [], {"leader": [], "follower": [], "together": [], "control": []}
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
            kept[e["role"]].append(ratio)
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
every = [r for v in kept.values() for r in v]
run_tps = (series[-1][1] - committed_at(measure_from)) / (measure_to - measure_from)
def median(v):
    return statistics.median(v) if v else float("nan")
what = "control windows %s (no checkpoints)" % control if control else "checkpoints"
summary = ("checkpoint-dip: %d %s measured (%d left out): mean inside/around %.3f, median %.3f "
           "(leader's alone %d: %.3f; followers' alone %d: %.3f; together %d: %.3f); the run's throughput %.0f txn/s" % (
               len(every), what, len(rows) - len(every), mean(every), median(every), len(kept["leader"]),
               mean(kept["leader"]), len(kept["follower"]), mean(kept["follower"]), len(kept["together"]),
               mean(kept["together"]), run_tps))
print(summary)
open(os.path.join(out, "summary.txt"), "w").write(summary + "\n")
sys.exit(0 if every else 1)
EOF
