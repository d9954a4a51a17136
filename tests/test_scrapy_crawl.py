"""End-to-end: real ``scrapy crawl example`` processes (example_project)
against the local test web, through LinkRankScheduler.

- every reachable page is fetched exactly once (the server's request log),
  404s and redirects are recorded in the page database, which
  ``page_db_check`` finds consistent afterwards;
- kill -9 mid-crawl, then the same command: the crawl resumes, no page is
  lost, and only requests in flight at the kill are fetched twice;
- politeness: one request at a time per host with a download delay, and
  every host of the web fetched at once.
"""

import os
import subprocess
import time

import numpy as np
import pytest
from scrapy import Selector

from crawlweb import (
    BIN,
    TestWebServer,
    kill9,
    multi_host_graph,
    reachable,
    run_crawl,
    scrapy_stats,
    start_crawl,
)
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED, F_REDIRECT, LEASED
from frontera_linkrank.testweb.web import TestWeb

KEYWORDS = ["music", "theatre", "dance", "art"]  # example_project's EXAMPLE_KEYWORDS


def keyword_score(body):
    """The example spider's score, recomputed from a page's HTML."""
    text = " ".join(Selector(text=body.decode()).xpath("//body//text()").getall()).lower()
    return sum(k in text for k in KEYWORDS) / len(KEYWORDS)


def write_seeds(path, urls):
    with open(path, "w") as f:
        f.write("# test seeds\n" + "".join(u + "\n" for u in urls))
    return str(path)


def test_crawl_fetches_every_page_once_and_records_errors(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=6, pages=50, seed=3)
    g = load_graph(npz)
    web = TestWeb(g, error_rate=0.06, redirect_rate=0.06, seed=5)
    assert web.error.sum() >= 5 and web.redirect.sum() >= 5
    expect = reachable(g, 0, dead=np.flatnonzero(web.error).tolist())
    seeds = write_seeds(tmp_path / "seeds.txt", [g.urls[0]])
    db_path = str(tmp_path / "db")
    with TestWebServer(npz, str(tmp_path), extra=["--errors", "0.06", "--redirects", "0.06", "--seed", "5"]) as srv:
        out = run_crawl(srv.proxy, db_path, seeds)
        fetches = srv.page_fetches()
    assert out.returncode == 0, out.stdout[-3000:]
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "finished"

    # The server saw every reachable page once, redirect targets once, nothing else.
    want = {g.urls[v] for v in expect}
    want |= {web.alias_url(g.urls[v]) for v in expect if web.redirect[v]}
    assert set(fetches) == want
    assert max(fetches.values()) == 1

    # The page database: statuses, redirects, content scores, consistency.
    db = PageDB(db_path, readonly=True)
    try:
        v = db.vertices
        for page in expect:
            url = g.urls[page]
            i = db.find(fingerprint(url))
            assert i is not None, url
            assert v.state[i] == CRAWLED and v.n_crawls[i] == 1, url
            if web.error[page]:
                assert v.status[i] == 404, url
            elif web.redirect[page]:
                assert v.status[i] == 301 and v.flags[i] & F_REDIRECT, url
                j = db.find(fingerprint(web.alias_url(url)))
                assert v.status[j] == 200 and v.n_crawls[j] == 1
                assert v.score[j] == pytest.approx(keyword_score(web.render(page)))
            else:
                assert v.status[i] == 200
                assert v.score[i] == pytest.approx(keyword_score(web.render(page))), url
        assert int(db.meta["counters"]["pages_crawled"]) == len(want)
    finally:
        db.close()
    assert stats["linkrank/pages_crawled"] == len(want)
    assert stats["linkrank/queued"] == 0 and stats["linkrank/in_flight"] == 0
    assert stats["linkrank/links"] == sum(len(g.out(p)) for p in expect if not web.error[p])
    assert 0 < stats["linkrank/history_total"] and stats["linkrank/error_bound"] == pytest.approx(
        1 / stats["linkrank/history_total"]
    )
    assert 0 <= stats["linkrank/omega_cash"] <= 1
    assert f"LinkRank (end): crawled {len(want)} pages at " in out.stdout  # the progress line
    check = subprocess.run([os.path.join(BIN, "page_db_check"), db_path], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    top = subprocess.run(
        [os.path.join(BIN, "frontera-linkrank"), "top", db_path, "-n", "5"], capture_output=True, text=True
    )
    assert top.returncode == 0 and g.urls[0] in top.stdout, top.stdout + top.stderr


def test_kill9_and_resume(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=8, pages=150, seed=4)
    g = load_graph(npz)
    web = TestWeb(g, redirect_rate=0.03, seed=2)
    expect = reachable(g, 0)
    seeds = write_seeds(tmp_path / "seeds.txt", [g.urls[0]])
    db_path = str(tmp_path / "db")
    alias = {web.alias_url(g.urls[v]): g.urls[v] for v in np.flatnonzero(web.redirect).tolist()}

    def pages_fetched(counter):
        # A redirect target is fetched by its page's request: count the page.
        return {url: k for url, k in counter.items() if url not in alias}

    with TestWebServer(npz, str(tmp_path), extra=["--redirects", "0.03", "--seed", "2"]) as srv:
        proc = start_crawl(srv.proxy, db_path, seeds)
        deadline = time.monotonic() + 120
        while len(srv.requests()) < 400:
            assert proc.poll() is None, "the crawl ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        kill9(proc)
        first = pages_fetched(srv.settled_fetches())
        # Requests in flight at the kill: leased in the last commit.
        db = PageDB(db_path, readonly=True)
        try:
            n = db.n_pages
            in_flight = int((db.vertices.state[:n] == LEASED).sum())
            crawled_before = int((db.vertices.n_crawls[:n] > 0).sum())
        finally:
            db.close()
        assert 0 < crawled_before < len(expect)

        out = run_crawl(srv.proxy, db_path, seeds)
        assert out.returncode == 0, out.stdout[-3000:]
        both = pages_fetched(srv.page_fetches())
    second = {u: k - first.get(u, 0) for u, k in both.items()}
    assert set(both) == {g.urls[v] for v in expect}  # no page lost
    twice = [u for u, k in both.items() if k > 1]
    assert all(k == 1 for k in first.values()) and all(k <= 1 for k in second.values())
    print(f"kill -9 after {len(first)} pages: {in_flight} requests in flight, {len(twice)} pages fetched twice")
    assert len(twice) <= in_flight
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "finished"
    db = PageDB(db_path, readonly=True)
    try:
        n = db.n_pages
        v = db.vertices
        for page in expect:
            i = db.find(fingerprint(g.urls[page]))
            assert i is not None and v.state[i] == CRAWLED
        assert not (v.state[:n] == LEASED).any()
    finally:
        db.close()


def hosts_in_flight(srv, hold):
    """For each page fetch in the server's log, the hosts with a fetch in
    flight at its arrival, and the gaps between two fetches of one host.

    Every page answers ``hold`` seconds after it arrives, so a fetch that
    arrived at ``t`` is in flight at least until ``t + hold``: the counts
    are a lower bound whatever the machine's load (a crawler held up sends
    later, a server held up answers later)."""
    reqs = [(t, u.split("/")[2]) for t, _, u, _ in srv.requests() if not u.endswith("/robots.txt")]
    busy = [len({h for t, h in reqs if t <= t0 < t + hold}) for t0, _ in reqs]
    by_host = {}
    for t, h in reqs:
        by_host.setdefault(h, []).append(t)
    gaps = np.concatenate([np.diff(sorted(ts)) for ts in by_host.values() if len(ts) > 1])
    return busy, gaps, len(by_host)


def test_politeness_spreads_over_hosts(tmp_path):
    """CONCURRENT_REQUESTS_PER_DOMAIN=1 and a download delay on a web of 8
    hosts whose pages answer slowly: one fetch at a time per host, and the
    frontier hands out pages of other hosts meanwhile, so all 8 hosts are
    fetched at once (a frontier that fills the downloader with one host's
    pages keeps 4-6 busy)."""
    hold = 2.0  # seconds a page takes to answer: room for a loaded machine to send the other hosts' fetches
    settings = {
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0.2,
        "LINKRANK_MAX_PAGES": 50,
    }
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=8, pages=60, seed=7)
    g = load_graph(npz)
    seeds = write_seeds(tmp_path / "seeds.txt", [g.urls[0]])
    with TestWebServer(npz, str(tmp_path), extra=["--slow", "1", "--slow-delay", str(hold)]) as srv:
        out = run_crawl(srv.proxy, str(tmp_path / "db"), seeds, settings=settings)
        assert out.returncode == 0, out.stdout[-3000:]
        assert scrapy_stats(out.stdout)["finish_reason"] == "linkrank_page_budget"
        busy, gaps, hosts = hosts_in_flight(srv, hold)
    print(f"hosts in flight at each fetch: {busy}; same-host gaps, 10th percentile {np.percentile(gaps, 10):.3f} s")
    assert hosts == 8
    # Politeness: a host's next fetch waits for its previous answer (a few
    # fetches logged late by a loaded machine may shorten a gap).
    assert np.percentile(gaps, 10) >= 0.9 * hold
    # All hosts busy at once, more than once.
    assert sum(b == 8 for b in busy) >= 3, busy


