"""The features' tables of schema 2, behind per-feature methods of
:class:`~.pagedb.PageDB`.

These methods predate side tables (:mod:`.sidetable`) and are kept while
their callers move to declaring the table themselves; each is one call on
a side table, shown in its docstring. The encodings below are those of
schema 2 and must not change (databases already hold them).
"""

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .sidetable import Json, Pickled, RecordLog, SideTable, Text

# One recrawl visit: seconds since the previous visit, and whether the
# content had changed.
VISIT = np.dtype([("interval", "<f8"), ("changed", "u1")])
REQUESTS_CODEC = Pickled()  # (method, headers, cookies, meta, body) of a request that is not a plain GET
ERRORS_CODEC = Text(errors="replace", max_bytes=4096)  # last fetch error
VALIDATORS_CODEC = Json()  # [etag, last_modified] of the last fetch


def visits_codec(keep: int | None) -> RecordLog:
    """The encoding of the ``visits`` table keeping the last ``keep`` visits."""
    return RecordLog(VISIT, None if keep is None else int(keep))


class FeatureTables:
    """Per-feature methods of :class:`~.pagedb.PageDB` (a mixin)."""

    side_table: Callable[..., SideTable]  # PageDB's

    def _declare_feature_tables(self) -> None:
        self._requests = self.side_table("requests", REQUESTS_CODEC)
        self._errors = self.side_table("errors", ERRORS_CODEC)
        self._visits = self.side_table("visits", visits_codec(None))
        self._validators = self.side_table("validators", VALIDATORS_CODEC)

    def set_request_extras(self, i: int, parts: tuple) -> None:
        """Keep a request's non-default parts (method, headers, cookies, meta,
        body) so it is handed out as it came in.
        ``side_table("requests", REQUESTS_CODEC).put(i, parts)``."""
        self._requests.put(i, parts)

    def request_extras(self, idx: Iterable[int], txn: Any) -> dict[int, tuple]:
        """{index: (method, headers, cookies, meta, body)} for pages with
        stored request parts among ``idx``. ``....get_many(idx, txn)``."""
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


__all__ = ["ERRORS_CODEC", "REQUESTS_CODEC", "VALIDATORS_CODEC", "VISIT", "FeatureTables", "visits_codec"]
