"""What a viewer of a running crawl reads of its page database: the
metadata document and the stored rankings' info records, or one ranking's
top pages, each in one short read transaction, without opening it as a
:class:`~.pagedb.PageDB` (which loads every page's hot fields)."""

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..numeric import top_k
from . import integrity, vectors
from . import meta as metadoc
from .environment import begin_read, check_path, open_env, open_tables
from .errors import LMDB_DAMAGE, CorruptDatabase
from .keys import page_keys
from .sidetable import Text


@contextlib.contextmanager
def _snapshot(path: str, what: str) -> Iterator[tuple[Any, dict[bytes, Any]]]:
    """``(txn, tables)``: one read transaction on the database at ``path``
    (opened read-only for it, closed after); what it reads that does not
    parse is damage to ``what``."""
    check_path(path, True)
    integrity.check_file(path)
    env = open_env(path, True, None, False)
    try:
        dbs = open_tables(env, path, True)
        with begin_read(env) as txn:
            try:
                yield txn, dbs
            except (ValueError, TypeError) as e:
                raise CorruptDatabase(f"{path}: {what} unreadable: {e} (corrupt database)") from None
    except LMDB_DAMAGE as e:
        raise CorruptDatabase(f"{path}: LMDB reports damage: {e} (corrupt database)") from None
    finally:
        env.close()


def read_metadata(path: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, list[Any] | None]]:
    """``(document, infos, tops)``: the committed metadata document of the
    page database at ``path``, the info records of its stored ranking
    vectors and the top pages stored with each (None: stored without),
    read in one snapshot without loading any page (what a viewer polling a
    running crawl reads).

    Raises
    ------
    PageDBError
        ``path`` is not a page database (:class:`CorruptDatabase`: a damaged one).
    """
    path = os.fspath(path)
    with _snapshot(path, "metadata") as (txn, dbs):
        doc = metadoc.decode(txn.get(b"meta", db=dbs[b"meta"]))
        metadoc.check_schema(doc, path)
        names = vectors.names(txn, dbs[b"scores"])
        infos = {name: vectors.read_info(txn, dbs[b"scores"], name) or {} for name in names}
        tops = {name: vectors.read_top(txn, dbs[b"scores"], name) for name in names}
    return doc, infos, tops


def read_top(path: str, name: str, k: int) -> list[dict[str, Any]]:
    """The ``k`` pages of the largest values of the stored ranking vector
    ``name`` (``[{"index", "url", name}]``, largest first, ties by lower
    index, as ``stats`` lists them), read off the vector in one snapshot
    without loading the pages' records (for a vector stored without its
    list); [] when there is no such vector."""
    with _snapshot(os.fspath(path), f"ranking vector {name!r}") as (txn, dbs):
        values, _ = vectors.read_scores(txn, dbs[b"scores"], name)
        if values is None:
            return []
        best = top_k(values, k)
        urls = [txn.get(key, db=dbs[b"urls"]) for key in page_keys(best)]
    return vectors.top_rows(name, values, best, [None if u is None else Text().decode(u) for u in urls])


__all__ = ["read_metadata", "read_top"]
