#!/usr/bin/env bash
# A replication failure on the leader (its ZooKeeper stops answering: batches are not durable
# within replication.zookeeper.op_deadline_ms) stops admitting transactions and answers every
# pending one with `failed` naming the replication error; nothing un-replicated was acknowledged:
# once ZooKeeper answers again, the followers apply every batch the client was told about.
source "$(dirname "$0")/lib.sh"
qr_config "$QR_TMP/replfail.yaml" zookeeper 3 "ycsb:" "  records: 20000" "  ops_per_txn: 6" "batch:" "  txns: 500" \
  "  timeout_ms: 5" "client:" "  settle_timeout_ms: 1000"
cfg="$QR_TMP/replfail.yaml"
# A short drain: at the end the followers wait for a stream end that cannot come (ZooKeeper is
# gone), and only the stop's speed is at stake there.
qr_up "$cfg" --replication.zookeeper.op_deadline_ms=2000 --server.drain_timeout_ms=3000
zk_pid="$(cat "$QRSTORE_RUN_DIR/replfail/zk/s1/pid")"
# No node takes over here (ZooKeeper is what failed): the client gives up its failover after 3 s
# (client.failover_timeout_ms; it would finish a failover under way past its 8 s for up to that).
qr_client "$cfg" --duration-s 8 --connections 2 --outstanding 1500 --client.failover_timeout_ms=3000 --json \
  >"$QR_TMP/c.out" 2>"$QR_TMP/c.err" &
client=$!
sleep 2
kill -STOP "$zk_pid"
note "ZooKeeper stopped answering"
code=0
wait "$client" || code=$?
kill -CONT "$zk_pid"
[[ "$code" == 1 ]] || fail "the client exited $code (want 1: no leader took over)"
# The `failed` answers (outcome unknown) are kept to be sent again in the client's sessions; no
# other node ever leads here, so they end in doubt.
doubt="$(json_field "$QR_TMP/c.out" in_doubt)"
acked="$(json_field "$QR_TMP/c.out" acked_batches)"
[[ "$doubt" -gt 0 ]] || fail "no txn ended in doubt"
grep -q "replication failed at batch" "$QR_TMP/c.out" || fail "the failures do not name the replication error: $(grep error "$QR_TMP/c.out")"
note "the client was told its txns failed (replication): $doubt in doubt at the end, answers came from batches below $acked"
python3 - "$(qr_port "$cfg" n0)" <<'PY' || fail "the leader took a new request after the failure"
import sys
sys.path.insert(0, "tests/integration/cluster")
import qrproto as qp
c = qp.Conn(int(sys.argv[1]))
c.send(qp.frame(qp.T_TXN_REQUEST, qp.txn_request(9, [(1, [(0, 1, 0, 0)])])))
f = c.read_frame()
assert f is not None and f[0] == qp.T_ERROR and "replication failed" in qp.parse_error(f[1])[2], f
s = qp.status(int(sys.argv[1]))
assert s["state"] == "failed" and "replication failed" in s["error"], s
PY
note "the leader refuses new requests and reports state failed"
# Every batch an answer came from was durable: the followers get it once ZooKeeper answers.
deadline=$((SECONDS + 60))
for n in n1 n2; do
  while true; do
    got="$(python3 -c "import sys; sys.path.insert(0, 'tests/integration/cluster'); import qrproto as qp, struct
c = qp.Conn($(qr_port "$cfg" $n)); c.send(qp.frame(qp.T_STATUS_REQUEST, struct.pack('<Q', 1))); f = c.read_frame()
r = qp.Reader(f[1]); r.u64(); [r.string() for _ in range(6)]; r.varint(); r.varint(); print(r.varint())")"
    [[ "$got" -ge "$acked" ]] && break
    ((SECONDS < deadline)) || fail "follower $n applied $got batches, but the client got answers from batch $((acked - 1))"
    sleep 0.2
  done
  note "follower $n applied $got batches >= every acknowledged batch ($acked)"
done
# With their ZooKeeper gone, followers waiting for the next batch must wait, not spin (they once
# burned half a core each: a poll deadline in the past while disconnected): at most 10% of a core
# each over 3 s, once the loss is noticed.
kill -KILL "$zk_pid"
sleep 4
declare -A t0
for n in n1 n2; do t0[$n]="$(awk '{print $14 + $15}' "/proc/$(cat "$QRSTORE_RUN_DIR/replfail/$n.pid")/stat")"; done
sleep 3
for n in n1 n2; do
  used=$(($(awk '{print $14 + $15}' "/proc/$(cat "$QRSTORE_RUN_DIR/replfail/$n.pid")/stat") - ${t0[$n]}))
  ((used <= 30)) || fail "follower $n used $used CPU ticks in 3 s with ZooKeeper gone (spinning?)"
  note "follower $n idle with ZooKeeper gone: $used ticks in 3 s"
done
QRSTORE_STOP_TIMEOUT_S=30 qr_down "$cfg" >/dev/null 2>&1 || true
echo PASS
