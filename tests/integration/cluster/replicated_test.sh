#!/usr/bin/env bash
# A leader and two followers (rf = 2) with BACKEND (raft | zookeeper): YCSB and transfer through
# qrstore-client. After `down`, every node's dumped state is identical (compared as files), money
# is conserved on every node, no digest mismatch was counted and the client saw every follower
# agree at the last batch. Usage: [QR_POINT=plan|input] replicated_test.sh BACKEND
source "$(dirname "$0")/lib.sh"
backend="${1:?raft or zookeeper}"
zk=()
[[ "$backend" == zookeeper && -n "${QRSTORE_ZK_HOSTS:-}" ]] && zk=("--replication.zookeeper.hosts=$QRSTORE_ZK_HOSTS")

# YCSB-T with reads, writes, dependent writes and logic aborts, two connections.
qr_config "$QR_TMP/ycsb-$backend.yaml" "$backend" 3 \
  "ycsb:" "  records: 20000" "  ops_per_txn: 10" "  write_ratio: 0.3" "  dep_ratio: 0.2" "  abort_ratio: 0.1" \
  "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/ycsb-$backend.yaml"
qr_up "$cfg" "${zk[@]+"${zk[@]}"}"
qr_client "$cfg" --txns 30000 --connections 2 --outstanding 2000 --seed 11 --json >"$QR_TMP/ycsb.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/ycsb.out")"
committed="$(json_field "$QR_TMP/ycsb.out" committed)"
aborted="$(json_field "$QR_TMP/ycsb.out" aborted)"
[[ $((committed + aborted)) == 30000 ]] || fail "committed $committed + aborted $aborted != 30000"
[[ "$(json_field "$QR_TMP/ycsb.out" failed)" == 0 ]] || fail "failed txns"
[[ "$(json_field "$QR_TMP/ycsb.out" replicas_agree)" == true ]] || fail "replicas did not agree"
[[ "$(json_field "$QR_TMP/ycsb.out" digest_mismatches)" == 0 ]] || fail "digest mismatches"
point="$(json_field "$QR_TMP/ycsb.out" replication_point)"
[[ "$point" == "${QR_POINT:-plan}" ]] || fail "the nodes replicate at point '$point', not ${QR_POINT:-plan}"
bytes="$(json_field "$QR_TMP/ycsb.out" replicated_bytes_per_txn)"
python3 -c "import sys; sys.exit(0 if float('$bytes') > 10 else 1)" || fail "$bytes bytes replicated per txn"
note "ycsb: $committed committed, $aborted aborted, replicas agree, no digest mismatch; point $point, $bytes bytes/txn"
qr_down "$cfg"
qr_same_dumps "$cfg"

# Transfers: money is conserved on every node whatever the fates.
qr_config "$QR_TMP/transfer-$backend.yaml" "$backend" 3 \
  "workload:" "  kind: transfer" "transfer:" "  accounts: 2000" "  initial_balance: 1000" "  max_amount: 1500" \
  "batch:" "  txns: 1000" "  timeout_ms: 5"
cfg="$QR_TMP/transfer-$backend.yaml"
qr_up "$cfg" "${zk[@]+"${zk[@]}"}"
qr_client "$cfg" --txns 30000 --connections 3 --outstanding 1500 --seed 12 --json >"$QR_TMP/transfer.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/transfer.out")"
[[ "$(json_field "$QR_TMP/transfer.out" replicas_agree)" == true ]] || fail "replicas did not agree"
aborted="$(json_field "$QR_TMP/transfer.out" aborted)"
[[ "$aborted" -gt 0 ]] || fail "no transfer aborted: the test would not show fates"
qr_down "$cfg"
qr_same_dumps "$cfg"
for f in "$(qr_dump_dir "$cfg")"/*.tsv; do
  [[ "$(dump_sum "$f")" == 2000000 ]] || fail "money not conserved in $f: $(dump_sum "$f")"
done
note "transfer: $aborted aborted, 2,000,000 conserved on every node"
echo PASS
