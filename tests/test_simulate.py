"""The crawl simulator's baselines, politeness loop and metrics.

The BFS baseline must hand out pages in exactly Frontera's memory BFS
order; the other baselines are checked step by step against a replay of the
crawl (batch size 1: at every step the page handed out is the best of the
frontier by the baseline's own rule).
"""

import math

import numpy as np
import pytest
from frontera import FrontierManager, Settings
from frontera.utils.tester import BaseDownloaderSimulator, FrontierTester

from frontera_graphs import GraphManager, graphs
from frontera_linkrank.simulation import metrics
from frontera_linkrank.simulation.baselines import BACKENDS
from frontera_linkrank.simulation.crawl import BFS, LINKRANK, Politeness, crawl, simulate
from frontera_linkrank.simulation.graphs import Graph, power_law_host_graph
from frontera_linkrank.simulation.metrics import reference_pagerank
from frontera_linkrank.storage.urls import check_url

GRAPHS = graphs()


def random_graph(n=300, hosts=12, deg=4, seed=0, dups=True):
    """CSR graph with duplicate links and self-links kept (Graph() does not
    merge them), so the baselines see them as a crawler would."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(deg, n)
    indptr = np.r_[0, np.cumsum(counts)]
    # Skewed targets: low ids are popular.
    indices = np.floor(n * rng.random(indptr[-1]) ** 2).astype(np.int64)
    if dups and len(indices) > 3:
        indices[1::7] = indices[::7][: len(indices[1::7])]  # repeat links on a page
        src = np.repeat(np.arange(n), counts)
        indices[5::11] = src[5::11]  # self-links
    return Graph(indptr, indices, hosts=rng.integers(0, hosts, n), name="rand")


# -- BFS is Frontera's memory BFS, exactly ---------------------------------------------------


def order_of_tester(graph, batch, backend):
    manager = FrontierManager.from_settings(Settings(attributes={"BACKEND": backend, "TEST_MODE": True}))
    tester = FrontierTester(manager, GraphManager().add_site_list(graph), BaseDownloaderSimulator(),
                            max_next_requests=batch)
    tester.run()
    return [[r.url for r in reqs] for reqs, _, _ in tester.sequence]


@pytest.mark.parametrize("batch", [1, 2, 5, 10, 100])
@pytest.mark.parametrize("graph", [g for _, g in GRAPHS], ids=[n for n, _ in GRAPHS])
def test_bfs_baseline_equals_frontera_memory_bfs_on_frontera_fixtures(graph, batch):
    expected = order_of_tester(graph, batch, BFS)
    assert order_of_tester(graph, batch, BACKENDS["bfs"]) == expected
    assert sum(map(len, expected)) > 0


@pytest.mark.parametrize("batch", [1, 3, 17, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bfs_baseline_equals_frontera_memory_bfs_on_random_graphs(batch, seed):
    g = random_graph(seed=seed)
    seeds = [3, 40, 41, 200]
    expected = simulate(g, BFS, seeds, g.n, batch=batch)
    assert simulate(g, BACKENDS["bfs"], seeds, g.n, batch=batch) == expected
    assert len(expected) > 100


def test_bfs_baseline_equals_frontera_memory_bfs_on_hollins():
    from conftest import dataset
    from frontera_linkrank.simulation.graphs import load_hollins

    g = load_hollins(dataset("hollins"))
    seeds = [0, 17, 2500]
    for batch in (1, 64):
        expected = simulate(g, BFS, seeds, 3000, batch=batch)
        assert simulate(g, BACKENDS["bfs"], seeds, 3000, batch=batch) == expected
        assert len(expected) == 3000


# -- the other baselines, step by step ---------------------------------------------------------


def replay(graph, seeds, order):
    """Yield, before each fetch, (k, frontier in discovery order, crawled set,
    discovery rank of every known page)."""
    found = {}
    for s in seeds:
        found.setdefault(s, len(found))
    crawled = set()
    for k, v in enumerate(order):
        frontier = [u for u in sorted(found, key=found.get) if u not in crawled]
        yield k, frontier, crawled, found
        crawled.add(v)
        for w in graph.out(v).tolist():
            found.setdefault(w, len(found))


def run1(graph, name, seeds, **settings):
    return simulate(graph, BACKENDS[name], seeds, graph.n, batch=1, settings=settings)


def test_omniscient_takes_the_highest_true_pagerank_of_the_frontier():
    g = random_graph(seed=3)
    truth = reference_pagerank(g.indptr, g.indices)
    oracle = dict(zip(g.fingerprints, truth.tolist()))
    seeds = [5, 100]
    order = run1(g, "omniscient", seeds, SIMULATION_ORACLE=oracle)
    assert len(order) > 100
    for k, frontier, _, _ in replay(g, seeds, order):
        best = max(frontier, key=lambda u: (truth[u], -frontier.index(u)))
        assert order[k] == best, f"step {k}"


def test_backlink_count_takes_the_most_linked_frontier_page():
    g = random_graph(seed=4)
    seeds = [7, 150]
    order = run1(g, "backlinks", seeds)
    assert len(order) > 100
    count = {}
    for k, frontier, _, found in replay(g, seeds, order):
        best = max(frontier, key=lambda u: (count.get(u, 0), -found[u]))
        assert order[k] == best, f"step {k}"
        for w in set(g.out(order[k]).tolist()) - {order[k]}:
            count[w] = count.get(w, 0) + 1


def test_larger_sites_first_takes_the_host_with_most_pending_pages():
    g = random_graph(seed=5, hosts=6)
    seeds = [9, 250]
    order = run1(g, "larger-sites-first", seeds)
    host = [check_url(u) for u in g.urls]
    host_rank = {}
    for k, frontier, _, found in replay(g, seeds, order):
        for u in sorted(found, key=found.get):
            host_rank.setdefault(host[u], len(host_rank))
        pending = {}
        for u in frontier:
            pending.setdefault(host[u], []).append(u)
        best_host = max(pending, key=lambda h: (len(pending[h]), -host_rank[h]))
        assert order[k] == pending[best_host][0], f"step {k}"


def test_random_baseline_is_reproducible_uniform_and_crawls_the_reachable_set():
    from frontera_linkrank.simulation.crawl import _Link

    g = random_graph(seed=6)
    seeds = [1, 2]
    a = run1(g, "random", seeds, SIMULATION_RANDOM_SEED=1)
    b = run1(g, "random", seeds, SIMULATION_RANDOM_SEED=1)
    c = run1(g, "random", seeds, SIMULATION_RANDOM_SEED=2)
    assert a == b and a != c
    assert set(a) == set(c) == set(simulate(g, BFS, seeds, g.n))
    # The first page out of four seeds, over 400 random seeds: uniform.
    counts = {}
    for r in range(400):
        m = FrontierManager.from_settings(Settings(attributes={
            "BACKEND": BACKENDS["random"], "MIDDLEWARES": [], "SIMULATION_RANDOM_SEED": r}))
        m.add_seeds([_Link(g.urls[v], g.fingerprints[v]) for v in (10, 11, 12, 13)])
        first = m.get_next_requests(1)[0].url
        counts[first] = counts.get(first, 0) + 1
    assert len(counts) == 4 and all(60 <= c <= 140 for c in counts.values()), counts


def test_batch_pagerank_ranks_the_known_graph_every_k_pages():
    import scipy.sparse as sp

    from frontera_linkrank.scoring.pagerank import pagerank

    g = random_graph(seed=7)
    seeds = [0, 30]
    every = 25
    backends = []

    def observe(backend, n):
        backends.append(backend)

    res = crawl(g, BACKENDS["batch-pagerank"], seeds, 120, batch=5,
                settings={"SIMULATION_PAGERANK_EVERY": every}, observe=observe, checkpoints=[120])
    b = backends[0]
    assert b.n_rankings == 120 // every
    # The last ranking: PageRank of the graph known when it ran.
    crawled = res.order[: b._ranked_at]
    known = {fp: i for i, fp in enumerate(b.fps)}
    vid = {v: known[g.fingerprints[v]] for v in range(g.n) if g.fingerprints[v] in known}
    n = len(b.scores)
    src, dst = [], []
    for v in crawled:
        for w in set(g.out(v).tolist()) - {v}:
            if vid[w] < n:
                src.append(vid[v])
                dst.append(vid[w])
    expected = pagerank(sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)), tol=1e-12).scores
    assert np.abs(b.scores - expected).sum() < 1e-6
    # After it, ranked frontier pages went out by decreasing score.
    after = [known[g.fingerprints[v]] for v in res.order[b._ranked_at :]]
    ranked = [i for i in after if i < n]
    assert ranked == sorted(ranked, key=lambda i: (-b.scores[i], i))


def test_baselines_skip_overused_hosts():
    g = random_graph(seed=8, hosts=3)
    seeds = list(range(40))
    for name in ("bfs", "backlinks", "larger-sites-first", "random"):
        m = FrontierManager.from_settings(Settings(attributes={"BACKEND": BACKENDS[name], "MIDDLEWARES": []}))
        from frontera_linkrank.simulation.crawl import _Link

        m.add_seeds([_Link(g.urls[v], g.fingerprints[v]) for v in seeds])
        busy = check_url(g.urls[seeds[0]])
        got = m.get_next_requests(100, key_type="domain", overused_keys=[busy])
        assert got and all(check_url(r.url) != busy for r in got), name
        rest = m.get_next_requests(100, key_type="domain", overused_keys=[])
        assert {r.url for r in got} | {r.url for r in rest} == {g.urls[v] for v in seeds}, name


# -- politeness -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [LINKRANK, BACKENDS["bfs"], BACKENDS["larger-sites-first"], BFS])
def test_polite_crawl_keeps_host_delays(backend):
    g = random_graph(n=400, hosts=8, seed=9)
    p = Politeness(delay=3.0, concurrency=6)
    res = crawl(g, backend, [0, 1, 2, 3], 250, politeness=p)
    assert len(res.order) == len(res.times) == len(set(res.order))
    last = {}
    per_time = {}
    for v, t in zip(res.order, res.times):
        h = check_url(g.urls[v])
        if h in last:
            assert t - last[h] >= 3.0 - 1e-9, f"host {h} fetched at {last[h]} and {t}"
        last[h] = t
        per_time[t] = per_time.get(t, 0) + 1
    assert max(per_time.values()) <= 6  # never more than the crawler holds
    assert res.times == sorted(res.times)


def test_polite_crawl_is_reproducible_and_overused_hosts_wait():
    g = random_graph(n=400, hosts=4, seed=10)
    p = Politeness(delay=2.0, concurrency=8)
    a = crawl(g, LINKRANK, [0, 1], 200, politeness=p)
    b = crawl(g, LINKRANK, [0, 1], 200, politeness=p)
    assert a.order == b.order and a.times == b.times
    # Frontera's memory BFS ignores overused_keys: its requests queue up in
    # busy hosts' slots and the same pages take longer than with the
    # identical order that respects them.
    slow = crawl(g, BFS, [0, 1], 200, politeness=p)
    fast = crawl(g, BACKENDS["bfs"], [0, 1], 200, politeness=p)
    assert fast.times[-1] < slow.times[-1]


# -- metrics and the report ----------------------------------------------------------------


def test_collected_recall_and_area_on_a_known_order():
    truth = np.array([0.4, 0.3, 0.2, 0.1])
    order = [2, 0, 1]
    assert metrics.collected(order, truth, (0.25, 0.5, 1.0)) == pytest.approx([0.2, 0.6, 0.9])
    assert metrics.recall(order, metrics.top_set(truth, 0.5), 4, (0.25, 0.5, 0.75)) == [0.0, 0.5, 1.0]
    # Curve 0.2, 0.6, 0.9, 0.9 (stopped early: keeps its last value).
    assert metrics.area(order, truth, 4) == pytest.approx(2.6)
    assert metrics.area([0, 1, 2, 3], truth, 4) == pytest.approx(0.4 + 0.7 + 0.9 + 1.0)


def test_estimate_quality_against_scipy_weightedtau():
    from scipy.stats import weightedtau

    rng = np.random.default_rng(0)
    truth = rng.random(500)
    est = truth + rng.normal(0, 0.2, 500)
    tau, overlap = metrics.estimate_quality(est, truth, 0.02)
    assert tau == pytest.approx(weightedtau(est, truth).statistic)
    top_e = set(np.argsort(-est)[:10].tolist())
    top_t = set(np.argsort(-truth)[:10].tolist())
    assert overlap == len(top_e & top_t) / 10
    assert math.isnan(metrics.estimate_quality(np.zeros(500), truth)[0])


def test_report_on_a_small_graph():
    from frontera_linkrank.simulation.report import format_report, plan, run_report

    g = power_law_host_graph(3000, pages_per_host=150, seed=2)
    runs = plan(["opic"], ["bfs", "backlinks", "batch-pagerank"], pagerank_every=100)
    rep = run_report(g, runs, draws=2, seeds=5, budget=0.2, estimate_points=4)
    by = {r["name"]: r for r in rep["runs"]}
    assert list(by) == ["opic", "bfs", "backlinks", "batch-pagerank", "omniscient"]
    om = by["omniscient"]["mean"]
    assert om["auc_relative"] == pytest.approx(1.0) and om["relative"] == pytest.approx([1.0] * 4)
    truth = reference_pagerank(g.indptr, g.indices)
    for r in rep["runs"]:
        assert len(r["draws"]) == 2
        for d in r["draws"]:
            assert d["pages"] == 600
            assert 0 < d["collected"][-1] <= truth.sum() + 1e-12
            assert d["collected"] == sorted(d["collected"])
    # The seeds of a draw are the same for every run.
    assert len({tuple(r["draws"][1]["seeds"]) for r in rep["runs"]}) == 1
    for name in ("opic", "backlinks", "batch-pagerank"):
        est = by[name]["draws"][0]["estimate"]
        assert [e is not None for e in est] == [True] * 4, name
        assert all(-1 <= e["weighted_tau"] <= 1 for e in est[1:])
    assert "estimate" not in by["bfs"]["mean"]
    text = format_report(rep)
    assert "| opic |" in text and "omniscient" in text and "weighted Kendall tau" in text


def test_graph_generator_is_reproducible_and_host_structured():
    a = power_law_host_graph(5000, seed=4)
    b = power_law_host_graph(5000, seed=4)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    src = np.repeat(np.arange(a.n), np.diff(a.indptr))
    assert not np.any(src == a.indices)
    inside = np.mean(a.hosts[src] == a.hosts[a.indices])
    assert 0.7 < inside < 0.9
    indeg = np.bincount(a.indices, minlength=a.n)
    assert indeg.max() > 50 * max(1, np.median(indeg))  # heavy-tailed in-degrees
    from frontera_linkrank.storage.urls import fingerprint

    assert all(fingerprint(a.urls[v]).hex().encode() == a.fingerprints[v] for v in range(0, a.n, 97))


def test_urls_of_one_page_are_merged_before_a_report():
    from frontera_linkrank.simulation.datasets import merge_same_pages
    from frontera_linkrank.simulation.report import plan, run_report

    urls = ["http://a.test/", "http://A.test/", "http://b.test/?y=1&x=2", "http://b.test/?x=2&y=1", "http://c.test/"]
    g = Graph.from_edges([0, 1, 1, 2, 3, 4], [2, 3, 4, 0, 1, 0], 5, urls=urls)
    m = merge_same_pages(g)
    assert m.n == 3 and m.urls == ["http://a.test/", "http://b.test/?y=1&x=2", "http://c.test/"]
    assert {(m.urls[s], m.urls[d]) for s in range(m.n) for d in m.out(s).tolist()} == {
        ("http://a.test/", "http://b.test/?y=1&x=2"), ("http://a.test/", "http://c.test/"),
        ("http://b.test/?y=1&x=2", "http://a.test/"), ("http://c.test/", "http://a.test/")}
    rep = run_report(g, plan(["opic"], ["bfs"]), draws=1, seeds=1, budget=1.0, fractions=(1.0,))
    assert rep["graph"]["pages"] == 3 and rep["graph"]["merged_urls"] == 2
    assert all(r["draws"][0]["pages"] == 3 for r in rep["runs"])
    assert merge_same_pages(m) is m
