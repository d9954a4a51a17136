"""page_db_export: page fields and scores to CSV or Parquet.

    page_db_export PATH FILE [--format csv|parquet]

One row per page with its URL, host, state, HTTP status, depth, discovery
parent, crawl counts and times, out-degree, content score, AOPIC cash,
history and importance, the stored rankings (nan when not computed), the
request priority and the key the crawl policy orders the queue by
(``frontera-linkrank top --queued``).
The format follows FILE's extension (``.csv``, ``.csv.gz``, ``.parquet``)
unless given. Parquet needs ``pyarrow`` (``pip install
frontera_linkrank[parquet]``).
"""

from __future__ import annotations

import csv
import gzip
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..storage.pagedb import PageDB
from .columns import Column, page_columns
from .common import Argv, ToolError, open_db, parser, tool

CHUNK = 100_000
FIELDS = ("hash", "url", "index", "host", "state", "status", "depth", "parent", "n_crawls", "n_changes",
          "n_out", "errors", "first_crawl", "last_crawl", "score", "cash", "history", "importance",
          "pagerank", "authority", "hub", "priority", "key")  # fmt: skip


def columns(db: PageDB) -> list[Column]:
    """The exported columns, in :data:`FIELDS` order (crawl times in float seconds)."""
    return list(page_columns(db, FIELDS))


def chunks(db: PageDB, cols: list[Column]) -> Iterator[dict[str, Any]]:
    """Column name -> values, for consecutive chunks of pages."""
    n = db.n_pages
    with db.snapshot() as txn:
        for lo in range(0, n, CHUNK):
            idx = np.arange(lo, min(lo + CHUNK, n))
            yield {c.name: c.read(db, txn, idx) for c in cols}


def write_csv(db: PageDB, cols: list[Column], path: str) -> None:
    """CSV with a header row (gzip-compressed when ``path`` ends in ``.gz``)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for part in chunks(db, cols):
            lists = [part[k] if isinstance(part[k], list) else part[k].tolist() for k in FIELDS]
            w.writerows(zip(*lists))


def write_parquet(db: PageDB, cols: list[Column], path: str) -> None:
    """Parquet, one row group per chunk (needs pyarrow)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ToolError("Parquet needs pyarrow: pip install 'frontera_linkrank[parquet]'") from None
    writer = None
    try:
        for part in chunks(db, cols):
            table = pa.table({k: part[k] for k in FIELDS})
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        if writer is None:  # empty database: still write a file with the schema
            empty: dict[str, Any] = {c.name: (c.values[:0] if c.values is not None else []) for c in cols}
            pq.write_table(pa.table(empty), path)
    finally:
        if writer is not None:
            writer.close()


@tool("page_db_export")
def main(argv: Argv, prog: str) -> None:
    """Write the pages of the database at PATH to FILE as CSV or Parquet."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("file", help="output file")
    ap.add_argument("--format", choices=("csv", "parquet"), help="default: from FILE's extension")
    args = ap.parse_args(argv)
    fmt = args.format or ("parquet" if args.file.endswith((".parquet", ".pq")) else "csv")
    out_dir = os.path.dirname(os.path.abspath(args.file))
    if not os.path.isdir(out_dir):
        raise ToolError(f"{out_dir}: no such directory for the output file")
    db = open_db(args.path)
    try:
        cols = columns(db)
        (write_parquet if fmt == "parquet" else write_csv)(db, cols, args.file)
        n = db.n_pages
    finally:
        db.close()
    print(f"{n:,} pages written to {args.file} ({fmt})", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
