#!/usr/bin/env python3
"""zk-cut-proxy: a TCP relay in front of a ZooKeeper server that can cut one process off it.

Usage: zk-cut-proxy.py --listen-port PORT --server HOST:PORT --cut-file FILE [--ready-file FILE]
                       [--exit-with PID]

Every qrstore node of a test (or of scripts/failover-timeline.sh --fault zk-cut) is given
127.0.0.1:PORT as its ZooKeeper address; the relay passes their bytes to the server both ways.
While FILE exists and holds a pid, that process is cut off from ZooKeeper as a dropped link
would cut it: the bytes of its open connections are dropped in both directions (its connections
stay open and silent, as a dropped route leaves them), and the connections it opens meanwhile are
accepted and then ignored (its connect requests never get an answer). Other processes are not
touched: the node's followers and clients still reach it, and the other nodes still reach
ZooKeeper. Removing FILE heals the cut: connections opened after that are relayed again (the
ZooKeeper client gives up on its silent connections by itself and opens new ones).

A connection belongs to the process that holds its socket: the relay looks the peer's port up
in /proc/net/tcp (the socket's inode) and the inode among /proc/PID/fd of the cut pid (Linux
only; the relay and the nodes must run as the same user or as root). The pid is checked when a
connection opens and whenever the cut file changes, every 20 ms.

Prints "relaying 127.0.0.1:PORT -> SERVER" once listening (and writes --ready-file), then a line
per cut and heal. Stops on SIGTERM or SIGINT, or once the process --exit-with names is gone (a
test's shell, so the relay never outlives the test).
"""
import argparse
import asyncio
import os
import signal
import sys
import time


def socket_inode(local_port, remote_port):
    """The inode of the 127.0.0.1 TCP socket whose local port is local_port, connected to
    remote_port, or None."""
    want_local = "0100007F:%04X" % local_port
    want_remote = "0100007F:%04X" % remote_port
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[1] == want_local and parts[2] == want_remote:
                    return parts[9]
    except OSError:
        return None
    return None


def pid_holds(pid, inode):
    target = "socket:[%s]" % inode
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == target:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


class Relay:
    def __init__(self, args):
        self.args = args
        self.server_host, port = args.server.rsplit(":", 1)
        self.server_port = int(port)
        self.cut_pid = None
        self.conns = []  # {"inode": str or None, "dropped": bool}

    def read_cut(self):
        try:
            with open(self.args.cut_file) as f:
                text = f.read().strip()
            return int(text) if text else None
        except (OSError, ValueError):
            return None

    async def watch(self, stop):
        while not stop.is_set():
            if self.args.exit_with and not os.path.exists("/proc/%d" % self.args.exit_with):
                stop.set()
                return
            pid = self.read_cut()
            if pid != self.cut_pid:
                if pid is not None:
                    for c in self.conns:
                        if c["inode"] is not None and pid_holds(pid, c["inode"]):
                            c["dropped"] = True
                    print("%s cut: pid %d's ZooKeeper traffic is dropped (%d open connection(s) of it)" %
                          (stamp(), pid, sum(1 for c in self.conns if c["dropped"])), flush=True)
                else:
                    print("%s healed: pid %d's new connections are relayed again" % (stamp(), self.cut_pid),
                          flush=True)
                self.cut_pid = pid
            await asyncio.sleep(0.02)

    async def handle(self, reader, writer):
        try:
            await self.serve(reader, writer)
        except asyncio.CancelledError:
            pass  # the relay stops

    async def serve(self, reader, writer):
        peer = writer.get_extra_info("peername")
        inode = socket_inode(peer[1], self.args.listen_port)
        pid = self.cut_pid
        conn = {"inode": inode, "dropped": pid is not None and inode is not None and pid_holds(pid, inode)}
        self.conns.append(conn)
        try:
            if conn["dropped"]:
                # Accepted and ignored: its bytes go nowhere, nothing comes back.
                while await reader.read(65536):
                    pass
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(self.server_host, self.server_port)
            except OSError:
                return
            await asyncio.gather(self.pipe(reader, up_writer, conn, True), self.pipe(up_reader, writer, conn, False))
            up_writer.close()
        except (ConnectionError, OSError):
            pass
        finally:
            self.conns.remove(conn)
            writer.close()

    async def pipe(self, src, dst, conn, to_server):
        """Copies src to dst until src ends; a dropped connection's bytes go nowhere, and the
        server closing it is not passed on (a cut link carries no FIN either)."""
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if conn["dropped"]:
                    continue
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        if to_server or not conn["dropped"]:
            try:
                dst.close()
            except (ConnectionError, OSError):
                pass


def stamp():
    t = time.time()
    return time.strftime("%H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1) * 1000)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--listen-port", type=int, required=True, help="port on 127.0.0.1 the nodes connect to")
    ap.add_argument("--server", required=True, help="the ZooKeeper server, HOST:PORT")
    ap.add_argument("--cut-file", required=True, help="while it exists and holds a pid, that process is cut off")
    ap.add_argument("--ready-file", help="written once listening")
    ap.add_argument("--exit-with", type=int, help="stop once this pid is gone")
    args = ap.parse_args()
    relay = Relay(args)
    srv = await asyncio.start_server(relay.handle, "127.0.0.1", args.listen_port)
    print("relaying 127.0.0.1:%d -> %s" % (args.listen_port, args.server), flush=True)
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write("ready\n")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    watcher = asyncio.create_task(relay.watch(stop))
    async with srv:
        await stop.wait()
    watcher.cancel()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
