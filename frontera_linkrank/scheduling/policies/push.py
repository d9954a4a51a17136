"""``push``: the known graph's PageRank, kept current after every batch.

Keys are the push estimate ``x + r`` of
:class:`~frontera_linkrank.scoring.push.PushRank`: all the PageRank mass
that has reached a frontier page through the crawled pages' links, plus
its own teleport share. The policy owns the estimate: it is rebuilt from
the stored links when the database opens, updated with the links of each
batch (:meth:`PushPolicy.on_batch`), and re-anchored on every periodic
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

from typing import TYPE_CHECKING

import numpy as np

from ...scoring.links import database_rows
from ...scoring.push import PushRank
from ...storage.vertices import F_CRAWLED
from .base import Batch, Policy, PolicyContext

if TYPE_CHECKING:
    from ...scoring.ranker import Ranking


class PushPolicy(Policy):
    """Largest push estimate first (see the module docstring)."""

    name = "push"
    estimate_name = "push"  # works without rankings; uses each PageRank that arrives
    reads_on_ranking = ("pagerank",)  # to anchor the estimate on

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        s = ctx.settings
        self.push = push = PushRank(s.DAMPING, s.PUSH_THRESHOLD)
        v = ctx.table
        push.grow(v.n)
        crawled = np.flatnonzero(v.flags[: v.n] & F_CRAWLED)
        if ctx.db is not None and len(crawled):
            db = ctx.db
            with db.snapshot() as txn:
                pages, lens, dst = database_rows(db, txn, v.n)
            # Every crawled page gets its row, empty if it has no links.
            linked = (v.flags[pages] & F_CRAWLED) != 0
            if not linked.all():
                dst = dst[np.repeat(linked, lens)]
                pages, lens = pages[linked], lens[linked]
            n_out = np.zeros(len(crawled), np.int64)
            n_out[np.searchsorted(crawled, pages)] = lens
            del pages, lens
            push.read_flat(crawled, n_out, dst)
            stored, _ = db.read_scores("pagerank")
            if stored is not None:
                push.anchor(stored)
            push.push()

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