def test_a_default_crawl_of_hollins_stores_pagerank_and_hits_of_what_it_found(tmp_path):
    """The default crawl runs the periodic rankings and ranks the final
    graph at close: after `scrapy crawl` of the Hollins test web (a budget
    of 1,200 pages, past the first periodic ranking), `top
    --by pagerank|authority|hub` print pages, and the stored PageRank is
    the PageRank of the links the crawl stored (the reference
    implementation, recomputed here)."""
    from frontera_linkrank.scoring.links import database_adjacency
    from frontera_linkrank.simulation.metrics import reference_pagerank

    g = load_graph("hollins")
    seeds = write_seeds(tmp_path / "seeds.txt", [g.urls[0]])
    db_path = str(tmp_path / "db")
    with TestWebServer("hollins", str(tmp_path)) as srv:
        out = run_crawl(srv.proxy, db_path, seeds, settings={"LINKRANK_MAX_PAGES": 1200})
    assert out.returncode == 0, out.stdout[-3000:]
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "linkrank_page_budget" and stats["linkrank/pages_crawled"] >= 1200
    assert stats["linkrank/push_anchors"] >= 1  # a periodic PageRank re-anchored the default policy's estimate
    for by in ("pagerank", "authority", "hub"):
        top = subprocess.run([os.path.join(BIN, "frontera-linkrank"), "top", db_path, "-n", "10", "--by", by],
                             capture_output=True, text=True)
        lines = top.stdout.splitlines()
        assert top.returncode == 0 and len(lines) == 12 and lines[2].split()[0] == "1", top.stdout + top.stderr
        assert all("http://" in line for line in lines[2:]), top.stdout
    with PageDB(db_path, readonly=True) as db:
        n = db.n_pages
        pagerank, _ = db.read_scores("pagerank")
        with db.snapshot() as txn:
            a = database_adjacency(db, txn, n)
    assert len(pagerank) == n  # the ranking at close covers every page found
    assert np.abs(pagerank - reference_pagerank(a.indptr, a.indices)).sum() < 1e-6
