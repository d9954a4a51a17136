"""Policy ``hybrid-push``: AOPIC cash plus the push estimate over its mass.

- the push estimate's running mass is the sum of ``x + r`` after every
  kind of change (new pages, rows read, pushes, anchoring);
- through a crawl by ``FrontierManager``: every key of a waiting page is
  ``cash + w * (x + r) / M`` with the ``M`` of the last rescale, ``M`` is
  taken afresh each time it has doubled, keys only grow between rescales,
  the cash books balance and no page is fetched twice;
- after reopening, ``M`` is the mass of the rebuilt estimate.

(Rankings are off here, to see the rescales alone; tests/test_ordering.py
crawls with them.)
"""

import math
import shutil

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.scheduling.policies.opic import cash_keys
from frontera_linkrank.scoring.links import database_rows
from frontera_linkrank.scoring.push import PushRank
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.simulation.crawl import LINKRANK, crawl
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.vertices import UNFETCHED
from test_ordering import known_graph


def test_push_mass_is_the_sum_of_the_estimate():
    rng = np.random.default_rng(7)
    pages, rows, _, _ = known_graph(rng, n=500, crawled=200)
    p = PushRank(0.85, 1e-3)
    p.grow(300)
    assert p.mass == 300
    p.read(pages[:100], rows[:100])  # rows reach pages up to 500: they are grown
    p.push()
    p.anchor(np.random.default_rng(1).random(450))
    assert math.isclose(p.mass, math.fsum(p.x() + p.r[: p.n]), rel_tol=1e-12)
    p.read(pages[100:], rows[100:])
    p.push()
    assert p.n == 500 and p.pushes > 0
    assert math.isclose(p.mass, math.fsum(p.x() + p.r[: p.n]), rel_tol=1e-12)


def _keys_are_cash_plus_push(core, weight):
    policy = core.policy
    v = core.db.vertices
    idx = np.flatnonzero(v.state[: v.n] == UNFETCHED)
    cash = cash_keys(v, core.aopic, idx)  # the opic policy's keys
    got = core.frontier.priority(idx)
    assert np.allclose(got, cash + weight * policy.push.values(idx) / policy.scale, rtol=1e-12, atol=0)
    return idx, got


def test_hybrid_push_crawl_keys_scale_and_books(tmp_path):
    graph = load_graph("hollins")
    last = {}
    scales = []

    def check(backend, n_crawled):
        core = backend.core
        keys = core.policy
        assert abs(core.aopic.residual()) < 1e-9  # the cash books balance
        idx, got = _keys_are_cash_plus_push(core, 64.0)
        if scales and keys.scale != scales[-1]:
            last.clear()  # rescaled: the queue was rebuilt with new keys
        scales.append(keys.scale)
        for i, k in zip(idx.tolist(), got.tolist()):
            assert k >= last.get(i, -math.inf) - 1e-12, (i, k, last[i])
            last[i] = k
        return len(idx)

    res = crawl(graph, LINKRANK, [0, 100, 2000], 1500, batch=50, workdir=str(tmp_path), observe=check,
                checkpoints=range(50, 1501, 50),
                settings={"LINKRANK_POLICY": "hybrid-push", "LINKRANK_RANK_ALGORITHMS": "none"})
    assert len(res.order) == len(set(res.order)) == 1500  # no duplicate fetch
    assert len(res.observations) == 30
    # Rescaled each time the mass doubled: a few times, not at every batch.
    distinct = sorted(set(scales))
    assert 3 <= len(distinct) <= 12, distinct
    assert all(b >= 2 * a for a, b in zip(distinct, distinct[1:])), distinct

    settings = LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False,
                                 "LINKRANK_POLICY": "hybrid-push"})
    core = FrontierCore(settings)
    try:
        assert core.policy.scale == core.policy.push.mass  # rescaled at open
        _keys_are_cash_plus_push(core, 64.0)
        v = core.db.vertices
        assert core.frontier.n_queued == int((v.state[: v.n] == UNFETCHED).sum())
    finally:
        core.close()


