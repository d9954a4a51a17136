"""Input formats of ``page_db_import``: reading files in chunks and parsing their lines.

Three formats: ``SRC_URL<TAB>DST_URL`` link lists, ``page_db_dump links``
(``FROM TO`` page indices) and ``page_db_dump info`` (a header naming the
columns, then one line per page). The parsers only split lines into
fields; a line in the wrong format goes to the caller's ``malformed``
callback, which skips it or raises :class:`Malformed` to stop the import
(the lines before it are still returned).
"""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from .common import ToolError

CHUNK_BYTES = 16 * 1024**2  # input read per chunk (memory per chunk)
MAX_LINE_BYTES = 1024**2  # longest input line (a link line is two URLs of at most a few KB)

# (line number, message, line): skips the line, or raises Malformed.
MalformedHandler = Callable[[int, str, "bytes | str"], None]


class Malformed(Exception):
    """A line not in the expected format (stops the import)."""


class Source:
    """An input file (gzip detected, ``-`` = stdin) read in chunks of whole
    lines, with the position for progress.

    Parameters
    ----------
    path : str
        File to read, ``-`` for standard input.
    chunk_bytes : int
        Bytes read per chunk (a chunk ends at the last whole line).
    max_line : int
        Longest line accepted, in bytes (0: no limit). A longer line goes to
        ``malformed``, which raises :class:`Malformed` or skips it; it is
        never held in memory whole (at most ``max_line + chunk_bytes``).
    malformed : callable(line number, message, line), optional
        The handler of too long lines (default: raise :class:`Malformed`).
    """

    def __init__(self, path: str, chunk_bytes: int = CHUNK_BYTES, max_line: int = 0,
                 malformed: MalformedHandler | None = None) -> None:  # fmt: skip
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.max_line = max_line
        self.malformed = malformed or _stop
        raw: BinaryIO
        if path == "-":
            raw = sys.stdin.buffer
            self.size = None
        else:
            if os.path.isdir(path):
                raise ToolError(f"{path}: is a directory, not a link list")
            try:
                raw = open(path, "rb")
            except OSError as e:
                raise ToolError(f"{path}: cannot read: {e.strerror}") from None
            self.size = os.path.getsize(path)
        self.raw = raw
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        self.f = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
        self.line = 0  # lines before the current chunk

    def position(self) -> int:
        """Bytes of the (compressed) file read so far; 0 when unknown."""
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def _read(self) -> bytes:
        try:
            return self.f.read(self.chunk_bytes)
        except (OSError, EOFError) as e:  # truncated or corrupt gzip
            raise ToolError(f"{self.path}: cannot read after line {self.line}: {e}") from None

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """Yield ``(first_line_number, bytes)`` of whole lines."""
        rest = bytearray()  # the line being read: no newline yet (grown in place, never re-copied)
        while buf := self._read():
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                rest += buf
                if self.max_line and len(rest) > self.max_line:
                    rest = bytearray(self._skip_long_line(bytes(rest[:200])))
                continue
            data = bytes(rest) + buf[:cut] if rest else buf[:cut]
            rest = bytearray(buf[cut:])
            yield self._emit(data)
            if self.max_line and len(rest) > self.max_line:
                rest = bytearray(self._skip_long_line(bytes(rest[:200])))
        if rest:
            yield self._emit(bytes(rest) + b"\n")

    def _skip_long_line(self, head: bytes) -> bytes:
        """The line after the current one is too long: report it (which may
        raise), read past its end without keeping it, count it as an empty
        line; return what follows it in the last read."""
        self.malformed(self.line + 1, f"line longer than {self.max_line:,} bytes", head)
        while buf := self._read():
            cut = buf.find(b"\n") + 1
            if cut:
                self.line += 1
                return buf[cut:]
        self.line += 1
        return b""

    def _emit(self, data: bytes) -> tuple[int, bytes]:
        first = self.line + 1
        self.line += data.count(b"\n")
        if first == 1 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # a UTF-8 byte order mark
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        if self.max_line and len(data) > self.max_line:
            data = self._cut_long_lines(first, data)
        return first, data

    def _cut_long_lines(self, first: int, data: bytes) -> bytes:
        """``data`` with each line longer than the limit reported (which may
        raise) and emptied (line numbers stay right)."""
        nl = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
        starts = np.r_[0, nl[:-1] + 1]
        long = np.flatnonzero(nl - starts > self.max_line)
        if not len(long):
            return data
        parts, at = [], 0
        for k in long.tolist():
            self.malformed(first + k, f"line longer than {self.max_line:,} bytes", data[starts[k] : starts[k] + 200])
            parts.append(data[at : starts[k]])
            at = int(nl[k])
        parts.append(data[at:])
        return b"".join(parts)

    def close(self) -> None:
        """Close the file (not standard input)."""
        if self.raw is not sys.stdin.buffer:
            self.raw.close()


