#!/usr/bin/env bash
# The leader notices a follower whose state digest differs (the agreement checks can fail): with
# the test hook server.test_wrong_digest_node, follower n2 reports wrong digests from batch 2 on;
# the leader logs an error naming the follower and the batch and counts it, `cluster.sh status`
# shows the mismatch, and the client reports replicas_agree false and exits 1, while n1 agrees.
source "$(dirname "$0")/lib.sh"
# (qr_config writes the server section; a second one would be a key given twice.)
qr_config "$QR_TMP/mismatch.yaml" raft 3 "ycsb:" "  records: 5000" "  ops_per_txn: 6" "batch:" "  txns: 300" \
  "  timeout_ms: 5" "client:" "  settle_timeout_ms: 3000"
cfg="$QR_TMP/mismatch.yaml"
qr_up "$cfg" --server.test_wrong_digest_node=n2 --server.test_wrong_digest_batch=2
code=0
qr_client "$cfg" --txns 3000 --connections 1 --json >"$QR_TMP/m.out" 2>"$QR_TMP/m.err" || code=$?
[[ "$code" == 1 ]] || fail "the client exited $code, not 1, with a follower that disagrees"
[[ "$(json_field "$QR_TMP/m.out" replicas_agree)" == false ]] || fail "replicas_agree is not false"
mismatches="$(json_field "$QR_TMP/m.out" digest_mismatches)"
[[ "$mismatches" -gt 0 ]] || fail "no digest mismatch counted"
grep -q "follower n2 .* does NOT agree" "$QR_TMP/m.out" || fail "the summary does not name n2: $(cat "$QR_TMP/m.out")"
grep -q "follower n1 .* agrees at the last batch" "$QR_TMP/m.out" || fail "n1 should agree"
grep -q "digest mismatch: follower n2 batch 2:" "$QRSTORE_RUN_DIR/mismatch/n0.log" || fail "the leader did not log the mismatch"
"$QR_SRC/scripts/cluster.sh" status "$cfg" >"$QR_TMP/s.out" || true
grep -qE "^n2 .*MISMATCH" "$QR_TMP/s.out" || fail "status does not show n2's mismatch: $(cat "$QR_TMP/s.out")"
note "the leader counted $mismatches mismatches of n2, status and client say so, n1 agrees"
qr_down "$cfg"
echo PASS
