"""``LinkRankScheduler`` against a shared frontier (``LINKRANK_FRONTIER_URL``).

With ``LINKRANK_FRONTIER_URL = "redis://HOST:PORT/DB"`` the scheduler keeps
no page database: :class:`RemoteScheduler` (chosen by
``LinkRankScheduler.from_crawler``) takes its requests from a
``frontera-linkrank serve-frontier`` process through the broker, and sends
it seeds (the spider's ``start()`` and ``LINKRANK_SEEDS_FILE``), fetched
pages and their links. Everything else is the scheduler as in a
single-process crawl: the per-slot buffer, politeness, the spider
middleware, the outcome of each request reported exactly once.

The spider does the per-link work: canonical fingerprints, the content
hash of each page (the body is not sent). The frontier hands a spider only
requests for the hosts it owns, so a host is fetched by one spider at a
time. When the frontier reports the crawl finished (nothing queued, nothing
leased, everything applied) the spider closes with reason ``finished``,
unless ``LINKRANK_CLOSE_WHEN_FINISHED = False``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from twisted.internet import task

from ..core.codec import RETRIED_KEY
from ..core.codec import OutgoingRequest as FRequest  # (Frontera is not imported on the Scrapy path)
from ..recrawl.content import content_hash as normalised_hash
from ..service import codec
from ..service.client import RemoteFrontier
from ..service.redis_transport import RedisTransport
from ..storage.urls import RejectedURL, fingerprint
from .config import slot_capacity
from .scheduler import LinkRankScheduler

if TYPE_CHECKING:
    from frontera.core.models import Response as FResponse
    from scrapy.http import Response

logger = logging.getLogger(__name__)

KEPT_HEADERS = (b"content-type", b"etag", b"last-modified")  # what the frontier reads of a response's headers


def _fp(url: str) -> bytes | None:
    try:
        return fingerprint(url).hex().encode("ascii")
    except RejectedURL:
        return None


class RemoteManager:
    """The part of Frontera's ``FrontierManager`` the scheduler uses, over a
    :class:`~frontera_linkrank.service.client.RemoteFrontier`."""

    def __init__(self, client: RemoteFrontier, close_when_finished: bool = True, secret: str | None = None) -> None:
        self.client = client
        self.key = secret.encode("utf-8") if secret else None
        self.close_when_finished = close_when_finished
        self.backend = self  # the scheduler reads stats() of its backend
        self.held: dict[bytes, tuple[int, str, int]] = {}  # fingerprint -> (partition, entry id, lease)
        self._current: tuple[int, str, dict] | None = None
        self.unmatched = 0
        self.unsigned = 0  # requests whose parts failed the signature check

    # -- what the scheduler calls ------------------------------------------------------------
    def add_seeds(self, seeds: list[FRequest]) -> None:
        links = []
        for r in seeds:
            fp = _fp(r.url)
            if fp is not None:
                links.append(codec.link(r, fp, self.key))
        self.client.add_seeds(links)

    def get_next_requests(self, max_n: int = 0, key_type: str = "domain", overused_keys: Any = ()) -> list[FRequest]:
        out = []
        for p, entry_id, e in self.client.take(max_n):
            parts = e.parts or {}
            if self.key is not None and not codec.verified(e.url, e.parts, self.key):
                logger.warning("%s: its stored parts are not signed with LINKRANK_SECRET: fetched as a plain GET",
                               e.url)
                self.unsigned += 1
                parts = {}
            meta = dict(parts.get("x") or {})
            meta.setdefault(b"scrapy_meta", {})
            meta[b"fingerprint"] = e.fp
            meta[b"depth"] = e.depth
            self.held[e.fp] = (p, entry_id, e.lease)
            out.append(FRequest(url=e.url, method=parts.get("m") or b"GET", headers=parts.get("h") or None,
                                cookies=parts.get("c") or None, body=parts.get("b") or "", meta=meta))
        return out

    def _take_held(self, url: str) -> tuple[bytes, tuple] | None:
        """Send the previous report, then the lease held for ``url``'s page
        (fingerprint, (partition, entry id, lease)); None, counted, if none."""
        self.end_report()
        fp = _fp(url)
        held = self.held.pop(fp, None) if fp is not None else None
        if held is None:
            self.unmatched += 1
            return None
        return fp, held

    def page_crawled(self, response: FResponse) -> None:
        request = response.request
        taken = self._take_held(request.url)
        if taken is None:
            return
        fp, (p, entry_id, lease) = taken
        meta = request.meta
        item = {"k": "f", "l": lease, "f": fp, "u": response.url, "s": int(response.status_code),
                "h": self._hash(response), "hd": self._headers(response.headers)}
        if meta.get(b"redirect_urls"):
            item["c"] = list(meta[b"redirect_urls"])
            item["rr"] = [r for r in meta.get(b"redirect_reasons") or () if isinstance(r, int)]
        score = meta.get(b"score")
        if isinstance(score, (int, float)):
            item["sc"] = float(score)
        self._current = (p, entry_id, item)

    def links_extracted(self, request: FRequest, links: list[FRequest]) -> None:
        if self._current is None:
            return
        wire = []
        for link in links:
            fp = _fp(link.url)
            if fp is not None:
                wire.append(codec.link(link, fp, self.key))
        self._current[2]["ln"] = wire

    def end_report(self) -> None:
        """The page reported last is complete (its links, if any, are in): send it."""
        if self._current is not None:
            p, entry_id, item = self._current
            self._current = None
            self.client.done(p, entry_id, item)

    def request_error(self, request: FRequest, error: str) -> None:
        taken = self._take_held(request.url)
        if taken is None:
            return
        fp, (p, entry_id, lease) = taken
        self.client.done(p, entry_id, {"k": "e", "l": lease, "f": fp, "u": request.url, "e": error[:1000],
                                       "p": bool(request.meta.get(b"dont_retry")),
                                       "rt": bool(request.meta.get(RETRIED_KEY))})

    @property
    def finished(self) -> bool:
        return self.close_when_finished and self.client.finished()

    def stats(self) -> dict[str, Any]:
        out = {"pages": 0, "hosts": 0, "queued": 0, "omega_cash": 0.0, "history_total": 0.0, "error_bound": 0.0}
        out.update(self.client.stats())
        out["unmatched_reports"] = self.unmatched
        out["unsigned_requests"] = self.unsigned
        return out

    def stop(self) -> None:
        self.end_report()
        self.client.stop()

    # -- helpers ------------------------------------------------------------------------------
    def _hash(self, response: FResponse) -> int:
        body = response.body
        if not body or not 200 <= response.status_code < 300:
            return 0
        if self.client.recrawl:
            ctype = self._headers(response.headers).get(b"content-type")
            return normalised_hash(body, ctype[0].decode("latin-1") if ctype else None)
        return int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little") or 1

    @staticmethod
    def _headers(headers: Any) -> dict:
        out = {}
        for k, v in (headers or {}).items():
            key = k if isinstance(k, bytes) else str(k).encode("latin-1")
            if key.lower() in KEPT_HEADERS:
                vals = v if isinstance(v, (list, tuple)) else [v]
                out[key.lower()] = [x if isinstance(x, bytes) else str(x).encode("latin-1") for x in vals]
        return out


class RemoteScheduler(LinkRankScheduler):
    """:class:`LinkRankScheduler` fed by a frontier service (see the module docstring)."""

    def _open_frontier(self) -> None:
        # Called by LinkRankScheduler.open, which reports its errors.
        spider = self.spider
        s = self.settings
        if self.crawler.settings.get("LINKRANK_PATH"):
            logger.warning("LINKRANK_PATH is not used: with LINKRANK_FRONTIER_URL the page database is "
                           "serve-frontier's (and so are the crawl-policy settings)")
        spider_id = s.SPIDER_ID or f"{socket.gethostname()}-{os.getpid()}"
        prefetch = s.PREFETCH or 2 * max(1, self.crawler.settings.getint("CONCURRENT_REQUESTS"))
        url, crawl = s.FRONTIER_URL, s.CRAWL
        cs = self.crawler.settings
        # Requests a host may have out with this spider: what its downloader slot holds.
        host_cap = slot_capacity(cs.getint("CONCURRENT_REQUESTS_PER_IP") or cs.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
                                 s)
        client = RemoteFrontier(lambda: RedisTransport(url, crawl), spider_id, prefetch, s.HEARTBEAT_INTERVAL,
                                {"spider": spider.name, "machine": socket.gethostname(), "pid": os.getpid(),
                                 "started": time.time(), "host_cap": host_cap})
        self.manager = self.backend = RemoteManager(client, s.CLOSE_WHEN_FINISHED, s.SECRET)
        client.start()
        if s.SEEDS_FILE:
            self._add_seeds_file(s.SEEDS_FILE)
        logger.info("LinkRank shared frontier %s (crawl %s) as spider %s, prefetch %d", url, crawl, spider_id,
                    prefetch)
        self._last_log = (time.monotonic(), 0)
        self._wake = task.LoopingCall(self._wake_engine)
        self._wake.start(0.05, now=False)
        if s.LOG_INTERVAL:
            self._log_loop = task.LoopingCall(self._log_progress)
            self._log_loop.start(s.LOG_INTERVAL, now=False)

    def _wake_engine(self) -> None:
        # Requests arrive from the I/O thread: ask the engine to pull them
        # (it otherwise polls the scheduler only every few seconds when idle).
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None and (self.manager.client.n_waiting or self.manager.client.finished()):
            slot.nextcall.schedule()

    def close(self, reason: str) -> None:
        for loop in (getattr(self, "_wake", None), self._log_loop):
            if loop is not None and loop.running:
                loop.stop()
        if self.df is not None:
            self.df.close(reason)
        if self.manager is None:
            return
        self._flush_seeds()
        self._log_progress(final=True)
        if self._n_buffered or self._in_flight:
            logger.info("%d requests received were not finished: the frontier hands them out again",
                        self._n_buffered + len(self._in_flight))
        self.manager.stop()
        self.manager = None

    def _should_ask(self) -> bool:
        return self._n_buffered < self.fsettings.MAX_NEXT_REQUESTS and self.manager.client.n_waiting > 0

    def response_done(self, response: Response, links: list[FRequest]) -> None:
        super().response_done(response, links)
        if self.manager is not None:
            self.manager.end_report()

    def _reclaim_lost(self) -> None:
        lost = list(self._in_flight.items())
        logger.warning("%d requests handed out never came back from Scrapy: recorded as failed", len(lost))
        for fp, _ in lost:
            self._release(fp)
            held = self.manager.held.pop(fp.encode("ascii"), None)
            if held is not None:
                p, entry_id, lease = held
                self.manager.client.done(p, entry_id, {"k": "e", "l": lease, "f": fp.encode("ascii"), "u": "",
                                                       "e": "lost in Scrapy", "p": False})
        self._reports += 1
        self.stats.inc_value("linkrank/lost", len(lost))
