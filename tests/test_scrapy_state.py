"""Where a crawl's page database lives follows Scrapy's convention for a
crawl's state, through real ``scrapy crawl`` runs of a stock CrawlSpider:

- neither ``LINKRANK_PATH`` nor ``JOBDIR``: each run starts from nothing,
  in a fresh database the end-of-crawl line names (kept for the tools);
- ``JOBDIR``: the database lives there and a rerun resumes (as Scrapy's
  own queue does there: only the start request, ``dont_filter``, is
  fetched again);
- two crawlers in one process never share a database.
"""

import collections
import os
import re
import shutil

from crawlweb import TestWebServer, multi_host_graph, reachable
from frontera_linkrank.scrapy.config import JOBDIR_DATABASE, database_path
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from test_scrapy_setup import stock_crawl


def run(srv, start, settings=None):
    before = collections.Counter(srv.page_fetches())
    out = stock_crawl(srv.proxy, "scheduler", "stock", start, settings)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr, collections.Counter(srv.page_fetches()) - before


def named_database(log):
    m = re.search(r"LinkRank page database of this crawl: (\S+) \((\d+) pages, (\d+) crawled", log)
    assert m, log[-2000:]
    return m.group(1), int(m.group(3))


def test_state_follows_scrapys_convention(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=2, pages=15, seed=5)
    g = load_graph(npz)
    pages = {g.urls[v] for v in reachable(g, 0)}
    jobdir = tmp_path / "job"
    with TestWebServer(npz, str(tmp_path)) as srv:
        first, fetched1 = run(srv, g.urls[0])
        second, fetched2 = run(srv, g.urls[0])
        job1, fetched3 = run(srv, g.urls[0], {"JOBDIR": jobdir})
        job2, fetched4 = run(srv, g.urls[0], {"JOBDIR": jobdir})
    # No LINKRANK_PATH, no JOBDIR: from nothing, twice, in two databases
    assert set(fetched1) == set(fetched2) == pages and max((fetched1 + fetched2).values()) == 2
    (db1, n1), (db2, n2) = named_database(first), named_database(second)
    assert db1 != db2 and n1 == n2 == len(pages) and "a new database for this crawl" in first
    for db in (db1, db2):
        with PageDB(db, readonly=True) as opened:
            assert opened.n_pages >= len(pages)
        shutil.rmtree(os.path.dirname(db))
    # JOBDIR: there, and resumed
    assert set(fetched3) == pages and max(fetched3.values()) == 1
    assert os.path.isdir(jobdir / JOBDIR_DATABASE) and named_database(job1)[0] == str(jobdir / JOBDIR_DATABASE)
    assert dict(fetched4) == {g.urls[0]: 1}  # the start request (dont_filter) only
    assert f"{len(pages)} crawled" in job2 and "a new database" not in job2


def test_two_crawlers_never_share_a_database(tmp_path):
    from scrapy.settings import Settings

    paths = [database_path(Settings(), "same") for _ in range(2)]
    assert paths[0][0] != paths[1][0] and all(fresh for _, fresh in paths)
    for path, _ in paths:
        shutil.rmtree(os.path.dirname(path))
    assert database_path(Settings({"JOBDIR": str(tmp_path)}), "x") == (str(tmp_path / JOBDIR_DATABASE), False)
    assert database_path(Settings({"JOBDIR": str(tmp_path), "LINKRANK_PATH": "db"}), "x") == ("db", False)
