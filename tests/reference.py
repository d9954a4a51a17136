"""Reference PageRank and HITS for the tests: plain scipy power iterations,
written independently of frontera_linkrank's rankers, run to an L1 change
below 1e-12."""

import numpy as np
import scipy.sparse as sp


def reference_pagerank(a, teleport=None, d=0.85, tol=1e-12):
    """``x <- d P x + r (1 - d sum_{j not dangling} x_j)``, P column-stochastic:
    the dangling mass and the teleport follow ``r`` (uniform unless given).
    ``a`` is a sparse adjacency matrix (row = source, 0/1 entries)."""
    n = a.shape[0]
    deg = np.asarray(a.sum(axis=1)).ravel()
    P = (sp.diags(np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)) @ a).T.tocsr()
    r = np.full(n, 1.0 / n) if teleport is None else teleport / teleport.sum()
    x = r.copy()
    for _ in range(100_000):
        y = d * (P @ x) + r * (1 - d * x[deg > 0].sum())
        done = np.abs(y - x).sum() < tol
        x = y
        if done:
            return x
    raise AssertionError("reference did not converge")


def reference_hits(a, relevance=None, tol=1e-12):
    """Hubs and authorities (each summing to 1) from uniform hubs:
    ``a <- A^T h``, ``h <- A (r * a)``."""
    n = a.shape[0]
    r = np.ones(n) if relevance is None else relevance
    h = np.full(n, 1.0 / n)
    a_ = np.zeros(n)
    at = a.T.tocsr()
    for _ in range(100_000):
        au = at @ h
        au /= au.sum()
        hu = a @ (r * au)
        hu /= hu.sum()
        done = np.abs(au - a_).sum() + np.abs(hu - h).sum() < tol
        a_, h = au, hu
        if done:
            return h, a_
    raise AssertionError("reference did not converge")
