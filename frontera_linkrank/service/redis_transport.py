"""The transport over Redis Streams (Redis >= 6.2 or Valkey).

Keys of crawl ``C`` (the braces are a Redis Cluster hash tag: one crawl's
keys live on one node, so a report and its acknowledgements can go in one
MULTI/EXEC):

========================  ===========================================================
``lr:{C}:feed:<p>``       stream, group ``spiders``; entry id ``<sequence>-1``
``lr:{C}:log``            stream, group ``frontier``; reports and seeds
``lr:{C}:spiders``        set of spider ids
``lr:{C}:hb:<id>``        the spider's heartbeat (msgpack info), expires
``lr:{C}:assignment``     msgpack: partition owners (written by the frontier)
``lr:{C}:state``          msgpack: frontier state and stats
========================  ===========================================================

An explicit entry id per publish sequence makes republishing idempotent
(Redis refuses an id not above the stream's last one). A spider's pending
entries are the group's pending list (PEL): they survive the spider, and
``XAUTOCLAIM`` hands them to another. Clients reconnect with backoff when
the server restarts (and wait while it loads its append-only file).
"""

from __future__ import annotations

import socket
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import BusyLoadingError, ResponseError
from redis.retry import Retry

from . import codec
from .transport import FeedItem, Transport

FEED_GROUP = b"spiders"
LOG_GROUP = b"frontier"
FRONTIER_CONSUMER = b"frontier"
FIELD = b"m"

# Adds (id, payload) pairs to the stream KEYS[1] under the field 'm'
# (FIELD); an id not above the stream's last is skipped (a republished
# entry the broker has), any other error is raised. Returns the number of
# entries added.
XADD_MANY = """
local n = 0
for i = 1, #ARGV, 2 do
  local res = redis.pcall('XADD', KEYS[1], ARGV[i], 'm', ARGV[i + 1])
  if type(res) == 'table' and res.err then
    if not string.find(res.err, 'equal or smaller', 1, true) then
      return redis.error_reply(res.err)
    end
  else
    n = n + 1
  end
end
return n
"""


