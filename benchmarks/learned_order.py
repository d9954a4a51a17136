"""A learned ranking of frontier pages: features, leave-one-graph-out fit, snapshot quality.

Crawls each development graph with the ``push`` policy through
``FrontierManager`` (10 seeds per draw, batches of 100), rebuilds what the
crawler knew at several points of the crawl (the crawled pages, their
out-links, the frontier they revealed) and computes, for every frontier
page, features the crawler could keep at O(links) per page (see
:data:`FEATURES`). A linear model on these features, fitted by least
squares to the log of the true PageRank (per snapshot, features and target
centred, each graph weighted equally), is trained on three graphs and
evaluated on the fourth. The score of a ranking at one snapshot is the
true PageRank held by its best ``k`` frontier pages divided by the most any
``k`` frontier pages hold.

    python benchmarks/learned_order.py [--graphs hollins polblogs ukwa uk2007] [--draws 2] \\
        [--weights weights.json]   # leave-one-graph-out table; writes the weights fitted on all graphs
    python benchmarks/learned_order.py --draws 3 \
        --crawl="--draws 5 --policies learned push --baselines batch-pagerank"  # and crawl each held-out graph
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from urllib.parse import urlsplit

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from frontera_linkrank.simulation import metrics
from frontera_linkrank.simulation.crawl import LINKRANK, crawl
from frontera_linkrank.simulation.datasets import load_graph, merge_same_pages
from frontera_linkrank.simulation.graphs import Graph
from frontera_linkrank.simulation.report import draw_seeds

POLICY_FEATURES = ("log_push", "log_indeg", "depth", "log_template")  # those of policy 'learned'

D = 0.85
SNAPSHOTS = (0.02, 0.05, 0.1, 0.15)  # fraction of the graph's pages crawled
FEATURES = (
    "log_push",  # log of the push estimate x + r (known graph's PageRank, unnormalised)
    "log_inflow",  # log of the mass received through links (push estimate minus own teleport)
    "log_indeg",  # log1p known in-links (distinct crawled pages linking)
    "log_hosts_in",  # log1p distinct hosts linking
    "log_cross_in",  # log1p in-links from other hosts
    "depth",  # links from the nearest seed through crawled pages
    "log_best_parent",  # log of the largest single contribution x_u / out_u
    "log_host_known",  # log1p pages of the page's host known
    "log_host_crawled",  # log1p pages of the host crawled
    "log_host_pending",  # log1p pages of the host waiting
    "log_host_outdeg",  # log1p mean out-degree of the host's crawled pages
    "log_template",  # log1p same-host in-links / host crawled pages * host known pages
    "log_age",  # log1p pages crawled since the page was found
    "url_depth",  # path segments of the URL
    "url_len",  # log length of the URL
    "home",  # the URL is a host's root page
)


def url_features(g: Graph) -> np.ndarray:
    """Per page: path segments, log URL length, root page (0/1)."""
    out = np.zeros((g.n, 3))
    for v, u in enumerate(g.urls):
        parts = urlsplit(u)
        segs = [s for s in parts.path.split("/") if s]
        home = not segs or (len(segs) == 1 and segs[0].lower().startswith(("index.", "default.", "home.")))
        out[v] = (len(segs), np.log(len(u)), float(home and not parts.query))
    return out


def snapshot(g: Graph, urlf: np.ndarray, order: np.ndarray, k: int, seeds: list[int],
             first_seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frontier pages after ``k`` fetches of ``order`` and their feature matrix."""
    n = g.n
    crawled = np.zeros(n, bool)
    crawled[order[:k]] = True
    deg = np.diff(g.indptr)
    src = np.repeat(np.arange(n), deg)
    keep = crawled[src]
    a = sp.csr_matrix((np.ones(int(keep.sum())), (src[keep], g.indices[keep])), shape=(n, n))
    a.data[:] = 1.0  # duplicate links count once
    out = np.asarray(a.sum(1)).ravel()
    known = crawled.copy()
    known[a.indices] = True
    frontier = np.flatnonzero(known & ~crawled)
    # Known graph's PageRank as the push policy keeps it: x = 1 + d P^T x on known pages.
    inv = np.where(out > 0, 1.0 / np.maximum(out, 1), 0.0)
    at = a.T.tocsr()
    x = known.astype(np.float64)
    for _ in range(60):
        x = known + D * (at @ (x * inv))
    inflow = x - known
    best = np.asarray(a.multiply((x * inv)[:, None]).max(0).todense()).ravel()
    indeg = np.asarray((a > 0).sum(0)).ravel()
    hosts = g.hosts
    ac = a.tocoo()
    same = hosts[ac.row] == hosts[ac.col]
    cross_in = np.bincount(ac.col[~same], minlength=n)
    same_in = np.bincount(ac.col[same], minlength=n)
    hp = np.unique(np.stack([hosts[ac.row], ac.col]), axis=1)
    hosts_in = np.bincount(hp[1], minlength=n)
    nh = int(hosts.max()) + 1
    h_known = np.bincount(hosts[known], minlength=nh)
    h_crawled = np.bincount(hosts[crawled], minlength=nh)
    h_out = np.bincount(hosts[crawled], weights=out[crawled], minlength=nh) / np.maximum(h_crawled, 1)
    known_idx = np.flatnonzero(known)
    sub = a[known_idx][:, known_idx]
    dist = shortest_path(sub, unweighted=True, indices=np.searchsorted(known_idx, seeds)).min(0)
    depth = np.full(n, 30.0)
    depth[known_idx] = np.where(np.isfinite(dist), dist, 30.0)
    f = frontier
    h = hosts[f]
    template = same_in[f] / np.maximum(h_crawled[h], 1) * h_known[h]
    feats = np.column_stack([
        np.log(x[f]), np.log(inflow[f] + 1e-3), np.log1p(indeg[f]), np.log1p(hosts_in[f]), np.log1p(cross_in[f]),
        depth[f], np.log(best[f] + 1e-3), np.log1p(h_known[h]), np.log1p(h_crawled[h]),
        np.log1p(h_known[h] - h_crawled[h]), np.log1p(h_out[h]), np.log1p(template),
        np.log1p(k - first_seen[f]), urlf[f],
    ])
    return frontier, feats


