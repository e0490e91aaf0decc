#!/usr/bin/env bash
# cluster-bench.sh: the replicated cluster's benchmark (docs/benchmarks.md). For each workload
# row it brings up a cluster on this machine, runs qrstore-client with a warm-up and a measured
# window, records throughput, latency and every process's CPU per committed transaction (the
# client's server_cpu_s / committed), and brings the cluster down; it also runs qrstore-bench
# in-process on the same workload right before the cluster-none row, for the client-in-its-own-
# process comparison. Writes OUT/results.csv and OUT/results.md (one table row per run with the
# exact commands).
#
#   scripts/cluster-bench.sh [--out DIR] [--seconds S] [--warmup S] [--rows all|quick|overhead|row|rowdeps|rowsweep] [--repeat N]
#                            [--workloads star:0,star:0.99,paper:0,paper:0.99]   (overhead rows only)
#                            [--target-tps T]   (every client run paced at T txn/s: qrstore-client --target-tps)
#                            [--outstanding K]  (every client run: qrstore-client --outstanding K, txns in flight per connection)
#                            [--pin-leader]     (overhead rows only: the leader alone on CPU 0, the rest on the others)
#
# Rows: STAR's YCSB (10 ops, 20% writes, 200K records) and the paper's (16 ops, 50% writes, 1M
# records), Zipf theta 0 and 0.99, on cluster-none, raft rf = 1 and 2, zookeeper rf = 2; and on
# STAR's workload at theta 0: speculative vs sync, Snappy on and off. `quick` runs STAR theta 0
# only. `overhead` runs N (--repeat) back-to-back pairs of cluster-none and raft rf = 2
# (speculative; STAR theta 0 unless --workloads lists others) and prints each pair's ratio of the leader's CPU per committed
# transaction, their median and the ratio of the sums: single runs here vary by +-15%, so only
# interleaved pairs say anything about the leader's replication overhead. With --target-tps both
# configs of a pair run at the same offered load (below both their maxima), so the comparison is
# not skewed by a leader's CPU per txn rising as its load falls (threads that sleep and wake more
# per txn); the summary flags runs that fell more than 3% short of T. With --pin-leader the
# leader runs alone on CPU 0 (taskset) and the followers and the client on the other CPUs, in
# both configs: what the leader would see on a host of its own (needs 2 CPUs or more). The
# summary prints how many cores each leader kept busy: a pair compares leaders at full load
# only when both are near 1.0 (give the client a larger --outstanding window when the raft
# run is short of it). `row` runs N pairs of
# the partitioned row configs/cluster-2x1-none.yaml (STAR's YCSB, 200K records per partition) at
# 0% and 10% multi-partition txns (ycsb.mp_ratio), and prints each pair's throughput ratio and
# the medians. `rowdeps` runs N pairs on the same row at 10% multi-partition txns, without and
# with 20% dependent writes (ycsb.dep_ratio = 0.2; about one in ten crosses partitions), the same
# way. `rowsweep` runs the paper's default on partitioned rows (16 ops, 50% writes, 1M
# records over 2 partitions, batches of 20K): multi-partition ratio 0 to 1 without replicas, and
# rf = 0, 1, 2 (raft; speculative and sync) at 50% multi-partition, then plots both
# (scripts/plot-rows.py: OUT/row-mp.png, OUT/row-rf.png; needs python3-matplotlib). Everything runs on
# 127.0.0.1; nothing else should run meanwhile (all processes share this machine's cores).
# Programs: build/bin (build first, Release).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
out="/tmp/qrstore-cluster-bench"
seconds=10
warmup=2
rows=all
repeat=1
workloads=star:0
target_tps=""
outstanding=""
pin_leader=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --workloads) workloads="$2"; shift 2 ;;
    --target-tps) target_tps="$2"; shift 2 ;;
    --outstanding) outstanding="$2"; shift 2 ;;
    --pin-leader) pin_leader=1; shift ;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster-bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$rows" =~ ^(all|quick|overhead|row|rowdeps|rowsweep)$ ]] || { echo "cluster-bench.sh: --rows must be all, quick, overhead, row, rowdeps or rowsweep" >&2; exit 2; }
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || { echo "cluster-bench.sh: --repeat must be a positive integer" >&2; exit 2; }
[[ -z "$target_tps" || "$target_tps" =~ ^[1-9][0-9]*$ ]] || { echo "cluster-bench.sh: --target-tps must be a positive integer (txn/s)" >&2; exit 2; }
[[ -z "$outstanding" || "$outstanding" =~ ^[1-9][0-9]*$ ]] || { echo "cluster-bench.sh: --outstanding must be a positive integer (txns per connection)" >&2; exit 2; }
if ((pin_leader)); then
  [[ "$rows" == overhead ]] || { echo "cluster-bench.sh: --pin-leader is for --rows overhead only" >&2; exit 2; }
  (($(nproc) >= 2)) || { echo "cluster-bench.sh: --pin-leader needs 2 CPUs or more (nproc: $(nproc))" >&2; exit 2; }
  command -v taskset >/dev/null || { echo "cluster-bench.sh: --pin-leader needs taskset (util-linux)" >&2; exit 1; }
