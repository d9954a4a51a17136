"""HITS hubs and authorities, plain and topic-modulated (docs/algorithms.md §3).

    a_i <- sum_{j -> i} h_j          h_i <- sum_{i -> j} r_j * a_j

then both vectors are normalised to sum 1 (L1: scores read as shares, like
PageRank's, and comparable across recomputations). ``r_j`` is the content
score in [0, 1] (all 1 for plain HITS): an irrelevant page passes no
authority back to the hubs linking to it (Bharat & Henzinger, "Improved
algorithms for topic distillation in a hyperlinked environment", SIGIR
1998). Iteration starts from uniform hubs
and stops when the L1 change of hubs plus authorities is below ``tol``, or
after ``max_iter`` iterations.

Examples
--------
Two hubs pointing at the same two pages, a third hub at one of them:

>>> import numpy as np, scipy.sparse as sp
>>> a = sp.csr_matrix((np.ones(5), ([0, 0, 1, 1, 2], [3, 4, 3, 4, 4])), shape=(5, 5))
>>> r = hits(a)
>>> r.authorities.round(3).tolist(), r.hubs.round(3).tolist()
([0.0, 0.0, 0.0, 0.438, 0.562], [0.39, 0.39, 0.219, 0.0, 0.0])
>>> hits(a, relevance=[1, 1, 1, 0, 1]).hubs.round(3).tolist()  # page 3 is off-topic
[0.333, 0.333, 0.333, 0.0, 0.0]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..numeric import SCRATCH, l1_change
from .links import LinkOperator
from .pagerank import Progress, as_links

if TYPE_CHECKING:
    import scipy.sparse as sp


@dataclass
class HitsResult:
    """Hub and authority scores (each summing to 1) and how the iteration ended."""

    hubs: np.ndarray
    authorities: np.ndarray
    iterations: int
    delta: float
    converged: bool
    seconds: float = 0.0

    @property
    def stopped(self) -> str:
        """``"tolerance"`` or ``"max_iter"``: what stopped the iteration."""
        return "tolerance" if self.converged else "max_iter"


def _normalise(v: np.ndarray) -> np.ndarray:
    s = v.sum()
    if s > 0:
        v /= s
    return v


def relevance_vector(n: int, scores: ArrayLike | None = None, default: float = 1.0) -> np.ndarray | None:
    """Content scores clipped to [0, 1]; pages without one (nan) count
    ``default`` (1: an unknown page is not presumed off-topic)."""
    if scores is None:
        return None
    r = np.asarray(scores, np.float64)
    if r.shape != (n,):
        raise ValueError(f"relevance vector has shape {r.shape}, expected ({n},)")
    return np.clip(np.where(np.isnan(r), default, r), 0.0, 1.0)


def hits(
    graph: sp.spmatrix | LinkOperator,
    relevance: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 200,
    callback: Progress | None = None,
) -> HitsResult:
    """HITS of ``graph`` by power iteration.

    Parameters
    ----------
    graph : sparse matrix or link operator
        Adjacency (row = source) or a :mod:`.links` operator.
    relevance : array of float, optional
        Content score of each page in [0, 1] (nan: unknown, counts 1).
    tol : float
        Stop when the L1 change of hubs plus authorities is below this.
    max_iter : int
    callback : callable(iteration, delta), optional

    Returns
    -------
    HitsResult
    """
    start = time.perf_counter()
    links = as_links(graph)
    n = links.n
    if n == 0:
        return HitsResult(np.zeros(0), np.zeros(0), 0, 0.0, True)
    r = relevance_vector(n, relevance)
    weighted = None if r is None else np.empty(n)  # relevance times authority
    scratch = np.empty(min(n, SCRATCH))  # for the change (see numeric.l1_change)
    # Hubs are zero off the sources (pages with out-links): held for them only.
    src = links.sources
    m = n if src is None else len(src)
    h = np.full(m, 1.0 / n)
    rest = (n - m) / n  # the starting hubs of the other pages, which the first step takes to 0
    a = np.zeros(n)
    delta = np.inf
    it = 0
    while it < max_iter:
        it += 1
        # Each old vector is dropped as soon as its change is known: two
        # vectors of every page at a time, and two of the sources.
        a_new = _normalise(links.push_sources(h))
        delta = l1_change(a_new, a, scratch)
        a = a_new
        h_new = _normalise(links.pull_sources(a if r is None else np.multiply(r, a, out=weighted)))
        delta += l1_change(h_new, h, scratch) + rest
        rest = 0.0
        h = h_new
        if callback is not None:
            callback(it, delta)
        if delta < tol:
            break
    if src is not None:
        h, hubs = np.zeros(n), h
        h[src] = hubs
    return HitsResult(h, a, it, delta, delta < tol, time.perf_counter() - start)
