"""The frontier core: one object that knows nothing of Frontera or Scrapy.

:class:`FrontierCore` owns a page database and decides which pages a crawl
fetches next. Its interface is small: :meth:`~FrontierCore.add_seeds`,
:meth:`~FrontierCore.page_fetched` and :meth:`~FrontierCore.links_found`
(a fetched page and its links), :meth:`~FrontierCore.page_failed`,
:meth:`~FrontierCore.next_requests` (the next batch, skipping busy hosts),
:meth:`~FrontierCore.stats` and :meth:`~FrontierCore.close`. The Frontera
backend and the Scrapy scheduler are thin adapters over it.

Calls are batched: a fetched page and its links are only recorded; the
batch is applied (links resolved to pages, AOPIC reads, new pages queued)
and committed as one LMDB write transaction when the crawler asks for more
requests, when ``LINKRANK_COMMIT_PAGES`` pages are waiting, or
``LINKRANK_COMMIT_INTERVAL`` seconds have passed. Requests are handed out
only after the transaction that leases them has committed, so a crash
never loses a page: uncommitted work is redone, leased pages are offered
again when the database is reopened.

Bad input never raises into the crawler: URLs that cannot be fetched are rejected with a
reason, logged and counted (:meth:`~FrontierCore.stats`), values the database cannot store
are checked where they enter (:mod:`.inputs`), and the rest of the batch goes on.

A commit that cannot be written (a full disk) stops the frontier: one
ERROR line, then reports are ignored, nothing is handed out and
:meth:`~FrontierCore.finished` is true (:attr:`~FrontierCore.stopped` holds
the error). The database keeps its last commit; the next run resumes from
it, its leases offered again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..numeric import release_free_memory
from ..recrawl.recrawler import Recrawler
from ..scheduling.lifecycle import PageLifecycle
from ..scheduling.policies import POLICIES, PolicyContext, host_class
from ..scheduling.priority import Priorities, PrioritizedFrontier
from ..scoring.aopic import Aopic
from ..scoring.ranker import Ranking
from ..settings import LinkRankSettings
from ..storage.pagedb import DiskFullError, PageDB, WriteError
from ..storage.vertices import (
    CRAWLED,
    ERROR,
    F_CRAWLED,
    F_EXTRAS,
    F_REFRESH,
    F_SEED,
    F_VALIDATORS,
    LEASED,
    NO_PAGE,
    UNFETCHED,
)
from .batch import BatchApplier
from .codec import RETRIED_KEY, SEED_WEIGHT_KEY, OutgoingRequest, RequestFactory, RequestLike, build_requests
from .counters import Counters
from .hostkeys import HostKeys
from .inputs import as_float, error_text, http_status
from .pages import PageRegistry
from .ranking import RankingSchedule
from .status import CrawlStatus, count_failure, count_response

logger = logging.getLogger(__name__)


class FrontierCore:
    """A crawl frontier over the page database at ``settings.PATH``.

    Parameters
    ----------
    settings : LinkRankSettings
        Every ``LINKRANK_*`` value (validated).
    clock : callable() -> float
        Seconds; leases, retries, commits and history windows use it.
    request_factory : callable(url=..., method=..., headers=..., cookies=..., meta=..., body=...)
        Builds the requests handed out (the Frontera adapter passes
        Frontera's ``Request``).
    keep_leases : bool
        Keep the leases of a previous process at open (a frontier service:
        its clients outlive it) instead of offering those pages again.

    Attributes
    ----------
    on_leased : callable(list of page indices) or None
        Called with the pages :meth:`next_requests` leases, before the
        transaction that leases them commits (whatever it records in the
        database's side tables commits with them).

    Examples
    --------
    >>> import tempfile
    >>> core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": tempfile.mkdtemp() + "/db", "LINKRANK_SYNC": False}))
    >>> core.add_seeds([OutgoingRequest("http://a.test/")])
    >>> [r.url for r in core.next_requests(10)]
    ['http://a.test/']
    >>> core.close()
    """

    def __init__(self, settings: LinkRankSettings, clock: Callable[[], float] = time.time,
                 request_factory: RequestFactory = OutgoingRequest, keep_leases: bool = False) -> None:
        self.settings = s = settings
        self.keep_leases = keep_leases
        self.on_leased: Callable[[list[int]], None] | None = None
        self.clock = clock
        self.request_factory = request_factory
        # The error that stopped the frontier (a commit that could not be written: disk full), or None.
        # Once set, reports are ignored and nothing is handed out; the database keeps its last commit.
        self.stopped: WriteError | None = None
        self.db = db = PageDB(s.PATH, map_size=s.MAP_SIZE, sync=s.SYNC, checkpoint_bytes=s.CHECKPOINT_BYTES,
                              compact=True)
        try:
            with db.bulk_reads():  # an open reads whole tables
                self._open()
        except BaseException:
            db.close()
            raise

    # -- opening -------------------------------------------------------------------------
    def _open(self) -> None:
        s, db = self.settings, self.db
        v = db.vertices
        self.counters = Counters(db.meta.get("counters", {}))
        self.aopic = self._open_books()
        keep = POLICIES[s.POLICY].vectors + (("pagerank",) if s.RECRAWL and s.RECRAWL_IMPORTANCE == "pagerank" else ())
        self.ranking = RankingSchedule(db, s, self.counters, self.clock(), keep, POLICIES[s.POLICY].reads_on_ranking)
        self.policy = policy = POLICIES[s.POLICY](PolicyContext(v, self.aopic, self.ranking.ranks, s, db))
        # Only cash keys rise by a little with every link; other keys
        # carry a common offset that a relative tolerance would blur.
        self.priorities = Priorities(db)  # requests' priorities: a queue level each
        self.priorities.load(v)
        self.frontier = PrioritizedFrontier(v, policy.keys, host_class(policy, self.aopic),
                                            tolerance=s.REQUEUE_TOLERANCE if policy.cash_keys else 0.0,
                                            offsets=self._class_offsets, lists=db, priorities=self.priorities)
        self.lifecycle = PageLifecycle(v, self.aopic, self.frontier, db.touch, db.cold)
        # Leases of a previous process: that process is gone (we hold the
        # writer lock), so its requests are offered again.
        recovered = 0 if self.keep_leases else self.lifecycle.recover_leases()
        if recovered:
            self.counters.add("leases_recovered", recovered)
            logger.info("%d requests leased by a previous run are offered again", recovered)
        self.registry = PageRegistry(db, self.aopic, self.lifecycle, self.counters, s.MAX_URL_LENGTH,
                                     s.LOG_REJECTED, s.OMEGA_HOSTS, self.priorities)
        self.frontier.rebuild(eager=False, heads=db.stored_heads())  # the other hosts read when they come up
        self.recrawler = (Recrawler(db, s, self.importance, self.ranking.ranks, self.lifecycle, self.counters)
                          if s.RECRAWL else None)
        self.batch = BatchApplier(db, self.registry, self.lifecycle, self.policy, self.counters, self.recrawler,
                                  s.MAX_PAGES_PER_HOST, s.MAX_LINKS_PER_PAGE, s.MAX_URL_LENGTH)
        self.host_keys = HostKeys(db.host_names)
        self.status = CrawlStatus(db, self.aopic, s.POLICY, self.ranking.ranks, self.frontier, self._class_offsets,
                                  self.batch, s.STATUS_INTERVAL, self.clock)
        self._refused: set[int] = set()  # pages whose response was refused in this batch (links ignored)
        self._last_commit = self.clock()

    def _open_books(self) -> Aopic:
        """The AOPIC books as of the last commit (settled first if ω's
        target set changed since)."""
        s, db = self.settings, self.db
        v = db.vertices
        saved = db.meta.get("aopic")
        if saved and (saved.get("policy") != s.OMEGA_POLICY or saved.get("hosts", []) != s.OMEGA_HOSTS):
            # Settle what the old target set is owed before switching sets.
            old = Aopic.from_saved(v, saved, db.host_ids, settings=s, cold=db.cold)
            old.settle_all()
            db.touch(np.arange(v.n))
            logger.info("omega policy changed from %s to %s: settled", saved["policy"], s.OMEGA_POLICY)
        return Aopic.from_settings(v, s, state=saved, host_ids=db.host_ids, cold=db.cold)

    # -- what the crawler reports -----------------------------------------------------------
    def add_seeds(self, seeds: Iterable[RequestLike]) -> None:
        """Add seed requests; ω's cash is split over the new ones (by
        ``meta[b'seed_weight']`` if given, else equally)."""
        if self.stopped is not None:
            return
        self.batch.apply()
        v = self.db.vertices
        funded: list[int] = []
        weights: list[float] = []
        for seed in seeds:
            i = self.registry.find_or_create(seed, depth=0, flags=F_SEED)
            if i is None:
                continue
            self.counters.add("seeds")
            if v.flags[i] & F_CRAWLED or v.state[i] != UNFETCHED or i in funded:
                continue  # already crawled (a resumed crawl) or duplicate
            v.flags[i] |= F_SEED
            v.depth[i] = 0
            self.db.cold.set1("parent", i, NO_PAGE)
            if self.policy.uses_hints:
                self.registry.set_hint(i, max(1.0, v.hint[i]))
            funded.append(i)
            weights.append(self._seed_weight(seed))
        if funded:
            self.aopic.fund(funded, weights)
            self.db.touch(np.asarray(funded))
            self.frontier.offer(funded)

    def _seed_weight(self, seed: RequestLike) -> float:
        w = as_float(seed.meta.get(SEED_WEIGHT_KEY, 1.0), finite=True)
        if w is None or not w > 0:
            self.counters.add("invalid_seed_weights")
            w = 1.0
        return w

    def page_fetched(self, response: Any) -> None:
        """Record a fetched page (any status; a response with ``url``,
        ``meta``, ``status_code``, ``headers``, ``body``, ``request``); its
        links may follow in :meth:`links_found`."""
        now = self.clock()
        self._maybe_commit(now)  # the batch so far, *before* this page, whose links are still to come
        if self.stopped is not None:
            return
        status = http_status(response.status_code)
        if status is None:
            self._refuse(response, f"invalid HTTP status {response.status_code!r}")
            return
        self.batch.record_response(response, now)
        count_response(self.counters, status)
        if self.registry.unstored:  # a request kept in memory is done with
            i = self.registry.find(getattr(response, "request", None) or response)
            self.registry.unstored.pop(i, None)

    def _refuse(self, response: Any, reason: str) -> None:
        """A response the page database cannot record: a fetch error of its
        page, given up at once (a server that answers so would answer so
        again), its links ignored."""
        self.counters.add("invalid_responses")
        n = self.counters.get("invalid_responses", 0)
        level = logging.WARNING if n <= self.settings.LOG_REJECTED else logging.DEBUG
        logger.log(level, "response of %.200r recorded as a fetch error: %s", response.url, reason)
        i = self.registry.find(response)
        self.page_failed(response, reason, give_up=True)
        if i is not None:
            self._refused.add(i)

    def links_found(self, request: RequestLike, links: list) -> None:
        """Record the out-links of a fetched page (resolved with the batch)."""
        if self.stopped is not None:
            return
        if self._refused and self.registry.find(request) in self._refused:
            self.counters.add("links_of_invalid_responses", len(links))
            return
        self.batch.record_links(request, links, self.clock())

    def page_failed(self, request: RequestLike, error: Any, give_up: bool = False) -> None:
        """A fetch failed: retry later, or give up after ``LINKRANK_MAX_RETRIES``
        (at once with ``give_up`` or ``request.meta[b'dont_retry']``:
        robots.txt, offsite). With ``request.meta[b'retried']`` the crawler
        retried the fetch already: a new page is given up, a refresh goes
        on as any failed refresh (its stored copy stays)."""
        now = self.clock()
        if self.stopped is not None:
            return
        i = self.registry.find_or_create(request, depth=0)
        if i is None:
            return
        self.batch.apply()  # its pending reads, if any, come first
        v, cold = self.db.vertices, self.db.cold
        refresh = v.state[i] == LEASED and bool(v.flags[i] & F_REFRESH)
        if v.state[i] in (CRAWLED, ERROR) and v.flags[i] & F_CRAWLED:
            self.counters.add("errors_after_crawl")
            return
        errors = min(cold.get1("errors", i) + 1, 0xFFFF)
        cold.set1("errors", i, errors)
        message = error_text(error)
        self.db.set_error(i, message)
        self.counters.add("fetch_errors")
        count_failure(self.counters, message)
        retried = bool(request.meta.get(RETRIED_KEY)) and not refresh
        if give_up or retried or errors > self.settings.MAX_RETRIES or request.meta.get(b"dont_retry"):
            self.lifecycle.give_up(i)
            self.counters.add("pages_failed")
        elif refresh:
            # A failed refresh: the stored copy stays; try again later (if
            # this run refreshes pages: a lease of a run with recrawl on,
            # kept by a frontier service reopened with it off, just ends).
            self.lifecycle.refresh_returned(i)
            if self.recrawler is not None:
                self.recrawler.schedule(i, now + self.settings.RETRY_DELAY * 2 ** (errors - 1))
            self.counters.add("refresh_retries")
        else:
            self.lifecycle.retry(i, now + self.settings.RETRY_DELAY)
            self.counters.add("retries")
        self._maybe_commit(now)

    def schedule(self, request: RequestLike, score: float | None = None) -> None:
        """Add ``request`` as a page (if new); ``score`` raises its hint."""
        i = self.registry.find_or_create(request)
        if i is not None and score is not None:
            self.registry.set_hint(i, score)
            self.frontier.offer([i])

    # -- handing out ----------------------------------------------------------------------------
    def next_requests(self, max_n: int, key_type: str = "domain", overused_keys: Iterable[str] = (),
                      skip_host: Callable[[int], bool] | None = None, max_per_host: int | None = None,
                      host_counts: dict[int, int] | None = None) -> list:
        """Lease and return up to ``max_n`` requests, best first, none for
        a host in ``overused_keys`` (host names, or IPs with
        ``key_type="ip"``) nor for a host id ``h`` with ``skip_host(h)``.
        At most ``max_per_host`` (default ``LINKRANK_MAX_REQUESTS_PER_HOST``)
        per host, counting ``host_counts`` (host id -> requests already
        out). ``max_n`` 0 applies and commits the batch. Nothing once the
        frontier has stopped (:attr:`stopped`)."""
        if self.stopped is not None:
            return []
        self.batch.apply()
        if self.policy.rekey():
            self.frontier.rebuild()
        now = self.clock()
        try:
            self.ranking.step(now, self._commit, self._ranking_installed)
        except WriteError as e:  # storing a finished ranking
            self._stop(e)
            return []
        for page in self.lifecycle.expire(now, self.settings.LEASE_TIMEOUT):
            if self.recrawler is not None:  # else the refresh just ends (see page_failed)
                self.recrawler.schedule(page, now)
        self.frontier.release_retries(now)
        if max_n <= 0:
            self._commit()
            return []
        skip = self.host_keys.skip_function(key_type, overused_keys or ())
        if skip_host is not None:
            skip = skip_host if skip is None else (lambda h, a=skip, b=skip_host: a(h) or b(h))
        cap = self.settings.MAX_REQUESTS_PER_HOST if max_per_host is None else max_per_host
        counts: dict[int, int] = dict(host_counts or {})  # host -> requests out, refreshes and new pages alike
        rc = self.recrawler
        refresh: list[int] = []
        if rc is not None:
            rc.step(now, self.counters.get("pages_crawled", 0))
            refresh = rc.take(round(rc.share * max_n), now, skip, cap, counts)
        pages = self.lifecycle.take(max_n - len(refresh), now, skip_host=skip, max_per_host=cap,
                                    offsets=self._class_offsets(), counts=counts)
        if rc is not None and len(refresh) + len(pages) < max_n:
            refresh += rc.take(max_n - len(refresh) - len(pages), now, skip, cap, counts, fill=True)
        pages += refresh
        if pages:
            self.counters.add("requests_out", len(pages))
            if refresh:
                self.counters.add("refreshes_out", len(refresh))
            if self.on_leased is not None:
                self.on_leased(pages)
        fps = self.db.fingerprints_of(pages) if pages else None  # in memory until the commit writes them
        self._commit()
        # Leases that did not reach the disk are not handed out.
        return self._requests(pages, fps) if self.stopped is None else []

    def requests(self, pages: list[int]) -> list:
        """Requests for ``pages`` as :meth:`next_requests` hands them out
        (a frontier service republishing the leases a broker lost)."""
        return self._requests(pages)

    def _requests(self, pages: list[int], fps: np.ndarray | None = None) -> list:
        if not pages:
            return []
        db, v = self.db, self.db.vertices
        with db.snapshot() as txn:
            urls = db.urls(pages, txn)
            idx = np.asarray(pages, np.int64)
            extra_pages = idx[(v.flags[idx] & F_EXTRAS) != 0].tolist()
            extras = db.request_extras(extra_pages, txn) if extra_pages else {}
            conditional = {}
            if self.recrawler is not None:
                want = (v.flags[idx] & (F_REFRESH | F_VALIDATORS)) == (F_REFRESH | F_VALIDATORS)
                conditional = self.recrawler.conditional_headers(idx[want].tolist(), txn)
        kept, urls = self.registry.usable_parts(pages, urls, extras)
        raw = self.db.fingerprints_of(kept) if fps is None else fps[np.isin(pages, kept)]
        pages = kept
        self.db.handed_out(pages, raw)
        fps = raw.tobytes().hex().encode("ascii")
        return build_requests(self.request_factory, urls, fps, v.depth[pages].tolist(), extras, conditional, pages)

    def _class_offsets(self) -> tuple[float, float]:
        """What the queue adds to the keys of each host class: the
        accumulator ``A`` to pages owed ω's cash through it."""
        return (self.aopic.A, 0.0)

    def _ranking_installed(self, ranking: Ranking) -> None:
        rebuild = self.policy.on_ranking(ranking)
        ranking.vectors.clear()  # read (what is held is in the ranks): gone before the rebuild's temporaries
        if rebuild:
            self.frontier.rebuild()
        release_free_memory()  # the ranking's and the rebuild's arrays are gone

    # -- committing -------------------------------------------------------------------------------
    def _maybe_commit(self, now: float) -> None:
        s = self.settings
        if len(self.batch) >= s.COMMIT_PAGES or (s.COMMIT_INTERVAL and now - self._last_commit >= s.COMMIT_INTERVAL):
            self.batch.apply()
            self._commit()

    def _commit(self, checkpoint: bool = False) -> None:
        if self.stopped is not None:
            return
        meta = {
            "aopic": {**self.aopic.state_dict(), "hosts": self.settings.OMEGA_HOSTS},
            "counters": self.counters,
            "policy": self.settings.POLICY,
        }
        if self.recrawler is not None:
            meta["recrawl"] = self.recrawler.state_dict()
        self.status.update()
        try:
            self.db.commit(meta, checkpoint)
        except WriteError as e:
            self._stop(e)
            return
        self._refused.clear()
        self._last_commit = self.clock()
        self.counters.add("commits")

    def _stop(self, error: WriteError) -> None:
        """A commit could not be written: stop, saying so once. The database
        keeps its last commit; the work since is redone by the next run
        (its leases are recovered when it opens)."""
        if self.stopped is None:
            self.stopped = error
            logger.error(
                "frontier stopped: %s. The page database keeps its last commit: %srun the crawl again to resume "
                "from it (requests handed out since are offered again)",
                error, "free some space and " if isinstance(error, DiskFullError) else "",
            )

    def close(self) -> None:
        """Apply and commit what is pending, rank what was crawled since the
        last ranking (unless stopped), and close the page database."""
        if self.db.env is not None and self.stopped is None:
            self.batch.apply()
            try:
                self.ranking.finish(self._commit)
                self.policy.save()
                self.db.store_heads(self.frontier.head_pages())  # the next open's heads: no refill of them
            except WriteError as e:  # storing the ranking, the policy's state or the heads
                self._stop(e)
        self.ranking.cancel()  # it holds a snapshot of the database we close
        if self.db.env is not None:
            if self.stopped is None:
                self.status.force()
                self._commit(checkpoint=True)  # the next open reads no log
            self.db.close()

    # -- reporting ----------------------------------------------------------------------------------
    def finished(self) -> bool:
        """Nothing pending, queued, leased, waiting a retry or due a refresh
        (or the frontier has stopped: :attr:`stopped`)."""
        if self.stopped is not None:
            return True
        return (
            not len(self.batch)
            and self.frontier.is_empty()
            and (self.recrawler is None or not len(self.recrawler.refresher))
        )

    def state(self, request: RequestLike) -> int | None:
        """Crawl state (``UNFETCHED`` ... ``ERROR``) of the page of ``request``, or None if unknown."""
        i = self.registry.find(request)
        return None if i is None else int(self.db.vertices.state[i])

    def url_of(self, fingerprint: bytes) -> str | None:
        """URL of the page with 20-byte ``fingerprint``, or None."""
        i = self.db.find(fingerprint)
        return None if i is None else self.db.urls([i])[0]

    def stats(self) -> dict[str, Any]:
        """Figures for logs and Scrapy's stats collector."""
        v = self.db.vertices
        a = self.aopic
        out: dict[str, Any] = dict(self.counters)
        out.update(
            pages=v.n,
            hosts=len(self.db.host_names),
            queued=self.frontier.n_queued,
            leased=self.frontier.n_leased,
            waiting_retry=self.frontier.n_waiting,
            omega_cash=a.omega,
            history_total=a.G,
            error_bound=a.error_bound,
            ranking_version=self.ranking.ranks.version,
            ranking_pages=self.ranking.ranks.n,
        )
        if self.recrawler is not None:
            out["refresh_scheduled"] = len(self.recrawler.refresher)
        out.update(self.policy.stats())
        if self.stopped is not None:
            out["stopped"] = 1
        return out

    def importance(self, idx: np.ndarray | None = None) -> np.ndarray:
        """AOPIC importance estimate of pages ``idx`` (default all)."""
        return self.aopic.importance(idx)

    def estimate(self) -> tuple[str, np.ndarray]:
        """``(name, values)``: the policy's importance estimate of every known page (AOPIC's, a ranking's, its own)."""
        return self.policy.estimate_name, self.policy.estimate(np.arange(self.db.n_pages))
