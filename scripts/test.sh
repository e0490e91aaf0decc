#!/usr/bin/env bash
# qrstore's test command: installs what is missing, builds (Release, with tests), starts a
# ZooKeeper server on 127.0.0.1 for the ZooKeeper tests, runs every test with ctest (unit,
# simulation, integration: clusters of real processes), builds the concurrency tests under
# ThreadSanitizer and runs them, builds the unit and integration tests with clang under
# AddressSanitizer + UBSan (build-fuzz/, shared with the fuzz targets) and runs them, then a
# short fuzz smoke of every fuzz target (clang, libFuzzer, ASan + UBSan; QRSTORE_FUZZ_SECONDS
# each, default 10; libFuzzer seed QRSTORE_FUZZ_SEED, default 1, so a commit's smoke is the same on
# every run). The builds go through ccache when installed (setup-deps installs it). Exits non-zero
# on any failure.
# Usage: scripts/test.sh [--no-tsan] [--no-asan] [--no-fuzz] [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tsan=1
asan=1
fuzz=1
ctest_args=()
for a in "$@"; do
  case "$a" in
    --no-tsan) tsan=0 ;;
    --no-asan) asan=0 ;;
    --no-fuzz) fuzz=0 ;;
    -h|--help)
      sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
      exit 0 ;;
    *) ctest_args+=("$a") ;;
  esac
done

jobs=$(nproc 2>/dev/null || echo 2)
# stage NAME: prints the stage's banner and how long the whole command has run so far (the
# budget is 20 minutes on a 2-core machine; this shows where it goes).
stage() { echo "== [$(printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)))] $*"; }

stage "installing dependencies (quiet, idempotent)"
scripts/setup-deps.sh

# The three builds (Release, TSan, ASan + fuzz) go through ccache when it is there: the first
# run fills the cache (and costs a little more), later runs on this machine compile only what
# changed, from any checkout.
source "$root/scripts/lib.sh"
use_ccache "$root"

stage "building (Release) into build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"

zkdir=$(mktemp -d /tmp/qrstore-test-zk.XXXXXX)
cleanup() {
  scripts/zk-server.sh stop "$zkdir" >/dev/null 2>&1 || true
  rm -rf "$zkdir"
}
trap cleanup EXIT

stage "starting a ZooKeeper server on 127.0.0.1 for the ZooKeeper tests"
# One server serves every ZooKeeper test of the run; they write payloads of up to 5 MB and
# ZooKeeper keeps its last 500 transactions in its heap, so 256 MB (zk-server.sh's default) is
# too small for the suite (the server dies of OutOfMemoryError and later tests cannot connect).
QRSTORE_ZK_HOSTS=$(scripts/zk-server.sh start "$zkdir" --heap-mb "${QRSTORE_TEST_ZK_HEAP_MB:-1024}")
export QRSTORE_ZK_HOSTS
echo "   ZooKeeper at $QRSTORE_ZK_HOSTS"

stage "running every test"
# failures DIR: after a failed ctest run in DIR, each failed test's name and why, in a few lines
# (the end of this long output is where a reader looks first).
failures() { python3 scripts/failed-tests.py "$1" || true; }

if ! (cd build && ctest --output-on-failure -j"$jobs" --timeout 600 "${ctest_args[@]+"${ctest_args[@]}"}"); then
  failures build
  # A ZooKeeper that died mid-run fails every later ZooKeeper test: say so, with its log.
  if ! scripts/zk-server.sh status "$zkdir" | grep -qv down; then
    echo "== the tests' ZooKeeper server is down; the end of its log:"
    tail -n 30 "$zkdir"/s1/server.log || true
    grep -m 3 OutOfMemoryError "$zkdir"/s1/server.log || true
  fi
  exit 1
fi

if [ "$tsan" = 1 ]; then
  stage "building the concurrency tests under ThreadSanitizer into build-tsan/"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQRSTORE_SANITIZE=thread >/dev/null
  cmake --build build-tsan -j"$jobs" --target concurrency_tests
  stage "running the concurrency tests under ThreadSanitizer"
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp" \
     ctest --output-on-failure -L concurrency --timeout 600) || { failures build-tsan; exit 1; }
fi
if [ "$asan" = 1 ]; then
  # The unit and integration tests (target sanitizer_tests: every test binary labelled unit or
  # integration, and the programs the script tests run; not the benchmarks or raft_sim). They
  # build in build-fuzz/, the fuzz targets' clang build (ASan + UBSan, plus libFuzzer's coverage
  # instrumentation, which only slows them a little): one clang build of the libraries serves
  # this stage and the fuzz smoke. The simulation seeds run in Release only (far slower under sanitizers);
  # the fuzz corpus replays are the fuzz smoke's; the resident-set test (label rss) is the
  # Release run's, and so are the tests labelled slow (long waits, paths the others cover).
  # scripts/lsan.supp: a known leak inside the ZooKeeper C client.
  stage "building the unit and integration tests under AddressSanitizer + UBSan (clang) into build-fuzz/"
  scripts/fuzz.sh --configure
  cmake --build build-fuzz -j"$jobs" --target sanitizer_tests
  stage "running the unit and integration tests under AddressSanitizer + UBSan"
  (cd build-fuzz && ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp" \
     UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" ctest --output-on-failure -j"$jobs" -L "unit|integration" -LE "fuzz|rss|slow" --timeout 600) ||
    { failures build-fuzz; exit 1; }
fi
if [ "$fuzz" = 1 ]; then
  stage "fuzz smoke: every fuzz target for ${QRSTORE_FUZZ_SECONDS:-10} s, $jobs at a time (build-fuzz/)"
  scripts/fuzz.sh --seconds "${QRSTORE_FUZZ_SECONDS:-10}" --parallel "$jobs" --seed "${QRSTORE_FUZZ_SEED:-1}"
fi
command -v ccache >/dev/null 2>&1 && echo "   ccache: $(ccache --show-stats 2>/dev/null | grep -iE '^ *(hits|cache hit)' | head -2 | tr -s ' ' | tr '\n' ';')"
stage "all tests passed"
