"""``hybrid``: AOPIC cash plus a weight times the last periodic PageRank.

The ranking knows the link structure around the pages found before it;
pages found since are ordered by their cash alone, which AOPIC keeps
current on every read. Both terms sum to at most 1 over the pages. The
cash part is keyed like ``opic`` (same host classes and offsets); the
ranking part is fixed between rankings, so keys only grow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import opic
from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.ranker import RankScores
    from ...storage.vertices import VertexTable


def keys(table: VertexTable, aopic: Aopic, ranks: RankScores | None = None, weight: float = 1.0,
         **_: Any) -> KeyFunction:
    """``cash + weight * pagerank`` (see the module docstring)."""
    cash = opic.keys(table, aopic)

    def f(idx: np.ndarray) -> np.ndarray:
        return cash(idx) + weight * ranks.values("pagerank", idx, fill=0.0)

    return f


POLICY = Policy("hybrid", keys, rankings=("pagerank",), rebuild_on_ranking=True, cash_keys=True, estimate="pagerank")
