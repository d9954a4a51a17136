"""Seed extraction at scale: K = 10 seeds from a 1M-page / 10M-link graph.

A synthetic web graph (numpy, seeded): pages grouped into hosts of
Zipf-like sizes, out-degrees heavy-tailed with mean ~10, 80% of the links
inside the page's host, the rest to pages drawn by a power law of
popularity (heavy-tailed in-degrees).

1. Algorithm, on the scipy matrix: ``extract_seeds`` (same-host links
   pruned, complete cores, 60 HITS iterations per round), and again
   without pruning (all links ranked). Baselines from the same run: k
   plain HITS runs of 60 iterations on the same links (the least any
   k-round method can cost), and the per-round rebuild the first version
   used to take each core out (``D A D`` diagonal products, then HITS
   building its operator from the new matrix) against the in-place
   reweighing now used, in CPU seconds per round.
2. I/O: the same graph loaded into a page database with
   ``core.graph_import.add_graph`` (build time printed), then
   ``page_db_seeds DB -k 10 -o seeds.txt --report r.json`` timed end to
   end (reading the links from LMDB, extraction, URLs, writing).

    python benchmarks/seed_scale.py                       # 1M / 10M
    python benchmarks/seed_scale.py --pages 100000 --links 1000000
    python benchmarks/seed_scale.py --no-db               # algorithm only
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from frontera_linkrank.cli import seeds as seeds_cli
from frontera_linkrank.core.graph_import import add_graph
from frontera_linkrank.scoring.hits import hits
from frontera_linkrank.scoring.seeds import SubgraphLinks, extract_seeds, prune_same_host
from frontera_linkrank.storage.pagedb import PageDB


def web_graph(n, m, n_hosts, local=0.8, seed=0):
    """(csr adjacency, host of each page): see the module docstring."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n_hosts + 1) ** 1.0
    hosts = np.sort(rng.choice(n_hosts, n, p=w / w.sum()))
    hosts = np.unique(hosts, return_inverse=True)[1]  # no empty hosts
    size = np.bincount(hosts)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    # Out-degrees: lognormal, capped, scaled to m links before deduplication.
    deg = np.minimum(rng.lognormal(0, 1.2, n), 200)
    deg = np.floor(deg * (m * 1.25) / deg.sum() + rng.random(n)).astype(np.int64)  # duplicates go
    src = np.repeat(np.arange(n), deg)
    dst = np.empty(len(src), np.int64)
    inside = rng.random(len(src)) < local
    h = hosts[src[inside]]
    # inside a host: skewed towards its first pages (home, sections)
    dst[inside] = start[h] + np.floor(rng.random(int(inside.sum())) ** 2 * size[h]).astype(np.int64)
    popularity = rng.permutation(n)
    rank = np.floor(rng.random(int((~inside).sum())) ** 3 * n).astype(np.int64)
    dst[~inside] = popularity[rank]
    keep = src != dst
    key = np.unique(src[keep] * n + dst[keep])
    if len(key) > m:  # exactly m distinct links
        key = np.sort(rng.choice(key, m, replace=False))
    g = sp.csr_matrix((np.ones(len(key)), (key // n, key % n)), shape=(n, n))
    return g, hosts


def update_costs(g, cores):
    """CPU seconds per round to take a core out of the graph: the first
    version rebuilt it (``D A D`` diagonal products, then HITS building its
    operator from the new matrix); now the link weights are recomputed in
    place (:meth:`SubgraphLinks.remove`). Same cores, same order."""
    from frontera_linkrank.scoring.pagerank import as_links

    alive = np.ones(g.shape[0], bool)
    rebuild = 0.0
    for c in cores:
        alive[c.hubs] = False
        alive[c.authorities] = False
        t = time.process_time()
        d = sp.diags(alive.astype(np.float64))
        sub = (d @ g @ d).tocsr()
        sub.eliminate_zeros()
        as_links(sub)
        rebuild += time.process_time() - t
    links = SubgraphLinks(sp.csr_matrix(g))
    t = time.process_time()
    for c in cores:
        links.remove(c.hubs + c.authorities)
    return rebuild / len(cores), (time.process_time() - t) / len(cores)


def algorithm(g, hosts, k, iterations):
    rows = []
    for label, prune in (("pruned", True), ("no pruning", False)):
        t, cpu = time.perf_counter(), time.process_time()
        res = extract_seeds(g, k, hosts=hosts, prune=prune, iterations=iterations)
        secs, cpu = time.perf_counter() - t, time.process_time() - cpu
        links = prune_same_host(g, hosts) if prune else g
        op = SubgraphLinks(sp.csr_matrix(links))
        t, base_cpu = time.perf_counter(), time.process_time()
        hits(op, tol=0, max_iter=iterations)
        one_hits, base_cpu = time.perf_counter() - t, time.process_time() - base_cpu
        rebuild, reweigh = update_costs(links, res.cores)
        hits_s = sum(r["hits_seconds"] for r in res.rounds)
        core_s = sum(r["core_seconds"] for r in res.rounds)
        print(
            f"\n{label}: HITS on {res.links:,} links; {len(res.seeds)} seeds in {secs:.1f} s wall, {cpu:.1f} s CPU "
            f"(HITS {hits_s:.1f} s, cores {core_s:.2f} s, the rest: loading, pruning, distances)"
        )
        for c, r in zip(res.cores, res.rounds):
            d = [v for v in c.distances.values() if v is not None]
            print(
                f"  round {c.round + 1}: {len(c.hubs)} hubs x {len(c.authorities)} authorities, "
                f"{c.cover_density:.0f}%, HITS {r['iterations']} it {r['hits_seconds']:.2f} s, "
                f"core {r['core_seconds'] * 1000:.1f} ms, distances {min(d) if d else '-'}..{max(d) if d else '-'}"
            )
        rows.append((label, res.links, secs, cpu, hits_s, core_s, one_hits * k, base_cpu * k, rebuild, reweigh))
    print(
        f"\n| links ranked | extract_seeds k={k}: wall (CPU) | of which HITS / cores (wall) "
        f"| baseline: {k} x HITS({iterations}), wall (CPU) "
        "| ratio, wall (CPU) | taking a core out, CPU per round: first version's rebuild / now |"
    )
    print("|---|---|---|---|---|---|")
    for label, links, secs, cpu, hits_s, core_s, base, base_cpu, rebuild, reweigh in rows:
        print(
            f"| {links:,} ({label}) | {secs:.1f} s ({cpu:.1f} s) "
            f"| {hits_s:.1f} s / {core_s:.2f} s | "
            f"{base:.1f} s ({base_cpu:.1f} s) | {secs / base:.2f} ({cpu / base_cpu:.2f}) | "
            f"{rebuild:.2f} s / {reweigh:.3f} s |"
        )
    print(
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall times include other processes' load)"
    )


def io(g, hosts, k, workdir):
    n = g.shape[0]
    urls = [f"http://h{h}.example.com/p{v}" for v, h in enumerate(hosts.tolist())]
    names = [f"h{h}.example.com" for h in hosts.tolist()]
    coo = g.tocoo()
    path = os.path.join(workdir, "db")
    t = time.perf_counter()
    with PageDB(path, sync=False) as db:
        add_graph(db, urls, coo.row, coo.col, hosts=names)
    build = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    print(
        f"\npage database: {n:,} pages, {g.nnz:,} links, built by add_graph in {build:.0f} s, {size / 2**20:,.0f} MiB"
    )
    out, rep = os.path.join(workdir, "seeds.txt"), os.path.join(workdir, "report.json")
    t, cpu = time.perf_counter(), time.process_time()
    code = seeds_cli.main([path, "-k", str(k), "-o", out, "--report", rep])
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    if code != 0:
        sys.exit("page_db_seeds failed")
    r = json.load(open(rep))
    print(
        f"page_db_seeds -k {k}: {wall:.1f} s wall, {cpu:.1f} s CPU (links read from LMDB in {r['seconds_load']:.1f} s, "
        f"{r['links_ranked']:,} links ranked after pruning)"
    )
    with open(out) as f:
        print("".join(f.readlines()[:4]), end="")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--links", type=int, default=10_000_000)
    ap.add_argument("--hosts", type=int, default=20_000)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--no-db", action="store_true", help="skip the page database part")
    ap.add_argument("--workdir", help="where to build the page database (default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    g, hosts = web_graph(args.pages, args.links, args.hosts)
    rows = np.repeat(np.arange(g.shape[0]), np.diff(g.indptr))
    inside = np.mean(hosts[rows] == hosts[g.indices])
    print(
        f"graph: {g.shape[0]:,} pages, {g.nnz:,} links, {hosts.max() + 1:,} hosts, "
        f"{inside:.0%} of links inside their host, max in-degree {np.bincount(g.indices).max():,}, "
        f"max out-degree {np.diff(g.indptr).max()}; generated in {time.perf_counter() - t:.0f} s"
    )
    algorithm(g, hosts, args.k, args.iterations)
    if not args.no_db:
        work = args.workdir or tempfile.mkdtemp(prefix="seed_scale_")
        try:
            io(g, hosts, args.k, work)
        finally:
            if not args.workdir:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
