"""Setting the frontier up in a Scrapy project, through real ``scrapy crawl``
processes of a stock project (tests/stock_project):

- a stock ``CrawlSpider`` crawls a multi-host web completely with only
  ``SCHEDULER`` set, and with only the add-on in ``ADDONS``;
- a start-up error (a bad setting, a page database another process
  writes to) stops the crawl with one ERROR line naming the cause, a
  non-zero exit status and no cascade of tracebacks;
- retries have one owner: a page that always times out is fetched
  ``RETRY_TIMES + 1`` times (Scrapy's retries), or ``LINKRANK_MAX_RETRIES
  + 1`` times with ``RETRY_ENABLED=False`` (the frontier's);
- requests that go through Scrapy's queue (callbacks that are not spider
  methods) are filtered by fingerprint, as Scrapy's scheduler does.
"""

import os
import subprocess
import sys
import time

import pytest

from crawlweb import BIN, ROOT, TestWebServer, crawl_env, multi_host_graph, reachable, scrapy_stats
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED, ERROR
from frontera_linkrank.testweb.web import TestWeb

STOCK = os.path.join(os.path.dirname(__file__), "stock_project")


def stock_crawl(proxy, project, spider, start, settings=None, timeout=240):
    """``scrapy crawl <spider> -a start=<start>`` in the stock project with
    the settings module ``project`` of its scrapy.cfg; stdout and stderr
    apart."""
    cmd = [os.path.join(BIN, "scrapy"), "crawl", spider, "-a", f"start={start}"]
    for k, v in (settings or {}).items():
        cmd += ["-s", f"{k}={v}"]
    env = dict(crawl_env(proxy), SCRAPY_PROJECT=project, PYTHONPATH=ROOT)
    return subprocess.run(cmd, cwd=STOCK, env=env, timeout=timeout, capture_output=True, text=True)


def error_lines(log):
    return [line for line in log.splitlines() if "] ERROR: " in line]


@pytest.mark.parametrize("project", ["scheduler", "addon"])
def test_stock_crawlspider_with_one_setting(tmp_path, project):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=5, pages=30, seed=4)
    g = load_graph(npz)
    expect = {g.urls[v] for v in reachable(g, 0)}
    assert len({u.split("/")[2] for u in expect}) == 5
    db_path = str(tmp_path / "db")
    settings = {"LINKRANK_PATH": db_path, "LINKRANK_SYNC": False}
    with TestWebServer(npz, str(tmp_path)) as srv:
        out = stock_crawl(srv.proxy, project, "stock", g.urls[0], settings)
        fetches = srv.page_fetches()
    assert out.returncode == 0, out.stderr[-4000:]
    stats = scrapy_stats(out.stderr)
    assert stats["finish_reason"] == "finished"
    assert set(fetches) == expect and max(fetches.values()) == 1
    assert stats["linkrank/pages_crawled"] == len(expect)
    assert stats["item_scraped_count"] == len(expect) - 1  # CrawlSpider: the start page is not a rule's page
    assert not error_lines(out.stderr), error_lines(out.stderr)
    db = PageDB(db_path, readonly=True)
    try:
        assert all(db.vertices.state[db.find(fingerprint(u))] == CRAWLED for u in expect)
    finally:
        db.close()


