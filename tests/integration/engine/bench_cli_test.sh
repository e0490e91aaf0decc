#!/usr/bin/env bash
# CLI tests of qrstore-bench: usage <qrstore-bench binary> <configs dir>.
# Each check prints what it tests; the first failure prints the command's output and exits 1.
set -u
BENCH=${1:?usage: bench_cli_test.sh <qrstore-bench> <configs dir>}
CONFIGS=${2:?usage: bench_cli_test.sh <qrstore-bench> <configs dir>}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SMALL=(--ycsb.records=2000 --engine.key_space=2000 --batch.txns=100 --log-level=warn)
checks=0

fail() {
  echo "FAIL: $*"
  echo "--- stdout"; cat "$TMP/out" 2>/dev/null | tail -20
  echo "--- stderr"; cat "$TMP/err" 2>/dev/null | tail -20
  exit 1
}
# run EXPECTED_RC args...: runs the bench, captures stdout/stderr, checks the exit status.
run() {
  local want=$1; shift
  "$BENCH" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "exit status $rc, expected $want: qrstore-bench $*"
  checks=$((checks + 1))
}
json_field() {  # json_field KEY: the field of the JSON object on the last stdout line
  tail -n 1 "$TMP/out" | python3 -c "import json,sys; v=json.load(sys.stdin)['$1']; print(v)"
}

echo "help"
run 0 --help
grep -q '^usage: qrstore-bench' "$TMP/out" || fail "--help prints no usage line"
grep -q 'ycsb.theta' "$TMP/out" || fail "--help does not list the config keys"

echo "bad input exits 2 naming the problem"
run 2 --txns 10 --bogus-flag
grep -q -- '--bogus-flag' "$TMP/err" || fail "unknown flag not named"
run 2 --txns 10 --ycsb.nosuchkey=1
grep -q 'ycsb.nosuchkey' "$TMP/err" || fail "unknown config key not named"
run 2 --txns 10 --ycsb.theta=abc
grep -q 'ycsb.theta' "$TMP/err" || fail "bad config value not named"
run 2 "${SMALL[@]}"
grep -q -- '--txns' "$TMP/err" || fail "missing --txns/--duration-s not explained"
run 2 "${SMALL[@]}" --txns 10 --duration-s 1
grep -q 'not both' "$TMP/err" || fail "--txns with --duration-s not rejected"
run 2 "${SMALL[@]}" --txns ten
grep -q -- '--txns' "$TMP/err" || fail "non-numeric --txns not named"
run 2 --config "$TMP/missing.yaml" --txns 1
grep -q 'missing.yaml' "$TMP/err" || fail "missing config file not named"
run 2 "${SMALL[@]}" --txns 100 --verify --bench.verify_max_txns=50
grep -q 'verify_max_txns' "$TMP/err" || fail "--verify over the cap not explained"
run 2 "${SMALL[@]}" --txns 1 stray
grep -q 'stray' "$TMP/err" || fail "stray argument not named"

echo "inputs that passed validation and then failed are refused up front"
# A table that cannot fit: refused before allocating (was an uncaught std::bad_alloc, status 134).
run 2 --txns 1000 --ycsb.records=4294967296
grep -q 'not enough memory: the table of 4294967296 records' "$TMP/err" || fail "huge table not refused"
grep -q 'needed, [0-9]* bytes (.*) available' "$TMP/err" || fail "bytes needed/available not named"
run 2 --txns 1000 --ycsb.fields=1024 --ycsb.field_bytes=4096
grep -q 'not enough memory' "$TMP/err" || fail "4 MiB records not refused"
# A directory as --config: an error naming it (it once ran with the defaults).
run 2 --config "$CONFIGS" --txns 10
grep -qF "config file '$CONFIGS' is a directory" "$TMP/err" || fail "a directory as --config not named"
# A key given twice: both lines named.
printf 'batch:\n  txns: 100\nycsb:\n  records: 2000\nbatch:\n  txns: 200\n' >"$TMP/dup.yaml"
run 2 --config "$TMP/dup.yaml" --txns 10
grep -qF "$TMP/dup.yaml: batch: given twice (lines 1 and 5)" "$TMP/err" || fail "duplicate key not named with its lines"
# An error in an override is labelled as the command line's, not the config file's.
run 2 --config "$CONFIGS/single-node.yaml" --txns 10 --ycsb.theta=abc
grep -qF "command line: ycsb.theta: expected a number (got 'abc')" "$TMP/err" || fail "override error not labelled"
grep -qF "single-node.yaml: ycsb.theta" "$TMP/err" && fail "override error labelled with the file name"
# Per-key ranges are the real limits: one message each, from the key's range.
run 2 --txns 10 --engine.batches_in_flight=1
[ "$(grep -c . "$TMP/err")" -eq 2 ] && grep -qF "engine.batches_in_flight: must be in [2, 16] (got '1')" "$TMP/err" ||
  fail "batches_in_flight=1 not refused by its range alone"
