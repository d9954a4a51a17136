"""What one sample of ``serve-status`` costs on a large page database: the
dashboard's reader thread (reload the last commit, the stats, hosts,
errors) beside what ``page_db_stats`` computes on the same database, in
the same run; and the queue order (``top --queued``: the crawl policy's
keys rebuilt), which the dashboard rebuilds less often (QUEUE_SHARE).

The database is benchmarks/rank.py's generated one (power-law graph, 80%
of links within a host), built once under benchmarks/out/. Prints the best
of ``--repeats`` samples and the ratio to ``stats``.

    python benchmarks/dashboard.py [--pages 1000000] [--links 10000000] [--repeats 3]
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def best(step, repeats):
    out = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        out = min(out, time.perf_counter() - t)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--links", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import rank

    from frontera_linkrank.cli.serve_status import QUEUE_SHARE, Sampler, queue_view
    from frontera_linkrank.cli.stats import summary

    path = os.path.join(rank.OUT, f"rank-{args.pages}-{args.links}")
    rank.build(path, lambda: rank.power_law_graph(args.pages, args.links))
    sampler = Sampler(path, None, "default", None, None, 5.0, 15)
    db = sampler.db  # one environment per process: the baseline reads the same one
    try:
        reload = best(db.reload, args.repeats)
        stats = best(lambda: (db.reload(), summary(db, 15)), args.repeats)
        sampler.sample()  # the first builds the queue order: the next ones reuse it
        sample = best(sampler.sample, args.repeats)
        queue = best(lambda: queue_view(db, 15), args.repeats)
        n = db.n_pages
    finally:
        sampler.stop()
    print(f"{n:,} pages, {args.links:,} links: reload {reload:.2f} s, stats {stats:.2f} s, "
          f"dashboard sample {sample:.2f} s ({sample / stats:.1f}x stats); queue order {queue:.2f} s "
          f"({queue / stats:.1f}x stats), rebuilt every {queue / QUEUE_SHARE:.0f} s at most")


if __name__ == "__main__":
    main()
