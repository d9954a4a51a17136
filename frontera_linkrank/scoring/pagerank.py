"""PageRank, plain and personalised, by power iteration (docs/algorithms.md §2).

    x_i <- d * sum_{j -> i} x_j / n_j  +  r_i * (1 - d * sum_{j: n_j > 0} x_j)

``n_j`` is the out-degree of ``j`` and ``r`` the teleport vector: uniform
for plain PageRank, the pages' content scores normalised to sum 1 for
personalised PageRank (TrustRank when ``r`` is 1 on trusted pages). The
mass of dangling pages follows ``r``, so ``x`` keeps summing to 1.

Iteration stops when the L1 change ``sum |x_new - x_old|`` (relative to
``sum x = 1``) falls below ``tol``, or after ``max_iter`` iterations; the
result says which. A per-value criterion (Aduana's "largest change <
1e-4") stops after two iterations at a million pages, where every value is
about 1e-6: don't.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> a = sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]]))
>>> r = pagerank(a)
>>> r.scores.round(4).tolist(), r.stopped
([0.3878, 0.2148, 0.3974], 'tolerance')
>>> pagerank(a, teleport=[1, 0, 0]).scores.round(4).tolist()  # personalised
[0.4522, 0.1922, 0.3556]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..numeric import SCRATCH, l1_change
from .links import LinkOperator, MatrixLinks

if TYPE_CHECKING:
    import scipy.sparse as sp

# Called after each iteration with (iteration, L1 change): progress reports.
Progress = Callable[[int, float], object]


@dataclass
class RankResult:
    """Scores of a power iteration and how it ended."""

    scores: np.ndarray
    iterations: int
    delta: float  # relative L1 change of the last iteration
    converged: bool
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped(self) -> str:
        """``"tolerance"`` or ``"max_iter"``: what stopped the iteration."""
        return "tolerance" if self.converged else "max_iter"


def as_links(graph: sp.spmatrix | LinkOperator) -> LinkOperator:
    """A link operator (see :mod:`.links`) for ``graph``: passed through if it
    already is one, else a sparse adjacency matrix (row = source)."""
    if hasattr(graph, "push") and hasattr(graph, "out_degree"):
        return graph
    return MatrixLinks(graph)


def teleport_vector(n: int, weights: ArrayLike | None = None) -> np.ndarray:
    """Normalised teleport vector: uniform, or ``weights`` (nan and negative
    values count 0). Raises ValueError if no weight is positive."""
    if weights is None:
        return np.full(n, 1.0 / n) if n else np.zeros(0)
    r = np.asarray(weights, np.float64)
    if r.shape != (n,):
        raise ValueError(f"teleport vector has shape {r.shape}, expected ({n},)")
    r = np.where(np.isfinite(r) & (r > 0), r, 0.0)
    total = r.sum()
    if not total > 0:
        raise ValueError("teleport vector has no positive weight")
    return r / total


def pagerank(
    graph: sp.spmatrix | LinkOperator,
    damping: float = 0.85,
    teleport: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 200,
    x0: ArrayLike | None = None,
    callback: Progress | None = None,
) -> RankResult:
    """PageRank of ``graph`` by power iteration.

    Parameters
    ----------
    graph : sparse matrix or link operator
        Adjacency (row = source) or a :mod:`.links` operator (a page
        database snapshot, loaded or streamed).
    damping : float
        Probability of following a link.
    teleport : array of float, optional
        Teleport weights per page (normalised here); uniform if omitted.
    tol : float
        Stop when the L1 change of an iteration is below this.
    max_iter : int
    x0 : array of float, optional
        Start vector (normalised; not modified): a previous result makes a
        recomputation converge in fewer steps. Pages beyond its length
        start at ``1/n``. The teleport vector if omitted.
    callback : callable(iteration, delta), optional
        Called after each iteration (progress reports).

    Returns
    -------
    RankResult
        ``scores`` sum to 1.
    """
    start = time.perf_counter()
    links = as_links(graph)
    n = links.n
    if n == 0:
        return RankResult(np.zeros(0), 0, 0.0, True)
    r = None if teleport is None else teleport_vector(n, teleport)
    # x / out-degree is zero off the sources: it is held for them only.
    src = links.sources
    deg = links.source_degree
    has_links = deg > 0
    x = np.full(n, 1.0 / n) if r is None else r.copy()
    if x0 is not None:
        # A previous result covers the pages it knew; newer ones start at 1/n.
        x0 = np.asarray(x0, np.float64)[:n]
        if x0.sum() > 0:
            x[: len(x0)] = x0
            x /= x.sum()
        del x0  # copied: a caller that handed it over lets it go now
    # x / out-degree: sources without out-links keep 0 (they are never written).
    scaled = np.zeros(len(deg))
    scratch = np.empty(min(n, SCRATCH))  # for the change (see numeric.l1_change)
    delta = np.inf
    it = 0
    while it < max_iter:
        it += 1
        # x times 1/degree, as two passes: no vector of inverses is held.
        np.divide(1.0, deg, out=scaled, where=has_links)
        np.multiply(x if src is None else x[src], scaled, out=scaled, where=has_links)
        y = links.push_sources(scaled)
        y *= damping
        # Teleport plus dangling mass: all that did not flow along a link.
        if r is None:
            y += (1.0 - y.sum()) / n
        else:
            y += r * (1.0 - y.sum())
        delta = l1_change(y, x, scratch)
        x = y
        if callback is not None:
            callback(it, delta)
        if delta < tol:
            break
    return RankResult(x, it, delta, delta < tol, time.perf_counter() - start)
