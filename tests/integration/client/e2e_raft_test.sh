#!/usr/bin/env bash
# qrstore-client against real qrstore-server processes: a raft cluster, rf = 2, on 127.0.0.1
# (ports free at run time; tests/integration/cluster/lib.sh launches and cleans up).
#  1. determinism end to end: one connection with --seed S leaves the replicated leader in the
#     state qrstore-bench --seed S reaches in-process (same digest), and every follower agrees;
#  2. a fresh cluster passes --verify over 3 connections;
#  3. a --duration-s run with warm-up reports window figures (batches, phase means, CPU) for
#     every node, and the dumps of all nodes are identical at the end.
source "$(dirname "$0")/../cluster/lib.sh"
workload=("ycsb:" "  records: 20000" "  fields: 4" "  field_bytes: 12" "  ops_per_txn: 10" "  write_ratio: 0.3"
          "  dep_ratio: 0.2" "  abort_ratio: 0.1" "  theta: 0.7" "batch:" "  txns: 1000" "  timeout_ms: 5")
bench_keys=(--ycsb.records=20000 --ycsb.fields=4 --ycsb.field_bytes=12 --ycsb.ops_per_txn=10 --ycsb.write_ratio=0.3
            --ycsb.dep_ratio=0.2 --ycsb.abort_ratio=0.1 --ycsb.theta=0.7 --batch.txns=1000 --engine.key_space=20000)

qr_config "$QR_TMP/e2e.yaml" raft 3 "${workload[@]}"
cfg="$QR_TMP/e2e.yaml"

# 1. One connection, seed 7: the leader's digest is qrstore-bench's.
qr_up "$cfg"
qr_client "$cfg" --txns 6000 --connections 1 --seed 7 --json --log-level warn >"$QR_TMP/one.out" ||
  fail "one-connection run failed: $(tail -5 "$QR_TMP/one.out")"
"$QRSTORE_BIN/qrstore-bench" "${bench_keys[@]}" --txns 6000 --seed 7 --json --log-level warn >"$QR_TMP/bench.out" ||
  fail "qrstore-bench failed: $(tail -3 "$QR_TMP/bench.out")"
leader="$(json_field "$QR_TMP/one.out" leader_digest)"
bench="$(json_field "$QR_TMP/bench.out" digest)"
[[ "$leader" == "$bench" ]] || fail "leader digest $leader after --connections 1 --seed 7, qrstore-bench --seed 7: $bench"
[[ "$(json_field "$QR_TMP/one.out" replicas_agree)" == true ]] || fail "replicas did not agree after run 1"
note "one connection, seed 7: leader digest $leader = qrstore-bench's; both followers agree"
qr_down "$cfg"
qr_same_dumps "$cfg"

# 2. A fresh cluster (memory log: up starts from the initial table): --verify over 3 connections.
rm -f "$(qr_dump_dir "$cfg")"/*.tsv
qr_up "$cfg"
qr_client "$cfg" --txns 9000 --connections 3 --outstanding 900 --seed 8 --verify --json --log-level warn \
  >"$QR_TMP/verify.out" || fail "verify run failed: $(tail -8 "$QR_TMP/verify.out")"
[[ "$(json_field "$QR_TMP/verify.out" verify)" == ok:* ]] || fail "verify: $(json_field "$QR_TMP/verify.out" verify)"
note "--verify over 3 connections: $(json_field "$QR_TMP/verify.out" verify | cut -c1-90)"

# 3. The measured window: every node has batches, phase means over the window and CPU in it.
qr_client "$cfg" --duration-s 2 --warmup-s 1 --connections 2 --json --log-level warn >"$QR_TMP/window.out" ||
  fail "duration run failed: $(tail -8 "$QR_TMP/window.out")"
python3 - "$QR_TMP/window.out" <<'PY' || fail "window figures: $(tail -1 "$QR_TMP/window.out" | cut -c1-600)"
import json, sys
o = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert o["replicas_agree"] is True and o["digest_mismatches"] == 0, o
assert 1.9 < o["elapsed_s"] < 4, o["elapsed_s"]
assert 0 < o["committed"] < o["committed_total"], (o["committed"], o["committed_total"])
for n in ("n0", "n1", "n2"):
    assert o["batches"][n] > 0, (n, o["batches"])
    assert o["phases"][n]["windowed"] is True, (n, o["phases"])
    assert o["phases"][n]["exec_ms"] > 0, (n, o["phases"])
    assert o["server_cpu_s"][n] > 0 and o["cpu_us_per_txn"][n] > 0, (n, o["server_cpu_s"])
assert o["phases"]["n0"]["plan_ms"] > 0
assert o["phases"]["n0"]["cut_ms"] > 0, o["phases"]["n0"]  # the leader plans: its batches were open
# The leader answers: its replies' time in it, of which complete -> written, and the mean
# latency splits into in the servers and outside them.
n0 = o["phases"]["n0"]
assert n0["replies"] > 0 and 0 < n0["reply_ms"] < n0["request_ms"], n0
assert 0 < o["in_server_ms"] < o["mean_ms"] * 1.5, (o["in_server_ms"], o["mean_ms"])
for n in ("n1", "n2"):
    assert o["phases"][n]["replies"] == 0, (n, o["phases"][n])  # followers answer no txns
# Every member syncs its raft log (the memory log's sync is counted too, however short).
for n in ("n0", "n1", "n2"):
    assert o["phases"][n]["log_syncs_per_batch"] > 0, (n, o["phases"][n])
assert o["client_cpu_s"] > 0
PY
note "duration run: $(json_field "$QR_TMP/window.out" throughput_tps) txn/s, window figures for n0 n1 n2"
"$QRSTORE_BIN/qrstore-client" --config "$cfg" --status >"$QR_TMP/status.out" || fail "--status: $(cat "$QR_TMP/status.out")"
[[ "$(grep -cE "^n[12] +follower +serving .* agrees" "$QR_TMP/status.out")" == 2 ]] || fail "--status: $(cat "$QR_TMP/status.out")"
qr_down "$cfg"
qr_same_dumps "$cfg"
echo PASS
