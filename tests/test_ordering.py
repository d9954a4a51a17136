"""Crawl ordering: the textbook OPIC baseline and the push estimate.

- the textbook OPIC baseline (greedy by cash, all cash to the out-links)
  hands out, at every step of a batch-1 crawl, the frontier page with the
  most cash of a replay of the algorithm;
- the push estimate (``PushRank``) agrees with the exact PageRank of the
  known graph within the bound its threshold gives, in isolation, through
  a crawl by ``FrontierManager`` and after the database is reopened.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.scoring.links import database_adjacency
from frontera_linkrank.scoring.push import PushRank
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.simulation.baselines import BACKENDS
from frontera_linkrank.simulation.crawl import LINKRANK, crawl
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.simulation.metrics import reference_pagerank
from frontera_linkrank.storage.vertices import CRAWLED, UNFETCHED
from test_simulate import random_graph

D = 0.85


def exact(indptr, indices, n, damping=D):
    """Solution of ``x = 1 + d P^T x`` (dangling pages absorb) on a CSR graph."""
    a = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
    deg = np.asarray(a.sum(axis=1)).ravel()
    p = sp.diags(np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)) @ a
    return spla.spsolve((sp.identity(n, format="csc") - damping * p.T.tocsc()), np.ones(n))


def known_graph(rng, n=400, crawled=150, deg=6):
    """A crawl's known graph: ``crawled`` pages with rows, the rest frontier."""
    pages = rng.permutation(n)[:crawled]
    rows = []
    for u in pages:
        kids = np.unique(rng.integers(0, n, rng.poisson(deg)))
        rows.append(kids[kids != u].astype(np.int64))
    indptr = np.zeros(n + 1, np.int64)
    lens = np.zeros(n, np.int64)
    lens[pages] = [len(r) for r in rows]
    np.cumsum(lens, out=indptr[1:])
    indices = np.zeros(indptr[-1], np.int64)
    for u, r in zip(pages, rows):
        indices[indptr[u] : indptr[u] + len(r)] = r
    return pages, rows, indptr, indices


def test_push_agrees_with_the_known_graphs_pagerank_within_its_threshold():
    rng = np.random.default_rng(1)
    n = 400
    pages, rows, indptr, indices = known_graph(rng, n)
    truth = exact(indptr, indices, n)
    for eps in (0.1, 0.01, 1e-4):
        p = PushRank(D, eps)
        p.grow(n)
        # Rows arrive in batches, as pages are crawled; push after each.
        for k in range(0, len(pages), 40):
            p.read(pages[k : k + 40], rows[k : k + 40])
            p.push()
        est = p.values(np.arange(n))
        # What is left to settle is at most eps on each pushable page, and
        # (I - d P^T)^{-1} has L1 norm 1 / (1 - d).
        left = p.r[:n][p.has_row()]
        assert np.all(left <= eps)
        err = np.abs(truth - est).sum()
        assert err <= left.sum() / (1 - D) + 1e-9
        assert err <= len(pages) * eps / (1 - D)
        assert np.all(est <= truth + 1e-9)  # pushing only ever under-estimates
    # Normalised, it is the PageRank of the known graph (uniform dangling).
    ref = reference_pagerank(indptr, indices)
    assert np.abs(p.normalised() - ref).sum() < 1e-3
    assert p.pushes > 0 and p.push_edges >= p.pushes


def test_push_work_is_bounded_by_the_mass_over_the_threshold():
    rng = np.random.default_rng(2)
    n = 2000
    pages, rows, _, _ = known_graph(rng, n, crawled=800)
    for eps in (0.1, 0.01):
        p = PushRank(D, eps)
        p.grow(n)
        p.read(pages, rows)
        p.push()
        # Every push settles at least (1 - d) * eps of the n units brought.
        assert p.pushes <= n / ((1 - D) * eps)