fi
others="1-$(($(nproc) - 1))"  # the CPUs of everything but a pinned leader
pace=()  # the client's extra flags
[[ -n "$target_tps" ]] && pace+=(--target-tps "$target_tps")
[[ -n "$outstanding" ]] && pace+=(--outstanding "$outstanding")
bin="$root/build/bin"
for p in qrstore-server qrstore-client qrstore-bench; do
  [[ -x "$bin/$p" ]] || { echo "cluster-bench.sh: no $bin/$p: build first" >&2; exit 1; }
done
mkdir -p "$out"
export QRSTORE_RUN_DIR="$out/run"
csv="$out/results.csv"
md="$out/results.md"
echo "workload,theta,config,mode,compression,txn_per_s,ops_per_s,p50_ms,p99_ms,committed,aborted,replicas_agree,digest_mismatches,cpu_us_per_txn,steal_s,command" >"$csv"
{
  echo "| workload | theta | config | mode | compression | committed txn/s | p50 ms | p99 ms | CPU us per committed txn (per process) | replicas agree | host steal s | command |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$md"

star=(--ycsb.records=200000 --engine.key_space=200000 --ycsb.ops_per_txn=10 --ycsb.write_ratio=0.2)
paper=(--ycsb.records=1000000 --engine.key_space=1000000 --ycsb.ops_per_txn=16 --ycsb.write_ratio=0.5)
# STAR's YCSB over a row of 2 partitions: 200K records per partition.
star_row=(--ycsb.records=400000 --engine.key_space=400000 --ycsb.ops_per_txn=10 --ycsb.write_ratio=0.2)
star_row_dep=("${star_row[@]}" --ycsb.dep_ratio=0.2)
# The paper's default (Table 1) over a row of 2 partitions.
paper_row=(--ycsb.records=1000000 --engine.key_space=1000000 --ycsb.ops_per_txn=16 --ycsb.write_ratio=0.5
           --batch.txns=20000)

# The machine's steal time so far (clock ticks, all CPUs: /proc/stat's 8th cpu field): time the
# host ran something else while a vCPU wanted to run. Runs on a shared host vary in CPU per txn;
# each row says how much steal its client run saw, so a slow run can be told from a slow change.
steal_ticks() { awk '/^cpu /{print $9}' /proc/stat; }

# pin_nodes CONFIG: every thread of the config's leader (row 0) onto CPU 0, every other node's
# onto the other CPUs: the node list from the server (`--list-nodes`: name host client_port
# peer_port partition row), the pids from the files `cluster.sh up` wrote.
pin_nodes() {
  local cfg="$1" dir n host cport pport part row
  dir="$QRSTORE_RUN_DIR/$("$bin/qrstore-server" --config "$cfg" --get cluster.name)"
  while read -r n host cport pport part row; do
    taskset -a -p -c "$([[ "$row" == 0 ]] && echo 0 || echo "$others")" "$(cat "$dir/$n.pid")" >/dev/null
  done < <("$bin/qrstore-server" --config "$cfg" --list-nodes)
}

# run_cluster WORKLOAD THETA CONFIG MODE COMPRESSION [MP_RATIO]
run_cluster() {
  local wl="$1" theta="$2" cfg="$3" mode="$4" comp="$5" mp="${6:-}"
  local -a w
  case "$wl" in
    star) w=("${star[@]}") ;;
    star_row) w=("${star_row[@]}") ;;
    star_row_dep) w=("${star_row_dep[@]}") ;;
    paper_row) w=("${paper_row[@]}") ;;
    *) w=("${paper[@]}") ;;
  esac
  local ov=("${w[@]}" "--ycsb.theta=$theta" "--replication.mode=$mode" "--replication.compression=$comp")
  [[ -n "$mp" ]] && ov+=("--ycsb.mp_ratio=$mp")
  local tag="$wl-$theta-$(basename "$cfg" .yaml)${mp:+-mp$mp}-$mode-$comp"
  scripts/cluster.sh up "$cfg" --fresh "${ov[@]}" >"$out/$tag.up" 2>&1 || { cat "$out/$tag.up" >&2; return 1; }
  local -a pin=()
  if ((pin_leader)); then
    pin_nodes "$cfg"
    pin=(taskset -c "$others")
  fi
  local cmd="${pin[*]}${pin:+ }build/bin/qrstore-client --config $cfg ${ov[*]} --duration-s $seconds --warmup-s $warmup ${pace[*]} --json"
  local ok=1 steal0 steal1
  steal0=$(steal_ticks)
  "${pin[@]}" "$bin/qrstore-client" --config "$cfg" "${ov[@]}" --duration-s "$seconds" --warmup-s "$warmup" "${pace[@]}" --json \
    >"$out/$tag.json" 2>"$out/$tag.err" || ok=0
  steal1=$(steal_ticks)
  scripts/cluster.sh down "$cfg" >"$out/$tag.down" 2>&1 || ok=0
  ((ok)) || echo "cluster-bench.sh: $tag: the run or its stop reported an error (see $out/$tag.*)" >&2
  python3 - "$out/$tag.json" "$wl" "$theta" "$(basename "$cfg" .yaml)${mp:+ mp=$mp}" "$mode" "$comp" "$cmd" "$csv" "$md" \
    "$(( (steal1 - steal0) * 100 / $(getconf CLK_TCK) ))" <<'PY'
