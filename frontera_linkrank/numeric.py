"""Small numpy helpers used on hot paths (the base layer: no package imports)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def unique(a: ArrayLike) -> np.ndarray:
    """Sorted distinct values of ``a`` (like ``np.unique(a)``).

    By sorting: numpy 2.4's ``np.unique`` of integers is about 10x slower
    (2.2 s against 0.2 s for 3M int64 values, measured here), and page
    indices go through it on every commit. The one such helper of the
    package: storage, the tools and the simulator all call it.

    >>> unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    s = np.sort(np.asarray(a))
    if len(s) < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]
