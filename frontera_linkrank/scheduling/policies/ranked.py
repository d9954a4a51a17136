"""``pagerank`` and ``hits``: the last periodic ranking of the known graph.

Pages found since that ranking have no score yet and come after the
ranked ones, in discovery order. Keys change only when a new ranking
arrives, and the queue is then rebuilt, so the lazy queue's rule (keys
only grow) holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...scoring.ranker import RankScores


def vector_keys(name: str) -> Any:
    """Key factory reading the stored ranking vector ``name``."""

    def factory(table: Any, aopic: Any = None, ranks: RankScores | None = None, **_: Any) -> KeyFunction:
        def f(idx: np.ndarray) -> np.ndarray:
            return ranks.values(name, idx, fill=0.0)

        return f

    return factory


PAGERANK = Policy("pagerank", vector_keys("pagerank"), rankings=("pagerank",), rebuild_on_ranking=True,
                  estimate="pagerank")
HITS = Policy("hits", vector_keys("authority"), rankings=("hits",), rebuild_on_ranking=True, estimate="authority")
