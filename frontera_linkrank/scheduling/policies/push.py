"""``push``: the known graph's PageRank, kept current after every batch.

Keys are the push estimate of :class:`~frontera_linkrank.scoring.push.PushRank`
(the frontier core updates it after the reads of each batch): all the
PageRank mass that has reached a frontier page through the crawled
pages' links, plus its own teleport share. Mass only arrives at a page
that waits, so keys only grow, as the lazy queue needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.push import PushRank
    from ...scoring.ranker import RankScores
    from ...storage.vertices import VertexTable


def keys(table: VertexTable, aopic: Aopic | None = None, push: PushRank | None = None, **_: Any) -> KeyFunction:
    """The push estimate ``x + r`` of each page; with a depth discount
    ``b < 1``, the mass that reached the page through links times ``b ** depth``."""
    if push is None:
        raise ValueError("policy 'push' needs the push estimate (PushRank)")

    b = push.depth_discount
    if b == 1.0:
        def f(idx: np.ndarray) -> np.ndarray:
            return push.values(idx)
    else:
        def f(idx: np.ndarray) -> np.ndarray:
            # A waiting page's depth only shrinks and its inflow only grows: keys only grow.
            return push.inflow(idx) * b ** table.depth[idx].astype(np.float64)

    return f


@dataclass(frozen=True)
class PushPolicy(Policy):
    """A policy keyed by the online push estimate (the core builds one and passes it)."""

    def key_function(self, table: VertexTable, aopic: Aopic, ranks: RankScores | None = None,
                     weight: float = 1.0, push: PushRank | None = None) -> KeyFunction:
        """The key function of this policy over ``table`` and the estimate ``push``."""
        return self.keys(table, aopic, ranks=ranks, weight=weight, push=push)


POLICY = PushPolicy("push", keys, estimate="push")
