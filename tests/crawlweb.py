"""Helpers for tests that run real ``scrapy crawl`` processes against the
local test web (``frontera-linkrank serve-web``): graphs, the server, the
crawl, and reading the server's request log.

Nothing runs at import (pytest imports this module for doctests).
"""

import collections
import os
import signal
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "example_project")
BIN = os.path.dirname(sys.executable)


def multi_host_graph(path, hosts=8, pages=40, out_degree=4, external=0.2, seed=1, single_host=False):
    """Write a random web graph as a CSR ``.npz`` with a ``hosts`` array.

    Page ``v`` is ``http://h<host>.<name>.test/p<v>`` (``name`` from the file
    name). Each host's page 0 is its home; every page links to its home,
    to ``out_degree`` random pages of its host and, with probability
    ``external`` per link, to a page of another host instead; home pages
    link to the next host's home, so the graph is connected from page 0.
    ``single_host`` keeps the same links but puts every page on host 0.
    Returns the path.
    """
    rng = np.random.default_rng(seed)
    n = hosts * pages
    host = np.repeat(np.arange(hosts), pages)
    rows = []
    for v in range(n):
        h = host[v]
        home = h * pages
        out = {home} if v != home else {((h + 1) % hosts) * pages}
        for _ in range(out_degree):
            hh = rng.integers(hosts) if rng.random() < external else h
            out.add(int(hh * pages + rng.integers(pages)))
        out.discard(v)
        rows.append(sorted(out))
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.array([w for r in rows for w in r], np.int64)
    np.savez(path, indptr=indptr, indices=indices, hosts=np.zeros(n, np.int64) if single_host else host)
    return path


def reachable(graph, start, dead=()):
    """Pages reachable from ``start`` following links, not through ``dead``
    pages (they answer 404: their links are never seen)."""
    dead = set(dead)
    seen, stack = {start}, [start]
    while stack:
        v = stack.pop()
        if v in dead:
            continue
        for w in graph.out(v).tolist():
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


class TestWebServer:
    """``frontera-linkrank serve-web`` in a subprocess (127.0.0.1, stops by
    itself after ``timeout`` seconds at the latest)."""

    __test__ = False

    def __init__(self, graph, workdir, timeout=300, extra=()):
        self.log = os.path.join(workdir, "requests.log")
        port_file = os.path.join(workdir, "port")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "frontera-linkrank"), "serve-web", graph, "--port-file", port_file,
             "--log", self.log, "--timeout", str(timeout), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve-web did not start: {self.proc.stdout.read()}")
            time.sleep(0.05)
        self.port = int(open(port_file).read())
        self.proxy = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def requests(self):
        """``(time, method, url, status)`` of every request served so far."""
        if not os.path.exists(self.log):
            return []
        out = []
        with open(self.log, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    out.append((float(parts[0]), parts[1], parts[2], int(parts[3])))
        return out

    def page_fetches(self):
        """Fetches per URL, robots.txt excluded."""
        return collections.Counter(u for _, _, u, _ in self.requests() if not u.endswith("/robots.txt"))

    def settled_fetches(self, quiet=1.0, limit=30.0):
        """:meth:`page_fetches` once no request has been logged for
        ``quiet`` seconds (at most ``limit``): requests a killed crawler
        sent just before it died reach the log after the kill."""
        seen, since, start = len(self.requests()), time.monotonic(), time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() - start < limit:
            time.sleep(0.05)
            now = len(self.requests())
            if now != seen:
                seen, since = now, time.monotonic()
        return self.page_fetches()


def crawl_command(db, seeds, spider="example", settings=None, log_file=None, extra_args=()):
    cmd = [os.path.join(BIN, "scrapy"), "crawl", spider, *extra_args, "-s", f"LINKRANK_PATH={db}",
           "-s", f"LINKRANK_SEEDS_FILE={seeds}", "-s", "LINKRANK_SYNC=False", "-s", "LOG_LEVEL=INFO"]
    if log_file:
        cmd += ["-s", f"LOG_FILE={log_file}"]
    for k, v in (settings or {}).items():
        cmd += ["-s", f"{k}={v}"]
    return cmd


def crawl_env(proxy, no_proxy=None):
    env = dict(os.environ, http_proxy=proxy, PYTHONPATH=ROOT)
    for k in ("https_proxy", "HTTPS_PROXY", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        env.pop(k, None)
    if no_proxy:
        env["no_proxy"] = no_proxy
    return env


def run_crawl(proxy, db, seeds, cwd=EXAMPLE, timeout=240, no_proxy=None, **kw):
    """Run ``scrapy crawl`` to its end; returns the CompletedProcess
    (stdout and stderr together)."""
    return subprocess.run(crawl_command(db, seeds, **kw), cwd=cwd, env=crawl_env(proxy, no_proxy), timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_crawl(proxy, db, seeds, cwd=EXAMPLE, **kw):
    """Start ``scrapy crawl`` in the background (its own process group)."""
    return subprocess.Popen(crawl_command(db, seeds, **kw), cwd=cwd, env=crawl_env(proxy),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill9(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def scrapy_stats(log_text):
    """The ``linkrank/*`` and a few Scrapy figures of a crawl's final stats dump."""
    out = {}
    for line in log_text.splitlines():
        line = line.strip().strip("{},")
        if line.startswith("'") and "':" in line:
            key, _, value = line.partition("':")
            key = key.strip("'")
            try:
                out[key] = float(value.strip().rstrip(","))
            except ValueError:
                out[key] = value.strip().rstrip(",").strip("'")
    return out
