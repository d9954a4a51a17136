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
  :data:`STATUS_SHARE` of the time, and at close: pages by
  state, seeds, the AOPIC books, the share of the estimated PageRank
  already fetched, the busiest hosts, the next pages in the queue.

The top pages of each ranking are stored with its vectors
(:func:`~frontera_linkrank.scoring.ranker.store`). Responses by HTTP
status and failures by kind are counters of the crawl (``http_404``,
``failed_DNSLookupError``), kept with the others.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..numeric import top_k
from ..scheduling.priority import PrioritizedFrontier
from ..scoring.aopic import Aopic
from ..scoring.ranker import RankScores
from ..storage.meta import Encoded
from ..storage.pagedb import PageDB
from ..storage.vertices import F_CRAWLED, F_SEED, LEASED, STATE_NAMES, UNFETCHED
from .batch import BatchApplier

SECTION = "status"
STATUS_TOP = 50
"""Rows of each list kept (a viewer shows at most this many)."""
STATUS_SHARE = 0.005
"""At most this share of the time goes to the passes over the page fields:
when one takes (in CPU time) longer than this share of the interval, the
next waits longer (the crawl's speed is what the status is for)..."""
STATUS_MAX_WAIT = 600.0
"""... but not longer than this many seconds (one slow pass, the first
after opening a large database, does not keep the figures old for long)."""
STALE_STATUS = {SECTION: None}
"""The sections a tool that adds pages or links commits (``db.commit(STALE_STATUS)``):
the crawl's status no longer holds, and the next frontier recounts."""
EVERY_COMMIT = ("links", "pages", "hosts", "committed")
"""The figures every commit updates; the others change with a pass only,
and their JSON text is kept from one pass to the next."""
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


class CrawlStatus:
    """Keeps the ``status`` section of the page database's metadata.

    Parameters
    ----------
    db : PageDB
        The crawl's page database (writable); the section is registered
        with it and written at every commit.
    aopic : Aopic
        The live cash books.
    policy : str
        The crawl policy's name.
    ranks : RankScores
        The last ranking as the policy holds it (vectors it does not hold
        are read from the database).
    frontier : PrioritizedFrontier
        The queue; its first pages are listed (:meth:`~.Frontier.peek`).
    offsets : callable() -> (float, float)
        The queue's class offsets now.
    batch : BatchApplier
        The batch; its ``links_stored`` (stored out-links added since) is
        taken at every commit.
    interval : float
        Seconds between passes over the page fields (0: no status kept).
    clock : callable() -> float
        Wall-clock seconds (the times a viewer shows).
    """

    def __init__(self, db: PageDB, aopic: Aopic, policy: str, ranks: RankScores, frontier: PrioritizedFrontier,
                 offsets: Callable[[], tuple[float, float]], batch: BatchApplier, interval: float,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.db, self.aopic, self.policy, self.ranks = db, aopic, policy, ranks
        self.frontier, self.offsets, self.batch = frontier, offsets, batch
        self.interval, self.clock = interval, clock
        saved = db.meta_section(SECTION)
        self.doc: dict[str, Any] = dict(saved) if isinstance(saved, dict) else {}
        self._pass_text: str | None = None  # the JSON of the figures outside EVERY_COMMIT, until the next pass
        # A reopened crawl's saved figures stand for one interval, so its
        # first batch does not wait for a pass over every page.
        self._due = time.monotonic() + interval if self.doc.get("passes") else 0.0
        if interval <= 0:
            db.own_meta_section(SECTION, lambda: None)  # no stale figures left behind
            return
        if not isinstance(self.doc.get("links"), int):
            # A database without this section (an older version's, after an
            # import): the links counted once, block by block.
            with db.snapshot() as txn:
                self.doc["links"] = sum(len(dst) for _, _, dst in db.edges.iter_current(txn, db.n_pages))
        db.own_meta_section(SECTION, self._section)

    def force(self) -> None:
        """Make the next :meth:`update` take a full pass (at close)."""
        self._due = 0.0

    def update(self) -> None:
        """Before a commit: what every commit records, and the pass over the
        page fields when it is due (it may read host lists back: the
        commit then holds what it wrote)."""
        if self.interval <= 0:
            return
        doc, db = self.doc, self.db
        # Set through EVERY_COMMIT: a figure set here and missing there would
        # be committed from the text of the last pass.
        figures = (doc["links"] + self.batch.links_stored, db.n_pages, len(db.host_names), self.clock())
        doc.update(zip(EVERY_COMMIT, figures, strict=True))
        self.batch.links_stored = 0
        start = time.monotonic()
        if start >= self._due:
            # The pass's share is of the crawl's own work: its CPU time, not
            # wall time a busy machine adds while the thread waits.
            cpu = time.thread_time()
            self._pass()
            took = time.thread_time() - cpu
            doc["pass_seconds"] = took
            doc["passes"] = doc.get("passes", 0) + 1
            doc["pass_seconds_total"] = doc.get("pass_seconds_total", 0.0) + took
            self._due = start + max(self.interval, min(took / STATUS_SHARE, STATUS_MAX_WAIT))
            self._pass_text = None

    def _section(self) -> Encoded:
        """The section to commit, with its JSON text: the lists of a pass
        (hosts, queued pages) are encoded once per pass, not per commit."""
        doc = self.doc
        if self._pass_text is None:
            self._pass_text = json.dumps({k: v for k, v in doc.items() if k not in EVERY_COMMIT})[1:-1]
        every = json.dumps({k: doc[k] for k in EVERY_COMMIT if k in doc})[1:-1]
        return Encoded(doc, "{" + ", ".join(t for t in (every, self._pass_text) if t) + "}")

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
        pagerank = self.ranks.vector("pagerank")
        share = None
        if pagerank is not None and len(pagerank):
            k = min(len(pagerank), n)
            pr = pagerank[:k]  # a stored ranking vector is finite
            total = float(pr.sum())
            share = float(pr[fetched[:k]].sum()) / total if total > 0 else None
        doc["fetched_pagerank"] = share
        self._hosts(v.host[:n], state, fetched)
        self._queue()

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

    def _queue(self) -> None:
        db, levels = self.db, self.frontier.priorities.levels
        first = self.frontier.peek(STATUS_TOP, self.offsets())
        urls = db.urls([p for p, _ in first]) if first else []
        self.doc["policy"] = self.policy
        self.doc["queued"] = [{"url": u, "priority": levels.get(p, 0), "key": key} for (p, key), u in zip(first, urls)]


def count_response(counters: Any, status: int) -> None:
    """Count a response whose status is an error (``http_404``...)."""
    if status >= 400:
        counters.add(f"http_{status}")


FAILURE_KINDS = 100
"""Kinds of failure counted apart; past them a new kind counts as ``other``."""


def count_failure(counters: Any, message: str) -> None:
    """Count a failed fetch by its kind (``failed_DNSLookupError``...)."""
    key = f"failed_{error_reason(message)}"
    if key not in counters and sum(k.startswith("failed_") for k in counters) >= FAILURE_KINDS:
        key = "failed_other"
    counters.add(key)


__all__ = ["FAILURE_KINDS", "SECTION", "STALE_STATUS", "STATUS_MAX_WAIT", "STATUS_SHARE", "STATUS_TOP", "CrawlStatus",
           "count_failure", "count_response", "error_reason"]  # fmt: skip
