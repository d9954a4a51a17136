"""page_db_find: pages whose URL matches a regular expression.

    page_db_find PATH REGEX

Prints ``hash url`` for every page whose URL matches REGEX (an extended
regular expression, searched anywhere in the URL; Python's ``re`` syntax,
a superset of POSIX ERE), in page-index order.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

from ..storage.pagedb import PageDB
from .common import Argv, ToolError, fp_hex, open_db, parser, printable_url, tool, write_lines

CHUNK = 50_000


@tool("page_db_find")
def main(argv: Argv, prog: str) -> None:
    """Print the pages of the database at PATH whose URL matches REGEX."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("regex", help="regular expression matched against each URL")
    ap.add_argument("-i", "--ignore-case", action="store_true")
    args = ap.parse_args(argv)
    try:
        pattern = re.compile(args.regex, re.IGNORECASE if args.ignore_case else 0)
    except re.error as e:
        raise ToolError(f"bad regular expression {args.regex!r}: {e}") from None
    db = open_db(args.path)
    try:
        write_lines(matches(db, pattern))
    finally:
        db.close()


def matches(db: PageDB, pattern: re.Pattern[str]) -> Iterator[str]:
    """``hash url`` of the pages whose URL ``pattern`` finds a match in, by index."""
    n = db.n_pages
    search = pattern.search
    with db.snapshot() as txn:
        for lo in range(0, n, CHUNK):
            idx = range(lo, min(lo + CHUNK, n))
            urls = db.urls(idx, txn)
            hits = [k for k, u in enumerate(urls) if search(u)]
            if hits:
                hashes = fp_hex(db, [lo + k for k in hits])
                for h, k in zip(hashes, hits):
                    yield f"{h} {printable_url(urls[k])}"


if __name__ == "__main__":
    sys.exit(main())
