"""Ingest throughput: page_crawled + links_extracted + get_next_requests.

A synthetic web where page ``p`` links to 5 pages of its own (``5p+1`` ..
``5p+5``, new when found) and 5 pages drawn from a Zipf law over the pages
before it (mostly known already), 10 links per page over 5,000 hosts. The
crawl follows whatever the backend hands out, in batches, until the
database holds ``--pages`` pages (1M by default: ~200,000 crawled pages,
2M links).

Only the time spent inside the backend's methods is counted: building
request objects (the crawler's or Frontera's middleware's work) is done
outside the timed region, for both backends alike. Frontera's memory FIFO
backend runs on the same stream in the same process as the baseline.

    python benchmarks/ingest.py                 # 1M pages, LMDB sync on
    python benchmarks/ingest.py --pages 200000 --no-sync
"""

import argparse
import gc
import hashlib
import os
import shutil
import sys
import tempfile
import time

import numpy as np
from frontera import FrontierManager, Settings
from frontera.core.models import Request, Response

LINKS_OWN = 5
LINKS_POPULAR = 5
HOSTS = 5000


def url_of(p):
    return f"http://h{p % HOSTS}.example.com/page/{p}"


def page_of(url):
    return int(url.rsplit("/", 1)[1])


def make_request(p):
    u = url_of(p)
    r = Request(u)
    r.meta[b"fingerprint"] = hashlib.sha1(u.encode()).hexdigest().encode()
    return r


def links_of(p):
    rng = np.random.default_rng(p)
    own = range(LINKS_OWN * p + 1, LINKS_OWN * p + LINKS_OWN + 1)
    popular = (rng.zipf(1.3, LINKS_POPULAR) - 1) % max(p, 1)
    return [*own, *popular.tolist()]


class GcClock:
    """Seconds CPython's cyclic garbage collector runs while :attr:`inside`
    is set (the backend's calls), per generation (2: full collections)."""

    def __init__(self):
        self.inside = False
        self.seconds = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if not self.inside:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds[info["generation"]] += time.perf_counter() - self._start
            self.count[info["generation"]] += 1

    def close(self):
        gc.callbacks.remove(self._callback)
        return self


def run(backend, target_pages, batch, known, report_every):
    """Crawl until ``known()`` reaches ``target_pages``; return checkpoints
    ``(known pages, crawled pages, links, seconds in backend)`` and the
    :class:`GcClock` of the backend's calls."""
    spent = 0.0
    crawled = links = 0
    checkpoints = []
    next_report = report_every
    clock = GcClock()
    clock.inside = True
    t = time.perf_counter()
    backend.add_seeds([make_request(0)])
    spent += time.perf_counter() - t
    while True:
        clock.inside = True
        t = time.perf_counter()
        reqs = backend.get_next_requests(batch)
        spent += time.perf_counter() - t
        clock.inside = False
        if not reqs:
            break
        work = []
        for r in reqs:
            ls = [make_request(q) for q in links_of(page_of(r.url))]
            work.append((Response(r.url, request=r), r, ls))
            links += len(ls)
        clock.inside = True
        t = time.perf_counter()
        for resp, r, ls in work:
            backend.page_crawled(resp)
            backend.links_extracted(r, ls)
        spent += time.perf_counter() - t
        clock.inside = False
        crawled += len(reqs)
        n = known()
        if n >= next_report:
            checkpoints.append((n, crawled, links, spent))
            next_report += report_every
        if n >= target_pages:
            break
    return checkpoints, clock.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1_000_000, help="stop when the database holds this many pages")
    ap.add_argument("--batch", type=int, default=1000, help="requests per get_next_requests")
    ap.add_argument("--no-sync", action="store_true", help="LINKRANK_SYNC=False")
    ap.add_argument("--policy", default=None, help="LINKRANK_POLICY (default: the settings' default)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more LINKRANK_* settings")
    args = ap.parse_args(argv)
    report = max(args.pages // 4, 1)

    from frontera_linkrank import LinkRankBackend

    tmp = tempfile.mkdtemp(prefix="linkrank-ingest-")
    try:
        backend = LinkRankBackend(
            settings={
                "LINKRANK_PATH": os.path.join(tmp, "db"),
                "LINKRANK_SYNC": not args.no_sync,
                **({"LINKRANK_POLICY": args.policy} if args.policy else {}),
                **dict(s.split("=", 1) for s in args.set),
            }
        )
        policy = backend.core.settings.POLICY
        gc.collect()
        ours, ours_gc = run(backend, args.pages, args.batch, lambda: backend.db.n_pages, report)
        rankings = backend.core.counters.get("rankings", 0)
        t = time.perf_counter()
        backend.frontier_stop()
        close_s = time.perf_counter() - t
        size = sum(os.path.getsize(os.path.join(tmp, "db", f)) for f in os.listdir(os.path.join(tmp, "db")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    manager = FrontierManager.from_settings(Settings(attributes={"BACKEND": "frontera.contrib.backends.memory.FIFO"}))
    fifo = manager.backend
    gc.collect()
    base, base_gc = run(fifo, args.pages, args.batch, lambda: len(fifo.metadata.requests), report)

    print(f"python {sys.version.split()[0]}, policy {policy}, sync {not args.no_sync}, batch {args.batch}")
    print(
        f"{'known pages':>12} {'crawled':>9} {'linkrank p/s':>13} {'links/s':>10} {'memory FIFO p/s':>16} {'ratio':>6}"
    )
    for (n, c, l, s), (_, c2, _, s2) in zip(ours, base):
        print(f"{n:>12,} {c:>9,} {c / s:>13,.0f} {l / s:>10,.0f} {c2 / s2:>16,.0f} {(c / s) / (c2 / s2):>6.2f}")
    print(
        f"final commit and close: {close_s:.2f} s; database size {size / 2**20:.0f} MiB; rankings installed: {rankings}"
    )
    for name, checkpoints, clock in (("linkrank", ours, ours_gc), ("memory FIFO", base, base_gc)):
        print(f"{name}: cyclic GC {sum(clock.seconds):.1f} s of {checkpoints[-1][3]:.1f} s in the backend's calls, "
              f"{clock.seconds[2]:.1f} s in {clock.count[2]} full collections")


if __name__ == "__main__":
    main()
