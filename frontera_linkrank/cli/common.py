"""Plumbing shared by the command-line tools.

Every tool opens the page database read-only (so it works while a crawl
writes to it; it sees the last commit), streams its output, exits quietly
when the reader of a pipe goes away (``| head``), and turns a wrong path, a
file it cannot open, read or write (permission denied, read-only file
system, disk full) into one clear line on stderr, ``PROG: error: PATH:
CAUSE``, and exit status 2; a damaged database into one line naming what
is damaged and exit status 1.

A tool is a module of this package with a ``main(argv=None, prog=...)``
made by :func:`tool`; it runs both as ``frontera-linkrank NAME`` and as its
``page_db_NAME`` script (:mod:`.commands`), and names itself by ``prog``.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TextIO

import lmdb
import numpy as np

from ..scoring.aopic import Aopic
from ..storage.errors import LMDB_DAMAGE, CorruptDatabase
from ..storage.pagedb import PageDB, PageDBError
from ..storage.urls import RejectedURL, fingerprint
from ..storage.vertices import NO_PAGE

SCORE_NAMES = ("pagerank", "authority", "hub")
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")
# White space, control characters (C0, DEL, C1) and lone surrogates (the
# bytes of a URL that was not UTF-8): what would break a line apart, or
# reach the terminal as something else than the URL.
_UNPRINTABLE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
Argv = Sequence[str] | None


class ToolError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


class ToolMain(Protocol):
    """A tool's entry point: ``main(argv=None, prog=...)`` -> exit status."""

    def __call__(self, argv: Argv = None, prog: str = ...) -> int: ...


def parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """An argument parser for ``prog`` described by the tool's docstring.

    The docstring starts with the tool's ``page_db_*`` name; run as
    ``frontera-linkrank NAME`` that name is replaced by ``prog`` so the
    help shows the command the user typed.
    """
    alias = doc.split(":", 1)[0].strip()
    if alias.startswith("page_db_") and prog != alias:
        doc = doc.replace(alias, prog)
    return argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def error_line(prog: str, message: object) -> None:
    """The one line on stderr that every tool error comes down to."""
    print(f"{prog}: error: {message}", file=sys.stderr)


def os_error(e: OSError) -> str:
    """``PATH: CAUSE`` of an ``OSError`` (``CAUSE`` alone without a path)."""
    cause = e.strerror or str(e)
    if e.filename is None:
        return cause
    if e.filename2 is not None:
        return f"{e.filename} -> {e.filename2}: {cause}"
    return f"{e.filename}: {cause}"


def tool(default_prog: str) -> Callable[[Callable[[Argv, str], int | None]], ToolMain]:
    """Decorator making a tool's ``main(argv=None, prog=default_prog)``.

    The decorated function takes ``(argv, prog)`` and returns an exit
    status or None (0). :class:`ToolError`, :class:`PageDBError`, an
    ``OSError`` (a file that cannot be opened, read or written: the line
    names it and the cause) and an LMDB error become one line on stderr and
    status 2, except a damaged database (:class:`CorruptDatabase`, or LMDB
    finding damage while reading): one line naming the failed check and
    status 1. A closed pipe ends quietly with 0; Ctrl-C gives 130.
    """

    def wrap(fn: Callable[[Argv, str], int | None]) -> ToolMain:
        @functools.wraps(fn)
        def main(argv: Argv = None, prog: str = default_prog) -> int:
            try:
                return fn(argv, prog) or 0
            except CorruptDatabase as e:
                error_line(prog, e)
                return 1
            except LMDB_DAMAGE as e:
                error_line(prog, f"damaged page database: LMDB reports {e}")
                return 1
            except (ToolError, PageDBError) as e:
                error_line(prog, e)
                return 2
            except BrokenPipeError:
                # The reader went away (| head): stop without a traceback.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                return 0
            except OSError as e:
                error_line(prog, os_error(e))
                return 2
            except lmdb.Error as e:
                error_line(prog, f"page database: {e}")
                return 2
            except KeyboardInterrupt:
                return 130

        return main

    return wrap


def open_db(path: str, full_check: bool = False) -> PageDB:
    """Open ``path`` read-only, with a clear message if it is not a page
    database (``full_check``: see :class:`~..storage.pagedb.PageDB`)."""
    if not os.path.exists(path):
        raise ToolError(f"{path}: no such directory")
    return PageDB(path, readonly=True, full_check=full_check)


def books(db: PageDB) -> Aopic:
    """AOPIC books of the last commit (cash, history, the virtual page)."""
    return Aopic.from_saved(db.vertices, db.meta.get("aopic"), db.host_ids)


def scores(db: PageDB, name: str) -> np.ndarray:
    """Score vector ``name`` over all pages: nan where not computed."""
    out = np.full(db.n_pages, math.nan)
    values, _ = db.read_scores(name)
    if values is not None:
        k = min(len(values), db.n_pages)
        out[:k] = values[:k]
    return out


def _percent(m: re.Match[str]) -> str:
    c = m.group()
    try:
        raw = c.encode("utf-8", "surrogateescape")  # a byte that was not UTF-8 is itself again
    except UnicodeEncodeError:
        raw = c.encode("utf-8", "surrogatepass")
    return "".join(f"%{b:02X}" for b in raw)


def printable_url(url: str | None) -> str:
    """``url`` as the tools print it: white space, control characters and
    bytes that are not UTF-8 percent-encoded (a URL stays one field of one
    line, and nothing in it reaches the terminal as a control sequence).

    >>> printable_url("http://a.test/x y\\n\\x00\\x1b[31m\\xa0")
    'http://a.test/x%20y%0A%00%1B[31m%C2%A0'
    """
    if url is None:
        return "-"
    return _UNPRINTABLE.sub(_percent, url) if _UNPRINTABLE.search(url) else url


def fp_hex(db: PageDB, idx: Iterable[int] | np.ndarray) -> list[str]:
    """Fingerprints of pages ``idx`` as 40-character hex strings."""
    raw = db.vertices.fp[np.asarray(idx, np.int64)].tobytes().hex()
    return [raw[k : k + 40] for k in range(0, len(raw), 40)]


def resolve(db: PageDB, spec: str) -> int:
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


def parents_path(db: PageDB, i: int) -> list[int]:
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


def write_lines(lines: Iterable[str], out: TextIO | None = None) -> None:
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


def fmt_float(x: float) -> str:
    """A float as Python writes it back exactly (``nan`` for NaN)."""
    return "nan" if x != x else repr(float(x))
