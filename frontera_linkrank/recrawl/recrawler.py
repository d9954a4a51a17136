"""Refreshing crawled pages: the frontier core's refresh bookkeeping.

With ``LINKRANK_RECRAWL`` on, a crawled page does not leave the frontier
for good: it waits in a :class:`~.scheduler.Refresher` until it is due
again, and each batch of requests gives ``LINKRANK_RECRAWL_SHARE`` of its
places to due refreshes (the rest to new pages; places one kind cannot
fill go to the other, so the crawler never idles while there is work).
Refreshes obey the same per-host politeness as new pages.

On every visit after the first, the page's visit history gets an entry
(interval since the previous visit, changed or not) and its change rate is
re-estimated. Change means another hash of the normalised content
(:mod:`.content`) or another kind of status; a ``304 Not Modified`` answer
to a conditional request (``If-None-Match`` / ``If-Modified-Since`` from
the stored ``ETag`` / ``Last-Modified``) is a visit without change, and
the page keeps its stored links.

Importance for the refresh value is the AOPIC estimate, or the last
PageRank (``LINKRANK_RECRAWL_IMPORTANCE``). The refresh parameter is
calibrated from the crawl's measured fetch rate after every
``LINKRANK_RECRAWL_CALIBRATE_PAGES`` visits, or 10% of the scheduled
pages if that is more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..scheduling.lifecycle import PageLifecycle
from ..scheduling.policies import Batch
from ..scoring.ranker import RankScores
from ..storage.pagedb import PageDB
from ..storage.vertices import CRAWLED, F_NORM_HASH, F_REFRESH, F_VALIDATORS
from .content import content_hash
from .scheduler import Refresher


class Counter(Protocol):
    """Where the recrawler counts changes and 304 answers (the crawl's counters)."""

    def add(self, key: str, k: int = 1) -> None: ...


class RecrawlSettings(Protocol):
    """The ``LINKRANK_RECRAWL_*`` fields a recrawler reads (a
    :class:`~frontera_linkrank.settings.LinkRankSettings` has them; the
    settings package takes its choices from this package, so this names
    only the fields)."""

    RECRAWL_POLICY: str
    RECRAWL_PRIOR_RATE: float
    RECRAWL_PRIOR_VISITS: float
    RECRAWL_MIN_INTERVAL: float
    RECRAWL_SHARE: float
    RECRAWL_CALIBRATE_PAGES: int
    RECRAWL_IMPORTANCE: str
    RECRAWL_CONDITIONAL: bool
    RECRAWL_HISTORY: int


def header(headers: Any, name: str) -> str | None:
    """First value of header ``name`` (case-insensitive) as str, or None.
    Headers may be Scrapy's (bytes keys, lists of bytes) or plain dicts."""
    if not headers or not hasattr(headers, "items"):
        return None
    want = name.lower()
    for k, v in headers.items():
        key = k.decode("latin-1") if isinstance(k, bytes) else str(k)
        if key.lower() == want:
            if isinstance(v, (list, tuple)):
                v = v[0] if v else None
            if isinstance(v, bytes):
                v = v.decode("latin-1")
            # A value of another type (a caller's odd headers) is no value.
            return v.strip() or None if isinstance(v, str) else None
    return None


def validators(headers: Any) -> tuple[str | None, str | None]:
    """``(etag, last_modified)`` of a response's headers (None when absent)."""
    return header(headers, "etag"), header(headers, "last-modified")


def status_class(status: int) -> int:
    """Statuses that mean the same content: 304 counts as 2xx."""
    return 2 if status == 304 else status // 100


class Recrawler:
    """Refresh bookkeeping of a frontier (see the module docstring).

    Parameters
    ----------
    db : PageDB
    settings : RecrawlSettings
        The ``LINKRANK_RECRAWL_*`` values.
    importance : callable(idx) -> ndarray
        The on-line (AOPIC) importance of pages.
    ranks : RankScores
        The last periodic ranking (``LINKRANK_RECRAWL_IMPORTANCE="pagerank"``).
    lifecycle : PageLifecycle
        Hands refreshes out.
    counters : Counter, optional
        Counts ``changes_detected`` and ``not_modified``.
    """

    def __init__(self, db: PageDB, settings: RecrawlSettings, importance: Callable[[np.ndarray], np.ndarray],
                 ranks: RankScores, lifecycle: PageLifecycle, counters: Counter | None = None) -> None:
        s = settings
        self.db = db
        self.counters = counters
        self.aopic_importance = importance
        self.ranks = ranks
        self.lifecycle = lifecycle
        self.table = db.vertices
        self.refresher = Refresher(
            s.RECRAWL_POLICY, s.RECRAWL_PRIOR_RATE, s.RECRAWL_PRIOR_VISITS, s.RECRAWL_MIN_INTERVAL
        )
        self.share = s.RECRAWL_SHARE
        self.calibrate_pages = s.RECRAWL_CALIBRATE_PAGES
        self.importance_kind = s.RECRAWL_IMPORTANCE
        self.conditional = s.RECRAWL_CONDITIONAL
        db.max_visits = s.RECRAWL_HISTORY
        # Pages per second, the highest measured (kept across runs, so a
        # resumed crawl schedules refreshes at once).
        self.fetch_rate = float(db.meta.get("recrawl", {}).get("fetch_rate", 0.0))
        self._mark = None  # (time, pages crawled) at the last calibration
        self._since = 0  # pages visited since the last calibration

    # -- estimates ---------------------------------------------------------------------
    def importance(self, idx: np.ndarray) -> np.ndarray:
        """Importance of pages ``idx`` for the refresh value."""
        x = self.aopic_importance(idx)
        if self.importance_kind == "pagerank" and self.ranks.n:
            pr = self.ranks.values("pagerank", idx, fill=math.nan)
            x = np.where(np.isnan(pr), x, pr)
        return x

    def rates(self, idx: np.ndarray) -> np.ndarray:
        lam = self.db.cold.get("rate", idx)
        return np.where(np.isnan(lam), self.refresher.prior_rate, lam)

    def eligible(self) -> np.ndarray:
        t = self.table
        return np.flatnonzero(t.state[: t.n] == CRAWLED)

    # -- calibration -------------------------------------------------------------------
    def state_dict(self) -> dict:
        """What to keep in the page database's metadata."""
        return {"fetch_rate": self.fetch_rate}

    def step(self, now: float, crawled: int) -> None:
        """Calibrate when due: at the start, then after ``calibrate_pages``
        visits and as many as 10% of the scheduled pages (a calibration is
        a vectorised pass over all of them), from the fetch rate measured
        meanwhile.
        Before any rate is known, one page per second is assumed (a crawler
        with nothing else to do takes refreshes before they are due anyway,
        so a wrong guess only shifts the split with new pages)."""
        if self._mark is None:
            self._mark = (now, crawled)
        t0, c0 = self._mark
        if crawled > c0 and now > t0:
            self.fetch_rate = max(self.fetch_rate, (crawled - c0) / (now - t0))
        due = max(self.calibrate_pages, 0.1 * len(self.refresher))
        if self.refresher.param is None or self._since >= due:
            self.calibrate(now)
            self._mark = (now, crawled)

    def calibrate(self, now: float) -> None:
        pages = self.eligible()
        w, lam = self.importance(pages), self.rates(pages)
        self.refresher.calibrate(w, lam, self.share * (self.fetch_rate or 1.0))
        self.refresher.rebuild(pages, self.db.cold.get("last_crawl", pages), w, lam)
        self._since = 0

    # -- visits ---------------------------------------------------------------------------
    @staticmethod
    def response_fields(headers: Any, status: int, body: bytes) -> tuple[int, tuple[str | None, str | None] | None]:
        """``(content hash, validators)`` of a response: the hash of the
        normalised content (so a timestamp or session id is not a change;
        0 without a 2xx body) and its ``(ETag, Last-Modified)`` (None for
        a status that carries none)."""
        ok = 200 <= status < 300
        h = content_hash(body, header(headers, "content-type")) if body and ok else 0
        return h, validators(headers) if ok or status == 304 else None

    def on_batch(self, batch: Batch) -> None:
        """Visit history, change rates and refresh schedule of the pages a
        batch read, before the batch overwrites their fields (status,
        content hash); marks their hashes as normalised."""
        reads = batch.reads
        if not reads:
            return
        v, db = self.table, self.db
        idx = batch.pages
        when = np.fromiter((r.when for r in reads), np.float64, len(reads))
        cold = db.cold
        revisit = (cold.get("n_crawls", idx) > 1).tolist()
        intervals = (when - cold.get("last_crawl", idx)).tolist()
        # A 304 carries only some validators: keep the stored others.
        partial = [r.idx for r in reads if r.kept_links and r.validators and None in r.validators]
        with db.snapshot() as txn:
            stored = db.validators(partial, txn) if partial else {}
            changed = [self._changed(r, again, interval) for r, again, interval in zip(reads, revisit, intervals)]
            for r in reads:
                i = r.idx
                if r.validators is not None and any(r.validators):
                    old_v = stored.get(i, (None, None))
                    db.set_validators(i, *(new or kept for new, kept in zip(r.validators, old_v)))
                    v.flags[i] |= F_VALIDATORS
                v.flags[i] &= 0xFF ^ F_REFRESH
            self.visited(reads, revisit, changed, intervals, txn)
        if self.counters is not None:
            self.counters.add("changes_detected", sum(1 for c in changed if c))
            self.counters.add("not_modified", sum(1 for r in reads if r.kept_links))

    def _changed(self, r: Any, again: bool, interval: float) -> bool | None:
        """Whether read ``r`` saw a change (None: not a usable observation)."""
        v, i = self.table, r.idx
        if not again or interval <= 0:
            return None
        cold = self.db.cold
        old = int(cold.get1("status", i))
        if r.kept_links:  # 304
            return False
        if old and status_class(old) != status_class(r.status):
            return True
        stored = cold.get1("content_hash", i)
        if r.hash and stored and v.flags[i] & F_NORM_HASH:
            return bool(r.hash != stored)
        return None

    def visited(self, reads: list, revisit: list, changed: list, intervals: list, txn: Any) -> None:
        """Pages just read (``_Read`` objects): record revisits (``changed``
        True/False; None: unknown) in the visit history, re-estimate change
        rates, reschedule."""
        db = self.db
        idx = np.fromiter((r.idx for r in reads), np.int64, len(reads))
        for r, again, ch, interval in zip(reads, revisit, changed, intervals):
            if again and ch is not None:
                db.add_visit(r.idx, interval, ch)
                db.cold.set1("rate", r.idx, self.refresher.change_rate(db.visits(r.idx, txn)))
        db.touch(idx)
        self._since += len(reads)
        if self.refresher.param is not None:
            when = np.fromiter((r.when for r in reads), np.float64, len(reads))
            self.refresher.schedule(idx, when, self.importance(idx), self.rates(idx))

    # -- handing out ------------------------------------------------------------------------
    def take(self, n: int, now: float, skip_host: Callable[[int], bool] | None = None, max_per_host: int = 0,
             counts: dict | None = None, fill: bool = False) -> list[int]:
        """Lease up to ``n`` refreshes: due ones, then (``fill``) the next
        to come due, never sooner than the minimum interval."""
        if n <= 0 or not len(self.refresher):
            return []
        t = self.table
        counts = counts if counts is not None else {}
        min_interval = self.refresher.min_interval

        def skip(page, early=False):
            h = int(t.host[page])
            if (skip_host is not None and skip_host(h)) or (max_per_host and counts.get(h, 0) >= max_per_host):
                return True
            if early and self.db.cold.get1("last_crawl", page) + min_interval > now:
                return True
            counts[h] = counts.get(h, 0) + 1
            return False

        pages = self.refresher.take(n, now, skip)
        if fill and len(pages) < n:
            # Pages not due yet, soonest first (skipping those fetched less
            # than the minimum interval ago): a bounded scan per call.
            pages += self.refresher.take(n - len(pages), math.inf, lambda p: skip(p, True))
        if pages:
            self.lifecycle.lease_refresh(pages, now)
        return pages

    def schedule(self, page: int, due: float) -> None:
        """Refresh ``page`` at ``due`` (a leased refresh came back unfetched:
        expired lease, fetch error; the lifecycle made it CRAWLED again)."""
        self.refresher.index.schedule(int(page), due)

    def conditional_headers(self, pages: list[int], txn: Any) -> dict[int, dict]:
        """{page: headers} for conditional refresh requests."""
        if not self.conditional or not len(pages):
            return {}
        out = {}
        for i, (etag, modified) in self.db.validators(pages, txn).items():
            h = {}
            if etag:
                h[b"If-None-Match"] = etag.encode("latin-1")
            if modified:
                h[b"If-Modified-Since"] = modified.encode("latin-1")
            if h:
                out[i] = h
        return out
