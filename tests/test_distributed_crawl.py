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

from crawlweb import BIN, EXAMPLE, TestWebServer, crawl_env, multi_host_graph, reachable, scrapy_stats
from frontera_linkrank.service.redis_transport import RedisTransport
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED
from frontera_linkrank.testweb.web import TestWeb

CRAWL = "t"
SECRET = "s3cret"  # LINKRANK_SECRET of the frontier (environment) and its spiders (-s)
WEB = ["--errors", "0.05", "--redirects", "0.05", "--seed", "5"]
# Seconds for any one crawl here: a guard against a hang, not a speed check
# (a busy machine running the suite in parallel makes a crawl several times
# slower than alone).
DEADLINE = 400


class Frontier:
    """serve-frontier in a subprocess (its own process group)."""

    def __init__(self, db, url, workdir, env=None, partitions=16, settings=()):
        self.cmd = [os.path.join(BIN, "frontera-linkrank"), "serve-frontier", db, "--broker", url, "--crawl", CRAWL,
                    "--partitions", str(partitions), "--set", "LINKRANK_SYNC=False"]
        for setting in settings:
            self.cmd += ["--set", setting]
        self.log = os.path.join(workdir, "frontier.log")
        self.env = env
        self.start()

    def start(self, env=None):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, LINKRANK_SECRET=SECRET, **(env or self.env or {})))

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


def spider(url, proxy, sid, workdir, seeds=None, extra=()):
    """``scrapy crawl example`` as spider ``sid`` of the shared frontier."""
    cmd = [os.path.join(BIN, "scrapy"), "crawl", "example", "-s", f"LINKRANK_FRONTIER_URL={url}",
           "-s", f"LINKRANK_CRAWL={CRAWL}", "-s", f"LINKRANK_SPIDER_ID={sid}", "-s", "LINKRANK_HEARTBEAT_INTERVAL=1",
           "-s", f"LINKRANK_SEEDS_FILE={seeds or ''}", "-s", "LINKRANK_LOG_INTERVAL=0",
           "-s", f"LINKRANK_SECRET={SECRET}", "-s", f"LOG_FILE={os.path.join(workdir, sid + '.log')}",
           "-s", "LOG_LEVEL=INFO", *extra]
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


def _from_broker(url, read):
    """``read(transport)`` on a connection of its own ({} while the broker is down)."""
    try:
        t = RedisTransport(url, CRAWL, secret=SECRET)
        try:
            return read(t)
        finally:
            t.close()
    except Exception:  # the broker is down in this moment
        return {}


def published_state(url):
    """The frontier's last published state ({} while unknown or while the broker is down)."""
    return _from_broker(url, lambda t: t.get("state") or {})


def heartbeats(url):
    """The spiders with a heartbeat in the broker ({} while the broker is down)."""
    return _from_broker(url, lambda t: {s: info for s, info in t.spiders().items() if info is not None})


def wait_until(ready, procs, deadline, what):
    """Poll ``ready()`` until it holds; fail with ``what`` at the deadline or
    when one of ``procs`` has exited."""
    while not ready():
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), what
        time.sleep(0.2)


def crawled_now(url):
    """pages_crawled as the frontier last published it (0 while unknown)."""
    return int((published_state(url).get("stats") or {}).get("pages_crawled", 0))


def fetched_by(url, sid):
    """Pages spider ``sid`` reported, as the frontier last published it (0 while unknown)."""
    return int(((published_state(url).get("spiders") or {}).get(sid) or {}).get("fetched", 0))


