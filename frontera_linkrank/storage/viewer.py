"""What a viewer of a running crawl reads of its page database: the
metadata document and the stored rankings' info records, in one short
read transaction, without opening it as a :class:`~.pagedb.PageDB` (which
loads every page's hot fields)."""

import os
from typing import Any

from . import integrity, vectors
from . import meta as metadoc
from .environment import begin_read, check_path, open_env, open_tables
from .errors import LMDB_DAMAGE, CorruptDatabase


def read_metadata(path: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(document, infos)``: the committed metadata document of the page
    database at ``path`` and the info records of its stored ranking
    vectors, read in one snapshot without loading any page (what a viewer
    polling a running crawl reads).

    Raises
    ------
    PageDBError
        ``path`` is not a page database (:class:`CorruptDatabase`: a damaged one).
    """
    path = os.fspath(path)
    check_path(path, True)
    integrity.check_file(path)
    env = open_env(path, True, None, False)
    try:
        dbs = open_tables(env, path, True)
        with begin_read(env) as txn:
            try:
                doc = metadoc.decode(txn.get(b"meta", db=dbs[b"meta"]))
                metadoc.check_schema(doc, path)
                infos = {name: vectors.read_info(txn, dbs[b"scores"], name) or {}
                         for name in vectors.names(txn, dbs[b"scores"])}  # fmt: skip
            except (ValueError, TypeError) as e:
                raise CorruptDatabase(f"{path}: metadata unreadable: {e} (corrupt database)") from None
    except LMDB_DAMAGE as e:
        raise CorruptDatabase(f"{path}: LMDB reports damage: {e} (corrupt database)") from None
    finally:
        env.close()
    return doc, infos


__all__ = ["read_metadata"]
