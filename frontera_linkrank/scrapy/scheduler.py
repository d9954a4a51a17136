"""``LinkRankScheduler``: a Scrapy scheduler driving the LinkRank frontier.

Set in a Scrapy project (or enable :class:`~frontera_linkrank.scrapy.Addon`,
which sets it)::

    SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
    LINKRANK_PATH = "crawl_db"

The scheduler puts its spider middleware in place if the settings do not
name it (:func:`.middleware.install`).

The scheduler owns a Frontera ``FrontierManager`` with
:class:`~frontera_linkrank.backend.LinkRankBackend`, built from the Scrapy
settings (so every ``LINKRANK_*`` setting is read from the project). Where
requests go:

- requests from the spider's ``start()`` (and any request that reaches the
  scheduler from outside the spider middleware) are **seeds**, and so are
  the URLs of ``LINKRANK_SEEDS_FILE``;
- requests the spider yields from a page are **links** of that page: the
  spider middleware sends them to ``links_extracted`` and they never reach
  Scrapy's queue; the frontier hands them out later, best first;
- follow-ups of a frontier request (redirects, Scrapy's retries) and
  requests with ``meta["dont_frontier"]`` go through a plain FIFO queue
  here, ahead of frontier requests: they are fetched now. Those that are
  not follow-ups pass Scrapy's duplicate filter (``DUPEFILTER_CLASS``)
  first, unless ``dont_filter``, as in Scrapy's own scheduler.

Every outcome of a frontier request is reported exactly once: its response
(any status, HttpError included; the redirect chain and the spider's
content score ``response.meta["linkrank_score"]`` with it) to
``page_crawled``, or its failure to ``request_error``. See
:mod:`.middleware` for how.

Retries have one owner. With Scrapy's ``RetryMiddleware`` enabled (the
default) Scrapy retries a failed fetch (``RETRY_TIMES``...) and the
frontier records the final failure without retrying it; with
``RETRY_ENABLED=False`` the frontier retries (``LINKRANK_MAX_RETRIES``
times, ``LINKRANK_RETRY_DELAY`` apart). Robots.txt and offsite refusals
and requests with ``meta["dont_retry"]`` are never retried.

A start-up error (a setting, the page database, the seeds file) stops the
crawl at once: one ERROR line naming the cause, finish reason
``linkrank_start_failed``, and ``scrapy crawl`` exits with status 1.

Politeness: requests are handed to Scrapy only while their downloader slot
holds fewer than ``LINKRANK_OVERUSED_SLOT_FACTOR`` times its concurrency;
requests for a full slot wait here, and the frontier is asked for pages of
the other hosts (``overused_keys``), so one slow host never fills the
downloader.

The crawl ends when the frontier is empty and nothing is in flight, or when
the page budget ``LINKRANK_MAX_PAGES`` is reached. Requests handed out but
not finished when the process dies are leased in the page database, and
offered again by the next run on it: ``scrapy crawl`` again resumes.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from frontera import FrontierManager
from frontera.core.models import Request as FRequest
from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet import task

from ..core.codec import RETRIED_KEY
from ..settings import SettingsError
from .callbacks import UnusableRequest
from .config import frontera_settings, read_seeds_file, slot_capacity
from .converters import DONT_FRONTIER, FRONTIER_META, response_to_frontera, to_frontera, to_scrapy
from .kept import KeptRequests
from .middleware import install
from .startup import StartFailure

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

REMOTE_SCHEDULER = "frontera_linkrank.scrapy.remote.RemoteScheduler"  # with LINKRANK_FRONTIER_URL
SEED_CHUNK = 10_000  # seeds per add_seeds call
EMPTY_RETRY = 1.0  # seconds before asking an empty frontier again without news


class _Errback:
    """The errback of a frontier request: reports the failure, then calls
    the spider's own errback (or lets Scrapy log the failure as usual)."""

    __slots__ = ("scheduler", "errback", "__weakref__")

    def __init__(self, scheduler: LinkRankScheduler, errback: Callable[[Failure], Any] | None) -> None:
        self.scheduler = scheduler
        self.errback = errback

    def __call__(self, failure: Failure) -> Any:
        # HttpError: the response reached the spider middleware, which reports it.
        if not failure.check(HttpError):
            self.scheduler.request_failed(failure.request, failure)
        if self.errback is None:
            return failure
        return self.errback(failure)


