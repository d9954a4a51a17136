"""frontera-linkrank top: the most important pages of a page database,
or the pages the frontier will fetch next.

    frontera-linkrank top PATH [-n 20] [--by importance|pagerank|authority|hub] [--crawled]
    frontera-linkrank top PATH --queued [-n 20] [--policy NAME]

``importance`` is the AOPIC estimate ``(H + C) / (G + sum C)`` of the last
commit (docs/algorithms.md §1); the other names are ranking results stored by
the periodic ranker, when there are any. ``--queued`` lists the queued
pages in the order the frontier hands them out, with their request
priority and the key the crawl policy orders them by (the database's
policy, or ``--policy``; see :mod:`.queued`). The database is opened
read-only, so this works while a crawl writes to it.
"""

from __future__ import annotations

import numpy as np

from ..numeric import top_k
from ..storage.pagedb import PageDB
from ..storage.vertices import STATE_NAMES, UNFETCHED
from .common import SCORE_NAMES, Argv, ToolError, books, open_db, parser, printable_url, scores, tool
from .queued import queued_pages

SCORES = ("importance",) + SCORE_NAMES


def top_pages(
    db: PageDB, n: int = 20, by: str = "importance", crawled_only: bool = False
) -> list[tuple[str | None, float, str]]:
    """The ``n`` best pages of an open page database by ``by``.

    Returns a list of ``(url, value, state name)``, best first (ties in
    discovery order).
    """
    if by not in SCORES:
        raise ToolError(f"unknown score {by!r}: one of {', '.join(SCORES)}")
    v, size = db.vertices, db.n_pages
    values = books(db).importance() if by == "importance" else scores(db, by)
    values = np.where(np.isnan(values), -np.inf, values)
    if crawled_only:
        values = np.where(v.n_crawls[:size] > 0, values, -np.inf)
    order = top_k(values, n)
    order = order[np.isfinite(values[order])]
    with db.snapshot() as txn:
        urls = db.urls(order, txn)
    state = v.state[:size]
    return [(u, float(values[i]), STATE_NAMES.get(int(state[i]), "?")) for i, u in zip(order.tolist(), urls)]


def format_top(rows: list[tuple[str | None, float, str]], by: str = "importance") -> str:
    """Rank, value, state and URL of each row, aligned."""
    if not rows:
        return f"no page has a {by} score yet"
    lines = [f"{'rank':>4}  {by:>10}  {'state':<9}  url"]
    for k, (url, value, state) in enumerate(rows, 1):
        shown = f"{value:.6f}" if value >= 1e-6 or value == 0 else f"{value:.3e}"
        lines.append(f"{k:>4}  {shown:>10}  {state:<9}  {printable_url(url)}")
    return "\n".join(lines)


def _value(value: float) -> str:
    return f"{value:.6f}" if abs(value) >= 1e-6 or value == 0 else f"{value:.3e}"


def format_queued(rows: list[tuple[str | None, int, float]], policy: str) -> str:
    """Rank, priority, key and URL of each queued page, aligned."""
    if not rows:
        return "nothing queued"
    lines = [f"{'rank':>4}  {'priority':>8}  {policy + ' key':>14}  url"]
    for k, (url, priority, key) in enumerate(rows, 1):
        lines.append(f"{k:>4}  {priority:>8}  {_value(key):>14}  {printable_url(url)}")
    return "\n".join(lines)


@tool("frontera-linkrank top")
def main(argv: Argv, prog: str) -> None:
    """Print the best pages of the database at PATH."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("-n", type=int, default=20, help="how many pages (default 20)")
    ap.add_argument("--by", default="importance", choices=SCORES, help="score to rank by (default importance)")
    ap.add_argument("--crawled", action="store_true", help="crawled pages only")
    ap.add_argument("--queued", action="store_true", help="the queued pages, in the order they are handed out")
    ap.add_argument("--policy", help="with --queued: the crawl policy (default: the database's)")
    args = ap.parse_args(argv)
    if args.n < 0:
        raise ToolError("-n must be >= 0")
    db = open_db(args.path)
    if args.queued:
        try:
            policy, queued = queued_pages(db, args.n, args.policy)
            total = int((db.vertices.state[: db.n_pages] == UNFETCHED).sum())
        finally:
            db.close()
        print(f"{args.path}: {total:,} pages queued; the next {len(queued)} by priority, then {policy} key")
        print(format_queued(queued, policy))
        return
    try:
        rows = top_pages(db, args.n, args.by, args.crawled)
        total = db.n_pages
        crawled = int((db.vertices.n_crawls[:total] > 0).sum())
    finally:
        db.close()
    print(f"{args.path}: {total:,} pages known, {crawled:,} crawled; top {len(rows)} by {args.by}")
    print(format_top(rows, args.by))
