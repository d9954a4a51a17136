"""Loaders for web graphs: the real ones of :mod:`frontera_linkrank.data` (Hollins
and polblogs installed with the package, uk2007 and ukwa in the source
repository's ``datasets/`` folder; see the README of each folder), link
lists, page databases.

- :func:`load_uk2007`: LAW ``uk-2007-05@100000`` (CSR, no URLs). Its node
  ids follow URL order, so a host's pages are contiguous; the host ranges
  are not given and are inferred by :func:`infer_hosts`.
- :func:`load_ukwa_hosts`: the UK Web Archive 1996 host graph (one node per
  host; link counts are dropped, a host-to-host link counts once).
- :func:`load_hollins` (in :mod:`.graphs`): the Hollins site crawl.
- :func:`load_polblogs`: the US political blogs of 2004 (one node per blog).
- :func:`load_pagedb`: the link graph of a previous crawl's page database.
- :func:`load_graph`: any of these (and link lists, CSR ``.npz``) by name
  or path.
"""

import gzip
import os
import re
from collections.abc import Callable
from urllib.parse import urlsplit

import numpy as np

from .. import data
from .graphs import Graph, load_hollins

__all__ = [
    "data_path",
    "infer_hosts",
    "load_edge_list",
    "load_graph",
    "load_hollins",
    "load_pagedb",
    "load_polblogs",
    "load_uk2007",
    "load_ukwa_hosts",
    "merge_same_pages",
]


def data_path(*parts: str) -> str:
    """Path of a real graph's folder or file, e.g. ``data_path("hollins")``.

    See :func:`frontera_linkrank.data.path` (where the graphs not installed
    with the package are looked for, and the error if they are not found).
    """
    return data.path(*parts)


def infer_hosts(indptr: np.ndarray, indices: np.ndarray, window: int = 1000) -> np.ndarray:
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


def load_uk2007(path: str | None = None, window: int = 1000) -> Graph:
    """``uk-2007-05@100000`` with inferred hosts and generated URLs."""
    path = path or data_path("uk-2007-05-100000", "uk-2007-05@100000.csr.npz")
    z = np.load(path)
    hosts = infer_hosts(z["indptr"], z["indices"], window)
    return Graph(z["indptr"], z["indices"], hosts=hosts, name="uk2007")


def load_ukwa_hosts(path: str | None = None) -> Graph:
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


def load_edge_list(path: str, name: str | None = None) -> Graph:
    """A ``SRC_URL<TAB>DST_URL`` link list (gzip accepted), pages in order
    of first appearance."""
    opener = gzip.open if _is_gzip(path) else open
    index, src, dst = {}, [], []
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            a, sep, b = line.partition("\t")
            if not sep:
                raise ValueError(f"{path}:{lineno}: expected SRC_URL<TAB>DST_URL")
            for u in (a, b):
                if u not in index:
                    index[u] = len(index)
            src.append(index[a])
            dst.append(index[b])
    if not index:
        raise ValueError(f"{path}: no links (expected SRC_URL<TAB>DST_URL lines)")
    name = name or os.path.basename(path).split(".")[0]
    return merge_same_pages(Graph.from_edges(src, dst, len(index), urls=list(index), name=name))


def merge_same_pages(g: Graph) -> Graph:
    """URLs with the same Frontera fingerprint (``?b=1&a=2`` and ``?a=2&b=1``,
    ``http://WWW.x.uk/`` and ``http://www.x.uk/``) are one page to a
    frontier: merge them into the first one (links merged, self-links
    kept). Returns ``g`` itself if all fingerprints differ."""
    fps = g.fingerprints
    first = {}
    rep = np.fromiter((first.setdefault(fp, v) for v, fp in enumerate(fps)), np.int64, g.n)
    if len(first) == g.n:
        return g
    keep = np.flatnonzero(rep == np.arange(g.n))
    new_id = np.full(g.n, -1, np.int64)
    new_id[keep] = np.arange(len(keep))
    src = new_id[rep[np.repeat(np.arange(g.n), np.diff(g.indptr))]]
    dst = new_id[rep[g.indices]]
    out = Graph.from_edges(src, dst, len(keep), urls=[g.urls[v] for v in keep.tolist()], name=g.name)
    out.hosts = g.hosts[keep]
    return out


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


_GML_TOKEN = re.compile(r'"[^"]*"|\[|\]|[^\s\[\]"]+')


def _gml_records(path: str, kind: str) -> list[dict[str, str]]:
    """The ``node [...]`` or ``edge [...]`` records of a flat GML file, as
    dictionaries of their scalar fields (quotes removed). Only the records
    directly inside ``graph [...]`` are read; nested lists are refused."""
    with open(path, encoding="utf-8", errors="replace") as f:
        tokens = _GML_TOKEN.findall(f.read())
    records: list[dict[str, str]] = []
    depth, current, key = 0, None, None
    for tok in tokens:
        if tok == "[":
            depth += 1
            if depth == 2:
                current = {} if key == kind else None
            elif depth > 2:
                raise ValueError(f"{path}: nested GML lists are not supported")
            key = None
        elif tok == "]":
            if depth == 2 and current is not None:
                records.append(current)
            depth -= 1
            key = None
        elif key is None:
            key = tok
        else:
            if depth == 2 and current is not None:
                current[key] = tok.strip('"')
            key = None
    return records


