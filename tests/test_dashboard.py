"""``frontera-linkrank serve-status``: the dashboard in a real browser
(headless Chromium, Debian's, driven by Playwright) and its HTTP interface.

- the page loads without a console error and shows what ``page_db_stats``
  reports for the same database; the JSON and ``/metrics`` agree with it;
- while a real ``scrapy crawl`` of the local test web runs, the crawled
  count grows in the page (which updates itself);
- a token, when set, is required on every request; methods other than GET
  and HEAD get 405; the server only reads (the database is unchanged);
- shared mode: the spiders of a shared frontier, read from its broker.

Chromium comes from the system (``make test`` installs Debian's ``chromium``
as root, as it does ``redis-server``); without it these tests are skipped
with the command, and fail under ``CI=true``.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from crawlweb import TestWebServer, kill9, start_crawl
from util import crawl, req

BIN = os.path.dirname(sys.executable)
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
INSTALL = "apt-get install chromium"
SCREENSHOT = os.path.join(ROOT, "docs", "dashboard.png")
_LABEL = r'[a-z_]+="(?:[^"\\\n]|\\[\\"n])*"'  # a value escapes backslash, quote and line feed
METRIC_SAMPLE = re.compile(rf"linkrank_[a-z_]+(?:\{{{_LABEL}(?:,{_LABEL})*\}})? -?(?:[0-9.]+(?:e[+-]?[0-9]+)?|inf)")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (the system's: Playwright's own download is not needed)."""
    binary = os.environ.get("LINKRANK_TEST_CHROMIUM") or shutil.which("chromium")
    if binary is None:
        message = f"chromium not installed: {INSTALL} (or make test as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary)
        yield b
        b.close()


