#!/usr/bin/env python3
"""Usage: scripts/paper-figures.sh [--quick] [--figure N ...] [--out DIR] [--build DIR]
                                 [--reps R] [--seconds S] [--warmup S]

Reproduces figures of the QR-Store paper's evaluation (section 5) on this machine, each as a
sweep of real clusters started with scripts/cluster.sh and driven by qrstore-client:
  6   batch size (batch.txns), rf 0 / 1 / 2
  8   Zipf theta (ycsb.theta), rf 0 / 1 / 2
  12  thread- vs node-level synchronisation (engine.sync), rf 0 / 1 / 2
  13  speculative vs synchronous replication (replication.mode), rf 1 / 2
rf 0 is configs/cluster-none.yaml (the paper's Q-Store), rf 1 configs/cluster-raft-rf1.yaml, rf 2
configs/cluster-raft.yaml (raft, durable, sessions), every node on this machine; the workload is
the configs' (the paper's default: YCSB, 1M records, 16 ops, 50% writes, theta 0). Not built
yet (issue 43): figures 4, 7, 9, 10, 11, 14, the latency-throughput curve, Eq. (1).

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
repetitions of 3 s after 1 s at fewer points (about 2 minutes a figure here); defaults: 10 s
after 2 s at every point. Exit status 0, 1 when a run failed, 2 on bad arguments.
"""
import csv
import datetime
import json
import os
import re
import shlex
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
}


class Figure:
    """A figure: points (x) on its axis, series at each point; run(x, series) gives the config
    and the overrides of one run."""

    def __init__(self, number, title, xlabel, xs, quick_xs, series, baseline, spec, paper):
        self.number = number
        self.title = title
        self.xlabel = xlabel
        self.xs = xs
        self.quick_xs = quick_xs
        self.series = series
        self.baseline = baseline
        self.spec = spec
        self.paper = paper  # what the paper states for it, for the report


FIGURES = {
    6: Figure(6, "Varying batch size", "batch size (txns)", [2000, 5000, 10000, 20000, 40000],
              [2000, 10000, 40000], ["rf0", "rf1", "rf2"], "rf0",
              lambda x, s: (RF_CONFIG[s], ["--batch.txns=%d" % x]),
              "rf 2 p99 latency +16% over Q-Store at 20K batches, +30% at 40K"),
    8: Figure(8, "Varying data access contention", "Zipf theta", [0.0, 0.4, 0.6, 0.8, 0.9, 0.99],
              [0.0, 0.6, 0.99], ["rf0", "rf1", "rf2"], "rf0",
              lambda x, s: (RF_CONFIG[s], ["--ycsb.theta=%g" % x]),
              "at theta 0 replication costs 6% (rf 1) and 13% (rf 2); medium contention (0.4-0.8) "
              "drops throughput 19-29%, high (0.9-0.99) recovers"),
    12: Figure(12, "Node- vs thread-level synchronisation", "replication factor", ["rf0", "rf1", "rf2"],
               ["rf0", "rf1", "rf2"], ["thread", "node"], "thread",
               lambda x, s: (RF_CONFIG[x], ["--engine.sync=%s" % s]),
               "thread-level synchronisation: up to +5% throughput, up to -14% latency"),
    13: Figure(13, "Speculative vs synchronous replication", "replication factor", ["rf1", "rf2"],
               ["rf1", "rf2"], ["speculative", "sync"], "speculative",
               lambda x, s: (RF_CONFIG[x], ["--replication.mode=%s" % s]),
               "speculative replication improves throughput by up to 30%"),
}


def fail(msg, code=2):
    print("paper-figures: " + msg, file=sys.stderr)
    sys.exit(code)


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
                for part in v.replace(",", " ").split():
                    if not part.isdigit():
                        fail("--figure takes figure numbers, not %r" % part)
                    n = int(part)
                    if n not in FIGURES:
                        fail("figure %d is not built yet (built: %s; issue 43 lists the rest)" %
                             (n, ", ".join(str(k) for k in sorted(FIGURES))))
                    a["figures"].append(n)
                # "--figure 12 13": take the following bare numbers too
                while i < len(argv) and argv[i].isdigit():
                    n = int(argv[i])
                    if n not in FIGURES:
                        fail("figure %d is not built yet (built: %s)" % (n, ", ".join(str(k) for k in sorted(FIGURES))))
                    a["figures"].append(n)
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
        a["figures"] = sorted(FIGURES)
    if a["seconds"] is None:
        a["seconds"] = 3 if a["quick"] else 10
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
    """A copy of a shipped config with every node's ports taken from the free-port registry and
    its own cluster name (its own run folder)."""
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


