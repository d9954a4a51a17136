"""End-to-end: ``frontera-linkrank serve-frontier`` and several ``scrapy
crawl example`` processes sharing it through a real redis-server, against
the local test web.

Each spider gets its own ``serve-web`` (same graph, same seed), so the
servers' request logs say which spider fetched what: every host must be
fetched by one spider at a time. Every reachable page must be crawled (the
set the single-process crawl of tests/test_scrapy_crawl.py fetches), each
report applied once, and ``page_db_check`` must find the database
consistent, also after kill -9 of a spider, of the frontier and of the
broker.
"""

import collections
import os
import signal
import subprocess
import time
from urllib.parse import urlsplit

import numpy as np

from crawlweb import BIN, EXAMPLE, TestWebServer, crawl_env, multi_host_graph, reachable
from frontera_linkrank.service.redis_transport import RedisTransport
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED
from frontera_linkrank.testweb.web import TestWeb

CRAWL = "t"
WEB = ["--errors", "0.05", "--redirects", "0.05", "--seed", "5"]
DEADLINE = 150  # seconds for any one crawl here


class Frontier:
    """serve-frontier in a subprocess (its own process group)."""

    def __init__(self, db, url, workdir, env=None, partitions=16):
        self.cmd = [os.path.join(BIN, "frontera-linkrank"), "serve-frontier", db, "--broker", url, "--crawl", CRAWL,
                    "--partitions", str(partitions), "--set", "LINKRANK_SYNC=False"]
        self.log = os.path.join(workdir, "frontier.log")
        self.env = env
        self.start()

    def start(self, env=None):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, **(env or self.env or {})))

    def kill9(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        return self.proc.returncode

    def text(self):
        with open(self.log) as f:
            return f.read()


def spider(url, proxy, sid, workdir, seeds=None):
    """``scrapy crawl example`` as spider ``sid`` of the shared frontier."""
    cmd = [os.path.join(BIN, "scrapy"), "crawl", "example", "-s", f"LINKRANK_FRONTIER_URL={url}",
           "-s", f"LINKRANK_CRAWL={CRAWL}", "-s", f"LINKRANK_SPIDER_ID={sid}", "-s", "LINKRANK_HEARTBEAT_INTERVAL=1",
           "-s", f"LINKRANK_SEEDS_FILE={seeds or ''}", "-s", "LINKRANK_LOG_INTERVAL=0",
           "-s", f"LOG_FILE={os.path.join(workdir, sid + '.log')}", "-s", "LOG_LEVEL=INFO"]
    return subprocess.Popen(cmd, cwd=EXAMPLE, env=crawl_env(proxy), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def wait_all(procs, deadline):
    for p in procs:
        try:
            p.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            raise AssertionError("the spiders did not finish in time") from None
    return [p.returncode for p in procs]


def finish_reason(workdir, sid):
    with open(os.path.join(workdir, sid + ".log")) as f:
        text = f.read()
    return text.split("'finish_reason': ", 1)[1].split(",")[0].strip("'") if "'finish_reason'" in text else None


def web_and_expected(tmp_path, hosts=8, pages=40):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=hosts, pages=pages, seed=11)
    g = load_graph(npz)
    web = TestWeb(g, error_rate=0.05, redirect_rate=0.05, seed=5)
    expect = reachable(g, 0, dead=np.flatnonzero(web.error).tolist())
    want = {g.urls[v] for v in expect} | {web.alias_url(g.urls[v]) for v in expect if web.redirect[v]}
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    return npz, g, want, str(seeds)


def fetches_by_spider(servers):
    """``{spider: [(time, url), ...]}`` of page fetches (robots.txt excluded)."""
    return {sid: [(t, u) for t, _, u, _ in srv.requests() if not u.endswith("/robots.txt")]
            for sid, srv in servers.items()}


def overlapping_hosts(by_spider):
    """Hosts fetched by two spiders at overlapping times (first to last fetch)."""
    spans = collections.defaultdict(dict)
    for sid, fetches in by_spider.items():
        for t, u in fetches:
            lo, hi = spans[urlsplit(u).hostname].get(sid, (t, t))
            spans[urlsplit(u).hostname][sid] = (min(lo, t), max(hi, t))
    bad = []
    for host, per in spans.items():
        iv = sorted(per.values())
        if any(b[0] < a[1] for a, b in zip(iv, iv[1:])):
            bad.append((host, per))
    return bad


def check_db(db_path, want):
    check = subprocess.run([os.path.join(BIN, "page_db_check"), db_path], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    db = PageDB(db_path, readonly=True)
    try:
        v = db.vertices
        missing = [u for u in want if (i := db.find(fingerprint(u))) is None or v.state[i] != CRAWLED]
        counters = dict(db.meta["counters"])
        crawled = int(counters["pages_crawled"])
    finally:
        db.close()
    assert not missing, missing[:5]
    return counters, crawled


def test_three_spiders_share_one_frontier(tmp_path, redis_server):
    npz, g, want, seeds = web_and_expected(tmp_path)
    db = str(tmp_path / "db")
    deadline = time.monotonic() + DEADLINE
    sids = ["s1", "s2", "s3"]
    servers = {}
    for sid in sids:
        (tmp_path / sid).mkdir()
        servers[sid] = TestWebServer(npz, str(tmp_path / sid), extra=WEB)
    frontier = Frontier(db, redis_server.url, str(tmp_path))
    try:
        # The seeds come from one spider (its LINKRANK_SEEDS_FILE), through the broker.
        procs = [spider(redis_server.url, servers[sid].proxy, sid, str(tmp_path), seeds if sid == "s1" else None)
                 for sid in sids]
        assert wait_all(procs, deadline) == [0, 0, 0]
        status = subprocess.run([os.path.join(BIN, "frontera-linkrank"), "frontier-status", "--broker",
                                 redis_server.url, "--crawl", CRAWL], capture_output=True, text=True, timeout=30)
        assert frontier.stop() == 0, frontier.text()[-3000:]
        by_spider = fetches_by_spider(servers)
    finally:
        frontier.stop()
        for srv in servers.values():
            srv.stop()
    assert [finish_reason(str(tmp_path), sid) for sid in sids] == ["finished"] * 3
    fetched = collections.Counter(u for fetches in by_spider.values() for _, u in fetches)
    assert set(fetched) == want and max(fetched.values()) == 1  # every page once, nothing else
    assert sum(1 for f in by_spider.values() if f) >= 2  # the work was shared
    assert overlapping_hosts(by_spider) == []  # politeness across processes
    counters, crawled = check_db(db, want)
    assert crawled == len(want)
    assert status.returncode == 0 and "crawl t: finished" in status.stdout, status.stdout + status.stderr
    assert "duplicate_reports" not in status.stdout or "duplicate_reports 0" in status.stdout
    state = RedisTransport(redis_server.url, CRAWL).get("state")
    assert state["state"] == "stopped" and state["stats"]["reports_applied"] == state["stats"]["leases_published"]
