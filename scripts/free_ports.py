#!/usr/bin/env python3
"""Usage: free_ports.py N [--owner PID] [--avoid PORTS]

Prints N distinct TCP ports on 127.0.0.1, space-separated, that nothing listens on and that no
other live process has reserved. Tests and scripts that start servers on ports chosen at run
time use it, often several at once (ctest -j), so two things must not happen between choosing a
port and a server listening on it:
  - another test choosing the same port: each port is reserved for OWNER (default: the calling
    process's parent, i.e. the shell that runs this) by a file named after it in
    $QRSTORE_PORTS_DIR (default /tmp/qrstore-ports), created and written while holding an
    exclusive flock on the folder's .lock file (so no caller ever reads a reservation half
    written, and two never take over one stale reservation at once); a reservation whose owner
    has exited is taken over, so nothing needs releasing;
  - an outgoing connection taking it as its local port: ports come from below the kernel's
    ephemeral range (net.ipv4.ip_local_port_range) when there is room there, in random order.
--avoid takes ports (comma- or space-separated) that are handed out already but may not be
listening yet (a configured cluster's nodes), and never picks them.
Exit status: 0, or 2 on bad arguments, or 1 when N ports cannot be found.
Importable: free_ports(n, owner, avoid) returns the list.
"""
import errno
import fcntl
import os
import random
import socket
import sys

LOWEST = 10000  # below this: well-known services and the ports people configure by hand


def _ephemeral_start():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reserve(path, owner):
    """Creates the reservation file for owner; False if a live process holds it. The caller
    holds the folder's lock, which tests/unit/cluster/row/loopback_addresses.h takes too."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(path) as f:
                    held = int(f.read().strip() or "0")
            except (OSError, ValueError):
                held = 0
            if held > 0 and (held == owner or _alive(held)):
                return False
            # Its owner exited: the file goes and the creation is tried once more (another
            # process may win that race, which is as good).
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(owner))
        return True
    return False


def _bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_ports(n, owner=None, avoid=()):
    owner = owner if owner is not None else os.getppid()
    folder = os.environ.get("QRSTORE_PORTS_DIR", "/tmp/qrstore-ports")
    os.makedirs(folder, exist_ok=True)
    top = _ephemeral_start()
    if top - LOWEST < 1000:  # no room below the ephemeral range: use the whole unprivileged range
        candidates = list(range(1024, 65536))
    else:
        candidates = list(range(LOWEST, top))
    random.SystemRandom().shuffle(candidates)
    ports = []
    lock = os.open(os.path.join(folder, ".lock"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed, or when this process dies
        for port in candidates:
            if len(ports) == n:
                break
            if port == 2181 or port in avoid:
                continue
            path = os.path.join(folder, str(port))
            if not _reserve(path, owner):
                continue
            if not _bindable(port):
                os.unlink(path)
                continue
            ports.append(port)
    finally:
        os.close(lock)
    if len(ports) < n:
        raise OSError(errno.EADDRINUSE, "only %d of %d free ports found" % (len(ports), n))
    return ports


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    args = argv[1:]
    owner = None
    avoid = set()
    count = None
    while args:
        a = args.pop(0)
        if a in ("--owner", "--avoid") and args:
            v = args.pop(0)
            if a == "--owner" and v.isdigit():
                owner = int(v)
                continue
            if a == "--avoid" and all(x.isdigit() for x in v.replace(",", " ").split()):
                avoid = {int(x) for x in v.replace(",", " ").split()}
                continue
        elif a.isdigit() and count is None and int(a) > 0:
            count = int(a)
            continue
        print("free_ports.py: bad argument %r: give N (a positive count), --owner PID, --avoid PORTS "
              "(see --help)" % a, file=sys.stderr)
        return 2
    if count is None:
        print("free_ports.py: give N, the number of ports (see --help)", file=sys.stderr)
        return 2
    try:
        print(" ".join(str(p) for p in free_ports(count, owner, avoid)))
    except OSError as e:
        print("free_ports.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
