"""page_db_seeds: seeds for a new crawl from a previous crawl's page database.

    page_db_seeds PATH -k K -o seeds.txt [--cover-density D | --core-size S
                  [--new-members M]] [--no-prune] [--report FILE]
                  [--root URL ... | --root-file FILE] [--max-in N] [--max-pages N]

Drops links between pages of the same host (unless ``--no-prune``), runs
HITS, grows one bipartite core around the best authority (complete cores
by default: ``--cover-density 100``; or fixed-size cores with
``--core-size``), takes the core's best hub as a seed, removes the core
and repeats until K seeds (docs/algorithms.md §4). With ``--root`` or
``--root-file`` the ranking is query-focused: it runs on the base set of
the root pages (the roots, the pages they link to, up to ``--max-in``
pages linking to each root; at most ``--max-pages`` pages).

The output has ``#`` comment lines, then one URL per line: a seeds file.
``--report`` writes JSON: per core the hub and authority counts and URLs,
the cover density, the seed and the directed distance to every other
core (shortest path on the unpruned graph; null: no path), and per round
the HITS iterations and times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..scoring.links import database_adjacency
from ..scoring.seeds import SeedResult, extract_seeds, focused_seeds
from ..storage.pagedb import PageDB
from .common import Argv, ToolError, open_db, parser, printable_url, resolve, tool


def db_adjacency(db: PageDB) -> sp.csr_matrix:
    """The database's current links as a CSR matrix (row = source)."""
    with db.snapshot() as txn:
        return database_adjacency(db, txn, db.n_pages)


def read_roots(path: str) -> list[str]:
    """URLs (or page hashes) of a root file: one per line, ``#`` comments."""
    try:
        with open(path, encoding="utf-8") as f:
            return [s for s in (line.strip() for line in f) if s and not s.startswith("#")]
    except OSError as e:
        raise ToolError(f"{path}: cannot read the root file: {e.strerror or e}") from None


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all ('-': stdout)."""
    if path == "-":
        sys.stdout.write(text)
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise ToolError(f"{path}: cannot write: {e.strerror or e}") from None


def arguments(prog: str) -> argparse.ArgumentParser:
    """The tool's argument parser."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("-k", type=int, required=True, help="number of seeds")
    ap.add_argument("-o", "--output", required=True, help="seeds file to write ('-': stdout)")
    ap.add_argument("--cover-density", type=float, default=100.0,
                    help="target cover density in %% (default 100: complete cores)")
    ap.add_argument("--core-size", type=int, help="fixed-size cores of this many pages instead")
    ap.add_argument("--new-members", type=int, default=1,
                    help="members added per side and step with --core-size (default 1)")
    ap.add_argument("--iterations", type=int, default=60, help="HITS iterations per round at most (default 60)")
    ap.add_argument("--no-prune", action="store_true", help="keep links between pages of the same host")
    ap.add_argument("--report", help="write a per-core report (JSON) here")
    ap.add_argument("--root", action="append", default=[], metavar="URL",
                    help="query-focused: a root page (repeatable)")
    ap.add_argument("--root-file", help="query-focused: root pages, one URL per line")
    ap.add_argument("--max-in", type=int, default=50, help="base set: pages linking to each root kept (default 50)")
    ap.add_argument("--max-pages", type=int, default=5000, help="base set: pages at most (default 5000)")
    return ap  # fmt: skip


def check_arguments(args: argparse.Namespace) -> list[str]:
    """Refuse impossible values; return the root pages (``--root`` and ``--root-file``)."""
    if args.k <= 0:
        raise ToolError("-k must be positive")
    if not 0 < args.cover_density <= 100:
        raise ToolError("--cover-density must be in (0, 100]")
    if args.core_size is not None and (args.core_size < 2 or args.new_members < 1):
        raise ToolError("--core-size must be >= 2 and --new-members >= 1")
    if args.iterations < 1 or args.max_in < 0 or args.max_pages < 1:
        raise ToolError("--iterations and --max-pages must be >= 1, --max-in >= 0")
    roots = list(args.root) + (read_roots(args.root_file) if args.root_file else [])
    if args.root_file and not roots:
        raise ToolError(f"{args.root_file}: no root URLs in it")
    return roots


