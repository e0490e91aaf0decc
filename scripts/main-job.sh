#!/usr/bin/env bash
# qrstore's main job today: a replicated cluster on this machine. Installs what is missing,
# builds (Release) into build/, brings up configs/cluster-raft.yaml (a leader and two followers
# replicated by the integrated Raft, each its own process on 127.0.0.1), runs the YCSB client
# against it for 20 s after a 2 s warm-up, prints the summary (throughput, latency percentiles,
# per-phase times on every node, follower lag and whether every follower's state digest agrees
# with the leader's), and brings the cluster down (also when interrupted).
# Extra arguments go to the client (e.g. --duration-s 60, --json, --ycsb.theta=0.99);
# QRSTORE_CONFIG picks another cluster config (e.g. configs/cluster-zookeeper.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
config="${QRSTORE_CONFIG:-configs/cluster-raft.yaml}"
scripts/setup-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target qrstore-server qrstore-client
export QRSTORE_RUN_DIR="${QRSTORE_RUN_DIR:-$(pwd)/run}"
down() { scripts/cluster.sh down "$config" || true; }
trap down EXIT
scripts/cluster.sh up "$config" --fresh  # a new, empty cluster each time (its data: run/<name>/data)
scripts/ycsb.sh "$config" --duration-s 20 --warmup-s 2 "$@"
