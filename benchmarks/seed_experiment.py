"""The seed-extraction paper's experiment (docs/algorithms.md §4; the paper's §3.5).

For each graph: extract 10 seeds (same-host links pruned, HITS 60
iterations, complete bipartite cores, one seed per core), crawl
breadth-first from them, and compare with breadth-first crawls from 10
random seeds (several draws): pages reached and true PageRank (d = 0.85,
L1 < 1e-12) collected by each crawl depth, cumulative, plus the paper's
average PageRank of the pages found at each depth. Also the "old crawl
seeds a new crawl" case: seeds extracted from the graph with 20% of its
links removed at random, crawled on the full graph.

Graphs: ``uk-2007-05@100000`` (hosts inferred from the URL order) and the
UKWA 1996 host graph (one node per host: pruning drops nothing but
self-links), both in the repository's ``datasets/`` folder.

Prints Markdown tables and writes one PNG per graph (needs matplotlib:
``pip install -e '.[plot]'``). Everything is seeded: the same command
gives the same numbers.

    python benchmarks/seed_experiment.py [--draws 5] [--out docs] [--graphs uk2007 ukwa]
"""

import argparse
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

from frontera_linkrank.scoring.seeds import bfs_levels, extract_seeds, prune_same_host
from frontera_linkrank.simulation.datasets import load_uk2007, load_ukwa_hosts
from frontera_linkrank.simulation.metrics import reference_pagerank

LOADERS = {"uk2007": load_uk2007, "ukwa": load_ukwa_hosts}
TITLES = {"uk2007": "uk-2007-05@100000", "ukwa": "UKWA 1996 hosts"}
EXTRACTED, OLD = "extracted seeds", "seeds from the old graph (-20% links)"
RANDOM, RANDOM_OUT, TOP_OUT = "random pages", "random pages with out-links", "10 largest out-degrees"


def adjacency(graph):
    n = graph.n
    g = sp.csr_matrix((np.ones(graph.n_edges), graph.indices, graph.indptr), shape=(n, n))
    g.sum_duplicates()
    g.data[:] = 1.0
    return g


def per_depth(g, seeds, truth, depths):
    """Pages found and true PageRank of those pages, at each BFS depth."""
    dist = bfs_levels(g, seeds, depths)
    hit = dist >= 0
    pages = np.bincount(dist[hit], minlength=depths + 1)[: depths + 1]
    pr = np.bincount(dist[hit], weights=truth[hit], minlength=depths + 1)[: depths + 1]
    return pages.astype(float), pr


def run(name, k, draws, depths, drop=0.2):
    """Seed sets and their crawls: ``rows[label]`` is a list of
    ``(pages, pagerank)`` per depth, one per draw (one for fixed sets)."""
    graph = LOADERS[name]()
    g = adjacency(graph)
    truth = reference_pagerank(graph.indptr, graph.indices)
    t = time.perf_counter()
    res = extract_seeds(g, k, hosts=graph.hosts)
    secs = time.perf_counter() - t
    rows = {EXTRACTED: [per_depth(g, res.seeds, truth, depths)]}
    rng = np.random.default_rng(2002)
    coo = g.tocoo()
    keep = rng.random(coo.nnz) >= drop
    old = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=g.shape)
    old_res = extract_seeds(old, k, hosts=graph.hosts, distances=False)
    rows[OLD] = [per_depth(g, old_res.seeds, truth, depths)]
    # Baselines: the paper's random pages; random pages that link somewhere
    # (a crawled page, not a dead end); the pages with most inter-host links.
    rows[RANDOM] = [
        per_depth(g, np.random.default_rng(d).choice(graph.n, k, replace=False), truth, depths) for d in range(draws)
    ]
    linking = np.flatnonzero(np.diff(g.indptr) > 0)
    rows[RANDOM_OUT] = [
        per_depth(g, np.random.default_rng(100 + d).choice(linking, k, replace=False), truth, depths)
        for d in range(draws)
    ]
    pruned_out = np.diff(prune_same_host(g, graph.hosts).indptr)
    top = np.lexsort((np.arange(graph.n), -pruned_out))[:k]
    rows[TOP_OUT] = [per_depth(g, top, truth, depths)]
    return dict(graph=graph, g=g, truth=truth, res=res, old_res=old_res, secs=secs, rows=rows)


def _cells(runs, f, fmt):
    vals = np.array([f(p, x) for p, x in runs])
    if len(vals) == 1:
        return [fmt(v) for v in vals[0]]
    lo, mean, hi = vals.min(0), vals.mean(0), vals.max(0)
    return [f"{fmt(m)} ({fmt(a)}-{fmt(b)})" for a, m, b in zip(lo, mean, hi)]


