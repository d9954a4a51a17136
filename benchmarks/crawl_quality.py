"""Crawl-ordering quality on a real web graph (ALGORITHMS.md §6).

Crawls 20% of ``uk-2007-05@100000`` from 10 random seeds through
Frontera's ``FrontierManager`` (a fetched page reveals only its out-links)
and reports the true PageRank collected at 1, 5, 10 and 20% of the pages,
for each policy and for Frontera's memory BFS backend.

    python benchmarks/crawl_quality.py [--policies opic fifo] [--draws 4]
"""

import argparse
import os
import sys

import numpy as np

from frontera_linkrank.simulation.crawl import BFS, LINKRANK, compare
from frontera_linkrank.simulation.graphs import Graph
from frontera_linkrank.simulation.metrics import reference_pagerank

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "uk-2007-05-100000", "uk-2007-05@100000.csr.npz")
FRACTIONS = (0.01, 0.05, 0.10, 0.20)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default=DATA)
    ap.add_argument("--policies", nargs="+", default=["opic"])
    ap.add_argument("--draws", type=int, default=4, help="random seed sets (10 seeds each)")
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args(argv)
    if not os.path.exists(args.graph):
        sys.exit(f"graph not found: {args.graph} (needs ../shared/data)")
    graph = Graph.from_npz(args.graph, name="uk2007")
    truth = reference_pagerank(graph.indptr, graph.indices)
    runs = {"Frontera memory BFS": (BFS, {})}
    runs.update({p: (LINKRANK, {"LINKRANK_POLICY": p}) for p in args.policies})
    head = " | ".join(f"PR@{int(f * 100)}%" for f in FRACTIONS)
    print(f"| seeds | policy | {head} | seconds |")
    print("|---|---|" + "---|" * (len(FRACTIONS) + 1))
    for draw in range(args.draws):
        seeds = np.random.default_rng(draw).choice(graph.n, 10, replace=False).tolist()
        rows = compare(graph, runs, truth, FRACTIONS, seeds, int(0.2 * graph.n), batch=args.batch)
        for name, (vals, secs, n) in rows.items():
            print(f"| draw {draw} | {name} | " + " | ".join(f"{x:.4f}" for x in vals) + f" | {secs:.0f} |")


if __name__ == "__main__":
    main()
