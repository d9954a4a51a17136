"""``pagerank`` and ``hits``: the last periodic ranking of the known graph.

Pages found since that ranking have no score yet and come after the
ranked ones, in discovery order. Keys change only when a new ranking
arrives, and the queue is then rebuilt, so the lazy queue's rule (keys
only grow) holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import Policy

if TYPE_CHECKING:
    from ...scoring.ranker import Ranking


class PageRankPolicy(Policy):
    """Largest PageRank of the last periodic ranking first."""

    name = "pagerank"
    rankings = ("pagerank",)
    vectors = ("pagerank",)
    estimate_name = "pagerank"

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return self.ranks.values(self.estimate_name, idx, fill=0.0)

    def on_ranking(self, ranking: Ranking) -> bool:
        return True

    def estimate(self, idx: np.ndarray) -> np.ndarray:
        return self.ranks.values(self.estimate_name, idx, fill=0.0)


class HitsPolicy(PageRankPolicy):
    """Largest HITS authority of the last periodic ranking first."""

    name = "hits"
    rankings = ("hits",)
    vectors = ("authority",)
    estimate_name = "authority"
