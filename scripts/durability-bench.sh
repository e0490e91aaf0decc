#!/usr/bin/env bash
# durability-bench.sh: what durability costs (docs/benchmarks.md). Interleaved pairs on one
# config: as shipped (configs/cluster-raft.yaml: the raft disk log with fsync per batch, and
# checkpoints every server.checkpoint_every_batches) against the same cluster without either
# (the memory log, no checkpoint folder), each run a fresh cluster (`cluster.sh up --fresh`), a
# warm-up and a measured window of qrstore-client, then `down`. Alternating which goes first.
# Prints each pair's committed txn/s, their ratio (durable / memory), the median ratio and the
# ratio of the sums, and the exact commands; writes OUT/results.csv.
#
#   scripts/durability-bench.sh [CONFIG] [--workload star|paper] [--pairs N] [--seconds S]
#                               [--warmup S] [--log-only] [--against 'ARGS'] [--out DIR] [--key=value ...]
#
# --log-only: both without checkpoints: the disk log's cost alone.
# --against 'ARGS': the second of each pair is the durable config with ARGS (space-separated
# --key=value) instead of the memory log without checkpoints, e.g. --against
# '--server.checkpoint_stagger=false' to measure one setting of the durable config against another.
# CONFIG: default configs/cluster-raft.yaml (it must be the durable one: log disk and a
# checkpoint folder). Workloads: star = STAR's YCSB (10 ops, 20% writes, 200K records), paper =
# the paper's (16 ops, 50% writes, 1M records: the config's own), theta 0. Nothing else should run
# meanwhile: every process shares this machine's cores. Programs: build/bin (Release).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/lib.sh"  # host_model
bin="${QRSTORE_BIN:-$here/build/bin}"
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "durability-bench: $*" >&2; exit 2; }

config="$here/configs/cluster-raft.yaml" workload=paper pairs=4 seconds=10 warmup=2 out="" extra=() log_only=0
against="" against_set=0
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --workload) workload="${2:?--workload needs star or paper}"; shift 2 ;;
    --pairs) pairs="${2:?--pairs needs a number}"; shift 2 ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a number}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --log-only) log_only=1; shift ;;
    --against) against="${2?--against needs the options (may be '')}"; against_set=1; shift 2 ;;
    --*=*) extra+=("$1"); shift ;;
    -*) bad "unknown flag $1 (see --help)" ;;
    *) config="$1"; shift ;;
  esac
done
[[ -f "$config" ]] || bad "no config file '$config'"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || bad "--pairs: a positive integer (got '$pairs')"
[[ "$seconds" =~ ^[1-9][0-9]*$ && "$warmup" =~ ^[0-9]+$ ]] || bad "--seconds/--warmup: whole seconds"
[[ -x "$bin/qrstore-server" && -x "$bin/qrstore-client" ]] || bad "no programs in $bin (build first)"
case "$workload" in
  star) wl=(--ycsb.records=200000 --engine.key_space=200000 --ycsb.ops_per_txn=10 --ycsb.write_ratio=0.2 --ycsb.theta=0) ;;
  paper) wl=(--ycsb.theta=0) ;;
  *) bad "--workload: star or paper (got '$workload')" ;;
esac
[[ "$("$bin/qrstore-server" --config "$config" "${extra[@]+"${extra[@]}"}" --get replication.raft.log)" == disk ]] ||
  bad "$config: replication.raft.log is not disk (the durable config is the one to compare)"
[[ -n "$("$bin/qrstore-server" --config "$config" "${extra[@]+"${extra[@]}"}" --get server.checkpoint_dir)" ]] ||
  bad "$config: no server.checkpoint_dir (the durable config is the one to compare)"
((log_only)) && extra+=(--server.checkpoint_dir=)
out="${out:-$here/run/durability-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
export QRSTORE_RUN_DIR="$out/run"
memory=(--replication.raft.log=memory --server.checkpoint_dir=)
base_name=memory
if ((against_set)); then
  read -r -a memory <<<"$against"
  for a in "${memory[@]+"${memory[@]}"}"; do [[ "$a" == --*=* ]] || bad "--against: --key=value options (got '$a')"; done
  base_name=against
fi

one() {  # one() VARIANT PAIR: prints committed txn/s
  local variant="$1" pair="$2" opts=("${wl[@]}" "${extra[@]+"${extra[@]}"}")
  [[ "$variant" == memory ]] && opts+=("${memory[@]+"${memory[@]}"}")
  "$here/scripts/cluster.sh" up "$config" --fresh "${opts[@]}" >"$out/up-$variant-$pair.out" 2>&1 ||
    { cat "$out/up-$variant-$pair.out" >&2; bad "cluster.sh up failed ($variant, pair $pair)"; }
  "$bin/qrstore-client" --config "$config" "${opts[@]}" --duration-s "$seconds" --warmup-s "$warmup" --json \
    >"$out/client-$variant-$pair.json" 2>"$out/client-$variant-$pair.err" || true
  "$here/scripts/cluster.sh" down "$config" >"$out/down-$variant-$pair.out" 2>&1 || true
  python3 -c "import json,sys; j=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print('%.0f' % j['throughput_tps'])" \
    "$out/client-$variant-$pair.json" 2>/dev/null || echo 0
}

echo "durability-bench: $config, workload $workload, $pairs pairs of ${seconds} s (warm-up ${warmup} s); host: $(host_model)"
echo "durability-bench: durable = as configured; $base_name = ${memory[*]-}; both: ${wl[*]} ${extra[*]-}"
echo "pair,durable_tps,${base_name}_tps,ratio" >"$out/results.csv"
ratios=() sd=0 sm=0
for ((i = 1; i <= pairs; i++)); do
  if ((i % 2)); then d="$(one durable "$i")"; m="$(one memory "$i")"; else m="$(one memory "$i")"; d="$(one durable "$i")"; fi
  ((d > 0 && m > 0)) || bad "pair $i: a run measured nothing (see $out/client-*-$i.err)"
  r="$(python3 -c "import sys; print('%.3f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$d" "$m")"
  ratios+=("$r") sd=$((sd + d)) sm=$((sm + m))
  echo "$i,$d,$m,$r" >>"$out/results.csv"
  echo "durability-bench: pair $i: durable $d txn/s, $base_name $m txn/s, ratio $r"
done
median="$(printf '%s\n' "${ratios[@]}" | sort -n | python3 -c "import sys; v=[float(l) for l in sys.stdin]; n=len(v); print('%.3f' % (v[n//2] if n%2 else (v[n//2-1]+v[n//2])/2))")"
echo "durability-bench: median ratio $median; ratio of the sums $(python3 -c "import sys; print('%.3f' % (int(sys.argv[1]) / int(sys.argv[2])))" "$sd" "$sm") (results: $out/results.csv)"