def run_one(a, fig, x, series, rep, order, out_dir, env):
    shipped, overrides = fig.spec(x, series)
    tag = "fig%d-%s-%s-r%d" % (fig.number, str(x).replace(".", "_"), series, rep)
    cfg = local_config(shipped, out_dir, tag)
    client = [os.path.join(env["QRSTORE_BIN"], "qrstore-client"), "--config", cfg] + overrides + [
        "--duration-s", str(a["seconds"]), "--warmup-s", str(a["warmup"]), "--json", "--log-level", "warn"]
    # The command a reader runs (the shipped config; this script only moved the ports).
    command = "scripts/cluster.sh up %s --fresh %s; %s/bin/qrstore-client --config %s %s --duration-s %d " \
              "--warmup-s %d --json; scripts/cluster.sh down %s" % (
                  shipped, " ".join(overrides), a["build"], shipped, " ".join(overrides), a["seconds"],
                  a["warmup"], shipped)
    log = os.path.join(out_dir, "logs", tag + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    row = {"figure": fig.number, "x": x, "series": series, "rep": rep, "order": order, "txn_per_s": "",
           "ops_per_s": "", "p50_ms": "", "p99_ms": "", "leader_cpu_us_per_txn": "", "ok": 0,
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
            if not o.get("replicas_agree", False):
                row["ok"] = 0
                return row, "the replicas do not agree (%s)" % log
            return row, None
        except subprocess.TimeoutExpired:
            return row, "qrstore-client did not finish (%s)" % log
        finally:
            subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "down", cfg], stdout=lf,
                           stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def summarize(fig, xs, runs):
    out = []
    for x in xs:
        for s in fig.series:
            mine = [r for r in runs if r["x"] == x and r["series"] == s and r["ok"]]
            ratios = []
            for r in mine:
                base = [b for b in runs if b["x"] == x and b["series"] == fig.baseline and b["rep"] == r["rep"] and
                        b["ok"]]
                if base and base[0]["txn_per_s"]:
                    ratios.append(r["txn_per_s"] / base[0]["txn_per_s"])
            med = lambda k: statistics.median([r[k] for r in mine]) if mine else ""  # noqa: E731
            out.append({"figure": fig.number, "x": x, "series": s, "runs": len(mine),
                        "median_txn_per_s": med("txn_per_s"), "median_p50_ms": med("p50_ms"),
                        "median_p99_ms": med("p99_ms"),
                        "ratio_to_%s" % fig.baseline: statistics.median(ratios) if ratios else "",
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
        tps = [r["median_txn_per_s"] / 1000 for r in rows]
        p99 = [r["median_p99_ms"] for r in rows]
        if numeric:
            px = [r["x"] for r in rows]
            ax1.plot(px, tps, marker="o", label=s)
            ax2.plot(px, p99, marker="o", label=s)
        else:
            px = [xs.index(r["x"]) + (k - (len(fig.series) - 1) / 2) * width for r in rows]
            ax1.bar(px, tps, width, label=s)
            ax2.bar(px, p99, width, label=s)
    for ax, ylabel in ((ax1, "throughput (K txn/s, median)"), (ax2, "p99 latency (ms, median)")):
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel(ylabel)
        if not numeric:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([str(x) for x in xs])
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig_.suptitle("Fig. %d: %s (%s, %d cores, %s)" % (fig.number, fig.title, host[0], host[1], host[2]), fontsize=9)
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


def main(argv):
    a = parse_args(argv[1:])
    build = os.path.abspath(a["build"])
    for prog in ("qrstore-server", "qrstore-client"):
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
    done = 0
    t0 = time.time()
    print("paper-figures: figures %s, %d runs of %d s after %d s, %d repetitions, on %s (%d cores), commit %s; "
          "output in %s" % (" ".join(map(str, a["figures"])), total, a["seconds"], a["warmup"], a["reps"], host[0],
                            host[1], host[2], out_dir), flush=True)
    for n in a["figures"]:
        fig = FIGURES[n]
        xs = fig.quick_xs if a["quick"] else fig.xs
        runs = []
        for x in xs:
            for rep in range(a["reps"]):
                k = rep % len(fig.series)
                order = fig.series[k:] + fig.series[:k]
                for pos, s in enumerate(order):
                    row, err = run_one(a, fig, x, s, rep, pos, out_dir, env)
                    runs.append(row)
                    done += 1
                    if err:
                        failed.append("fig %d, %s %s rep %d: %s" % (n, x, s, rep, err))
                    el = time.time() - t0
                    print("  [%d/%d, %.0f s, about %.0f s left] fig %d  %-6s %-12s rep %d: %s" % (
                        done, total, el, el / done * (total - done), n, x, s, rep,
                        ("%.0f txn/s, p99 %.1f ms" % (row["txn_per_s"], row["p99_ms"])) if row["ok"] else
                        "FAILED: " + (err or "")), flush=True)
        write_csv(os.path.join(out_dir, "fig%d-runs.csv" % n), runs)
        summary = summarize(fig, xs, runs)
        write_csv(os.path.join(out_dir, "fig%d.csv" % n), summary)
        note = plot(fig, xs, summary, os.path.join(out_dir, "fig%d.png" % n), host)
        if note:
            failed.append("fig %d: %s" % (n, note))
        with open(os.path.join(out_dir, "fig%d.md" % n), "w") as f:
            f.write("Fig. %d: %s. %s, %d cores, commit %s. %d repetitions of %d s after %d s; ratio: median "
                    "of the per-repetition ratios to %s. The paper: %s.\n\n" % (
                        n, fig.title, host[0], host[1], host[2], a["reps"], a["seconds"], a["warmup"], fig.baseline,
                        fig.paper))
            f.write("| %s | series | txn/s (median) | p50 ms | p99 ms | / %s |\n|---|---|---|---|---|---|\n" % (
                fig.xlabel, fig.baseline))
            for r in summary:
                f.write("| %s | %s | %s | %s | %s | %s |\n" % (
                    r["x"], r["series"], "%.0f" % r["median_txn_per_s"] if r["runs"] else "-",
                    "%.1f" % r["median_p50_ms"] if r["runs"] else "-", "%.1f" % r["median_p99_ms"] if r["runs"] else "-",
                    "%.3f" % r["ratio_to_" + fig.baseline] if r["ratio_to_" + fig.baseline] != "" else "-"))
            f.write("\nEvery run's command: fig%d-runs.csv.\n" % n)
        print(open(os.path.join(out_dir, "fig%d.md" % n)).read(), flush=True)
    if failed:
        for f in failed:
            print("paper-figures: FAILED: " + f, file=sys.stderr)
        return 1
    print("paper-figures: done in %.0f s; %s" % (time.time() - t0, out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
