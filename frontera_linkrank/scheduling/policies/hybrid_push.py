"""``hybrid-push`` (the default): AOPIC cash plus a weight times the push estimate.

``hybrid`` with its periodic PageRank replaced by the known graph's
PageRank kept current after every batch (the push estimate of
:class:`~frontera_linkrank.scoring.push.PushRank`, owned as in ``push``
and re-anchored on every periodic PageRank)::

    key = cash + LINKRANK_HYBRID_WEIGHT * (x + r) / M

where ``M`` is the total mass of the estimate (so the second term, like
the first, sums to at most 1 over the pages). Cash spreads from the seeds
and carries what crawled pages pass on at once; the estimate ranks every
known page, the pages found since the last ranking included.

``M`` grows with the crawl (by one per page found, and by what pushes
add), so it is frozen between rescales: the keys of waiting pages then
only grow, as the lazy queue needs. When ``M`` has doubled, or a ranking
re-anchors the estimate, it is taken afresh and the frontier rebuilds its
queue, O(waiting pages). The waiting pages are fewer than ``M`` (each
known page brings 1 to it), so the rebuilds for growth together cost less
than two of the size of the final ``M``. Between rescales the estimate
weighs up to twice what the weight says.

References: Abiteboul, Preda and Cobena, "Adaptive on-line page
importance computation", WWW 2003 (the cash); Andersen, Chung and Lang,
"Local graph partitioning using PageRank vectors", FOCS 2006 (the push).

Examples
--------
>>> from frontera_linkrank.scheduling.policies import POLICIES
>>> p = POLICIES["hybrid-push"]
>>> p.cash_keys, p.estimate_name
(True, 'push')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import PolicyContext
from .opic import cash_keys
from .push import PushPolicy

if TYPE_CHECKING:
    from ...scoring.ranker import Ranking


RESCALE_GROWTH = 2.0
"""Rescale when the estimate's mass has grown by this factor."""


class HybridPushPolicy(PushPolicy):
    """``cash + weight * (x + r) / M`` (see the module docstring)."""

    name = "hybrid-push"
    cash_keys = True

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.weight = float(ctx.settings.HYBRID_WEIGHT)
        self.scale = max(self.push.mass, 1.0)

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return cash_keys(self.table, self.aopic, idx) + (self.weight / self.scale) * self.push.values(idx)

    def rekey(self) -> bool:
        """Take ``M`` afresh once it has doubled since the last rescale."""
        if self.push.mass < RESCALE_GROWTH * self.scale:
            return False
        self.scale = max(self.push.mass, 1.0)
        return True

    def on_ranking(self, ranking: Ranking) -> bool:
        rebuild = super().on_ranking(ranking)
        if rebuild:
            self.scale = max(self.push.mass, 1.0)
        return rebuild
