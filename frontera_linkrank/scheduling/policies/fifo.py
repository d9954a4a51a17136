"""``fifo``: discovery order (breadth-first from the seeds), the order of
Frontera's memory FIFO backend."""

from __future__ import annotations

import numpy as np

from .base import Policy


class FifoPolicy(Policy):
    """The page discovered first comes first."""

    name = "fifo"

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return -np.asarray(idx, np.float64)
