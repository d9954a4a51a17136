"""Periodic PageRank/HITS during a crawl, feeding the scheduler.

Regression tests for the two bugs that made Aduana's ranked scheduler
useless (scores that did not change the order of requests; pages added
during a recomputation turning scores into NaN and getting lost), and a
check that a background ranking does not stall the crawl.
"""

import os
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import frontera_linkrank.scoring.ranker as ranker_module
from frontera_linkrank.core.graph_import import add_graph
from frontera_linkrank.settings import SettingsError
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.vertices import UNFETCHED
from util import crawl, page_index, req

HUBS = [f"http://hub{k}.test/" for k in range(5)]
TARGETS = [f"http://t{k}.test/" for k in range(10)]


def hub_links(k):
    # Target t_j is linked from hubs 0..j//2: the later a target is
    # discovered, the more hubs link to it, so discovery order is the
    # reverse of PageRank order.
    return [t for j, t in enumerate(TARGETS) if k <= j // 2]


@pytest.mark.parametrize("policy,vector", [("pagerank", "pagerank"), ("hits", "authority"), ("hybrid", "pagerank")])
def test_scores_change_the_order_of_requests(make_backend, policy, vector):
    b = make_backend(POLICY=policy, RANK_BACKGROUND=False, RANK_EVERY_PAGES=5, RANK_INTERVAL=0, HYBRID_WEIGHT=64)
    b.add_seeds([req(u) for u in HUBS])
    first = b.get_next_requests(10)
    assert sorted(r.url for r in first) == HUBS
    for r in first:
        crawl(b, r, hub_links(HUBS.index(r.url)))
    got = [r.url for r in b.get_next_requests(10)]  # a ranking is due: computed before handing out
    assert b.core.ranking.ranks.version == 1 and b.core.counters["rankings"] == 1
    values, info = b.db.read_scores(vector)
    assert info["version"] == 1 and len(values) == b.db.n_pages
    score = {u: values[page_index(b.db, u)] for u in TARGETS}
    assert len(set(score.values())) == 5  # five distinct in-degrees
    assert [score[u] for u in got] == sorted(score.values(), reverse=True)
    # ... which is not the order of discovery (what FIFO would give).
    fifo = make_backend(path=b.settings.PATH + "-fifo", POLICY="fifo")
    fifo.add_seeds([req(u) for u in HUBS])
    for r in fifo.get_next_requests(10):
        crawl(fifo, r, hub_links(HUBS.index(r.url)))
    assert [r.url for r in fifo.get_next_requests(10)] == TARGETS
    assert got[0] in TARGETS[8:] and got[-1] in TARGETS[:2]


@pytest.mark.parametrize("policy,seen", [("hybrid-push", {"pagerank"}), ("hits", {"authority"}), ("opic", set())])
def test_a_policy_is_given_the_vectors_it_reads_and_every_vector_is_stored(make_backend, policy, seen):
    """PageRank and HITS both run; the policy re-keying its queue gets
    only the vectors it reads (the others are let go before its
    temporaries are made), and all of them are in the database."""
    b = make_backend(POLICY=policy, RANK_BACKGROUND=False, RANK_EVERY_PAGES=5, RANK_INTERVAL=0,
                     RANK_ALGORITHMS=["pagerank", "hits"])
    given = []
    on_ranking = b.core.policy.on_ranking
    b.core.policy.on_ranking = lambda ranking: given.append(set(ranking.vectors)) or on_ranking(ranking)
    b.add_seeds([req(u) for u in HUBS])
    for r in b.get_next_requests(10):
        crawl(b, r, hub_links(HUBS.index(r.url)))
    b.get_next_requests(10)
    assert given == [seen]
    for name in ("pagerank", "hub", "authority"):
        values, info = b.db.read_scores(name)
        assert info["version"] == 1 and len(values) == b.db.n_pages


def test_a_background_rankings_pagerank_is_stored_and_let_go_before_hits(make_backend, monkeypatch):
    """HITS does not run with the PageRank just computed in memory beside
    it: the writer stores it at its next step and the ranking lets it go
    first; the policy is given it at the install all the same."""
    pageranks, alive, given = [], [], []
    real_pagerank, real_hits = ranker_module.pagerank, ranker_module.hits

    def pagerank(*args, **kw):
        result = real_pagerank(*args, **kw)
        pageranks.append(weakref.ref(result.scores))
        return result

    def hits(*args, **kw):
        alive.append(pageranks[-1]() is not None)
        return real_hits(*args, **kw)

    monkeypatch.setattr(ranker_module, "pagerank", pagerank)
    monkeypatch.setattr(ranker_module, "hits", hits)
    b = make_backend(POLICY="hybrid-push", RANK_EVERY_PAGES=5, RANK_INTERVAL=0)
    on_ranking = b.core.policy.on_ranking
    b.core.policy.on_ranking = lambda ranking: given.append(set(ranking.vectors)) or on_ranking(ranking)
    b.add_seeds([req(u) for u in HUBS])
    for r in b.get_next_requests(10):
        crawl(b, r, hub_links(HUBS.index(r.url)))
    b.get_next_requests(1)  # a ranking is due: it starts in the background
    ranker = b.core.ranking.ranker
    while ranker.running:
        b.get_next_requests(0)  # the writer's steps: one of them stores PageRank
        time.sleep(0.01)
    b.get_next_requests(1)  # installs the ranking
    assert alive == [False]
    assert given == [{"pagerank"}]
    for name in ("pagerank", "authority", "hub"):
        values, info = b.db.read_scores(name)
        assert info["version"] == 1 and np.isfinite(values).all()


def test_pages_added_during_a_background_ranking(make_backend, monkeypatch):
    """Pages found while a ranking runs get a defined score (no NaN in the
    queue or the stored vectors) and are all crawled, exactly once."""
    computed = threading.Event()
    release = threading.Event()
    real = ranker_module.rank_snapshot
    snapshot = {}

    def slow_rank(*args, **kw):
        result = real(*args, **kw)
        snapshot["n"] = result.n_pages
        computed.set()
        assert release.wait(30)
        return result

    monkeypatch.setattr(ranker_module, "rank_snapshot", slow_rank)
    b = make_backend(POLICY="pagerank", RANK_EVERY_PAGES=20, RANK_INTERVAL=0)
    # A binary tree of 1023 pages: each page links to its two children.
    links = lambda i: [f"http://h{c % 5}.test/{c}" for c in (2 * i + 1, 2 * i + 2) if c < 1023]  # noqa: E731
    b.add_seeds([req("http://h0.test/0")])
    crawled = []

    def crawl_batch(n):
        reqs = b.get_next_requests(n)
        for r in reqs:
            i = int(r.url.rsplit("/", 1)[1])
            crawled.append(i)
            crawl(b, r, links(i))
        return reqs

    while not b.core.ranking.ranker.running:
        assert crawl_batch(5)
    assert computed.wait(30)
    n_snapshot = snapshot["n"]
    for _ in range(10):  # the crawl goes on meanwhile and finds new pages
        crawl_batch(5)
    assert b.core.ranking.ranks.version == 0 and b.core.ranking.ranker.running
    release.set()
    b.core.ranking.ranker.join(30)
    crawl_batch(5)  # installs the ranking
    assert b.core.ranking.ranks.version == 1
    values, info = b.db.read_scores("pagerank")
    assert info["n_pages"] == len(values) == n_snapshot < b.db.n_pages
    assert np.isfinite(values).all() and abs(values.sum() - 1) < 1e-9
    v = b.db.vertices
    queued = np.flatnonzero(v.state[: v.n] == UNFETCHED)
    assert (queued >= n_snapshot).any()  # pages newer than the ranking are queued ...
    keys = b.core.frontier.priority(queued)
    assert np.isfinite(keys).all()  # ... with a defined key
    while crawl_batch(50):
        pass
    assert sorted(crawled) == list(range(1023))  # none lost, none twice
    assert abs(b.core.aopic.residual()) < 1e-9


def synthetic_db(path, n, m, seed=0):
    """A page database of ``n`` pages and ``m`` power-law links, a quarter
    of the pages crawled (the others are the frontier)."""
    rng = np.random.default_rng(seed)
    urls = [f"http://h{i % 97}.test/{i}" for i in range(n)]
    src = rng.integers(0, n // 4, m)  # links from the crawled quarter
    dst = np.minimum(rng.zipf(1.5, m) - 1, n - 1)
    dst = rng.permutation(n)[dst]
    with PageDB(path, sync=False) as db:
        add_graph(db, urls, src, dst)
    return urls


def test_background_ranking_does_not_stall_the_crawl(make_backend, tmp_path):
    """While a ranking runs in the background, the crawl's calls go on
    (no speed measured: only that no call waits for the ranking)."""
    urls = synthetic_db(tmp_path / "db", 40_000, 400_000)
    # A ranking that outlasts the measurement (it never converges; it is
    # cancelled at the end).
    b = make_backend(
        POLICY="pagerank", RANK_EVERY_PAGES=1, RANK_INTERVAL=0, RANK_TOLERANCE=1e-300, RANK_MAX_ITERATIONS=10**6
    )
    b.core.ranking.config.tol = -1.0  # (an exact fixed point, delta 0, would stop a tolerance of 1e-300)
    rng = np.random.default_rng(1)

    def step():
        reqs = b.get_next_requests(20)
        for r in reqs:
            crawl(b, r, [urls[j] for j in rng.integers(0, len(urls), 10)])
        return len(reqs)

    step()  # some pages crawled ...
    step()  # ... so a ranking is due: it starts, and never ends by itself
    assert b.core.ranking.ranker.running
    # The crawl goes on while it runs: batches are handed out, read and
    # committed, none waiting for the ranking (which would then be over).
    handed = [step() for _ in range(40)]
    assert b.core.ranking.ranker.running, "the crawl waited for the ranking"
    assert min(handed) > 0 and b.core.counters["pages_crawled"] >= 40 * 20
    b.core.ranking.ranker.cancel()


def active_readers(env):
    """Reader slots holding a transaction (``mdb_reader_list``: pid, thread, txnid or "-")."""
    return [line for line in env.readers().splitlines()[1:] if line.split()[-1] != "-"]


@pytest.mark.parametrize("edges", ["memory", "stream"])
def test_a_background_ranking_iterates_without_a_snapshot(make_backend, monkeypatch, edges):
    """A background ranking ends its read transaction once the links are
    loaded, or copied when it streams them. LMDB cannot reuse a page freed
    after a reader began while that reader lasts: a snapshot held through
    the iterations would make every commit meanwhile grow the file (to
    twice the size of its tables)."""
    readers = []
    real = ranker_module.pagerank

    def watched(*args, **kw):
        # The ranking's own thread: the crawl's thread may be reading URLs at this moment.
        me = threading.get_ident()
        readers.append([line for line in active_readers(b.db.env) if int(line.split()[1], 16) == me])
        return real(*args, **kw)

    monkeypatch.setattr(ranker_module, "pagerank", watched)
    b = make_backend(POLICY="pagerank", RANK_EVERY_PAGES=5, RANK_INTERVAL=0, RANK_EDGES=edges)
    b.add_seeds([req(u) for u in HUBS])
    for r in b.get_next_requests(10):
        crawl(b, r, hub_links(HUBS.index(r.url)))
    b.get_next_requests(1)  # a ranking is due: it starts in the background
    ranker = b.core.ranking.ranker
    assert ranker.started_at is not None
    ranker.join(30)
    assert not ranker.running
    assert readers == [[]]
    b.get_next_requests(1)  # installs it
    assert b.core.ranking.ranks.version == 1
    assert b.db.score_info("pagerank")["edges"] == edges


def test_policy_needs_its_ranking(tmp_path):
    from frontera_linkrank import LinkRankBackend

    with pytest.raises(SettingsError, match="needs LINKRANK_RANK_ALGORITHMS"):
        LinkRankBackend(settings={"LINKRANK_PATH": str(tmp_path / "a"), "LINKRANK_POLICY": "hits",
                                  "LINKRANK_RANK_ALGORITHMS": "pagerank"})
    with pytest.raises(SettingsError, match="needs periodic ranking"):
        LinkRankBackend(settings={"LINKRANK_PATH": str(tmp_path / "b"), "LINKRANK_POLICY": "pagerank",
                                  "LINKRANK_RANK_EVERY_PAGES": 0, "LINKRANK_RANK_INTERVAL": 0})
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_ranking_survives_a_restart(make_backend, tmp_path):
    b = make_backend(POLICY="hybrid", RANK_BACKGROUND=False, RANK_EVERY_PAGES=5, RANK_INTERVAL=0)
    b.add_seeds([req(u) for u in HUBS])
    for r in b.get_next_requests(10):
        crawl(b, r, hub_links(HUBS.index(r.url)))
    b.get_next_requests(0)
    assert b.core.ranking.ranks.version == 1
    before = b.core.frontier.priority(np.arange(b.db.n_pages))
    b.frontier_stop()
    b = make_backend(POLICY="hybrid", RANK_BACKGROUND=False, RANK_EVERY_PAGES=5, RANK_INTERVAL=0)
    assert b.core.ranking.ranks.version == 1
    assert np.array_equal(b.core.frontier.priority(np.arange(b.db.n_pages)), before)


CLOSE_WHILE_RANKING = """
import sys
sys.path.insert(0, {tests!r})
from test_periodic_ranking import synthetic_db
from util import crawl
from frontera_linkrank import LinkRankBackend

urls = synthetic_db({db!r}, 20_000, 200_000)
for run in range(3):
    b = LinkRankBackend(settings={{"LINKRANK_PATH": {db!r}, "LINKRANK_SYNC": False, "LINKRANK_POLICY": "pagerank",
                                   "LINKRANK_RANK_EVERY_PAGES": 1, "LINKRANK_RANK_GROWTH": 0,
                                   "LINKRANK_RANK_INTERVAL": 0}})
    b.core.ranking.config.tol = -1.0  # runs until stopped
    for r in b.get_next_requests(20):
        crawl(b, r, urls[:10])
    b.get_next_requests(20)
    assert b.core.ranking.ranker.running
    b.db.close()  # not frontier_stop: a tool or a test closing the database
    print("stopped" if not b.core.ranking.ranker.running else "still running")
"""


def test_closing_the_database_stops_a_background_ranking(tmp_path):
    """Closing the environment under the ranking thread's open snapshot
    made the process fault; close now stops the ranking and waits for it.
    (In a subprocess: a fault must fail this test, not end the suite.)"""
    code = CLOSE_WHILE_RANKING.format(tests=os.path.dirname(__file__), db=str(tmp_path / "db"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["stopped"] * 3
