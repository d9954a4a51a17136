"""Reference PageRank and crawl-ordering quality (docs/algorithms.md §6)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def reference_pagerank(
    indptr: ArrayLike, indices: ArrayLike, damping: float = 0.85, tol: float = 1e-12, max_iter: int = 10_000
) -> np.ndarray:
    """PageRank by scipy power iteration in float64, to L1 change < ``tol``.

    Uniform teleport; dangling mass spread uniformly. Duplicate edges count
    once; self-links are kept (they are links).

    >>> reference_pagerank(np.array([0, 1, 2]), np.array([1, 0])).round(3).tolist()
    [0.5, 0.5]
    """
    import scipy.sparse as sp

    indptr = np.asarray(indptr, np.int64)
    n = len(indptr) - 1
    indices = np.asarray(indices, np.int64)
    A = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1.0
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)
    P = (sp.diags(inv) @ A).T.tocsr()
    dangling = deg == 0
    x = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        y = damping * (P @ x)
        y += (1.0 - y.sum()) / n
        delta = np.abs(y - x).sum()
        x = y
        if delta < tol:
            break
    del dangling
    return x


def collected(order: ArrayLike, truth: np.ndarray, fractions: Sequence[float]) -> list[float]:
    """Sum of ``truth`` over the first ``f * N`` fetched pages, per fraction."""
    n = len(truth)
    order = np.asarray(order, np.int64)
    got = np.cumsum(truth[order]) if len(order) else np.zeros(0)
    out = []
    for f in fractions:
        k = int(round(f * n))
        out.append(float(got[min(k, len(got)) - 1]) if k and len(got) else 0.0)
    return out


def top_set(truth: ArrayLike, share: float = 0.01) -> np.ndarray:
    """The ``ceil(share * N)`` pages of highest ``truth`` (ties: lower index)."""
    truth = np.asarray(truth)
    n = len(truth)
    k = max(1, int(np.ceil(share * n)))
    order = np.lexsort((np.arange(n), -truth))
    return order[:k]


def recall(order: ArrayLike, top: ArrayLike, n: int, fractions: Sequence[float]) -> list[float]:
    """Share of the pages ``top`` among the first ``f * n`` fetched, per fraction.

    >>> recall([3, 1, 2], np.array([1, 2]), 4, (0.25, 0.5, 1.0))
    [0.0, 0.5, 1.0]
    """
    top = np.asarray(top, np.int64)
    order = np.asarray(order, np.int64)
    hit = np.zeros(n, bool)
    hit[top] = True
    got = np.cumsum(hit[order]) if len(order) else np.zeros(0, np.int64)
    out = []
    for f in fractions:
        k = int(round(f * n))
        out.append(float(got[min(k, len(got)) - 1]) / len(top) if k and len(got) else 0.0)
    return out


def curve(order: ArrayLike, truth: np.ndarray, budget: int) -> np.ndarray:
    """Cumulative ``truth`` after each of ``budget`` fetches; a crawl that
    stopped early keeps its last value."""
    order = np.asarray(order, np.int64)
    got = np.cumsum(truth[order]) if len(order) else np.zeros(0)
    out = np.empty(budget)
    k = min(len(got), budget)
    out[:k] = got[:k]
    out[k:] = got[k - 1] if k else 0.0
    return out


def area(order: ArrayLike, truth: np.ndarray, budget: int) -> float:
    """Area under the collected-truth curve over the first ``budget`` fetches
    (the sum of the curve); divide by the omniscient crawl's to compare.

    >>> float(area([0, 1], np.array([0.5, 0.25, 0.25]), 3))
    2.0
    """
    return float(curve(order, truth, budget).sum())


def estimate_quality(estimate: ArrayLike, truth: ArrayLike, top_share: float = 0.01) -> tuple[float, float]:
    """How well ``estimate`` ranks pages against ``truth`` (same pages, same
    order): weighted Kendall tau (``scipy.stats.weightedtau``: hyperbolic
    weights, average of both rankings) and the overlap of the top
    ``ceil(top_share * n)`` pages by each (ties: lower index first).

    >>> t = np.array([0.4, 0.3, 0.2, 0.1])
    >>> [round(x, 6) for x in estimate_quality(t * 2, t)]
    [1.0, 1.0]
    >>> round(estimate_quality(t[::-1].copy(), t)[0], 6)
    -1.0
    """
    from scipy.stats import weightedtau

    estimate = np.asarray(estimate, np.float64)
    truth = np.asarray(truth, np.float64)
    n = len(truth)
    if n < 2:
        return math.nan, math.nan
    if not np.ptp(estimate) > 0:
        return math.nan, math.nan  # no estimate yet (all equal): nothing to rank by
    tau = float(weightedtau(estimate, truth).statistic)
    a = set(top_set(estimate, top_share).tolist())
    b = top_set(truth, top_share)
    return tau, len(a.intersection(b.tolist())) / len(b)
