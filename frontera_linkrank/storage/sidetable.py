"""Side tables: one value per page, for the features that need one.

A feature that stores something per page (the non-GET parts of a request,
the last fetch error, recrawl visits, HTTP validators...) declares a named
LMDB table of the page database with a :class:`Codec`::

    visits = db.side_table("visits", RecordLog(VISIT, keep=32))
    visits.put(i, [(interval, changed)])      # buffered: this batch
    with db.snapshot() as txn:
        history = visits.get(i, txn)          # committed values + this batch's

Writes are buffered until :meth:`PageDB.commit
<frontera_linkrank.storage.pagedb.PageDB.commit>`, which writes every
table's batch in the same transaction as the page records (one sorted
``putmulti`` per table, so LMDB appends B-tree pages in order). Reads look
many pages up with one sorted ``getmulti`` under a read transaction, and
see the values of the current batch too.

Keys are page indices (:mod:`.keys`); values are whatever the codec makes
of them. A codec with a ``merge`` function accumulates (the new value is
merged into the stored one at commit, e.g. a bounded log of records);
without one, the last value put wins.
"""

import contextlib
import json
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .errors import CorruptDatabase
from .keys import page_key, page_keys

Raw = bytes | memoryview


class Codec(Protocol):
    """How a side table turns values into LMDB values and back.

    ``merge`` is None (a new value replaces the stored one) or a function
    ``merge(old, new) -> bytes`` of two encoded values (``old`` may be
    None), which must be associative: a batch's values are merged with
    each other first, then with the stored value.
    """

    @property
    def merge(self) -> Callable[[bytes | None, bytes], bytes] | None:
        """None, or how a new encoded value joins the stored one."""

    def encode(self, value: Any) -> bytes:
        """The stored bytes of ``value``."""

    def decode(self, raw: Raw) -> Any:
        """The value stored as ``raw`` (bytes, or a memoryview on the map)."""


@dataclass(frozen=True)
class Text:
    """A string (``str``) as UTF-8.

    Parameters
    ----------
    errors : str
        Codec error handler, both ways (``"strict"`` or ``"replace"``).
    max_bytes : int or None
        Cut encoded values to this many bytes.

    >>> c = Text(errors="replace", max_bytes=4)
    >>> c.encode("abcdef"), c.decode(b"\\xffa")
    (b'abcd', '\\ufffda')
    """

    errors: str = "strict"
    max_bytes: int | None = None
    merge = None

    def encode(self, value: str) -> bytes:
        raw = value.encode("utf-8", self.errors)
        return raw if self.max_bytes is None else raw[: self.max_bytes]

    def encode_many(self, values: Iterable[str]) -> list[bytes]:
        """:meth:`encode` of each value (the URLs of every new page come
        this way: one comprehension, no call per value)."""
        errors, cut = self.errors, self.max_bytes
        if cut is None:
            return [v.encode("utf-8", errors) for v in values]
        return [v.encode("utf-8", errors)[:cut] for v in values]

    def decode(self, raw: Raw) -> str:
        return str(raw, "utf-8", self.errors)

    def decode_many(self, raws: Iterable[Raw]) -> list[str]:
        """:meth:`decode` of each value (URLs are read this way)."""
        errors = self.errors
        return [str(raw, "utf-8", errors) for raw in raws]


@dataclass(frozen=True)
class Json:
    """A JSON-serialisable value as compact-enough JSON (``json.dumps``
    defaults, so values written before this helper read back identical).

    >>> Json().encode(["a", None])
    b'["a", null]'
    """

    merge = None

    def encode(self, value: Any) -> bytes:
        return json.dumps(value).encode()

    def decode(self, raw: Raw) -> Any:
        return json.loads(bytes(raw))


@dataclass(frozen=True, eq=True)
class RecordLog:
    """A per-page log of fixed-size records (a numpy structured ``dtype``),
    keeping the last ``keep`` (all when None).

    ``put`` takes one or more records (anything ``np.asarray(x, dtype)``
    accepts); reads return a record array, oldest first.

    >>> c = RecordLog(np.dtype([("x", "u1")]), keep=2)
    >>> c.decode(c.merge(c.encode([(1,), (2,)]), c.encode([(3,)])))["x"].tolist()
    [2, 3]
    """

    dtype: np.dtype
    keep: int | None = None

    def encode(self, value: Any) -> bytes:
        return np.asarray(value, self.dtype).tobytes()

    def decode(self, raw: Raw) -> np.ndarray:
        return np.frombuffer(raw, self.dtype)

    def merge(self, old: bytes | None, new: bytes) -> bytes:
        raw = new if old is None else old + new
        return raw[-self.keep * self.dtype.itemsize :] if self.keep else raw


