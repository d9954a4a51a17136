"""Bad or conflicting data in Redis never stops, stalls or poisons a crawl.

Each test runs ``serve-frontier`` (a subprocess) on a real redis-server
with fake spiders (tests/shared_frontier.py: the real client fetching
from an in-memory web), does to the broker what a buggy or hostile writer
would, and checks that the frontier keeps running (or refuses cleanly at
start, with one line), that the crawl finishes with every reachable page
fetched, and that ``page_db_check`` finds the database consistent.
"""

import math
import os
import signal
import subprocess
import time

import pytest

from frontera_linkrank.service import codec
from frontera_linkrank.service.redis_transport import RedisTransport
from shared_frontier import BIN, FakeSpider, FakeWeb, ServeFrontier, check_db, fp, kill_all, run_until_finished

CRAWL = "t"
DEADLINE = 60  # seconds for any one crawl here


@pytest.fixture(autouse=True)
def _no_frontier_left():
    yield
    kill_all()


def setup(tmp_path, redis_server, settings=(), env=None, hosts=4, pages=20, **kw):
    web = FakeWeb(tmp_path / "web.npz", hosts=hosts, pages=pages)
    frontier = ServeFrontier(tmp_path / "db", redis_server.url, tmp_path, CRAWL, settings=settings, env=env, **kw)
    return web, frontier, RedisTransport(redis_server.url, CRAWL)


def crawl(web, redis_server, sids=("s1", "s2"), secret=None, check=None, extra=(), **kw):
    """Fake spiders ``sids`` (the first sends the seed) crawl to the end; ``extra``: spiders started already."""
    spiders = [FakeSpider(redis_server.url, CRAWL, sid, web, secret=secret, **kw) for sid in sids]
    spiders[0].start(seeds=[web.seed])
    for s in spiders[1:]:
        s.start()
    run_until_finished(spiders + list(extra), time.monotonic() + DEADLINE, check)
    return spiders


def still_serving(frontier):
    def check():
        assert frontier.alive(), frontier.text()[-3000:]
    return check


def ends_cleanly(frontier, db, web):
    assert frontier.alive(), frontier.text()[-3000:]
    assert frontier.stop() == 0, frontier.text()[-3000:]
    assert "Traceback" not in frontier.text(), frontier.text()[-3000:]
    return check_db(db, web.reachable())


# -- 1. report items with fields of the wrong type ------------------------------------------
POISON = [("c", 5), ("c", {"a": 1}), ("rr", 3), ("h", "12"), ("h", [1]), ("h", math.nan), ("sc", "x"), ("hd", 5)]


