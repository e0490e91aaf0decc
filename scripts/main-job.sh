#!/usr/bin/env bash
# qrstore's main job today: the single-node YCSB benchmark of the queue-oriented engine
# (Release build, embedded, no external server). Installs what is missing, builds into build/,
# runs the raw single-threaded loop and the engine on the same generated operations, verifies
# the engine's final state against the reference executor, and prints the summary.
# Extra arguments are passed to qrstore-bench (e.g. --ycsb.theta=0.99 or --json).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
scripts/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target qrstore-bench
exec build/bin/qrstore-bench --config configs/single-node.yaml --txns 1000000 --seed 1 \
  --raw-loop --verify "$@"