class ServeStatus:
    """``frontera-linkrank serve-status ARGS`` on a free port of 127.0.0.1, stopped by PID."""

    def __init__(self, workdir, *args, env=None, cwd=None):
        port_file = os.path.join(str(workdir), "status.port")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "frontera-linkrank"), "serve-status", *map(str, args), "--port", "0",
             "--port-file", port_file, "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **(env or {})), cwd=cwd)
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve-status did not start: {self.proc.stdout.read()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(open(port_file).read())}/"

    def get(self, path, method="GET", headers=None):
        """``(status, headers, body)``; errors are answers too."""
        r = urllib.request.Request(self.url + path, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(r, timeout=10) as f:
                return f.status, f.headers, f.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def json(self, path, **kw):
        status, _, body = self.get(path, **kw)
        assert status == 200, (status, body)
        return json.loads(body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def open_page(browser, url):
    """The dashboard at ``url`` once it shows a sample; and the list its
    console errors and page errors go to."""
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.goto(url)
    page.wait_for_function("() => document.body.dataset.sampled !== undefined", timeout=15000)
    return page, problems


def figure(page, name):
    """A figure of the page as the number it shows (its ``data-value``)."""
    value = page.get_attribute(f"#{name}", "data-value")
    return None if value in (None, "") else float(value)


def stats_json(path):
    out = subprocess.run([os.path.join(BIN, "page_db_stats"), str(path), "--json", "--top", "15"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def small_crawl(make_backend, path):
    """A page database with crawled pages, 404s, failed fetches and rejected
    URLs, and a stored ranking."""
    from frontera_linkrank.cli.rank import main as rank

    b = make_backend(path, MAX_RETRIES=0)
    seeds = [req(f"http://h{h}.test/") for h in range(4)]
    b.add_seeds(seeds)
    for _ in range(6):
        for r in b.get_next_requests(40):
            n = int(hashlib.sha1(r.url.encode()).hexdigest(), 16)
            if n % 11 == 0:
                b.request_error(r, "twisted.internet.error.DNSLookupError: DNS lookup failed")
                continue
            links = [f"http://h{(n >> k) % 4}.test/p{(n >> (2 * k)) % 97}" for k in range(5)]
            crawl(b, r, links + ["mailto:someone@h1.test"], status=404 if n % 7 == 0 else 200)
    b.frontier_stop()
    assert rank([str(path)]) == 0


def test_the_page_shows_what_page_db_stats_reports_and_only_reads(tmp_path, make_backend, browser):
    db = tmp_path / "db"
    small_crawl(make_backend, db)
    want = stats_json(db)
    data = (db / "data.mdb").read_bytes()
    assert want["pages_by_state"]["error"] > 0 and want["counters"].get("rejected_scheme", 0) > 0, want
    with ServeStatus(tmp_path, db, "--interval", "0.5", "--max-pages", "500") as srv:
        page, problems = open_page(browser, srv.url)
        by = want["pages_by_state"]
        assert figure(page, "known") == want["pages"]
        assert figure(page, "crawled") == by["crawled"]
        assert figure(page, "queued") == by["unfetched"]
        assert figure(page, "in_flight") == by["leased"]
        assert figure(page, "errors") == by["error"]
        assert page.inner_text("#budget").startswith(f"{100 * by['crawled'] / 500:.1f} %")
        assert "top_importance" not in page.content()  # AOPIC importance needs every page's record: not shown
        for name in ("pagerank", "authority"):
            urls = page.locator(f"#top_{name} td:nth-child(2)").all_inner_texts()
            assert urls == [r["url"] for r in want["top_pages"][name]], name
        reasons = dict(zip(*[page.locator(f"#by_reason td:nth-child({k})").all_inner_texts() for k in (1, 2)]))
        assert reasons == {"DNSLookupError": str(by["error"])}
        rejected = page.locator("#rejected td:nth-child(1)").all_inner_texts()
        assert rejected == sorted(k[len("rejected_"):] for k in want["counters"] if k.startswith("rejected_"))
        # the next pages the frontier hands out (tests/test_crawl_status.py
        # checks them against what it hands out): as it left them, best first
        order = srv.json("api/order")
        assert order["policy"] == "hybrid-push" and len(order["queued"]) == min(15, by["unfetched"])
        assert page.locator("#queue td:nth-child(4)").all_inner_texts() == [r["url"] for r in order["queued"]]
        keys = [r["key"] for r in order["queued"]]
        assert keys == sorted(keys, reverse=True)
        page.close()
        assert problems == []

        # the JSON behind the page, and /metrics
        doc = srv.json("api/status")
        shown = doc["database"]["summary"]
        assert srv.json("api/database") == shown
        # every figure page_db_stats prints, but those that read every page's
        # record (AOPIC importance: its top pages and hosts); the cash
        # residual summed in floating point, not exactly rounded
        assert shown["cash"].pop("residual") == pytest.approx(want["cash"].pop("residual"), abs=1e-12)
        assert shown["top_pages"] == {k: v for k, v in want.pop("top_pages").items() if k != "importance"}
        assert {k: v for k, v in shown.items() if k != "top_pages"} == {
            **{k: v for k, v in want.items() if k != "top_hosts"}, "path": str(db)}
        assert srv.json("api/progress")["max_pages"] == 500
        _, headers, text = srv.get("metrics")
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        samples = [line for line in text.decode().splitlines() if not line.startswith("#")]
        for line in samples:  # the text format: name{label="value",...} number
            assert METRIC_SAMPLE.fullmatch(line), line
        metrics = dict(line.rsplit(" ", 1) for line in samples)
        assert int(metrics["linkrank_pages_known"]) == want["pages"]
        assert int(metrics['linkrank_pages{state="crawled"}']) == by["crawled"]
        assert int(metrics['linkrank_counter_total{name="pages_crawled"}']) == want["counters"]["pages_crawled"]
        assert int(metrics["linkrank_links"]) == want["links"]
        status, headers, body = srv.get("api/status", method="HEAD")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, _ = srv.get("api/status", method=method)
            assert (status, headers["Allow"]) == (405, "GET, HEAD"), method
        assert srv.get("nothing")[0] == 404
    assert srv.proc.returncode == 0, srv.proc.stdout.read()
    assert (db / "data.mdb").read_bytes() == data  # read only


def test_a_token_is_required_on_every_request_when_set(tmp_path, make_backend, browser):
    db = tmp_path / "db"
    small_crawl(make_backend, db)
    with ServeStatus(tmp_path, db, env={"FRONTERA_LINKRANK_STATUS_TOKEN": "s3cret"}) as srv:
        for path in ("", "api/status", "api/progress", "metrics", "favicon.ico"):
            assert srv.get(path)[0] == 401, path
            assert srv.get(path + "?token=wrong")[0] == 401, path
            assert srv.get(path, headers={"Authorization": "Bearer s3cret!"})[0] == 401, path
            assert srv.get(path, headers={"Authorization": "Bearer s3cret"})[0] in (200, 204), path
        assert srv.get("api/status?token=s3cret")[0] == 200
        assert srv.get("api/status", method="POST")[0] in (401, 405)
        page, problems = open_page(browser, srv.url + "?token=s3cret")  # the page's own requests carry it
        assert figure(page, "known") == stats_json(db)["pages"]
        page.close()
        assert problems == []
        out = srv.stop()
    assert out == 0 and "s3cret" not in srv.proc.stdout.read()


def test_the_crawled_count_grows_in_the_page_while_a_crawl_runs(tmp_path, browser):
    db = tmp_path / "db"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://www.hollins.edu/\n")
    settings = {"LINKRANK_MAX_PAGES": 1500, "CONCURRENT_REQUESTS": 4, "LINKRANK_POLICY": "hybrid-push",
                "LINKRANK_STATUS_INTERVAL": 0.2, "DOWNLOAD_DELAY": 0.01}  # a crawl of some seconds
    with TestWebServer("hollins", str(tmp_path), extra=["--errors", "0.02"]) as web:
        crawler = start_crawl(web.proxy, str(db), str(seeds), settings=settings)
        try:
            deadline = time.monotonic() + 90
            while not _has_crawled(db):
                assert crawler.poll() is None and time.monotonic() < deadline, "the crawl did not start"
                time.sleep(0.1)
            # run where the database is: the page (and the screenshot) shows the path as given, "db"
            with ServeStatus(tmp_path, "db", "--interval", "0.3", "--max-pages", "1500", cwd=tmp_path) as srv:
                page, problems = open_page(browser, srv.url)
                seen = [figure(page, "crawled")]
                while len(set(seen)) < 4 and crawler.poll() is None:
                    assert time.monotonic() < deadline, seen
                    page.wait_for_timeout(200)  # the page refreshes itself: no reload
                    seen.append(figure(page, "crawled"))
                assert len(set(seen)) >= 4, seen
                assert seen == sorted(seen) and seen[-1] <= 1500
                page.wait_for_function("() => document.querySelectorAll('#chart_crawled polyline').length === 1")
                _screenshot(page, tmp_path)
                page.close()
                assert problems == []
        finally:
            kill9(crawler)


def _has_crawled(path):
    """The crawl has committed a crawled page to ``path``."""
    from frontera_linkrank.storage.pagedb import PageDB, PageDBError

    if not (path / "data.mdb").exists():
        return False
    try:
        with PageDB(str(path), readonly=True) as db:
            return db.meta.get("counters", {}).get("pages_crawled", 0) > 0
    except PageDBError:
        return False


def _screenshot(page, tmp_path):
    """docs/dashboard.png (README shows it) when FRONTERA_LINKRANK_UPDATE_SCREENSHOT=1; always a small PNG."""
    update = os.environ.get("FRONTERA_LINKRANK_UPDATE_SCREENSHOT") == "1"
    path = SCREENSHOT if update else str(tmp_path / "dashboard.png")
    page.screenshot(path=path, type="png")
    data = open(path, "rb").read()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < 150_000, len(data)


def test_shared_mode_shows_every_spider(tmp_path, redis_server, browser):
    from shared_frontier import FakeSpider, FakeWeb, ServeFrontier, kill_all

    web = FakeWeb(tmp_path / "web.npz", hosts=4, pages=30)
    frontier = ServeFrontier(tmp_path / "db", redis_server.url, tmp_path, "dash")
    spiders = [FakeSpider(redis_server.url, "dash", sid, web, delay=0.02) for sid in ("s1", "s2")]
    try:
        spiders[0].start(seeds=[web.seed])
        spiders[1].start()
        with ServeStatus(tmp_path, "--broker", redis_server.url, "--crawl", "dash", "--interval", "0.3") as srv:
            page, problems = open_page(browser, srv.url)
            page.wait_for_function("() => document.querySelectorAll('#spiders tr').length === 3", timeout=20000)
            rows = page.locator("#spiders td:nth-child(1)").all_inner_texts()
            assert rows == ["s1", "s2"]
            # Each spider shows alive once its heartbeat is in the broker (a loaded machine may delay one).
            page.wait_for_function("() => [...document.querySelectorAll('#spiders td:nth-child(2)')]"
                                   ".map(e => e.textContent).join() === 'yes,yes'", timeout=20000)
            page.wait_for_function("() => /frontier: (running|finished)/.test(document.getElementById('heartbeat')"
                                   ".textContent) && Number(document.getElementById('crawled').dataset.value) > 0",
                                   timeout=20000)  # the frontier's state, read from the broker
            assert f"pid {frontier.proc.pid}" in page.inner_text("#heartbeat")
            shared = srv.json("api/shared")
            assert set(shared["spiders"]) == {"s1", "s2"}
            _, _, text = srv.get("metrics")
            assert 'linkrank_spider_alive{spider="s1"} 1.0' in text.decode()
            page.close()
            assert problems == []
    finally:
        for s in spiders:
            s.stop()
        kill_all()
