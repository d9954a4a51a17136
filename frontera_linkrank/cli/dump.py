"""page_db_dump: pages or links of a page database, as text.

    page_db_dump info PATH [--sort COLUMN] [--ascending] [--top N]
    page_db_dump links PATH

``info`` prints a header naming the columns, then one line per page::

    hash index url first_crawl last_crawl n_changes n_crawls depth score importance pagerank authority hub

``hash`` is the page's fingerprint (SHA-1 of its canonical URL, hex),
times are UNIX seconds (0 when never), ``importance`` is the AOPIC
estimate, and a value not computed yet is ``nan``. ``links`` prints
``from to`` page indices, one current link per line, sorted.
Whitespace inside a URL is printed percent-encoded, so columns stay
space-separated.
"""

import re
import sys

import numpy as np

from .common import books, fmt_float, fp_hex, open_db, parser, scores, tool, write_lines

COLUMNS = (
    "hash", "index", "url", "first_crawl", "last_crawl", "n_changes", "n_crawls",
    "depth", "score", "importance", "pagerank", "authority", "hub",
)  # fmt: skip
_SPACE = re.compile(r"\s")
CHUNK = 10_000


def quote_spaces(url):
    return _SPACE.sub(lambda m: "%%%02X" % ord(m.group()), url) if _SPACE.search(url) else url


def numeric_columns(db):
    """The numeric columns of ``info`` as arrays over all pages."""
    v, n = db.vertices, db.n_pages
    cols = {
        "index": np.arange(n),
        "first_crawl": np.rint(v.first_crawl[:n]).astype(np.int64),
        "last_crawl": np.rint(v.last_crawl[:n]).astype(np.int64),
        "n_changes": v.n_changes[:n].astype(np.int64),
        "n_crawls": v.n_crawls[:n].astype(np.int64),
        "depth": v.depth[:n].astype(np.int64),
        "score": v.score[:n].astype(np.float64),
        "importance": books(db).importance(),
    }
    for name in ("pagerank", "authority", "hub"):
        cols[name] = scores(db, name)
    return cols


def info_lines(db, order, cols):
    yield " ".join(COLUMNS)
    ints = ("index", "first_crawl", "last_crawl", "n_changes", "n_crawls", "depth")
    floats = ("score", "importance", "pagerank", "authority", "hub")
    with db.snapshot() as txn:
        for lo in range(0, len(order), CHUNK):
            idx = order[lo : lo + CHUNK]
            hashes = fp_hex(db, idx)
            urls = db.urls(idx, txn)
            iv = [cols[c][idx].tolist() for c in ints]
            fv = [[fmt_float(x) for x in cols[c][idx].tolist()] for c in floats]
            for k in range(len(idx)):
                yield " ".join(
                    (hashes[k], str(iv[0][k]), quote_spaces(urls[k]))
                    + tuple(str(col[k]) for col in iv[1:])
                    + tuple(col[k] for col in fv)
                )


def sort_order(db, cols, column, ascending):
    n = db.n_pages
    if column in ("hash", "url"):
        if column == "hash":
            keys = fp_hex(db, np.arange(n))
        else:
            with db.snapshot() as txn:
                keys = db.urls(np.arange(n), txn)
        order = np.array(sorted(range(n), key=keys.__getitem__), np.int64)
        return order if ascending else order[::-1]
    x = cols[column].astype(np.float64)
    x = np.where(np.isnan(x), -np.inf if not ascending else np.inf, x)  # nan last
    # Stable, ties in index order both ways.
    return np.argsort(x if ascending else -x, kind="stable")


@tool("page_db_dump")
def main(argv=None):
    ap = parser("page_db_dump", __doc__)
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
            cols = numeric_columns(db)
            order = sort_order(db, cols, args.sort, args.ascending) if args.sort else np.arange(db.n_pages)
            if args.top is not None:
                order = order[: max(args.top, 0)]
            write_lines(info_lines(db, order, cols))
        else:
            write_lines(link_lines(db))
    finally:
        db.close()


def link_lines(db):
    with db.snapshot() as txn:
        src, dst = db.edges.current_edges(txn, db.n_pages)
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    for lo in range(0, len(src), 100_000):
        for a, b in zip(src[lo : lo + 100_000].tolist(), dst[lo : lo + 100_000].tolist()):
            yield f"{a} {b}"


if __name__ == "__main__":
    sys.exit(main())