import json, sys
path, wl, theta, cfg, mode, comp, cmd, csv, md, steal_cs = sys.argv[1:]
steal = int(steal_cs) / 100
lines = [l for l in open(path).read().splitlines() if l.strip().startswith("{")]
if not lines:
    print(f"{wl} {theta} {cfg} {mode} {comp}: no result", file=sys.stderr); sys.exit(0)
j = json.loads(lines[-1])
cpu = j["cpu_us_per_txn"]
cpu_s = " ".join(f"{k}={v:.3f}" for k, v in cpu.items())
open(csv, "a").write(",".join(str(x) for x in [wl, theta, cfg, mode, comp, round(j["throughput_tps"]), round(j["ops_per_s"]),
    j["p50_ms"], j["p99_ms"], j["committed"], j["aborted"], j["replicas_agree"], j["digest_mismatches"], cpu_s.replace(" ", ";"), f"{steal:.2f}", cmd]) + "\n")
open(md, "a").write(f"| {wl} | {theta} | {cfg} | {mode} | {comp} | {j['throughput_tps']:,.0f} | {j['p50_ms']:.1f} | {j['p99_ms']:.1f} | {cpu_s} | {str(j['replicas_agree']).lower()} | {steal:.2f} | `{cmd}` |\n")
print(f"{wl} theta={theta} {cfg} {mode} {comp}: {j['throughput_tps']:,.0f} txn/s p50 {j['p50_ms']:.1f} ms cpu us/txn {cpu_s} agree={j['replicas_agree']} host steal {steal:.2f} s")
PY
}

run_bench() {
  local wl="$1" theta="$2"
  local -a w
  if [[ "$wl" == star ]]; then w=("${star[@]}"); else w=("${paper[@]}"); fi
  local cmd="build/bin/qrstore-bench --config configs/single-node.yaml ${w[*]} --ycsb.theta=$theta --duration-s $seconds --json"
  "$bin/qrstore-bench" --config configs/single-node.yaml "${w[@]}" "--ycsb.theta=$theta" --duration-s "$seconds" --json \
    >"$out/bench-$wl-$theta.json" 2>/dev/null
  python3 - "$out/bench-$wl-$theta.json" "$wl" "$theta" "$cmd" "$csv" "$md" <<'PY'
import json, sys
path, wl, theta, cmd, csv, md = sys.argv[1:]
j = json.loads(open(path).read().splitlines()[-1])
open(csv, "a").write(",".join(str(x) for x in [wl, theta, "in-process qrstore-bench", "-", "-", round(j["throughput_tps"]),
    round(j["ops_per_s"]), j["p50_ms"], j["p99_ms"], j["committed"], j["aborted"], "", "", "", "", cmd]) + "\n")
open(md, "a").write(f"| {wl} | {theta} | in-process qrstore-bench | - | - | {j['throughput_tps']:,.0f} | {j['p50_ms']:.1f} | {j['p99_ms']:.1f} | (one process, 2 cores) | - | - | `{cmd}` |\n")
print(f"{wl} theta={theta} qrstore-bench in-process: {j['throughput_tps']:,.0f} txn/s")
PY
}

