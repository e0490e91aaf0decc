#!/usr/bin/env bash
# Usage: scripts/perf-ab.sh BASE [HEAD] [--bench engine-star|engine-paper|cluster] [--config FILE] [--pairs N]
#          [--seconds S] [--out DIR] [--keep] [-- EXTRA ARGS...]
# Builds two commits (Release, each in its own worktree below --out, with the ccache the test
# command uses) and runs interleaved pairs of one benchmark: pair i runs BASE then HEAD when i is
# odd, HEAD then BASE when even, so a drift of the host within the run falls on both alike. It
# prints each pair's throughputs and ratio (HEAD / BASE), the median ratio, the host (lscpu model)
# and the exact command; the last stdout line is one JSON object. HEAD defaults to the working
# tree's HEAD commit. Benchmarks (default engine-star):
#   engine-star   qrstore-bench in-process, STAR's YCSB (200K records, 10 ops, 20% writes, theta 0)
#   engine-paper  qrstore-bench in-process, the paper's workload (1M records, 16 ops, 50% writes)
#   cluster       the main job: configs/cluster-raft.yaml (3 members, durable, sessions) up fresh,
#                 qrstore-client for S seconds after a 2 s warm-up, down; --config FILE runs
#                 another config of the checkout the same way (e.g. configs/cluster-2x3-raft.yaml,
#                 a partitioned row; the file as each commit has it)
# EXTRA ARGS go to qrstore-bench or qrstore-client (e.g. --ycsb.theta=0.9). Exit status: 0 when
# every run succeeded, 1 when one failed, 2 on bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
bench=engine-star
config=configs/cluster-raft.yaml
pairs=5
seconds=15
out=/tmp/qrstore-perf-ab
keep=0
revs=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --bench) bench=${2:?--bench needs a value}; shift 2 ;;
    --pairs) pairs=${2:?--pairs needs a value}; shift 2 ;;
    --config) config=${2:?--config needs a file}; shift 2 ;;
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "perf-ab: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) revs+=("$1"); shift ;;
  esac
