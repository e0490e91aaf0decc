#!/usr/bin/env python3
"""Client input the server must survive (issue 7, section 7): random bytes, truncated, oversized
and unknown messages, unknown op kinds and keys out of range. Each gets an error reply (or a
rejected result) and the server stays up; a well-behaved client running at the same time sees
every one of its transactions committed; the leader and its follower end in the same state.
Usage: bad_input_test.py (with QRSTORE_BIN set; brings its own cluster up and down)."""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qrproto as qp  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ["QRSTORE_BIN"]
RECORDS = 5000
MAX_MSG = 65536


def run(*cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok -", what)


def main():
    tmp = tempfile.mkdtemp(prefix="qrstore-badinput.")
    os.environ["QRSTORE_RUN_DIR"] = tmp + "/run"
    ports = []
    socks = []
    import socket
    for _ in range(4):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    cfg = tmp + "/badinput.yaml"
    with open(cfg, "w") as f:
        f.write(f"""cluster:
  name: badinput
  nodes:
    - {{name: n0, host: 127.0.0.1, client_port: {ports[0]}, peer_port: {ports[1]}, row: 0}}
    - {{name: n1, host: 127.0.0.1, client_port: {ports[2]}, peer_port: {ports[3]}, row: 1}}
replication:
  backend: raft
  raft:
    election_ticks: 100
ycsb:
  records: {RECORDS}
batch:
  txns: 500
  timeout_ms: 5
server:
  max_message_bytes: {MAX_MSG}
  max_inflight_txns_per_connection: 2000
  dump_state_dir: {tmp}
""")
    up = run(SRC + "/scripts/cluster.sh", "up", cfg, check=False)
    if up.returncode != 0:
        sys.exit("FAIL: cluster up\n" + up.stdout + up.stderr)
    try:
        body(ports[0], ports[2])
    finally:
        down = run(SRC + "/scripts/cluster.sh", "down", cfg, check=False)
    expect(down.returncode == 0, "both nodes stop cleanly (" + down.stdout.strip().replace("\n", "; ") + ")")
    a, b = open(tmp + "/n0.tsv").read(), open(tmp + "/n1.tsv").read()
    expect(a == b and len(a) > 0, "leader and follower dumps are identical")
    shutil.rmtree(tmp)


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def good_client(port, results):
    c = qp.Conn(port)
    rnd = random.Random(7)
    sent = 0
    for r in range(40):
        txns = [(r * 100 + i + 1, [(rnd.choice([0, 1]), rnd.randrange(RECORDS), 0, 0) for _ in range(8)])
                for i in range(100)]
        c.send(qp.frame(qp.T_TXN_REQUEST, qp.txn_request(1000 + r, txns)))
        sent += 1
    codes = []
    for _ in range(sent):
        f = c.read_frame()
        if f is None or f[0] != qp.T_TXN_REPLY:
            results.append(("bad frame", f))
            return
        rid, res = qp.parse_reply(f[1])
        codes += [code for code, _ in res]
    results.append(("codes", codes))
    c.close()


def body(leader, follower):
    results = []
    t = threading.Thread(target=good_client, args=(leader, results))
    t.start()
    rnd = random.Random(1)

    # Random bytes: not a qrstore stream: an error reply, then the server closes.
    c = qp.Conn(leader)
    c.send(bytes(rnd.randrange(256) for _ in range(1000)))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_ERROR and "bad magic" in qp.parse_error(f[1])[2],
           "random bytes get an error reply (bad magic)")
    expect(c.read_frame() is None, "and the connection is closed")
    c.close()

    # Another protocol version.
    c = qp.Conn(leader)
    c.send(qp.frame(qp.T_STATUS_REQUEST, struct.pack("<Q", 1), version=2))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_ERROR and "protocol version 2" in qp.parse_error(f[1])[2],
           "a frame of protocol version 2 gets an error naming the version")
    c.close()

    # Truncated: a header promising 1000 bytes, 10 sent, then the client goes away.
    c = qp.Conn(leader)
    c.send(b"QR" + bytes([1, 1]) + struct.pack("<I", 1000) + b"x" * 10)
    c.close()

    # Oversized: read and discarded, an error, and the connection lives on.
    c = qp.Conn(leader)
    c.send(b"QR" + bytes([1, 1]) + struct.pack("<I", MAX_MSG + 1) + b"\0" * (MAX_MSG + 1))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_ERROR and "exceeds server.max_message_bytes" in qp.parse_error(f[1])[2],
           "an oversized message gets an error naming server.max_message_bytes")
    # Unknown message type, then a malformed request: errors, connection still usable.
    c.send(qp.frame(99, b"hello"))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_ERROR and "unexpected message type 99" in qp.parse_error(f[1])[2],
           "an unknown message type gets an error naming it")
    c.send(qp.frame(qp.T_TXN_REQUEST, struct.pack("<Q", 5) + qp.varint(1 << 30)))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_ERROR and qp.parse_error(f[1])[0] == 5 and
           "exceeds the body" in qp.parse_error(f[1])[2], "a malformed request gets an error with its request id")
    # Unknown op kind and keys out of range: rejected results; the valid txns beside them run.
    txns = [(1, [(qp.KIND_READ, 1, 0, 0)]),
            (2, [(9, 1, 0, 0)]),
            (3, [(qp.KIND_UPDATE, RECORDS, 0, 0)]),
            (4, [(2, 5, RECORDS + 7, 0)]),
            (5, [(qp.KIND_UPDATE, 2, 0, 0)])]
    c.send(qp.frame(qp.T_TXN_REQUEST, qp.txn_request(6, txns)))
    f = c.read_frame()
    expect(f is not None and f[0] == qp.T_TXN_REPLY, "the connection lives on after every error")
    rid, res = qp.parse_reply(f[1])
    expect(rid == 6 and [code for code, _ in res] == [0, 3, 3, 3, 0],
           "unknown op kind and out-of-range keys are rejected, the others committed: %s" % res)
    expect("unknown op kind 9" in res[1][1] and f"key {RECORDS} out of range" in res[2][1] and
           f"source key {RECORDS + 7} out of range" in res[3][1], "each rejection says why")
    c.close()

    # A follower asked to run a txn answers "not leader" with the leader's address.
    c = qp.Conn(follower)
    c.send(qp.frame(qp.T_TXN_REQUEST, qp.txn_request(8, [(1, [(0, 1, 0, 0)])])))
    f = c.read_frame()
    r = qp.Reader(f[1]) if f else None
    expect(f is not None and f[0] == qp.T_NOT_LEADER and r.u64() == 8 and r.string() == "n0" and
           r.string() == f"127.0.0.1:{leader}", "a follower answers not-leader with the leader's address")
    c.close()

    # A client that sends and never reads: its sends stall (back-pressure), the server's memory
    # stays bounded, and other clients are unaffected (the good client runs meanwhile).
    pid = int(open(os.environ["QRSTORE_RUN_DIR"] + "/badinput/n0.pid").read())
    rss0 = rss_mb(pid)
    greedy = qp.Conn(leader)
    greedy.s.setblocking(False)
    # Empty requests: no txn is in flight, yet every one gets a reply the client never reads.
    frame = qp.frame(qp.T_TXN_REQUEST, qp.txn_request(1, []))
    sent, stalled_since = 0, None
    import time
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            n = greedy.s.send(frame)
            sent += n
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.time()
            if time.time() - stalled_since > 2:
                break
            time.sleep(0.01)
    rss1 = rss_mb(pid)
    expect(stalled_since is not None,
           f"a client that never reads its replies is stalled after {sent // len(frame)} empty requests")
    expect(rss1 - rss0 < 300, f"the server's memory stays bounded meanwhile ({rss0:.0f} MB -> {rss1:.0f} MB)")
    greedy.close()

    t.join(60)
    expect(not t.is_alive(), "the well-behaved client finished")
    expect(results and results[0][0] == "codes" and len(results[0][1]) == 4000 and set(results[0][1]) == {0},
           "the well-behaved client's 4000 txns all committed (%s)" % (results[0][0] if results else "none"))
    s = qp.status(leader)
    expect(s["state"] == "serving" and s["role"] == "leader", "the leader still serves: %s" % s)


if __name__ == "__main__":
    main()
