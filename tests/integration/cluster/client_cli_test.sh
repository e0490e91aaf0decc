#!/usr/bin/env bash
# qrstore-client as a user runs it: bad flags and workload files exit 2 naming the problem;
# --status prints every node (and says which one is down); --node to a follower is redirected to
# the leader; --workload-file runs its operationcount; --json's last line carries the documented
# fields; --verify passes on a fresh cluster and fails, naming why, on one that ran other txns;
# the client generates for the table the servers say they loaded, and a workload file or flag
# that asks for another one exits 2 saying what the servers hold.
source "$(dirname "$0")/lib.sh"
client="$QRSTORE_BIN/qrstore-client"
expect_exit() {  # expect_exit CODE TEXT CMD...
  local want="$1" text="$2"; shift 2
  local out code=0
  out="$("$@" 2>&1)" || code=$?
  [[ "$code" == "$want" ]] || fail "exit $code (want $want) from: $* -- $(tail -3 <<<"$out")"
  grep -qF -- "$text" <<<"$out" || fail "no '$text' in the output of: $* -- $(tail -3 <<<"$out")"
  note "exit $want: $text"
}

qr_config "$QR_TMP/cli.yaml" raft 2 "ycsb:" "  records: 5000" "  ops_per_txn: 6" "batch:" "  txns: 500" "  timeout_ms: 5"
cfg="$QR_TMP/cli.yaml"
expect_exit 2 "missing --txns N or --duration-s S" "$client" --config "$cfg"
expect_exit 2 "give either --txns or --duration-s" "$client" --config "$cfg" --txns 5 --duration-s 1
expect_exit 2 "flag --txns: must be >= 1" "$client" --config "$cfg" --txns 0
expect_exit 2 "unknown flag --speed" "$client" --config "$cfg" --txns 5 --speed 3
expect_exit 2 "ycsb.reccords: unknown key" "$client" --config "$cfg" --txns 5 --ycsb.reccords=3
expect_exit 2 "missing --config FILE" "$client" --txns 5
printf 'scanproportion=0.5\n' >"$QR_TMP/w2.properties"
expect_exit 2 "scanproportion: not supported" "$client" --config "$cfg" --workload-file "$QR_TMP/w2.properties"

# The servers load 4000 records, not the config file's 5000 (an override to up, which a client
# started by hand does not get): the client asks them and generates for what they hold.
qr_up "$cfg" --ycsb.records=4000
printf 'recordcount=9999\nreadproportion=0.5\nupdateproportion=0.5\n' >"$QR_TMP/w1.properties"
expect_exit 2 "ycsb.records=9999 but the servers hold ycsb.records=4000" "$client" --config "$cfg" \
  --workload-file "$QR_TMP/w1.properties"
expect_exit 2 "command line: ycsb.records=6000 but the servers hold ycsb.records=4000" "$client" --config "$cfg" \
  --txns 10 --ycsb.records=6000
# A fresh cluster: verify passes, through a follower that redirects to the leader.
"$client" --config "$cfg" --node n1 --txns 3000 --connections 2 --outstanding 600 --verify --json \
  >"$QR_TMP/v.out" 2>"$QR_TMP/v.err" || fail "verify run failed: $(tail -5 "$QR_TMP/v.out" "$QR_TMP/v.err")"
grep -q "is not the leader: redirected to 127.0.0.1:$(qr_port "$cfg" n0)" "$QR_TMP/v.err" || fail "no redirect noted"
grep -qF "the servers hold ycsb.records=4000 (the config file says 5000)" "$QR_TMP/v.err" ||
  fail "the client did not take the servers' record count"
[[ "$(json_field "$QR_TMP/v.out" verify)" == ok:* ]] || fail "verify: $(json_field "$QR_TMP/v.out" verify)"
for k in committed aborted throughput_tps ops_per_s p50_ms p99_ms replicas_agree digest_mismatches server_cpu_s.n0 \
         server_cpu_s.n1 cpu_us_per_txn.n1 phases.n0.exec_ms follower_lag_batches; do
  json_field "$QR_TMP/v.out" "$k" >/dev/null || fail "--json lacks $k"
done
note "--node n1 redirected to n0, --verify ok, --json has every documented field"
# The workload file's operationcount is the run's length.
printf 'operationcount=1234\nrecordcount=4000\nreadproportion=0.9\nupdateproportion=0.1\nthreadcount=8\n' >"$QR_TMP/w3.properties"
"$client" --config "$cfg" --workload-file "$QR_TMP/w3.properties" --json >"$QR_TMP/w3.out" 2>"$QR_TMP/w3.err" ||
  fail "workload file run failed: $(tail -3 "$QR_TMP/w3.err")"
[[ "$(json_field "$QR_TMP/w3.out" committed)" == 1234 ]] || fail "operationcount not honoured"
grep -q "threadcount does not apply to qrstore" "$QR_TMP/w3.err" || fail "no warning for threadcount"
note "--workload-file: operationcount 1234 run, threadcount named in a warning"
# The cluster is no longer fresh: verify must notice.
expect_exit 1 "verify failed" "$client" --config "$cfg" --txns 500 --verify
# --status, then with a node down.
"$client" --config "$cfg" --status >"$QR_TMP/s.out" || fail "--status failed: $(cat "$QR_TMP/s.out")"
grep -qE "^n0 +leader +serving" "$QR_TMP/s.out" || fail "--status: $(cat "$QR_TMP/s.out")"
grep -qE "^n1 +follower +serving .* agrees" "$QR_TMP/s.out" || fail "--status: $(cat "$QR_TMP/s.out")"
"$QR_SRC/scripts/cluster.sh" kill "$cfg" n1 >/dev/null
expect_exit 1 "no answer" "$client" --config "$cfg" --status
qr_down "$cfg" || true
echo PASS
