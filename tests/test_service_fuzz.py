"""Fuzzing the broker: thousands of random and mutated msgpack entries in
every key a shared frontier or its spiders read, while a crawl runs.

``serve-frontier`` (a subprocess) serves two fake spiders
(tests/shared_frontier.py) over a real redis-server; meanwhile a bounded
loop writes entries made from valid messages mutated field by field (wrong
types, out-of-range numbers, NaN, missing and extra fields, nesting) and
byte by byte (flips, cuts, junk appended), and plain random values, into
the log, the feed partitions (with ids up to the largest there is), the
heartbeats, the set of spiders and the control records. The frontier must
never exit, the crawl must finish with every reachable page, and nothing
malformed may reach the page database: ``page_db_check`` is clean (every
key is its URL's, every stored request well formed) and every page is one
of the web's.
"""

import math
import random
import time

import pytest
import redis

from frontera_linkrank.service import codec
from frontera_linkrank.service.redis_transport import RedisTransport
from shared_frontier import FakeSpider, FakeWeb, ServeFrontier, check_db, fp, kill_all, run_until_finished

CRAWL = "fz"
ENTRIES = 3000  # written in all
BURST = 60  # written at each check of the crawl (every 50 ms)
SEED = 20240611

NASTY = [None, True, False, 0, -1, 1, 2**31, 2**63 - 1, -(2**63), 2**64 - 1, 0.5, -0.0, math.nan, math.inf,
         -math.inf, "", "x" * 300, "http://h0.web.test/p1", "file:///etc/hostname", "javascript:alert(1)",
         "http://[::1", b"", b"\xff" * 40, b"0" * 40, b"g" * 40, [], {}, [[[[]]]], {"k": {"k": {}}}, [None] * 5,
         {b"scrapy_meta": {"proxy": "http://127.0.0.1:9"}}, {"m": b"POST", "h": 5}, "s1", "\u2603" * 10]  # fmt: skip


def templates(web):
    url = web.urls[1]
    link = [url, fp(url), None]
    parts_link = [web.urls[2], fp(web.urls[2]), {"m": b"POST", "h": {b"X": [b"1"]}, "c": {}, "b": b"q", "x": {}}]
    fetched = {"k": "f", "l": 3, "f": fp(url), "u": url, "s": 200, "c": [web.urls[3]], "rr": [301], "sc": 0.5,
               "h": 12345, "hd": {b"content-type": [b"text/html"]}, "ln": [link, parts_link]}
    failed = {"k": "e", "l": 4, "f": fp(url), "u": url, "e": "timeout", "p": False, "rt": True}
    return {
        "log": [{"v": 1, "t": "r", "s": "s1", "i": [fetched, failed]}, {"v": 1, "t": "s", "i": [link, parts_link]},
                {"v": 1, "t": "r", "s": "fuzzer", "i": [fetched]}],
        "feed": [{"v": 1, "t": "f", "l": 7, "f": fp(url), "u": url, "d": 2, "r": parts_link[2]}],
        "hb": [{"v": 1, "t": "h", "prefetch": 8, "interval": 0.3, "host_cap": 4}],
        "record": [{"v": 1, "t": "a", "version": 3, "owners": ["s1"] * 8, "moving": {1: "s2"}},
                   {"v": 1, "t": "x", "state": "running", "applied": "1-0", "stats": {"pages": 3}}],
    }


def mutate(rng, value, depth=0):
    """``value`` with some of its parts replaced, removed, added or nested."""
    if rng.random() < 0.15 or depth > 4:
        return rng.choice(NASTY)
    if isinstance(value, dict):
        out = {k: mutate(rng, v, depth + 1) if rng.random() < 0.4 else v for k, v in value.items()}
        if out and rng.random() < 0.2:
            del out[rng.choice(list(out))]
        if rng.random() < 0.1:
            out[rng.choice(["zz", b"zz", 7, "v", "t", "i"])] = rng.choice(NASTY)
        return out
    if isinstance(value, list):
        out = [mutate(rng, v, depth + 1) if rng.random() < 0.4 else v for v in value]
        if rng.random() < 0.1:
            out = out * rng.randint(2, 20)
        return out
    return value


