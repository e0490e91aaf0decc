#!/usr/bin/env python3
"""Usage: scripts/paper-figures.sh [--quick] [--figure N ...] [--out DIR] [--build DIR]
                                 [--reps R] [--seconds S] [--warmup S]

Reproduces figures of the QR-Store paper's evaluation (section 5) on this machine, each as a
sweep of real clusters started with scripts/cluster.sh and driven by qrstore-client:
  4   the replication layer alone (qrstore-repl-bench: 3 members, 100 batches in flight), payloads
      100 B to 800 KB, raft and ZooKeeper, each without and with Snappy: latency and batches/s
  6   batch size (batch.txns), rf 0 / 1 / 2
  7   partitions in a row, 1-4, rf 0 / 1 / 2 (grids made from configs/cluster-2x3-raft.yaml, the
      paper's workload, half the txns on two partitions): all nodes share this machine's 2 cores,
      so this shows what partitioning costs, not how it scales
  8   Zipf theta (ycsb.theta), rf 0 / 1 / 2
  9   multi-partition share (ycsb.mp_ratio) on 2 partitions in a row, rf 0 / 1 / 2
  10  operations per txn (ycsb.ops_per_txn), ops/s, rf 0 / 1 / 2
  11  QR-Store against Calvin's replication, 2 partitions in a row, half the txns on both, theta 0.9,
      10 ops, rf 1 / 2: the plan over raft (QR-Store), the input over ZooKeeper with Snappy (Calvin's
      point and layer), the plan over ZooKeeper with Snappy (the point alone), and the writes over
      raft (RP3)
  12  thread- vs node-level synchronisation (engine.sync), rf 0 / 1 / 2
  13  speculative vs synchronous replication (replication.mode), rf 1 / 2
  14  replication factor 1-4, 6 and 8 (configs/cluster-raft-rfN.yaml; rf 6 and 8: rf 4's config
      with 7 and 9 members), without and with Snappy
  lat latency (p50, p99) against offered load (qrstore-client --target-tps), rf 0 / 1 / 2
  points  what the leader replicates (replication.point): its plan (RP2), its input (RP1) or its
      writes (RP3), rf 2, on the paper's workload, STAR's and the paper's at theta 0.9: throughput,
      bytes replicated and the followers' CPU per txn (docs/replication-points.md)
rf 0 is configs/cluster-none.yaml (the paper's Q-Store), rf 1 configs/cluster-raft-rf1.yaml, rf 2
configs/cluster-raft.yaml (raft, durable, sessions), every node on this machine; the workload is
the configs' (the paper's default: YCSB, 1M records, 16 ops, 50% writes, theta 0; figure 9 sets
it on the row configs, whose own is STAR's). Figure 4
and figure 11 start a fresh ZooKeeper server for each run that uses one (scripts/zk-server.sh, 4 GB
heap, under OUT/zk, removed after the run) unless QRSTORE_ZK_HOSTS names one.

Each point of a figure is run R times (--reps, default 3, at least 3) interleaved with the
other series at that point: repetition r runs the series in an order rotated by r, so a drift of
the host falls on all of them alike; a series' ratio to the figure's baseline is taken within
each repetition (pairs), and its median is reported. Every run brings a fresh cluster up, runs
qrstore-client --warmup-s W --duration-s S --json, and brings it down; the cluster's ports are
taken from scripts/free_ports.py (copies of the configs under OUT/configs), so a cluster on the
shipped ports is not disturbed.

Writes, per figure N, into --out (default paper-figures-<date>): figN-runs.csv (every run, with
the exact command), figN.csv (per point and series: medians, the ratio to the baseline), figN.png
(needs python3-matplotlib) and figN.md; host.txt (lscpu model, cores, commit). --quick: 3
repetitions of 2 s after 1 s at one or two points (every figure in about 13 minutes here:
733 s for the eleven before figure 11, 46 s for figure 11); defaults: 10 s after 2 s at every
point (every figure in about 100 minutes here, the sum of the full runs measured; figure 4
alone about 21). Exit status 0, 1 when a run failed, 2 on bad arguments.
"""
import csv
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from free_ports import free_ports  # noqa: E402

RF_CONFIG = {
    "rf0": "configs/cluster-none.yaml",
    "rf1": "configs/cluster-raft-rf1.yaml",
    "rf2": "configs/cluster-raft.yaml",
    "rf3": "configs/cluster-raft-rf3.yaml",
    "rf4": "configs/cluster-raft-rf4.yaml",
    # Larger groups: rf 4's config with every member added (MEMBERS_TEMPLATE).
    "rf6": "members:7",
    "rf8": "members:9",
}
# The config a "members:K" group is made from: its nodes replaced by n0 .. n(K-1).
MEMBERS_TEMPLATE = "configs/cluster-raft-rf4.yaml"
# Two partitions in one row (the paper's partitioned QR-Store at this machine's scale), rf 0 / 1 / 2.
ROW_CONFIG = {
    "rf0": "configs/cluster-2x1-none.yaml",
    "rf1": "configs/cluster-2x2-raft.yaml",
    "rf2": "configs/cluster-2x3-raft.yaml",
}
# The paper's default workload on the row configs (theirs is STAR's smaller one).
PAPER_ON_ROWS = ["--ycsb.records=1000000", "--ycsb.ops_per_txn=16", "--ycsb.write_ratio=0.5"]
# Workloads by name (figure "points"): the configs' own is the paper's default.
WORKLOADS = {
    "paper": [],
    "star": ["--ycsb.records=200000", "--ycsb.ops_per_txn=10", "--ycsb.write_ratio=0.2"],
    "paper-0.9": ["--ycsb.theta=0.9"],
}

