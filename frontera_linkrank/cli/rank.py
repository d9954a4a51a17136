"""page_db_rank: compute PageRank and/or HITS offline and store the scores.

    page_db_rank PATH [--algorithm pagerank|hits|both] [--personalized]
                      [--inter-host] [--edges auto|memory|stream]
                      [--tol T] [--max-iter N] [--damping D]

Ranks the current links of the page database on one snapshot and stores
the vectors (``pagerank``, or ``authority`` and ``hub``) that
``page_db_dump info``, ``page_db_stats`` and ``page_db_export`` show, and
that a crawl resumed on the database schedules with (policies
``pagerank``, ``hits``, ``hybrid``). Prints, for each algorithm, the
iterations, the final L1 change and what stopped it (``tolerance`` or
``max_iter``).

``--personalized`` teleports PageRank to pages in proportion to their
content score (and modulates HITS by it); ``--inter-host`` ranks on links
between different hosts only; ``--edges`` loads the links in memory or
streams them from LMDB on every iteration (``auto``: memory while they fit
``--memory-limit``).

Storing scores needs the page database's writer lock: while a crawl
writes to it, this tool fails with exit status 2 and says so (the crawl
can rank periodically itself, LINKRANK_RANK_* settings). Exit status 0
when stored (a note is printed when an algorithm hit --max-iter first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..scoring.ranker import RankConfig, Ranking, rank_snapshot, store
from ..settings import LinkRankSettings
from ..storage.pagedb import PageDB, WriterLockedError
from .common import Argv, ToolError, parser, tool

CHOICES = {"pagerank": ("pagerank",), "hits": ("hits",), "both": ("pagerank", "hits")}


def open_writer(path: str, prog: str) -> PageDB:
    """Open an existing page database for writing, with clear messages."""
    if not os.path.isdir(path):
        raise ToolError(f"{path}: no such directory" if not os.path.exists(path) else f"{path}: not a directory")
    if not os.path.exists(os.path.join(path, "data.mdb")):
        raise ToolError(f"{path}: no page database here (no data.mdb)")
    try:
        return PageDB(path)
    except WriterLockedError as e:
        raise ToolError(
            f"{e}. {prog} stores scores and needs the writer lock: run it when the crawl has "
            "stopped, or let the crawl rank periodically (LINKRANK_RANK_* settings)"
        ) from None


def arguments(prog: str) -> argparse.ArgumentParser:
    """The tool's argument parser (defaults: the crawl's LINKRANK_RANK_* and LINKRANK_DAMPING defaults)."""
    defaults = RankConfig.from_settings(LinkRankSettings())
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("--algorithm", choices=sorted(CHOICES), default="both", help="default: %(default)s")
    ap.add_argument("--personalized", action="store_true", help="teleport by the pages' content scores")
    ap.add_argument("--inter-host", action="store_true", help="only links between different hosts")
    ap.add_argument("--edges", choices=("auto", "memory", "stream"), default=defaults.edges,
                    help="load links in memory or stream them from LMDB (default %(default)s)")
    ap.add_argument("--memory-limit", type=int, default=defaults.memory_limit, metavar="BYTES",
                    help="--edges auto loads links taking up to this much memory (default %(default)s)")
    ap.add_argument("--tol", type=float, default=defaults.tol,
                    help="stop when the L1 change of an iteration is below this (default %(default)s)")
    ap.add_argument("--max-iter", type=int, default=defaults.max_iter, metavar="N",
                    help="at most this many iterations (default %(default)s)")
    ap.add_argument("--damping", type=float, default=defaults.damping,
                    help="PageRank damping (default %(default)s)")
    return ap  # fmt: skip


def rank_config(args: argparse.Namespace) -> RankConfig:
    """The ranking the arguments ask for (checked)."""
    if not args.tol > 0:
        raise ToolError("--tol must be positive")
    if args.max_iter < 1:
        raise ToolError("--max-iter must be at least 1")
    if not 0 < args.damping < 1:
        raise ToolError("--damping must be between 0 and 1")
    return RankConfig(
        algorithms=CHOICES[args.algorithm],
        personalized=args.personalized,
        inter_host=args.inter_host,
        edges=args.edges,
        memory_limit=args.memory_limit,
        damping=args.damping,
        tol=args.tol,
        max_iter=args.max_iter,
    )


def report(ranking: Ranking, args: argparse.Namespace, seconds: float) -> None:
    """What was ranked, how each algorithm stopped, and what was stored."""
    first = next(iter(ranking.info.values()), {})
    print(
        f"ranked {ranking.n_pages:,} pages, {first.get('n_links', 0):,} links "
        f"({first.get('edges', '?')}{', inter-host' if args.inter_host else ''}), version {ranking.version}, "
        f"in {seconds:.2f} s"
    )
    capped = []
    for algo, name in (("pagerank", "pagerank"), ("hits", "authority")):
        info = ranking.info.get(name)
        if info is None:
            continue
        personal = " personalized" if info.get("personalized") else ""
        print(
            f"{algo}{personal}: {info['iterations']} iterations, final L1 change {info['delta']:.3e}, "
            f"stopped by {info['stopped']} ({info['seconds']:.2f} s)"
        )
        if info["stopped"] != "tolerance":
            capped.append(algo)
    for algo in capped:
        print(
            f"note: {algo} stopped at --max-iter {args.max_iter} before reaching --tol {args.tol:g}; "
            "scores stored anyway"
        )
    stored = ", ".join(ranking.vectors)
    print(f"stored {stored} in {args.path}")


@tool("page_db_rank")
def main(argv: Argv, prog: str) -> int:
    """Rank the database at PATH and store the scores (needs the writer lock)."""
    args = arguments(prog).parse_args(argv)
    config = rank_config(args)
    db = open_writer(args.path, prog)
    try:
        started = time.perf_counter()
        ranking = rank_snapshot(db, config)
        store(db, ranking)
        seconds = time.perf_counter() - started
    finally:
        db.close()
    report(ranking, args, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
