"""``score``: focused crawling by content score (the spider's
``linkrank_score``): the link's own score, else the best score of the
crawled pages linking to it."""

from __future__ import annotations

import numpy as np

from .base import Policy


class ScorePolicy(Policy):
    """The page's ``hint``, largest first."""

    name = "score"
    uses_hints = True

    def keys(self, idx: np.ndarray) -> np.ndarray:
        return self.table.hint[idx].astype(np.float64)