def garble(rng, raw):
    """Byte-level damage: flips, a cut, junk after."""
    b = bytearray(raw)
    for _ in range(rng.randint(0, 3)):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    if b and rng.random() < 0.3:
        del b[rng.randrange(len(b)) :]
    if rng.random() < 0.2:
        b += rng.randbytes(rng.randint(1, 20))
    return bytes(b)


def entry(rng, kind, tmpl):
    choice = rng.random()
    if choice < 0.1:
        return rng.randbytes(rng.randint(0, 64))
    if choice < 0.2:
        return codec.pack(rng.choice(NASTY))
    raw = codec.pack(mutate(rng, rng.choice(tmpl[kind])))
    return garble(rng, raw) if rng.random() < 0.3 else raw


class Fuzzer:
    """Writes :data:`BURST` entries at each call, :data:`ENTRIES` in all."""

    def __init__(self, url, web):
        self.t = RedisTransport(url, CRAWL)
        self.rng = random.Random(SEED)
        self.tmpl = templates(web)
        self.written = 0

    def __call__(self):
        rng, t = self.rng, self.t
        for _ in range(min(BURST, ENTRIES - self.written)):
            self.written += 1
            where = rng.random()
            if where < 0.55:
                t.r.xadd(t.log_key, {b"m": entry(rng, "log", self.tmpl)})
            elif where < 0.75:
                ms = rng.choice([rng.randint(1, 50), rng.randint(1, 2**40), 2**64 - 1])
                try:
                    t.r.xadd(t.feed_key(rng.randrange(8)), {b"m": entry(rng, "feed", self.tmpl)},
                             id=f"{ms}-{rng.randint(0, 2**64 - 1) if ms == 2**64 - 1 else rng.randint(2, 9)}")
                except redis.ResponseError:  # an id at or below the top: refused by Redis itself
                    pass
            elif where < 0.85:
                sid = rng.choice(["s1", "s2", "ghost", "x" * 300])
                t.r.set(t._k(f"hb:{sid}"), entry(rng, "hb", self.tmpl), px=500)
                t.r.sadd(t._k("spiders"), rng.choice([sid.encode(), rng.randbytes(4), b"\xff\xfe", b""]))
            else:
                t.r.set(t._k(rng.choice(["assignment", "state", "run", "frontier"])),
                        entry(rng, "record", self.tmpl), keepttl=True)


@pytest.fixture(autouse=True)
def _no_frontier_left():
    yield
    kill_all()


def test_the_frontier_survives_fuzzed_broker_entries_and_the_crawl_finishes(tmp_path, redis_server):
    web = FakeWeb(tmp_path / "web.npz")
    # The default lease timeout (an hour): the crawl must finish without
    # waiting for a lease to expire, though the fuzzer's heartbeats and
    # assignment records make spiders read entries the frontier published
    # for another.
    frontier = ServeFrontier(tmp_path / "db", redis_server.url, tmp_path, CRAWL)
    fuzz = Fuzzer(redis_server.url, web)
    deadline = time.monotonic() + 120

    def check():
        assert frontier.alive(), frontier.text()[-3000:]
        fuzz()

    spiders = [FakeSpider(redis_server.url, CRAWL, sid, web) for sid in ("s1", "s2")]
    try:
        while fuzz.written < ENTRIES // 3:  # a third before the crawl starts
            check()
        spiders[0].start(seeds=[web.seed])
        spiders[1].start()
        run_until_finished(spiders, deadline, check)
        while fuzz.written < ENTRIES:
            check()
        time.sleep(1.0)
        assert frontier.alive(), frontier.text()[-3000:]
        assert frontier.stop() == 0, frontier.text()[-3000:]
    finally:
        frontier.kill9()
    text = frontier.text()
    assert "Traceback" not in text and "items_failed" not in text, text[-3000:]
    urls, crawled = check_db(tmp_path / "db", web.reachable())
    assert urls <= set(web.urls), sorted(urls - set(web.urls))[:5]  # nothing the fuzzer made up
    assert fuzz.written == ENTRIES
