#!/usr/bin/env python3
"""A corrupted slice delivered to a follower: the leader damages one
planned slice on its way to replication (the test hook server.test_corrupt_slice_batch); both
followers refuse it with an error naming the batch and planner and stop applying, without hanging
or crashing; the leader keeps committing and answering; `down` ends every process promptly, the
followers with a failure status. Usage: corrupt_slice_test.py (QRSTORE_BIN set)."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qrproto as qp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
from free_ports import free_ports  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RECORDS = 5000
BAD_BATCH = 2


def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok -", what)


def main():
    tmp = tempfile.mkdtemp(prefix="qrstore-corrupt.")
    os.environ["QRSTORE_RUN_DIR"] = tmp + "/run"
    ports = free_ports(6, os.getpid())
    cfg = tmp + "/corrupt.yaml"
    nodes = "".join(f"    - {{name: n{r}, host: 127.0.0.1, client_port: {ports[2 * r]}, peer_port: {ports[2 * r + 1]}, row: {r}}}\n"
                    for r in range(3))
    with open(cfg, "w") as f:
        f.write(f"cluster:\n  name: corrupt\n  nodes:\n{nodes}"
                f"replication:\n  backend: raft\n  raft:\n    election_ticks: 100\n"
                f"ycsb:\n  records: {RECORDS}\nbatch:\n  txns: 200\n  timeout_ms: 5\n"
                f"server:\n  test_corrupt_slice_batch: {BAD_BATCH}\n  drain_timeout_ms: 20000\n")
    up = subprocess.run([SRC + "/scripts/cluster.sh", "up", cfg], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit("FAIL: cluster up\n" + up.stdout + up.stderr)
    try:
        c = qp.Conn(ports[0])
        rnd = random.Random(3)
        for r in range(10):
            txns = [(r * 200 + i + 1, [(rnd.choice([0, 1]), rnd.randrange(RECORDS), 0, 0) for _ in range(4)])
                    for i in range(200)]
            c.send(qp.frame(qp.T_TXN_REQUEST, qp.txn_request(r, txns)))
        codes = []
        for _ in range(10):
            f = c.read_frame()
            expect(f is not None and f[0] == qp.T_TXN_REPLY, "the leader answers every request")
            codes += [code for code, _ in qp.parse_reply(f[1])[1]]
        expect(len(codes) == 2000 and set(codes) == {0}, "the leader committed all 2000 txns")
        deadline = time.time() + 30
        states = {}
        while time.time() < deadline:
            states = {n: qp.status(ports[2 * n]) for n in (1, 2)}
            if all(s["state"] == "failed" for s in states.values()):
                break
            time.sleep(0.1)
        for n, s in states.items():
            expect(s["state"] == "failed" and f"batch {BAD_BATCH}, planner 0" in s["error"],
                   f"follower n{n} stopped applying with an error naming the batch and planner: {s['error']}")
        expect(qp.status(ports[0])["state"] == "serving", "the leader still serves")
    finally:
        t0 = time.time()
        down = subprocess.run([SRC + "/scripts/cluster.sh", "down", cfg], capture_output=True, text=True)
        took = time.time() - t0
    out = down.stdout + down.stderr
    print(out, end="")
    expect("node n0 stopped cleanly" in out, "the leader stops cleanly")
    expect("node n1 stopped with status 1" in out and "node n2 stopped with status 1" in out,
           "the failed followers exit with status 1")
    expect(down.returncode != 0 and took < 30, f"down reports the failure and takes {took:.1f} s (no hang)")
    expect(not subprocess.run(["pgrep", "-f", cfg], capture_output=True).stdout, "no process is left")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
