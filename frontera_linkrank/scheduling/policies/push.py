"""``push``: the known graph's PageRank, kept current after every batch.

Keys are the push estimate ``x + r`` of
:class:`~frontera_linkrank.scoring.push.PushRank`: all the PageRank mass
that has reached a frontier page through the crawled pages' links, plus
its own teleport share. The policy owns the estimate: stored when the
crawl closes (:meth:`PushPolicy.save`) and taken back at the next open
(rebuilt from the stored links and PageRank when the crawl ended
otherwise), updated with the links of each batch
(:meth:`PushPolicy.on_batch`), and re-anchored on every periodic
PageRank (:meth:`PushPolicy.on_ranking`), which removes the error the
threshold leaves. Mass only arrives at a page that waits, so keys only
grow between rankings, as the lazy queue needs; the queue is rebuilt when
a ranking re-anchors the estimate.

Reference: Andersen, Chung and Lang, "Local graph partitioning using
PageRank vectors", FOCS 2006.

Examples
--------
>>> import numpy as np
>>> from frontera_linkrank.scheduling.policies import POLICIES
>>> POLICIES["push"].estimate_name
'push'
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import numpy as np

from ...scoring.push import PushRank
from ...storage.vectors import STATE_PREFIX
from ...storage.vertices import F_CRAWLED
from .base import Batch, Policy, PolicyContext

if TYPE_CHECKING:
    from ...scoring.ranker import Ranking
    from ...storage.pagedb import PageDB

SECTION = "push_saved"
"""Metadata section: the token of the estimate saved at the last close."""
SAVED_X, SAVED_R = STATE_PREFIX + "push.x", STATE_PREFIX + "push.r"


class PushPolicy(Policy):
    """Largest push estimate first (see the module docstring)."""

    name = "push"
    estimate_name = "push"  # works without rankings; uses each PageRank that arrives
    reads_on_ranking = ("pagerank",)  # to anchor the estimate on

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        s = ctx.settings
        self.push = push = PushRank(s.DAMPING, s.PUSH_THRESHOLD)
        self.db = db = ctx.db
        self._saved: dict[str, Any] | None = None  # the close's saved estimate, for the commit's metadata
        v = ctx.table
        push.grow(v.n)
        crawled = np.flatnonzero(v.flags[: v.n] & F_CRAWLED)
        if db is not None and len(crawled):
            # Block by block, not one copy of every link: each page's current row is in one
            # block, and rows in any order give the same sums.
            with db.snapshot() as txn:
                push.reserve(db.edges.n_stored_edges, len(crawled))
                for src, ptr, dst in db.edges.iter_current(txn, v.n):
                    pages = np.asarray(src, np.int64)
                    lens = np.diff(np.asarray(ptr, np.int64))
                    linked = (v.flags[pages] & F_CRAWLED) != 0
                    if not linked.all():
                        dst = dst[np.repeat(linked, lens)]
                        pages, lens = pages[linked], lens[linked]
                    push.read_flat(pages, lens, dst)
            # Every crawled page gets its row, empty if it has no links.
            empty = crawled[~push.has_row(crawled)]
            push.read_flat(empty, np.zeros(len(empty), np.int64), np.zeros(0, np.int64))
            if not self._restore(db, crawled):
                stored, _ = db.read_scores("pagerank")
                if stored is not None:
                    push.anchor(stored)
            push.push()
        if db is not None:
            db.own_meta_section(SECTION, lambda: self._saved)

    def _restore(self, db: PageDB, crawled: np.ndarray) -> bool:
        """Take the estimate saved at the last close, if the commit that
        closed the crawl is the last one (its token is in the metadata)
        and no links were written since (by any writer)."""
        saved = db.meta_section(SECTION)
        if not isinstance(saved, dict):
            return False
        x_info, r_info = db.score_info(SAVED_X), db.score_info(SAVED_R)  # checked before the vectors are read
        if x_info is None or r_info is None or not saved.get("token") == x_info.get("token") == r_info.get("token"):
            return False
        if x_info.get("edge_seq") != db.meta.get("edge_seq", 0):
            return False
        (x, _), (r, _) = db.read_scores(SAVED_X), db.read_scores(SAVED_R)
        if x is None or r is None:
            return False
        try:
            self.push.restore(crawled, x, r, x_info)
        except (ValueError, KeyError, TypeError):
            return False
        return True

    def save(self) -> None:
        """Store the estimate (``x`` of the crawled pages, ``r`` of every
        page) under a token the close's commit puts in the metadata; any
        later commit clears it there."""
        if self.db is None:
            return
        v = self.table
        self.push.grow(v.n)
        crawled = np.flatnonzero(v.flags[: v.n] & F_CRAWLED)
        x, r, counters = self.push.state(crawled)
        token = secrets.token_hex(8)
        info = {**counters, "token": token, "edge_seq": self.db.edges.next_seq}
        self.db.write_scores({SAVED_X: x, SAVED_R: r}, info)
        self._saved = {"token": token}

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return self.push.values(idx)

    def on_batch(self, batch: Batch) -> np.ndarray:
        """The rows just read become pushable, then residuals over the
        threshold are pushed; returns the pages whose estimate rose."""
        push = self.push
        push.grow(self.table.n)
        push.read(batch.pages, batch.rows)
        push.read(batch.late_pages, batch.late_rows)
        return push.push()

    def on_ranking(self, ranking: Ranking) -> bool:
        """Re-anchor the estimate on the ranking's PageRank (queue rebuilt)."""
        pagerank = ranking.vectors.get("pagerank")
        if pagerank is None:
            return False
        self.push.grow(self.table.n)
        self.push.anchor(pagerank)
        self.push.push()
        return True

    def estimate(self, idx: np.ndarray) -> np.ndarray:
        self.push.grow(self.table.n)
        return self.push.normalised(idx)

    def stats(self) -> dict[str, float]:
        return self.push.stats()
