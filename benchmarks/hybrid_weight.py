"""How much weight should the last PageRank get in the hybrid policy?

The README's choice of LINKRANK_HYBRID_WEIGHT: 20% of uk-2007-05@100000
crawled through FrontierManager from 10 random seeds (4 draws), true
PageRank collected at 1, 5, 10 and 20% of the pages, for hybrid with
several weights beside opic, pagerank and Frontera's memory BFS. Rankings
use the default schedule, computed inline so runs are reproducible.

    python benchmarks/hybrid_weight.py [--weights 16 64 256] [--draws 4]
"""

import argparse
import sys

import numpy as np

from frontera_linkrank.simulation.crawl import BFS, LINKRANK, compare
from frontera_linkrank.simulation.datasets import load_uk2007
from frontera_linkrank.simulation.metrics import reference_pagerank

FRACTIONS = (0.01, 0.05, 0.10, 0.20)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", nargs="+", type=float, default=[16, 64, 256])
    ap.add_argument("--draws", type=int, default=4)
    args = ap.parse_args(argv)
    try:
        g = load_uk2007()
    except FileNotFoundError as e:
        sys.exit(str(e))
    truth = reference_pagerank(g.indptr, g.indices)
    inline = {"LINKRANK_RANK_BACKGROUND": False}
    runs = {
        "Frontera memory BFS": (BFS, {}),
        "opic": (LINKRANK, {"LINKRANK_POLICY": "opic"}),
        "pagerank": (LINKRANK, {**inline, "LINKRANK_POLICY": "pagerank"}),
    }
    for w in args.weights:
        runs[f"hybrid, weight {w:g}"] = (LINKRANK, {**inline, "LINKRANK_POLICY": "hybrid", "LINKRANK_HYBRID_WEIGHT": w})
    head = " | ".join(f"PR@{int(f * 100)}%" for f in FRACTIONS)
    print(f"| seeds | policy | {head} |")
    print("|---|---|" + "---|" * len(FRACTIONS))
    sums = {k: np.zeros(len(FRACTIONS)) for k in runs}
    for draw in range(args.draws):
        seeds = np.random.default_rng(draw).choice(g.n, 10, replace=False).tolist()
        for name, (vals, _, _) in compare(g, runs, truth, FRACTIONS, seeds, int(0.2 * g.n)).items():
            sums[name] += vals
            print(f"| draw {draw} | {name} | " + " | ".join(f"{x:.4f}" for x in vals) + " |", flush=True)
    for name, total in sums.items():
        print(f"| mean | {name} | " + " | ".join(f"{x:.4f}" for x in total / args.draws) + " |")


if __name__ == "__main__":
    main()
