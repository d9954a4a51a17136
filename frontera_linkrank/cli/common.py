"""Plumbing shared by the ``page_db_*`` tools.

Every tool opens the page database read-only (so it works while a crawl
writes to it; it sees the last commit), streams its output, exits quietly
when the reader of a pipe goes away (``| head``), and turns a wrong path or
a broken database into one clear line on stderr and exit status 2.
"""

import argparse
import functools
import math
import os
import re
import sys

import numpy as np

from ..scoring.aopic import Aopic
from ..storage.pagedb import PageDB, PageDBError
from ..storage.urls import RejectedURL, fingerprint
from ..storage.vertices import NO_PAGE

SCORE_NAMES = ("pagerank", "authority", "hub")
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")


class ToolError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def parser(prog, description):
    return argparse.ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)


def tool(prog):
    """Decorator for a tool's ``main(argv=None)``: clear errors, quiet pipes."""

    def wrap(fn):
        @functools.wraps(fn)
        def main(argv=None):
            try:
                return fn(argv) or 0
            except ToolError as e:
                print(f"{prog}: error: {e}", file=sys.stderr)
                return 2
            except PageDBError as e:
                print(f"{prog}: error: {e}", file=sys.stderr)
                return 2
            except BrokenPipeError:
                # The reader went away (| head): stop without a traceback.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                return 0
            except KeyboardInterrupt:
                return 130

        return main

    return wrap


def open_db(path):
    """Open ``path`` read-only, with a clear message if it is not a page database."""
    if not os.path.exists(path):
        raise ToolError(f"{path}: no such directory")
    return PageDB(path, readonly=True)


def books(db):
    """AOPIC books of the last commit (cash, history, the virtual page)."""
    return Aopic.from_saved(db.vertices, db.meta.get("aopic"), db.host_ids)


def scores(db, name):
    """Score vector ``name`` over all pages: nan where not computed."""
    out = np.full(db.n_pages, math.nan)
    values, _ = db.read_scores(name)
    if values is not None:
        k = min(len(values), db.n_pages)
        out[:k] = values[:k]
    return out


def fp_hex(db, idx):
    """Fingerprints of pages ``idx`` as 40-character hex strings."""
    raw = db.vertices.fp[np.asarray(idx, np.int64)].tobytes().hex()
    return [raw[k : k + 40] for k in range(0, len(raw), 40)]


def resolve(db, spec):
    """Page index of a fingerprint (40 hex digits) or a URL."""
    if _HEX40.fullmatch(spec):
        i = db.find(bytes.fromhex(spec))
    else:
        try:
            i = db.find(fingerprint(spec))
        except RejectedURL as e:
            raise ToolError(f"not a URL or page hash: {e}") from None
    if i is None:
        raise ToolError(f"no page {spec!r} in {db.path}")
    return i


def parents_path(db, i):
    """Pages from ``i`` back along discovery parents to a seed."""
    path, seen = [i], {i}
    parent = db.vertices.parent
    while parent[path[-1]] != NO_PAGE:
        p = int(parent[path[-1]])
        if p in seen or p >= db.n_pages:
            break  # a later shorter path rewired a parent: stop, do not loop
        path.append(p)
        seen.add(p)
    return path


def write_lines(lines, out=None):
    """Write an iterable of lines in large chunks."""
    out = out or sys.stdout
    buf = []
    for line in lines:
        buf.append(line)
        if len(buf) >= 4096:
            out.write("\n".join(buf) + "\n")
            buf = []
    if buf:
        out.write("\n".join(buf) + "\n")
    out.flush()


def fmt_float(x):
    return "nan" if x != x else repr(float(x))
