#!/usr/bin/env bash
# ycsb.sh: runs the YCSB client (qrstore-client) against the cluster of CONFIG started by
# scripts/cluster.sh up, with the same overrides `up` was given (saved in its run folder), then
# the ones given here.
#
#   scripts/ycsb.sh CONFIG [--key=value ...] [client flags]
#     e.g. scripts/ycsb.sh configs/cluster-raft.yaml --duration-s 20 --warmup-s 2
#          scripts/ycsb.sh configs/cluster-raft.yaml --workload-file configs/workloada.properties --json
#
# Without --txns or --duration-s it runs for 20 s. Client flags: build/bin/qrstore-client --help.
# Programs: $QRSTORE_BIN (default build/bin); run folders: $QRSTORE_RUN_DIR (default run/).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${QRSTORE_BIN:-$here/build/bin}"
case "${1:-}" in
  ""|-h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
config="$1"; shift
[[ -f "$config" ]] || { echo "ycsb.sh: config '$config' is not a file" >&2; exit 2; }
[[ -x "$bin/qrstore-client" ]] || { echo "ycsb.sh: no $bin/qrstore-client: build first" >&2; exit 1; }
name="$("$bin/qrstore-server" --config "$config" --get cluster.name)" || exit 2
run="${QRSTORE_RUN_DIR:-$here/run}/$name"
saved=()
if [[ -f "$run/overrides" ]]; then
  while IFS= read -r line; do [[ -n "$line" ]] && saved+=("$line"); done <"$run/overrides"
fi
has_length=0
for a in "$@"; do
  case "$a" in --txns|--txns=*|--duration-s|--duration-s=*|--workload-file|--workload-file=*|--status) has_length=1 ;; esac
done
length=()
((has_length)) || length=(--duration-s 20)
exec "$bin/qrstore-client" --config "$config" "${saved[@]+"${saved[@]}"}" "${length[@]+"${length[@]}"}" "$@"