def _stop(lineno: int, message: str, line: bytes | str) -> None:
    raise Malformed(f"line {lineno}: {message}: {line[:200]!r}")


def one_separator_per_line(data: bytes, sep: int) -> bool:
    """True if every line of ``data`` is ``field SEP field`` with both fields
    non-empty and no comment line (the fast path; anything else is parsed
    line by line)."""
    b = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(b == 10)
    sp = np.flatnonzero(b == sep)
    if len(sp) != len(nl):
        return False
    starts = np.r_[0, nl[:-1] + 1]
    return bool(((sp > starts) & (sp + 1 < nl)).all() and not (b[starts] == 35).any())


def url_pairs(
    first: int, data: bytes, malformed: MalformedHandler
) -> tuple[list[bytes], np.ndarray | None, Malformed | None]:
    """The URLs of a chunk of ``SRC_URL<TAB>DST_URL`` lines.

    Returns ``(flat, linenos, stop)``: source and target of each link
    alternating (raw bytes), the line number of each link (None: one link
    per line from ``first`` on), and the :class:`Malformed` error that
    ended the chunk early (or None).
    """
    if one_separator_per_line(data, 9):
        fields = data.replace(b"\t", b"\n").split(b"\n")
        fields.pop()
        return fields, None, None
    flat: list[bytes] = []
    lines: list[int] = []
    for k, line in enumerate(data.split(b"\n")[:-1]):
        if not line.strip() or line.startswith(b"#"):
            continue
        a, sep, b = line.partition(b"\t")
        if not sep or b"\t" in b or not a.strip() or not b.strip():
            try:
                malformed(first + k, "expected SRC_URL<TAB>DST_URL", line)
            except Malformed as e:
                return flat, np.asarray(lines, np.int64), e  # the lines before it are still imported
            continue
        flat += (a, b)
        lines.append(first + k)
    return flat, np.asarray(lines, np.int64), None


def index_pairs(
    first: int, data: bytes, malformed: MalformedHandler
) -> tuple[np.ndarray, np.ndarray, Malformed | None]:
    """The links of a chunk of ``page_db_dump links`` lines (``FROM TO``).

    Returns ``(pairs, linenos, stop)``: an ``(n, 2)`` array of indices,
    their line numbers, and the :class:`Malformed` error that ended the
    chunk early (or None).
    """
    b = np.frombuffer(data, np.uint8)
    if (((b >= 48) & (b <= 57)) | (b == 32) | (b == 10)).all() and one_separator_per_line(data, 32):
        pairs = np.fromstring(data.decode("ascii"), dtype=np.int64, sep=" ").reshape(-1, 2)
        return pairs, np.arange(first, first + len(pairs)), None
    rows, linenos = [], []
    stop = None
    for k, line in enumerate(data.split(b"\n")[:-1]):
        if not line.strip() or line.startswith(b"#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
            try:
                malformed(first + k, "expected 'FROM TO' page indices", line)
            except Malformed as e:
                stop = e
                break
            continue
        rows.append((int(parts[0]), int(parts[1])))
        linenos.append(first + k)
    return np.asarray(rows, np.int64).reshape(-1, 2), np.asarray(linenos, np.int64), stop


# Numeric columns of an info file restored on import, and their types.
INFO_FIELDS = (("first_crawl", float), ("last_crawl", float), ("n_changes", int), ("n_crawls", int),
               ("depth", int), ("score", float))  # fmt: skip


@dataclass
class InfoHeader:
    """The header line of a ``page_db_dump info`` file: where each column is."""

    columns: dict[str, int]
    width: int
    # (name, type, position) of the restored fields present in the file
    wanted: Sequence[tuple[str, type, int]] = ()

    @classmethod
    def parse(cls, row: bytes, where: str) -> InfoHeader:
        """The header ``row``; ``where`` (``file:line``) names it in the error."""
        header = row.decode("utf-8", "replace").split()
        missing = [c for c in ("hash", "index", "url") if c not in header]
        if missing:
            raise ToolError(f"{where}: not a page_db_dump info file (header lacks {', '.join(missing)})")
        columns = {c: header.index(c) for c in header}
        wanted = [(name, kind, columns[name]) for name, kind in INFO_FIELDS if name in columns]
        return cls(columns, len(header), wanted)

    def row(self, parts: list[bytes]) -> tuple[bytes, int, tuple[float | int, ...]]:
        """Fingerprint, index and restored fields of a row split on spaces.

        Raises ValueError for a bad hash, index or number.
        """
        fp = bytes.fromhex(parts[self.columns["hash"]].decode("ascii"))
        i = int(parts[self.columns["index"]])
        fields = tuple(kind(parts[c]) for _, kind, c in self.wanted)
        if len(fp) != 20 or i < 0 or any(x < 0 for x in fields if type(x) is int):
            raise ValueError
        return fp, i, fields

    def url(self, parts: list[bytes]) -> bytes:
        """The raw URL field of a row split on spaces."""
        return parts[self.columns["url"]]
