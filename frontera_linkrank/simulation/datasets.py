"""Loaders for the real web graphs in ``../shared/data`` (see its README).

- :func:`load_uk2007`: LAW ``uk-2007-05@100000`` (CSR, no URLs). Its node
  ids follow URL order, so a host's pages are contiguous; the host ranges
  are not given and are inferred by :func:`infer_hosts`.
- :func:`load_ukwa_hosts`: the UK Web Archive 1996 host graph (one node per
  host; link counts are dropped, a host-to-host link counts once).
- :func:`load_hollins` (in :mod:`.graphs`): the Hollins site crawl.
"""

import gzip
import os

import numpy as np

from .graphs import Graph, load_hollins

HERE = os.path.dirname(os.path.abspath(__file__))
SEARCH = [
    os.path.normpath(os.path.join(HERE, "..", "..", "data")),  # copies shipped with the project
    os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data")),
]

__all__ = ["data_path", "infer_hosts", "load_hollins", "load_uk2007", "load_ukwa_hosts"]


def data_path(*parts):
    """First existing ``data/<parts>`` of the project or ``../shared/data``."""
    for base in SEARCH:
        p = os.path.join(base, *parts)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{os.path.join(*parts)} not found under {' or '.join(SEARCH)}")


def infer_hosts(indptr, indices, window=1000):
    """Host of each node of a graph whose ids follow URL order.

    Most links stay inside a host, and a host's pages are contiguous, so a
    host boundary lies where no *local* link (spanning at most ``window``
    ids) crosses. Blocks of a single page (pages with no local links at
    all) are merged into the preceding block. On uk-2007-05@100000 this
    gives 152 hosts (median 9 pages, largest 8,235) keeping 84% of the
    links inside their host, a share typical of web crawls; it is a
    heuristic, not the crawl's real hosts.

    Returns an int64 array of host numbers, increasing with the node id.
    """
    indptr = np.asarray(indptr, np.int64)
    n = len(indptr) - 1
    src = np.repeat(np.arange(n), np.diff(indptr))
    dst = np.asarray(indices, np.int64)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    local = (hi - lo <= window) & (hi > lo)
    # crossing[v] = local links spanning the boundary between v-1 and v
    delta = np.zeros(n + 1, np.int64)
    np.add.at(delta, lo[local] + 1, 1)
    np.add.at(delta, hi[local] + 1, -1)
    crossing = np.cumsum(delta)[:n]
    start = crossing == 0
    start[0] = True
    # a one-page block (it starts and the next page starts too) joins the previous one
    single = start & np.r_[start[1:], True]
    single[0] = False
    start &= ~single
    return np.cumsum(start) - 1


def load_uk2007(path=None, window=1000):
    """``uk-2007-05@100000`` with inferred hosts and generated URLs."""
    path = path or data_path("uk-2007-05-100000", "uk-2007-05@100000.csr.npz")
    z = np.load(path)
    hosts = infer_hosts(z["indptr"], z["indices"], window)
    return Graph(z["indptr"], z["indices"], hosts=hosts, name="uk2007")


def load_ukwa_hosts(path=None):
    """The UKWA 1996 host link graph: one page per host, ``http://<host>/``."""
    path = path or data_path("ukwa-1996-hosts", "1996-uk-web-hosts.tsv.gz")
    names = {}
    src, dst = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            key, _, _count = line.rstrip("\n").partition("\t")
            parts = key.split("|")
            if len(parts) != 3:
                raise ValueError(f"{path}: unexpected line {line[:80]!r}")
            for h in parts[1:]:
                if h not in names:
                    names[h] = len(names)
            src.append(names[parts[1]])
            dst.append(names[parts[2]])
    urls = [f"http://{h}/" for h in names]
    g = Graph.from_edges(src, dst, len(names), urls=urls, name="ukwa1996")
    g.hosts = np.arange(g.n)  # a host graph: every node is its own host
    return g
