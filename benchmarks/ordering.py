"""Crawl-ordering table: every policy and baseline on every development graph.

Runs the simulator's report (:func:`frontera_linkrank.simulation.report.run_report`,
through ``FrontierManager``) on the graphs shipped with the package and
prints, per graph and run, the mean area under the collected-PageRank
curve relative to the omniscient crawl, its standard deviation and range
over the seed draws, and the PageRank collected at 10% of the pages. The
batch PageRank baseline recomputes every 1% of the graph's pages.

    python benchmarks/ordering.py --graphs hollins polblogs --draws 5 \\
        --policies opic hybrid pagerank push --baselines bfs opic-textbook batch-pagerank \\
        [--host-delay 2] [--set LINKRANK_PUSH_THRESHOLD=0.05] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from frontera_linkrank.simulation.cli import parse_settings
from frontera_linkrank.simulation.crawl import Politeness
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.simulation.report import plan, run_report

GRAPHS = ("hollins", "polblogs", "ukwa", "uk2007")


def summary(report: dict) -> list[dict]:
    """Per run: mean, standard deviation and range of the relative AUC, mean PR* at 10%."""
    rows = []
    fr = report["fractions"]
    for r in report["runs"]:
        auc = np.array([d["auc_relative"] for d in r["draws"]], np.float64)
        at10 = r["mean"]["collected"][fr.index(0.1)] if 0.1 in fr else float("nan")
        rows.append({"run": r["name"], "auc": float(auc.mean()), "std": float(auc.std(ddof=1)) if len(auc) > 1 else 0.0,
                     "min": float(auc.min()), "max": float(auc.max()), "pr_at_10": at10,
                     "pages_per_second": r["mean"]["pages_per_second"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the table; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    ap.add_argument("--policies", nargs="*", default=["opic", "hybrid-push", "hybrid", "pagerank"])
    ap.add_argument("--baselines", nargs="*", default=["bfs", "opic-textbook", "batch-pagerank"])
    ap.add_argument("--set", action="append", default=[], dest="settings", metavar="KEY=VALUE")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--budget", type=float, default=0.2)
    ap.add_argument("--host-delay", type=float, default=None)
    ap.add_argument("--json", help="write the summaries (and commands) to this file")
    args = ap.parse_args(argv)
    settings = parse_settings(args.settings)
    politeness = Politeness(args.host_delay, 16, 1) if args.host_delay is not None else None
    out = {"argv": sys.argv[1:] if argv is None else argv, "graphs": {}}
    for name in args.graphs:
        graph = load_graph(name)
        every = max(1, int(round(0.01 * graph.n)))
        runs = plan(args.policies, args.baselines, settings, every)
        t0 = time.perf_counter()
        report = run_report(graph, runs, draws=args.draws, seeds=args.seeds, budget=args.budget,
                            fractions=(0.01, 0.05, 0.1, 0.2), batch=args.batch, politeness=politeness,
                            estimate_points=1)
        rows = summary(report)
        out["graphs"][name] = {"pages": graph.n, "batch_pagerank_every": every, "rows": rows,
                               "seconds": time.perf_counter() - t0}
        print(f"\n{name}: {graph.n:,} pages; {args.draws} draws; batch PageRank every {every} pages"
              + (f"; host delay {args.host_delay:g} s" if politeness else ""), flush=True)
        print("| run | AUC vs omniscient (mean ± sd, range) | PR*@10% | pages/s |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r['run']} | {r['auc']:.3f} ± {r['std']:.3f} ({r['min']:.3f}-{r['max']:.3f}) "
                  f"| {r['pr_at_10']:.4f} | {r['pages_per_second']:,.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
