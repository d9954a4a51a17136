"""Cost and quality of the push threshold, beside Frontera's memory BFS.

One seed draw (10 seeds) of ``frontera-linkrank simulate``'s first draw,
20% of the pages, batches of 100, every crawl through ``FrontierManager``
in the same process: pages per second, the area under the collected true
PageRank curve relative to the omniscient crawl, and the push work
(pages pushed and links pushed along, per crawled page).

    python benchmarks/push_cost.py [uk2007] [--thresholds 0.03 0.1 0.3 0.6 0.9] [--policy hybrid-push]
"""

from __future__ import annotations

import argparse

from frontera_linkrank.simulation import metrics
from frontera_linkrank.simulation.baselines import BACKENDS
from frontera_linkrank.simulation.crawl import BFS, LINKRANK, crawl
from frontera_linkrank.simulation.datasets import load_graph, merge_same_pages
from frontera_linkrank.simulation.report import draw_seeds


def main(argv: list[str] | None = None) -> None:
    """Print one line per crawl."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graph", nargs="?", default="uk2007")
    ap.add_argument("--thresholds", nargs="+", type=float, default=[0.03, 0.1, 0.3, 0.6, 0.9])
    ap.add_argument("--policy", default="push", help="a policy keyed by the push estimate (push, hybrid-push)")
    args = ap.parse_args(argv)
    g = merge_same_pages(load_graph(args.graph))  # as the simulator does
    budget = int(0.2 * g.n)
    truth = metrics.reference_pagerank(g.indptr, g.indices)
    seeds = draw_seeds(g, 10, 0)
    oracle = {"SIMULATION_ORACLE": dict(zip(g.fingerprints, truth.tolist()))}
    best = metrics.area(crawl(g, BACKENDS["omniscient"], seeds, budget, settings=oracle).order, truth, budget)
    runs = [("frontera-bfs", BFS, {}), ("opic", LINKRANK, {"LINKRANK_POLICY": "opic"})]
    runs += [(f"{args.policy} threshold {e:g}", LINKRANK,
              {"LINKRANK_POLICY": args.policy, "LINKRANK_PUSH_THRESHOLD": e}) for e in args.thresholds]
    for name, backend, settings in runs:
        stats: dict = {}

        def observe(b: object, n: int, stats: dict = stats) -> None:
            core = getattr(b, "core", None)
            if core is not None and core.push is not None:
                stats.update(core.push.stats())

        res = crawl(g, backend, seeds, budget, batch=100, settings=settings, observe=observe, checkpoints=[budget])
        work = (f"; pushes/page {stats['pushes'] / budget:.1f}, links pushed/page {stats['push_edges'] / budget:.0f}"
                if stats else "")
        print(f"{name}: {budget / res.seconds:,.0f} pages/s, AUC vs omniscient "
              f"{metrics.area(res.order, truth, budget) / best:.3f}{work}", flush=True)


if __name__ == "__main__":
    main()