run 2 --txns 10 --ycsb.records=1
[ "$(grep -c . "$TMP/err")" -eq 2 ] && grep -qF "ycsb.records: must be in [2, 4294967296] (got '1')" "$TMP/err" ||
  fail "ycsb.records=1 not refused by its range alone"
# --dump-state to a path that cannot be written fails before the run (nothing on stdout).
run 2 "${SMALL[@]}" --txns 100000 --dump-state "$TMP/no-such-dir/state.tsv"
grep -qF -- "--dump-state: cannot write '$TMP/no-such-dir/state.tsv': No such file or directory" "$TMP/err" ||
  fail "unwritable --dump-state not named"
[ ! -s "$TMP/out" ] || fail "the run started before the unwritable --dump-state was refused"

echo "--txns 0 --dump-state dumps the initial state"
run 0 "${SMALL[@]}" --txns 0 --dump-state "$TMP/init.tsv"
[ "$(wc -l <"$TMP/init.tsv")" -eq 2000 ] || fail "initial dump has $(wc -l <"$TMP/init.tsv") lines, expected 2000"
awk -F'\t' 'NF != 2 || $1 != NR - 1 || $2 != 0 { bad = 1 } END { exit bad }' "$TMP/init.tsv" ||
  fail "initial dump is not 0..1999 with counter 0, sorted"

echo "--json: the last stdout line is an object with the documented keys"
run 0 "${SMALL[@]}" --txns 3000 --seed 7 --json --dump-state "$TMP/a.tsv"
tail -n 1 "$TMP/out" | python3 -c '
import json, sys
o = json.load(sys.stdin)
need = ["committed", "aborted", "update_ops_committed", "throughput_tps", "ops_per_s", "p50_ms", "p99_ms",
        "p999_ms", "digest", "verify", "config", "inputs"]
missing = [k for k in need if k not in o]
assert not missing, "missing keys: %s" % missing
assert o["committed"] + o["aborted"] == 3000, o
assert o["verify"] == "skipped", o["verify"]
assert o["inputs"]["seed"] == 7 and o["inputs"]["txns"] == 3000, o["inputs"]
assert o["config"]["ycsb.records"] == "2000", o["config"]
assert len(o["digest"]) == 16
assert o["throughput_tps"] > 0 and o["p50_ms"] > 0 and o["p50_ms"] <= o["p99_ms"] <= o["p999_ms"]
' || fail "JSON line invalid"
digest_a=$(json_field digest)
# With 50% writes over 2000 records, the counters must have moved (sum = update ops).
sum=$(awk -F'\t' '{ s += $2 } END { print s }' "$TMP/a.tsv")
[ "$sum" -eq "$(json_field update_ops_committed)" ] || fail "dumped counters sum $sum != update ops"

echo "same seed, same digest; another seed, another digest"
run 0 "${SMALL[@]}" --txns 3000 --seed 7 --json --threads.executors=3 --threads.planners=2
[ "$(json_field digest)" = "$digest_a" ] || fail "digest differs between runs with seed 7"
run 0 "${SMALL[@]}" --txns 3000 --seed 8 --json
[ "$(json_field digest)" != "$digest_a" ] || fail "seeds 7 and 8 gave the same digest"

echo "--verify prints ok (with aborts, dependencies and skew)"
run 0 "${SMALL[@]}" --txns 4000 --verify --json --ycsb.theta=0.99 --ycsb.dep_ratio=0.3 --ycsb.abort_ratio=0.2
grep -q '^  verify         ok' "$TMP/out" || fail "no 'verify ok' line"
[ "$(json_field verify)" = "ok" ] || fail "JSON verify is not ok"

echo "transfer: the dumped balances sum to accounts * initial_balance"
run 0 --config "$CONFIGS/transfer.yaml" --transfer.accounts=500 --engine.key_space=500 --batch.txns=64 \
  --log-level=warn --txns 5000 --verify --json --dump-state "$TMP/t.tsv"
[ "$(json_field verify)" = "ok" ] || fail "transfer verify is not ok"
[ "$(json_field aborted)" -gt 0 ] || fail "no transfer aborted although max_amount > initial_balance"
sum=$(awk -F'\t' '{ s += $2; if ($2 < 0) neg = 1 } END { print (neg ? "negative" : s) }' "$TMP/t.tsv")
[ "$sum" = "500000" ] || fail "transfer balances sum to $sum, expected 500000"

echo "the single-node config file loads (small overrides)"
run 0 --config "$CONFIGS/single-node.yaml" --ycsb.records=2000 --engine.key_space=2000 --log-level=warn --txns 500

echo "--duration-s and --raw-loop"
run 0 "${SMALL[@]}" --duration-s 1 --raw-loop --json
tail -n 1 "$TMP/out" | python3 -c '
import json, sys
o = json.load(sys.stdin)
assert o["committed"] > 0 and o["inputs"]["duration_s"] == 1, o
assert o["raw_ops_per_s"] > 0 and o["engine_vs_raw"] > 0, o
' || fail "duration/raw-loop JSON invalid"

echo "all $checks bench CLI runs passed"