done
case "$bench" in engine-star|engine-paper|cluster) ;; *) echo "perf-ab: --bench $bench: engine-star, engine-paper or cluster" >&2; exit 2 ;; esac
[ "$bench" = cluster ] || [ "$config" = configs/cluster-raft.yaml ] || { echo "perf-ab: --config goes with --bench cluster" >&2; exit 2; }
[ -f "$config" ] || { echo "perf-ab: --config $config: no such file in this checkout" >&2; exit 2; }
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || { echo "perf-ab: --pairs $pairs: a positive integer" >&2; exit 2; }
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "perf-ab: --seconds $seconds: a positive integer" >&2; exit 2; }
[ ${#revs[@]} -ge 1 ] && [ ${#revs[@]} -le 2 ] || { echo "perf-ab: give BASE [HEAD] (see --help)" >&2; exit 2; }
[ ${#revs[@]} -eq 2 ] || revs+=(HEAD)
shas=()
for r in "${revs[@]}"; do
  sha=$(git rev-parse --verify --quiet "$r^{commit}") || { echo "perf-ab: $r: not a commit" >&2; exit 2; }
  shas+=("$sha")
done

source "$root/scripts/lib.sh"
use_ccache "$root"  # each build sets CCACHE_BASEDIR to its own worktree
mkdir -p "$out"
host=$(host_model)

# Builds commit $1 into $out/<short>/build; prints the folder.
build() {
  local sha=$1 dir="$out/${1:0:12}"
  if [ ! -d "$dir/.git" ] && [ ! -f "$dir/.git" ]; then
    rm -rf "$dir"
    git worktree add --detach -q "$dir" "$sha" >&2
  fi
  local targets=(qrstore-bench)
  [ "$bench" = cluster ] && targets=(qrstore-server qrstore-client)
  echo "perf-ab: building ${sha:0:12} (Release) in $dir/build" >&2
  (cd "$dir" && CCACHE_BASEDIR="$dir" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
     CCACHE_BASEDIR="$dir" cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" >/dev/null) >&2
  echo "$dir"
}
dirs=()
for sha in "${shas[@]}"; do dirs+=("$(build "$sha")"); done
cleanup() {
  if [ "$keep" = 0 ]; then
    for d in "${dirs[@]}"; do git worktree remove --force "$d" >/dev/null 2>&1 || true; done
  fi
}
trap cleanup EXIT

STAR=(--ycsb.records=200000 --engine.key_space=200000 --ycsb.ops_per_txn=10 --ycsb.write_ratio=0.2 --ycsb.theta=0)
PAPER=(--ycsb.records=1000000 --engine.key_space=1000000 --ycsb.ops_per_txn=16 --ycsb.write_ratio=0.5)
# The command one run runs (in the build's worktree), as printed with the results.
case "$bench" in
  engine-star) cmd="build/bin/qrstore-bench --config configs/single-node.yaml ${STAR[*]} --duration-s $seconds --json" ;;
  engine-paper) cmd="build/bin/qrstore-bench --config configs/single-node.yaml ${PAPER[*]} --duration-s $seconds --json" ;;
  cluster) cmd="scripts/cluster.sh up $config --fresh; build/bin/qrstore-client --config $config --duration-s $seconds --warmup-s 2 --json; scripts/cluster.sh down $config" ;;
esac
[ ${#extra[@]} -eq 0 ] || cmd="$cmd (extra: ${extra[*]})"

# One run of the benchmark with the build in $1; prints its throughput (txn/s).
run_one() {
  local dir=$1 json
  case "$bench" in
    engine-star|engine-paper)
      local w=("${STAR[@]}")
      [ "$bench" = engine-paper ] && w=("${PAPER[@]}")
      json=$(cd "$dir" && build/bin/qrstore-bench --config configs/single-node.yaml "${w[@]}" --duration-s "$seconds" \
               --json "${extra[@]+"${extra[@]}"}" 2>/dev/null | tail -1) || return 1
      ;;
    cluster)
      local cfg=$config run="$out/run-${dir##*/}"
      (cd "$dir" && QRSTORE_RUN_DIR="$run" scripts/cluster.sh up "$cfg" --fresh >/dev/null 2>&1) || {
        (cd "$dir" && QRSTORE_RUN_DIR="$run" scripts/cluster.sh down "$cfg" >/dev/null 2>&1) || true
        return 1
      }
      json=$(cd "$dir" && QRSTORE_RUN_DIR="$run" build/bin/qrstore-client --config "$cfg" --duration-s "$seconds" \
               --warmup-s 2 --json "${extra[@]+"${extra[@]}"}" 2>/dev/null | tail -1) || json=""
      (cd "$dir" && QRSTORE_RUN_DIR="$run" scripts/cluster.sh down "$cfg" >/dev/null 2>&1) || true
      rm -rf "$run"
      [ -n "$json" ] || return 1
      ;;
  esac
  python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["throughput_tps"])' "$json"
}

echo "perf-ab: $bench, $pairs interleaved pair(s) of ${seconds} s, base ${shas[0]:0:12} head ${shas[1]:0:12}, host: $host"
ratios=()
rows=()
for i in $(seq 1 "$pairs"); do
  order=(0 1)
  [ $((i % 2)) -eq 0 ] && order=(1 0)
  declare -A tps=()
  for k in "${order[@]}"; do
    if ! t=$(run_one "${dirs[$k]}"); then
      echo "perf-ab: pair $i: the run of ${shas[$k]:0:12} failed ($cmd)" >&2
      exit 1
    fi
    tps[$k]=$t
  done
  r=$(python3 -c "print('%.4f' % (${tps[1]} / ${tps[0]}))")
  ratios+=("$r")
  rows+=("{\"pair\":$i,\"base_tps\":${tps[0]},\"head_tps\":${tps[1]},\"ratio\":$r}")
  printf 'pair %d (%s first): base %s txn/s, head %s txn/s, head/base %s\n' "$i" \
    "$([ "${order[0]}" = 0 ] && echo base || echo head)" "${tps[0]}" "${tps[1]}" "$r"
  unset tps
done
median=$(python3 -c 'import statistics,sys; print("%.4f" % statistics.median(map(float, sys.argv[1:])))' "${ratios[@]}")
echo "median head/base: $median over $pairs pair(s)"
echo "command: $cmd"
printf '{"bench":"%s","base":"%s","head":"%s","pairs":[%s],"median_ratio":%s,"seconds":%s,"host":"%s","command":"%s"}\n' \
  "$bench" "${shas[0]}" "${shas[1]}" "$(IFS=,; echo "${rows[*]}")" "$median" "$seconds" "$host" "${cmd//\"/\\\"}"
