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
leased, everything applied) the spider closes with reason ``finished``
(``linkrank_page_budget`` when ``LINKRANK_MAX_PAGES`` was met), unless
``LINKRANK_CLOSE_WHEN_FINISHED = False``.

A broker that cannot be reached or refuses the password stops the spider
at start with one line (the password masked). Requests from the broker
are checked (:mod:`..service.client`); without ``LINKRANK_SECRET`` their
meta keys that route or authenticate a request (``proxy``,
``bindaddress``, ``download_slot``, ``cookiejar``...) and credential
headers are dropped (:data:`UNSIGNED_META`), since anyone who can write to
the broker could have put them there. The spider's stats are its own
(``linkrank/pages_crawled`` is what it fetched); the frontier's totals are
under ``linkrank/frontier/``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import CloseSpider
from twisted.internet import task

from ..core.codec import RETRIED_KEY
from ..core.codec import OutgoingRequest as FRequest  # (Frontera is not imported on the Scrapy path)
from ..recrawl.content import content_hash as normalised_hash
from ..service import codec
from ..service.client import RemoteFrontier
from ..service.redis_transport import RedisTransport, check_broker, mask
from ..storage.urls import RejectedURL, fingerprint
from .config import slot_capacity
from .scheduler import LinkRankScheduler

if TYPE_CHECKING:
    from frontera.core.models import Response as FResponse
    from scrapy.http import Response

logger = logging.getLogger(__name__)

KEPT_HEADERS = (b"content-type", b"etag", b"last-modified")  # what the frontier reads of a response's headers
IDLE_LOG = 30.0  # seconds without a request before the spider says so

# Scrapy's meta keys a request from the broker keeps when it is not signed
# (no LINKRANK_SECRET): those that change how a response is handled. The
# others of Scrapy and its plugins decide where, as whom or through what a
# request goes, or write files: dropped (the spider's own keys stay).
UNSIGNED_META = frozenset((
    "depth", "dont_cache", "dont_merge_cookies", "dont_redirect", "dont_retry", "download_fail_on_dataloss",
    "download_maxsize", "download_timeout", "download_warnsize", "handle_httpstatus_all", "handle_httpstatus_list",
    "is_start_request", "max_retry_times", "redirect_reasons", "redirect_times", "redirect_ttl", "redirect_urls",
    "referrer_policy", "retry_times",
))  # fmt: skip
ROUTING_META = frozenset((
    "_auth_proxy", "allow_offsite", "bindaddress", "cookiejar", "dont_obey_robotstxt", "dont_proxy",
    "download_latency", "download_slot", "ftp_local_filename", "ftp_password", "ftp_user", "proxy",
))  # fmt: skip
PLUGIN_PREFIXES = ("playwright", "splash", "_splash", "zyte", "crawlera", "impersonate", "selenium", "scrapy_")
CREDENTIAL_HEADERS = (b"authorization", b"proxy-authorization", b"cookie")


def _fp(url: str) -> bytes | None:
    try:
        return fingerprint(url).hex().encode("ascii")
    except RejectedURL:
        return None