@dataclass
class Extraction:
    """A run of the extraction on a page database, with the URLs it needs (read before closing it)."""

    result: SeedResult
    graph: sp.csr_matrix
    urls: list[str | None]
    core_urls: list[tuple[list[str | None], list[str | None]]]
    seconds_load: float
    seconds: float


def find_seeds(db: PageDB, args: argparse.Namespace, roots: list[str]) -> Extraction:
    """Run the extraction on ``db`` as the arguments ask."""
    t = time.perf_counter()
    root_idx = [resolve(db, r) for r in roots]
    g = db_adjacency(db)
    load_secs = time.perf_counter() - t
    hosts = None if args.no_prune else db.vertices.host[: db.n_pages].astype(np.int64)
    kw = dict(
        hosts=hosts,
        cover_density=args.cover_density,
        core_size=args.core_size,
        new_members=args.new_members,
        iterations=args.iterations,
    )
    if roots:
        res = focused_seeds(g, root_idx, args.k, args.max_in, args.max_pages, **kw)
    else:
        res = extract_seeds(g, args.k, **kw)
    urls = db.urls(res.seeds)
    core_urls = [(db.urls(c.hubs), db.urls(c.authorities)) for c in res.cores]
    return Extraction(res, g, urls, core_urls, load_secs, time.perf_counter() - t)


def seeds_file(found: Extraction, args: argparse.Namespace, roots: list[str]) -> str:
    """The seeds file: ``#`` comment lines on how it was made, then one URL per line."""
    urls = found.urls
    if args.core_size:
        how = f"core size {args.core_size}, {args.new_members} per step"
    else:
        how = f"cover density {args.cover_density:g}%"
    header = (
        f"# {len(urls)} seeds from {os.path.abspath(args.path)} by page_db_seeds\n"
        f"# ({'query-focused on ' + str(len(roots)) + ' roots, ' if roots else ''}{how}, "
        f"{'no pruning' if args.no_prune else 'same-host links pruned'}; one seed per HITS bipartite core)\n"
    )
    return header + "".join(printable_url(u) + "\n" for u in urls)


def report(found: Extraction, args: argparse.Namespace, roots: list[str]) -> dict[str, Any]:
    """The ``--report`` document: the run, then one entry per core."""
    res, g = found.result, found.graph
    return {
        "database": os.path.abspath(args.path),
        "pages": int(g.shape[0]),
        "links": int(g.nnz),
        "links_ranked": res.links,
        "pruned": not args.no_prune,
        "procedure": "core size" if args.core_size else "cover density",
        "core_size": args.core_size,
        "new_members": args.new_members,
        "cover_density": args.cover_density,
        "roots": roots,
        "seconds_load": found.seconds_load,
        "seconds": found.seconds,
        "rounds": res.rounds,
        "cores": [
            {
                "round": c.round + 1,
                "hubs": len(c.hubs),
                "authorities": len(c.authorities),
                "links": c.edges,
                "cover_density": c.cover_density,
                "seed": u,
                "hub_urls": hu,
                "authority_urls": au,
                "distance_to": {str(r + 1): d for r, d in c.distances.items()},
            }
            for c, u, (hu, au) in zip(res.cores, found.urls, found.core_urls)
        ],
    }


@tool("page_db_seeds")
def main(argv: Argv, prog: str) -> None:
    """Write K seeds extracted from the database at PATH."""
    args = arguments(prog).parse_args(argv)
    roots = check_arguments(args)
    db = open_db(args.path)
    try:
        found = find_seeds(db, args, roots)
    finally:
        db.close()
    write_text(args.output, seeds_file(found, args, roots))
    if args.report:
        write_text(args.report, json.dumps(report(found, args, roots), indent=1) + "\n")
    n, secs = len(found.result.seeds), found.seconds
    if n < args.k:
        print(f"{prog}: the graph ran out of links after {n} cores (asked for {args.k})", file=sys.stderr)
    if args.output != "-":
        print(f"{prog}: {len(found.urls)} seeds written to {args.output} in {secs:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