def first_seen_positions(g: Graph, order: np.ndarray) -> np.ndarray:
    """For each page, the number of pages crawled when it was first linked (seeds: 0)."""
    n = g.n
    pos = np.full(n, np.iinfo(np.int64).max)
    for i, u in enumerate(order.tolist()):
        t = g.indices[g.indptr[u]:g.indptr[u + 1]]
        np.minimum.at(pos, t, i + 1)
    return np.where(pos == np.iinfo(np.int64).max, 0, pos)


def collect(name: str, draws: int, cache: str | None = None) -> list[dict]:
    """Snapshots of ``draws`` push crawls of graph ``name`` (kept in ``cache``, an .npz, if given)."""
    if cache:
        try:
            with np.load(f"{cache}-{name}-{draws}.npz", allow_pickle=False) as z:
                return [{"graph": name, "draw": int(z[f"draw{i}"]), "frac": float(z[f"frac{i}"]), "n": int(z["n"]),
                         "pages": z[f"pages{i}"], "X": z[f"X{i}"], "pr": z[f"pr{i}"]}
                        for i in range(int(z["count"]))]
        except FileNotFoundError:
            pass
    g = merge_same_pages(load_graph(name))
    truth = metrics.reference_pagerank(g.indptr, g.indices)
    urlf = url_features(g)
    budget = int(max(SNAPSHOTS) * g.n) + 1
    out = []
    for d in range(draws):
        seeds = draw_seeds(g, 10, d)
        # Threshold 0.3: the crawls the shipped weights were fitted on.
        order = np.asarray(crawl(g, LINKRANK, seeds, budget, batch=100,
                                 settings={"LINKRANK_POLICY": "push", "LINKRANK_PUSH_THRESHOLD": 0.3}).order, np.int64)
        first = first_seen_positions(g, order)
        first[seeds] = 0
        for frac in SNAPSHOTS:
            k = int(frac * g.n)
            pages, feats = snapshot(g, urlf, order, k, seeds, first)
            out.append({"graph": name, "draw": d, "frac": frac, "n": g.n, "pages": pages, "X": feats,
                        "pr": truth[pages]})
        print(f"{name}: draw {d} done", file=sys.stderr, flush=True)
    if cache:
        arrays = {"n": np.array(g.n), "count": np.array(len(out))}
        for i, s in enumerate(out):
            arrays.update({f"draw{i}": np.array(s["draw"]), f"frac{i}": np.array(s["frac"]),
                           f"pages{i}": s["pages"], f"X{i}": s["X"], f"pr{i}": s["pr"]})
        np.savez(f"{cache}-{name}-{draws}.npz", **arrays)
    return out


