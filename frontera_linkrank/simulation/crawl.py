"""Drive a Frontera backend over a known graph through ``FrontierManager``.

Fetching page ``p`` reports it crawled (status 200) and reveals its
out-links, nothing else; the order in which the frontier hands pages out is
the result.
"""

import os
import shutil
import tempfile

from frontera import FrontierManager, Settings
from frontera.core.models import Request, Response


def simulate(graph, backend, seeds, budget, batch=100, settings=None, workdir=None):
    """Crawl ``graph`` with ``backend`` from ``seeds`` until ``budget`` pages
    are fetched or the frontier is exhausted; return the fetch order.

    ``settings`` (dict) are added to the Frontera settings; a frontera_linkrank
    backend gets a fresh page database under ``workdir`` (a temporary
    directory by default) with fsync off.
    """
    own_dir = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="linkrank-sim-")
    try:
        return _simulate(graph, backend, seeds, budget, batch, settings, workdir)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)


def _simulate(graph, backend, seeds, budget, batch, settings, workdir):
    attrs = {
        "BACKEND": backend,
        "MIDDLEWARES": [],  # fingerprints are precomputed below
        "MAX_NEXT_REQUESTS": batch,
        "LINKRANK_PATH": os.path.join(workdir, "db"),
        "LINKRANK_SYNC": False,
    }
    attrs.update(settings or {})
    manager = FrontierManager.from_settings(Settings(attributes=attrs))
    fps = graph.fingerprints
    urls = graph.urls

    def request(v):
        r = Request(urls[v])
        r.meta[b"fingerprint"] = fps[v]
        return r

    manager.add_seeds([request(v) for v in seeds])
    order = []
    seen = set()
    while len(order) < budget:
        reqs = manager.get_next_requests(min(batch, budget - len(order)))
        if not reqs:
            break
        for r in reqs:
            v = graph.index[r.url]
            if v in seen:
                raise AssertionError(f"page {v} ({r.url}) handed out twice")
            seen.add(v)
            order.append(v)
            manager.page_crawled(Response(r.url, request=r))
            manager.links_extracted(r, [request(w) for w in graph.out(v).tolist()])
    manager.stop()
    return order


BFS = "frontera.contrib.backends.memory.BFS"
LINKRANK = "frontera_linkrank.LinkRankBackend"


def compare(graph, runs, truth, fractions, seeds, budget, batch=100):
    """Run ``runs`` (``{name: (backend, settings)}``) from the same seeds and
    return ``{name: (collected truth at each fraction, seconds, pages)}``."""
    import time

    from .metrics import collected

    out = {}
    for name, (backend, settings) in runs.items():
        t = time.perf_counter()
        order = simulate(graph, backend, seeds, budget, batch=batch, settings=settings)
        out[name] = (collected(order, truth, fractions), time.perf_counter() - t, len(order))
    return out
