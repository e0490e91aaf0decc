#!/usr/bin/env bash
# fuzz.sh: builds the fuzz targets (tests/fuzz) with clang, libFuzzer, ASan and UBSan into
# build-fuzz/ and runs one or all of them.
#
#   scripts/fuzz.sh [TARGET ...] [--seconds S] [--jobs J] [--parallel N] [--seed K]
#   scripts/fuzz.sh --configure   only configures build-fuzz/ (scripts/test.sh's ASan + UBSan
#                                 stage builds the unit and integration tests there too: one
#                                 clang build of the libraries serves both)
#
# Each target starts from its checked-in seed corpus (tests/fuzz/corpus/TARGET) plus what earlier
# runs found (build-fuzz/corpus/TARGET, kept between runs), with the dictionary
# tests/fuzz/dict/TARGET.dict when there is one, and runs S seconds (default 60), N targets at
# a time (default 1; each libFuzzer process is one thread, so N = cores fills the machine). A
# crash, a contract violation or a hang (a slice that does not finish) leaves a reproducer in
# build-fuzz/crashes/TARGET/ and this script prints the command that replays it; copy the file
# to tests/fuzz/regressions/TARGET/ so ctest replays it forever. Exit status 1 if any target
# failed. Needs clang and libclang-rt-14-dev (scripts/setup-deps.sh installs them).
# --jobs J: compile jobs for the build (default: cores).
# --seed K: libFuzzer's -seed (default: a new one each run, for campaigns). scripts/test.sh's smoke
# passes a fixed one so a given commit explores the same inputs on every run: its result does not
# depend on luck (on a slower machine it explores a prefix of the same sequence).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
seconds=60
jobs=$(nproc 2>/dev/null || echo 2)
parallel=1
seed=
configure_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --configure) configure_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(fuzz_client_messages fuzz_slice fuzz_input_slice fuzz_write_slice fuzz_raft_messages fuzz_payload_frames fuzz_disk_log fuzz_zk_layout fuzz_config
     fuzz_row_messages)
((${#targets[@]} > 0)) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (targets: ${all[*]})" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/setup-deps.sh installs it)" >&2; exit 1; }
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DQRSTORE_FUZZ=ON -DBUILD_TESTING=ON >/dev/null
[[ "$configure_only" == 0 ]] || exit 0
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --jobs must be a positive integer" >&2; exit 2; }
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds must be a positive integer" >&2; exit 2; }
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --parallel must be a positive integer" >&2; exit 2; }
[[ -z "$seed" || "$seed" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seed must be a positive integer" >&2; exit 2; }
seed_flag=()
[[ -z "$seed" ]] || seed_flag=(-seed="$seed")
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"
# run_target T: runs one target; its report goes to build-fuzz/T.report (printed in target
# order once all ran, so parallel runs do not interleave), its exit status is the target's.
run_target() {
  local t="$1" log="build-fuzz/$1.log" report="build-fuzz/$1.report" rc=0 found=0 f
  local dict=()
  [[ -f "tests/fuzz/dict/$t.dict" ]] && dict=(-dict="tests/fuzz/dict/$t.dict")
  build-fuzz/bin/"$t" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" "${dict[@]}" "${seed_flag[@]}" -max_total_time="$seconds" -timeout=30 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t/" >"$log" 2>&1 || rc=$?
  {
    echo "== $t: ${seconds} s"
    if [[ $rc == 0 ]]; then
      echo "$(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ *DONE" "$log" | tr '\n' ' ')corpus $(ls "build-fuzz/corpus/$t" | wc -l) inputs"
    else
      tail -n 30 "$log"
      for f in "build-fuzz/crashes/$t"/*; do
        [[ -f "$f" && ! "$f" -ot "build-fuzz/crashes/$t.start" ]] || continue
        found=1
        echo "fuzz.sh: $t failed on $f"
        echo "  replay:  build-fuzz/bin/$t $f     (or with the normal build: build/bin/$t $f)"
        echo "  keep it: cp $f tests/fuzz/regressions/$t/"
      done
      [[ $found = 1 ]] || echo "fuzz.sh: $t exited $rc without a reproducer (a bad flag or dictionary?): see $log"
    fi
  } >"$report"
  return $rc
}

failed=0
pids=()
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/crashes/$t"
  touch "build-fuzz/crashes/$t.start"  # reproducers older than this run are not its own
  rm -f "build-fuzz/$t.report"
  while (( $(jobs -rp | wc -l) >= parallel )); do wait -n || true; done
  run_target "$t" &
  pids+=($!)
done
for i in "${!targets[@]}"; do
  t="${targets[$i]}"
  if wait "${pids[$i]}"; then
    cat "build-fuzz/$t.report"
  else
    failed=1
    cat "build-fuzz/$t.report" >&2
  fi
done
exit $failed