def test_textbook_opic_fetches_the_frontier_page_with_most_cash():
    graph = random_graph(n=200, seed=3)
    seeds = [0, 5, 9]
    res = crawl(graph, BACKENDS["opic-textbook"], seeds, 120, batch=1)
    cash = np.zeros(graph.n)
    cash[seeds] = 1 / 3
    done = np.zeros(graph.n, bool)
    known = np.zeros(graph.n, bool)
    known[seeds] = True
    for v in res.order:
        frontier = np.flatnonzero(known & ~done)
        assert math.isclose(cash[v], cash[frontier].max(), rel_tol=1e-9, abs_tol=1e-15), v
        done[v] = True
        kids = [k for k in dict.fromkeys(graph.indices[graph.indptr[v] : graph.indptr[v + 1]].tolist()) if k != v]
        known[kids] = True
        if kids:
            cash[kids] += cash[v] / len(kids)
        cash[v] = 0.0
    assert len(res.order) == len(set(res.order)) == 120


def test_push_policy_crawl_keeps_the_estimate_current_and_survives_reopening(tmp_path):
    graph = load_graph("hollins")
    seeds = [0, 100, 2000]

    def check(backend, n_crawled):
        # Right after a batch was applied and committed: the online estimate
        # is the known graph's solution, within the threshold's bound.
        core = backend.core
        n = core.db.vertices.n
        with core.db.snapshot() as txn:
            a = database_adjacency(core.db, txn, n)
        err = np.abs(exact(a.indptr, a.indices, n) - core.policy.push.values(np.arange(n))).sum()
        assert abs(core.aopic.residual()) < 1e-9
        return err, n_crawled * 1e-3 / (1 - D)

    res = crawl(graph, LINKRANK, seeds, 1200, batch=100, workdir=str(tmp_path), observe=check,
                checkpoints=(300, 700, 1100),
                settings={"LINKRANK_POLICY": "push", "LINKRANK_PUSH_THRESHOLD": 1e-3})
    assert len(res.order) == len(set(res.order)) == 1200  # no duplicate fetch
    assert len(res.observations) == 3
    for _, (err, bound) in res.observations:
        assert err <= bound
    settings = LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False,
                                 "LINKRANK_POLICY": "push", "LINKRANK_PUSH_THRESHOLD": 1e-3})
    core = FrontierCore(settings)
    try:
        v = core.db.vertices
        n = v.n
        assert int((v.state[:n] == CRAWLED).sum()) == 1200
        assert abs(core.aopic.residual()) < 1e-9  # the cash books stay balanced
        with core.db.snapshot() as txn:
            a = database_adjacency(core.db, txn, n)
        truth = exact(a.indptr, a.indices, n)
        est = core.policy.push.values(np.arange(n))
        assert np.abs(truth - est).sum() <= 1200 * 1e-3 / (1 - D)
        name, values = core.estimate()
        assert name == "push" and math.isclose(values.sum(), 1.0)
    finally:
        core.close()


def test_following_links_a_slice_of_rows_at_a_time_changes_no_sum(monkeypatch):
    """What the crawled pages pass on, d P^T v, and the push rounds follow
    the links a few rows at a time (a row longer than a slice is one of its
    own): bit for bit what one pass over all rows gives."""
    from frontera_linkrank.scoring import push as push_module

    rng = np.random.default_rng(5)
    n = 500
    pages, rows, indptr, indices = known_graph(rng, n, crawled=250)
    rows[0] = np.setdiff1d(np.arange(n), [pages[0]])  # longer than a slice
    v = rng.random(n)
    runs = []
    for size in (1 << 20, 7):
        monkeypatch.setattr(push_module, "SPREAD_LINKS", size)
        p = PushRank(D, 0.05)
        p.grow(n)
        p.read(pages, rows)
        raised = p.push()
        runs.append((p.spread(v), raised, p.values(np.arange(n)), p.pushes, p.push_edges))
        p.anchor(v)
        runs[-1] += (p.values(np.arange(n)),)
    (whole, *rest), (sliced, *sliced_rest) = runs
    assert np.array_equal(sliced, whole)
    assert all(np.array_equal(a, b) for a, b in zip(rest, sliced_rest))
    assert runs[0][3] > 250  # pushed over several rounds
    ref = np.zeros(n)
    for u, r in zip(pages, rows):
        if len(r):
            ref[r] += D * v[u] / len(r)
    assert np.allclose(whole, ref, rtol=1e-13, atol=0)