def test_a_closed_crawl_reopens_with_the_estimate_it_closed_with(tmp_path, monkeypatch):
    from frontera_linkrank.scheduling.policies import push as push_policy

    closed = {}
    save = push_policy.PushPolicy.save

    def recording_save(self):
        push = self.push
        closed.update(values=push.values(np.arange(push.n)), anchors=push.anchors, pushes=push.pushes)
        save(self)

    monkeypatch.setattr(push_policy.PushPolicy, "save", recording_save)
    crawl(load_graph("hollins"), LINKRANK, [0, 100, 2000], 600, batch=50, workdir=str(tmp_path),
          settings={"LINKRANK_RANK_EVERY_PAGES": 200, "LINKRANK_RANK_GROWTH": 0})
    assert closed["anchors"] >= 2  # periodic rankings and the close's: more than a rebuilt estimate has
    changed = str(tmp_path / "changed")
    shutil.copytree(tmp_path / "db", changed)
    settings = LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False})
    core = FrontierCore(settings)
    try:
        push = core.policy.push
        assert (push.anchors, push.pushes) == (closed["anchors"], closed["pushes"])  # taken back, not re-anchored
        assert np.array_equal(push.values(np.arange(push.n)), closed["values"])
        assert core.db.score_names() == ["authority", "hub", "pagerank"]  # the saved estimate is no ranking
        assert core.next_requests(10)  # a commit: what was saved is now the past
    finally:
        core.ranking.cancel()
        core.db.close()  # the process dies here, without its close
    core = FrontierCore(settings)
    try:
        assert core.policy.push.anchors == 1  # rebuilt from the stored links and PageRank
    finally:
        core.close()
    # Links written by another writer after the close, no page added or crawled: rebuilt too.
    db = PageDB(changed)
    with db.snapshot() as txn:
        pages, lens, dst = database_rows(db, txn)
    k = int(np.argmax(lens))
    start = int(lens[:k].sum())
    db.edges.add(int(pages[k]), dst[start : start + lens[k] - 1].astype(np.int64))  # one link fewer
    db.commit()
    db.close()
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": changed, "LINKRANK_SYNC": False}))
    try:
        assert core.policy.push.anchors == 1
    finally:
        core.close()


def test_an_open_gives_every_crawled_page_its_current_row_in_the_estimate(tmp_path):
    """The estimate is rebuilt at open from the link blocks one at a time:
    each crawled page has exactly its current row (a row written again in
    a later block replaces the older one), as all links read at once give."""
    crawl(load_graph("hollins"), LINKRANK, [0, 100, 2000], 400, batch=50, workdir=str(tmp_path))
    path = str(tmp_path / "db")
    db = PageDB(path)
    with db.snapshot() as txn:
        pages, lens, dst = database_rows(db, txn)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    for k in np.flatnonzero(lens >= 2)[:20].tolist():  # rows written again, shorter, in a newer block
        db.edges.add(int(pages[k]), dst[starts[k] + 1 : starts[k] + lens[k]].astype(np.int64))
    db.commit()
    assert db.edges.n_blocks >= 2
    db.close()
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": path, "LINKRANK_SYNC": False}))
    try:
        with core.db.snapshot() as txn:
            pages, lens, dst = database_rows(core.db, txn)
        got_pages, got = core.policy.push.rows_of(pages)
        assert np.array_equal(got_pages, pages)
        assert np.array_equal(got, dst.astype(np.int64))
        assert core.policy.push.n_edges == len(dst)
    finally:
        core.close()


@given(st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan, np.inf]) | st.floats(-5, 5), max_size=40))
def test_the_anchors_median_in_place_is_numpys_median_of_the_positive_values(xs):
    from frontera_linkrank.scoring.push import _positive_median

    a = np.array(xs, dtype=float)
    positive = a[a > 0]
    got = _positive_median(a.copy())
    assert got == (float(np.median(positive)) if len(positive) else None)
