"""The crawl's status, kept by the frontier for viewers (``serve-status``).

A viewer of a large crawl cannot afford to read every page: that is
minutes of a core at tens of millions of pages, taken from the crawl it
watches. So the frontier keeps what the dashboard shows in the metadata
section ``status`` of its page database, committed with the batches, and
a viewer reads only that document:

- at every commit, what costs nothing: known pages, hosts, the commit's
  time and the stored links (a running total);
- from the hot page fields in memory (never the page records on disk),
  every ``LINKRANK_STATUS_INTERVAL`` seconds but at most
  :data:`STATUS_SHARE` of the frontier's time, and at close: pages by
  state, seeds, the AOPIC books, the share of the estimated PageRank
  already fetched, the busiest hosts, the next pages in the queue;
- at each installed ranking: its top pages.

Responses by HTTP status and failures by kind are counters of the crawl
(``http_404``, ``failed_DNSLookupError``), kept with the others.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..numeric import top_k
from ..scheduling.policies import Policy, queue_keys
from ..scheduling.priority import Priorities
from ..scoring.aopic import Aopic
from ..scoring.ranker import Ranking, RankScores
from ..storage.pagedb import PageDB
from ..storage.vertices import F_CRAWLED, F_SEED, LEASED, STATE_NAMES, UNFETCHED
from .batch import BatchApplier

SECTION = "status"
STATUS_TOP = 50
"""Rows of each list kept (a viewer shows at most this many)."""
STATUS_SHARE = 0.01
"""At most this share of the frontier's time goes to the status: when a
pass over the page fields takes longer than this share of the interval,
the next one waits longer."""
_REASON = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Timeout\w*|Refused|Lost|Failed|Done))\b")


def error_reason(message: str | None) -> str:
    """A fetch error message reduced to its kind: the exception's name when
    it names one, else ``other``.

    >>> error_reason("[<twisted.python.failure.Failure twisted.internet.error.DNSLookupError: no such host>]")
    'DNSLookupError'
    >>> error_reason("robots.txt forbids it")
    'other'
    """
    m = _REASON.search(message or "")
    return m.group(1)[:80] if m else "other"


def ordered_queue(keys: np.ndarray, priority: np.ndarray, pages: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` of ``pages`` (ascending) handed out first: priority (higher
    first), then key (higher first), then discovery (lower index first);
    ``keys`` and ``priority`` are those of ``pages``. Politeness is left out.

    >>> ordered_queue(np.array([0.5, 0.9, 0.9]), np.array([0, 0, 1]), np.array([3, 7, 9]), 3).tolist()
    [9, 7, 3]
    """
    if len(pages) > 4 * n:  # the queue may hold millions: a partition per level first
        chosen, left = [], n
        for level in np.unique(priority)[::-1]:
            at = np.flatnonzero(priority == level)
            if len(at) > left:  # ties at the cut go to the lower positions, the lower pages
                at = at[top_k(np.nan_to_num(keys[at], nan=-np.inf), left)]
            chosen.append(at)
            left -= len(at)
            if left <= 0:
                break
        sel = np.concatenate(chosen)
        keys, priority, pages = keys[sel], priority[sel], pages[sel]
    return pages[np.lexsort((pages, -keys, -priority))[:n]]


