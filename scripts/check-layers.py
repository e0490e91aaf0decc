#!/usr/bin/env python3
"""Checks the include graph against the layers: a stage includes only the stages below it, a
cluster room only the rooms below it, and the client and bench only what they are allowed.

Usage: scripts/check-layers.py [--root DIR] [--binaries BIN_DIR]
  --root DIR         the source tree (default: this script's repository)
  --binaries BIN_DIR also check that the client and bench programs there link no server, no
                     raft and no ZooKeeper code (nm), and no ZooKeeper library (ldd)

Exits 0 when every include and link agrees, 1 naming each one that does not, 2 on bad input.
"""
import argparse
import os
import re
import subprocess
import sys

# Who may include whom: a unit (a top-level folder, or a room of cluster/) and the units it may
# include besides itself. Headers of a higher unit that are plain values (commit/outcome.h) are
# listed one by one.
ALLOWED = {
    "common": set(),
    "storage": {"common"},
    "workloads": {"common", "storage"},
    "planner": {"common", "storage"},
    "executor": {"common", "storage", "planner"},
    "commit": {"common", "storage", "planner", "executor"},
    "engine": {"common", "storage", "workloads", "planner", "executor", "commit"},
    "replication": {"common"},
    # The cluster's rooms, bottom up: the port's contract, the cluster's config, sessions, the
    # follower's side, recovery, the partitioned row, the node that wires them all.
    "cluster/port": {"common", "storage", "commit/outcome.h"},
    "cluster/config": {"common", "storage", "workloads", "engine/engine.h", "replication/config_keys.h"},
    "cluster/sessions": {"common", "storage", "planner", "commit/outcome.h", "cluster/port"},
    "cluster/follow": {"common", "storage", "planner", "executor", "engine", "replication", "cluster/port"},
    "cluster/recovery": {"common", "storage", "workloads", "planner", "executor", "cluster/port", "cluster/config",
                         "cluster/sessions"},
    "cluster/row": {"common", "storage", "workloads", "planner", "executor", "commit", "engine", "replication",
                    "cluster/port", "cluster/config", "cluster/sessions", "cluster/follow", "cluster/recovery"},
    "cluster/node": {"common", "storage", "workloads", "planner", "executor", "commit", "engine", "replication",
                     "cluster/port", "cluster/config", "cluster/sessions", "cluster/follow", "cluster/recovery",
                     "cluster/row"},
    # The client speaks the port's contract and reads cluster configs; it links no server.
    "client": {"common", "storage", "workloads", "cluster/port/protocol.h", "cluster/config"},
    # The benchmarks drive the engine in-process (row_bench: the row's in-process link).
    "bench": {"common", "storage", "workloads", "planner", "executor", "commit", "engine",
              "cluster/row/row_local_link.h"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def unit_of(path):
    """The unit a repository path belongs to, or None (tests, tools, third-party)."""
    parts = path.split("/")
    if parts[0] == "cluster" and len(parts) > 2:
        return "cluster/" + parts[1]
    return parts[0] if parts[0] in ALLOWED and len(parts) > 1 else None


def allowed(unit, target):
    rules = ALLOWED[unit]
    if unit_of(target) == unit:
        return True
    if target in rules:
        return True
    tu = unit_of(target)
    return tu is not None and tu in rules


def check_includes(root):
    bad = []
    checked = 0
    for unit in ALLOWED:
        base = os.path.join(root, unit)
        if not os.path.isdir(base):
            bad.append(f"{unit}/: missing (the layer table names it)")
            continue
        for dirpath, _, files in os.walk(base):
            rel_dir = os.path.relpath(dirpath, root)
            if unit_of(rel_dir + "/x") != unit:
                continue  # a room of cluster/ is checked as its own unit
            for f in sorted(files):
                if not f.endswith((".h", ".cc")):
                    continue
                rel = os.path.join(rel_dir, f)
                with open(os.path.join(root, rel), encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if unit_of(target) is None:
                            continue  # not one of ours (or a test helper)
                        checked += 1
                        if not allowed(unit, target):
                            bad.append(f"{rel}:{n}: {unit} includes {target}")
    return bad, checked


# Symbols a program that links no server, raft or ZooKeeper code must not hold (nm -C).
FORBIDDEN_SYMBOLS = {
    "qrstore-client": [r"ServerImpl", r"replication::raft::(?!AddConfigKeys)", r"zookeeper::(?!AddConfigKeys)",
                       r"\bzoo_", r"engine::Pipeline::", r"cluster::RowNode::"],
    "qrstore-bench": [r"ServerImpl", r"replication::raft::", r"zookeeper::", r"\bzoo_", r"ClientService"],
    "qrstore-row-bench": [r"ServerImpl", r"replication::raft::", r"zookeeper::", r"\bzoo_", r"ClientService"],
    "qrstore-engine-perf": [r"ServerImpl", r"replication::raft::", r"zookeeper::", r"\bzoo_", r"ClientService"],
}


def check_binaries(bindir):
    bad = []
    for prog, patterns in FORBIDDEN_SYMBOLS.items():
        path = os.path.join(bindir, prog)
        if not os.path.exists(path):
            bad.append(f"{path}: missing")
            continue
        syms = subprocess.run(["nm", "-C", path], capture_output=True, text=True, check=True).stdout
        for p in patterns:
            hits = [l for l in syms.splitlines() if re.search(p, l)]
            if hits:
                bad.append(f"{prog}: {len(hits)} symbol(s) matching {p!r}, e.g. {hits[0].split(' ', 2)[-1]}")
        libs = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        if "zookeeper" in libs:
            bad.append(f"{prog}: links the ZooKeeper library (ldd)")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--binaries", default=None)
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    if not os.path.isdir(args.root):
        print(f"check-layers: --root {args.root}: not a directory", file=sys.stderr)
        sys.exit(2)
    if args.binaries is not None and not os.path.isdir(args.binaries):
        print(f"check-layers: --binaries {args.binaries}: not a directory", file=sys.stderr)
        sys.exit(2)
    bad, checked = check_includes(args.root)
    if args.binaries is not None:
        bad += check_binaries(args.binaries)
    for b in bad:
        print(b)
    print(f"check-layers: {checked} includes checked{', and the programs in ' + args.binaries if args.binaries else ''}: "
          f"{len(bad)} against the layers")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
