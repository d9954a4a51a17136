"""page_db_export: page fields and scores to CSV or Parquet.

    page_db_export PATH FILE [--format csv|parquet]

One row per page with its URL, host, state, HTTP status, depth, discovery
parent, crawl counts and times, out-degree, content score, AOPIC cash,
history and importance, and the stored rankings (nan when not computed).
The format follows FILE's extension (``.csv``, ``.csv.gz``, ``.parquet``)
unless given. Parquet needs ``pyarrow`` (``pip install
frontera_linkrank[parquet]``).
"""

import csv
import gzip
import os
import sys

import numpy as np

from ..storage.vertices import STATE_NAMES
from .common import ToolError, books, fp_hex, open_db, parser, scores, tool

CHUNK = 100_000


def columns(db):
    """Numeric and short-text columns over all pages (URLs are read per chunk)."""
    v, n = db.vertices, db.n_pages
    a = books(db)
    names = np.array(db.host_names + [""], dtype=object)
    cols = {
        "index": np.arange(n),
        "host": names[v.host[:n].astype(np.int64)] if n else np.array([], object),
        "state": np.array([STATE_NAMES[s] for s in range(4)], object)[v.state[:n]],
        "status": v.status[:n].astype(np.int64),
        "depth": v.depth[:n].astype(np.int64),
        "parent": np.where(v.parent[:n] == 0xFFFFFFFF, -1, v.parent[:n].astype(np.int64)),
        "n_crawls": v.n_crawls[:n].astype(np.int64),
        "n_changes": v.n_changes[:n].astype(np.int64),
        "n_out": v.n_out[:n].astype(np.int64),
        "errors": v.errors[:n].astype(np.int64),
        "first_crawl": v.first_crawl[:n].copy(),
        "last_crawl": v.last_crawl[:n].copy(),
        "score": v.score[:n].copy(),
        "cash": a.effective_cash(),
        "history": v.history[:n].copy(),
        "importance": a.importance(),
    }
    for name in ("pagerank", "authority", "hub"):
        cols[name] = scores(db, name)
    return cols


FIELDS = ("hash", "url", "index", "host", "state", "status", "depth", "parent", "n_crawls", "n_changes",
          "n_out", "errors", "first_crawl", "last_crawl", "score", "cash", "history", "importance",
          "pagerank", "authority", "hub")  # fmt: skip


def chunks(db, cols):
    n = db.n_pages
    with db.snapshot() as txn:
        for lo in range(0, n, CHUNK):
            idx = np.arange(lo, min(lo + CHUNK, n))
            part = {k: c[lo : lo + len(idx)] for k, c in cols.items()}
            part["hash"] = fp_hex(db, idx)
            part["url"] = db.urls(idx, txn)
            yield part


def write_csv(db, cols, path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for part in chunks(db, cols):
            lists = [part[k] if isinstance(part[k], list) else part[k].tolist() for k in FIELDS]
            w.writerows(zip(*lists))


def write_parquet(db, cols, path):
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
            empty = {k: (cols[k][:0] if k in cols else []) for k in FIELDS}
            pq.write_table(pa.table(empty), path)
    finally:
        if writer is not None:
            writer.close()


@tool("page_db_export")
def main(argv=None):
    ap = parser("page_db_export", __doc__)
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