def test_anchoring_on_the_exact_pagerank_leaves_no_error_and_pushing_goes_on_from_it():
    rng = np.random.default_rng(4)
    n = 600
    pages, rows, indptr, indices = known_graph(rng, n, crawled=300)
    p = PushRank(D, 0.6)
    p.grow(n)
    p.read(pages[:200], rows[:200])
    p.push()
    lens = np.diff(indptr)
    first = np.zeros(n + 1, np.int64)
    first[1:] = np.cumsum(np.where(np.isin(np.arange(n), pages[:200]), lens, 0))
    sub = np.concatenate([indices[indptr[u] : indptr[u + 1]] for u in range(n) if u in set(pages[:200].tolist())])
    truth = exact(first, sub, n)
    before = np.abs(truth - p.values(np.arange(n))).sum()
    assert before > 1.0  # the threshold leaves a real error
    # A ranking of this known graph (normalised PageRank, any scale): no error left.
    p.anchor(reference_pagerank(first, sub) * 3.0)
    assert np.abs(truth - p.values(np.arange(n))).sum() < 1e-6 * n
    assert math.isclose(p.mass, math.fsum(p.x() + p.r[:n]), rel_tol=1e-12)
    assert p.anchors == 1
    # Rows crawled since the ranking: the invariant held, so pushing keeps
    # the error within the threshold's bound.
    p.read(pages[200:], rows[200:])
    p.push()
    left = p.r[:n][p.has_row()]
    err = np.abs(exact(indptr, indices, n) - p.values(np.arange(n))).sum()
    assert err <= np.abs(left).sum() / (1 - D) + 1e-6 * n
    # A stale ranking (of fewer pages) still anchors exactly: the residuals
    # carry the rest.
    q = PushRank(D, 1e-9)
    q.grow(n)
    q.read(pages, rows)
    q.anchor(reference_pagerank(first, sub)[:400])
    q.push()
    assert np.abs(exact(indptr, indices, n) - q.values(np.arange(n))).sum() < 1e-5 * n


@pytest.mark.parametrize("policy", ["push", "hybrid-push"])
def test_push_keys_of_waiting_pages_only_grow_between_rebuilds(tmp_path, policy):
    # The lazy queue's rule. A ranking re-anchors the estimate and the
    # queue is rebuilt; between rankings keys only grow.
    graph = load_graph("hollins")
    last = {}
    seen = {"rankings": 0, "scale": None}

    def check(backend, n_crawled):
        core = backend.core
        rankings = core.counters.get("rankings", 0)
        scale = getattr(core.policy, "scale", None)
        if (rankings, scale) != (seen["rankings"], seen["scale"]):
            last.clear()  # the queue was rebuilt with new keys
            seen.update(rankings=rankings, scale=scale)
        v = core.db.vertices
        idx = np.flatnonzero(v.state[: v.n] == UNFETCHED)
        keys = core.frontier.priority(idx)
        for i, k in zip(idx.tolist(), keys.tolist()):
            assert k >= last.get(i, -math.inf) - 1e-9, (i, k, last[i])
            last[i] = k
        return len(idx)

    settings = {"LINKRANK_POLICY": policy, "LINKRANK_RANK_EVERY_PAGES": 200, "LINKRANK_RANK_GROWTH": 0}
    res = crawl(graph, LINKRANK, [0, 100, 2000], 600, batch=50, workdir=str(tmp_path), observe=check,
                checkpoints=range(50, 601, 50), settings=settings)
    assert len(res.order) == len(set(res.order)) == 600
    assert len(res.observations) == 12 and all(n > 0 for _, n in res.observations)
    assert seen["rankings"] >= 2