def test_three_spiders_share_one_frontier(tmp_path, redis_server):
    """Three spiders, the seeds from one of them: every page is fetched once,
    no host by two spiders at once, the work is shared, and each spider's
    stats count its own reports. Two spiders own every partition before
    the seeds arrive; the third, which sends the seeds, joins the running
    crawl and gets partitions when the load is next balanced (on a small
    web that may be after the last page, so it may fetch nothing)."""
    npz, g, want, seeds = web_and_expected(tmp_path)
    db = str(tmp_path / "db")
    deadline = time.monotonic() + DEADLINE
    sids = ["s1", "s2", "s3"]
    servers = {}
    for sid in sids:
        (tmp_path / sid).mkdir()
        servers[sid] = TestWebServer(npz, str(tmp_path / sid), extra=WEB)
    frontier = Frontier(db, redis_server.url, str(tmp_path))
    procs = []
    try:
        procs = [spider(redis_server.url, servers[sid].proxy, sid, str(tmp_path)) for sid in ("s2", "s3")]
        wait_until(lambda: set(published_state(redis_server.url).get("spiders") or ()) == {"s2", "s3"}, procs,
                   deadline, "s2, s3 got no partitions")
        # The seeds come from one spider (its LINKRANK_SEEDS_FILE), through the broker.
        procs.append(spider(redis_server.url, servers["s1"].proxy, "s1", str(tmp_path), seeds))
        assert wait_all(procs, deadline) == [0, 0, 0]
        status = subprocess.run([os.path.join(BIN, "frontera-linkrank"), "frontier-status", "--broker",
                                 redis_server.url, "--crawl", CRAWL], capture_output=True, text=True, timeout=30,
                                env=dict(os.environ, LINKRANK_SECRET=SECRET))
        assert frontier.stop() == 0, frontier.text()[-3000:]
        by_spider = fetches_by_spider(servers)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        frontier.stop()
        for srv in servers.values():
            srv.stop()
    assert [finish_reason(str(tmp_path), sid) for sid in sids] == ["finished"] * 3
    own = {}
    for sid in sids:  # each spider's stats are its own; the frontier's totals are beside them
        with open(tmp_path / f"{sid}.log") as f:
            stats = scrapy_stats(f.read())
        # (one report a page: a redirect or a retry is two requests to the web)
        own[sid] = stats.get("linkrank/pages_crawled", 0)
        assert own[sid] <= len(by_spider[sid]), (sid, stats)
        assert stats["linkrank/frontier/pages_crawled"] == len(want)
    assert sum(1 for n in own.values() if n > 0) >= 2, own  # the work was shared
    fetched = collections.Counter(u for fetches in by_spider.values() for _, u in fetches)
    assert set(fetched) == want and max(fetched.values()) == 1  # every page once, nothing else
    assert overlapping_hosts(by_spider) == []  # politeness across processes
    counters, crawled = check_db(db, want)
    assert crawled == len(want)
    assert status.returncode == 0 and "crawl t: finished" in status.stdout, status.stdout + status.stderr
    assert "duplicate_reports" not in status.stdout or "duplicate_reports 0" in status.stdout
    state = published_state(redis_server.url)
    assert state["state"] == "stopped" and state["stats"]["reports_applied"] == state["stats"]["leases_published"]
    assert sum(own.values()) == state["stats"]["reports_applied"]  # each report counted by the spider that made it


# -- failures ---------------------------------------------------------------------------------
SLOW = ["-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", "DOWNLOAD_DELAY=0.05", "-s", "LINKRANK_PREFETCH=16"]


def run_with_events(tmp_path, redis_server, events, sids=("s1", "s2"), hosts=8, pages=50):
    """Crawl with ``sids``; each event ``(pages crawled, action(ctx)[, spider])``
    runs once when the frontier has published that many pages crawled (and,
    with ``spider``, reports from that spider: it is crawling, so it holds
    requests). Returns ``(want, fetch counts, db path, frontier log, spiders'
    exit codes)``."""
    npz, g, want, seeds = web_and_expected(tmp_path, hosts=hosts, pages=pages)
    db = str(tmp_path / "db")
    deadline = time.monotonic() + DEADLINE
    (tmp_path / "web").mkdir()
    web = TestWebServer(npz, str(tmp_path / "web"), extra=WEB)
    ctx = {"frontier": Frontier(db, redis_server.url, str(tmp_path)), "redis": redis_server}

    ctx["start_spider"] = lambda sid: ctx["spiders"].__setitem__(sid, slow_spider(redis_server.url, web.proxy, sid,
                                                                                   str(tmp_path), seeds, sids))
    ctx["spiders"] = {sid: slow_spider(redis_server.url, web.proxy, sid, str(tmp_path), seeds, sids) for sid in sids}
    pending = sorted(events, key=lambda e: e[0])
    try:
        while any(p.poll() is None for p in ctx["spiders"].values()):
            assert time.monotonic() < deadline, "the crawl did not finish in time; the frontier's log ends:\n" + \
                ctx["frontier"].text()[-3000:]
            if pending and crawled_now(redis_server.url) >= pending[0][0] and \
                    all(fetched_by(redis_server.url, sid) > 0 for sid in pending[0][2:]):
                pending.pop(0)[1](ctx)
            time.sleep(0.1)
        assert not pending, f"events not reached: {[e[0] for e in pending]}"
        codes = {sid: p.returncode for sid, p in ctx["spiders"].items()}
        assert ctx["frontier"].stop() == 0, ctx["frontier"].text()[-3000:]
        fetched = web.page_fetches()
    finally:
        for p in ctx["spiders"].values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        ctx["frontier"].stop()
        web.stop()
    return want, fetched, db, ctx["frontier"].text(), codes