class RemoteManager:
    """The part of Frontera's ``FrontierManager`` the scheduler uses, over a
    :class:`~frontera_linkrank.service.client.RemoteFrontier`."""

    def __init__(self, client: RemoteFrontier, close_when_finished: bool = True) -> None:
        self.client = client
        self.signed = client.key is not None  # entries were checked against LINKRANK_SECRET by the client
        self.close_when_finished = close_when_finished
        self.backend = self  # the scheduler reads stats() of its backend
        self.held: dict[bytes, tuple[int, str, int]] = {}  # fingerprint -> (partition, entry id, lease)
        self._current: tuple[int, str, dict] | None = None
        self.unmatched = 0
        self.duplicates = 0  # feed entries of a page held under another entry
        self.dropped_meta = 0  # meta keys and headers dropped from unsigned requests

    # -- what the scheduler calls ------------------------------------------------------------
    def add_seeds(self, seeds: list[FRequest]) -> None:
        links = []
        for r in seeds:
            fp = _fp(r.url)
            if fp is not None:
                links.append(codec.link(r, fp))
        self.client.add_seeds(links)

    def get_next_requests(self, max_n: int = 0, key_type: str = "domain", overused_keys: Any = ()) -> list[FRequest]:
        out = []
        for p, entry_id, e in self.client.take(max_n):
            held = self.held.get(e.fp)
            if held is not None:
                # The page is out already under another entry (the frontier republishes the leases it
                # has out when the broker lost them): one request, reported under the newer lease; the
                # other entry is acknowledged now, or the spider would wait for it for ever.
                keep, other = ((p, entry_id, e.lease), held) if e.lease >= held[2] else (held, (p, entry_id, e.lease))
                self.held[e.fp] = keep
                self.client.ack(other[0], other[1])
                self.duplicates += 1
                continue
            parts = e.parts or {}
            if not self.signed and parts:
                parts = self._unsigned(e.url, parts)
            meta = dict(parts.get("x") or {})
            meta.setdefault(b"scrapy_meta", {})
            meta[b"fingerprint"] = e.fp
            meta[b"depth"] = e.depth
            self.held[e.fp] = (p, entry_id, e.lease)
            out.append(FRequest(url=e.url, method=parts.get("m") or b"GET", headers=parts.get("h") or None,
                                cookies=parts.get("c") or None, body=parts.get("b") or "", meta=meta))
        return out

    def _unsigned(self, url: str, parts: dict) -> dict:
        """``parts`` of a request nobody signed, without what routes or
        authenticates it (:data:`UNSIGNED_META`, credential headers)."""
        x = dict(parts.get("x") or {})
        meta = x.get(b"scrapy_meta")
        dropped = []
        if isinstance(meta, dict):
            keep = {k: v for k, v in meta.items() if not isinstance(k, str) or k in UNSIGNED_META or (
                k not in ROUTING_META and not k.startswith(PLUGIN_PREFIXES))}
            dropped = sorted(str(k) for k in meta if k not in keep)
            x[b"scrapy_meta"] = keep
        headers = parts.get("h") or {}
        kept_headers = {k: v for k, v in headers.items()
                        if (k if isinstance(k, bytes) else str(k).encode("latin-1", "replace")).lower()
                        not in CREDENTIAL_HEADERS}
        dropped += [repr(k) for k in headers if k not in kept_headers]
        if dropped:
            self.dropped_meta += 1
            if self.dropped_meta <= 10:
                logger.warning("%.200s: %s dropped from a request the frontier handed out (unsigned: set "
                               "LINKRANK_SECRET on the frontier and its spiders to keep them)", url, ", ".join(dropped))
        return {**parts, "x": x, "h": kept_headers}

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
                wire.append(codec.link(link, fp))
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
        """This spider's figures (``pages_crawled``: pages it fetched) and
        the frontier's under ``frontier/``."""
        out = self.client.stats()
        out["pages_crawled"] = out.get("fetched", 0)
        out["unmatched_reports"] = self.unmatched
        out["duplicate_entries"] = self.duplicates
        out["unsigned_meta_dropped"] = self.dropped_meta
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
        url, crawl, secret = s.FRONTIER_URL, s.CRAWL, s.SECRET
        check_broker(url)  # unreachable, or a wrong password: one line now (BrokerError), not retries for ever
        cs = self.crawler.settings
        # Requests a host may have out with this spider: what its downloader slot holds.
        host_cap = slot_capacity(cs.getint("CONCURRENT_REQUESTS_PER_IP") or cs.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
                                 s)
        client = RemoteFrontier(lambda: RedisTransport(url, crawl, secret=secret), spider_id, prefetch,
                                s.HEARTBEAT_INTERVAL,
                                {"spider": spider.name, "machine": socket.gethostname(), "pid": os.getpid(),
                                 "started": time.time(), "host_cap": host_cap}, codec.crawl_key(secret, crawl))
        self.manager = self.backend = RemoteManager(client, s.CLOSE_WHEN_FINISHED)
        client.start()
        if s.SEEDS_FILE:
            self._add_seeds_file(s.SEEDS_FILE)
        logger.info("LinkRank shared frontier %s (crawl %s) as spider %s, prefetch %d%s", mask(url), crawl, spider_id,
                    prefetch, ", messages signed" if secret else "")
        self._last_log = (time.monotonic(), 0)
        self._idle_logged = False
        self._wake = task.LoopingCall(self._wake_engine)
        self._wake.start(0.05, now=False)
        if s.LOG_INTERVAL:
            self._log_loop = task.LoopingCall(self._log_progress)
            self._log_loop.start(s.LOG_INTERVAL, now=False)

    def _wake_engine(self) -> None:
        # Requests arrive from the I/O thread: ask the engine to pull them
        # (it otherwise polls the scheduler only every few seconds when idle).
        client = self.manager.client
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None and (client.n_waiting or client.finished()):
            slot.nextcall.schedule()
        self._log_idle(client)

    def _log_idle(self, client: RemoteFrontier) -> None:
        """Say once per idle spell that no request comes, and why it may be."""
        idle = time.monotonic() - client.last_received
        if client.n_waiting or self._n_buffered or self._in_flight:
            client.last_received = time.monotonic()
            self._idle_logged = False
        elif idle >= IDLE_LOG and not self._idle_logged and not client.finished():
            self._idle_logged = True
            st = client.stats()
            logger.info("no requests from the frontier for %.0f s: this spider owns %d partitions and holds %d "
                        "entries not reported; frontier %s, %s queued, %s spiders%s", idle, st.get("partitions", 0),
                        st.get("held", 0), st.get("frontier/state"),
                        st.get("frontier/queued", "?"), st.get("frontier/spiders", "?"),
                        " (its hosts are with the other spiders: a host is fetched by one spider at a time)"
                        if not st.get("partitions") or st.get("frontier/queued") else "")

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

    def _spider_idle(self, spider: Any = None) -> None:
        manager = self.manager
        if manager is not None and manager.finished and manager.client.state.get("reason") == "page_budget":
            raise CloseSpider("linkrank_page_budget")
        super()._spider_idle(spider)

    def _log_progress(self, final: bool = False) -> None:
        st = self._update_stats()
        now = time.monotonic()
        crawled = int(st.get("pages_crawled", 0))
        t0, c0 = self._last_log
        rate = (crawled - c0) / (now - t0) * 60 if now > t0 else 0.0
        self._last_log = (now, crawled)
        budget = st.get("frontier/budget") or 0
        total = st.get("frontier/pages_crawled", 0)
        logger.info("LinkRank%s: this spider fetched %d pages (%d/min), holds %d, owns %d partitions; frontier "
                    "(%s): %s pages crawled%s, %s queued, %s spiders", " (end)" if final else "", crawled, rate,
                    st.get("held", 0), st.get("partitions", 0), st.get("frontier/state"), total,
                    f" of {budget}" if budget else "", st.get("frontier/queued", "?"), st.get("frontier/spiders", "?"))

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