def connect(url: str, timeout: float = 10.0, retries: int = 30) -> redis.Redis:
    """A client for ``url`` that retries with backoff (``retries`` times,
    about 25 s at the default) through a restart of the server."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError, BusyLoadingError, ConnectionResetError,
                        socket.timeout],
        health_check_interval=30,
    )


class RedisTransport(Transport):
    """:class:`~.transport.Transport` over the Redis server at ``url``.

    Parameters
    ----------
    url : str
        ``redis://HOST:PORT/DB``, ``rediss://...`` (TLS) or ``unix:///path?db=N``.
    crawl : str
        Name of the crawl: the key prefix ``lr:{crawl}:``.
    retries : int
        Attempts of a command while the server cannot be reached.
    """

    unavailable = (redis.ConnectionError, redis.TimeoutError, BusyLoadingError, ConnectionError, TimeoutError)

    def __init__(self, url: str, crawl: str = "default", retries: int = 30) -> None:
        self.url = url
        self.crawl = crawl
        self.prefix = f"lr:{{{crawl}}}:"
        self.r = connect(url, retries=retries)
        self.log_key = self._k("log")
        self._xadd_many = self.r.register_script(XADD_MANY)

    def _k(self, name: str) -> bytes:
        return (self.prefix + name).encode()

    def feed_key(self, partition: int) -> bytes:
        """The stream of feed partition ``partition``."""
        return self._k(f"feed:{partition}")

    # -- set-up and identity ----------------------------------------------------------
    def setup(self, partitions: int) -> None:
        groups = [(self.log_key, LOG_GROUP)] + [(self.feed_key(p), FEED_GROUP) for p in range(partitions)]
        pipe = self.r.pipeline(transaction=False)
        for key, group in groups:
            # From id 0: entries republished into a stream the broker lost are delivered.
            pipe.xgroup_create(key, group, id="0", mkstream=True)
        for res in pipe.execute(raise_on_error=False):
            if isinstance(res, Exception) and "BUSYGROUP" not in str(res):
                raise res

    def epoch(self) -> str:
        return str(self.r.info("server")["run_id"])

    # -- the feed -----------------------------------------------------------------------
    def publish(self, entries: list[tuple[int, int, bytes]]) -> int:
        if not entries:
            return 0
        # One script call per partition instead of one XADD each: a client
        # packs a command in ~6 us of Python, so per-entry commands cost the
        # frontier more than the leasing itself (measured: 1.2 us an entry).
        by_p: dict[int, list] = {}
        for p, seq, payload in entries:
            by_p.setdefault(p, []).extend((b"%d-1" % seq, payload))
        pipe = self.r.pipeline(transaction=False)
        for p, args in by_p.items():
            self._xadd_many(keys=[self.feed_key(p)], args=args, client=pipe)
        return sum(pipe.execute())

    def published_top(self, partition: int) -> int:
        try:
            info = self.r.xinfo_stream(self.feed_key(partition))
        except ResponseError:  # no such key: the broker lost it (or never had it)
            return 0
        last = info.get("last-generated-id") or b"0-0"
        return int(last.split(b"-")[0] if isinstance(last, bytes) else str(last).split("-")[0])

    def trim_feed(self, partition: int, below: int) -> None:
        self.r.xtrim(self.feed_key(partition), minid=f"{below}-0", approximate=False)

    def read_feed(self, spider: str, cursors: dict[int, str], max_n: int, block_ms: int) -> list[FeedItem]:
        if not cursors:
            return []
        streams = {self.feed_key(p): c for p, c in cursors.items()}
        by_key = {self.feed_key(p): p for p in cursors}
        try:
            got = self.r.xreadgroup(FEED_GROUP, spider, streams, count=max_n, block=block_ms or None)
        except ResponseError as e:
            if "NOGROUP" in str(e):  # the broker lost the group: the frontier recreates it
                return []
            raise
        out: list[FeedItem] = []
        for key, entries in got or ():
            p = by_key[key]
            for entry_id, fields in entries:
                out.append((p, entry_id.decode(), (fields or {}).get(FIELD)))
        return out

    def take_over(self, spider: str, partition: int) -> int:
        key, n, start = self.feed_key(partition), 0, "-"
        me = spider.encode()
        while True:
            try:
                pending = self.r.xpending_range(key, FEED_GROUP, min=start, max="+", count=1000)
            except ResponseError as e:
                if "NOGROUP" in str(e):
                    return n
                raise
            ids = [x["message_id"] for x in pending if x["consumer"] != me]
            if ids:
                n += len(self.r.xclaim(key, FEED_GROUP, spider, min_idle_time=0, message_ids=ids, justid=True))
            if len(pending) < 1000:
                return n
            start = "(" + pending[-1]["message_id"].decode()

    # -- the log ------------------------------------------------------------------------
    def report(self, spider: str, payload: bytes, acks: list[tuple[int, str]]) -> str:
        by_p: dict[int, list[str]] = {}
        for p, entry_id in acks:
            by_p.setdefault(p, []).append(entry_id)
        pipe = self.r.pipeline(transaction=True)
        pipe.xadd(self.log_key, {FIELD: payload})
        for p, ids in by_p.items():
            pipe.xack(self.feed_key(p), FEED_GROUP, *ids)
        return pipe.execute()[0].decode()

    def send(self, payload: bytes) -> str:
        return self.r.xadd(self.log_key, {FIELD: payload}).decode()

    def read_log(self, max_n: int, block_ms: int, pending: bool = False) -> list[tuple[str, bytes | None]]:
        cursor = "0" if pending else ">"
        try:
            got = self.r.xreadgroup(LOG_GROUP, FRONTIER_CONSUMER, {self.log_key: cursor}, count=max_n,
                                    block=None if pending or not block_ms else block_ms)
        except ResponseError as e:
            if "NOGROUP" in str(e):
                return []
            raise
        return [(i.decode(), (f or {}).get(FIELD)) for _, entries in got or () for i, f in entries]

    def ack_log(self, offsets: list[str]) -> None:
        if offsets:
            self.r.xack(self.log_key, LOG_GROUP, *offsets)

    def trim_log(self, through: str) -> None:
        self.r.xtrim(self.log_key, minid=through, approximate=False)

    # -- membership and control ------------------------------------------------------------
    def heartbeat(self, spider: str, info: dict[str, Any], ttl: float) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.set(self._k(f"hb:{spider}"), codec.pack({"v": codec.SCHEMA, **info}), px=max(1, int(ttl * 1000)))
        pipe.sadd(self._k("spiders"), spider)
        pipe.execute()

    def spiders(self) -> dict[str, dict[str, Any] | None]:
        ids = sorted(i.decode() for i in self.r.smembers(self._k("spiders")))
        if not ids:
            return {}
        raws = self.r.mget([self._k(f"hb:{i}") for i in ids])
        out: dict[str, dict[str, Any] | None] = {}
        for i, raw in zip(ids, raws):
            try:
                out[i] = codec.unpack(raw) if raw is not None else None
            except codec.CodecError:
                out[i] = None  # not a spider of this schema: treated as absent
        return out

    def forget_spider(self, spider: str) -> None:
        self.r.srem(self._k("spiders"), spider)

    def put(self, name: str, value: dict[str, Any]) -> None:
        self.r.set(self._k(name), codec.pack({"v": codec.SCHEMA, **value}))

    def get(self, name: str) -> dict[str, Any] | None:
        raw = self.r.get(self._k(name))
        return None if raw is None else codec.unpack(raw)

    def backlog(self) -> dict[str, Any]:
        out: dict[str, Any] = {"log_length": 0, "log_pending": 0}
        try:
            out["log_length"] = self.r.xlen(self.log_key)
            for g in self.r.xinfo_groups(self.log_key):
                out["log_pending"] = g.get("pending", 0)
                out["log_lag"] = g.get("lag")
        except ResponseError:
            pass
        out["used_memory"] = self.r.info("memory").get("used_memory")
        return out

    def feed_pending(self, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """``partition -> (entries in the stream, pending entries)``."""
        pipe = self.r.pipeline(transaction=False)
        for p in partitions:
            pipe.xlen(self.feed_key(p))
            pipe.xpending(self.feed_key(p), FEED_GROUP)
        res = pipe.execute(raise_on_error=False)
        out = {}
        for k, p in enumerate(partitions):
            n, pend = res[2 * k], res[2 * k + 1]
            out[p] = (n if isinstance(n, int) else 0, pend.get("pending", 0) if isinstance(pend, dict) else 0)
        return out

    def close(self) -> None:
        self.r.close()
