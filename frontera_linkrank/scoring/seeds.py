"""Seed sets for a new crawl from an old one: HITS bipartite cores.

docs/algorithms.md §4, after Daneshpajouh, Mohammadi Nasiri and Ghodsi,
"A Fast Community Based Algorithm for Generating Web Crawler Seeds Set"
(WEBIST 2008):

1. drop links between pages of the same host (mostly navigation);
2. run HITS on what is left (at most 60 iterations, as in the paper);
3. grow one bipartite core (hubs H, authorities A) around the best
   authority, alternately adding the best hub (by hub score) linking into
   A and the best authority (by authority score) linked from H, either

   - *fixed size*: ``new_members`` per side and step until
     ``|H| + |A| = core_size``, or
   - *fixed cover density*: one member per step while the cover density
     ``100 |E(H, A)| / (|H| |A|)`` stays at or above ``cover_density``
     (100: complete cores). A step that would break it is not taken and
     that side stops growing while the other may go on; the core is done
     when neither side can grow. (Stopping both sides at once, as the
     paper's loop does, cuts a complete K(12, 9) down to K(9, 9): one
     side runs out of members first.)

   Ties go to the lower page index;
4. take the core's best hub as a seed (the paper picks any; the best one
   is deterministic), remove the core's pages and links, and repeat from 2
   until there are ``k`` seeds;
5. measure the directed distance between cores (shortest path from any
   page of one to any page of the other, on the unpruned graph).

Cost: each round is one HITS run (two sparse products per iteration over
the pruned links; removed pages are masked out, the graph is never
rebuilt) plus a core extraction that reads only the links of the core's
members (candidates are kept as sorted batches merged through a heap, so
the Python work is per core member, not per link).

Query-focused HITS (Kleinberg's base set, "Authoritative sources in a
hyperlinked environment", J. ACM 1999):
:func:`focused_seeds` extracts seeds from the base set of a root set
(the roots, the pages they link to and some of the pages linking to them;
see :func:`base_set`).

Examples
--------
Two complete bipartite cores, K(3,2) and K(2,2), on different hosts:

>>> import numpy as np, scipy.sparse as sp
>>> edges = [(0, 3), (0, 4), (1, 3), (1, 4), (2, 3), (2, 4), (5, 7), (5, 8), (6, 7), (6, 8)]
>>> g = sp.csr_matrix((np.ones(10), tuple(np.array(edges).T)), shape=(9, 9))
>>> result = extract_seeds(g, 2)
>>> result.seeds, [c.hubs for c in result.cores], [c.authorities for c in result.cores]
([0, 5], [[0, 1, 2], [5, 6]], [[3, 4], [7, 8]])
>>> result.cores[0].cover_density, result.cores[0].distances
(100.0, {1: None})
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .hits import hits
from .links import EverySource
from .traversal import base_set, bfs_levels, core_distances

__all__ = [
    "Core",
    "SeedResult",
    "SubgraphLinks",
    "base_set",
    "bfs_levels",
    "core_distances",
    "extract_core",
    "extract_seeds",
    "focused_seeds",
    "prune_same_host",
]


@dataclass
class Core:
    """One extracted bipartite core (page indices sorted)."""

    hubs: list[int]
    authorities: list[int]
    edges: int  # links from the hubs to the authorities
    seed: int
    round: int  # 0-based extraction round
    distances: dict[int, int | None] = field(
        default_factory=dict
    )  # other core's round -> directed distance (None: no path)

    @property
    def cover_density(self) -> float:
        """``100 |E(H, A)| / (|H| |A|)``: 100 for a complete bipartite core."""
        return 100.0 * self.edges / (len(self.hubs) * len(self.authorities)) if self.hubs else 100.0


@dataclass
class SeedResult:
    """Seeds (one per core, in extraction order), the cores, and how each
    round went."""

    seeds: list[int]
    cores: list[Core]
    rounds: list[
        dict[str, Any]
    ]  # per round: iterations, converged, delta, hits_seconds, core_seconds, seconds (all of it)
    links: int = 0  # links HITS ran on (after pruning)
    seconds: float = 0.0


def _rows(a: sp.csr_matrix) -> np.ndarray:
    """Source page of every stored link of CSR ``a``."""
    return np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))


def _keep(a: sp.csr_matrix, keep: np.ndarray) -> sp.csr_matrix:
    """CSR ``a`` with only the links where ``keep`` is set (entries 1)."""
    indptr = np.zeros(a.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(_rows(a)[keep], minlength=a.shape[0]), out=indptr[1:])
    return sp.csr_matrix((np.ones(int(indptr[-1])), a.indices[keep], indptr), shape=a.shape)


def _binary(adjacency: sp.spmatrix | ArrayLike) -> sp.csr_matrix:
    """CSR adjacency with every link counted once and no self-links."""
    a = sp.csr_matrix(adjacency, copy=True)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be square, not {a.shape}")
    a.sum_duplicates()
    return _keep(a, (_rows(a) != a.indices) & (a.data != 0))


def _prune(a: sp.csr_matrix, hosts: ArrayLike) -> sp.csr_matrix:
    hosts = np.asarray(hosts)
    if hosts.shape != (a.shape[0],):
        raise ValueError(f"hosts has shape {hosts.shape}, expected ({a.shape[0]},)")
    return _keep(a, hosts[_rows(a)] != hosts[a.indices])


def prune_same_host(adjacency: sp.spmatrix | ArrayLike, hosts: ArrayLike) -> sp.csr_matrix:
    """Adjacency (CSR, links counted once) without links between pages of
    the same host and without self-links.

    >>> g = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [0, 0, 1]]))
    >>> sorted((int(i), int(j)) for i, j in zip(*prune_same_host(g, [7, 7, 8]).nonzero()))
    [(0, 2)]
    """
    return _prune(_binary(adjacency), hosts)


class SubgraphLinks(EverySource):
    """Link operator (see :mod:`.links`) of the subgraph of the live pages.

    :meth:`remove` takes pages out by zeroing the weight of every link
    touching them (one vectorised pass over the links), so the products
    stay plain sparse products and the matrix is never rebuilt.

    Parameters
    ----------
    csr : csr_matrix
        Adjacency, row = source, entries 1 (not modified).
    csc : csc_matrix, optional
        The same adjacency in CSC (computed if omitted).
    alive : ndarray of bool, optional
        Pages in the subgraph (default: all).
    """

    streamed = False

    def __init__(self, csr: sp.csr_matrix, csc: sp.csc_matrix | None = None, alive: ArrayLike | None = None) -> None:
        csc = csr.tocsc() if csc is None else csc
        self.n = csr.shape[0]
        self.alive = np.ones(self.n, bool) if alive is None else np.asarray(alive, bool).copy()
        # Own weight arrays: the callers' matrices keep their entries.
        self._a = sp.csr_matrix((np.ones(csr.nnz), csr.indices, csr.indptr), shape=csr.shape)
        self._at = sp.csr_matrix((np.ones(csc.nnz), csc.indices, csc.indptr), shape=csc.shape[::-1])
        idx = np.int32 if self.n < 2**31 else np.int64
        self._a_rows = _rows(self._a).astype(idx)
        self._at_rows = _rows(self._at).astype(idx)
        if alive is not None:
            self._reweigh()

    def _reweigh(self) -> None:
        live = self.alive
        np.logical_and(live[self._a_rows], live[self._a.indices], out=self._a.data, casting="unsafe")
        np.logical_and(live[self._at_rows], live[self._at.indices], out=self._at.data, casting="unsafe")

    def remove(self, pages: ArrayLike) -> None:
        """Take ``pages`` and their links out of the subgraph."""
        self.alive[np.asarray(pages, np.int64)] = False
        self._reweigh()

    @property
    def n_links(self) -> int:
        """Links within the subgraph."""
        return int(np.count_nonzero(self._a.data))

    @property
    def out_degree(self) -> np.ndarray:
        """Links of each page within the subgraph."""
        return np.rint(self._a @ np.ones(self.n)).astype(np.int64)

    def push(self, x: np.ndarray) -> np.ndarray:
        """``y[j] = sum(x[i] for live links i -> j)``."""
        return self._at @ x

    def pull(self, y: np.ndarray) -> np.ndarray:
        """``x[i] = sum(y[j] for live links i -> j)``."""
        return self._a @ y


class _BestFirst:
    """Candidates in order of descending score (ties: lower index), fed in
    batches (the neighbours of a new core member). Each batch is sorted
    once with numpy; a heap holds one entry per batch (its best remaining
    candidate), so Python work is per batch and per candidate examined,
    not per link. Candidates that joined the core are skipped lazily."""

    def __init__(self, scores: np.ndarray, members: np.ndarray, alive: np.ndarray) -> None:
        self.scores, self.members, self.alive = scores, members, alive
        self.heap: list[tuple[float, int, int, int]] = []
        self.batches: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, nodes: np.ndarray) -> None:
        nodes = nodes[self.alive[nodes] & ~self.members[nodes]]
        s = self.scores[nodes]
        nodes, s = nodes[s > 0], s[s > 0]
        if len(nodes):
            order = np.lexsort((nodes, -s))
            nodes, s = nodes[order], s[order]
            self.batches.append((nodes, s))
            heapq.heappush(self.heap, (-float(s[0]), int(nodes[0]), len(self.batches) - 1, 0))

    def peek(self) -> int | None:
        """The best candidate not yet a member, or None (not removed)."""
        heap, members = self.heap, self.members
        while heap:
            _, v, b, i = heap[0]
            if not members[v]:
                return v
            nodes, s = self.batches[b]
            i += 1
            while i < len(nodes) and members[nodes[i]]:
                i += 1
            if i < len(nodes):
                heapq.heapreplace(heap, (-float(s[i]), int(nodes[i]), b, i))
            else:
                heapq.heappop(heap)
        return None


class _CoreGrowth:
    """A bipartite core (H, A) as it grows, with the links of each page into
    A and from H kept up to date as members join (each member's links are
    read once), so a density check is O(1)."""

    def __init__(
        self, csr: sp.csr_matrix, csc: sp.csc_matrix, hubs: np.ndarray, authorities: np.ndarray, alive: np.ndarray
    ) -> None:
        n = csr.shape[0]
        self.csr, self.csc = csr, csc
        self.in_h = np.zeros(n, bool)
        self.in_a = np.zeros(n, bool)
        self.to_a = np.zeros(n, np.int64)
        self.from_h = np.zeros(n, np.int64)
        self.H: list[int] = []
        self.A: list[int] = []
        self.edges = 0
        self.hub_cands = _BestFirst(hubs, self.in_h, alive)
        self.auth_cands = _BestFirst(authorities, self.in_a, alive)

    def add_hub(self, v: int, e: int) -> None:
        """Hub ``v`` joins, with ``e`` links into A."""
        self.in_h[v] = True
        self.H.append(v)
        self.edges += e
        out = self.csr.indices[self.csr.indptr[v] : self.csr.indptr[v + 1]]
        self.from_h[out] += 1
        self.auth_cands.add(out)

    def add_authority(self, w: int, e: int) -> None:
        """Authority ``w`` joins, with ``e`` links from H."""
        self.in_a[w] = True
        self.A.append(w)
        self.edges += e
        into = self.csc.indices[self.csc.indptr[w] : self.csc.indptr[w + 1]]
        self.to_a[into] += 1
        self.hub_cands.add(into)

    def grow_to_size(self, core_size: int, new_members: int) -> None:
        """The fixed-size procedure: ``new_members`` per side and step."""
        # Adding a hub changes only the authority candidates (and the
        # reverse), so taking the best one m times is the paper's "top m".
        H, A = self.H, self.A
        while len(H) + len(A) < core_size:
            grew = False
            for _ in range(min(new_members, core_size - len(H) - len(A))):
                v = self.hub_cands.peek()
                if v is None:
                    break
                self.add_hub(v, int(self.to_a[v]))
                grew = True
            for _ in range(min(new_members, core_size - len(H) - len(A))):
                w = self.auth_cands.peek()
                if w is None:
                    break
                self.add_authority(w, int(self.from_h[w]))
                grew = True
            if not grew:
                return

    def grow_dense(self, target: float) -> None:
        """The fixed-density procedure: one member per side and step while
        the cover density stays at or above ``target``."""
        H, A = self.H, self.A
        while True:
            grew = False
            v = self.hub_cands.peek()
            if v is not None:
                e = int(self.to_a[v])
                if 100.0 * (self.edges + e) >= target * (len(H) + 1) * len(A):
                    self.add_hub(v, e)
                    grew = True
            if H:
                w = self.auth_cands.peek()
                if w is not None:
                    e = int(self.from_h[w])
                    if 100.0 * (self.edges + e) >= target * len(H) * (len(A) + 1):
                        self.add_authority(w, e)
                        grew = True
            if not grew:
                return


def extract_core(
    csr: sp.csr_matrix,
    csc: sp.csc_matrix,
    hubs: np.ndarray,
    authorities: np.ndarray,
    alive: np.ndarray | None = None,
    cover_density: float = 100.0,
    core_size: int | None = None,
    new_members: int = 1,
) -> tuple[list[int], list[int], int] | None:
    """Grow one bipartite core around the best live authority (module
    docstring, step 3).

    Parameters
    ----------
    csr, csc : sparse matrix
        Adjacency (row = source, entries 1) in both formats.
    hubs, authorities : ndarray
        HITS scores.
    alive : ndarray of bool, optional
        Pages still in the graph.
    cover_density : float
        Target of the fixed-density procedure, in (0, 100].
    core_size, new_members : int, optional
        Use the fixed-size procedure: ``new_members`` per side and step
        until the core has ``core_size`` pages (or cannot grow).

    Returns
    -------
    (H, A, edges) or None
        Hub and authority lists in order of joining and ``|E(H, A)|``;
        None when no live page has a positive authority score.
    """
    n = csr.shape[0]
    alive = np.ones(n, bool) if alive is None else alive
    a = np.where(alive, authorities, 0.0)
    first = int(np.argmax(a))  # ties: lowest index
    if not a[first] > 0:
        return None
    core = _CoreGrowth(csr, csc, hubs, authorities, alive)
    core.add_authority(first, 0)
    if core_size is not None:
        core.grow_to_size(core_size, new_members)
    else:
        core.grow_dense(float(cover_density))
    return core.H, core.A, core.edges


def extract_seeds(
    adjacency: sp.spmatrix | ArrayLike,
    k: int,
    hosts: ArrayLike | None = None,
    prune: bool = True,
    cover_density: float = 100.0,
    core_size: int | None = None,
    new_members: int = 1,
    iterations: int = 60,
    tol: float = 1e-8,
    distances: bool = True,
) -> SeedResult:
    """``k`` seeds, one per bipartite core (see the module docstring).

    Parameters
    ----------
    adjacency : sparse matrix
        Links, row = source page (duplicates count once, self-links none).
    k : int
        Seeds wanted (fewer if the graph runs out of links).
    hosts : array of int, optional
        Host of each page; with ``prune`` (default), same-host links are
        dropped before ranking.
    prune : bool
    cover_density : float
        Target of the fixed-density procedure, in (0, 100] (100: complete
        cores).
    core_size, new_members : int, optional
        Use the fixed-size procedure instead.
    iterations, tol : int, float
        HITS stops after ``iterations`` (60 in the paper) or at L1 change
        below ``tol``.
    distances : bool
        Fill ``Core.distances`` (directed, on the unpruned graph).

    Returns
    -------
    SeedResult
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    if core_size is None and not 0 < cover_density <= 100:
        raise ValueError("cover_density must be in (0, 100]")
    if core_size is not None and (core_size < 2 or new_members < 1):
        raise ValueError("core_size must be at least 2 and new_members at least 1")
    start = time.perf_counter()
    full = _binary(adjacency)
    g = _prune(full, hosts) if prune and hosts is not None else full
    csc = g.tocsc()
    links = SubgraphLinks(g, csc)
    alive = links.alive
    seeds: list[int] = []
    cores: list[Core] = []
    rounds: list[dict[str, Any]] = []
    for round_ in range(k):
        t = time.perf_counter()
        r = hits(links, tol=tol, max_iter=iterations)
        t2 = time.perf_counter()
        got = extract_core(g, csc, r.hubs, r.authorities, alive, cover_density, core_size, new_members)
        rounds.append(
            {
                "iterations": r.iterations,
                "converged": bool(r.converged),
                "delta": r.delta,
                "hits_seconds": t2 - t,
                "core_seconds": time.perf_counter() - t2,
            }
        )
        if got is None or not got[0]:
            break
        H, A, edges = got
        best = min(H, key=lambda v: (-r.hubs[v], v))
        seeds.append(int(best))
        cores.append(Core(sorted(map(int, H)), sorted(map(int, A)), int(edges), int(best), round_))
        links.remove(H + A)
        rounds[-1]["seconds"] = time.perf_counter() - t
    if distances and cores:
        core_distances(full, cores)
    return SeedResult(seeds, cores, rounds, int(g.nnz), time.perf_counter() - start)


def focused_seeds(
    adjacency: sp.spmatrix | ArrayLike,
    roots: ArrayLike,
    k: int,
    max_in: int = 50,
    max_pages: int | None = 5000,
    hosts: ArrayLike | None = None,
    distances: bool = True,
    **kw: Any,
) -> SeedResult:
    """Query-focused seeds: :func:`extract_seeds` run on the subgraph of
    the base set of ``roots`` (:func:`base_set`); pages are indices of the
    full graph, and core distances are measured on the full graph.
    Keywords are passed on to :func:`extract_seeds`."""
    full = _binary(adjacency)
    keep = base_set(full, roots, max_in, max_pages)
    sub = full[keep][:, keep]
    sub_hosts = None if hosts is None else np.asarray(hosts)[keep]
    res = extract_seeds(sub, k, hosts=sub_hosts, distances=False, **kw)
    res.seeds = [int(keep[s]) for s in res.seeds]
    for c in res.cores:
        c.hubs = [int(keep[v]) for v in c.hubs]
        c.authorities = [int(keep[v]) for v in c.authorities]
        c.seed = int(keep[c.seed])
    if distances and res.cores:
        core_distances(full, res.cores)
    return res
