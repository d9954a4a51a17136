"""The frontier service in-process against a real redis-server: bad
messages, duplicate reports, back-pressure (the spiders' side through the
transport and the client, no Scrapy)."""

import time

from frontera_linkrank.core.codec import OutgoingRequest
from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.service import codec
from frontera_linkrank.service.client import RemoteFrontier
from frontera_linkrank.service.redis_transport import RedisTransport
from frontera_linkrank.service.server import FrontierService
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.storage.urls import fingerprint


def fp(url):
    return fingerprint(url).hex().encode()


def service(tmp_path, server, **settings):
    s = {"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False, **settings}
    core = FrontierCore(LinkRankSettings(s), keep_leases=True)
    svc = FrontierService(core, RedisTransport(server.url, "u"), partitions=4)
    svc.start()
    return svc


def steps(svc, until, timeout=10):
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "timed out"
        svc.step()


def test_bad_messages_are_counted_and_the_rest_applied(tmp_path, redis_server, caplog):
    svc = service(tmp_path, redis_server)
    t = RedisTransport(redis_server.url, "u")
    t.send(b"\x80\x04garbage")  # not msgpack (a pickle would be refused the same way)
    t.send(codec.pack({"v": 99, "t": "s", "i": []}))  # another schema
    good = "http://a.test/"
    t.send(codec.seeds([["http://bad.test/", b"not hex", None], [good, fp(good), None]]))
    steps(svc, lambda: svc.core.db.n_pages >= 1)
    assert svc.counters["bad_messages"] == 2 and svc.counters["bad_links"] == 1
    assert svc.core.db.find(fingerprint(good)) is not None and svc.core.db.n_pages == 1
    assert "msgpack message" in caplog.text and "schema version 99" in caplog.text
    assert t.backlog()["rejected"] == 3  # set aside for inspection, acknowledged
    svc.core.close()


def test_a_report_sent_twice_is_applied_once(tmp_path, redis_server):
    svc = service(tmp_path, redis_server)
    t = RedisTransport(redis_server.url, "u")
    t.heartbeat("s1", {"prefetch": 4, "interval": 0.2}, ttl=30)
    t.send(codec.seeds([["http://a.test/", fp("http://a.test/"), None]]))
    got = []

    def read():
        got.extend(t.read_feed("s1", {p: ">" for p in range(4)}, 10, 0))
        return got

    steps(svc, read)
    (p, entry_id, raw), = got
    e = codec.read_feed_entry(raw)
    item = {"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 7,
            "ln": [["http://a.test/b", fp("http://a.test/b"), None]]}
    t.report("s1", codec.report("s1", [item]), [(p, entry_id)])
    t.report("s1", codec.report("s1", [item]), [(p, entry_id)])  # a retried write, a restarted spider...
    steps(svc, lambda: svc.counters["duplicate_reports"] == 1)
    assert svc.counters["reports_applied"] == 1
    assert svc.core.counters["pages_crawled"] == 1 and svc.core.db.n_pages == 2
    svc.core.close()


def test_a_page_received_under_two_entries_is_one_request_and_both_are_acknowledged(redis_server):
    """A frontier that finds the broker's streams gone republishes the
    leases it has out, so a spider may hold one page under two feed
    entries. It makes one request of them, reports it under the newer lease
    and acknowledges both: an entry left unacknowledged would keep the
    spider waiting for the crawl to finish for ever."""
    from frontera.core.models import Response

    from frontera_linkrank.scrapy.remote import RemoteManager

    url = "http://h0.test/p1"
    t = RedisTransport(redis_server.url, "u")
    t.setup(1)
    t.publish([(0, seq, codec.pack({"v": 1, "t": "f", "l": lease, "f": fp(url), "u": url, "d": 0}))
               for seq, lease in ((1, 6), (2, 5))])
    t.put("assignment", {"version": 1, "owners": ["s1"]})
    client = RemoteFrontier(lambda: RedisTransport(redis_server.url, "u"), "s1", prefetch=4, interval=0.2)
    manager = RemoteManager(client)
    client.start()
    try:
        deadline = time.monotonic() + 20
        while client.n_waiting < 2:
            assert time.monotonic() < deadline, "the feed entries did not arrive"
            time.sleep(0.05)
        requests = manager.get_next_requests(4)
        assert [r.url for r in requests] == [url] and manager.stats()["duplicate_entries"] == 1
        manager.page_crawled(Response(url, request=requests[0]))
        manager.end_report()
        while client.stats()["held"]:
            assert time.monotonic() < deadline, "an entry stayed held"
            time.sleep(0.05)
    finally:
        client.stop()
    assert t.feed_pending([0])[0][1] == 0  # both acknowledged at the broker
    (report,) = [codec.read_log(raw) for _, raw in t.read_log(10, 0)]
    assert [(item["u"], item["l"]) for item in report["i"]] == [(url, 6)]


def test_back_pressure_bounds_what_a_spider_holds_and_redis_keeps(tmp_path, redis_server):
    svc = service(tmp_path, redis_server)
    svc.core.add_seeds([OutgoingRequest(f"http://h{k}.test/") for k in range(200)])
    client = RemoteFrontier(lambda: RedisTransport(redis_server.url, "u"), "s1", prefetch=4, interval=0.2)
    client.start()
    try:
        steps(svc, lambda: client.n_waiting >= 4)
        for _ in range(50):
            svc.step()
        # The frontier keeps at most the spider's prefetch out; the spider has read them all.
        assert client.n_waiting == 4 and len(svc.book.open) == 4
        pending = RedisTransport(redis_server.url, "u").feed_pending(list(range(4)))
        assert sum(n for n, _ in pending.values()) == 4 and sum(p for _, p in pending.values()) == 4
        for p, entry_id, e in client.take(4):  # report them: more flow in
            client.done(p, entry_id, {"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 1})
        steps(svc, lambda: svc.core.counters.get("pages_crawled", 0) == 4 and client.n_waiting == 4)
        assert len(svc.book.open) == 4
    finally:
        client.stop()
        svc.core.close()


def test_a_spider_with_a_small_prefetch_finds_its_requests_among_many_partitions(tmp_path, redis_server):
    s = {"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False}
    svc = FrontierService(FrontierCore(LinkRankSettings(s), keep_leases=True), RedisTransport(redis_server.url, "u"),
                          partitions=64)
    svc.start()
    # The first host: partition 0, the last one a reader going round the partitions from 1 would reach.
    svc.core.add_seeds([OutgoingRequest(f"http://h0.test/{k}") for k in range(3)])
    reads = []

    class Recording(RedisTransport):
        def read_feed(self, spider, cursors, max_n, block_ms):
            reads.append(dict(cursors))
            return super().read_feed(spider, cursors, max_n, block_ms)

    client = RemoteFrontier(lambda: Recording(redis_server.url, "u"), "s1", prefetch=1, interval=0.2)
    client.start()
    try:
        steps(svc, lambda: client.n_waiting >= 1)
        new = [r for r in reads if set(r.values()) == {">"}]
        # One read of every owned partition (64), not a few partitions at a time (0.1 s each when empty).
        assert new and all(len(r) == 64 for r in new), [len(r) for r in new]
        assert len(svc.book.open) == 1  # no more than the prefetch out
    finally:
        client.stop()
        svc.core.close()

def serve_frontier(*args, timeout=60):
    import os
    import subprocess
    import sys

    exe = os.path.join(os.path.dirname(sys.executable), "frontera-linkrank")
    return subprocess.run([exe, "serve-frontier", *args], capture_output=True, text=True, timeout=timeout)


def test_serve_frontier_start_errors_are_one_line(tmp_path, redis_server):
    db = str(tmp_path / "db")
    cases = [
        (["--broker", redis_server.url, "--set", "LINKRANK_POLCY=fifo"], "LINKRANK_POLCY"),
        (["--broker", f"unix://{tmp_path}/nobody.sock"], "broker unix://"),
    ]
    for args, cause in cases:
        r = serve_frontier(db, *args)
        assert r.returncode == 2 and r.stdout == "", (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and cause in lines[0], (args, r.stderr)
    # The partition count is fixed for a crawl.
    svc = service(tmp_path, redis_server)  # 4 partitions, recorded at the first commit
    svc.core.next_requests(0)
    svc.core.close()
    r = serve_frontier(db, "--broker", redis_server.url, "--partitions", "8")
    assert r.returncode == 2 and "cannot change during a crawl" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def crawl_served(tmp_path, redis_server, pages, retries=30, prepare=None, during=None):
    """Seed ``pages`` pages, serve them with a FrontierService in a thread
    and fetch them with one spider until the crawl finishes; the frontier
    must stay up. ``prepare(svc)`` runs before serving, ``during(fetched)``
    after each take. Returns the service (closed) and the URLs fetched."""
    import threading

    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False}),
                        keep_leases=True)
    svc = FrontierService(core, RedisTransport(redis_server.url, "u", retries=retries), partitions=4)
    core.add_seeds([OutgoingRequest(f"http://h{k}.test/") for k in range(pages)])
    if prepare is not None:
        prepare(svc)
    client = RemoteFrontier(lambda: RedisTransport(redis_server.url, "u"), "s1", prefetch=8, interval=0.2)
    stop = threading.Event()
    runner = threading.Thread(target=svc.run, args=(stop,))
    runner.start()
    client.start()
    fetched = set()
    deadline = time.monotonic() + 60
    try:
        while not client.finished():
            assert time.monotonic() < deadline, "the crawl did not finish"
            assert runner.is_alive(), "the frontier stopped"
            for p, entry_id, e in client.take(8):
                fetched.add(e.url)
                client.done(p, entry_id, {"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 1})
            if during is not None:
                during(fetched)
            time.sleep(0.01)
    finally:
        client.stop()
        stop.set()
        runner.join(30)
        core.close()
    return svc, fetched


def test_the_frontier_waits_out_a_broker_outage(tmp_path, redis_server):
    """The broker away longer than the client's retries: the frontier's
    round fails, it waits, re-reads and republishes, and the crawl goes on."""
    down = []

    def outage(fetched):
        if len(fetched) >= 20 and not down:
            down.append(1)
            redis_server.kill9()
            time.sleep(2.5)
            redis_server.start()

    svc, fetched = crawl_served(tmp_path, redis_server, 60, retries=1, during=outage)
    assert down and svc.counters["broker_errors"] >= 1
    assert len(fetched) == 60 and svc.core.counters["pages_crawled"] == 60


def test_a_broker_that_forgot_its_scripts_mid_round_is_waited_out(tmp_path, redis_server):
    """A broker restarted between redis-py's loading of the scripts and a
    pipeline it re-sends after reconnecting answers NOSCRIPT: the frontier
    retries the round (which loads them again) instead of stopping."""
    from redis.exceptions import NoScriptError

    calls = []

    def forget_once(svc):
        publish = svc.t.publish

        def forgetful(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                svc.t.r.script_flush()
                raise NoScriptError("No matching script. Please use EVAL.")
            return publish(*args, **kwargs)

        svc.t.publish = forgetful

    svc, fetched = crawl_served(tmp_path, redis_server, 30, prepare=forget_once)
    assert len(calls) > 3 and svc.counters["broker_errors"] >= 1
    assert len(fetched) == 30 and svc.core.counters["pages_crawled"] == 30


def test_a_host_has_at_most_what_the_spiders_slots_hold(tmp_path, redis_server):
    svc = service(tmp_path, redis_server)
    svc.core.add_seeds([OutgoingRequest(f"http://one.test/{k}") for k in range(50)]
                       + [OutgoingRequest(f"http://two.test/{k}") for k in range(50)])
    t = RedisTransport(redis_server.url, "u")
    t.heartbeat("s1", {"prefetch": 32, "interval": 0.2, "host_cap": 3}, ttl=30)
    steps(svc, lambda: len(svc.book.open) > 0)
    for _ in range(20):
        svc.step()
    hosts = [svc.core.db.url(x.page).split("/")[2] for x in svc.book.open.values()]
    assert sorted(hosts) == ["one.test"] * 3 + ["two.test"] * 3  # not 16 each (the frontier's own cap)
    svc.core.close()


def test_a_failed_commit_stops_the_service_and_acknowledges_nothing_it_did_not_commit(tmp_path, redis_server):
    import threading

    from frontera_linkrank.storage.errors import WriteError

    svc = service(tmp_path, redis_server)
    t = RedisTransport(redis_server.url, "u")
    t.send(codec.seeds([["http://a.test/", fp("http://a.test/"), None]]))

    def failing_commit(*args, **kwargs):
        raise WriteError("disk full (simulated)")

    svc.core.db.commit = failing_commit
    svc.run(threading.Event())  # returns by itself: the frontier stopped
    assert "disk full" in str(svc.error)
    assert t.get("state")["state"] == "stopped"
    assert t.backlog()["log_pending"] == 1  # the seeds entry: read, not applied, not acknowledged
    svc.core.db.close()


def test_frontier_status_calls_a_silent_frontier_dead_and_shows_each_spider(tmp_path, redis_server):
    from frontera_linkrank.cli.frontier_status import status, text

    t = RedisTransport(redis_server.url, "u")
    t.put("state", {"state": "running", "time": time.time() - 900, "stats": {"pages_crawled": 5},
                    "spiders": {"s1": {"partitions": 3, "hosts": 7, "fetched": 40}}})
    t.heartbeat("s1", {"prefetch": 4, "interval": 1.0, "machine": "m1", "pid": 7, "fetched": 41, "rate": 2.5},
                ttl=30)
    t.put("assignment", {"version": 1, "owners": ["s1"] * 3})
    lines = text(status(redis_server.url, "u"))
    assert lines[0] == "crawl u: dead (no update for 15 min; it said running)", lines
    spider = next(x for x in lines if x.startswith("  s1:"))
    assert "3 partitions, 7 hosts, 41 pages fetched, 2.5 pages/s, m1 pid 7" in spider, spider
    t.put("frontier", {"host": "m0", "pid": 1, "since": 0.0, "path": "/db", "token": "x"})  # its lock: alive
    assert status(redis_server.url, "u")["state"] == "running"
