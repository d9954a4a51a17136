"""Helpers shared by tests: requests with fingerprints, crawl drivers."""

import hashlib

from frontera.core.models import Request, Response


def req(url, **meta):
    r = Request(url)
    r.meta[b"fingerprint"] = hashlib.sha1(url.encode()).hexdigest().encode()
    for k, v in meta.items():
        r.meta[k.encode()] = v
    return r


def crawl(backend, request, links=(), status=200, **meta):
    """page_crawled + links_extracted for one handed-out request."""
    resp = Response(request.url, status_code=status, request=request)
    for k, v in meta.items():
        resp.meta[k.encode()] = v
    backend.page_crawled(resp)
    backend.links_extracted(request, [req(l) if isinstance(l, str) else l for l in links])


def url(i, host=None):
    host = host if host is not None else f"h{i % 7}.test"
    return f"http://{host}/p{i}"


def crawl_graph(backend, adjacency, seeds, batch=10, max_pages=None, on_batch=None):
    """Crawl a graph given as {url: [urls]} through the backend API; return
    the fetch order."""
    backend.add_seeds([req(u) for u in seeds])
    order = []
    while max_pages is None or len(order) < max_pages:
        reqs = backend.get_next_requests(batch)
        if on_batch:
            on_batch(backend)
        if not reqs:
            break
        for r in reqs:
            order.append(r.url)
            crawl(backend, r, adjacency.get(r.url, ()))
    return order


def page_index(db, url):
    """Index of the page of ``url`` in a PageDB (None if unknown)."""
    return db.find(bytes.fromhex(req(url).meta[b"fingerprint"].decode()))