# pairs TITLE A_WORKLOAD A_MP A_NAME B_WORKLOAD B_MP B_NAME: `repeat` interleaved runs of A and B
# on configs/cluster-2x1-none.yaml, then each pair's throughput ratio B / A and the medians.
pairs() {
  local title="$1" a_wl="$2" a_mp="$3" a_name="$4" b_wl="$5" b_mp="$6" b_name="$7"
  for ((r = 0; r < repeat; r++)); do
    run_cluster "$a_wl" 0 configs/cluster-2x1-none.yaml speculative none "$a_mp"
    run_cluster "$b_wl" 0 configs/cluster-2x1-none.yaml speculative none "$b_mp"
  done
  python3 - "$csv" "$title" "$b_wl" "$b_mp" "$a_name" "$b_name" <<'PY'
import csv, statistics, sys
path, title, b_wl, b_mp, a_name, b_name = sys.argv[1:]
a, b = [], []
for row in csv.DictReader(open(path)):
    is_b = row["workload"] == b_wl and row["config"].endswith(f"mp={b_mp}")
    (b if is_b else a).append(float(row["txn_per_s"]))
pairs = list(zip(a, b))
if pairs:
    print(f"row of 2 partitions, {title}, committed txn/s {a_name} / {b_name}, per pair: " +
          " ".join(f"{x:,.0f}/{y:,.0f} ({y / x:.3f})" for x, y in pairs))
    print(f"medians: {a_name} {statistics.median(a):,.0f}, {b_name} {statistics.median(b):,.0f}; "
          f"median ratio {statistics.median(y / x for x, y in pairs):.3f} ({len(pairs)} pairs)")
PY
  echo "cluster-bench.sh: results in $csv and $md"
}

if [[ "$rows" == row ]]; then
  pairs "by multi-partition share" star_row 0 "0%" star_row 0.1 "10%"
  exit 0
fi
if [[ "$rows" == rowdeps ]]; then
  pairs "10% multi-partition" star_row 0.1 "without dependent writes" star_row_dep 0.1 "with 20% dependent writes"
  exit 0
fi

if [[ "$rows" == rowsweep ]]; then
  for ((r = 0; r < repeat; r++)); do
    for mp in 0 0.1 0.25 0.5 0.75 1; do
      run_cluster paper_row 0 configs/cluster-2x1-none.yaml speculative none "$mp"
    done
    for cfg in configs/cluster-2x2-raft.yaml configs/cluster-2x3-raft.yaml; do
      for mode in speculative sync; do run_cluster paper_row 0 "$cfg" "$mode" none 0.5; done
    done
  done
  if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
    /usr/bin/python3 scripts/plot-rows.py "$csv" "$out"
  else
    echo "cluster-bench.sh: no matplotlib for /usr/bin/python3 (apt-get install python3-matplotlib): no plots" >&2
  fi
  echo "cluster-bench.sh: results in $csv and $md"
  exit 0
fi

if [[ "$rows" == overhead ]]; then
  IFS=, read -r -a wls <<<"$workloads"
  for wt in "${wls[@]}"; do
    [[ "$wt" =~ ^(star|paper):(0|0\.99)$ ]] || { echo "cluster-bench.sh: --workloads takes star|paper:0|0.99, comma-separated (got $wt)" >&2; exit 2; }
  done
  for wt in "${wls[@]}"; do
    for ((r = 0; r < repeat; r++)); do
      run_cluster "${wt%%:*}" "${wt#*:}" configs/cluster-none.yaml speculative none
      run_cluster "${wt%%:*}" "${wt#*:}" configs/cluster-raft.yaml speculative none
    done
  done
  python3 - "$csv" "$target_tps" <<'PY'
