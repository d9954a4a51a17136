"""``hybrid-push``: AOPIC cash plus a weight times the push estimate.

``hybrid`` with its periodic PageRank replaced by the known graph's
PageRank kept current after every batch (the push estimate of
:class:`~frontera_linkrank.scoring.push.PushRank`)::

    key = cash + LINKRANK_HYBRID_WEIGHT * (x + r) / M

where ``M`` is the total mass of the estimate (so the second term, like
the first, sums to at most 1 over the pages). Cash spreads from the seeds
and carries what crawled pages pass on at once; the estimate ranks every
known page, the pages found since the last rescale included, with no
ranking to wait for.

``M`` grows with the crawl (by one per page found, and by what pushes
add), so it is frozen between rescales: the keys of waiting pages then
only grow, as the lazy queue needs. When ``M`` has doubled, it is taken
afresh and the frontier rebuilds its queue, O(waiting pages). The waiting
pages are fewer than ``M`` (each known page brings 1 to it), so all the
rebuilds of a crawl together cost less than two of the size of the final
``M`` (a 10% step, as the ranking schedule has, would cost eleven).
Between rescales the estimate weighs up to twice what the weight says;
the weight matters little (16 to 256 collect the same PageRank within
0.013 on every development graph), so neither does that.

References: Abiteboul, Preda and Cobena, "Adaptive on-line page
importance computation", WWW 2003 (the cash); Andersen, Chung and Lang,
"Local graph partitioning using PageRank vectors", FOCS 2006 (the push).
docs/ordering.md has the measurements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import opic
from .push import PushPolicy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.push import PushRank
    from ...storage.vertices import VertexTable


RESCALE_GROWTH = 2.0
"""Rescale when the estimate's mass has grown by this factor."""


class CashAndPush:
    """The key function of ``hybrid-push`` (see the module docstring)."""

    def __init__(self, table: VertexTable, aopic: Aopic, push: PushRank, weight: float) -> None:
        self.cash = opic.keys(table, aopic)
        self.push = push
        self.weight = float(weight)
        self.scale = 1.0
        self.rescale()

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        return self.cash(idx) + (self.weight / self.scale) * self.push.values(idx)

    def due(self) -> bool:
        """True when ``M`` has doubled since the last rescale."""
        return self.push.mass >= RESCALE_GROWTH * self.scale

    def rescale(self) -> None:
        """Take the current mass as ``M`` (the caller rebuilds the queue)."""
        self.scale = max(self.push.mass, 1.0)


def keys(table: VertexTable, aopic: Aopic, push: PushRank | None = None, weight: float = 1.0,
         **_: Any) -> CashAndPush:
    """``cash + weight * (x + r) / M`` (see the module docstring)."""
    if push is None:
        raise ValueError("policy 'hybrid-push' needs the push estimate (PushRank)")
    return CashAndPush(table, aopic, push, weight)


POLICY = PushPolicy("hybrid-push", keys, cash_keys=True, estimate="push", rescales=True)
