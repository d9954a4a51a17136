"""Speed of ``frontera-linkrank simulate`` on a 325,000-page graph.

No real graph of that size is shipped with the package, so the graph is generated
(:func:`frontera_linkrank.simulation.graphs.power_law_host_graph`: 3,250
hosts of Pareto sizes, power-law in- and out-degrees, ~77% of the links
inside their host; seed 0). The whole command runs once, in process, for
one policy (default opic) beside the BFS baseline (same simulator, manager
and measurements, a trivial frontier) and the omniscient reference, 20% of
the pages, one seed draw:

    python benchmarks/simulate_speed.py [--pages 325000] [--policy opic]

Printed: wall time of the command and of each step, pages per second of
each crawl, the ratio of the policy's crawl time to the BFS baseline's (the
backend's share), and the simulator's own per-page work (building the
Request/Response objects of the same crawl, measured separately).
"""

import argparse
import io
import json
import os
import tempfile
import time
from contextlib import redirect_stdout

import numpy as np

from frontera_linkrank.cli.main import main as cli
from frontera_linkrank.simulation.crawl import _Link
from frontera_linkrank.simulation.graphs import power_law_host_graph


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=325_000)
    ap.add_argument("--policy", default="opic")
    ap.add_argument("--budget", type=float, default=0.2)
    args = ap.parse_args(argv)

    t = time.perf_counter()
    g = power_law_host_graph(args.pages, seed=0)
    gen = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"powerlaw{args.pages // 1000}k.npz")
        np.savez(path, indptr=g.indptr, indices=g.indices.astype(np.int32), hosts=g.hosts)
        print(f"graph: {g.n:,} pages, {g.n_edges:,} links, {len(set(g.hosts.tolist())):,} hosts "
              f"(generated in {gen:.1f} s)")
        argv = ["simulate", path, "--policy", args.policy, "--baselines", "bfs", "--draws", "1",
                "--budget", str(args.budget), "--json", "--no-progress"]
        out = io.StringIO()
        t, cpu = time.perf_counter(), time.process_time()
        with redirect_stdout(out):
            code = cli(argv)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    if code:
        raise SystemExit(code)
    rep = json.loads(out.getvalue())
    print(f"command: frontera-linkrank {' '.join(argv[:1] + ['GRAPH.npz'] + argv[2:])}")
    print(f"whole command: {wall:.1f} s wall, {cpu:.1f} s CPU (true PageRank {rep['truth']['seconds']:.1f} s; "
          "wall above CPU means other processes shared the cores)")
    print("| run | pages | crawl s | pages/s | estimate measurements s |")
    print("|---|---|---|---|---|")
    runs = {r["name"]: r["draws"][0] for r in rep["runs"]}
    for name, d in runs.items():
        print(f"| {name} | {d['pages']:,} | {d['seconds']:.1f} | {d['pages_per_second']:,.0f} | "
              f"{d['measure_seconds']:.1f} |")
    pol, bfs = runs[args.policy], runs["bfs"]
    print(f"{args.policy} crawl / BFS-baseline crawl time: {pol['seconds'] / bfs['seconds']:.2f}")
    print(f"{args.policy}, crawl + measurements: {pol['seconds'] + pol['measure_seconds']:.1f} s "
          f"(target: 20% of 325k pages in under 300 s)")

    # The simulator's own work per page: the objects it builds for the same
    # number of pages (the BFS baseline's pages; the links of a fetched page
    # are revealed as one Request each).
    from frontera.core.models import Response

    order = np.random.default_rng(0).choice(g.n, pol["pages"], replace=False).tolist()
    urls, fps = g.urls, g.fingerprints
    t = time.perf_counter()
    n_links = 0
    for v in order:
        a, b = g.indptr[v], g.indptr[v + 1]
        links = [_Link(urls[w], fps[w]) for w in g.indices[a:b].tolist()]
        Response(urls[v], request=_Link(urls[v], fps[v]))
        n_links += len(links)
    own = time.perf_counter() - t
    print(f"simulator's own objects for {len(order):,} random pages ({n_links:,} links): {own:.1f} s, "
          f"{own / len(order) * 1e6:.0f} us per page")


if __name__ == "__main__":
    main()
