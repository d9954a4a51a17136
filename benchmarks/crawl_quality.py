"""Crawl-ordering quality on the real graphs shipped with the package (docs/simulation.md).

Runs ``frontera-linkrank simulate`` (docs/algorithms.md §6: true PageRank
collected, top-1% recall, area against the omniscient crawl, estimate
quality) on

- ``uk-2007-05@100000`` (100,000 pages, hosts inferred from the URL-ordered
  ids), and
- the UK Web Archive 1996 host graph (58,842 hosts, one page per host),

with the backend's policies beside every baseline, 3 draws of 10 random
seeds, 20% of the pages, and writes the curves into ``docs/``
(``docs/simulate_<graph>.png``, if matplotlib is installed).

    python benchmarks/crawl_quality.py [--draws 3] [--policies opic hybrid pagerank hits]
"""

import argparse
import os
import sys

from frontera_linkrank.simulation.cli import main as simulate

HERE = os.path.dirname(os.path.abspath(__file__))
# Names of the real graphs in the repository's datasets/ folder (simulate loads them).
GRAPHS = ("uk2007", "ukwa")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    ap.add_argument("--policies", nargs="+", default=["opic", "hybrid-push", "hybrid", "pagerank", "hits"])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--plots", default=os.path.join(HERE, "..", "docs"), help="folder of the PNGs ('' for none)")
    args = ap.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        args.plots = ""
    for name in args.graphs:
        cmd = [name, "--draws", str(args.draws)]
        for p in args.policies:
            cmd += ["--policy", p]
        if args.plots:
            cmd += ["--plot", os.path.relpath(os.path.join(args.plots, f"simulate_{name}.png"))]
        code = simulate(cmd)
        print(flush=True)
        if code:
            sys.exit(code)


if __name__ == "__main__":
    main()