class CrawlStatus:
    """Keeps the ``status`` section of the page database's metadata.

    Parameters
    ----------
    db : PageDB
        The crawl's page database (writable); the section is registered
        with it and written at every commit.
    aopic : Aopic
        The live cash books.
    policy : Policy
        The crawl policy (its keys order the queue).
    ranks : RankScores
        The last ranking as the policy holds it (vectors it does not hold
        are read from the database).
    priorities : Priorities
        The request priorities of the pages that have one.
    batch : BatchApplier
        The batch; its ``links_stored`` (stored out-links added since) is
        taken at every commit.
    interval : float
        Seconds between passes over the page fields (0: no status kept).
    clock : callable() -> float
        Wall-clock seconds (the times a viewer shows).
    """

    def __init__(self, db: PageDB, aopic: Aopic, policy: Policy, ranks: RankScores, priorities: Priorities,
                 batch: BatchApplier, interval: float, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.db, self.aopic, self.policy, self.ranks = db, aopic, policy, ranks
        self.priorities, self.batch, self.interval, self.clock = priorities, batch, interval, clock
        saved = db.meta_section(SECTION)
        self.doc: dict[str, Any] = dict(saved) if isinstance(saved, dict) else {}
        self._due = 0.0
        if interval <= 0:
            db.own_meta_section(SECTION, lambda: None)  # no stale figures left behind
            return
        if not isinstance(self.doc.get("links"), int):
            # A database without this section (an older version's, an
            # import): the one pass over the page records it needs.
            n = db.n_pages
            self.doc["links"] = int(db.cold.get("n_out", np.arange(n)).astype(np.int64).sum()) if n else 0
        db.own_meta_section(SECTION, self.section)

    def force(self) -> None:
        """Make the next commit take a full pass (at close)."""
        self._due = 0.0

    def section(self) -> dict[str, Any]:
        """The section to commit (called by the database at every commit)."""
        doc, db = self.doc, self.db
        doc["links"] += self.batch.links_stored
        self.batch.links_stored = 0
        doc["pages"], doc["hosts"], doc["committed"] = db.n_pages, len(db.host_names), self.clock()
        start = time.monotonic()
        if start >= self._due:
            self._pass()
            took = time.monotonic() - start
            doc["pass_seconds"] = took
            doc["passes"] = doc.get("passes", 0) + 1
            doc["pass_seconds_total"] = doc.get("pass_seconds_total", 0.0) + took
            self._due = start + max(self.interval, took / STATUS_SHARE)
        return doc

    def ranking_installed(self, ranking: Ranking) -> None:
        """Keep the top pages of each vector of a ranking just stored."""
        tops = {}
        for name, values in ranking.vectors.items():
            x = np.where(np.isnan(values), -np.inf, values)
            best = top_k(x, STATUS_TOP)
            urls = self.db.urls(best)
            tops[name] = [{"index": int(i), "url": u, name: float(values[i])} for i, u in zip(best, urls)]
        self.doc["top_pages"] = tops
        self.doc["top_pages_of"] = {name: ranking_stamp(ranking.info.get(name)) for name in tops}

    def _pass(self) -> None:
        """The figures read from every page's hot fields."""
        db, a, doc = self.db, self.aopic, self.doc
        v, n = db.vertices, db.n_pages
        state, flags = v.state[:n], v.flags[:n]
        counts = np.bincount(state, minlength=len(STATE_NAMES))
        doc["time"] = self.clock()
        doc["pages_by_state"] = {name: int(counts[s]) for s, name in STATE_NAMES.items()}
        doc["seeds"] = int(np.count_nonzero(flags & F_SEED))
        pages_cash = float(a.effective_cash().sum())
        doc["cash"] = {"virtual_page": a.omega, "pages": pages_cash, "history_total": a.G,
                       "error_bound": a.error_bound, "residual": pages_cash + a.omega - 1.0,
                       "omega_policy": a.policy, "reads": a.reads}  # fmt: skip
        fetched = (flags & F_CRAWLED) != 0
        pagerank = self._vector("pagerank")
        share = None
        if pagerank is not None and len(pagerank):
            k = min(len(pagerank), n)
            pr = np.nan_to_num(pagerank[:k])
            total = float(pr.sum())
            share = float(pr[fetched[:k]].sum()) / total if total > 0 else None
        doc["fetched_pagerank"] = share
        self._hosts(v.host[:n], state, fetched)
        self._queue(state)

    def _vector(self, name: str) -> np.ndarray | None:
        """Ranking vector ``name``: the policy's copy, else the stored one."""
        ranking = self.ranks.ranking
        kept = None if ranking is None else ranking.vectors.get(name)
        return kept if kept is not None else self.db.read_scores(name)[0]

    def _hosts(self, host: np.ndarray, state: np.ndarray, fetched: np.ndarray) -> None:
        names = self.db.host_names
        m = len(names)
        waiting = np.bincount(host[state == UNFETCHED], minlength=m)
        leased = np.bincount(host[state == LEASED], minlength=m)
        done = np.bincount(host[fetched], minlength=m)

        def rows(counts: np.ndarray) -> list[dict[str, Any]]:
            best = top_k(counts, STATUS_TOP)
            return [{"host": names[h], "waiting": int(waiting[h]), "in_flight": int(leased[h]),
                     "fetched": int(done[h])} for h in best if counts[h] > 0]  # fmt: skip

        self.doc["hosts_by_waiting"], self.doc["hosts_by_fetched"] = rows(waiting), rows(done)

    def _queue(self, state: np.ndarray) -> None:
        queued = np.flatnonzero(state == UNFETCHED)
        prio = np.zeros(len(queued), np.int64)
        levels = self.priorities.levels
        if levels and len(queued):
            pages = np.fromiter(levels, np.int64, len(levels))
            at = np.minimum(np.searchsorted(queued, pages), len(queued) - 1)
            ok = queued[at] == pages
            prio[at[ok]] = np.fromiter(levels.values(), np.int64, len(levels))[ok]
        db = self.db
        keys = (queue_keys(self.policy, self.aopic, db.vertices.host[queued], queued, len(db.host_names))
                if len(queued) else np.zeros(0))
        best = ordered_queue(keys, prio, queued, STATUS_TOP)
        pos = np.searchsorted(queued, best).tolist()
        urls = self.db.urls(best) if len(best) else []
        self.doc["policy"] = self.policy.name
        self.doc["queued"] = [{"url": u, "priority": int(prio[j]), "key": float(keys[j])} for u, j in zip(urls, pos)]


def ranking_stamp(info: dict[str, Any] | None) -> list[Any]:
    """What tells one stored ranking vector from another: its version and time."""
    info = info or {}
    return [info.get("version"), info.get("time")]


def count_response(counters: Any, status: int) -> None:
    """Count a response whose status is an error (``http_404``...)."""
    if status >= 400:
        counters.add(f"http_{status}")


def count_failure(counters: Any, message: str) -> None:
    """Count a failed fetch by its kind (``failed_DNSLookupError``...)."""
    counters.add(f"failed_{error_reason(message)}")


__all__ = ["SECTION", "STATUS_SHARE", "STATUS_TOP", "CrawlStatus", "count_failure", "count_response",
           "error_reason", "ordered_queue", "ranking_stamp"]  # fmt: skip
