"""The transport over Redis Streams (Redis >= 6.2 or Valkey).

Keys of crawl ``C`` (the braces are a Redis Cluster hash tag: one crawl's
keys live on one node, so a report and its acknowledgements can go in one
MULTI/EXEC):

========================  ===========================================================
``lr:{C}:feed:<p>``       stream, group ``spiders``; entry id ``<sequence>-1``
``lr:{C}:log``            stream, group ``frontier``; reports and seeds
``lr:{C}:rejected``       stream: log entries the frontier refused (capped), to inspect
``lr:{C}:spiders``        set of spider ids
``lr:{C}:hb:<id>``        the spider's heartbeat (msgpack info), expires
``lr:{C}:assignment``     msgpack: partition owners (written by the frontier)
``lr:{C}:state``          msgpack: frontier state and stats
``lr:{C}:run``            msgpack: the run of the page database that owns the crawl
``lr:{C}:frontier``       msgpack: the frontier lock (host, pid, since), expires
========================  ===========================================================

An explicit entry id per publish sequence makes republishing idempotent
(Redis refuses an id not above the stream's last one); the publish script
checks every id it could not add (the same entry already there, or not)
and removes entries above the frontier's own sequence, which only another
writer can have added. A spider's pending entries are the group's pending
list (PEL): they survive the spider, and ``XCLAIM`` hands them to another.
Clients reconnect with backoff when the server restarts (and wait while it
loads its append-only file).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import BusyLoadingError, NoScriptError, ResponseError
from redis.retry import Retry

from . import codec
from .redis_scripts import PUBLISH, RELEASE, TICK
from .transport import FeedItem, Transport, offset_key

FEED_GROUP = b"spiders"
LOG_GROUP = b"frontier"
FRONTIER_CONSUMER = b"frontier"
FIELD = b"m"
REJECTED_MAX = 1000  # refused log entries kept for inspection
RECORD_KINDS = {"assignment": "a", "state": "x", "run": "run", "frontier": "lock"}

class BrokerError(ConnectionError):
    """The broker cannot be used (unreachable, a wrong password): the message says which, password masked."""


def mask(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=``
    parameter) replaced by ``***``: what logs and errors show.

    >>> mask("redis://:s3cret@h:6379/0"), mask("rediss://u:p@h/1"), mask("unix:///r.sock?db=0&password=x")
    ('redis://:***@h:6379/0', 'rediss://u:***@h/1', 'unix:///r.sock?db=0&password=***')
    >>> mask("redis://h:6379/0")
    'redis://h:6379/0'
    """
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            name, colon, _ = user.partition(":")
            netloc = f"{name}{':***' if colon else ''}@{host}"
        query = parts.query
        if "password" in query:
            query = urlencode([(k, "***" if k == "password" else v) for k, v in parse_qsl(query)], safe="*/")
        return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
    except ValueError:
        return url.split("://", 1)[0] + "://(unparsable URL)"


