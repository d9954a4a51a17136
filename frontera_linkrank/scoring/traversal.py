"""Breadth-first walks over a link graph for seed extraction: directed
distances (:func:`bfs_levels`, :func:`core_distances`) and Kleinberg's base
set of a root set (:func:`base_set`). Graphs are scipy sparse adjacency
matrices (row = source); every walk is vectorised per level.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike


class CoreLike(Protocol):
    """The fields of a bipartite core a distance walk reads and fills
    (:class:`~frontera_linkrank.scoring.seeds.Core` has them)."""

    hubs: list[int]
    authorities: list[int]
    round: int
    distances: dict[int, int | None]


C = TypeVar("C", bound=CoreLike)

__all__ = ["base_set", "bfs_levels", "core_distances"]


def _gather(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenated neighbour lists of ``rows`` (vectorised)."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return indices[offsets + np.arange(int(lens.sum()))]


def bfs_levels(adjacency: sp.spmatrix, sources: ArrayLike, max_depth: int | None = None) -> np.ndarray:
    """Directed distance from the set ``sources`` to every page (-1:
    unreachable, or deeper than ``max_depth``).

    >>> g = sp.csr_matrix((np.ones(3), ([0, 1, 3], [1, 2, 0])), shape=(4, 4))
    >>> bfs_levels(g, [0]).tolist()
    [0, 1, 2, -1]
    """
    g = sp.csr_matrix(adjacency)
    dist = np.full(g.shape[0], -1, np.int64)
    frontier = np.unique(np.asarray(sources, np.int64))
    dist[frontier] = 0
    depth = 0
    while len(frontier) and (max_depth is None or depth < max_depth):
        depth += 1
        nxt = np.unique(_gather(g.indptr, g.indices, frontier))
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = depth
        frontier = nxt
    return dist


def core_distances(adjacency: sp.spmatrix, cores: list[C]) -> list[C]:
    """Fill ``core.distances[other.round]``: the shortest directed path
    from any page of ``core`` to any page of ``other`` (None: no path).
    One breadth-first search per core, stopped once every other core is
    reached."""
    g = sp.csr_matrix(adjacency)
    owner = np.full(g.shape[0], -1, np.int64)
    for j, c in enumerate(cores):
        owner[c.hubs + c.authorities] = j
    for i, c in enumerate(cores):
        found: dict[int, int] = {}
        seen = np.zeros(g.shape[0], bool)
        frontier = np.unique(np.asarray(c.hubs + c.authorities, np.int64))
        seen[frontier] = True
        depth = 0
        while len(frontier) and len(found) < len(cores) - 1:
            depth += 1
            nxt = np.unique(_gather(g.indptr, g.indices, frontier))
            nxt = nxt[~seen[nxt]]
            seen[nxt] = True
            for j in np.unique(owner[nxt]).tolist():
                if j >= 0 and j != i:
                    found.setdefault(j, depth)
            frontier = nxt
        c.distances = {other.round: found.get(j) for j, other in enumerate(cores) if j != i}
    return cores


def base_set(adjacency: sp.spmatrix, roots: ArrayLike, max_in: int = 50, max_pages: int | None = 5000) -> np.ndarray:
    """Kleinberg's base set of a root set (docs/algorithms.md §4).

    The roots, every page they link to, and up to ``max_in`` pages linking
    to each root (those with the most out-links first: likely hubs; ties
    by index). If that exceeds ``max_pages``, the roots are kept and the
    other pages ranked by how many links join them to the roots (ties by
    index). Returns sorted page indices.

    >>> g = sp.csr_matrix((np.ones(4), ([0, 1, 2, 3], [1, 2, 0, 4])), shape=(5, 5))
    >>> base_set(g, [1]).tolist()
    [0, 1, 2]
    """
    g = sp.csr_matrix(adjacency)
    n = g.shape[0]
    roots = np.unique(np.asarray(roots, np.int64))
    if len(roots) and (roots[0] < 0 or roots[-1] >= n):
        raise ValueError("root page index out of range")
    csc = g.tocsc()
    out_deg = np.diff(g.indptr)
    outs = _gather(g.indptr, g.indices, roots)
    ins = _gather(csc.indptr, csc.indices, roots)
    owner = np.repeat(np.arange(len(roots)), np.diff(csc.indptr)[roots])
    # Per root, the in-neighbours ranked by (-out-degree, index): keep max_in.
    order = np.lexsort((ins, -out_deg[ins], owner))
    ins, owner = ins[order], owner[order]
    first = np.searchsorted(owner, owner, side="left")
    ins = ins[np.arange(len(ins)) - first < max_in]
    cand = np.concatenate([outs, ins]).astype(np.int64)
    is_root = np.zeros(n, bool)
    is_root[roots] = True
    cand = cand[~is_root[cand]]
    ties = np.bincount(cand, minlength=n)
    others = np.flatnonzero(ties)
    if max_pages is not None and len(roots) + len(others) > max_pages:
        room = max(0, max_pages - len(roots))
        others = others[np.lexsort((others, -ties[others]))[:room]]
    return np.union1d(roots, others).astype(np.int64)
