"""Helpers of the shared-frontier tests: ``serve-frontier`` in a
subprocess, and fake spiders (the real client, :class:`RemoteFrontier`,
fetching from an in-memory web instead of the network).

A fake spider is a thread in the test process: it takes requests, "fetches"
them from a :class:`FakeWeb` (each page's links, as fingerprints computed
from the URLs, as a real spider does) and reports them, and ends when the
frontier says the crawl is finished. Nothing runs at import.
"""

import collections
import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time

from crawlweb import multi_host_graph
from frontera_linkrank.cli.check import main as page_db_check
from frontera_linkrank.service import codec
from frontera_linkrank.service.client import RemoteFrontier
from frontera_linkrank.service.redis_transport import RedisTransport
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED

BIN = os.path.dirname(sys.executable)
STARTED = []  # every ServeFrontier: killed by kill_all() (a fixture at each test's end)


def fp(url):
    """The wire fingerprint of ``url`` (40 hex bytes)."""
    return fingerprint(url).hex().encode()


class ServeFrontier:
    """``frontera-linkrank serve-frontier`` in its own process group; its
    output goes to ``<workdir>/<name>.log``."""

    def __init__(self, db, url, workdir, crawl="t", partitions=8, settings=(), env=None, args=(), name="frontier"):
        self.cmd = [os.path.join(BIN, "frontera-linkrank"), "serve-frontier", str(db), "--broker", url, "--crawl",
                    crawl, "--partitions", str(partitions), "--set", "LINKRANK_SYNC=False", *args]
        for s in settings:
            self.cmd += ["--set", s]
        self.log = os.path.join(str(workdir), f"{name}.log")
        self.env = env
        self.proc = None
        self.start()

    def start(self, args=()):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.cmd + list(args), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=dict(os.environ, **(self.env or {})))
        STARTED.append(self)
        return self

    def alive(self):
        return self.proc.poll() is None

    def wait(self, timeout):
        return self.proc.wait(timeout)

    def kill9(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=30):
        """SIGTERM; the exit status (SIGKILL after ``timeout`` seconds: None)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
                return None
        return self.proc.returncode

    def text(self):
        with open(self.log) as f:
            return f.read()


def kill_all():
    """SIGKILL every serve-frontier the helpers started that still runs (by its process group)."""
    while STARTED:
        STARTED.pop().kill9()


class FakeWeb:
    """The pages of a random multi-host web graph (tests/crawlweb.py) in memory."""

    def __init__(self, path, hosts=4, pages=20, seed=3):
        graph = load_graph(multi_host_graph(str(path), hosts=hosts, pages=pages, seed=seed))
        self.urls = list(graph.urls)
        self.index = {u: i for i, u in enumerate(self.urls)}
        self.out = [graph.out(v).tolist() for v in range(len(self.urls))]
        self.seed = self.urls[0]

    def links(self, url):
        """``[URL, fingerprint, None]`` of the page's links, or None for a page not in the web."""
        v = self.index.get(url)
        return None if v is None else [[self.urls[w], fp(self.urls[w]), None] for w in self.out[v]]

    def reachable(self):
        seen, stack = {0}, [0]
        while stack:
            for w in self.out[stack.pop()]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return {self.urls[v] for v in seen}


class FakeSpider:
    """A spider of the shared frontier fetching from ``web`` in a thread.

    ``hang``: takes its requests and never reports (a callback that hangs),
    heartbeating all along. ``tamper(entry, item) -> list of items``: what
    to report instead of the item (poison tests). ``delay``: seconds a
    "fetch" takes.
    """

    def __init__(self, url, crawl, sid, web, secret=None, prefetch=8, interval=0.3, hang=False, tamper=None,
                 delay=0.0):
        self.web = web
        self.hang = hang
        self.tamper = tamper
        self.delay = delay
        self.fetched = collections.Counter()
        self.client = RemoteFrontier(lambda: RedisTransport(url, crawl, secret=secret), sid, prefetch, interval,
                                     {"spider": "fake", "pid": os.getpid()}, codec.crawl_key(secret, crawl))
        self.held = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, seeds=()):
        self.client.start()
        if seeds:
            self.client.add_seeds([[u, fp(u), None] for u in seeds])
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            got = self.client.take(8)
            if self.hang:
                self.held.extend(got)
            for p, entry_id, e in got if not self.hang else ():
                if self.delay:
                    time.sleep(self.delay)
                self.fetched[e.url] += 1
                links = self.web.links(e.url)
                item = ({"k": "e", "l": e.lease, "f": e.fp, "u": e.url, "e": "404", "p": True} if links is None
                        else {"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 1, "ln": links})
                for one in self.tamper(e, item) if self.tamper else [item]:
                    self.client.done(p, entry_id, one)  # several: in one report, most likely
            if not got:
                time.sleep(0.02)

    def finished(self):
        return self.client.finished()

    def stop(self):
        self._stop.set()
        self.thread.join(10)
        self.client.stop()


def run_until_finished(spiders, deadline, check=None):
    """Wait until every spider that does not hang sees the crawl finished
    (``check()`` is called on the way: an assertion there fails the test)."""
    try:
        while not all(s.finished() for s in spiders if not s.hang):
            assert time.monotonic() < deadline, ("the crawl did not finish in time", [
                (s.client.spider, s.client.state.get("state"), s.client.stats()) for s in spiders])
            if check is not None:
                check()
            time.sleep(0.05)
    finally:
        for s in spiders:
            s.stop()


def check_db(db_path, want=None):
    """``page_db_check`` is clean; every page of ``want`` is crawled. Returns
    ``(URLs, crawled URLs)`` of the database."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = page_db_check([str(db_path)])
    assert code == 0, out.getvalue()
    db = PageDB(str(db_path), readonly=True)
    try:
        urls = db.urls(range(db.n_pages))
        v = db.vertices
        crawled = {u for u, s in zip(urls, v.state[: db.n_pages]) if s == CRAWLED}
    finally:
        db.close()
    if want is not None:
        missing = sorted(set(want) - crawled)
        assert not missing, missing[:5]
    return set(urls), crawled


def fetched_by(spiders):
    out = collections.Counter()
    for s in spiders:
        out.update(s.fetched)
    return out