def slow_spider(url, proxy, sid, workdir, seeds, sids):
    """A spider of the failure tests: one request at a time per host, 50 ms apart."""
    return spider(url, proxy, sid, workdir, seeds if sid == sids[0] else None, extra=SLOW)


def kill_spider(sid, restart_after=None):
    def action(ctx):
        os.killpg(ctx["spiders"][sid].pid, signal.SIGKILL)
        ctx["spiders"][sid].wait()
        if restart_after is not None:
            time.sleep(restart_after)
            ctx["start_spider"](sid)
            # The next event may stop the broker: the new spider connects first, as one a user starts while the
            # broker is up (a spider started while it is down fails at once with one line, by design).
            new = ctx["spiders"][sid]
            wait_until(lambda: (heartbeats(ctx["redis"].url).get(sid) or {}).get("pid") == new.pid, [new],
                       time.monotonic() + 120, f"the restarted spider {sid} did not connect to the broker")
    return action


def kill_frontier(env=None):
    def action(ctx):
        f = ctx["frontier"]
        f.kill9()
        if env:
            f.start(env)
            f.proc.wait(60)  # it exits by itself at the injected fault
            assert f.proc.returncode == 3, f.text()[-2000:]
        f.start({})
    return action


def restart_redis(wipe=False):
    def action(ctx):
        if wipe:
            ctx["redis"].wipe()
        else:
            time.sleep(1.1)  # appendfsync everysec: what was acknowledged is on disk
            ctx["redis"].kill9()
        ctx["redis"].start()
    return action


def test_kill9_spider_frontier_and_broker_lose_nothing(tmp_path, redis_server):
    events = [(60, kill_spider("s2", restart_after=0.5)), (140, kill_frontier()), (220, restart_redis())]
    want, fetched, db, log, codes = run_with_events(tmp_path, redis_server, events)
    assert codes == {"s1": 0, "s2": 0}
    assert [finish_reason(str(tmp_path), s) for s in ("s1", "s2")] == ["finished", "finished"]
    assert set(fetched) == want
    twice = sum(n - 1 for n in fetched.values())
    assert twice <= 16, twice  # at most what the killed spider held (its prefetch)
    counters, crawled = check_db(db, want)
    assert crawled == len(want)  # no report applied twice


def test_fault_after_lease_commit_and_wiped_broker_lose_nothing(tmp_path, redis_server):
    events = [(60, kill_frontier({"FRONTERA_LINKRANK_FAULT": "after_lease_commit"})), (180, restart_redis(wipe=True))]
    want, fetched, db, log, codes = run_with_events(tmp_path, redis_server, events)
    assert codes == {"s1": 0, "s2": 0}
    assert "fault injected" in log and "leases republished" in log
    assert "the broker restarted" in log
    assert set(fetched) == want
    twice = sum(n - 1 for n in fetched.values())
    assert twice <= 2 * 2 * 16, twice  # at most the leases outstanding when the broker was wiped
    counters, crawled = check_db(db, want)
    assert crawled == len(want)