def hold_writer(path):
    """A process that holds the page database open for writing."""
    code = (
        "import sys, time\n"
        "from frontera_linkrank.storage.pagedb import PageDB\n"
        "db = PageDB(sys.argv[1])\n"
        "print('open', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.stdout.readline().strip() == "open"
    return proc


@pytest.mark.parametrize(
    "case, cause",
    [
        ("setting", "unknown setting LINKRANK_POLCY"),
        ("writer", "another process is writing to this page database"),
        ("seeds", "LINKRANK_SEEDS_FILE="),
    ],
)
def test_start_errors_stop_the_crawl_in_one_line(tmp_path, case, cause):
    db_path = str(tmp_path / "db")
    settings = {"LINKRANK_PATH": db_path}
    holder = None
    if case == "setting":
        settings["LINKRANK_POLCY"] = "fifo"
    elif case == "seeds":
        settings["LINKRANK_SEEDS_FILE"] = str(tmp_path / "missing.txt")
    else:
        holder = hold_writer(db_path)
    try:
        out = stock_crawl("http://127.0.0.1:9", "scheduler", "stock", "http://a.test/", settings, timeout=60)
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    log = out.stderr
    assert out.returncode != 0, log[-3000:]
    assert log.count("Traceback (most recent call last)") <= 1, log
    errors = error_lines(log)
    assert len(errors) == 1 and cause in errors[0], errors
    assert "Scraper slot not assigned" not in log and "never retrieved" not in log
    assert scrapy_stats(log)["finish_reason"] == "linkrank_start_failed"


def slow_web(g, want_slow):
    """A --seed of the test web where the start page answers at once and
    ``want_slow`` pages (not the start) answer slowly (share 0.1)."""
    for seed in range(200):
        web = TestWeb(g, slow_rate=0.1, seed=seed)
        if not web.slow[0] and web.slow.sum() == want_slow:
            return seed, [g.urls[v] for v in range(g.n) if web.slow[v]]
    raise AssertionError("no such seed")


@pytest.mark.parametrize(
    "settings, fetches_per_slow_page",
    [
        ({"RETRY_TIMES": 2}, 3),  # Scrapy's RetryMiddleware retries; the frontier records the failure
        ({"RETRY_ENABLED": False}, 3),  # the frontier retries (LINKRANK_MAX_RETRIES=2)
        ({"RETRY_TIMES": 1, "LINKRANK_MAX_RETRIES": 3}, 2),
        ({"RETRY_ENABLED": False, "LINKRANK_MAX_RETRIES": 1}, 2),
    ],
)
def test_retries_have_one_owner(tmp_path, settings, fetches_per_slow_page):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=3, pages=8, seed=6)
    g = load_graph(npz)
    seed, slow = slow_web(g, 2)
    db_path = str(tmp_path / "db")
    s = {"LINKRANK_PATH": db_path, "LINKRANK_SYNC": False, "DOWNLOAD_TIMEOUT": 1, "LINKRANK_RETRY_DELAY": 0.2,
         **settings}
    extra = ["--slow", "0.1", "--slow-delay", "5", "--seed", str(seed)]
    with TestWebServer(npz, str(tmp_path), extra=extra) as srv:
        t0 = time.monotonic()
        out = stock_crawl(srv.proxy, "addon", "stock", g.urls[0], s)
        elapsed = time.monotonic() - t0
        fetches = srv.page_fetches()
    assert out.returncode == 0, out.stderr[-4000:]
    assert {u: fetches[u] for u in slow} == {u: fetches_per_slow_page for u in slow}, elapsed
    db = PageDB(db_path, readonly=True)
    try:
        for u in slow:
            i = db.find(fingerprint(u))
            assert db.vertices.state[i] == ERROR
            with db.snapshot() as txn:
                assert "TimeoutError" in db.error_message(i, txn)
    finally:
        db.close()


def test_requests_with_a_lambda_callback_are_deduplicated(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=3, pages=20, seed=7)
    g = load_graph(npz)
    crawled = reachable(g, 0)
    linked = {g.urls[w] for v in crawled for w in g.out(v).tolist()}
    in_degree = {u: 0 for u in linked}
    for v in crawled:
        for w in g.out(v).tolist():
            in_degree[g.urls[w]] += 1
    assert max(in_degree.values()) > 2
    settings = {"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False}
    with TestWebServer(npz, str(tmp_path)) as srv:
        out = stock_crawl(srv.proxy, "scheduler", "side", g.urls[0], settings)
        fetches = srv.page_fetches()
    assert out.returncode == 0, out.stderr[-4000:]
    # the lambda requests go through the frontier too (from memory): every page once
    assert dict(fetches) == {g.urls[v]: 1 for v in crawled}
    stats = scrapy_stats(out.stderr)
    assert stats["linkrank/requests_in_memory"] == len(linked - {g.urls[0]})
    # duplicates are counted as Scrapy's duplicate filter counts them: every
    # request but the first of each URL (the start page's came from start())
    requests = 2 * sum(len(g.out(v)) for v in crawled)
    assert stats["dupefilter/filtered"] == requests - len(linked - {g.urls[0]})


def test_addon_settings(caplog):
    from scrapy.settings import Settings

    from frontera_linkrank.scrapy import Addon, LinkRankSpiderMiddleware

    s = Settings()
    Addon().update_settings(s)
    assert s["SCHEDULER"] == "frontera_linkrank.scrapy.LinkRankScheduler" and s.getpriority("SCHEDULER") == 15
    assert s.getdict("SPIDER_MIDDLEWARES") == {LinkRankSpiderMiddleware: 30}
    assert not caplog.records
    # the project's own values win: its order for the middleware, its scheduler (with a warning)
    mw = "frontera_linkrank.scrapy.LinkRankSpiderMiddleware"
    s = Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler", "SPIDER_MIDDLEWARES": {mw: 10}})
    Addon().update_settings(s)
    assert s["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"
    assert s.getdict("SPIDER_MIDDLEWARES") == {mw: 10}
    assert "the frontier is not used" in caplog.text
