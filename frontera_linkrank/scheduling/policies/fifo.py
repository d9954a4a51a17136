"""``fifo``: discovery order (breadth-first from the seeds), the order of
Frontera's memory FIFO backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import KeyFunction, Policy


def keys(table: Any, aopic: Any = None, **_: Any) -> KeyFunction:
    """The page discovered first comes first."""

    def f(idx: np.ndarray) -> np.ndarray:
        return -np.asarray(idx, np.float64)

    return f


POLICY = Policy("fifo", keys)
