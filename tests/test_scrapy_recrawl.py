"""Recrawl end to end: a real ``scrapy crawl`` refreshing the pages of a
changing local test web with conditional requests; the 304 answers reach
the frontier as visits without change."""

import collections
import os
import subprocess

import numpy as np

from crawlweb import BIN, TestWebServer, multi_host_graph, reachable, run_crawl, scrapy_stats
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint


def test_scrapy_recrawl_sends_conditional_requests_and_records_304s(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=3, pages=20, seed=4)
    g = load_graph(npz)
    expect = reachable(g, 0)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    db_path = str(tmp_path / "db")
    budget = 3 * len(expect)
    # Change rates from one a day to 30 a second: most pages answer 304, and
    # the fastest change between any two of their fetches whatever the pace
    # of the crawl, so that both answers are seen in every run.
    with TestWebServer(npz, str(tmp_path), extra=["--changes", "1e-5:30", "--seed", "2"]) as srv:
        out = run_crawl(srv.proxy, db_path, str(seeds), settings={
            "LINKRANK_RECRAWL": True,
            "LINKRANK_RECRAWL_MIN_INTERVAL": 0.5,
            "LINKRANK_RECRAWL_IMPORTANCE": "aopic",
            "LINKRANK_MAX_PAGES": budget,
            "DOWNLOAD_DELAY": 0.01,
        })  # fmt: skip
        served = [(u, s) for _, _, u, s in srv.requests() if not u.endswith("/robots.txt")]
    assert out.returncode == 0, out.stdout[-3000:]
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "linkrank_page_budget"
    statuses = collections.Counter(s for _, s in served)
    per_url = collections.Counter(u for u, _ in served)
    print("statuses", dict(statuses), "fetches per page", collections.Counter(per_url.values()))
    assert set(per_url) == {g.urls[v] for v in expect}
    assert max(per_url.values()) >= 2  # pages were fetched again ...
    assert statuses[304] > 0 and statuses[200] > len(expect)  # ... some unchanged (304), some changed
    with PageDB(db_path, readonly=True) as db, db.snapshot() as txn:
        v = db.vertices
        counters = db.meta["counters"]
        assert counters["not_modified"] == statuses[304]  # every 304 reached the frontier
        assert counters["refreshes_out"] >= statuses[304]
        unchanged = changed = 0
        for url, k in per_url.items():
            i = db.find(fingerprint(url))
            assert v.n_crawls[i] == k, url
            visits = db.visits(i, txn)
            assert len(visits) == k - 1  # one per revisit
            unchanged += int((visits["changed"] == 0).sum())
            changed += int(visits["changed"].sum())
            if k > 1:
                assert np.isfinite(v.rate[i]) and v.rate[i] > 0
            with_links = db.edges.out_links(txn, i)
            assert len(with_links) == len(g.out(g.index[url]))  # 304s kept the links
        assert unchanged >= statuses[304]
        assert changed == int(v.n_changes[: v.n].sum()) > 0
    check = subprocess.run([os.path.join(BIN, "page_db_check"), db_path], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
