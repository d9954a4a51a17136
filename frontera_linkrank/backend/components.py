"""Frontera's three backend components, as views of one page database.

Frontera splits a backend into metadata (what is known about pages), a
queue (what to fetch next) and states (per-fingerprint crawl state). Here
all three live in the same LMDB page database and in-memory arrays, so the
components are thin views that delegate to :class:`LinkRankBackend`; they
exist so that code written against Frontera's interfaces works unchanged.
"""

from frontera.core.components import Metadata, Queue, States

from ..storage.urls import RejectedURL
from ..storage.vertices import CRAWLED, ERROR, LEASED, UNFETCHED

# Page state -> Frontera state (a page waiting in the queue is QUEUED).
_FRONTERA_STATE = {UNFETCHED: States.QUEUED, LEASED: States.QUEUED, CRAWLED: States.CRAWLED, ERROR: States.ERROR}


class LinkRankMetadata(Metadata):
    """Metadata: records seeds, crawled pages, links and errors."""

    def __init__(self, backend):
        self.backend = backend

    def add_seeds(self, seeds):
        self.backend.add_seeds(seeds)

    def page_crawled(self, response):
        self.backend.page_crawled(response)

    def links_extracted(self, request, links):
        self.backend.links_extracted(request, links)

    def request_error(self, page, error):
        self.backend.request_error(page, error)


class LinkRankQueue(Queue):
    """Queue: best-first by the configured policy; one partition."""

    def __init__(self, backend):
        self.backend = backend

    def get_next_requests(self, max_n_requests, partition_id=0, **kwargs):
        return self.backend.get_next_requests(max_n_requests, **kwargs)

    def schedule(self, batch):
        """Add the requests of ``(fingerprint, score, request, schedule)``
        tuples with ``schedule`` true as pages; the score becomes the
        page's hint (used by the ``score`` policy)."""
        b = self.backend
        for _fp, score, request, schedule in batch:
            if not schedule:
                continue
            i = b._find_or_create(request)
            if i is not None and score is not None:
                b._set_hint(i, score)
                b.frontier.offer([i])

    def count(self):
        return self.backend.frontier.n_queued


class LinkRankStates(States):
    """States: the crawl state of each fingerprint, read from the page table.

    The page database owns the states (they change through page_crawled,
    request_error and leasing), so writes through this view are not taken:
    ``update_cache`` and ``flush`` do nothing.
    """

    def __init__(self, backend):
        self.backend = backend

    def _state(self, obj):
        b = self.backend
        try:
            i = b.db.find(b._key_of(obj))
        except RejectedURL:
            return States.NOT_CRAWLED
        if i is None:
            return States.NOT_CRAWLED
        return _FRONTERA_STATE[int(b.db.vertices.state[i])]

    def set_states(self, objs):
        objs = objs if isinstance(objs, (list, tuple)) else [objs]
        for obj in objs:
            obj.meta[b"state"] = self._state(obj)

    def update_cache(self, objs):
        pass

    def flush(self, force_clear=False):
        pass

    def fetch(self, fingerprints):
        pass
