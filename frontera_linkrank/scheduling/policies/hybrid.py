"""``hybrid``: AOPIC cash plus a weight times the last periodic PageRank.

The ranking knows the link structure around the pages found before it;
pages found since are ordered by their cash alone, which AOPIC keeps
current on every read. Both terms sum to at most 1 over the pages. The
cash part is keyed like ``opic`` (same host classes and offsets); the
ranking part is fixed between rankings, so keys only grow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Policy
from .opic import cash_keys

if TYPE_CHECKING:
    from ...scoring.ranker import Ranking


class HybridPolicy(Policy):
    """``cash + LINKRANK_HYBRID_WEIGHT * pagerank`` (see the module docstring)."""

    name = "hybrid"
    rankings = ("pagerank",)
    vectors = ("pagerank",)
    cash_keys = True
    estimate_name = "pagerank"

    def keys(self, idx: np.ndarray) -> np.ndarray:
        weight = self.settings.HYBRID_WEIGHT
        return cash_keys(self.table, self.aopic, idx) + weight * self.ranks.values("pagerank", idx, fill=0.0)

    def on_ranking(self, ranking: Ranking) -> bool:
        return True

    def estimate(self, idx: np.ndarray) -> np.ndarray:
        return self.ranks.values("pagerank", idx, fill=0.0)
