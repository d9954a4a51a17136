"""page_db_dump: pages or links of a page database, as text.

    page_db_dump info PATH [--sort COLUMN] [--ascending] [--top N]
    page_db_dump links PATH

``info`` prints a header naming the columns, then one line per page::

    hash index url first_crawl last_crawl n_changes n_crawls depth score importance pagerank authority hub priority key

``hash`` is the page's fingerprint (SHA-1 of its canonical URL, hex),
times are UNIX seconds (0 when never), ``importance`` is the AOPIC
estimate, ``priority`` the page's request priority, ``key`` what the crawl
policy orders the queue by (``frontera-linkrank top --queued``), and a value
not computed yet is ``nan``. ``links`` prints
``from to`` page indices, one current link per line, sorted.
Whitespace inside a URL is printed percent-encoded, so columns stay
space-separated.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np

from ..storage.pagedb import PageDB
from .columns import Column, page_columns
from .common import Argv, fp_hex, open_db, parser, tool, write_lines

COLUMNS = (
    "hash", "index", "url", "first_crawl", "last_crawl", "n_changes", "n_crawls",
    "depth", "score", "importance", "pagerank", "authority", "hub", "priority", "key",
)  # fmt: skip
CHUNK = 10_000


def info_columns(db: PageDB) -> dict[str, Column]:
    """The columns of ``info`` (crawl times in whole seconds)."""
    return {c.name: c for c in page_columns(db, COLUMNS, whole_seconds=True)}


def info_lines(db: PageDB, order: np.ndarray, cols: dict[str, Column]) -> Iterator[str]:
    """The header, then one space-separated line per page of ``order``."""
    yield " ".join(COLUMNS)
    with db.snapshot() as txn:
        for lo in range(0, len(order), CHUNK):
            idx = order[lo : lo + CHUNK]
            texts = [c.text(c.read(db, txn, idx)) for c in cols.values()]
            for row in zip(*texts):
                yield " ".join(row)


def sort_order(db: PageDB, cols: dict[str, Column], column: str, ascending: bool) -> np.ndarray:
    """Page indices sorted by ``column`` (nan last; ties in index order)."""
    n = db.n_pages
    if column in ("hash", "url"):
        keys: list[str] | list[str | None]
        if column == "hash":
            keys = fp_hex(db, np.arange(n))
        else:
            with db.snapshot() as txn:
                keys = db.urls(np.arange(n), txn)
        order = np.array(sorted(range(n), key=keys.__getitem__), np.int64)
        return order if ascending else order[::-1]
    values = cols[column].values
    assert values is not None  # every column but hash and url is an array
    x = values.astype(np.float64)
    x = np.where(np.isnan(x), -np.inf if not ascending else np.inf, x)  # nan last
    # Stable, ties in index order both ways.
    return np.argsort(x if ascending else -x, kind="stable")


@tool("page_db_dump")
def main(argv: Argv, prog: str) -> None:
    """Print the pages (``info``) or links (``links``) of the database at PATH."""
    ap = parser(prog, __doc__)
    sub = ap.add_subparsers(dest="what", required=True)
    info = sub.add_parser("info", help="one line per page")
    info.add_argument("path", help="page database directory")
    info.add_argument("--sort", choices=COLUMNS, help="sort by this column (numbers: largest first)")
    info.add_argument("--ascending", action="store_true", help="smallest first")
    info.add_argument("--top", type=int, metavar="N", help="only the first N lines")
    links = sub.add_parser("links", help="one 'from to' line per link")
    links.add_argument("path", help="page database directory")
    args = ap.parse_args(argv)
    db = open_db(args.path)
    try:
        if args.what == "info":
            cols = info_columns(db)
            order = sort_order(db, cols, args.sort, args.ascending) if args.sort else np.arange(db.n_pages)
            if args.top is not None:
                order = order[: max(args.top, 0)]
            write_lines(info_lines(db, order, cols))
        else:
            write_lines(link_lines(db))
    finally:
        db.close()


def link_lines(db: PageDB) -> Iterator[str]:
    """``from to`` page indices of every current link, sorted."""
    with db.snapshot() as txn:
        src, dst = db.edges.current_edges(txn, db.n_pages)
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    for lo in range(0, len(src), 100_000):
        for a, b in zip(src[lo : lo + 100_000].tolist(), dst[lo : lo + 100_000].tolist()):
            yield f"{a} {b}"


if __name__ == "__main__":
    sys.exit(main())
