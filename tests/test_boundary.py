"""What one caller sends never makes a commit fail for the others.

Values the page database cannot store (an HTTP status of 70000 or -1, a
score of ``10**400``, a URL that is bytes or None, a fingerprint that is
a number) are checked where they enter the core: an impossible status
makes that page's fetch an error, other odd values are ignored or the URL
rejected, and the rest of the batch (the other pages' links) is kept. The
database stays consistent (``page_db_check``), through the Frontera API
and through ``scrapy crawl`` against a server that answers
``HTTP/1.1 70000``.
"""

import os
import subprocess
import sys
import time

import pytest
from frontera.core.models import Request, Response

from crawlweb import BIN, run_crawl, scrapy_stats
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED, ERROR

HERE = os.path.dirname(__file__)
PROBE = os.path.join(HERE, "crawl_project")


def check(path, *args):
    out = subprocess.run([os.path.join(BIN, "page_db_check"), str(path), *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def error_of(db, url):
    i = db.find(fingerprint(url))
    with db.snapshot() as txn:
        return int(db.vertices.state[i]), db.error_message(i, txn)


def two_pages(m):
    """Seed a.test and b.test, hand both out, report b.test with a link."""
    m.add_seeds([Request("http://a.test/"), Request("http://b.test/")])
    got = {r.url: r for r in m.get_next_requests(10)}
    a, b = got["http://a.test/"], got["http://b.test/"]
    m.page_crawled(Response(b.url, request=b))
    m.links_extracted(b, [Request("http://b.test/kid")])
    return a


@pytest.mark.parametrize("status", [70000, -1, 2**64, 99, 1000])
def test_an_impossible_status_is_an_error_of_its_page(make_manager, tmp_path, status):
    m = make_manager()
    a = two_pages(m)
    m.page_crawled(Response(a.url, status_code=status, request=a))
    m.links_extracted(a, [Request("http://a.test/from-a-bad-response")])
    got = [r.url for r in m.get_next_requests(10)]
    assert got == ["http://b.test/kid"]  # the other page's link kept, the refused page's links ignored
    s = m.backend.stats()
    assert s["invalid_responses"] == 1 and s["pages_failed"] == 1
    db = m.backend.db
    state, message = error_of(db, "http://a.test/")
    assert state == ERROR and message == f"invalid HTTP status {status}"
    assert db.vertices.state[db.find(fingerprint("http://b.test/"))] == CRAWLED
    m.stop()
    check(tmp_path / "db")


class Duck:
    """A request or response that is not Frontera's (the core reads attributes)."""

    def __init__(self, url, meta=None, status_code=200, body=b""):
        self.url, self.meta, self.status_code, self.body = url, meta or {}, status_code, body
        self.method, self.headers, self.cookies, self.request = b"GET", {}, {}, None


def link(url, **meta):
    return Duck(url, {k.encode(): v for k, v in meta.items()})


# Each of these made the next commit (or apply) raise, losing the batch.
HOSTILE = {
    "status None": lambda b, a: b.page_crawled(Duck(a.url, status_code=None)),
    "status nan": lambda b, a: b.page_crawled(Duck(a.url, status_code=float("nan"))),
    "link score 10**400": lambda b, a: b.links_extracted(
        a, [Request("http://c.test/", meta={b"score": 10**400, b"fingerprint": fingerprint("http://c.test/").hex(),
                                         b"scrapy_meta": {}})]
    ),
    "link URL bytes": lambda b, a: b.links_extracted(a, [link(b"http://c.test/")]),
    "link URL None": lambda b, a: b.links_extracted(a, [link(None)]),
    "link URL 5": lambda b, a: b.links_extracted(a, [link(5)]),
    "link fingerprint 5": lambda b, a: b.links_extracted(a, [link("http://c.test/", fingerprint=5)]),
    "link fingerprint surrogates": lambda b, a: b.links_extracted(a, [link("http://c.test/", fingerprint="\ud800")]),
    "response fingerprint 5": lambda b, a: b.page_crawled(Duck(a.url, {b"fingerprint": 5})),
    "response URL None": lambda b, a: b.page_crawled(Duck(None)),
    "content hash 2**64": lambda b, a: b.page_crawled(Duck(a.url, {b"content_hash": 2**64})),
    "redirect to bytes": lambda b, a: b.page_crawled(Duck(a.url, {b"redirect_urls": [b"http://a.test/r"]})),
    "redirect_urls 5": lambda b, a: b.page_crawled(Duck(a.url, {b"redirect_urls": 5})),
    "error object without str": lambda b, a: b.request_error(a, Unprintable()),
    "error of request URL None": lambda b, a: b.request_error(Duck(None), "boom"),
    "seed URL None": lambda b, a: b.add_seeds([Duck(None)]),
    "seed weight 10**400": lambda b, a: b.add_seeds([Duck("http://s.test/", {b"seed_weight": 10**400})]),
}


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_odd_values_do_not_break_the_batch(make_backend, tmp_path, name):
    b = make_backend()
    a = two_pages(b)
    HOSTILE[name](b, a)  # raises nothing
    got = [r.url for r in b.get_next_requests(10)]
    assert "http://b.test/kid" in got
    b.frontier_stop()
    # A fingerprint of the caller's own is not the URL's: skip that check.
    check(tmp_path / "db", *(["--no-urls"] if "fingerprint surrogates" in name else []))


def test_scrapy_crawl_of_a_server_answering_status_70000(tmp_path):
    port_file = str(tmp_path / "port")
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "status_server.py"), port_file, "--timeout", "120"])
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            assert srv.poll() is None and time.monotonic() < deadline, "status server did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{open(port_file).read()}"
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("# seeds come from start()\n")
        db_path = tmp_path / "db"
        out = run_crawl("http://127.0.0.1:9", str(db_path), str(seeds), cwd=PROBE, spider="probe", timeout=120,
                        no_proxy="127.0.0.1", extra_args=["-a", f"start_url={base}/?to=/s/70000,/s/-1,/good"])
    finally:
        srv.terminate()
        srv.wait(10)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "Traceback" not in out.stdout and "OverflowError" not in out.stdout, out.stdout[-3000:]
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "finished" and stats["linkrank/invalid_responses"] == 2
    with PageDB(db_path, readonly=True) as db:
        assert error_of(db, f"{base}/s/70000") == (ERROR, "invalid HTTP status 70000")
        assert error_of(db, f"{base}/s/-1") == (ERROR, "invalid HTTP status -1")
        assert db.vertices.state[db.find(fingerprint(f"{base}/good"))] == CRAWLED
        assert db.find(fingerprint(f"{base}/lost/70000")) is None
    check(db_path)