def test_requeue_tolerance_leaves_small_rises_at_their_queued_key():
    from frontera_linkrank.scheduling.frontier import Frontier
    from frontera_linkrank.storage.vertices import VertexTable

    table = VertexTable()
    table.append(4)
    order = {}
    for tolerance in (0.0, 0.1):
        keys = np.array([1.0, 1.03, -1.0, 2.0])
        f = Frontier(table, lambda idx, keys=keys: keys[idx], tolerance=tolerance)
        f.offer([0, 1, 2, 3])
        keys[:] = [1.05, 1.03, -0.99, 2.5]  # +5%, no change, a rise of a negative key, +25%
        f.offer([0, 1, 2, 3])
        order[tolerance] = (len(f.queue), f.take(4))
    assert order[0.0] == (7, [3, 0, 1, 2])  # every rise queued again
    # Within the tolerance page 0 keeps its entry at 1.0 and comes after
    # page 1; any rise of a key at or below 0, and a rise beyond it, are queued.
    assert order[0.1] == (6, [3, 1, 0, 2])


def test_requeue_tolerance_measures_a_rise_against_the_value_with_the_class_offset():
    from frontera_linkrank.scheduling.frontier import Frontier
    from frontera_linkrank.storage.vertices import VertexTable

    table = VertexTable()
    table.append(4)
    table.host[:4] = [0, 1, 2, 3]  # hosts 0 and 2 in class 0 (offset 10), 1 and 3 in class 1 (offset 0)
    keys = np.array([-9.0, 1.0, -9.0, 1.0])  # values 1, 1, 1, 1
    f = Frontier(table, lambda idx: keys[idx], host_class=lambda h: h % 2, tolerance=0.1,
                 offsets=lambda: (10.0, 0.0))
    f.offer([0, 1, 2, 3])
    keys[:] = [-8.95, 1.05, -8.8, 1.2]  # values +5%, +5%, +20%, +20%
    f.offer([0, 1, 2, 3])
    assert len(f.queue) == 6  # pages 2 and 3 queued again, 0 and 1 kept at their queued keys
    assert f.queue.queued_keys(np.arange(4), np.arange(4)).tolist() == [-9.0, 1.0, -8.8, 1.2]


@pytest.mark.parametrize("policy", ["opic", "hybrid-push"])
def test_requeue_tolerance_bounds_how_late_a_page_is_fetched(tmp_path, policy):
    """Through a crawl: every queued page's live value (key plus the
    accumulator, as the queue compares them) is its current value or
    within the tolerance below it; no page is fetched twice."""
    graph = load_graph("hollins")
    worst = []

    def check(backend, n_crawled):
        core = backend.core
        fr, v = core.frontier, core.db.vertices
        idx = np.flatnonzero(v.state[: v.n] == UNFETCHED)
        queued = fr.queue.queued_keys(idx, v.host[idx].astype(np.int64))
        idx, queued = idx[~np.isnan(queued)], queued[~np.isnan(queued)]  # pages in their host's head
        a = core.aopic.A  # every host is in class 0 (ω's cash goes to every page)
        now, queued = fr.priority(idx) + a, queued + a
        assert np.all(queued <= now + 1e-15)
        pos = queued > 0
        assert np.all(now[pos] <= 1.05 * queued[pos] + 1e-15)
        assert np.all(now[~pos] == queued[~pos])
        worst.append(float(np.max(now[pos] / queued[pos], initial=1.0)))

    res = crawl(graph, LINKRANK, [0, 100, 2000], 1500, batch=50, workdir=str(tmp_path), observe=check,
                checkpoints=range(50, 1501, 50),
                settings={"LINKRANK_POLICY": policy, "LINKRANK_REQUEUE_TOLERANCE": 0.05})
    assert len(res.order) == len(set(res.order)) == 1500
    assert max(worst) > 1.01  # the tolerance was used: some pages wait below their key
