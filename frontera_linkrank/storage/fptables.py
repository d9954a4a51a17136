"""The fingerprint index's tables besides ``fps`` (see :mod:`.fpindex`).

``fpsmarks`` holds each key range's mark, the page count when the range
was last written; ``fpsheld`` the pages a crawl held, not yet in ``fps``,
when it closed (28 bytes a page, in chunks of :data:`HELD_CHUNK`), so that
the next opening need not read every page record from ``fps_from`` on to
find them again; ``fpsfilter`` the Bloom filter of the ``fps`` table's
keys (:mod:`.keyfilter`) a crawl held when it closed, so that the next
opening need not read the table into it again. The metadata records what
a close stored (the page database's ``fps_held`` and ``fps_filter``);
the first commit after it drops both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import CorruptDatabase

HELD = np.dtype([("fp", "S20"), ("page", "<u8")])
"""A held page as a close stores it: its fingerprint and its index."""
HELD_CHUNK = 1 << 18
"""Held pages per LMDB value (7 MiB)."""


def read_marks(txn: Any, marks_db: Any) -> np.ndarray | None:
    """The range marks of the ``fpsmarks`` table (see the module
    docstring), one per key range, or None if there are none; the number
    of ranges is a power of two, ``len(marks) == 1 << bits``."""
    if marks_db is None:
        return None
    rows = b"".join(map(b"".join, txn.cursor(db=marks_db)))
    if not rows:
        return None
    got = np.frombuffer(rows, np.dtype([("range", ">u4"), ("mark", ">u8")])) if len(rows) % 12 == 0 else None
    r = len(got) if got is not None else 0
    if got is None or r & (r - 1) or not np.array_equal(got["range"], np.arange(r)):
        raise CorruptDatabase("the fingerprint table's range marks are damaged (corrupt database)")
    return got["mark"].astype(np.int64)


def write_chunks(txn: Any, db: Any, parts: Iterable[bytes | memoryview], step: int) -> None:
    """Make the table ``db`` hold the bytes of ``parts`` end to end, in
    values of ``step`` bytes keyed 0, 1, 2... (8 bytes, big-endian)."""
    txn.drop(db, delete=False)
    c = 0
    for part in parts:
        raw = memoryview(part).cast("B")
        for lo in range(0, len(raw), step):
            txn.put(c.to_bytes(8, "big"), raw[lo : lo + step], db=db)
            c += 1


def read_chunks(txn: Any, db: Any, size: int, what: str) -> bytearray:
    """The ``size`` bytes :func:`write_chunks` stored in ``db``; ValueError
    (naming ``what``) if the table does not hold exactly that many."""
    out, at = bytearray(size), 0
    for c, (key, value) in enumerate(txn.cursor(db=db)):
        if bytes(key) != c.to_bytes(8, "big"):
            raise ValueError(f"a chunk of the {what} is missing")
        if at + len(value) > size:
            raise ValueError(f"more than {size} bytes of {what}")
        out[at : at + len(value)] = value
        at += len(value)
    if at != size:
        raise ValueError(f"{at} bytes of {what} for {size}")
    return out


def write_held(txn: Any, db: Any, keys: np.ndarray, pages: np.ndarray) -> None:
    """Make the ``fpsheld`` table ``db`` hold the pages ``pages`` with
    fingerprints ``keys`` (``S20``), in chunks of :data:`HELD_CHUNK`."""
    rows = np.empty(len(keys), HELD)
    rows["fp"], rows["page"] = keys, pages
    write_chunks(txn, db, [rows.tobytes()], HELD_CHUNK * HELD.itemsize)


def read_held(txn: Any, db: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``(fingerprints, pages)`` of the ``count`` pages :func:`write_held`
    stored in ``db``; ValueError if the table does not hold them."""
    rows = np.frombuffer(read_chunks(txn, db, count * HELD.itemsize, "held fingerprints"), HELD)
    return rows["fp"].copy(), rows["page"].astype(np.int64)


__all__ = ["HELD", "HELD_CHUNK", "read_chunks", "read_held", "read_marks", "write_chunks", "write_held"]
