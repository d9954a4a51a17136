"""The crawl status the frontier keeps for viewers (``core/status.py``):
its figures equal a full read of the database (``page_db_stats``), the
next pages it lists are those the frontier then hands out, and it is
committed with the batches."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from frontera_linkrank.core.status import STATUS_TOP
from frontera_linkrank.storage.viewer import read_metadata
from util import crawl, req

BIN = os.path.dirname(sys.executable)


def _links(url, k=6, hosts=5):
    n = int(hashlib.sha1(url.encode()).hexdigest(), 16)
    return [f"http://h{(n >> (3 * j)) % hosts}.test/p{(n >> (5 * j)) % 300}" for j in range(k)]


def _crawl(b, batches, size=30, seeds=4):
    b.add_seeds([req(f"http://h{h}.test/") for h in range(seeds)])
    for _ in range(batches):
        for r in b.get_next_requests(size):
            n = int(hashlib.sha1(r.url.encode()).hexdigest(), 16)
            if n % 13 == 0:
                b.request_error(r, "twisted.internet.error.ConnectionRefusedError: refused")
                continue
            crawl(b, r, _links(r.url), status=404 if n % 9 == 0 else 200)


def _stats(path):
    out = subprocess.run([os.path.join(BIN, "page_db_stats"), str(path), "--json", "--top", "10"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("policy", ["hybrid-push", "opic", "pagerank"])
def test_the_status_at_close_equals_a_full_read_of_the_database(tmp_path, make_backend, policy):
    path = tmp_path / "db"
    b = make_backend(path, POLICY=policy, MAX_RETRIES=0, RANK_EVERY_PAGES=50, RANK_BACKGROUND=False)
    _crawl(b, 8)
    b.frontier_stop()
    want = _stats(path)
    doc, infos, tops = read_metadata(str(path))
    st = doc["status"]
    assert want["pages_by_state"]["crawled"] > 100 and want["pages_by_state"]["error"] > 0
    for key in ("pages", "pages_by_state", "seeds", "links", "hosts"):
        assert st[key] == want[key], key
    residual = st["cash"].pop("residual")
    assert residual == pytest.approx(want["cash"].pop("residual"), abs=1e-12)
    assert st["cash"] == want["cash"]
    assert set(infos) == set(want["ranking"]) == {"pagerank", "authority", "hub"}
    for name in infos:
        assert tops[name][:10] == want["top_pages"][name], name  # stored with the vector
    # errors by kind and status are counters, kept with the others
    c = want["counters"]
    assert c["failed_ConnectionRefusedError"] == want["pages_by_state"]["error"] == c["pages_failed"]
    assert 0 < c["http_404"] < c["pages_crawled"]


def test_the_links_total_follows_late_links_and_a_reopened_database(tmp_path, make_backend):
    path = tmp_path / "db"
    b = make_backend(path)
    b.add_seeds([req("http://a.test/")])
    (r,) = b.get_next_requests(1)
    crawl(b, r, [f"http://a.test/{k}" for k in range(5)])
    b.links_extracted(r, [req("http://a.test/late1"), req("http://a.test/1")])  # links after the page's: added
    for r in b.get_next_requests(10):
        crawl(b, r, ["http://a.test/"] if r.url.endswith("/1") else [])
    b.frontier_stop()
    assert read_metadata(str(path))[0]["status"]["links"] == _stats(path)["links"] == 7
    b = make_backend(path)  # reopened: the total goes on from the saved one
    b.add_seeds([req("http://c.test/")])
    for r in b.get_next_requests(10):
        crawl(b, r, ["http://a.test/", "http://b.test/"])
    b.frontier_stop()
    assert read_metadata(str(path))[0]["status"]["links"] == _stats(path)["links"] == 9


@pytest.mark.parametrize("policy", ["hybrid-push", "opic", "fifo"])
def test_the_next_pages_listed_are_those_handed_out_next(tmp_path, make_backend, policy):
    """At each step the status lists the pages the frontier then hands out,
    in order: priority levels, both host classes of the cash policies, and
    hosts whose head ran out (their pages read back from the database)."""
    path = tmp_path / "db"
    b = make_backend(path, POLICY=policy, MAX_RETRIES=0, MAX_REQUESTS_PER_HOST=0, RANK_BACKGROUND=False,
                     OMEGA_POLICY="hosts", OMEGA_HOSTS=["h0.test", "h1.test"])
    b.add_seeds([req(f"http://h{h}.test/") for h in range(3)])
    core, checked = b.core, 0
    for step in range(12):
        core.status.force()
        b.get_next_requests(0)  # commits: the status takes a pass
        listed = [r["url"] for r in core.db.meta_section("status")["queued"]]
        handed = core.next_requests(STATUS_TOP, max_per_host=0)
        assert [r.url for r in handed] == listed, step
        checked += len(listed)
        for r in handed:
            links = [req(u, scrapy_priority=2) if u.endswith("7") else req(u) for u in _links(r.url, 8, hosts=3)]
            crawl(b, r, links)
    assert checked > 5 * STATUS_TOP
    assert len(core.frontier.levels) == 2
    assert core.frontier.queue.refills > 0 or policy != "hybrid-push"  # (on this web the others' heads never run out)


def test_the_status_is_committed_with_the_batches_and_refreshed_at_its_interval(tmp_path, make_backend):
    now = [1000.0]
    path = tmp_path / "db"
    b = make_backend(path, clock=lambda: now[0], STATUS_INTERVAL=3600.0, RANK_BACKGROUND=False)
    b.add_seeds([req("http://a.test/")])
    b.get_next_requests(0)
    first = b.core.db.meta_section("status")
    assert first["pages_by_state"]["unfetched"] == 1 and first["time"] == 1000.0
    now[0] = 1001.0
    for r in b.get_next_requests(5):
        crawl(b, r, ["http://a.test/x", "http://a.test/y"])
    b.get_next_requests(0)
    st = b.core.db.meta_section("status")
    # counts, links and the commit time at every commit; the pass over the pages at its interval
    assert (st["pages"], st["links"], st["committed"]) == (3, 2, 1001.0)
    assert st["time"] == 1000.0 and st["pages_by_state"] == first["pages_by_state"]
    b.frontier_stop()  # and at close
    st = read_metadata(str(path))[0]["status"]
    assert st["pages_by_state"]["crawled"] == 1 and st["pages_by_state"]["unfetched"] == 2


def test_a_reopened_crawl_hands_out_its_first_batch_before_the_next_pass(tmp_path, make_backend):
    """The figures saved at close stand for one interval after a reopen: the
    first batch is not held up by a pass over every page; the next pass
    comes at the interval, or at close."""
    now = [1000.0]
    path = tmp_path / "db"
    b = make_backend(path, clock=lambda: now[0], STATUS_INTERVAL=3600.0, RANK_BACKGROUND=False)
    b.add_seeds([req("http://a.test/"), req("http://b.test/")])
    (r, _) = b.get_next_requests(2)
    crawl(b, r, ["http://a.test/x"])
    b.frontier_stop()
    saved = read_metadata(str(path))[0]["status"]
    assert saved["passes"] == 2 and saved["pages_by_state"]["leased"] == 1
    now[0] = 2000.0
    b = make_backend(path, clock=lambda: now[0], STATUS_INTERVAL=3600.0, RANK_BACKGROUND=False)
    assert len(b.get_next_requests(5)) == 2  # the lease recovered at open, and the link
    st = b.core.db.meta_section("status")
    assert st["committed"] == 2000.0 and st["pages"] == 3  # what every commit records
    assert (st["passes"], st["time"], st["pages_by_state"]) == (2, saved["time"], saved["pages_by_state"])
    b.frontier_stop()
    st = read_metadata(str(path))[0]["status"]
    assert st["passes"] == 3 and st["time"] == 2000.0 and st["pages_by_state"]["leased"] == 2


def test_a_pass_slowed_by_a_busy_machine_does_not_put_off_the_next(tmp_path, make_backend, monkeypatch):
    """The passes keep to a share of the crawl's work: a pass that took 30 s
    of wall time but 1 ms of CPU (the machine was busy) is followed by the
    next one an interval later, not 600 s later."""
    from frontera_linkrank.core import status as status_module

    now = {"wall": 1000.0, "cpu": 0.0}

    class BusyMachine:
        @staticmethod
        def monotonic():
            return now["wall"]

        @staticmethod
        def thread_time():
            return now["cpu"]

    b = make_backend(tmp_path / "db", STATUS_INTERVAL=1.0, RANK_BACKGROUND=False)
    monkeypatch.setattr(status_module, "time", BusyMachine)
    status, one_pass = b.core.status, b.core.status._pass

    def preempted_pass():
        one_pass()
        now["wall"] += 30.0
        now["cpu"] += 0.001

    monkeypatch.setattr(status, "_pass", preempted_pass)
    b.add_seeds([req("http://a.test/")])
    b.get_next_requests(0)
    assert b.core.db.meta_section("status")["passes"] == 1
    now["wall"] += 1.0
    b.get_next_requests(0)
    assert b.core.db.meta_section("status")["passes"] == 2


def test_no_status_is_kept_with_interval_zero(tmp_path, make_backend):
    path = tmp_path / "db"
    b = make_backend(path)
    _crawl(b, 1)
    b.frontier_stop()
    assert read_metadata(str(path))[0]["status"]["pages"] > 0
    b = make_backend(path, STATUS_INTERVAL=0)
    b.frontier_stop()
    assert read_metadata(str(path))[0]["status"] is None  # no stale figures left behind


def test_a_vector_stored_without_its_top_list_is_read_once_by_the_viewer(tmp_path, make_backend):
    from frontera_linkrank.cli.serve_status import top_pages
    from frontera_linkrank.storage.pagedb import PageDB
    from frontera_linkrank.storage.viewer import read_top

    path = tmp_path / "db"
    b = make_backend(path, RANK_BACKGROUND=False)
    _crawl(b, 3)
    b.frontier_stop()
    with PageDB(str(path)) as db:  # as an older version stored it: no list
        values = np.random.default_rng(0).random(db.n_pages)
        db.write_scores({"custom": values}, {"version": 1})
    doc, infos, tops = read_metadata(str(path))
    assert tops["custom"] is None and len(tops["pagerank"]) == min(50, infos["pagerank"]["n_pages"])
    want = _stats(path)["top_pages"]
    assert read_top(str(path), "custom", 10) == want["custom"]
    cache = {}
    assert top_pages(str(path), infos, tops, 10, cache) == {k: want[k] for k in infos}
    assert set(cache) == {"custom"}  # only the vector without a list was read


def test_an_import_into_a_crawled_database_leaves_no_stale_status(tmp_path, make_backend):
    from frontera_linkrank.core.graph_import import add_graph
    from frontera_linkrank.storage.pagedb import PageDB

    path = tmp_path / "db"
    b = make_backend(path)
    _crawl(b, 2)
    b.frontier_stop()
    with PageDB(str(path)) as db:  # a tool adds pages and links, replacing a crawled page's
        add_graph(db, ["http://h0.test/", "http://new.test/a", "http://new.test/b"], [0, 0, 1], [1, 2, 2])
    assert read_metadata(str(path))[0]["status"] is None
    b = make_backend(path)  # the next crawl counts again
    b.frontier_stop()
    assert read_metadata(str(path))[0]["status"]["links"] == _stats(path)["links"]


def test_failures_are_counted_by_kind_and_the_kinds_are_bounded():
    from frontera_linkrank.core.counters import Counters
    from frontera_linkrank.core.status import FAILURE_KINDS, count_failure, count_response

    c = Counters()
    count_failure(c, "[<twisted.python.failure.Failure twisted.internet.error.DNSLookupError: no such host>]")
    count_failure(c, "robots.txt forbids it")
    count_response(c, 200)
    count_response(c, 503)
    assert c == {"failed_DNSLookupError": 1, "failed_other": 1, "http_503": 1}
    for k in range(3 * FAILURE_KINDS):  # a server naming a new error each time
        count_failure(c, f"Kind{k}Error: no")
    assert sum(k.startswith("failed_") for k in c) == FAILURE_KINDS
    assert sum(v for k, v in c.items() if k.startswith("failed_")) == 2 + 3 * FAILURE_KINDS
