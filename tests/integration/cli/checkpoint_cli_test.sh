#!/usr/bin/env bash
# qrstore-checkpoint against the checkpoints of a real cluster: a leader and two followers
# (raft) write checkpoints every 5 batches and a final one at a clean stop. Then, on every node,
# the tool finds the newest valid (exit 0), with the same batch and digest on every node, and
# its --dump equals the server's own dump byte for byte. A byte flipped in the middle of one
# node's newest file: refused with the reason, exit 1, the older file still listed ok (and
# dumped). --help exits 0; an unknown node and a config without server.checkpoint_dir exit 2; a
# node of a partitioned row whose folder holds none exits 1 saying so (a row's checkpoints are
# read in row_replicated_test). Uses the cluster tests' helpers (tests/integration/cluster/lib.sh).
source "$(dirname "$0")/../cluster/lib.sh"
tool="$QRSTORE_BIN/qrstore-checkpoint"
ckpt="$QR_TMP/checkpoints"

qr_config "$QR_TMP/ckpt.yaml" raft 3 \
  "ycsb:" "  records: 20000" "  ops_per_txn: 10" "  write_ratio: 0.5" "  abort_ratio: 0.1" \
  "batch:" "  txns: 500" "  timeout_ms: 5"
cfg="$QR_TMP/ckpt.yaml"
over=("--server.checkpoint_dir=$ckpt" "--server.checkpoint_every_batches=5")
qr_up "$cfg" "${over[@]}"
qr_client "$cfg" --txns 20000 --connections 2 --outstanding 1000 --seed 5 --json >"$QR_TMP/client.out" ||
  fail "client failed: $(tail -5 "$QR_TMP/client.out")"
[[ "$(json_field "$QR_TMP/client.out" replicas_agree)" == true ]] || fail "replicas did not agree"
qr_down "$cfg"
qr_same_dumps "$cfg"
dumps="$(qr_dump_dir "$cfg")"

# run OUT ARGS...: the tool on $cfg with the servers' overrides; sets $rc.
run() {
  local out="$1"; shift
  set +e
  "$tool" --config "$cfg" "${over[@]}" "$@" >"$out" 2>"$out.err"
  rc=$?
  set -e
}

# Every node: the newest valid, the same digest everywhere, the dump equal to the server's. The
# batch: the leader's last (n0), the followers' one more: the leader's end markers, which they
# apply as an empty batch (cluster/follow/follower_feed.h).
ref=""
for n in n0 n1 n2; do
  run "$QR_TMP/$n.txt" --node "$n" --dump "$QR_TMP/$n.ckpt.tsv"
  [[ $rc == 0 ]] || fail "$n: exit $rc: $(cat "$QR_TMP/$n.txt" "$QR_TMP/$n.txt.err")"
  cat "$QR_TMP/$n.txt"
  newest="$(sed -n 2p "$QR_TMP/$n.txt")"
  [[ "$newest" == *"  ok" ]] || fail "$n: newest not ok: $newest"
  [[ "$(grep -c '  ok$' "$QR_TMP/$n.txt")" -ge 2 ]] || fail "$n: fewer than 2 valid checkpoints listed"
  [[ "$newest" =~ records\ 20000\  ]] || fail "$n: not 20000 records: $newest"
  key="$(awk '{ print $3, $11 }' <<<"$newest")"  # batch, digest
  if [[ -z "$ref" ]]; then
    ref="$key" ref0="$key"
  else
    read -r b0 d0 <<<"$ref0"
    ref="$((b0 + 1)) $d0"
    [[ "$key" == "$ref" ]] || fail "$n: newest (batch digest) $key, not n0's $ref0 and the empty marker batch after it"
  fi
  cmp "$QR_TMP/$n.ckpt.tsv" "$dumps/$n.tsv" || fail "$n: the checkpoint's dump differs from the server's"
  run "$QR_TMP/$n.json" --node "$n" --json
  [[ $rc == 0 ]] || fail "$n --json: exit $rc"
  python3 - "$QR_TMP/$n.json" "$ref" <<'PY' || fail "$n: bad --json output"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
