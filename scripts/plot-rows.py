#!/usr/bin/env python3
"""Plots scripts/cluster-bench.sh --rows rowsweep results (its results.csv): committed txn/s of
a partitioned row against the multi-partition ratio (rf = 0), and against the replication factor
(raft, speculative and sync, 50% multi-partition). Writes OUT/row-mp.png and OUT/row-rf.png.
Usage: plot-rows.py RESULTS_CSV OUT_DIR (needs matplotlib: apt-get install python3-matplotlib)."""
import collections
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    out = sys.argv[2]
    rf_of = {"cluster-2x1-none": 0, "cluster-2x2-raft": 1, "cluster-2x3-raft": 2}
    by_mp = collections.defaultdict(list)
    by_rf = collections.defaultdict(list)
    for r in rows:
        cfg, _, mp = r["config"].partition(" mp=")
        if cfg not in rf_of or not mp:
            continue
        tps = float(r["txn_per_s"])
        if rf_of[cfg] == 0:
            by_mp[float(mp)].append(tps)
        if float(mp) == 0.5:
            modes = ["speculative", "sync"] if rf_of[cfg] == 0 else [r["mode"]]
            for m in modes:
                by_rf[(m, rf_of[cfg])].append(tps)
    if not by_mp and not by_rf:
        sys.exit("plot-rows.py: no rowsweep rows in " + sys.argv[1])
    title = "2 partitions, YCSB 16 ops 50% writes, batches of 20K, 2 cores shared with the client"
    if by_mp:
        xs = sorted(by_mp)
        plt.figure(figsize=(6, 4))
        plt.plot(xs, [statistics.median(by_mp[x]) / 1000 for x in xs], marker="o")
        plt.xlabel("multi-partition ratio (ycsb.mp_ratio)")
        plt.ylabel("committed txn/s (thousands)")
        plt.ylim(bottom=0)
        plt.title("rf = 0 (configs/cluster-2x1-none.yaml)\n" + title, fontsize=8)
        plt.grid(alpha=0.3)
        plt.tight_layout()
        plt.savefig(out + "/row-mp.png", dpi=100)
        print("plot-rows.py: wrote", out + "/row-mp.png")
    if by_rf:
        plt.figure(figsize=(6, 4))
        for mode in ("speculative", "sync"):
            xs = sorted(rf for (m, rf) in by_rf if m == mode)
            if xs:
                plt.plot(xs, [statistics.median(by_rf[(mode, x)]) / 1000 for x in xs], marker="o", label=mode)
        plt.xticks([0, 1, 2])
        plt.xlabel("replication factor (follower rows, raft)")
        plt.ylabel("committed txn/s (thousands)")
        plt.ylim(bottom=0)
        plt.title("50% multi-partition\n" + title, fontsize=8)
        plt.legend()
        plt.grid(alpha=0.3)
        plt.tight_layout()
        plt.savefig(out + "/row-rf.png", dpi=100)
        print("plot-rows.py: wrote", out + "/row-rf.png")


if __name__ == "__main__":
    main()
