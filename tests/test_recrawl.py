"""Recrawl through the backend: conditional requests, 304s, change detection,
refresh leases, politeness, freshness against uniform and change-rate
revisits, and no score inflation on a static graph."""

import numpy as np
import pytest
from frontera.core.models import Response

from frontera_linkrank.simulation.datasets import data_path, load_hollins
from frontera_linkrank.simulation.freshness import simulate_freshness
from frontera_linkrank.simulation.metrics import reference_pagerank
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.vertices import CRAWLED, ERROR, LEASED
from util import crawl, page_index, req

A, B, C = "http://a.test/", "http://b.test/", "http://c.test/"
# (opic: no background ranking, so the runs are reproducible)
RECRAWL = dict(POLICY="opic", RECRAWL=True, RECRAWL_MIN_INTERVAL=10, RECRAWL_IMPORTANCE="aopic",
               RECRAWL_CALIBRATE_PAGES=1)


def fetch(backend, request, status=200, body=b"", headers=None, links=()):
    resp = Response(request.url, status_code=status, body=body, headers=headers or {}, request=request)
    backend.page_crawled(resp)
    if links:
        backend.links_extracted(request, [req(u) for u in links])


def first_crawl(b, clock):
    b.add_seeds([req(A)])
    (a,) = b.get_next_requests(10)
    fetch(b, a, body=b"<p>v1</p>", headers={b"ETag": [b'"v1"'], b"Last-Modified": [b"Mon, 01 Jan 2024 00:00:00 GMT"]},
          links=[B, C])  # fmt: skip
    clock.advance(1)
    for r in b.get_next_requests(10):
        fetch(b, r, body=b"<p>leaf</p>")
        clock.advance(1)


def test_conditional_refresh_and_304_keep_links_and_move_cash(make_backend, clock):
    b = make_backend(clock=clock, **RECRAWL)
    first_crawl(b, clock)
    assert b.get_next_requests(10) == []  # nothing due within the minimum interval
    assert not b.finished()  # ... but the crawl goes on: pages will be due
    clock.advance(100)
    reqs = {r.url: r for r in b.get_next_requests(10)}
    assert set(reqs) == {A, B, C} and b.core.counters["refreshes_out"] == 3
    a = reqs[A]
    assert a.headers[b"If-None-Match"] == b'"v1"'
    assert a.headers[b"If-Modified-Since"] == b"Mon, 01 Jan 2024 00:00:00 GMT"
    assert b"If-None-Match" not in (reqs[B].headers or {})  # B sent no validators
    i = page_index(b.db, A)
    v = b.db.vertices
    assert v.state[i] == LEASED
    cash_b = v.cash[page_index(b.db, B)]
    fetch(b, a, status=304, headers={b"ETag": [b'"v1"']})
    b.get_next_requests(0)
    assert v.state[i] == CRAWLED and v.n_crawls[i] == 2 and v.n_changes[i] == 0
    assert v.cash[page_index(b.db, B)] > cash_b  # A was read with its stored links
    with b.db.snapshot() as txn:
        assert sorted(b.db.edges.out_links(txn, i).tolist()) == sorted([page_index(b.db, B), page_index(b.db, C)])
        visits = b.db.visits(i, txn)
    assert visits["changed"].tolist() == [0] and visits["interval"][0] == pytest.approx(103)
    assert b.core.counters["not_modified"] == 1
    assert abs(b.core.aopic.residual()) < 1e-9
    b.frontier_stop()
    with PageDB(b.settings.PATH, readonly=True) as db, db.snapshot() as txn:
        assert db.visits(i, txn)["changed"].tolist() == [0]
        assert db.validators([i], txn) == {i: ('"v1"', "Mon, 01 Jan 2024 00:00:00 GMT")}


def test_changes_are_detected_on_normalised_content(make_backend, clock):
    b = make_backend(clock=clock, **RECRAWL)
    b.add_seeds([req(A)])
    bodies = [
        b"<p>News</p><p>generated 2024-05-01 12:00:01</p><a href='/x?sid=1'>x</a>",
        b"<p>News</p><p>generated 2024-05-01 12:07:33</p><a href='/x?sid=2'>x</a>",  # same page
        b"<p>Other news</p><a href='/x'>x</a>",  # changed
    ]
    i = None
    for body in bodies:
        (r,) = [r for r in b.get_next_requests(10) if r.url == A]
        fetch(b, r, body=body)
        b.get_next_requests(0)
        i = page_index(b.db, A)
        clock.advance(1000)
    v = b.db.vertices
    assert v.n_crawls[i] == 3 and v.n_changes[i] == 1
    with b.db.snapshot() as txn:
        assert b.db.visits(i, txn)["changed"].tolist() == [0, 1]
    assert v.rate[i] > 0