batch, digest = sys.argv[2].split()
assert len(rows) >= 2, rows
assert all(r["ok"] and r["error"] is None for r in rows), rows
assert rows[0]["batch"] == int(batch) and rows[0]["digest"] == digest, rows[0]
assert rows[0]["records"] == 20000 and rows[0]["sessions"] is not None, rows[0]
assert [r["batch"] for r in rows] == sorted((r["batch"] for r in rows), reverse=True), rows
PY
done
note "every node: newest checkpoint valid, digest and batch as n0's ($ref0, the followers one more), --dump equals the server's dump"

# One byte flipped in the middle of n1's newest file.
newest_file="$(ls "$ckpt/n1"/checkpoint-*.qrc | sort | tail -1)"
size=$(stat -c %s "$newest_file")
python3 - "$newest_file" $((size / 2)) <<'PY'
import sys
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0x40]))
PY
run "$QR_TMP/bad.txt" --node n1 --dump "$QR_TMP/n1.older.tsv"
cat "$QR_TMP/bad.txt" "$QR_TMP/bad.txt.err"
[[ $rc == 1 ]] || fail "a corrupt newest checkpoint: exit $rc, expected 1"
line="$(sed -n 2p "$QR_TMP/bad.txt")"
[[ "$line" == "$(basename "$newest_file")"*"REFUSED: "* ]] || fail "the corrupt file is not refused: $line"
grep -qiE 'checksum|mismatch|corrupt' <<<"$line" || fail "the refusal does not say why: $line"
[[ "$(sed -n 3p "$QR_TMP/bad.txt")" == *"  ok" ]] || fail "the older file is not listed ok"
grep -q "newest checkpoint is refused" "$QR_TMP/bad.txt.err" || fail "no message on stderr"
[[ -s "$QR_TMP/n1.older.tsv" ]] || fail "--dump did not write the older valid checkpoint"
run "$QR_TMP/bad.json" --node n1 --json
[[ $rc == 1 ]] || fail "--json with a corrupt newest: exit $rc, expected 1"
python3 - "$QR_TMP/bad.json" <<'PY' || fail "bad --json output for the corrupt file"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert rows[0]["ok"] is False and rows[0]["error"], rows[0]
assert rows[1]["ok"] is True, rows[1]
PY
note "corrupt newest refused (exit 1): ${line##*REFUSED: }"

# The session table is decoded under the configured limits: a node told to remember fewer
# outcomes than its checkpoints hold refuses them (a restart would too).
run "$QR_TMP/limits.txt" --node n0 --server.session_max_outcomes=100
[[ $rc == 1 ]] && grep -q "REFUSED: session table: " "$QR_TMP/limits.txt" || fail "session limits: exit $rc"
note "sessions beyond the configured limits refused: $(sed -n '2s/.*REFUSED: //p' "$QR_TMP/limits.txt")"

# Bad input: exit 2, each named.
run "$QR_TMP/help.txt" --help
[[ $rc == 0 ]] && grep -q "usage: qrstore-checkpoint" "$QR_TMP/help.txt" || fail "--help: exit $rc"
run "$QR_TMP/unknown.txt" --node nosuch
[[ $rc == 2 ]] && grep -q nosuch "$QR_TMP/unknown.txt.err" || fail "unknown node: exit $rc"
set +e
"$tool" --config "$cfg" --node n0 >"$QR_TMP/nodir.txt" 2>&1; rc=$?
set -e
[[ $rc == 2 ]] && grep -q "server.checkpoint_dir" "$QR_TMP/nodir.txt" || fail "no checkpoint_dir: exit $rc"
qr_row_config "$QR_TMP/row.yaml" 2
set +e
"$tool" --config "$QR_TMP/row.yaml" --node p0 "--server.checkpoint_dir=$ckpt" >"$QR_TMP/row.txt" 2>&1; rc=$?
set -e
[[ $rc == 1 ]] && grep -q "no checkpoint of node p0" "$QR_TMP/row.txt" || fail "partitioned, none: exit $rc"
note "--help 0; unknown node, no checkpoint_dir: 2; a row node without checkpoints: 1"
echo PASS
