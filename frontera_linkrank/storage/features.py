"""The features' tables of schema 2, behind per-feature methods of
:class:`~.pagedb.PageDB`.

These methods predate side tables (:mod:`.sidetable`) and are kept while
their callers move to declaring the table themselves; each is one call on
a side table, shown in its docstring. The encodings below are those of
schema 2 and must not change (databases already hold them), except the
``requests`` table: its values were pickled before request format 1
(MessagePack, :mod:`.packed`), and a database still holding pickled
requests is refused, never unpickled (see :meth:`FeatureTables._check_request_format`).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import PageDBError
from .packed import Packed, Unreadable, pack, unpack
from .sidetable import Json, RecordLog, SideTable, Text

# One recrawl visit: seconds since the previous visit, and whether the
# content had changed.
VISIT = np.dtype([("interval", "<f8"), ("changed", "u1")])
# The metadata section "requests" says how the requests table is encoded.
REQUESTS_SECTION = "requests"
REQUESTS_FORMAT = {"format": "msgpack", "version": 1}
ERRORS_CODEC = Text(errors="replace", max_bytes=4096)  # last fetch error
VALIDATORS_CODEC = Json()  # [etag, last_modified] of the last fetch


@dataclass(frozen=True)
class RequestPartsCodec(Packed):
    """``(method, headers, cookies, meta, body)`` of a request, as a
    MessagePack array of five (:mod:`.packed`: plain data only).

    A stored value that does not decode to five parts decodes to an
    :class:`~.packed.Unreadable` (returned, not raised: the other pages
    of a batch are read as usual).

    >>> c = RequestPartsCodec()
    >>> c.decode(c.encode((b"POST", {b"A": [b"1"]}, None, {b"x": (1, 2)}, b"q=1")))
    (b'POST', {b'A': [b'1']}, None, {b'x': (1, 2)}, b'q=1')
    >>> c.decode(b"\\x80\\x05.")
    Unreadable('ExtraData: unpack(b) received extra data.')
    """

    def encode(self, value: tuple) -> bytes:
        return pack(list(value))

    def decode(self, raw: bytes | memoryview) -> tuple | Unreadable:
        try:
            value = unpack(raw)
        except Unreadable as e:
            return e
        if not (isinstance(value, list) and len(value) == 5 and isinstance(value[3], dict)):
            return Unreadable("not the five parts of a request")
        if not isinstance(value[0], (bytes, str)):
            return Unreadable("the method is not a string")
        return tuple(value)


REQUESTS_CODEC = RequestPartsCodec()  # (method, headers, cookies, meta, body) of a request that is not a plain GET


def visits_codec(keep: int | None) -> RecordLog:
    """The encoding of the ``visits`` table keeping the last ``keep`` visits."""
    return RecordLog(VISIT, None if keep is None else int(keep))


class FeatureTables:
    """Per-feature methods of :class:`~.pagedb.PageDB` (a mixin)."""

    side_table: Callable[..., SideTable]  # PageDB's
    meta_section: Callable[..., Any]  # PageDB's
    own_meta_section: Callable[..., None]  # PageDB's
    path: str
    readonly: bool

    def _declare_feature_tables(self) -> None:
        self._requests = self.side_table("requests", REQUESTS_CODEC)
        self._errors = self.side_table("errors", ERRORS_CODEC)
        self._visits = self.side_table("visits", visits_codec(None))
        self._validators = self.side_table("validators", VALIDATORS_CODEC)
        self._legacy_requests: str | None = None  # the refusal, for a read-only database of pickled requests

    def _check_request_format(self, txn: Any) -> None:
        """Refuse a database whose ``requests`` table is not in
        :data:`REQUESTS_FORMAT` (read-only: refuse to read the table).

        Databases written before the format was recorded pickled their
        requests: they have stored requests and no ``requests`` section.
        Their values are never unpickled (that could run code put in the
        file); an empty table has nothing to convert and is simply adopted.
        """
        found = self.meta_section(REQUESTS_SECTION)
        if found is None:
            db = self._requests.db
            n = txn.stat(db)["entries"] if db is not None else 0
            if n:
                self._legacy_requests = (
                    f"{self.path}: this page database keeps {n} requests in the pickle format of "
                    "frontera_linkrank before request format 1; they are not read, since unpickling can "
                    "run code planted in the file. Crawl into a new page database (the link graph can "
                    "be carried over with `frontera-linkrank dump info`/`dump links` and "
                    "`frontera-linkrank import`)"
                )
                if not self.readonly:
                    raise PageDBError(self._legacy_requests)
        elif found != REQUESTS_FORMAT:
            raise PageDBError(
                f"{self.path}: stored requests in format {found}, this frontera_linkrank reads {REQUESTS_FORMAT}"
            )
        if not self.readonly:
            self.own_meta_section(REQUESTS_SECTION, lambda: REQUESTS_FORMAT)

    def set_request_extras(self, i: int, parts: tuple) -> None:
        """Keep a request's non-default parts (method, headers, cookies, meta,
        body) so it is handed out as it came in.
        ``side_table("requests", REQUESTS_CODEC).put(i, parts)``.

        Raises
        ------
        Unencodable
            A part is not plain data (nothing is stored then).
        """
        self._requests.put(i, parts)

    def request_extras(self, idx: Iterable[int], txn: Any) -> dict[int, tuple | Unreadable]:
        """{index: (method, headers, cookies, meta, body)} for pages with
        stored request parts among ``idx`` (an :class:`~.packed.Unreadable`
        where the stored value does not decode). ``....get_many(idx, txn)``.

        Raises
        ------
        PageDBError
            A read-only database of pickled requests.
        """
        if self._legacy_requests is not None:
            raise PageDBError(self._legacy_requests)
        return self._requests.get_many(list(idx), txn)

    def set_error(self, i: int, message: object) -> None:
        """Keep page ``i``'s last fetch error (its first 4096 bytes in UTF-8).
        ``side_table("errors", ERRORS_CODEC).put(i, str(message))``."""
        self._errors.put(i, str(message))

    def error_message(self, i: int, txn: Any) -> str | None:
        """Page ``i``'s last fetch error, or None. ``....get(i, txn)``."""
        return self._errors.get(i, txn)

    @property
    def max_visits(self) -> int | None:
        """Recrawl visits kept per page (None, until set: all).
        ``side_table("visits", visits_codec(n))`` sets it."""
        return self._visits.codec.keep  # type: ignore[attr-defined]

    @max_visits.setter
    def max_visits(self, n: int | None) -> None:
        self.side_table("visits", visits_codec(n))

    def add_visit(self, i: int, interval: float, changed: bool) -> None:
        """Record a recrawl visit of page ``i`` (kept: the last :attr:`max_visits`).
        ``....put(i, [(interval, changed)])``."""
        self._visits.put(i, [(float(interval), bool(changed))])

    def visits(self, i: int, txn: Any) -> np.ndarray:
        """Recrawl visits of page ``i`` (a :data:`VISIT` array, oldest
        first), this batch's included. ``....get(i, txn, np.zeros(0, VISIT))``."""
        return self._visits.get(i, txn, np.zeros(0, VISIT))

    def set_validators(self, i: int, etag: str | None, last_modified: str | None) -> None:
        """Keep the ``ETag`` / ``Last-Modified`` of page ``i``'s last fetch.
        ``side_table("validators", VALIDATORS_CODEC).put(i, [etag, last_modified])``."""
        self._validators.put(i, [etag, last_modified])

    def validators(self, idx: Iterable[int], txn: Any) -> dict[int, tuple]:
        """{index: (etag, last_modified)} of the pages ``idx`` that have them.
        ``{i: tuple(v) for i, v in ....get_many(idx, txn).items()}``."""
        return {i: tuple(v) for i, v in self._validators.get_many(list(idx), txn).items()}


__all__ = [
    "ERRORS_CODEC", "REQUESTS_CODEC", "REQUESTS_FORMAT", "REQUESTS_SECTION", "VALIDATORS_CODEC", "VISIT",
    "FeatureTables", "RequestPartsCodec", "visits_codec",
]  # fmt: skip
