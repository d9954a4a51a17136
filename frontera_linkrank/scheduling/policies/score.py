"""``score``: focused crawling by content score (the spider's
``linkrank_score``): the link's own score, else the best score of the
crawled pages linking to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import KeyFunction, Policy

if TYPE_CHECKING:
    from ...storage.vertices import VertexTable


def keys(table: VertexTable, aopic: Any = None, **_: Any) -> KeyFunction:
    """The page's ``hint`` (largest first)."""

    def f(idx: np.ndarray) -> np.ndarray:
        return table.hint[idx].astype(np.float64)

    return f


POLICY = Policy("score", keys, uses_hints=True)