def test_refresh_lease_expires_and_survives_a_restart(make_backend, clock, tmp_path):
    b = make_backend(clock=clock, LEASE_TIMEOUT=50, **RECRAWL)
    first_crawl(b, clock)
    clock.advance(100)
    assert len(b.get_next_requests(10)) == 3  # three refreshes leased ...
    b.frontier_stop()  # ... and the crawler stops
    b = make_backend(clock=clock, LEASE_TIMEOUT=50, **RECRAWL)
    v = b.db.vertices
    assert (v.state[: v.n] == CRAWLED).all()  # crawled pages, not new ones
    assert b.core.counters["leases_recovered"] == 3
    clock.advance(100)
    reqs = b.get_next_requests(10)
    assert sorted(r.url for r in reqs) == [A, B, C]
    clock.advance(60)  # leases expire: offered again, still as refreshes
    again = b.get_next_requests(10)
    assert sorted(r.url for r in again) == [A, B, C]
    assert b.core.counters["refreshes_out"] == 9 and (v.state[: v.n] == LEASED).all()  # counters persist: 3 + 3 + 3


def test_failed_refresh_keeps_the_page_then_gives_up(make_backend, clock):
    b = make_backend(clock=clock, MAX_RETRIES=1, RETRY_DELAY=5, **RECRAWL)
    first_crawl(b, clock)
    clock.advance(100)
    i = page_index(b.db, A)
    v = b.db.vertices
    (a,) = [r for r in b.get_next_requests(10) if r.url == A]
    b.request_error(a, "timeout")
    assert v.state[i] == CRAWLED and v.n_crawls[i] == 1  # the stored copy stays
    clock.advance(6)
    (a,) = [r for r in b.get_next_requests(10) if r.url == A]
    b.request_error(a, "timeout")
    assert v.state[i] == ERROR and b.core.counters["pages_failed"] == 1
    assert abs(b.core.aopic.residual()) < 1e-9


def test_a_fetch_the_crawler_retried_is_not_retried_again(make_backend, clock):
    # meta[b"retried"]: the crawler (Scrapy's RetryMiddleware) retried the
    # fetch already. A new page is given up at once; a refresh keeps its
    # stored copy and is refreshed again later, as any failed refresh.
    D = "http://d.test/"
    b = make_backend(clock=clock, MAX_RETRIES=2, RETRY_DELAY=5, **RECRAWL)
    first_crawl(b, clock)
    b.add_seeds([req(D)])
    clock.advance(100)
    reqs = {r.url: r for r in b.get_next_requests(10)}
    v = b.db.vertices
    for url in (D, A):
        reqs[url].meta[b"retried"] = True
        b.request_error(reqs[url], "TimeoutError: took too long")
    d, a = page_index(b.db, D), page_index(b.db, A)
    assert v.state[d] == ERROR and v.errors[d] == 1 and b.core.counters["pages_failed"] == 1
    assert v.state[a] == CRAWLED and v.n_crawls[a] == 1
    clock.advance(6)
    assert {r.url for r in b.get_next_requests(10)} == {A}  # the refresh again; D never
    assert abs(b.core.aopic.residual()) < 1e-9


def test_refreshes_obey_overused_hosts_and_the_per_host_cap(make_backend, clock):
    hosts = [f"http://h{k}.test/" for k in range(4)]
    b = make_backend(clock=clock, MAX_REQUESTS_PER_HOST=1, **RECRAWL)
    b.add_seeds([req(h + "0") for h in hosts])
    for _ in range(4):
        for r in b.get_next_requests(10):
            host, page = r.url.rsplit("/", 1)
            crawl(b, r, [f"{host}/{int(page) + 1}"] if int(page) < 2 else [])
            clock.advance(1)
    assert b.db.n_pages == 12 and b.core.frontier.n_queued == 0
    clock.advance(1000)
    got = b.get_next_requests(100, key_type="domain", overused_keys=["h0.test"])
    got_hosts = [r.url.split("/")[2] for r in got]
    assert sorted(got_hosts) == ["h1.test", "h2.test", "h3.test"]  # one each, h0 kept for later
    got = b.get_next_requests(100)
    assert sorted(r.url.split("/")[2] for r in got) == ["h0.test", "h1.test", "h2.test", "h3.test"]