def load_polblogs(path: str | None = None) -> Graph:
    """The US political blogs of 2004 (Adamic and Glance): one page per blog.

    Each node's URL is ``http://<label>/`` (the labels are blog addresses
    such as ``atrios.blogspot.com`` or ``12thharmonic.com/wordpress``); its
    host is the host name of that URL. The GML header says ``undirected``
    but its ``source``/``target`` pairs are links from one blog to another:
    they are read as directed arcs source -> target (duplicate arcs once,
    self-links kept): 1,490 blogs, 19,025 distinct links. ``graph.party``
    holds each blog's ``value`` (0 liberal, 1 conservative), unless two URLs
    were one page to a frontier and got merged (not the case in the shipped
    file).
    """
    path = path or data_path("polblogs", "polblogs.gml")
    nodes = _gml_records(path, "node")
    if not nodes:
        raise ValueError(f"{path}: no GML node records")
    index = {int(r["id"]): v for v, r in enumerate(nodes)}
    urls = [f"http://{r['label'].strip()}/" for r in nodes]  # one label ends with a space
    edges = _gml_records(path, "edge")
    src = [index[int(r["source"])] for r in edges]
    dst = [index[int(r["target"])] for r in edges]
    g = Graph.from_edges(src, dst, len(nodes), urls=urls, name="polblogs")
    host_names: dict[str, int] = {}
    g.hosts = np.array([host_names.setdefault(urlsplit(u).hostname or "", len(host_names)) for u in urls],
                       np.int64)
    g.party = np.array([int(r.get("value", -1)) for r in nodes], np.int64)
    merged = merge_same_pages(g)
    if merged is not g:  # blogs merged: a party per merged page is not defined
        del g.party
    return merged


#: The graphs known by name: ``load_graph(name)``.
NAMED: dict[str, Callable[[], Graph]] = {
    "hollins": lambda: load_hollins(data_path("hollins")),
    "uk2007": load_uk2007,
    "ukwa": load_ukwa_hosts,
    "polblogs": load_polblogs,
}


def load_graph(spec: str) -> Graph:
    """A graph from a name (``hollins``, ``uk2007``, ``ukwa``, ``polblogs``: the
    real graphs of :mod:`frontera_linkrank.data`), a Hollins-style folder, a page database
    folder, a CSR ``.npz`` (hosts from its ``hosts`` array, else inferred), a
    UKWA host ``.tsv.gz``, a GML file (read as :func:`load_polblogs` does) or a
    ``SRC_URL<TAB>DST_URL`` list."""
    if spec in NAMED:
        return NAMED[spec]()
    if os.path.isdir(spec):
        if os.path.exists(os.path.join(spec, "hollins.dat")):
            return load_hollins(spec)
        if os.path.exists(os.path.join(spec, "data.mdb")):
            return load_pagedb(spec)
        raise ValueError(
            f"{spec}: a folder, but neither a page database (data.mdb) nor a Hollins-style data set (hollins.dat)"
        )
    if not os.path.exists(spec):
        raise FileNotFoundError(f"{spec}: no such file, and not one of {', '.join(NAMED)}")
    if spec.endswith(".npz"):
        return load_uk2007(spec) if "uk-2007" in os.path.basename(spec) else _npz(spec)
    if spec.endswith(".gml"):
        return load_polblogs(spec)
    with (gzip.open if _is_gzip(spec) else open)(spec, "rt", encoding="utf-8", errors="replace") as f:
        first = f.readline()
    if "|" in first.partition("\t")[0] and first.count("|") >= 2:
        return load_ukwa_hosts(spec)
    return load_edge_list(spec)


def _npz(path: str) -> Graph:
    z = np.load(path)
    if "indptr" not in z or "indices" not in z:
        raise ValueError(f"{path}: expected arrays 'indptr' and 'indices' (CSR out-links)")
    name = os.path.basename(path).split(".")[0].split("@")[0].replace("_", "-") or "graph"
    indptr, indices = z["indptr"], z["indices"]
    n = len(indptr) - 1
    if n < 0 or indptr[0] != 0 or indptr[-1] != len(indices) or np.any(np.diff(indptr) < 0):
        raise ValueError(f"{path}: 'indptr' is not a CSR row pointer for {len(indices)} links")
    if len(indices) and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"{path}: 'indices' has page numbers outside 0..{n - 1}")
    if "hosts" in z:
        hosts = z["hosts"]
        if hosts.shape != (n,):
            raise ValueError(f"{path}: 'hosts' has shape {hosts.shape}, expected ({n},)")
    else:
        hosts = infer_hosts(indptr, indices)
    return Graph(indptr, indices, hosts=hosts, name=name)


def load_pagedb(path: str, name: str | None = None) -> Graph:
    """The link graph of a page database (a previous crawl), read-only.

    Every page the database knows is a node with its URL; the links are the
    current out-links of the crawled pages (pages never fetched have none:
    their links are unknown). Hosts are the database's host ids.
    """
    from ..scoring.links import database_adjacency
    from ..storage.pagedb import PageDB, PageDBError

    try:
        db = PageDB(path, readonly=True)
    except PageDBError as e:
        raise ValueError(str(e)) from None
    try:
        n = db.n_pages
        if n == 0:
            raise ValueError(f"{path}: the page database holds no pages")
        with db.snapshot() as txn:
            urls = db.urls(np.arange(n), txn)
            a = database_adjacency(db, txn, n)
        hosts = db.vertices.host[:n].astype(np.int64)
    finally:
        db.close()
    missing = [i for i, u in enumerate(urls) if u is None]
    if missing:
        raise ValueError(f"{path}: {len(missing)} pages have no stored URL (first: page {missing[0]})")
    g = Graph(a.indptr, a.indices, urls=urls,
              name=name or os.path.basename(os.path.normpath(path)) or "pagedb")
    g.hosts = hosts
    return g
