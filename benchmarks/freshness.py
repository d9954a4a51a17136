"""Importance-weighted freshness of a recrawl on a changing web (docs/measurements.md).

The Hollins graph served by the test web (in-process, on a simulated
clock: one fetch per second), every page changing as a Poisson process at
a rate drawn log-uniformly over three decades around the crawl's refresh
capacity (0.03/N to 30/N changes per second for N pages: some pages
change far more often than they can be refreshed, others hardly ever).
Each refresh policy crawls from the same seed for the same number of
fetches (4 N); reported is the freshness of the stored copies averaged
over the second half of the run: weighted by true PageRank, and plain.

    python benchmarks/freshness.py [--draws 2] [--fetches-per-page 4]
"""

import argparse
import time

import numpy as np

from frontera_linkrank.simulation.datasets import data_path, load_hollins
from frontera_linkrank.simulation.freshness import simulate_freshness

RUNS = {
    "value, PageRank importance (default)": ("value", {"LINKRANK_RECRAWL_IMPORTANCE": "pagerank"}),
    "value, AOPIC importance": ("value", {"LINKRANK_RECRAWL_IMPORTANCE": "aopic"}),
    "uniform": ("uniform", {}),
    "in proportion to the change rate": ("change_rate", {}),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=2, help="change-rate draws")
    ap.add_argument("--fetches-per-page", type=float, default=4.0)
    args = ap.parse_args(argv)
    g = load_hollins(data_path("hollins"))
    n = g.n
    common = {"LINKRANK_RANK_BACKGROUND": False, "LINKRANK_RANK_EVERY_PAGES": 1000, "LINKRANK_RANK_INTERVAL": 0}
    print(f"hollins: {n:,} pages, {int(args.fetches_per_page * n):,} fetches, 1 fetch/s, "
          f"change rates log-uniform in [{0.03 / n:.2g}, {30 / n:.2g}] per second")
    print("| refresh policy | draw | weighted freshness | freshness | 304 answers | changes seen | seconds |")
    print("|---|---|---|---|---|---|---|")
    means = {}
    for name, (policy, settings) in RUNS.items():
        for draw in range(args.draws):
            t = time.perf_counter()
            r = simulate_freshness(
                g, policy, int(args.fetches_per_page * n), change_range=(0.03 / n, 30.0 / n), seeds=[0],
                batch=20, min_interval=n / 50, seed=draw, settings={**common, **settings},
            )  # fmt: skip
            means.setdefault(name, []).append((r.weighted, r.plain))
            print(f"| {name} | {draw} | {r.weighted:.4f} | {r.plain:.4f} | {r.not_modified:,} | "
                  f"{r.changes_detected:,} | {time.perf_counter() - t:.0f} |", flush=True)
    print("\n| refresh policy | weighted freshness (mean) | freshness (mean) |")
    print("|---|---|---|")
    for name, vals in means.items():
        w, p = np.mean(vals, axis=0)
        print(f"| {name} | {w:.4f} | {p:.4f} |")


if __name__ == "__main__":
    main()
