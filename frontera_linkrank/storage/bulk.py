"""Bulk loading of a link graph into a page database (no crawl involved).

Used to build a page database from a previous crawl's link list
(``page_db_import``) and by tests and benchmarks that need a database of a
known graph. Pages get their fingerprint and host like crawled ones; pages
with out-links are recorded as crawled once, the others as unfetched.
AOPIC cash is not moved (it stays with the virtual page), so the cash
books balance as in a fresh database.
"""

import numpy as np

from .urls import check_url, fingerprint
from .vertices import CRAWLED


def add_graph(db, urls, src, dst, crawl_time=0.0, fps=None, hosts=None):
    """Add pages ``urls`` and links ``src[k] -> dst[k]`` (indices into
    ``urls``) to the writer ``db``, and commit.

    Pages already in the database are reused (matched by fingerprint); a
    page given links gets them as its current out-links (replacing
    stored ones), without duplicates or self-links.

    Parameters
    ----------
    db : PageDB
        Opened for writing.
    urls : list of str
    src, dst : array of int
    crawl_time : float
        Crawl time recorded for pages with out-links.
    fps : list of bytes, optional
        20-byte fingerprints of ``urls`` (computed if omitted).
    hosts : list of str, optional
        Host name of each URL (taken from the URL if omitted).

    Returns
    -------
    ndarray of int64
        Page index of each URL.
    """
    n = len(urls)
    if fps is None:
        fps = [fingerprint(u) for u in urls]
    if hosts is None:
        hosts = [check_url(u) for u in urls]
    index = np.empty(n, np.int64)
    new = []
    find = db.find
    for k, fp in enumerate(fps):
        i = find(fp)
        if i is None:
            new.append(k)
        else:
            index[k] = i
    if new:
        # A URL listed twice is one page.
        first = {}
        keep = [k for k in new if first.setdefault(fps[k], k) == k]
        start = db.add_pages([fps[k] for k in keep], [urls[k] for k in keep], [db.host_id(hosts[k]) for k in keep])
        for j, k in enumerate(keep):
            index[k] = start + j
        for k in new:
            index[k] = index[first[fps[k]]]
    src = index[np.asarray(src, np.int64)]
    dst = index[np.asarray(dst, np.int64)]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    # Distinct links, grouped by source.
    key = np.unique(src * (db.n_pages + 1) + dst)
    src, dst = key // (db.n_pages + 1), key % (db.n_pages + 1)
    v = db.vertices
    if len(src):
        cuts = np.flatnonzero(np.diff(src)) + 1
        starts = np.r_[0, cuts]
        ends = np.r_[cuts, len(src)]
        for a, b in zip(starts.tolist(), ends.tolist()):
            db.edges.add(int(src[a]), dst[a:b])
        pages = src[starts]
        v.n_out[pages] = ends - starts
        v.state[pages] = CRAWLED
        first = v.n_crawls[pages] == 0
        v.n_crawls[pages[first]] = 1
        v.first_crawl[pages[first]] = crawl_time
        v.last_crawl[pages] = crawl_time
        db.touch(pages)
    db.commit()
    return index
