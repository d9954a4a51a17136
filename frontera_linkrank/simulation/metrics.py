"""Reference PageRank and crawl-ordering quality (ALGORITHMS.md §6)."""

import numpy as np


def reference_pagerank(indptr, indices, damping=0.85, tol=1e-12, max_iter=10_000):
    """PageRank by scipy power iteration in float64, to L1 change < ``tol``.

    Uniform teleport; dangling mass spread uniformly. Duplicate edges count
    once; self-links are kept (they are links).

    >>> reference_pagerank(np.array([0, 1, 2]), np.array([1, 0])).round(3).tolist()
    [0.5, 0.5]
    """
    import scipy.sparse as sp

    n = len(indptr) - 1
    indptr = np.asarray(indptr, np.int64)
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


def collected(order, truth, fractions):
    """Sum of ``truth`` over the first ``f * N`` fetched pages, per fraction."""
    n = len(truth)
    got = np.cumsum(truth[np.asarray(order, np.int64)]) if len(order) else np.zeros(0)
    out = []
    for f in fractions:
        k = int(round(f * n))
        out.append(float(got[min(k, len(got)) - 1]) if k and len(got) else 0.0)
    return out
