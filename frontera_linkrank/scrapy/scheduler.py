"""``LinkRankScheduler``: a Scrapy scheduler whose queue is the LinkRank frontier.

Set in a Scrapy project (or enable :class:`~frontera_linkrank.scrapy.Addon`,
which sets it)::

    SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"

It drives a :class:`~frontera_linkrank.core.FrontierCore` directly
(:mod:`.frontier`; nothing of Frontera is imported) and puts its spider
middleware in place if the settings do not name it
(:func:`.middleware.install`). Where requests go:

- requests of http(s) URLs are the frontier's: those from the spider's
  ``start()`` (and any request that reaches the scheduler from outside the
  spider middleware, such as an errback's) and the URLs of
  ``LINKRANK_SEEDS_FILE`` are **seeds**; those the spider yields from a
  page are **links** of that page, which the frontier hands out later,
  best first;
- a request is scheduled as Scrapy's engine schedules one: the
  ``request_scheduled`` signal first (Scrapy's offsite middleware drops
  what ``allowed_domains`` excludes there, and counts it), then the
  scheduler; a request the frontier already knows is a duplicate
  (``request_dropped``, ``dupefilter/filtered``) unless ``dont_filter``,
  which fetches its page again (through Scrapy's queue, below);
- requests the frontier does not order (other schemes, URLs it cannot
  store, ``meta["dont_frontier"]``) go through a Scrapy scheduler of
  Scrapy's own (``scrapy.core.scheduler.Scheduler``: its priority queue,
  ``DUPEFILTER_CLASS``, ``JOBDIR`` queues), so Scrapy's errors, errbacks
  and signals happen as usual;
- follow-ups of a frontier request (redirects, Scrapy's retries) are
  fetched first, and the frontier records the whole chain.

Every outcome of a frontier request is reported exactly once, matched to
its lease by the request handed out (its ``meta["linkrank"]``, which
Scrapy copies to redirects and retries), whatever the response's URL: the
response (any status; the spider's content score
``response.meta["linkrank_score"]`` with it) or the failure. See
:mod:`.middleware` for how.

Retries have one owner. With Scrapy's ``RetryMiddleware`` enabled (the
default) Scrapy retries a failed fetch and the frontier records the final
failure without retrying it; with ``RETRY_ENABLED=False`` the frontier
retries (``LINKRANK_MAX_RETRIES`` times, ``LINKRANK_RETRY_DELAY`` apart).
Robots.txt and offsite refusals and requests with ``meta["dont_retry"]``
are never retried.

Where the page database lives follows Scrapy's convention for a crawl's
state (:func:`.config.database_path`): ``LINKRANK_PATH``, else
``JOBDIR/linkrank_db``, both resumed by a rerun, else a fresh database of
this crawl only. A start-up error (a setting, the page database, the
seeds file) stops the crawl at once: one ERROR line naming the cause,
finish reason ``linkrank_start_failed``, and ``scrapy crawl`` exits with
status 1.

Politeness: requests are handed to Scrapy only while their downloader slot
holds fewer than ``LINKRANK_OVERUSED_SLOT_FACTOR`` times its concurrency;
requests for a full slot wait here, and the frontier is asked for pages of
the other hosts, so one slow host never fills the downloader. The crawl
ends when nothing is queued or in flight, or when the page budget
``LINKRANK_MAX_PAGES`` is reached.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import shutil
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler, Scheduler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.utils.misc import load_object
from twisted.internet import task
from twisted.python.failure import Failure

from ..core.codec import FINGERPRINT_KEY, OutgoingRequest
from ..settings import LinkRankSettings, SettingsError
from ..storage.urls import RejectedURL, check_url, fingerprint
from .callbacks import UnusableRequest
from .config import batch_size, database_path, linkrank_settings, read_seeds_file, slot_capacity
from .converters import DONT_FRONTIER, FRONTIER_META, key_hex, to_frontier, to_scrapy
from .frontier import LocalFrontier
from .kept import KeptRequests
from .middleware import install
from .outcomes import FrontierErrback, Outcomes
from .progress import Progress
from .slots import SlotBuffer
from .startup import StartFailure

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

REMOTE_SCHEDULER = "frontera_linkrank.scrapy.remote.RemoteScheduler"  # with LINKRANK_FRONTIER_URL
SEED_CHUNK = 10_000  # seeds per add_seeds call
EMPTY_RETRY = 1.0  # seconds before asking an empty frontier again without news


def _lease_of(request: Request) -> tuple[str, str]:
    info = request.meta[FRONTIER_META]
    return info["key"], info["url"]


def _stat(stats: Any, what: str, where: str) -> None:
    stats.inc_value(f"scheduler/{what}")
    stats.inc_value(f"scheduler/{what}/{where}")


class LinkRankScheduler(Outcomes, BaseScheduler):
    """Scrapy scheduler over the LinkRank frontier (see the module docstring).

    Settings: all ``LINKRANK_*`` (docs/settings.md), and Scrapy's
    ``CONCURRENT_REQUESTS`` (batch size), ``CONCURRENT_REQUESTS_PER_DOMAIN``
    / ``_PER_IP`` (slot capacity), ``JOBDIR``, ``DUPEFILTER_CLASS`` and the
    ``SCHEDULER_*`` queues (for the requests the frontier does not order).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        # An error here would reach Scrapy before it can close cleanly:
        # open() reports it (see .startup).
        self._start_error: Exception | None = None
        self._startup = StartFailure(crawler)
        self.settings = LinkRankSettings({})
        try:
            self.settings = linkrank_settings(crawler.settings)
        except SettingsError as e:
            self._start_error = e
        self.batch_size = batch_size(crawler.settings, self.settings)
        self.fsettings = SimpleNamespace(MAX_NEXT_REQUESTS=self.batch_size)  # (read by remote.py)
        self.manager: Any = None  # the frontier: .frontier.LocalFrontier, or remote.py's client
        self.backend: Any = None
        self.local: Scheduler | None = None  # Scrapy's own scheduler, for what the frontier does not order
        self.df: Any = None
        self._scrapy_retries = False  # Scrapy's RetryMiddleware is enabled: it owns retries
        self.spider: Spider | None = None
        self.path: str | None = None  # the page database
        self._fresh = False  # a database of this crawl only
        self._followups: collections.deque[Request] = collections.deque()  # redirects, retries: fetched first
        self._seeds: list[OutgoingRequest] = []  # seeds not yet given to the frontier
        self._pending_keys: set[bytes] = set()  # keys offered and not yet applied by the frontier
        self.slots = SlotBuffer()  # requests handed out: waiting for their slot, or in flight
        # requests that could not be stored whole: fetched in this run (.kept)
        self._kept = KeptRequests(lambda: self.manager, self.stats)
        self._reports = 0  # outcomes reported (news that may fill an empty frontier)
        self._empty: tuple[float, int] | None = None  # (time, reports) of the last ask that returned nothing
        self._crawled_base = 0  # pages_crawled of the database when opened
        self._fetched = 0  # page reads reported by this run (redirect hops included)
        self._failed = 0  # frontier requests of this run that failed
        self._budget_logged = False
        self._log_loop: task.LoopingCall | None = None
        self._last_log: tuple[float, int] | None = None
        self._progress = Progress(self.stats, self.settings.MAX_PAGES)

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
    def open(self, spider: Spider) -> Any:
        self.spider = spider
        opened = None
        try:
            if self._start_error is not None:
                raise self._start_error
            install(self.crawler)
            self._scrapy_retries = self.crawler.get_downloader_middleware(RetryMiddleware) is not None
            self.local = Scheduler.from_crawler(self.crawler)
            opened = self.local.open(spider)
            self.df = self.local.df
            self._open_frontier()
        except Exception as e:
            if self.manager is not None:
                manager, self.manager = self.manager, None
                manager.stop()
            self._startup.fail(e)
        return opened

    def _open_frontier(self) -> None:
        self.path, self._fresh = database_path(self.crawler.settings, getattr(self.spider, "name", ""))
        self.settings = LinkRankSettings(self.settings, PATH=self.path)
        self.manager = self.backend = LocalFrontier(self.settings)
        st = self.manager.stats()
        self._crawled_base = int(st.get("pages_crawled", 0))
        if self.settings.SEEDS_FILE:
            self._add_seeds_file(self.settings.SEEDS_FILE)
            st = self.manager.stats()
        logger.info(
            "LinkRank frontier %s%s (policy %s): %d pages known, %d crawled, %d queued%s",
            os.path.abspath(self.path),
            " (a new database for this crawl: set LINKRANK_PATH or JOBDIR to keep and resume one)"
            if self._fresh else "",
            self.settings.POLICY,
            st["pages"],
            self._crawled_base,
            st["queued"],
            f", {st['leases_recovered']} leased by an earlier run offered again" if st.get("leases_recovered") else "",
        )
        self._start_progress(self._crawled_base)

    def _start_progress(self, crawled: int) -> None:
        self._progress = Progress(self.stats, self.settings.MAX_PAGES)
        self._progress.start(crawled)
        self._last_log = (time.monotonic(), crawled)
        if self.settings.LOG_INTERVAL:
            self._log_loop = task.LoopingCall(self._log_progress)
            self._log_loop.start(self.settings.LOG_INTERVAL, now=False)

    def _add_seeds_file(self, path: str) -> None:
        try:
            urls = read_seeds_file(path)
        except OSError as e:
            raise SettingsError(f"LINKRANK_SEEDS_FILE={path!r}: {e.strerror or e}") from None
        seeds = []
        for u in urls:
            try:
                seeds.append(OutgoingRequest(u, meta={FINGERPRINT_KEY: fingerprint(u).hex().encode("ascii")}))
            except RejectedURL:
                seeds.append(OutgoingRequest(u))  # the frontier rejects it, with its reason
        for k in range(0, len(seeds), SEED_CHUNK):
            self.manager.add_seeds(seeds[k : k + SEED_CHUNK])
        self.stats.set_value("linkrank/seeds_file", len(urls))
        logger.info("%d seeds read from %s", len(urls), os.path.abspath(path))

    def close(self, reason: str) -> Any:
        if self._log_loop is not None and self._log_loop.running:
            self._log_loop.stop()
        closed = self.local.close(reason) if self.local is not None else None
        if self.manager is None:
            return closed
        self._flush_seeds()
        self.manager.get_next_requests(0)  # apply and commit what is pending, hand out nothing
        self._log_progress(final=True)
        if self._n_buffered or self._in_flight:
            logger.info(
                "%d requests handed out were not finished (%d still waiting for their host): "
                "the next run on %s offers them again",
                self._n_buffered + len(self._in_flight), self._n_buffered, self.path,
            )
        st = self.manager.stats()
        self.manager.stop()
        self.manager = None
        self._end_line(st)
        return closed

    def _end_line(self, st: dict[str, Any]) -> None:
        path = os.path.abspath(self.path)
        if self._fresh and not st.get("pages_crawled"):
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            logger.info("LinkRank page database %s removed: this crawl fetched no page through it", path)
            return
        logger.info("LinkRank page database of this crawl: %s (%d pages, %d crawled; read it with "
                    "`frontera-linkrank top %s`)", path, st.get("pages", 0), st.get("pages_crawled", 0), path)

    # -- Scrapy's scheduler interface ----------------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        if self.manager is None:
            return False  # the frontier did not start
        if FRONTIER_META in request.meta:
            # A follow-up of a frontier request (redirect, retry): fetched
            # now, ahead of the frontier, which records the whole chain.
            self._followups.append(request)
            _stat(self.stats, "enqueued", "memory")
            return True
        return self._schedule(request, None)

    def schedule_link(self, request: Request, links: list[OutgoingRequest]) -> None:
        """Schedule a request a page yielded, as Scrapy's engine schedules
        one (``request_scheduled``, then the scheduler, ``request_dropped``
        if refused); a frontier request joins ``links``, the page's links."""
        request.meta.pop(FRONTIER_META, None)  # a new request, not a follow-up of this page's
        sent = self.crawler.signals.send_catch_log(signals.request_scheduled, request=request, spider=self.spider,
                                                   dont_log=IgnoreRequest)
        for _, result in sent:
            if isinstance(result, Failure) and isinstance(result.value, IgnoreRequest):
                return
        if self.manager is None or not self._schedule(request, links):
            self.crawler.signals.send_catch_log(signals.request_dropped, request=request, spider=self.spider)

    def _schedule(self, request: Request, links: list[OutgoingRequest] | None) -> bool:
        """Seed (``links`` None) or link: to the frontier, or through
        Scrapy's scheduler. False if dropped as a duplicate."""
        key = self._frontier_key(request)
        if key is None:
            return self.local.enqueue_request(request)
        raw = bytes.fromhex(key.decode("ascii"))
        known = raw in self._pending_keys or self._known(raw)
        if known and request.dont_filter and hasattr(self.manager, "known"):
            self._refetch(request, key)  # Scrapy fetches dont_filter requests again
            return True
        out = to_frontier(request, self.spider, key)
        if links is None:
            self._seeds.append(out)
            self.stats.inc_value("linkrank/seeds_start")
        else:
            links.append(out)
        if known and not request.dont_filter:
            self.df.log(request, self.spider)  # counted as Scrapy's duplicate filter counts
            return False
        self._pending_keys.add(raw)
        _stat(self.stats, "enqueued", "linkrank")
        return True

    def _frontier_key(self, request: Request) -> bytes | None:
        """The frontier key of ``request`` (40 hex digits), or None for a
        request that goes through Scrapy's scheduler."""
        if request.meta.get(DONT_FRONTIER):
            return None
        try:
            check_url(request.url, self.settings.MAX_URL_LENGTH)
            return key_hex(request)
        except RejectedURL:
            return None

    def _known(self, raw: bytes) -> bool:
        known = getattr(self.manager, "known", None)
        return bool(known is not None and known(raw))

    def _refetch(self, request: Request, key: bytes) -> None:
        """A ``dont_filter`` request for a page the frontier knows: fetched
        through Scrapy's queue, its response recorded as a fetch of the page."""
        request.meta[FRONTIER_META] = {"key": key.decode("ascii"), "url": request.url, "refetch": True}
        self.local.enqueue_request(request)
        self.stats.inc_value("linkrank/refetches")

    def has_pending_requests(self) -> bool:
        if self.manager is None:
            return False
        if self._followups or self._seeds or self._n_buffered or self.local.has_pending_requests():
            return True
        if self._in_flight:
            if self._engine_idle():
                self._reclaim_lost()
            return bool(self._in_flight) or not self.manager.finished
        if self._budget_left() <= 0:
            return False
        return not self.manager.finished

    def next_request(self) -> Request | None:
        if self.manager is None:
            return None
        if self._followups:
            _stat(self.stats, "dequeued", "memory")
            return self._followups.popleft()
        request = self.local.next_request()
        if request is not None:
            return request
        self._flush_seeds()
        request = self._pop_ready()
        if request is None and self._should_ask():
            self._ask()
            request = self._pop_ready()
        if request is not None:
            _stat(self.stats, "dequeued", "linkrank")
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
        if self._n_buffered >= self.batch_size:
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

    @property
    def _in_flight(self) -> dict[str, tuple[str, str]]:
        return self.slots.in_flight

    @property
    def _n_buffered(self) -> int:
        return len(self.slots)

    def _capacity(self, key: str) -> int:
        downloader = self.crawler.engine.downloader
        slot = downloader.slots.get(key)
        conc = slot.concurrency if slot is not None else (downloader.ip_concurrency or downloader.domain_concurrency)
        return slot_capacity(conc, self.settings)

    def _ask(self) -> None:
        n = int(min(self.batch_size - self._n_buffered, self._budget_left()))
        downloader = self.crawler.engine.downloader
        frequests = self.manager.get_next_requests(
            n, key_type="ip" if downloader.ip_concurrency else "domain", overused_keys=self.slots.busy(self._capacity)
        )
        if not getattr(self.manager, "pending", lambda: 1)():
            self._pending_keys.clear()  # all applied: the frontier knows them
        self.stats.inc_value("linkrank/batches")
        if not frequests:
            self._empty = (time.monotonic(), self._reports)
            return
        self._empty = None
        n = 0
        for fr in frequests:
            try:
                request = to_scrapy(fr, self.spider, self._kept.get(fr.meta[FINGERPRINT_KEY].decode("ascii")))
            except UnusableRequest as e:
                self._drop(fr, e)
                continue
            request.errback = FrontierErrback(self, request.errback)
            self.slots.add(self._slot_key(request), request)
            n += 1
        self.stats.inc_value("linkrank/requests", n)

    def _drop(self, frequest: Any, error: UnusableRequest) -> None:
        """A request handed out that cannot be rebuilt: a permanent error of its page."""
        logger.warning("%s: not fetched: %s", frequest.url, error)
        meta = {FINGERPRINT_KEY: frequest.meta[FINGERPRINT_KEY], b"dont_retry": True}
        self.manager.request_error(OutgoingRequest(frequest.url, meta=meta), f"UnusableRequest: {error}")
        self._reports += 1
        self.stats.inc_value("linkrank/dropped")

    def _pop_ready(self) -> Request | None:
        """The best waiting request whose slot has room, or None."""
        return self.slots.pop_ready(self._capacity, _lease_of)

    def _spider_idle(self, spider: Spider | None = None) -> None:
        if self.manager is not None and getattr(self.manager, "stopped", None) is not None:
            raise CloseSpider("linkrank_stopped")  # a commit could not be written (logged once by the core)
        if self.manager is not None and self.settings.MAX_PAGES and self._budget_left() <= 0 and not self._in_flight:
            raise CloseSpider("linkrank_page_budget")

    # -- progress ------------------------------------------------------------------------------
    def _update_stats(self) -> dict[str, Any]:
        st = self.backend.stats()
        own = {"run_pages_crawled": self._fetched, "run_pages_failed": self._failed}
        self._progress.update(st, len(self._in_flight) + self._n_buffered, own)
        return st

    def _log_progress(self, final: bool = False) -> None:
        st = self._update_stats()
        logger.info("%s", self._progress.line(st, len(self._in_flight) + self._n_buffered, final))