# Figure 11: the paper's Calvin workload (theta 0.9, 10 ops per txn, half the txns on both
# partitions) on the row configs; its series: point and backend. ZKHOSTS is replaced by the
# figure's ZooKeeper server (started like figure 4's).
FIG11_WORKLOAD = [o for o in PAPER_ON_ROWS if not o.startswith("--ycsb.ops_per_txn=")] + [
    "--ycsb.theta=0.9", "--ycsb.ops_per_txn=10", "--ycsb.mp_ratio=0.5"]
FIG11_SERIES = {
    "plan-raft": ["--replication.point=plan"],
    "input-zk-snappy": ["--replication.point=input", "--replication.backend=zookeeper",
                        "--replication.zookeeper.hosts=ZKHOSTS", "--replication.compression=snappy"],
    "plan-zk-snappy": ["--replication.point=plan", "--replication.backend=zookeeper",
                       "--replication.zookeeper.hosts=ZKHOSTS", "--replication.compression=snappy"],
    # RP3 beside them: each group's leader replicates its partition's written records per batch.
    "writes-raft": ["--replication.point=writes"],
}


class Figure:
    """A figure: points (x) on its axis, series at each point; run(x, series) gives the config
    and the overrides of one run."""

    def __init__(self, number, title, xlabel, xs, quick_xs, series, baseline, spec, paper, metric="txn_per_s",
                 kind="cluster"):
        self.number = number
        self.title = title
        self.xlabel = xlabel
        self.xs = xs
        self.quick_xs = quick_xs
        self.series = series
        self.baseline = baseline
        self.spec = spec
        self.paper = paper  # what the paper states for it, for the report
        self.metric = metric  # txn_per_s, ops_per_s or batches_per_s: what the ratios and the plot compare
        # cluster: spec gives (shipped config, overrides[, client args]) for a cluster run;
        # repl: spec gives qrstore-repl-bench's arguments (the replication layer alone).
        self.kind = kind


# Figure 7's clusters: P partitions x (rf + 1) rows made from this config (its workload, threads
# and batches; every node one executor), with the paper's workload and half the txns spanning two
# partitions.
GRID_TEMPLATE = "configs/cluster-2x3-raft.yaml"
GRID_WORKLOAD = PAPER_ON_ROWS + ["--ycsb.mp_ratio=0.5"]

# Figure 4's series: backend and compression.
REPL_SERIES = {
    "raft": ["--backend", "raft"],
    "raft-snappy": ["--backend", "raft", "--compression", "snappy"],
    # 1 GiB of batches kept in ZooKeeper (its default 256 MiB): at 100 KB payloads and above its
    # followers read more slowly than the leader writes, and one that falls further behind than
    # this loses its stream (the bench then fails the run).
    "zookeeper": ["--backend", "zookeeper", "--replication.zookeeper.retain_bytes=1073741824"],
    "zookeeper-snappy": ["--backend", "zookeeper", "--compression", "snappy",
                         "--replication.zookeeper.retain_bytes=1073741824"],
}

