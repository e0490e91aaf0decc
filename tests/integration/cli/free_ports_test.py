#!/usr/bin/env python3
"""scripts/free_ports.py: the ports concurrent tests choose never collide.

Checks, in a registry folder of its own: eight processes asking for 40 ports each at the same
time get 320 distinct ports, all below the kernel's ephemeral range when there is room there;
a port reserved by a live process is never handed out, one reserved by a process that exited
is; a port something listens on is never handed out; --avoid is honoured; bad arguments exit 2.
"""
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "../../../scripts/free_ports.py")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def run(args, env):
    return subprocess.run([sys.executable, SCRIPT] + args, env=env, capture_output=True, text=True)


def main():
    reg = tempfile.mkdtemp(prefix="qrstore-ports-test.")
    env = dict(os.environ, QRSTORE_PORTS_DIR=reg)
    # Eight at once, each reserving for a live owner (this process's children stay alive until
    # all have printed: the owner is this test).
    procs = [subprocess.Popen([sys.executable, SCRIPT, "40", "--owner", str(os.getpid())], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]
    got = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            fail("free_ports.py exited %d" % p.returncode)
        got += [int(x) for x in out.split()]
    if len(got) != 320 or len(set(got)) != 320:
        fail("8 x 40 ports asked at once: %d given, %d distinct" % (len(got), len(set(got))))
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        eph = int(f.read().split()[0])
    if eph - 10000 >= 1000 and max(got) >= eph:
        fail("port %d is in the ephemeral range (from %d)" % (max(got), eph))
    print("-- 8 concurrent callers: 320 distinct ports, all below %d" % eph)

    # Reserved by a live process (this one): never handed out; by an exited one: taken over.
    child = subprocess.Popen(["true"])  # exited and reaped below: no process has its pid now
    child.wait()
    live_reg = tempfile.mkdtemp(prefix="qrstore-ports-test.")
    env2 = dict(os.environ, QRSTORE_PORTS_DIR=live_reg)
    lo = 10000 if eph - 10000 >= 1000 else 1024
    hi = eph if eph - 10000 >= 1000 else 65536
    # Every candidate but 20 reserved by this live process; 10 of the 20 by the exited child.
    free = []
    for port in range(lo, hi):
        if len(free) < 20 and port % 997 == 0 and bindable(port):
            free.append(port)
            if len(free) <= 10:
                with open(os.path.join(live_reg, str(port)), "w") as f:
                    f.write(str(child.pid))
            continue
        with open(os.path.join(live_reg, str(port)), "w") as f:
            f.write(str(os.getpid()))
    r = run(["20", "--owner", "1"], env2)
    if r.returncode != 0:
        fail("with 20 candidates left: exit %d: %s" % (r.returncode, r.stderr))
    given = sorted(int(x) for x in r.stdout.split())
    expected = sorted(p for p in free if p != 2181)
    if given != expected:
        fail("expected the 20 unreserved or dead-owned ports %s, got %s" % (expected, given))
    r = run(["1", "--owner", "1"], env2)
    if r.returncode != 1:
        fail("every port reserved by live processes: exit %d (expected 1)" % r.returncode)
    print("-- a live owner's ports are never given, an exited owner's are")

    # A port something listens on, and ports in --avoid, are never given.
    s = socket.socket()
    s.bind(("127.0.0.1", given[0]))
    s.listen()
    os.unlink(os.path.join(live_reg, str(given[0])))
    for p in given[1:3]:
        os.unlink(os.path.join(live_reg, str(p)))
    r = run(["1", "--owner", "1", "--avoid", "%d,%d" % (given[1], given[2])], env2)
    if r.returncode != 1:
        fail("only a listening port and avoided ones left: exit %d, printed %r" % (r.returncode, r.stdout))
    s.close()
    print("-- a listening port and --avoid ports are never given")

    for bad in (["0"], ["x"], [], ["3", "--owner"], ["3", "--avoid", "a"]):
        r = run(bad, env)
        if r.returncode != 2 or not r.stderr:
            fail("bad arguments %s: exit %d (expected 2 with a message)" % (bad, r.returncode))
    print("-- bad arguments exit 2")
    subprocess.run(["rm", "-rf", reg, live_reg])
    print("PASS")


if __name__ == "__main__":
    main()
