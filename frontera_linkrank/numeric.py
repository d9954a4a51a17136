"""Small numpy helpers used on hot paths."""

import numpy as np


def unique(a):
    """Sorted distinct values of ``a`` (like ``np.unique(a)``).

    By sorting: numpy 2.4's ``np.unique`` of integers is about 10x slower
    (2.2 s against 0.2 s for 3M int64 values, measured here), and page
    indices go through it on every commit.

    >>> unique(np.array([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    """
    s = np.sort(np.asarray(a))
    if len(s) < 2:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]