def test_recrawl_on_a_static_graph_does_not_inflate_importance(make_backend, clock):
    """Ten rounds of refreshes of every page (adaptive window, cash time):
    the importance estimate settles (its change between rounds falls, it
    nears the true PageRank) and the cash books balance after every batch."""
    g = load_hollins(data_path("hollins"))
    truth = reference_pagerank(g.indptr, g.indices)
    # Commits at the batches' ends only: the clock moves a second a page.
    b = make_backend(clock=clock, POLICY="opic", RECRAWL=True, RECRAWL_POLICY="uniform", RECRAWL_MIN_INTERVAL=0,
                     RECRAWL_IMPORTANCE="aopic", HISTORY_WINDOW=3.0, HISTORY_TIME="cash",
                     COMMIT_INTERVAL=0)  # fmt: skip
    fps = g.fingerprints

    def request(v):
        r = req(g.urls[v])
        r.meta[b"fingerprint"] = fps[v]
        return r

    b.add_seeds([request(0)])
    estimates, visits = [], 0
    n_reach = None
    while len(estimates) < 11:
        reqs = b.get_next_requests(200)
        assert reqs
        for r in reqs:
            v = g.index[r.url]
            clock.advance(1)
            b.page_crawled(Response(r.url, request=r))
            b.links_extracted(r, [request(w) for w in g.out(v).tolist()])
        b.get_next_requests(0)
        assert abs(b.core.aopic.residual()) < 1e-9
        visits += len(reqs)
        if n_reach is None and b.core.frontier.n_queued == 0 and b.core.frontier.n_leased == 0:
            n_reach = b.db.n_pages  # every reachable page found and crawled: round 0
            visits = 0
            estimates.append(b.importance())
        elif n_reach is not None and visits >= n_reach:
            visits -= n_reach
            estimates.append(b.importance()[:n_reach])
    urls = b.db.urls(np.arange(n_reach))
    true = truth[[g.index[u] for u in urls]]
    true /= true.sum()
    changes = [np.abs(estimates[k + 1] - estimates[k]).sum() for k in range(10)]
    errors = [np.abs(e / e.sum() - true).sum() for e in estimates]
    print("round-to-round L1 change:", np.round(changes, 3).tolist())
    print("L1 distance to PageRank:", np.round(errors, 3).tolist())
    assert all(abs(e.sum() - 1) < 1e-9 for e in estimates)  # estimates stay a distribution
    assert np.mean(changes[-3:]) < 0.5 * np.mean(changes[:3])  # it settles ...
    assert errors[-1] < errors[0]  # ... nearer the true PageRank, not inflating
    assert b.db.vertices.n_crawls[:n_reach].min() >= 10


def test_value_refresh_beats_uniform_and_change_rate_revisits():
    """Importance-weighted freshness on a changing web (small run; the
    README's table comes from benchmarks/freshness.py)."""
    g = load_hollins(data_path("hollins"))
    n = g.n
    common = dict(fetches=2 * n, change_range=(0.03 / n, 30.0 / n), seeds=[0], batch=20, min_interval=n / 50,
                  settings={"LINKRANK_RANK_BACKGROUND": False, "LINKRANK_RANK_EVERY_PAGES": 1000,
                            "LINKRANK_RANK_INTERVAL": 0})  # fmt: skip
    got = {p: simulate_freshness(g, p, **common) for p in ("value", "uniform", "change_rate")}
    print({p: round(r.weighted, 4) for p, r in got.items()})
    assert got["value"].fetches == got["uniform"].fetches == got["change_rate"].fetches == 2 * n
    assert got["value"].weighted > got["uniform"].weighted + 0.02
    assert got["uniform"].weighted > got["change_rate"].weighted
    assert got["value"].not_modified > 0


def test_refresh_leases_kept_by_a_frontier_reopened_with_recrawl_off_just_end(make_backend, clock, tmp_path):
    """A frontier service keeps its clients' leases across a restart; a
    database holding refresh leases reopened with recrawl off ends them
    (the page keeps its stored copy) instead of scheduling a refresh no
    one will take."""
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.settings import LinkRankSettings

    b = make_backend(clock=clock, **RECRAWL)
    first_crawl(b, clock)
    clock.advance(100)
    leased = {r.url: r for r in b.get_next_requests(10)}
    assert set(leased) == {A, B, C} and b.core.counters["refreshes_out"] == 3
    b.frontier_stop()
    s = LinkRankSettings({"LINKRANK_PATH": b.settings.PATH, "LINKRANK_SYNC": False, "LINKRANK_POLICY": "opic",
                          "LINKRANK_RECRAWL": False, "LINKRANK_LEASE_TIMEOUT": 50})
    core = FrontierCore(s, clock=clock, keep_leases=True)
    try:
        assert core.recrawler is None
        v = core.db.vertices
        i = page_index(core.db, A)
        assert v.state[i] == LEASED  # kept
        core.page_failed(leased[A], "timeout")  # a failed refresh: it just ends
        assert v.state[i] == CRAWLED and v.n_crawls[i] == 1 and core.counters["refresh_retries"] == 1
        # A kept lease that expires (it was handed out again in this run) ends too.
        j = page_index(core.db, B)
        core.lifecycle._lease([j], clock())
        clock.advance(60)
        assert core.next_requests(10) == []
        assert v.state[j] == CRAWLED
    finally:
        core.close()
