"""Does a background ranking stall the crawl? Pages per second through the
backend API while a PageRank runs in the background thread, beside the
same crawl with no ranking, in the same run.

The database is benchmarks/rank.py's generated 1M-page / 10M-link one
(built there, copied here so the crawl does not change it); the crawl
fetches new pages (10 links each) in batches of 50 for a few seconds, once
with ranking off and once while a ranking that never converges runs.

    python benchmarks/background_ranking.py [--seconds 5]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
from frontera.core.models import Request, Response

from frontera_linkrank import LinkRankBackend

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args(argv)
    import rank

    src_db = os.path.join(rank.OUT, "rank-1000000-10000000")
    rank.build(src_db, lambda: rank.power_law_graph(1_000_000, 10_000_000))
    work = tempfile.mkdtemp(prefix="linkrank-bg-")
    try:
        shutil.copytree(src_db, os.path.join(work, "db"))
        b = LinkRankBackend(settings={
            "LINKRANK_PATH": os.path.join(work, "db"), "LINKRANK_SYNC": False, "LINKRANK_POLICY": "pagerank",
            "LINKRANK_RANK_EVERY_PAGES": 1, "LINKRANK_RANK_GROWTH": 0, "LINKRANK_RANK_INTERVAL": 0,
        })  # fmt: skip
        b.core.ranking.config.tol = -1.0  # never converges: runs until cancelled
        b.core.ranking.config.max_iter = 10**9
        urls = [f"http://h{i % 5000}.new.test/p{i}" for i in range(300_000)]
        rng = np.random.default_rng(1)

        def req(u):
            return Request(u)

        b.add_seeds([req(u) for u in urls[:2000]])

        def step():
            reqs = b.get_next_requests(50)
            for r in reqs:
                b.page_crawled(Response(r.url, request=r))
                b.links_extracted(r, [req(urls[j]) for j in rng.integers(0, len(urls), 10)])
            return len(reqs)

        def measure(while_ranking):
            pages, worst, t0 = 0, 0.0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                t = time.perf_counter()
                pages += step()
                worst = max(worst, time.perf_counter() - t)
                if while_ranking and not b.core.ranking.ranker.running:
                    raise RuntimeError("the ranking ended during the measurement")
            return pages / (time.perf_counter() - t0), worst

        config, b.core.ranking.config = b.core.ranking.config, None
        step()
        alone, worst_alone = measure(False)
        b.core.ranking.config = config
        step()  # starts the ranking
        during, worst_during = measure(True)
        b.core.ranking.ranker.cancel()
        b.frontier_stop()
        print(f"1M pages / 10M links: crawl alone {alone:,.0f} pages/s (worst call {worst_alone * 1e3:.0f} ms), "
              f"during a background PageRank {during:,.0f} pages/s (worst call {worst_during * 1e3:.0f} ms): "
              f"ratio {during / alone:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