def test_report_items_of_the_wrong_type_are_refused_and_the_rest_applied(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    sent = []

    def tamper(entry, item):
        if len(sent) >= len(POISON) or item["k"] != "f":
            return [item]
        field, value = POISON[len(sent)]
        sent.append(field)
        return [{**item, field: value}, item]  # the poisoned copy first, in the same report

    try:
        crawl(web, redis_server, check=still_serving(frontier), tamper=tamper)
        assert len(sent) == len(POISON)
        assert t.get("state")["stats"]["bad_items"] == len(POISON)
        # Restarted: nothing poisonous is read again (every entry was acknowledged).
        frontier.kill9()
        frontier.start()
        serving(frontier, t, "finished")
        assert t.backlog()["log_pending"] == 0
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    lines = [x for x in frontier.text().splitlines() if "refused (first: report item field" in x]
    assert lines and all("log entry 1" in x for x in lines)  # one line an entry, naming its stream id
    assert t.backlog()["rejected"] == len(lines)  # each set aside once, for inspection


def serving(frontier, t, state=None, timeout=30):
    """Wait until ``frontier`` publishes its state (``state`` if given)."""
    deadline = time.monotonic() + timeout
    while True:
        assert frontier.alive(), frontier.text()[-3000:]
        got = t.get("state") or {}
        if got.get("pid") == frontier.proc.pid and state in (None, got.get("state")):
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


# -- 2. links with malformed request parts ----------------------------------------------------
def test_links_with_malformed_request_parts_are_refused_before_they_are_stored(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    evil = [f"http://h0.web.test/evil{k}" for k in range(3)]
    parts = [{"h": 5, "c": "x", "b": 7}, {"m": b"POST", "h": {b"a": 5.5}}, {"x": {b"scrapy_meta": [1]}}]
    done = []

    def tamper(entry, item):
        if not done and item["k"] == "f":
            done.append(1)
            return [{**item, "ln": item["ln"] + [[u, fp(u), p] for u, p in zip(evil, parts)]}]
        return [item]

    try:
        crawl(web, redis_server, check=still_serving(frontier), tamper=tamper)
        urls, _ = ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    assert not set(evil) & urls
    assert "a link's headers, cookies, body malformed" in frontier.text()


# -- 3. a new database on a crawl name a broker already served ---------------------------------
def test_a_new_database_on_an_old_crawl_name_is_refused_then_reset(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    try:
        crawl(web, redis_server, check=still_serving(frontier))
        assert frontier.stop() == 0
        # Same broker, same crawl name, another (new) page database.
        second = ServeFrontier(tmp_path / "db2", redis_server.url, tmp_path, CRAWL, name="second")
        assert second.wait(30) == 2
        lines = second.text().strip().splitlines()
        assert len(lines) == 1 and "belongs to another page database" in lines[0], lines
        assert "--crawl" in lines[0] and "--reset-broker" in lines[0]
        third = ServeFrontier(tmp_path / "db2", redis_server.url, tmp_path, CRAWL, name="third",
                              args=["--reset-broker"])
        serving(third, t)  # the reset is done: now the spiders
        crawl(web, redis_server, check=still_serving(third))
        ends_cleanly(third, tmp_path / "db2", web)
    finally:
        frontier.kill9()


# -- 4. a large id written into a feed partition --------------------------------------------
def test_a_foreign_entry_with_a_large_id_in_the_feed_does_not_stop_publishing(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server, pages=30)
    poisoned = []

    def poison():
        assert frontier.alive(), frontier.text()[-3000:]
        if not poisoned and sum(t.r.xlen(t.feed_key(p)) for p in range(8)):  # leases are out
            for p in range(8):
                t.r.xadd(t.feed_key(p), {b"m": b"x"}, id="18446744073709551615-18446744073709551615")
            poisoned.append(1)

    try:
        crawl(web, redis_server, check=poison)
        assert poisoned
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    assert "held entries the frontier did not write" in frontier.text()


# -- 5. a second frontier on the same crawl ------------------------------------------------
def test_a_second_frontier_on_the_same_crawl_is_refused_naming_the_first(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    try:
        time.sleep(1.5)
        second = ServeFrontier(tmp_path / "other", redis_server.url, tmp_path, CRAWL, name="second")
        assert second.wait(30) == 2
        lines = second.text().strip().splitlines()
        assert len(lines) == 1 and "another frontier serves crawl 't'" in lines[0], lines
        assert f"pid {frontier.proc.pid}" in lines[0] and str(tmp_path / "db") in lines[0]
        crawl(web, redis_server, check=still_serving(frontier))
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()


# -- 6. a spider id that is not UTF-8 ------------------------------------------------------
def test_a_spider_id_that_is_not_utf8_is_dropped_at_start_and_later(tmp_path, redis_server):
    t = RedisTransport(redis_server.url, CRAWL)
    t.r.sadd(t._k("spiders"), b"\xff\xfe")  # before the frontier starts
    web, frontier, _ = setup(tmp_path, redis_server)

    def again():
        assert frontier.alive(), frontier.text()[-3000:]
        t.r.sadd(t._k("spiders"), b"\xc3\x28", b"no spaces allowed")

    try:
        crawl(web, redis_server, check=again)
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()


# -- 7. a spider that heartbeats and never reports -----------------------------------------
def test_a_spider_that_never_reports_loses_its_partitions(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server, settings=["LINKRANK_LEASE_TIMEOUT=3"])
    hung = FakeSpider(redis_server.url, CRAWL, "hung", web, hang=True)
    try:
        hung.start()
        time.sleep(1.0)  # it joins first and gets partitions
        crawl(web, redis_server, sids=("s1",), check=still_serving(frontier), extra=[hung])
        assert hung.held  # it took requests, and held them
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        hung.stop()
        frontier.kill9()
    assert "spider hung reported nothing while its leases expired" in frontier.text()


# -- 8. fingerprints that are not their URL's ----------------------------------------------
def test_seeds_and_links_whose_fingerprint_is_not_their_urls_are_refused(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    other = fp("http://elsewhere.test/")
    t.send(codec.seeds([[web.urls[1], other, None], ["http://h1.web.test/forged", fp(web.urls[2]), None]]))
    done = []

    def tamper(entry, item):
        if not done and item["k"] == "f":
            done.append(1)
            return [{**item, "ln": item["ln"] + [["http://h2.web.test/x", fp("http://h3.web.test/y"), None]]}]
        return [item]

    try:
        crawl(web, redis_server, check=still_serving(frontier), tamper=tamper)
        urls, _ = ends_cleanly(frontier, tmp_path / "db", web)  # page_db_check: every fingerprint is its URL's
    finally:
        frontier.kill9()
    assert "http://h2.web.test/x" not in urls and "http://h1.web.test/forged" not in urls
    assert frontier.text().count("is not its URL's") >= 2


# -- 9. the page budget in shared mode --------------------------------------------------------
def test_the_page_budget_holds_and_the_crawl_finishes(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server, settings=["LINKRANK_MAX_PAGES=50"], pages=30)
    try:
        spiders = crawl(web, redis_server, check=still_serving(frontier), prefetch=16)
        state = RedisTransport(redis_server.url, CRAWL).get("state")
        assert (state["state"], state["reason"]) == ("finished", "page_budget")
        assert frontier.stop() == 0
    finally:
        frontier.kill9()
    fetched = sum(sum(s.fetched.values()) for s in spiders)
    assert fetched == 50, fetched  # no lease beyond the budget
    _, crawled = check_db(tmp_path / "db")
    assert len(crawled) == 50


# -- 10. writers without the lease or without the secret -----------------------------------------
def test_a_report_of_a_lease_the_reporter_does_not_hold_is_refused(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server)
    stolen = []

    def steal():
        assert frontier.alive(), frontier.text()[-3000:]
        for p in range(8):
            for _, fields in t.r.xrange(t.feed_key(p)):
                e = codec.read_feed_entry(fields[b"m"])
                if e.lease in stolen:
                    continue
                stolen.append(e.lease)
                evil = "http://evil.test/"
                t.send(codec.report("rogue", [{"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 9,
                                               "ln": [[evil, fp(evil), None]]}]))

    try:
        crawl(web, redis_server, check=steal, delay=0.03)
        urls, _ = ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    assert stolen and "http://evil.test/" not in urls
    assert "spider 'rogue' reported a lease it does not hold" in frontier.text()


def test_with_a_secret_unsigned_seeds_reports_and_feed_entries_are_refused(tmp_path, redis_server):
    secret = "s3cret"
    web, frontier, t = setup(tmp_path, redis_server, env={"LINKRANK_SECRET": secret})
    evil = ["http://evil.test/seed", "http://evil.test/feed", "file:///etc/hostname"]
    rogue = RedisTransport(redis_server.url, CRAWL)  # no secret
    injected = []

    def inject():
        assert frontier.alive(), frontier.text()[-3000:]
        if not injected and t.get_raw("state") is not None:  # the frontier serves
            injected.append(1)
            rogue.send(codec.seeds([[evil[0], fp(evil[0]), None]]))
            for p in range(8):
                for u in evil[1:]:
                    entry = codec.pack({"v": 1, "t": "f", "l": 99, "f": fp(web.seed), "u": u, "d": 0, "r": None})
                    rogue.r.xadd(rogue.feed_key(p), {b"m": entry})

    try:
        spiders = crawl(web, redis_server, secret=secret, check=inject)
        urls, _ = ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    fetched = set().union(*(s.fetched for s in spiders))
    assert not set(evil) & (urls | fetched)
    assert sum(s.client.counters["refused_entries"] for s in spiders) >= 2
    assert "signed with another LINKRANK_SECRET" in frontier.text()


# -- 11. stopping while the broker does not answer -------------------------------------------
@pytest.mark.parametrize("outage", ["stopped", "frozen"])
def test_sigterm_ends_the_frontier_whatever_the_broker_does(tmp_path, redis_server, outage):
    web, frontier, t = setup(tmp_path, redis_server)
    t.send(codec.seeds([[web.seed, fp(web.seed), None]]))
    try:
        serving(frontier, t, "running")
        if outage == "stopped":
            redis_server.kill9()
        else:
            os.kill(redis_server.proc.pid, signal.SIGSTOP)  # connections stay open, nothing answers
        time.sleep(2)
        assert frontier.alive()
        frontier.proc.send_signal(signal.SIGTERM)
        code = frontier.wait(30)  # it gives itself 10 s (STOP_GRACE), then exits anyway
    finally:
        if outage == "frozen":
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        frontier.kill9()
    text = frontier.text()
    assert code in (0, 1) and "Traceback" not in text, text[-2000:]
    assert "stopped: " in text or "exiting now" in text  # one line saying what was left
    check_db(tmp_path / "db")


# -- 12. FLUSHDB mid-crawl; paths the page database cannot have ---------------------------------
def test_flushdb_mid_crawl_is_recovered_without_a_restart(tmp_path, redis_server):
    web, frontier, t = setup(tmp_path, redis_server, pages=30)
    flushed = []

    def flush():
        assert frontier.alive(), (frontier.proc.returncode, frontier.text()[-3000:])
        state = t.get("state") or {}
        if not flushed and (state.get("stats") or {}).get("pages_crawled", 0) >= 20:
            flushed.append(1)
            t.r.flushdb()

    try:
        crawl(web, redis_server, check=flush)
        assert flushed
        ends_cleanly(frontier, tmp_path / "db", web)
    finally:
        frontier.kill9()
    assert "lost the crawl's keys" in frontier.text()


@pytest.mark.parametrize("where", ["under /proc", "not UTF-8"])
def test_a_path_the_page_database_cannot_have_is_one_line(tmp_path, redis_server, where):
    from frontera_linkrank import LinkRankBackend
    from frontera_linkrank.storage.errors import PageDBError

    path = "/proc/x/db" if where == "under /proc" else str(tmp_path) + "/\udcff-db"  # the byte 0xff
    with pytest.raises(PageDBError) as e:
        LinkRankBackend(settings={"LINKRANK_PATH": path, "LINKRANK_SYNC": False})
    assert "\n" not in str(e.value) and ("/proc/x/db" in str(e.value) or "not valid UTF-8" in str(e.value))
    r = subprocess.run([os.path.join(BIN, "frontera-linkrank"), "serve-frontier", path, "--broker", redis_server.url],
                       capture_output=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and b"Traceback" not in r.stderr, r.stderr


# -- the inspect-and-repair tool ------------------------------------------------------------------
def test_page_db_check_finds_what_cannot_be_served_and_repair_fixes_it(tmp_path, capsys):
    from frontera_linkrank.cli.check import main as page_db_check
    from frontera_linkrank.core.codec import OutgoingRequest
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.settings import LinkRankSettings
    from frontera_linkrank.storage.pagedb import PageDB
    from frontera_linkrank.storage.urls import fingerprint

    db_path = str(tmp_path / "db")
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": db_path, "LINKRANK_SYNC": False}))
    core.add_seeds([OutgoingRequest(f"http://a.test/{k}", method=b"POST", body=b"q") for k in range(4)])
    core.close()
    # What an earlier version let in: a key that is not its URL's (twice: one
    # whose URL's key is free, one whose URL's key is another page's), parts
    # of the wrong type, parts that do not decode.
    db = PageDB(db_path)
    v = db.vertices
    v.fp[0] = fingerprint("http://elsewhere.test/")
    v.fp[1] = v.fp[2]
    v.fp[2] = fingerprint("http://a.test/1")
    db.set_request_extras(3, (b"GET", 5, "x", {}, 7))
    db.touch([0, 1, 2, 3])
    db.commit()
    db.close()
    assert page_db_check([db_path]) == 1
    out = capsys.readouterr().out
    assert "pages whose fingerprint is not their URL's" in out and "stored request cannot be handed out" in out
    assert page_db_check([db_path, "--repair"]) == 0
    out = capsys.readouterr().out
    assert out.count("repaired page") == 4 and "OK" in out, out
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": db_path, "LINKRANK_SYNC": False}))
    try:
        handed = {r.url for r in core.next_requests(10)}
    finally:
        core.close()
    assert handed <= {f"http://a.test/{k}" for k in range(4)} and "http://a.test/3" not in handed


def test_unsigned_requests_lose_the_meta_that_routes_them(tmp_path, redis_server):
    """A feed entry written by someone without the secret: the spider
    fetches it (http), but without its proxy, bind address, download slot,
    cookie jar or credentials; the spider's own meta keys pass."""
    from frontera_linkrank.scrapy.remote import RemoteManager

    url = "http://h0.web.test/p1"
    meta = {"proxy": "http://127.0.0.1:9", "bindaddress": ("1.2.3.4", 0), "download_slot": "x", "cookiejar": 2,
            "playwright": True, "dont_obey_robotstxt": True, "item_id": 7, "dont_redirect": True}
    parts = {"m": b"GET", "h": {b"Proxy-Authorization": [b"Basic eA=="], b"X-Ok": [b"1"]}, "c": {}, "b": b"",
             "x": {b"scrapy_meta": meta}}
    t = RedisTransport(redis_server.url, CRAWL)
    t.setup(1)
    t.publish([(0, 1, codec.pack({"v": 1, "t": "f", "l": 5, "f": fp(url), "u": url, "d": 0, "r": parts}))])
    t.put("assignment", {"version": 1, "owners": ["s1"]})
    spider = FakeSpider(redis_server.url, CRAWL, "s1", None)
    manager = RemoteManager(spider.client)
    spider.client.start()
    try:
        deadline = time.monotonic() + 20
        while not spider.client.n_waiting:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (request,) = manager.get_next_requests(1)
    finally:
        spider.client.stop()
    assert request.meta[b"scrapy_meta"] == {"item_id": 7, "dont_redirect": True}
    assert request.headers == {b"X-Ok": [b"1"]}