FIGURES = {
    4: Figure(4, "The replication layer alone: payload size", "payload (bytes)",
              [100, 1000, 10000, 100000, 400000, 800000], [100, 800000],
              ["zookeeper", "zookeeper-snappy", "raft", "raft-snappy"], "zookeeper",
              lambda x, s: REPL_SERIES[s] + ["--replicas", "3", "--payload-bytes", str(x), "--inflight", "100"],
              "ZooKeeper with 100 requests in flight: latency up to 26 ms at large payloads",
              metric="batches_per_s", kind="repl"),
    7: Figure(7, "Partitions in a row (every node on these 2 cores)", "partitions", [1, 2, 3, 4], [1, 4],
              ["rf0", "rf1", "rf2"], "rf0",
              lambda x, s: ("grid:%dx%d" % (x, int(s[2:]) + 1), GRID_WORKLOAD),
              "linear scaling with the servers added: 2, 1.8 and 1.7M txn/s for rf 0 / 1 / 2 at 16 servers "
              "(each its own host)"),
    6: Figure(6, "Varying batch size", "batch size (txns)", [2000, 5000, 10000, 20000, 40000],
              [2000, 40000], ["rf0", "rf1", "rf2"], "rf0",
              # The client keeps two batches in flight over its 4 connections (at least the
              # configs' 5000 each): fewer, and batches above 10K would close on the timeout.
              lambda x, s: (RF_CONFIG[s], ["--batch.txns=%d" % x], ["--outstanding", str(max(5000, x // 2))]),
              "rf 2 p99 latency +16% over Q-Store at 20K batches, +30% at 40K"),
    8: Figure(8, "Varying data access contention", "Zipf theta", [0.0, 0.4, 0.6, 0.8, 0.9, 0.99],
              [0.0, 0.99], ["rf0", "rf1", "rf2"], "rf0",
              lambda x, s: (RF_CONFIG[s], ["--ycsb.theta=%g" % x]),
              "at theta 0 replication costs 6% (rf 1) and 13% (rf 2); medium contention (0.4-0.8) "
              "drops throughput 19-29%, high (0.9-0.99) recovers"),
    9: Figure(9, "Varying the multi-partition share (2 partitions)", "multi-partition txns (share)",
              [0.0, 0.1, 0.15, 0.5, 0.75, 1.0], [0.0, 1.0], ["rf0", "rf1", "rf2"], "rf0",
              lambda x, s: (ROW_CONFIG[s], PAPER_ON_ROWS + ["--ycsb.mp_ratio=%g" % x]),
              "throughput falls as the multi-partition share grows; replication's cost stays a fraction"),
    10: Figure(10, "Varying operations per transaction", "operations per txn", [2, 4, 8, 12, 16], [2, 16],
               ["rf0", "rf1", "rf2"], "rf0",
               lambda x, s: (RF_CONFIG[s], ["--ycsb.ops_per_txn=%d" % x]),
               "ops/s grows linearly with the ops per txn; replication costs 9% (rf 1) and 18% (rf 2)",
               metric="ops_per_s"),
    12: Figure(12, "Node- vs thread-level synchronisation", "replication factor", ["rf0", "rf1", "rf2"],
               ["rf0", "rf1", "rf2"], ["thread", "node"], "thread",
               lambda x, s: (RF_CONFIG[x], ["--engine.sync=%s" % s]),
               "thread-level synchronisation: up to +5% throughput, up to -14% latency"),
    13: Figure(13, "Speculative vs synchronous replication", "replication factor", ["rf1", "rf2"],
               ["rf1", "rf2"], ["speculative", "sync"], "speculative",
               lambda x, s: (RF_CONFIG[x], ["--replication.mode=%s" % s]),
               "speculative replication improves throughput by up to 30%"),
    14: Figure(14, "Replication factor, with and without Snappy", "replication factor",
               ["rf1", "rf2", "rf3", "rf4", "rf6", "rf8"],
               ["rf1", "rf4"], ["none", "snappy"], "none",
               lambda x, s: (RF_CONFIG[x], ["--replication.compression=%s" % s]),
               "past rf 4 replication costs significantly (up to 41% and 26% at rf 8); compression pays "
               "only at high rf (6-8), otherwise it adds work to the leaders"),
    # Not a figure of the paper: latency against offered load (the client paces its senders).
    "lat": Figure("lat", "Latency against throughput", "offered load (txn/s)",
                  [50000, 100000, 200000, 300000, 400000], [100000, 300000], ["rf0", "rf1", "rf2"], "rf0",
                  lambda x, s: (RF_CONFIG[s], [], ["--target-tps", str(x)]),
                  "no figure: the paper reports p99 per configuration at full load only"),
    # Figure 11 as the paper ran it, at this machine's scale: 2 partitions in a row, half the txns
    # on both, theta 0.9, 10 ops: Calvin's replication (its input over ZooKeeper with Snappy)
    # against QR-Store's (its plan over the integrated raft), and the plan over ZooKeeper with
    # Snappy to tell the point from the backend. Both engines are qrstore's (the paper's Calvin also
    # executes by locking). The writes over raft (RP3) beside them.
    11: Figure(11, "QR-Store's replication against Calvin's, 2 partitions, theta 0.9, 10 ops", "replication factor",
               ["rf1", "rf2"], ["rf2"], ["plan-raft", "input-zk-snappy", "plan-zk-snappy", "writes-raft"], "plan-raft",
               lambda x, s: (ROW_CONFIG[x], FIG11_WORKLOAD + FIG11_SERIES[s]),
               "QR-Store (RP2, integrated replication) up to 6x Calvin (RP1 over ZooKeeper with compression) at "
               "theta 0.9, 10 ops, 50% multi-partition over 2 partitions; QR-Store's integrated replication within "
               "8% of Q-Store"),
    # Figure 11's comparison on one partition (the paper's is over ZooKeeper, 2 partitions).
    "points": Figure("points", "Replicating the plan (RP2), the input (RP1) or the writes (RP3), rf 2", "workload",
                     ["paper", "star", "paper-0.9"], ["star"], ["plan", "input", "writes"], "plan",
                     lambda x, s: (RF_CONFIG["rf2"], WORKLOADS[x] + ["--replication.point=%s" % s]),
                     "RP2 up to 6x RP1 at high contention (Fig. 11: ZooKeeper, theta 0.9, 2 partitions)"),
}


def fail(msg, code=2):
    print("paper-figures: " + msg, file=sys.stderr)
    sys.exit(code)


def figure_key(word):
    """The FIGURES key `word` names; exits 2 naming the problem when it names none."""
    if not word.isdigit() and word not in FIGURES:
        fail("--figure takes figure numbers (or %s), not %r" % (
            ", ".join(str(k) for k in FIGURES if not isinstance(k, int)), word))
    n = int(word) if word.isdigit() else word
    if n not in FIGURES:
        fail("figure %s is not one this script reproduces (it does: %s; figures 1-3 and 5 of the paper illustrate "
             "the design)" % (n, ", ".join(str(k) for k in FIGURES)))
    return n


def parse_args(argv):
    a = {"quick": False, "figures": [], "out": None, "build": "build", "reps": 3, "seconds": None,
         "warmup": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if arg == "--quick":
            a["quick"] = True
            i += 1
            continue
        if arg in ("--figure", "--out", "--build", "--reps", "--seconds", "--warmup"):
            if i + 1 >= len(argv):
                fail("%s needs a value (see --help)" % arg)
            v = argv[i + 1]
            i += 2
            if arg == "--figure":
                a["figures"] += [figure_key(part) for part in v.replace(",", " ").split()]
                # "--figure 12 13": take the following bare numbers too
                while i < len(argv) and (argv[i].isdigit() or argv[i] in FIGURES):
                    a["figures"].append(figure_key(argv[i]))
                    i += 1
            elif arg in ("--reps", "--seconds", "--warmup"):
                if not v.isdigit() or int(v) < (3 if arg == "--reps" else 1):
                    fail("%s must be a whole number >= %d, not %r" % (arg, 3 if arg == "--reps" else 1, v))
                a[arg[2:]] = int(v)
            else:
                a[arg[2:]] = v
            continue
        fail("unknown argument %r (see --help)" % arg)
    if not a["figures"]:
        a["figures"] = list(FIGURES)
    if a["seconds"] is None:
        a["seconds"] = 2 if a["quick"] else 10
    if a["warmup"] is None:
        a["warmup"] = 1 if a["quick"] else 2
    if a["out"] is None:
        a["out"] = "paper-figures-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return a


def host_line():
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return model, os.cpu_count() or 0, commit


def local_config(shipped, out_dir, tag):
    """A copy of a shipped config (or of a grid made from GRID_TEMPLATE: "grid:PxR") with every
    node's ports taken from the free-port registry and its own cluster name (its own run folder)."""
    if shipped.startswith("grid:"):
        p, r = (int(v) for v in shipped[len("grid:"):].split("x"))
        text = grid_text(p, r)
    elif shipped.startswith("members:"):
        text = members_text(int(shipped[len("members:"):]))
    else:
        text = open(os.path.join(ROOT, shipped)).read()
    names = re.findall(r"\b(client_port|peer_port|row_port):\s*(\d+)", text)
    ports = free_ports(len(names))
    it = iter(ports)
    text = re.sub(r"\b(client_port|peer_port|row_port):\s*\d+", lambda m: "%s: %d" % (m.group(1), next(it)), text)
    text = re.sub(r"(?m)^(\s+name:\s*)(\S+)", lambda m: m.group(1) + "pf-" + tag, text, count=1)
    path = os.path.join(out_dir, "configs", tag + ".yaml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def members_text(members):
    """MEMBERS_TEMPLATE with its nodes replaced by `members` of them (n0 leads; rows 0..K-1) and
    its own cluster name. Ports are placeholders (local_config takes them from the registry)."""
    text = open(os.path.join(ROOT, MEMBERS_TEMPLATE)).read()
    nodes = ["    - {name: n%d, host: 127.0.0.1, client_port: 1, peer_port: 1, partition: 0, row: %d}" % (i, i)
             for i in range(members)]
    text, k = re.subn(r"(?m)^  nodes:.*\n(    - \{.*\n)+", "  nodes:\n" + "\n".join(nodes) + "\n", text, count=1)
    if k != 1:
        sys.exit("paper_figures: %s has no nodes list to replace" % MEMBERS_TEMPLATE)
    return text


def grid_text(partitions, rows):
    """GRID_TEMPLATE with its nodes replaced by `partitions` x `rows` of them (p<P>r<R>; row 0
    leads; row ports only where a partition has followers) and, without followers, backend none.
    Ports are placeholders (local_config takes them from the registry)."""
    text = open(os.path.join(ROOT, GRID_TEMPLATE)).read()
    nodes = []
    for r in range(rows):
        for p in range(partitions):
            row_port = ", row_port: 1" if partitions > 1 and rows > 1 else ""
            nodes.append("    - {name: p%dr%d, host: 127.0.0.1, client_port: 1, peer_port: 1%s, partition: %d, row: %d}"
                         % (p, r, row_port, p, r))
    text = re.sub(r"(?m)^  nodes:.*\n(    - \{.*\n)+", "  nodes:\n" + "\n".join(nodes) + "\n", text, count=1)
    if rows == 1:
        text = re.sub(r"(?m)^(  backend:\s*)\S+", r"\1none", text, count=1)
    return text


def run_repl(a, fig, x, series, rep, order, out_dir, env):
    """One qrstore-repl-bench run of figure `fig` (kind repl)."""
    tag = "fig%s-%s-%s-r%d" % (fig.number, str(x).replace(".", "_"), series, rep)
    args = fig.spec(x, series)
    bench = [os.path.join(env["QRSTORE_BIN"], "qrstore-repl-bench")] + args + [
        "--duration-s", str(a["seconds"]), "--warmup-s", str(a["warmup"]), "--json"]
    if "zookeeper" in series:
        bench += ["--zk-hosts", env["QRSTORE_ZK_HOSTS"]]
    command = "%s/bin/qrstore-repl-bench %s --duration-s %d --warmup-s %d --json%s" % (
        a["build"], " ".join(args), a["seconds"], a["warmup"],
        " --zk-hosts HOST:PORT" if "zookeeper" in series else "")
    row = {"figure": fig.number, "x": x, "series": series, "rep": rep, "order": order, "txn_per_s": "",
           "ops_per_s": "", "batches_per_s": "", "mb_per_s": "", "p50_ms": "", "p99_ms": "",
           "leader_cpu_us_per_txn": "", "ok": 0, "command": command}
    log = os.path.join(out_dir, "logs", tag + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as lf:
        try:
            r = subprocess.run(bench, capture_output=True, text=True, env=env, cwd=ROOT,
                               timeout=a["seconds"] + a["warmup"] + 120)
        except subprocess.TimeoutExpired:
            return row, "qrstore-repl-bench did not finish (%s)" % log
        lf.write(r.stdout)
        lf.write(r.stderr)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return row, "qrstore-repl-bench exited %d (%s)" % (r.returncode, log)
    o = json.loads(lines[-1])
    if not o.get("ok") or not o.get("followers_complete"):
        return row, "qrstore-repl-bench: %s (%s)" % (o.get("error") or "followers incomplete", log)
    row.update({"batches_per_s": o["batches_per_s"], "mb_per_s": o["mb_per_s"], "p50_ms": o["p50_ms"],
                "p99_ms": o["p99_ms"], "ok": 1})
    return row, None


def run_one(a, fig, x, series, rep, order, out_dir, env):
    """One run; a run whose series uses ZooKeeper gets a fresh server of its own (below)."""
    uses_zk = "zookeeper" in series if fig.kind == "repl" else any("ZKHOSTS" in o for o in fig.spec(x, series)[1])
    if not uses_zk or env.get("QRSTORE_ZK_HOSTS"):
        return run_one_on(a, fig, x, series, rep, order, out_dir, env)
    # A throw-away server on 127.0.0.1 for this run alone, removed after it: one run's transaction
    # logs and snapshots (gigabytes at large payloads; a full figure 4 once filled the disk with
    # one server for all runs) neither weigh on the next run nor pile up. 4 GB heap: ZooKeeper keeps
    # its last 500 transactions twice; at 800 KB payloads 1 GB ran out.
    zk_dir = os.path.join(out_dir, "zk", "fig%s-%s-%s-r%d" % (fig.number, str(x).replace(".", "_"), series, rep))
    zk = os.path.join(ROOT, "scripts", "zk-server.sh")
    r = subprocess.run([zk, "start", zk_dir, "--heap-mb", "4096"], capture_output=True, text=True, cwd=ROOT)
    try:
        if r.returncode != 0 or not r.stdout.strip():
            fail("could not start a ZooKeeper server for figure %s: %s" % (fig.number, r.stderr.strip() or r.stdout.strip()),
                 1)
        run_env = dict(env)
        run_env["QRSTORE_ZK_HOSTS"] = r.stdout.strip().splitlines()[-1]
        return run_one_on(a, fig, x, series, rep, order, out_dir, run_env)
    finally:
        subprocess.run([zk, "stop", zk_dir], capture_output=True, cwd=ROOT)
        shutil.rmtree(zk_dir, ignore_errors=True)


def run_one_on(a, fig, x, series, rep, order, out_dir, env):
    if fig.kind == "repl":
        return run_repl(a, fig, x, series, rep, order, out_dir, env)
    spec = fig.spec(x, series)
    shipped, shown_overrides = spec[0], spec[1]
    # The run's ZooKeeper server where a series names one (the command shows the placeholder).
    overrides = [o.replace("ZKHOSTS", env.get("QRSTORE_ZK_HOSTS", "")) for o in shown_overrides]
    client_only = spec[2] if len(spec) > 2 else []  # the client's alone (--target-tps)
    tag = "fig%s-%s-%s-r%d" % (fig.number, str(x).replace(".", "_"), series, rep)
    cfg = local_config(shipped, out_dir, tag)
    client = [os.path.join(env["QRSTORE_BIN"], "qrstore-client"), "--config", cfg] + overrides + client_only + [
        "--duration-s", str(a["seconds"]), "--warmup-s", str(a["warmup"]), "--json", "--log-level", "warn"]
    # The command a reader runs (the shipped config; this script only moved the ports).
    shown = shipped
    if shipped.startswith("grid:"):
        shown = "CONFIG(%s nodes from %s; see OUT/configs/%s.yaml)" % (shipped[len("grid:"):], GRID_TEMPLATE, tag)
    elif shipped.startswith("members:"):
        shown = "CONFIG(%s members from %s; see OUT/configs/%s.yaml)" % (shipped[len("members:"):], MEMBERS_TEMPLATE,
                                                                         tag)
    command = "scripts/cluster.sh up %s --fresh %s; %s/bin/qrstore-client --config %s %s --duration-s %d " \
              "--warmup-s %d --json; scripts/cluster.sh down %s" % (
                  shown, " ".join(shown_overrides), a["build"], shown, " ".join(shown_overrides + client_only),
                  a["seconds"],
                  a["warmup"], shown)
    log = os.path.join(out_dir, "logs", tag + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    row = {"figure": fig.number, "x": x, "series": series, "rep": rep, "order": order, "txn_per_s": "",
           "ops_per_s": "", "p50_ms": "", "p99_ms": "", "leader_cpu_us_per_txn": "", "plan_ms": "",
           "deliver_ms": "", "exec_ms": "", "repl_ms": "", "repl_wait_ms": "", "commit_ms": "", "mode": "", "backend": "", "point": "",
           "replicated_bytes_per_txn": "", "follower_cpu_us_per_txn": "", "ok": 0,
           "command": command}
    with open(log, "w") as lf:
        up = subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "up", cfg, "--fresh"] + overrides,
                            stdout=lf, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        try:
            if up.returncode != 0:
                return row, "cluster.sh up failed (%s)" % log
            r = subprocess.run(client, capture_output=True, text=True, env=env, cwd=ROOT,
                               timeout=a["seconds"] + a["warmup"] + 120)
            lf.write(r.stdout)
            lf.write(r.stderr)
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
            if r.returncode != 0 or not lines:
                return row, "qrstore-client exited %d (%s)" % (r.returncode, log)
            o = json.loads(lines[-1])
            leader = o.get("leader") or "n0"
            row.update({"txn_per_s": o["throughput_tps"], "ops_per_s": o["ops_per_s"], "p50_ms": o["p50_ms"],
                        "p99_ms": o["p99_ms"],
                        "leader_cpu_us_per_txn": o.get("cpu_us_per_txn", {}).get(leader, ""), "ok": 1})
            # The leader's mean per-batch phases over the window (Eq. (1)'s terms).
            row["mode"] = o.get("config", {}).get("replication.mode", "")
            row["backend"] = o.get("config", {}).get("replication.backend", "")
            row["point"] = o.get("replication_point", "")
            row["replicated_bytes_per_txn"] = o.get("replicated_bytes_per_txn", "")
            row["follower_cpu_us_per_txn"] = o.get("follower_cpu_us_per_txn", "")
            ph = o.get("phases", {}).get(leader, {})
            for k in ("plan_ms", "deliver_ms", "exec_ms", "repl_ms", "repl_wait_ms", "commit_ms"):
                row[k] = ph.get(k, "")
            if not o.get("replicas_agree", False):
                row["ok"] = 0
                return row, "the replicas do not agree (%s)" % log
            return row, None
        except subprocess.TimeoutExpired:
            return row, "qrstore-client did not finish (%s)" % log
        finally:
            subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "down", cfg], stdout=lf,
                           stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            # A run's cluster folder holds its nodes' logs and data (raft logs, checkpoints: a
            # whole sweep's would fill the disk): its data goes, its logs stay when it failed.
            run_dir = os.path.join(env["QRSTORE_RUN_DIR"], "pf-" + tag)
            shutil.rmtree(run_dir if row["ok"] else os.path.join(run_dir, "data"), ignore_errors=True)


def summarize(fig, xs, runs):
    out = []
    for x in xs:
        for s in fig.series:
            mine = [r for r in runs if r["x"] == x and r["series"] == s and r["ok"]]
            ratios = []
            for r in mine:
                base = [b for b in runs if b["x"] == x and b["series"] == fig.baseline and b["rep"] == r["rep"] and
                        b["ok"]]
                if base and base[0][fig.metric]:
                    ratios.append(r[fig.metric] / base[0][fig.metric])
            def med(k):
                # The runs that measured k (a repl run has no txn/s; a failed run nothing).
                vals = [r[k] for r in mine if r.get(k, "") != ""]
                return statistics.median(vals) if vals else ""
            # Eq. (1): T(b) = T_pl + max(T_deliv + T_ex, T_repl) + T_c. The share of T_repl hidden
            # behind delivery and execution is 1 - repl_wait / repl. Sync hides none of it (execution
            # starts once the batch is replicated: its repl_wait is 0 for that reason, not hidden).
            hidden = [0.0 if r["mode"] == "sync" else 1 - r["repl_wait_ms"] / r["repl_ms"] for r in mine
                      if r.get("repl_ms", "") not in ("", 0) and r.get("backend", "") not in ("", "none")]
            out.append({"figure": fig.number, "x": x, "series": s, "runs": len(mine),
                        "median_txn_per_s": med("txn_per_s"), "median_ops_per_s": med("ops_per_s"),
                        "median_batches_per_s": med("batches_per_s") if fig.kind == "repl" else "",
                        "median_p50_ms": med("p50_ms"),
                        "median_p99_ms": med("p99_ms"),
                        "ratio_to_%s" % fig.baseline: statistics.median(ratios) if ratios else "",
                        "median_repl_hidden": statistics.median(hidden) if hidden else "",
                        "median_leader_cpu_us_per_txn": statistics.median(
                            [r["leader_cpu_us_per_txn"] for r in mine if r["leader_cpu_us_per_txn"] != ""] or [0]),
                        "median_bytes_per_txn": statistics.median(
                            [r["replicated_bytes_per_txn"] for r in mine if r.get("replicated_bytes_per_txn", "") != ""]
                            or [0]),
                        "median_follower_cpu_us_per_txn": statistics.median(
                            [r["follower_cpu_us_per_txn"] for r in mine if r.get("follower_cpu_us_per_txn", "") != ""]
                            or [0]),
                        "ratios": " ".join("%.3f" % v for v in ratios)})
    return out


def plot(fig, xs, summary, path, host):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no PNG: python3-matplotlib is not installed (apt-get install python3-matplotlib)"
    numeric = all(isinstance(x, (int, float)) for x in xs)
    fig_, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(fig.series))
    for k, s in enumerate(fig.series):
        rows = [r for r in summary if r["series"] == s and r["runs"]]
        if not rows:
            continue
        tps = [r["median_" + fig.metric] / (1e6 if fig.metric == "ops_per_s" else 1e3) for r in rows]
        if fig.kind == "repl":
            p99 = [r["median_p50_ms"] for r in rows]
        if fig.kind != "repl":
            p99 = [r["median_p99_ms"] for r in rows]
        if numeric:
            px = [r["x"] for r in rows]
            ax1.plot(px, tps, marker="o", label=s)
            ax2.plot(px, p99, marker="o", label=s)
        else:
            px = [xs.index(r["x"]) + (k - (len(fig.series) - 1) / 2) * width for r in rows]
            ax1.bar(px, tps, width, label=s)
            ax2.bar(px, p99, width, label=s)
    tlabel = {"ops_per_s": "throughput (M ops/s, median)", "batches_per_s": "batches acknowledged (K/s, median)"}.get(
        fig.metric, "throughput (K txn/s, median)")
    llabel = "p50 latency, request -> ack (ms, median)" if fig.kind == "repl" else "p99 latency (ms, median)"
    for ax, ylabel in ((ax1, tlabel), (ax2, llabel)):
        ax.set_xlabel(fig.xlabel)
        if fig.kind == "repl":
            ax.set_xscale("log")
        ax.set_ylabel(ylabel)
        if not numeric:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([str(x) for x in xs])
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig_.suptitle("Fig. %s: %s (%s, %d cores, %s)" % (fig.number, fig.title, host[0], host[1], host[2]), fontsize=9)
    fig_.tight_layout()
    fig_.savefig(path, dpi=90)
    plt.close(fig_)
    return None


def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def write_md(path, fig, summary, a, host):
    """The figure's table, as markdown."""
    n = fig.number
    with open(path, "w") as f:
        f.write("Fig. %s: %s. %s, %d cores, commit %s. %d repetitions of %d s after %d s; ratio: median "
                "of the per-repetition ratios to %s. The paper: %s.\n\n" % (
                    n, fig.title, host[0], host[1], host[2], a["reps"], a["seconds"], a["warmup"], fig.baseline,
                    fig.paper))
        f.write("| %s | series | %s (median) | p50 ms | p99 ms | / %s | repl hidden | leader us/txn | "
                "bytes/txn | follower us/txn |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n" % (fig.xlabel, fig.metric.replace("_per_s", "/s"),
                                                               fig.baseline))
        for r in summary:
            f.write("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
                r["x"], r["series"], "%.0f" % r["median_" + fig.metric] if r["runs"] else "-",
                "%.2f" % r["median_p50_ms"] if r["runs"] else "-", "%.2f" % r["median_p99_ms"] if r["runs"] else "-",
                "%.3f" % r["ratio_to_" + fig.baseline] if r["ratio_to_" + fig.baseline] != "" else "-",
                "%.2f" % r["median_repl_hidden"] if r["median_repl_hidden"] != "" else "-",
                "%.2f" % r["median_leader_cpu_us_per_txn"] if r["runs"] and fig.kind != "repl" else "-",
                "%.1f" % r["median_bytes_per_txn"] if r["runs"] and r["median_bytes_per_txn"] else "-",
                "%.2f" % r["median_follower_cpu_us_per_txn"] if r["runs"] and r["median_follower_cpu_us_per_txn"]
                else "-"))
        if fig.kind == "repl":
            f.write("\nThe replication layer alone: qrstore-repl-bench, 3 members on this machine, 100 batches "
                    "in flight; p50 / p99: a batch's ReplicateData to its acknowledgement.\n")
        else:
            f.write("\nrepl hidden: Eq. (1)'s share of the leader's replication time hidden behind delivery and "
                    "execution, 1 - repl_wait / repl (median over the runs; - without replication). leader "
                    "us/txn: the leader process's CPU per committed txn; bytes/txn: what the leader handed its "
                    "replication layer per committed txn; follower us/txn: a follower process's CPU per "
                    "committed txn (mean over the followers).\n")
        f.write("Every run's command%s: fig%s-runs.csv.\n" % ("" if fig.kind == "repl" else " and the leader's phases",
                                                             n))


def run_figure(a, fig, out_dir, env, host, progress, failed):
    """Every run of one figure, interleaved; then its CSVs, PNG and markdown."""
    n = fig.number
    xs = fig.quick_xs if a["quick"] else fig.xs
    runs = []
    for x in xs:
        for rep in range(a["reps"]):
            k = rep % len(fig.series)
            order = fig.series[k:] + fig.series[:k]
            for pos, s in enumerate(order):
                row, err = run_one(a, fig, x, s, rep, pos, out_dir, env)
                runs.append(row)
                if err:
                    failed.append("fig %s, %s %s rep %d: %s" % (n, x, s, rep, err))
                unit = fig.metric.replace("_per_s", "/s")
                progress("fig %s  %-6s %-12s rep %d: %s" % (
                    n, x, s, rep, ("%.0f %s, p99 %.1f ms" % (row[fig.metric], unit, row["p99_ms"])) if row["ok"] else
                    "FAILED: " + (err or "")))
    write_csv(os.path.join(out_dir, "fig%s-runs.csv" % n), runs)
    summary = summarize(fig, xs, runs)
    write_csv(os.path.join(out_dir, "fig%s.csv" % n), summary)
    note = plot(fig, xs, summary, os.path.join(out_dir, "fig%s.png" % n), host)
    if note:
        failed.append("fig %s: %s" % (n, note))
    md = os.path.join(out_dir, "fig%s.md" % n)
    write_md(md, fig, summary, a, host)
    print(open(md).read(), flush=True)


def main(argv):
    a = parse_args(argv[1:])
    build = os.path.abspath(a["build"])
    progs = ["qrstore-server", "qrstore-client"] + (["qrstore-repl-bench"] if 4 in a["figures"] else [])
    for prog in progs:
        if not os.access(os.path.join(build, "bin", prog), os.X_OK):
            fail("%s not found: build first (cmake --build %s)" % (os.path.join(build, "bin", prog), a["build"]))
    # Commands name the build as a reader in the checkout would.
    a["build"] = os.path.relpath(build, ROOT) if build.startswith(ROOT + os.sep) else build
    out_dir = os.path.abspath(a["out"])
    os.makedirs(out_dir, exist_ok=True)
    host = host_line()
    with open(os.path.join(out_dir, "host.txt"), "w") as f:
        f.write("model: %s\ncores: %d\ncommit: %s\ndate: %s\n" % (host[0], host[1], host[2],
                                                                 datetime.datetime.now().isoformat(timespec="seconds")))
    env = dict(os.environ)
    env["QRSTORE_BIN"] = os.path.join(build, "bin")
    env["QRSTORE_RUN_DIR"] = os.path.join(out_dir, "run")
    failed = []
    total = sum(len(FIGURES[n].quick_xs if a["quick"] else FIGURES[n].xs) * len(FIGURES[n].series) * a["reps"]
                for n in a["figures"])
    t0 = time.time()
    done = [0]

    def progress(text):
        done[0] += 1
        el = time.time() - t0
        print("  [%d/%d, %.0f s, about %.0f s left] %s" % (done[0], total, el, el / done[0] * (total - done[0]), text),
              flush=True)

    print("paper-figures: figures %s, %d runs of %d s after %d s, %d repetitions, on %s (%d cores), commit %s; "
          "output in %s" % (" ".join(map(str, a["figures"])), total, a["seconds"], a["warmup"], a["reps"], host[0],
                            host[1], host[2], out_dir), flush=True)
    for n in a["figures"]:
        run_figure(a, FIGURES[n], out_dir, env, host, progress, failed)
    if failed:
        for f in failed:
            print("paper-figures: FAILED: " + f, file=sys.stderr)
        return 1
    print("paper-figures: done in %.0f s; %s" % (time.time() - t0, out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