def pause_spider(sid, seconds):
    def action(ctx):
        os.killpg(ctx["spiders"][sid].pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.killpg(ctx["spiders"][sid].pid, signal.SIGCONT)
    return action


def test_dead_spider_hosts_go_to_the_others_and_a_paused_one_comes_back(tmp_path, redis_server):
    # Heartbeat every second: a spider silent for 3 s is dead.
    events = [(50, kill_spider("s3"), "s3"), (150, pause_spider("s2", 4.5))]
    want, fetched, db, log, codes = run_with_events(tmp_path, redis_server, events, sids=("s1", "s2", "s3"))
    assert codes["s1"] == 0 and codes["s2"] == 0 and codes["s3"] == -signal.SIGKILL
    assert [finish_reason(str(tmp_path), s) for s in ("s1", "s2")] == ["finished", "finished"]
    assert set(fetched) == want
    twice = sum(n - 1 for n in fetched.values())
    assert twice <= 2 * 16, twice  # at most what the dead and the paused spider held
    logs = [(tmp_path / f"{sid}.log").read_text() for sid in ("s1", "s2")]
    assert any("'linkrank/taken_over'" in text for text in logs)  # the requests the dead s3 held were taken over
    counters, crawled = check_db(db, want)
    assert crawled == len(want)


# -- balance and broker errors ------------------------------------------------------------------
def test_two_big_hosts_go_to_two_spiders_and_the_page_budget_closes_them(tmp_path, redis_server):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=2, pages=80, external=0.05, seed=7)
    g = load_graph(npz)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    db = str(tmp_path / "db")
    servers = {}
    for sid in ("s1", "s2"):
        (tmp_path / sid).mkdir()
        servers[sid] = TestWebServer(npz, str(tmp_path / sid))
    polite = ["-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2", "-s", "LINKRANK_PREFETCH=8"]
    deadline = time.monotonic() + DEADLINE
    procs, frontier = [], None
    try:
        procs = [spider(redis_server.url, servers[sid].proxy, sid, str(tmp_path),
                        str(seeds) if sid == "s1" else None, extra=polite) for sid in ("s1", "s2")]
        # Both spiders beat before the frontier starts, so that its first
        # assignment splits the partitions between them (a spider that
        # starts later gets partitions only as the load is balanced, which
        # on this small web may come after the last page).
        wait_until(lambda: set(heartbeats(redis_server.url)) == {"s1", "s2"}, procs, deadline,
                   "the spiders did not start")
        frontier = Frontier(db, redis_server.url, str(tmp_path), settings=["LINKRANK_MAX_PAGES=120"])
        assert wait_all(procs, deadline) == [0, 0]
        assert frontier.stop() == 0, frontier.text()[-3000:]
        by_spider = fetches_by_spider(servers)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        if frontier is not None:
            frontier.stop()
        for srv in servers.values():
            srv.stop()
    counts = {sid: len(f) for sid, f in by_spider.items()}
    assert sum(counts.values()) == 120, counts  # the budget, not a page more
    assert all(n >= 0.3 * 120 for n in counts.values()), counts  # both spiders fetch
    assert overlapping_hosts(by_spider) == []  # and a host is still fetched by one spider at a time
    assert [finish_reason(str(tmp_path), sid) for sid in ("s1", "s2")] == ["linkrank_page_budget"] * 2
    _, crawled = check_db(db, set())
    assert crawled == 120


def test_a_wrong_password_or_no_broker_is_one_line_in_every_process(tmp_path, redis_server):
    import redis

    redis.Redis(unix_socket_path=redis_server.socket).config_set("requirepass", "right-password")
    wrong = f"unix://:wrong-password@{redis_server.socket}?db=0"
    nobody = f"unix://:wrong-password@{tmp_path}/nobody.sock?db=0"
    fl = os.path.join(BIN, "frontera-linkrank")
    commands = {
        "serve-frontier": lambda url: ([fl, "serve-frontier", str(tmp_path / "db"), "--broker", url], None),
        "frontier-status": lambda url: ([fl, "frontier-status", "--broker", url], None),
        "spider": lambda url: ([os.path.join(BIN, "scrapy"), "crawl", "example", "-s", f"LINKRANK_FRONTIER_URL={url}",
                                "-s", "LOG_LEVEL=ERROR"], EXAMPLE),
    }
    runs = {}
    for url, cause in ((wrong, "authentication failed"), (nobody, "unreachable")):
        for name, make in commands.items():
            cmd, cwd = make(url)
            runs[name, cause] = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                 text=True)
    for (name, cause), proc in runs.items():
        out = proc.communicate(timeout=60)[0]  # (each ends by itself, in seconds)
        lines = [x for x in out.splitlines() if x.strip()]
        assert proc.returncode in (1, 2) and len(lines) == 1, (name, out)
        assert cause in lines[0] and ":***@" in lines[0], (name, lines)
        assert "wrong-password" not in out, name  # never printed
