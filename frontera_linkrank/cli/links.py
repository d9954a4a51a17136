"""page_db_links: links into and out of one page.

    page_db_links PATH HASH_OR_URL

Prints the back links (pages linking to it), then the forward links (its
current out-links), one ``hash url`` per line, each list after a header
line starting with ``#``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..numeric import unique
from ..storage.pagedb import PageDB
from .common import Argv, fp_hex, open_db, parser, printable_url, resolve, tool, write_lines


@tool("page_db_links")
def main(argv: Argv, prog: str) -> None:
    """Print the back and forward links of one page."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("page", metavar="HASH_OR_URL", help="page fingerprint (40 hex digits) or URL")
    args = ap.parse_args(argv)
    db = open_db(args.path)
    try:
        i = resolve(db, args.page)
        with db.snapshot() as txn:
            back = []
            for src, ptr, dst in db.edges.iter_current(txn, db.n_pages):
                rows = np.flatnonzero(np.asarray(dst) == i)
                if len(rows):
                    # edge position -> row: the row whose ptr range holds it
                    back.append(np.asarray(src)[np.searchsorted(ptr, rows, side="right") - 1])
            back = unique(np.concatenate(back)) if back else np.zeros(0, np.int64)
            fwd = db.edges.out_links(txn, i)
            write_lines(section(db, txn, "back links", back))
            write_lines(section(db, txn, "forward links", fwd))
    finally:
        db.close()


def section(db: PageDB, txn: Any, title: str, idx: Any) -> Iterator[str]:
    """A ``# title (count)`` line, then ``hash url`` of each page of ``idx``."""
    idx = np.asarray(idx, np.int64)
    yield f"# {title} ({len(idx)})"
    for h, u in zip(fp_hex(db, idx), db.urls(idx, txn)):
        yield f"{h} {printable_url(u)}"


if __name__ == "__main__":
    sys.exit(main())
