"""page_db_path: how a page was discovered, back to a seed.

    page_db_path PATH HASH_OR_URL

Prints the page, the page it was found on, that page's finder, and so on
up to a seed: one ``depth hash url`` line each. The parent of a page is
the page that gave it its shortest known depth.
"""

from __future__ import annotations

import sys

from ..storage.vertices import F_SEED
from .common import Argv, fp_hex, open_db, parents_path, parser, printable_url, resolve, tool, write_lines


@tool("page_db_path")
def main(argv: Argv, prog: str) -> None:
    """Print the discovery path of one page back to a seed."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("page", metavar="HASH_OR_URL", help="page fingerprint (40 hex digits) or URL")
    args = ap.parse_args(argv)
    db = open_db(args.path)
    try:
        path = parents_path(db, resolve(db, args.page))
        v = db.vertices
        with db.snapshot() as txn:
            urls = db.urls(path, txn)
        lines = [f"{int(v.depth[p])} {h} {printable_url(u)}" for p, h, u in zip(path, fp_hex(db, path), urls)]
        if not v.flags[path[-1]] & F_SEED:
            lines.append("# (not found from a seed: added by a response or an error)")
        write_lines(lines)
    finally:
        db.close()


if __name__ == "__main__":
    sys.exit(main())
