#!/usr/bin/env bash
# scripts/failover-timeline.sh as a user runs it, shortly: a raft group of 3 on 127.0.0.1, YCSB,
# the leader killed 3 s into an 8 s client run. It must exit 0, measure the first commit by the
# new leader, find the survivors' dumps identical and the update counters equal to what the
# client saw committed, and write its CSVs (the script publishes docs/reliability.md's figures:
# this keeps it running).
source "$(dirname "$0")/lib.sh"
qr_config "$QR_TMP/ft.yaml" raft 3 "ycsb:" "  records: 20000" "batch:" "  txns: 500" "  timeout_ms: 5"
cfg="$QR_TMP/ft.yaml"
QR_CONFIGS+=("$cfg")
out="$QR_TMP/ft"
"$QR_SRC/scripts/failover-timeline.sh" "$cfg" --kill-at 3 --duration-s 8 --out "$out" >"$QR_TMP/ft.out" 2>&1 ||
  fail "failover-timeline.sh exited $?: $(tail -8 "$QR_TMP/ft.out")"
cat "$out/summary.txt"
grep -qE "first commit by the new leader after [0-9.]+ s" "$out/summary.txt" || fail "no first commit measured"
grep -q "identical" "$out/summary.txt" || fail "the survivors' dumps are not identical"
grep -q "ok (nothing lost, nothing run twice)\|ok (nothing acknowledged lost" "$out/summary.txt" ||
  fail "exactly once not shown: $(grep "exactly once" "$out/summary.txt")"
[[ "$(head -1 "$out/timeline.csv")" == "t_s,committed" && $(wc -l <"$out/timeline.csv") -gt 50 ]] ||
  fail "timeline.csv is not the per-100 ms series"
[[ "$(wc -l <"$out/kills.csv")" == 2 ]] || fail "kills.csv does not hold the one kill"
note "failover-timeline: $(grep "first commit" "$out/summary.txt")"