class SideTable:
    """A named table keyed by page index, with the current batch buffered.

    Made by :meth:`PageDB.side_table
    <frontera_linkrank.storage.pagedb.PageDB.side_table>`.

    Parameters
    ----------
    name : str
        Name of the LMDB table.
    codec : Codec
    append : bool
        Keys only grow (values of pages added since the last commit):
        written in LMDB's append mode, which skips the B-tree search.
    writable : bool
        False for a read-only database (:meth:`put` refuses).
    """

    def __init__(self, name: str, codec: Codec, append: bool = False, writable: bool = True) -> None:
        self.name = name
        self.codec = codec
        self.append = append
        self.writable = writable
        self.db: Any = None  # LMDB handle; None: the table is absent (older read-only database)
        self._pending: dict[int, bytes] = {}  # page -> encoded value of this batch

    def __repr__(self) -> str:
        return f"SideTable({self.name!r}, {self.codec!r}, pending={len(self._pending)})"

    @property
    def n_pending(self) -> int:
        """Pages with a value put in the current batch."""
        return len(self._pending)

    # -- this batch ------------------------------------------------------------
    def put(self, i: int, value: Any) -> None:
        """Set (or, with a merging codec, add to) page ``i``'s value in this batch."""
        if not self.writable:
            raise PermissionError(f"side table {self.name!r} of a read-only page database")
        i = int(i)
        raw = self.codec.encode(value)
        merge = self.codec.merge
        if merge is not None:
            old = self._pending.get(i)
            if old is not None:
                raw = merge(old, raw)
        self._pending[i] = raw

    def put_many(self, pages: Iterable[int], values: Iterable[Any]) -> None:
        """:meth:`put` of each page of ``pages`` with its value in ``values``."""
        if self.codec.merge is not None or not self.writable:
            for i, value in zip(pages, values):
                self.put(i, value)
            return
        encode_many = getattr(self.codec, "encode_many", None)
        raw = encode_many(values) if encode_many is not None else map(self.codec.encode, values)
        self._pending.update(zip(pages if isinstance(pages, range) else map(int, pages), raw))

    def discard(self) -> None:
        """Forget this batch's values (after they are committed)."""
        self._pending = {}

    def write(self, txn: Any) -> None:
        """Write this batch's values in the write transaction ``txn`` (the
        buffer is kept: the commit may be retried; :meth:`discard` follows a
        successful one)."""
        if not self._pending:
            return
        pages = np.fromiter(self._pending, np.int64, len(self._pending))
        values = list(self._pending.values())
        if not (pages[1:] > pages[:-1]).all():  # (new pages' values come in order: no sort)
            order = np.argsort(pages, kind="stable")
            pages = pages[order]
            values = [values[j] for j in order.tolist()]
        keys = page_keys(pages)
        cur = txn.cursor(self.db)
        merge = self.codec.merge
        if merge is not None:
            old = {bytes(k): bytes(v) for k, v in cur.getmulti(keys)}
            values = [merge(old.get(k), raw) for k, raw in zip(keys, values)]
        cur.putmulti(zip(keys, values), append=self.append)

    # -- reads -------------------------------------------------------------------
    def _with_pending(self, i: int, raw: Raw | None) -> Raw | None:
        new = self._pending.get(i)
        if new is None:
            return raw
        merge = self.codec.merge
        return new if merge is None or raw is None else merge(bytes(raw), new)

    def get(self, i: int, txn: Any, default: Any = None) -> Any:
        """Page ``i``'s value (committed in ``txn``, then this batch's), or ``default``."""
        i = int(i)
        raw = txn.get(page_key(i), db=self.db) if self.db is not None else None
        if self._pending:
            raw = self._with_pending(i, raw)
        if raw is None:
            return default
        with self._damage():
            return self.codec.decode(raw)

    def get_list(self, idx: Iterable[int] | np.ndarray, txn: Any) -> list[Any]:
        """Values of the pages ``idx`` in that order (None where a page has none).

        With a ``buffers=True`` transaction, values that view their bytes
        (record arrays) are valid until it ends.
        """
        idx = np.asarray(idx, np.int64)
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        keys = page_keys(ordered)
        got = txn.cursor(self.db).getmulti(keys) if self.db is not None and keys else []
        out: list[Any] = [None] * len(keys)
        pending = self._pending
        if len(got) == len(keys) and (not pending or pending.keys().isdisjoint(ordered.tolist())):
            # The common case (all stored, none changed in this batch), in bulk.
            decode_many = getattr(self.codec, "decode_many", None)
            raws = [raw for _, raw in got]
            with self._damage():
                values = decode_many(raws) if decode_many is not None else map(self.codec.decode, raws)
                for j, value in zip(order.tolist(), values):
                    out[j] = value
            return out
        decode = self.codec.decode
        found = {bytes(k): raw for k, raw in got}
        for j, i, key in zip(order.tolist(), ordered.tolist(), keys):
            raw = found.get(key)
            if pending:
                raw = self._with_pending(i, raw)
            if raw is not None:
                with self._damage():
                    out[j] = decode(raw)
        return out

    @contextlib.contextmanager
    def _damage(self) -> Iterator[None]:
        """A stored value the codec cannot read is damage (:class:`CorruptDatabase`)."""
        try:
            yield
        except (ValueError, TypeError, KeyError, IndexError, EOFError, struct.error) as e:
            raise CorruptDatabase(f"side table {self.name!r}: a stored value is unreadable: {e} "
                                  "(corrupt database)") from None

    def get_many(self, idx: Iterable[int] | np.ndarray, txn: Any) -> dict[int, Any]:
        """``{page: value}`` of the pages among ``idx`` that have a value."""
        pages = np.asarray(idx, np.int64)
        return {i: v for i, v in zip(pages.tolist(), self.get_list(pages, txn)) if v is not None}


__all__ = ["Codec", "Json", "RecordLog", "SideTable", "Text"]