class LinkRankScheduler(BaseScheduler):
    """Scrapy scheduler over a Frontera ``FrontierManager`` with ``LinkRankBackend``.

    Adds :class:`~frontera_linkrank.scrapy.LinkRankSpiderMiddleware` to the
    spider middlewares if the settings do not. Settings: all ``LINKRANK_*``
    (:mod:`frontera_linkrank.default_settings`), and Scrapy's
    ``CONCURRENT_REQUESTS`` (batch size) and ``CONCURRENT_REQUESTS_PER_DOMAIN``
    / ``_PER_IP`` (slot capacity).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        # An error here would reach Scrapy before it can close cleanly:
        # open() reports it (see .startup).
        self._start_error: Exception | None = None
        self._startup = StartFailure(crawler)
        try:
            self.fsettings, self.settings = frontera_settings(crawler.settings)
        except SettingsError as e:
            self._start_error = e
        self.manager: FrontierManager | None = None
        self.df: Any = None  # Scrapy's duplicate filter, for requests that bypass the frontier
        self._scrapy_retries = False  # Scrapy's RetryMiddleware is enabled: it owns retries
        self.spider: Spider | None = None
        # redirects, retries, dont_frontier: fetched first
        self._local: collections.deque[Request] = collections.deque()
        self._seeds: list[FRequest] = []  # start requests not yet given to the frontier
        # slot key -> deque of (sequence, request): leased, not handed to Scrapy
        self._buffer: dict[str, collections.deque[tuple[int, Request]]] = {}
        self._n_buffered = 0
        self._seq = 0
        self._in_flight: dict[str, str] = {}  # fingerprint -> slot key, handed to Scrapy and not reported
        # requests that could not be stored whole: fetched in this run (.kept)
        self._kept = KeptRequests(lambda: getattr(self, "backend", None), self.stats)
        self._slot_load: collections.Counter[str] = collections.Counter()  # slot key -> requests in flight
        self._reports = 0  # outcomes reported (news that may fill an empty frontier)
        self._empty: tuple[float, int] | None = None  # (time, reports) of the last ask that returned nothing
        self._crawled_base = 0  # pages_crawled of the database when opened
        self._fetched = 0  # page reads reported by this run (redirect hops included)
        self._budget_logged = False
        self._log_loop: task.LoopingCall | None = None
        self._last_log: tuple[float, int] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkRankScheduler:
        if cls is LinkRankScheduler and crawler.settings.get("LINKRANK_FRONTIER_URL"):
            # A shared frontier (serve-frontier) instead of a page database: the
            # subclass of scrapy/remote.py, loaded by name as Scrapy loads SCHEDULER.
            cls = load_object(REMOTE_SCHEDULER)
        scheduler = cls(crawler)
        crawler.signals.connect(scheduler._spider_idle, signal=signals.spider_idle)
        return scheduler

    # -- opening and closing -------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        try:
            if self._start_error is not None:
                raise self._start_error
            install(self.crawler)
            self._scrapy_retries = self.crawler.get_downloader_middleware(RetryMiddleware) is not None
            self.df = build_from_crawler(load_object(self.crawler.settings["DUPEFILTER_CLASS"]), self.crawler)
            self.df.open()
            self._open_frontier()
        except Exception as e:
            if self.manager is not None:
                manager, self.manager = self.manager, None
                manager.stop()
            self._startup.fail(e)

    def _open_frontier(self) -> None:
        self.manager = FrontierManager.from_settings(self.fsettings)
        self.backend = self.manager.backend
        self._crawled_base = int(self.backend.stats().get("pages_crawled", 0))
        if self.settings.SEEDS_FILE:
            self._add_seeds_file(self.settings.SEEDS_FILE)
        st = self.backend.stats()
        logger.info(
            "LinkRank frontier %s (policy %s): %d pages known, %d crawled, %d queued%s",
            self.settings.PATH,
            self.settings.POLICY,
            st["pages"],
            self._crawled_base,
            st["queued"],
            f", {st['leases_recovered']} leased by an earlier run offered again" if st.get("leases_recovered") else "",
        )
        self._last_log = (time.monotonic(), self._crawled_base)
        if self.settings.LOG_INTERVAL:
            self._log_loop = task.LoopingCall(self._log_progress)
            self._log_loop.start(self.settings.LOG_INTERVAL, now=False)

    def _add_seeds_file(self, path: str) -> None:
        try:
            urls = read_seeds_file(path)
        except OSError as e:
            raise SettingsError(f"LINKRANK_SEEDS_FILE={path!r}: {e.strerror or e}") from None
        for k in range(0, len(urls), SEED_CHUNK):
            self.manager.add_seeds([FRequest(url=u, meta={b"scrapy_meta": {}}) for u in urls[k : k + SEED_CHUNK]])
        self.stats.set_value("linkrank/seeds_file", len(urls))
        logger.info("%d seeds read from %s", len(urls), os.path.abspath(path))

    def close(self, reason: str) -> None:
        if self._log_loop is not None and self._log_loop.running:
            self._log_loop.stop()
        if self.df is not None:
            self.df.close(reason)
        if self.manager is None:
            return
        self._flush_seeds()
        self.backend.get_next_requests(0)  # apply and commit what is pending, hand out nothing
        self._log_progress(final=True)
        if self._n_buffered or self._in_flight:
            logger.info(
                "%d requests handed out were not finished (%d still waiting for their host): "
                "the next run on %s offers them again",
                self._n_buffered + len(self._in_flight),
                self._n_buffered,
                self.settings.PATH,
            )
        self.manager.stop()
        self.manager = None

    # -- Scrapy's scheduler interface ----------------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        if self.manager is None:
            return False  # the frontier did not start
        meta = request.meta
        if FRONTIER_META in meta:
            # A follow-up of a frontier request (redirect, retry): fetched
            # now, ahead of the frontier, which records the whole chain.
            return self._enqueue_local(request, filtered=False)
        if meta.get(DONT_FRONTIER):
            return self._enqueue_local(request)
        self._seeds.append(to_frontera(request, self.spider))
        self.stats.inc_value("linkrank/seeds_start")
        return True

    def _enqueue_local(self, request: Request, filtered: bool = True) -> bool:
        """Queue a request that bypasses the frontier; False if Scrapy's
        duplicate filter drops it (``filtered`` and not ``dont_filter``)."""
        if filtered and not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        self._local.append(request)
        self.stats.inc_value("linkrank/scrapy_queue")
        return True

    def has_pending_requests(self) -> bool:
        if self.manager is None:
            return False
        if self._local or self._seeds or self._n_buffered:
            return True
        if self._in_flight:
            if self._engine_idle():
                self._reclaim_lost()
            return True
        if self._budget_left() <= 0:
            return False
        return not self.manager.finished

    def next_request(self) -> Request | None:
        if self.manager is None:
            return None
        if self._local:
            return self._local.popleft()
        self._flush_seeds()
        request = self._pop_ready()
        if request is None and self._should_ask():
            self._ask()
            request = self._pop_ready()
        return request

    # -- seeds and asking the frontier -----------------------------------------------------
    def _flush_seeds(self) -> None:
        if self._seeds:
            seeds, self._seeds = self._seeds, []
            self._kept.take(seeds)
            for k in range(0, len(seeds), SEED_CHUNK):
                self.manager.add_seeds(seeds[k : k + SEED_CHUNK])
            self._empty = None

    def _budget_left(self) -> float:
        if not self.settings.MAX_PAGES:
            return math.inf
        used = self._crawled_base + self._fetched + len(self._in_flight) + self._n_buffered
        return self.settings.MAX_PAGES - used

    def _should_ask(self) -> bool:
        if self._n_buffered >= self.fsettings.MAX_NEXT_REQUESTS:
            return False
        if self._budget_left() <= 0:
            if not self._budget_logged:
                self._budget_logged = True
                logger.info("page budget LINKRANK_MAX_PAGES=%d reached: no more requests", self.settings.MAX_PAGES)
            return False
        if self._empty is not None:
            when, reports = self._empty
            # An empty answer stays empty until something is reported (new
            # links, a finished lease) or a retry wait may have ended.
            if reports == self._reports and time.monotonic() - when < EMPTY_RETRY:
                return False
        return True

    def _slot_key(self, request: Request) -> str:
        return self.crawler.engine.downloader.get_slot_key(request)

    def _capacity(self, key: str) -> int:
        downloader = self.crawler.engine.downloader
        slot = downloader.slots.get(key)
        conc = slot.concurrency if slot is not None else (downloader.ip_concurrency or downloader.domain_concurrency)
        return slot_capacity(conc, self.settings)

    def _ask(self) -> None:
        n = self.fsettings.MAX_NEXT_REQUESTS - self._n_buffered
        n = int(min(n, self._budget_left()))
        downloader = self.crawler.engine.downloader
        overused = {k for k, load in self._slot_load.items() if load >= self._capacity(k)}
        overused.update(self._buffer)  # hosts with requests waiting here get no more
        frequests = self.manager.get_next_requests(
            n, key_type="ip" if downloader.ip_concurrency else "domain", overused_keys=sorted(overused)
        )
        self.stats.inc_value("linkrank/batches")
        if not frequests:
            self._empty = (time.monotonic(), self._reports)
            return
        self._empty = None
        n = 0
        for fr in frequests:
            try:
                request = to_scrapy(fr, self.spider, self._kept.get(fr.meta[b"fingerprint"].decode("ascii")))
            except UnusableRequest as e:
                self._drop(fr, e)
                continue
            request.errback = _Errback(self, request.errback)
            key = self._slot_key(request)
            self._buffer.setdefault(key, collections.deque()).append((self._seq, request))
            self._seq += 1
            n += 1
        self._n_buffered += n
        self.stats.inc_value("linkrank/requests", n)

    def _drop(self, frequest: FRequest, error: UnusableRequest) -> None:
        """A request handed out that cannot be rebuilt: a permanent error of its page."""
        logger.warning("%s: not fetched: %s", frequest.url, error)
        meta = {b"scrapy_meta": {}, b"dont_retry": True}
        self.manager.request_error(FRequest(url=frequest.url, meta=meta), f"UnusableRequest: {error}")
        self._reports += 1
        self.stats.inc_value("linkrank/dropped")

    def _pop_ready(self) -> Request | None:
        """The best buffered request whose slot has room, or None."""
        best = None
        for key, queue in self._buffer.items():
            if self._slot_load[key] < self._capacity(key) and (best is None or queue[0][0] < best[1]):
                best = (key, queue[0][0])
        if best is None:
            return None
        key = best[0]
        queue = self._buffer[key]
        _, request = queue.popleft()
        if not queue:
            del self._buffer[key]
        self._n_buffered -= 1
        self._in_flight[request.meta[FRONTIER_META]["fingerprint"]] = key
        self._slot_load[key] += 1
        return request

    # -- outcomes (called by the spider middleware and the errback) ------------------------
    def _finish(self, meta: dict[str, Any]) -> bool:
        """Mark the frontier request of ``meta`` finished; False if it is not
        one in flight (not a frontier request, or already reported)."""
        info = meta.get(FRONTIER_META)
        if not info:
            return False
        if self._release(info.get("fingerprint")) is None:
            return False
        self._reports += 1
        return True

    def _release(self, fp: Any) -> Any:
        """Forget the in-flight request ``fp`` and free its slot; the slot key, or None."""
        key = self._in_flight.pop(fp, None)
        if key is not None:
            self._slot_load[key] -= 1
            if self._slot_load[key] <= 0:
                del self._slot_load[key]
        return key

    def response_done(self, response: Response, links: list[FRequest]) -> None:
        """A response of the crawl and the frontier links its page yielded
        (Frontera requests). Reported once per frontier request; links of
        pages the frontier did not hand out enter it as seeds."""
        if self.manager is None:
            return
        self._kept.take(links)
        if not self._finish(response.meta):
            if links:
                self._seeds.extend(links)
            return
        if self._kept:
            self._kept.done(response.meta[FRONTIER_META]["fingerprint"])
        fresponse = response_to_frontera(response)
        self.manager.page_crawled(fresponse)
        self._fetched += 1 + len(set(response.meta.get("redirect_urls") or ()))
        if links:
            self.manager.links_extracted(fresponse.request, links)
        self.stats.inc_value("linkrank/links_extracted", len(links))

    def request_failed(self, request: Request, failure: Failure) -> None:
        """A frontier request failed without a response (network error,
        refused by robots.txt or another downloader middleware)."""
        if self.manager is None or not self._finish(request.meta):
            return
        meta = {b"scrapy_meta": {}}
        if failure.check(IgnoreRequest) or request.meta.get("dont_retry"):
            # Permanent (robots.txt, offsite, too many redirects) or not to be retried.
            meta[b"dont_retry"] = True
        elif self._scrapy_retries:
            meta[RETRIED_KEY] = True  # Scrapy retried it already: the frontier does not
        chain = request.meta.get("redirect_urls") or ()
        url = chain[0] if chain else request.url
        exc = failure.value
        self.manager.request_error(FRequest(url=url, meta=meta), f"{type(exc).__name__}: {exc}"[:1000])
        self.stats.inc_value(f"linkrank/errors/{type(exc).__name__}")

    # -- lost requests and the end of the crawl ----------------------------------------------
    def _engine_idle(self) -> bool:
        engine = self.crawler.engine
        slot = getattr(engine.scraper, "slot", None)
        return not engine.downloader.active and (slot is None or slot.is_idle())

    def _reclaim_lost(self) -> None:
        """Requests handed out whose outcome never came back (a component
        dropped them): failed, so the frontier offers them again later."""
        lost = list(self._in_flight.items())
        logger.warning("%d requests handed out never came back from Scrapy: recorded as failed", len(lost))
        for fp, _ in lost:
            self._release(fp)
            url = self.backend.core.url_of(bytes.fromhex(fp))
            if url is not None:
                self.manager.request_error(FRequest(url=url, meta={b"scrapy_meta": {}}), "lost in Scrapy")
        self._reports += 1
        self.stats.inc_value("linkrank/lost", len(lost))

    def _spider_idle(self, spider: Spider | None = None) -> None:
        if self.manager is not None and getattr(getattr(self.backend, "core", None), "stopped", None) is not None:
            raise CloseSpider("linkrank_stopped")  # a commit could not be written (logged once by the core)
        if self.manager is not None and self.settings.MAX_PAGES and self._budget_left() <= 0 and not self._in_flight:
            raise CloseSpider("linkrank_page_budget")

    # -- progress ------------------------------------------------------------------------------
    def _update_stats(self) -> dict[str, Any]:
        st = self.backend.stats()
        for k, v in st.items():
            if isinstance(v, (int, float)):
                self.stats.set_value(f"linkrank/{k}", v)
        self.stats.set_value("linkrank/in_flight", len(self._in_flight) + self._n_buffered)
        return st

    def _log_progress(self, final: bool = False) -> None:
        st = self._update_stats()
        now = time.monotonic()
        crawled = int(st.get("pages_crawled", 0))
        t0, c0 = self._last_log
        rate = (crawled - c0) / (now - t0) * 60 if now > t0 else 0.0
        self._last_log = (now, crawled)
        logger.info(
            "LinkRank%s: %d pages crawled (%d/min), %d known on %d hosts, %d queued, %d in flight, "
            "%d links; omega cash %.4g, G %.4g, error bound %.3g",
            " (end)" if final else "",
            crawled,
            rate,
            st["pages"],
            st["hosts"],
            st["queued"],
            len(self._in_flight) + self._n_buffered,
            st.get("links", 0),
            st["omega_cash"],
            st["history_total"],
            st["error_bound"],
        )
