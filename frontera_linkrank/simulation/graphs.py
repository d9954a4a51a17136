"""Link graphs as CSR arrays, with URLs for their pages.

:class:`Graph` holds ``indptr``/``indices`` (successors of ``v`` are
``indices[indptr[v]:indptr[v+1]]``), optional URLs and a host per page.
Graphs without URLs (the LAW ``.csr.npz`` files) get generated URLs
``http://<host>/<page>``; host names come from ``hosts`` or a single
synthetic host.
"""

import os

import numpy as np

from ..storage.urls import fingerprint


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

    def __init__(self, indptr, indices, urls=None, hosts=None, name="graph"):
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int64)
        self.n = len(self.indptr) - 1
        self.name = name
        if hosts is None:
            hosts = np.zeros(self.n, np.int64)
        self.hosts = np.asarray(hosts, np.int64)
        if urls is None:
            urls = [f"http://h{h}.{name}.test/p{v}" for v, h in enumerate(self.hosts.tolist())]
        self.urls = urls
        self.index = {u: v for v, u in enumerate(urls)}
        # Frontera's fingerprint of each URL: sha1 of the canonical URL.
        self.fingerprints = [fingerprint(u).hex().encode() for u in urls]

    @property
    def n_edges(self):
        return len(self.indices)

    def out(self, v):
        return self.indices[self.indptr[v] : self.indptr[v + 1]]

    @classmethod
    def from_npz(cls, path, name=None, hosts=None):
        z = np.load(path)
        name = name or os.path.basename(path).split("@")[0].split(".")[0].replace("_", "-")
        return cls(z["indptr"], z["indices"], hosts=hosts, name=name)

    @classmethod
    def from_edges(cls, src, dst, n, urls=None, name="graph"):
        """Build from an edge list (duplicates kept once, sorted successors)."""
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        key = np.unique(src * n + dst)
        src, dst = key // n, key % n
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
        return cls(indptr, dst, urls=urls, name=name)


def load_hollins(folder):
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