def connect(url: str, timeout: float = 10.0, retries: int = 30) -> redis.Redis:
    """A client for ``url`` that retries with backoff (``retries`` times,
    about 25 s at the default) through a restart of the server."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        retry_on_error=[redis.TimeoutError, BusyLoadingError, ConnectionResetError, socket.timeout],
        health_check_interval=30,
    )


def check_broker(url: str, timeout: float = 5.0) -> None:
    """Connect to ``url`` once: raises :class:`BrokerError` (one line, the
    password masked) if it is unreachable or refuses the credentials."""
    try:
        r = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    except (ValueError, TypeError) as e:
        raise BrokerError(f"broker {mask(url)}: not a broker URL ({e})") from None
    try:
        r.ping()
    except redis.AuthenticationError as e:
        raise BrokerError(f"broker {mask(url)}: authentication failed ({e}): check the password in the URL") from None
    except redis.ResponseError as e:
        if "NOAUTH" in str(e) or "WRONGPASS" in str(e) or "NOPERM" in str(e):
            raise BrokerError(f"broker {mask(url)}: authentication failed ({e})") from None
        raise BrokerError(f"broker {mask(url)}: {e}") from None
    except (redis.RedisError, OSError) as e:
        raise BrokerError(f"broker {mask(url)}: unreachable ({e})") from None
    finally:
        r.close()


@dataclass
class Published:
    """What a publish did: entries added, found there already, foreign
    entries removed, partitions repaired, and the ``(partition, sequence)``
    pairs that could not be placed (their id is taken, or below the top)."""

    added: int = 0
    present: int = 0
    removed: int = 0
    repaired: list[int] = field(default_factory=list)
    conflicts: list[tuple[int, int]] = field(default_factory=list)


class RedisTransport(Transport):
    """:class:`~.transport.Transport` over the Redis server at ``url``.

    Parameters
    ----------
    url : str
        ``redis://[:PASSWORD@]HOST:PORT/DB``, ``rediss://...`` (TLS) or ``unix:///path?db=N``.
    crawl : str
        Name of the crawl: the key prefix ``lr:{crawl}:``.
    retries : int
        Attempts of a command while the server cannot be reached.
    secret : str or None
        ``LINKRANK_SECRET``: control records are sealed with it and records
        that are not are ignored.
    timeout : float
        Socket timeout in seconds.
    """

    # NoScriptError: the broker restarted between redis-py's loading of the
    # scripts and a pipeline it re-sent after reconnecting; the next round
    # loads them again.
    unavailable = (redis.ConnectionError, redis.TimeoutError, BusyLoadingError, NoScriptError, ConnectionError,
                   TimeoutError)

    def __init__(self, url: str, crawl: str = "default", retries: int = 30, secret: str | None = None,
                 timeout: float = 10.0) -> None:
        self.url = url
        self.crawl = crawl
        self.key = codec.crawl_key(secret, crawl)
        self.prefix = f"lr:{{{crawl}}}:"
        self.r = connect(url, timeout=timeout, retries=retries)
        self.log_key = self._k("log")
        self.refused_records = 0  # control records that did not decode (or were not sealed)
        self.refused_spiders: set[str] = set()  # spiders whose heartbeat did not decode
        self._publish = self.r.register_script(PUBLISH)
        self._tick = self.r.register_script(TICK)
        self._release = self.r.register_script(RELEASE)

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

    def clear_feed(self, partitions: int) -> None:
        """Delete the feed streams ``0 .. partitions - 1`` (a new run starts on an empty feed)."""
        self.r.delete(*[self.feed_key(p) for p in range(partitions)])

    def reset(self) -> int:
        """Delete every key of this crawl; returns how many."""
        n = 0
        pattern = self.prefix.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*").replace("?", "\\?") + "*"
        for key in self.r.scan_iter(match=pattern, count=1000):
            n += self.r.delete(key)
        return n

    # -- the feed -----------------------------------------------------------------------
    def publish(self, entries: list[tuple[int, int, bytes]], top: int = 0) -> Published:
        out = Published()
        if not entries:
            return out
        # One script call per partition instead of one XADD each: a client
        # packs a command in ~6 us of Python, so per-entry commands cost the
        # frontier more than the leasing itself.
        by_p: dict[int, list] = {}
        for p, seq, payload in entries:
            by_p.setdefault(p, []).extend((seq, payload))
        top = max([top] + [seq for _, seq, _ in entries])
        pipe = self.r.pipeline(transaction=False)
        for p, args in by_p.items():
            self._publish(keys=[self.feed_key(p)], args=[top, *args], client=pipe)
        for p, res in zip(by_p, pipe.execute()):
            out.added += int(res[0])
            out.present += int(res[1])
            out.removed += int(res[2])
            if int(res[3]):
                out.repaired.append(p)
            out.conflicts.extend((p, int(s)) for s in res[4:])
        return out

    def published_top(self, partition: int) -> int:
        try:
            info = self.r.xinfo_stream(self.feed_key(partition))
        except ResponseError:  # no such key (the broker lost it, or never had it), or not a stream
            return 0
        last = info.get("last-generated-id") or b"0-0"
        return int(last.split(b"-")[0] if isinstance(last, bytes) else str(last).split("-")[0])

    def trim_feed(self, partition: int, below: int) -> None:
        try:
            self.r.xtrim(self.feed_key(partition), minid=f"{below}-0", approximate=False)
        except ResponseError:  # not a stream (the next publish replaces it)
            pass

    def consumed(self, entries: list[tuple[int, int]]) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        by_p: dict[int, list[int]] = {}
        for p, seq in entries:
            by_p.setdefault(p, []).append(seq)
        for p, seqs in by_p.items():
            key = self.feed_key(p)
            try:
                groups = self.r.xinfo_groups(key)
            except ResponseError:  # no stream: the broker lost it, and the republish puts it back
                continue
            delivered = next((g["last-delivered-id"] for g in groups if g["name"] == FEED_GROUP), None)
            if delivered is None:
                continue
            for seq in seqs:
                if (seq, 1) > offset_key(delivered):
                    continue  # not read yet
                if not self.r.xpending_range(key, FEED_GROUP, min=f"{seq}-1", max=f"{seq}-1", count=1):
                    out.add((p, seq))
        return out

    def read_feed(self, spider: str, cursors: dict[int, str], max_n: int, block_ms: int) -> list[FeedItem]:
        if not cursors:
            return []
        streams = {self.feed_key(p): c for p, c in cursors.items()}
        by_key = {self.feed_key(p): p for p in cursors}
        try:
            got = self.r.xreadgroup(FEED_GROUP, spider, streams, count=max_n, block=block_ms or None)
        except ResponseError as e:
            if "NOGROUP" in str(e) or "WRONGTYPE" in str(e) or "UNBLOCKED" in str(e):
                return []  # the frontier sets the partition up again
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
                if "NOGROUP" in str(e) or "WRONGTYPE" in str(e):
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
        return pipe.execute(raise_on_error=False)[0].decode()

    def send(self, payload: bytes) -> str:
        return self.r.xadd(self.log_key, {FIELD: payload}).decode()

    def read_log(self, max_n: int, block_ms: int, pending: bool = False) -> list[tuple[str, bytes | None]]:
        cursor = "0" if pending else ">"
        try:
            got = self.r.xreadgroup(LOG_GROUP, FRONTIER_CONSUMER, {self.log_key: cursor}, count=max_n,
                                    block=None if pending or not block_ms else block_ms)
        except ResponseError as e:
            # The broker lost the group, or the stream went while we waited
            # on it (FLUSHDB, a failover): set it up again.
            if "NOGROUP" in str(e) or "UNBLOCKED" in str(e):
                try:
                    self.r.xgroup_create(self.log_key, LOG_GROUP, id="0", mkstream=True)
                except ResponseError as again:
                    if "BUSYGROUP" not in str(again):
                        raise
                return []
            raise
        return [(i.decode(), (f or {}).get(FIELD)) for _, entries in got or () for i, f in entries]

    def ack_log(self, offsets: list[str]) -> None:
        if offsets:
            self.r.xack(self.log_key, LOG_GROUP, *offsets)

    def trim_log(self, through: str) -> None:
        self.r.xtrim(self.log_key, minid=through, approximate=False)

    def set_aside(self, offset: str, raw: bytes | None, reason: str) -> None:
        """Keep a refused log entry in ``lr:{C}:rejected`` (the last
        :data:`REJECTED_MAX`), with the reason and its offset."""
        self.r.xadd(self._k("rejected"), {b"offset": offset, b"reason": reason[:500], FIELD: raw or b""},
                    maxlen=REJECTED_MAX, approximate=True)

    # -- membership and control ------------------------------------------------------------
    def heartbeat(self, spider: str, info: dict[str, Any], ttl: float) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.set(self._k(f"hb:{spider}"), codec.record("h", info, self.key), px=max(1, int(ttl * 1000)))
        pipe.sadd(self._k("spiders"), spider)
        pipe.execute()

    def spiders(self) -> dict[str, dict[str, Any] | None]:
        members = self.r.smembers(self._k("spiders"))
        ids = []
        for raw in members:
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                name = None
            if codec.is_name(name):
                ids.append(name)
            else:  # not a spider id (another writer's): the crawl's keys are the frontier's
                self.refused_records += 1
                self.r.srem(self._k("spiders"), raw)
        ids.sort()
        if not ids:
            return {}
        raws = self.r.mget([self._k(f"hb:{i}") for i in ids])
        out: dict[str, dict[str, Any] | None] = {}
        for i, raw in zip(ids, raws):
            try:
                out[i] = codec.unpack(raw, "h", self.key) if raw is not None else None
            except codec.CodecError:
                self.refused_records += 1
                self.refused_spiders.add(i)
                out[i] = None  # not a heartbeat of this schema (or not signed): treated as absent
        return out

    def forget_spider(self, spider: str) -> None:
        self.r.srem(self._k("spiders"), spider)

    def put(self, name: str, value: dict[str, Any]) -> None:
        self.r.set(self._k(name), codec.record(RECORD_KINDS[name], value, self.key))

    def get(self, name: str) -> dict[str, Any] | None:
        raw = self.r.get(self._k(name))
        if raw is None:
            return None
        try:
            return codec.unpack(raw, RECORD_KINDS[name], self.key)
        except codec.CodecError:
            self.refused_records += 1
            return None

    def get_raw(self, name: str) -> bytes | None:
        """The stored bytes of control record ``name``."""
        return self.r.get(self._k(name))

    def delete_record(self, name: str) -> None:
        """Delete control record ``name``."""
        self.r.delete(self._k(name))

    def put_raw(self, name: str, raw: bytes) -> None:
        """Store the bytes ``raw`` (a record made before) as control record ``name``."""
        self.r.set(self._k(name), raw)

    # -- the frontier lock and the crawl's run -----------------------------------------------
    def claim(self, lock: bytes, ttl: float, run: bytes | None) -> tuple[bool, bool]:
        """Take the frontier lock (if free) and the run record (if absent
        and ``run`` is given): ``(lock is ours, run record is ours)``."""
        got = self.r.set(self._k("frontier"), lock, nx=True, px=int(ttl * 1000))
        mine = bool(got) or self.r.get(self._k("frontier")) == lock
        if mine and run is not None:
            self.r.set(self._k("run"), run, nx=True)
        return mine, run is not None and self.r.get(self._k("run")) == run

    def tick(self, lock: bytes, ttl: float, run: bytes) -> tuple[int, int]:
        """Extend the frontier lock; see :data:`.redis_scripts.TICK` for the codes."""
        res = self._tick(keys=[self._k("frontier"), self._k("run")], args=[lock, int(ttl * 1000), run])
        return int(res[0]), int(res[1])

    def release(self, lock: bytes) -> None:
        """Give the frontier lock up if it is still ``lock``."""
        self._release(keys=[self._k("frontier")], args=[lock])

    def force_lock(self, lock: bytes, ttl: float) -> None:
        """Take the frontier lock over (its holder is known to be gone)."""
        self.r.set(self._k("frontier"), lock, px=int(ttl * 1000))

    # -- status ------------------------------------------------------------------------------------
    def backlog(self) -> dict[str, Any]:
        out: dict[str, Any] = {"log_length": 0, "log_pending": 0}
        try:
            out["log_length"] = self.r.xlen(self.log_key)
            for g in self.r.xinfo_groups(self.log_key):
                out["log_pending"] = g.get("pending", 0)
                out["log_lag"] = g.get("lag")
        except ResponseError:
            pass
        try:
            out["rejected"] = self.r.xlen(self._k("rejected"))
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
