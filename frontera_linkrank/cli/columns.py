"""The per-page columns shown by ``page_db_dump info`` and written by ``page_db_export``.

One builder, :func:`page_columns`, makes every column either tool shows,
so a field means the same thing (and is computed the same way) in both.
A column is an array over all pages, except ``hash`` and ``url``, which
are read chunk by chunk from the database (:meth:`Column.read`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..scoring.aopic import Aopic
from ..storage.pagedb import PageDB
from ..storage.vertices import NO_PAGE, STATE_NAMES
from .common import SCORE_NAMES, books, fmt_float, fp_hex, printable_url, scores
from .queued import policy_keys, priorities


def _int_text(values: Any) -> list[str]:
    return [str(x) for x in values.tolist()]


def _float_text(values: Any) -> list[str]:
    return [fmt_float(x) for x in values.tolist()]


def _url_text(values: Any) -> list[str]:
    return [printable_url(u) for u in values]


def _as_is(values: Any) -> list[str]:
    return list(values)


@dataclass(frozen=True)
class Column:
    """One column of the page table.

    Attributes
    ----------
    name : str
        Column name (the header of ``dump info``, the CSV/Parquet field).
    values : numpy.ndarray or None
        Values over all pages by page index; None for a column read per
        chunk from the database (``hash``, ``url``).
    text : callable
        Values of a chunk -> their text without whitespace (``dump info``'s
        space-separated form; CSV writes the values themselves).
    """

    name: str
    values: np.ndarray | None
    text: Callable[[Any], list[str]]

    def read(self, db: PageDB, txn: Any, idx: np.ndarray) -> np.ndarray | list[str] | list[str | None]:
        """Values of pages ``idx`` (``txn``: a read snapshot of ``db``)."""
        if self.values is not None:
            return self.values[idx]
        if self.name == "hash":
            return fp_hex(db, idx)
        return db.urls(idx, txn)


# Column name -> how the text of its values is written.
_TEXT: dict[str, Callable[[Any], list[str]]] = {
    "hash": _as_is, "url": _url_text, "host": _as_is, "state": _as_is,
    **dict.fromkeys(("index", "status", "depth", "parent", "n_crawls", "n_changes", "n_out", "errors", "priority"),
                    _int_text),
    **dict.fromkeys(("first_crawl", "last_crawl", "score", "cash", "history", "importance", "key") + SCORE_NAMES,
                    _float_text),
}  # fmt: skip
NAMES = tuple(_TEXT)


def _values(db: PageDB, name: str, aopic: Callable[[], Aopic]) -> np.ndarray:
    """Column ``name`` over all pages (``aopic``: the books, made on first use)."""
    v, n = db.vertices, db.n_pages
    if name == "index":
        return np.arange(n)
    if name == "host":
        names = np.array([*db.host_names, ""], dtype=object)
        return names[v.host[:n].astype(np.int64)] if n else np.array([], object)
    if name == "state":
        return np.array([STATE_NAMES[s] for s in range(4)], object)[v.state[:n]]
    if name == "parent":
        return np.where(v.parent[:n] == NO_PAGE, -1, v.parent[:n].astype(np.int64))
    if name == "cash":
        return aopic().effective_cash()
    if name == "importance":
        return aopic().importance()
    if name in SCORE_NAMES:
        return scores(db, name)
    if name == "key":  # the crawl policy's, as the queue compares it (.queued)
        return policy_keys(db)[1]
    if name == "priority":
        return priorities(db)
    field = getattr(v, name)[:n]
    return field.astype(np.int64) if _TEXT[name] is _int_text else field.astype(np.float64)


def page_columns(db: PageDB, names: Sequence[str], whole_seconds: bool = False) -> Iterator[Column]:
    """The columns ``names`` of the pages of ``db``, in that order.

    Parameters
    ----------
    db : PageDB
        An open page database (its last commit).
    names : sequence of str
        Columns wanted, from :data:`NAMES`.
    whole_seconds : bool
        Crawl times rounded to whole seconds as integers (``dump info``)
        instead of float seconds (``export``).
    """
    cache: list[Aopic] = []

    def aopic() -> Aopic:
        # cash and importance share one set of books
        if not cache:
            cache.append(books(db))
        return cache[0]

    for name in names:
        if name not in _TEXT:
            raise ValueError(f"unknown column {name!r}")
        if name in ("hash", "url"):
            yield Column(name, None, _TEXT[name])
        elif whole_seconds and name in ("first_crawl", "last_crawl"):
            yield Column(name, np.rint(getattr(db.vertices, name)[: db.n_pages]).astype(np.int64), _int_text)
        else:
            yield Column(name, _values(db, name, aopic), _TEXT[name])
