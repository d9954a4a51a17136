"""Link graphs as CSR arrays, with URLs for their pages.

:class:`Graph` holds ``indptr``/``indices`` (successors of ``v`` are
``indices[indptr[v]:indptr[v+1]]``), optional URLs and a host per page.
Graphs without URLs (the LAW ``.csr.npz`` files) get generated URLs
``http://<host>/<page>``; host names come from ``hosts`` or a single
synthetic host.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

import numpy as np
from w3lib.url import canonicalize_url

from ..numeric import unique
from ..storage.urls import fingerprint


def _label(name: object) -> str:
    """``name`` as a DNS label for generated host names."""
    return re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-") or "graph"


class Graph:
    """A directed graph with one URL per node.

    Parameters
    ----------
    indptr, indices : ndarray
        CSR out-link lists.
    urls : list of str, optional
        URL of each node; generated from ``hosts`` when omitted.
    hosts : ndarray of int, optional
        Host number of each node (used for generated URLs).
    name : str
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, urls: list[str] | None = None,
                 hosts: np.ndarray | None = None, name: str = "graph") -> None:
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int64)
        self.n = len(self.indptr) - 1
        self.name = name
        if hosts is None:
            hosts = np.zeros(self.n, np.int64)
        self.hosts = np.asarray(hosts, np.int64)
        generated = urls is None
        if generated:
            urls = [f"http://h{h}.{_label(name)}.test/p{v}" for v, h in enumerate(self.hosts.tolist())]
        self.urls = urls
        self.index = {u: v for v, u in enumerate(urls)}
        # Frontera's fingerprint of each URL: sha1 of the canonical URL.
        # Generated URLs are canonical already (checked on the first one):
        # hashing them directly saves canonicalize_url's ~30 us per page.
        if generated and self.n and canonicalize_url(urls[0]) == urls[0]:
            self.fingerprints = [hashlib.sha1(u.encode("ascii")).hexdigest().encode() for u in urls]
        else:
            self.fingerprints = [fingerprint(u).hex().encode() for u in urls]

    @property
    def n_edges(self) -> int:
        return len(self.indices)

    def out(self, v: int) -> np.ndarray:
        return self.indices[self.indptr[v] : self.indptr[v + 1]]

    @classmethod
    def from_npz(cls, path: str, name: str | None = None, hosts: np.ndarray | None = None) -> Graph:
        z = np.load(path)
        name = name or os.path.basename(path).split("@")[0].split(".")[0].replace("_", "-")
        return cls(z["indptr"], z["indices"], hosts=hosts, name=name)

    @classmethod
    def from_edges(cls, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray, n: int,
                   urls: list[str] | None = None, name: str = "graph") -> Graph:
        """Build from an edge list (duplicates kept once, sorted successors)."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        key = unique(src * n + dst)
        src, dst = key // n, key % n
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
        return cls(indptr, dst, urls=urls, name=name)


def load_hollins(folder: str) -> Graph:
    """The Hollins University crawl (``hollins.dat`` + ``links.dat``)."""
    urls = {}
    with open(os.path.join(folder, "links.dat"), encoding="utf-8", errors="replace") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                urls[int(parts[0])] = parts[1]
    n = max(urls)
    edges = np.loadtxt(os.path.join(folder, "hollins.dat"), skiprows=1, dtype=np.int64).reshape(-1, 2)
    url_list = [urls.get(i + 1, f"http://missing.hollins.test/{i + 1}") for i in range(n)]
    return Graph.from_edges(edges[:, 0] - 1, edges[:, 1] - 1, n, urls=url_list, name="hollins")


def power_law_host_graph(n: int, mean_degree: float = 30.0, pages_per_host: int = 100, internal: float = 0.8,
                         dangling: float = 0.1, seed: int = 0, name: str = "powerlaw") -> Graph:
    """A random web-like graph: pages grouped in hosts of power-law sizes,
    power-law in-degrees, most links inside their host.

    Construction (vectorised, reproducible from ``seed``):

    - ``n // pages_per_host`` hosts with Pareto(1) weights (Zipf-like sizes);
      every host has at least one page; a host's pages are contiguous and
      its first page is its home page.
    - Out-degrees: ``floor(mean_degree * (Lomax(2) + 1) / 2)`` (a power-law
      tail of exponent 3), capped at 1,000; a share ``dangling`` of the
      pages has none.
    - A link stays inside its host with probability ``internal`` (web
      crawls keep 75-90%); its target is page ``floor(size * u**3)`` of the
      host (``u`` uniform), so the home page and the first pages get most
      links and in-degrees follow a power law. Other links go to a host
      drawn by weight and to page ``floor(size * u**6)`` there (mostly
      home pages, as links between sites are).
    - Duplicate links are merged; self-links are dropped.

    Real graphs can rank crawl policies in the opposite order to synthetic
    ones: use this for speed and scale, and the real graphs shipped in
    :mod:`frontera_linkrank.data` to choose a policy.

    >>> g = power_law_host_graph(2000, seed=1)
    >>> g.n, int(g.hosts.max()) + 1, bool(g.n_edges > 20_000)
    (2000, 20, True)
    """
    rng = np.random.default_rng(seed)
    n_hosts = max(1, n // pages_per_host)
    weight = rng.pareto(1.0, n_hosts) + 1.0
    sizes = 1 + rng.multinomial(n - n_hosts, weight / weight.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    hosts = np.repeat(np.arange(n_hosts), sizes)
    deg = np.floor(mean_degree * (rng.pareto(2.0, n) + 1.0) / 2.0).astype(np.int64)
    deg = np.minimum(deg, 1000)
    deg[rng.random(n) < dangling] = 0
    src = np.repeat(np.arange(n), deg)
    m = len(src)
    h = hosts[src]
    inside = rng.random(m) < internal
    # Links leaving the host go to a host drawn by weight (bigger, more
    # popular hosts attract more links).
    out = ~inside
    h[out] = rng.choice(n_hosts, int(out.sum()), p=weight / weight.sum())
    power = np.where(inside, 3.0, 6.0)
    rank = np.floor(sizes[h] * rng.random(m) ** power).astype(np.int64)
    dst = starts[h] + np.minimum(rank, sizes[h] - 1)
    keep = dst != src
    key = unique(src[keep] * n + dst[keep])
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=indptr[1:])
    return Graph(indptr, key % n, hosts=hosts, name=name)