def report(name, r, draws):
    graph, res, rows, truth = r["graph"], r["res"], r["rows"], r["truth"]
    depths = len(rows[EXTRACTED][0][0]) - 1
    out = [
        f"#### {TITLES[name]}: {graph.n:,} pages, {graph.n_edges:,} links, {graph.hosts.max() + 1:,} hosts; "
        f"HITS on {res.links:,} links after pruning; 10 seeds in {r['secs']:.1f} s",
        "",
        "| round | hubs x authorities | cover density | seed | seed's in / out links "
        "| seed's PageRank rank | distance to the other cores: min / mean / max |",
        "|---|---|---|---|---|---|---|",
    ]
    g = r["g"]
    indeg = np.bincount(g.indices, minlength=graph.n)
    rank = np.empty(graph.n, np.int64)
    rank[np.argsort(-truth, kind="stable")] = np.arange(1, graph.n + 1)
    for c in res.cores:
        d = [v for v in c.distances.values() if v is not None]
        dist = f"{min(d)} / {np.mean(d):.1f} / {max(d)}" if d else "-"
        if len(d) < len(c.distances):
            dist += f" ({len(c.distances) - len(d)} unreachable)"
        out.append(
            f"| {c.round + 1} | {len(c.hubs):,} x {len(c.authorities):,} | {c.cover_density:.0f}% | "
            f"`{graph.urls[c.seed]}` | "
            f"{indeg[c.seed]} / {g.indptr[c.seed + 1] - g.indptr[c.seed]} | {rank[c.seed]:,} | {dist} |"
        )
    same = len(set(r["old_res"].seeds) & set(res.seeds))
    out += [
        "",
        f"Seeds from the old graph (20% of links removed): {same} of 10 equal to the seeds from the full graph.",
        "",
    ]
    head = "| seeds | " + " | ".join(f"depth ≤ {d}" for d in range(depths + 1)) + " |"
    sep = "|---|" + "---|" * (depths + 1)
    note = f"random rows: mean (min-max) of {draws} draws"
    out += [
        f"True PageRank collected by a BFS crawl, cumulative by depth (depth 0 = the seeds; {note}):",
        "",
        head,
        sep,
    ]
    for label, runs in rows.items():
        out.append(f"| {label} | " + " | ".join(_cells(runs, lambda p, x: np.cumsum(x), lambda v: f"{v:.3f}")) + " |")
    out += ["", f"Pages reached, cumulative by depth ({note}):", "", head, sep]
    for label, runs in rows.items():
        out.append(f"| {label} | " + " | ".join(_cells(runs, lambda p, x: np.cumsum(p), lambda v: f"{v:,.0f}")) + " |")
    return "\n".join(out)


def plot(name, r, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = r["rows"]
    depths = np.arange(len(rows[EXTRACTED][0][0]))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    series = [
        ("true PageRank collected (cumulative)", lambda p, x: np.cumsum(x), "linear"),
        ("pages reached (cumulative)", lambda p, x: np.cumsum(p), "log"),
        (
            "average PageRank of the pages found at each depth",
            lambda p, x: np.where(p > 0, x / np.maximum(p, 1), np.nan),
            "log",
        ),
    ]
    styles = {
        EXTRACTED: ("-o", "C0"),
        OLD: ("--s", "C1"),
        TOP_OUT: (":^", "C2"),
        RANDOM: ("-", "0.55"),
        RANDOM_OUT: ("-", "C3"),
    }
    for ax, (title, f, scale) in zip(axes, series):
        for label, runs in rows.items():
            style, color = styles[label]
            if len(runs) == 1:
                ax.plot(depths, f(*runs[0]), style, color=color, label=label, ms=4)
                continue
            for i, run_ in enumerate(runs):  # each random draw, thin
                ax.plot(
                    depths,
                    f(*run_),
                    style,
                    color=color,
                    lw=0.8,
                    alpha=0.6,
                    label=f"{label} (each draw)" if i == 0 else None,
                )
        ax.set(title=title, xlabel="crawl depth (0 = the seeds)", yscale=scale)
        ax.title.set_fontsize(10)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{TITLES[name]}: breadth-first crawls from 10 seeds", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", choices=list(LOADERS), default=list(LOADERS))
    ap.add_argument("--draws", type=int, default=5, help="random seed sets (default 5)")
    ap.add_argument("--depths", type=int, default=6, help="crawl depths reported (default 6)")
    ap.add_argument("--out", default="docs", help="folder for the PNG plots (default docs)")
    ap.add_argument("--no-plot", action="store_true", help="tables only (no matplotlib needed)")
    args = ap.parse_args(argv)
    if not args.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit("the plots need matplotlib: pip install -e '.[plot]' (or pass --no-plot)")
        os.makedirs(args.out, exist_ok=True)
    for name in args.graphs:
        try:
            r = run(name, 10, args.draws, args.depths)
        except FileNotFoundError as e:
            print(f"{name}: skipped, data not found: {e}", file=sys.stderr)
            continue
        print(report(name, r, args.draws))
        if not args.no_plot:
            png = os.path.join(args.out, f"seeds_{name}.png")
            plot(name, r, png)
            print(f"\n![{TITLES[name]}]({png})\n")


if __name__ == "__main__":
    main()