def design(snaps: list[dict], cols: list[int], quad: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centred features, centred log PR* and weights (each graph's total weight 1)."""
    xs, ys, ws = [], [], []
    per_graph: dict[str, int] = {}
    for s in snaps:
        per_graph[s["graph"]] = per_graph.get(s["graph"], 0) + len(s["pr"])
    for s in snaps:
        x = expand(s["X"][:, cols], quad)
        y = np.log(s["pr"])
        xs.append(x - x.mean(0))
        ys.append(y - y.mean())
        ws.append(np.full(len(y), 1.0 / per_graph[s["graph"]]))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(ws)


def expand(x: np.ndarray, quad: bool) -> np.ndarray:
    """The features, with their squares when ``quad``."""
    return np.hstack([x, x * x]) if quad else x


def fit(snaps: list[dict], cols: list[int], quad: bool, ridge: float = 1e-3) -> np.ndarray:
    """Weighted least squares with a small ridge on standardised columns."""
    x, y, w = design(snaps, cols, quad)
    sd = x.std(0) + 1e-12
    z = x / sd * np.sqrt(w)[:, None]
    lhs = z.T @ z + ridge * np.eye(z.shape[1])
    beta = np.linalg.solve(lhs, z.T @ (y * np.sqrt(w)))
    return beta / sd


def fit_logistic(snaps: list[dict], cols: list[int], quad: bool, top: float = 0.01, iters: int = 30) -> np.ndarray:
    """Logistic regression (Newton steps) for "among the best ``top`` of the graph's pages
    in the frontier by PR*"; per snapshot the positives and the negatives weigh half each,
    each graph weighs 1; a tiny ridge on standardised columns."""
    per: dict[str, int] = {}
    for s in snaps:
        per[s["graph"]] = per.get(s["graph"], 0) + 1
    xs, ys, ws = [], [], []
    for s in snaps:
        x = expand(s["X"][:, cols], quad)
        y = np.zeros(len(s["pr"]))
        y[np.argsort(-s["pr"], kind="stable")[: max(10, int(top * s["n"]))]] = 1.0
        xs.append(x - x.mean(0))
        ys.append(y)
        ws.append(np.where(y == 1, 0.5 / y.sum(), 0.5 / max(len(y) - y.sum(), 1)) / per[s["graph"]])
    x, y, w = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    sd = x.std(0) + 1e-12
    z = np.hstack([x / sd, np.ones((len(x), 1))])
    b = np.zeros(z.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-z @ b))
        h = z.T @ (z * (w * p * (1 - p))[:, None]) + 1e-3 * np.eye(len(b))
        b = b + np.linalg.solve(h, z.T @ (w * (y - p)) - 1e-3 * b)
    return b[:-1] / sd


def captured(score: np.ndarray, pr: np.ndarray, k: int) -> float:
    """PR* of the best ``k`` pages by ``score`` over the most any ``k`` hold (ties: first found)."""
    k = min(k, len(pr))
    top = np.argsort(-score, kind="stable")[:k]
    return float(pr[top].sum() / np.sort(pr)[::-1][:k].sum())


def evaluate(snaps: list[dict], scorers: dict) -> dict:
    """Mean captured share per scorer at k = 1% of the graph and k = 100."""
    res = {}
    for name, fn in scorers.items():
        a1 = [captured(fn(s), s["pr"], max(10, int(0.01 * s["n"]))) for s in snaps]
        a2 = [captured(fn(s), s["pr"], 100) for s in snaps]
        res[name] = (float(np.mean(a1)), float(np.mean(a2)))
    return res


def main(argv: list[str] | None = None) -> int:
    """Leave-one-graph-out table; optionally write weights fitted on every graph."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["hollins", "polblogs", "ukwa", "uk2007"])
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--features", nargs="+", default=list(POLICY_FEATURES))
    ap.add_argument("--model", choices=("logistic", "lsq"), default="logistic")
    ap.add_argument("--crawl", metavar="ORDERING_ARGS",
                    help="then crawl each held-out graph with policy 'learned' under the weights fitted on the "
                         "other graphs: benchmarks/ordering.py with these extra arguments (one quoted string)")
    ap.add_argument("--quad", action="store_true", help="add the squares of the features")
    ap.add_argument("--cache", help="keep the snapshots in files with this prefix (.npz, no pickles)")
    ap.add_argument("--weights", help="write the weights fitted on all graphs to this JSON file")
    args = ap.parse_args(argv)
    cols = [FEATURES.index(f) for f in args.features]
    snaps = [s for name in args.graphs for s in collect(name, args.draws, args.cache)]
    fitter = fit_logistic if args.model == "logistic" else fit
    fitted: dict[str, np.ndarray] = {}
    lin = lambda beta: (lambda s: expand(s["X"][:, cols], args.quad) @ beta)  # noqa: E731
    print("| held-out graph | push estimate | in-links | learned (LOGO) | push x 0.5^depth | "
          "(k = 1% of pages; then k = 100) |\n|---|---|---|---|---|---|")
    for held in args.graphs:
        train = [s for s in snaps if s["graph"] != held]
        test = [s for s in snaps if s["graph"] == held]
        beta = fitter(train, cols, args.quad)
        fitted[held] = beta
        r = evaluate(test, {
            "push": lambda s: s["X"][:, 0],
            "indeg": lambda s: s["X"][:, 2] + 1e-6 * s["X"][:, 0],
            "learned": lin(beta),
            "depth": lambda s: s["X"][:, 1] + np.log(0.5) * s["X"][:, 5],
        })
        cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in r.values())
        print(f"| {held} | {cells} |", flush=True)
        print("   weights:", {f: round(float(b), 3) for f, b in zip(args.features, beta)}, flush=True)
    if args.weights:
        beta = fitter(snaps, cols, args.quad)
        with open(args.weights, "w") as fh:
            json.dump({"features": args.features, "quad": args.quad, "weights": beta.tolist()}, fh, indent=1)
    if args.crawl is not None:
        crawl_held_out(args.graphs, fitted, args.features, args.quad, shlex.split(args.crawl))
    return 0


def crawl_held_out(graphs: list[str], fitted: dict[str, np.ndarray], features: list[str], quad: bool,
                   extra: list[str]) -> None:
    """Each graph crawled by policy ``learned`` with the weights fitted without it."""
    import ordering

    from frontera_linkrank.scheduling.policies import learned

    if features != list(learned.FEATURES) or quad:
        raise SystemExit(f"--crawl needs --features {' '.join(learned.FEATURES)} and no --quad")
    for held in graphs:
        learned.WEIGHTS = np.asarray(fitted[held], np.float64)
        print(f"\n{held}: crawled with weights fitted on the other graphs: {learned.WEIGHTS.round(3).tolist()}")
        ordering.main(["--graphs", held, "--policies", "learned", *extra])


if __name__ == "__main__":
    sys.exit(main())