import collections, csv, statistics, sys
target = float(sys.argv[2]) if sys.argv[2] else 0
tps = collections.defaultdict(lambda: ([], []))
runs = collections.defaultdict(lambda: ([], []))
steal = collections.defaultdict(lambda: ([], []))
cores = collections.defaultdict(lambda: ([], []))
for row in csv.DictReader(open(sys.argv[1])):
    cpu = dict(kv.split("=") for kv in row["cpu_us_per_txn"].split(";"))
    none, raft = runs[(row["workload"], row["theta"])]
    (none if row["config"] == "cluster-none" else raft).append(float(cpu["n0"]))
    s_none, s_raft = steal[(row["workload"], row["theta"])]
    (s_none if row["config"] == "cluster-none" else s_raft).append(row["steal_s"])
    t_none, t_raft = tps[(row["workload"], row["theta"])]
    (t_none if row["config"] == "cluster-none" else t_raft).append(float(row["txn_per_s"]))
    c_none, c_raft = cores[(row["workload"], row["theta"])]
    (c_none if row["config"] == "cluster-none" else c_raft).append(float(cpu["n0"]) * float(row["txn_per_s"]) / 1e6)
for (wl, theta), (none, raft) in runs.items():
    s_none, s_raft = steal[(wl, theta)]
    print(f"{wl} theta {theta}: host steal s per pair (none/raft): " + " ".join(f"{a}/{b}" for a, b in zip(s_none, s_raft)))
    pairs = list(zip(none, raft))
    if not pairs:
        print(f"{wl} theta {theta}: no complete pair")
        continue
    ratios = [r / n for n, r in pairs]
    t_none, t_raft = tps[(wl, theta)]
    print(f"{wl} theta {theta}: committed txn/s per pair (none/raft): " + " ".join(f"{a:,.0f}/{b:,.0f}" for a, b in zip(t_none, t_raft)))
    c_none, c_raft = cores[(wl, theta)]
    print(f"{wl} theta {theta}: cores the leader kept busy per pair (none/raft): " + " ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(c_none, c_raft)))
    if target:
        short = [i + 1 for i, (a, b) in enumerate(zip(t_none, t_raft)) if min(a, b) < 0.97 * target]
        print(f"{wl} theta {theta}: paced at {target:,.0f} txn/s; " +
              (f"pairs {short} fell more than 3% short of it (not at equal load)" if short else "every run reached it"))
    print(f"{wl} theta {theta}: leader CPU us/txn, raft rf = 2 / cluster-none, per pair: " + " ".join(f"{r:.3f}" for r in ratios))
    print(f"{wl} theta {theta}: median ratio {statistics.median(ratios):.3f}; ratio of sums"
          f" {sum(r for _, r in pairs) / sum(n for n, _ in pairs):.3f} ({len(pairs)} pairs; none"
          f" {statistics.median(none):.3f} us, raft {statistics.median(raft):.3f} us, medians)")
PY
  echo "cluster-bench.sh: results in $csv and $md"
  exit 0
fi

for ((r = 0; r < repeat; r++)); do
  for wl in star paper; do
    [[ "$rows" == quick && "$wl" != star ]] && continue
    for theta in 0 0.99; do
      [[ "$rows" == quick && "$theta" != 0 ]] && continue
      run_bench "$wl" "$theta"
      run_cluster "$wl" "$theta" configs/cluster-none.yaml speculative none
      run_cluster "$wl" "$theta" configs/cluster-raft-rf1.yaml speculative none
      run_cluster "$wl" "$theta" configs/cluster-raft.yaml speculative none
      run_cluster "$wl" "$theta" configs/cluster-zookeeper.yaml speculative none
      if [[ "$wl" == star && "$theta" == 0 ]]; then
        run_cluster "$wl" "$theta" configs/cluster-raft-rf1.yaml sync none
        run_cluster "$wl" "$theta" configs/cluster-raft.yaml sync none
        run_cluster "$wl" "$theta" configs/cluster-raft.yaml speculative snappy
        run_cluster "$wl" "$theta" configs/cluster-zookeeper.yaml speculative snappy
      fi
    done
  done
done
echo "cluster-bench.sh: results in $csv and $md"
