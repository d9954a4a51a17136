"""Opening the LMDB environment of a page database, with clear refusals.

A path is refused (:class:`~.errors.PageDBError`) when it is a file, a
non-empty directory without a database (so a typo never writes into a
photo album), an LMDB environment of something else, or a page database
of another schema version.
"""

import json
import logging
import os
from typing import Any

import lmdb

from . import meta as metadoc
from .errors import CorruptDatabase, DiskFullError, PageDBError, WriteError

logger = logging.getLogger(__name__)

# Tables of schema 2 (the page database's own and its features'); a read-only
# open requires them all.
TABLES = (
    b"meta", b"vertices", b"vlog", b"urls", b"requests", b"hosts", b"edges", b"errors", b"scores",
    b"visits", b"validators",
)  # fmt: skip
SPARE_TABLES = 8  # room for tables that features declare later (max_dbs)


def check_path(path: str, readonly: bool) -> None:
    """Refuse a path that cannot be (or become) a page database."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 (surrogate escapes): LMDB takes UTF-8 paths only
        shown = path.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise PageDBError(f"{shown}: the path is not valid UTF-8, which LMDB needs") from None
    if os.path.exists(path) and not os.path.isdir(path):
        raise PageDBError(f"{path}: is a file, not a page database directory")
    data = os.path.join(path, "data.mdb")
    if readonly and not os.path.exists(data):
        raise PageDBError(f"{path}: no page database here (no data.mdb)")
    if os.path.isdir(path) and not os.path.exists(data):
        others = [f for f in os.listdir(path) if f not in ("writer.lock", "lock.mdb")]
        if others:
            raise PageDBError(
                f"{path}: directory is not empty and holds no page database "
                f"(found {', '.join(sorted(others)[:5])}); refusing to write into it"
            )


def make_dir(path: str) -> None:
    """Create the page database directory (and its parents) if missing; one line if that fails."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise PageDBError(f"{path}: cannot create the page database directory: {e.strerror}") from None


def open_env(path: str, readonly: bool, map_size: int | None, sync: bool) -> Any:
    """The LMDB environment at ``path`` (``map_size`` None: as the
    environment last had it, LMDB's minimum for a new one)."""
    try:
        return lmdb.open(
            path,
            map_size=int(map_size or 0),
            max_dbs=len(TABLES) + SPARE_TABLES,
            readonly=readonly,
            create=not readonly,
            sync=sync,
            metasync=sync,
            readahead=False,
            max_readers=256,
        )
    except lmdb.Error as e:
        raise PageDBError(f"{path}: cannot open as an LMDB environment: {e}") from None


def clear_stale_readers(env: Any, path: str) -> int:
    """Free the reader slots of processes that died holding a read
    transaction (a tool killed with -9); returns how many.

    LMDB cannot reuse pages that a reader's snapshot may still see, so a
    dead reader's slot would make the file grow with every commit until
    the next open. The check costs about a microsecond.
    """
    cleared = env.reader_check()
    if cleared:
        logger.info("%s: freed %d reader slot(s) of processes that are gone", path, cleared)
    return cleared


# Less free space than this after a failed write: the disk is full. LMDB
# reports a short write as an I/O error, whatever its cause.
FULL_BELOW = 64 * 1024**2


def write_error(path: str, error: Exception) -> WriteError:
    """The error of a write transaction that failed with ``error``:
    :class:`DiskFullError` when the file system has (almost) no room left."""
    try:
        st = os.statvfs(path)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    text = str(error)
    if "No space" in text or "quota" in text or (free is not None and free < FULL_BELOW):
        room = f"{free / 1024**2:.1f} MiB free" if free is not None else "free space unknown"
        return DiskFullError(f"{path}: disk full, the page database cannot be written ({room} on its file "
                             f"system; LMDB: {text})")
    return WriteError(f"{path}: the page database cannot be written: {text}")


def begin_read(env: Any, **kw: Any) -> Any:
    """A read transaction, adopting a map grown by another process."""
    try:
        return env.begin(**kw)
    except lmdb.MapResizedError:
        env.set_mapsize(0)
        return env.begin(**kw)


def open_tables(env: Any, path: str, readonly: bool) -> dict[bytes, Any]:
    """Handles of the :data:`TABLES`; a writer creates them (and the
    metadata of a new database), a reader requires them."""
    with begin_read(env) as txn:
        existing = {bytes(k) for k, _ in txn.cursor().iternext()}
    if existing or readonly:
        _check_tables(env, path, existing)
    if readonly:
        # Every table, features' later ones included: a handle opened after the
        # reader's long transaction began would not be valid in it.
        return {name: env.open_db(name, create=False) for name in sorted(existing)}
    dbs = {}
    with env.begin(write=True) as txn:
        for name in TABLES:
            dbs[name] = env.open_db(name, txn=txn)
        if txn.get(b"meta", db=dbs[b"meta"]) is None:
            if existing:  # the document is written with the tables: its loss is damage, not a new database
                raise CorruptDatabase(f"{path}: the metadata document is missing (corrupt database)")
            txn.put(b"meta", metadoc.encode(metadoc.new_document()), db=dbs[b"meta"])
    return dbs


def _check_tables(env: Any, path: str, names: set[bytes]) -> None:
    """Refuse an environment that lacks tables of this schema: another
    program's, an older schema's, or a damaged one."""
    missing = [n.decode() for n in TABLES if n not in names]
    if not missing:
        return
    if b"meta" not in names:
        if len(missing) < len(TABLES) // 2:  # most of ours are there: a damaged table name
            raise CorruptDatabase(f"{path}: page database lacks tables {missing} (corrupt database)")
        raise PageDBError(f"{path}: LMDB environment without frontera_linkrank metadata; not a page database")
    # An older schema lacks newer tables: say which version it is.
    meta_db = env.open_db(b"meta", create=False)
    with begin_read(env) as txn:
        raw = txn.get(b"meta", db=meta_db)
        try:
            version = json.loads(bytes(raw)).get("version") if raw is not None else None
        except (ValueError, AttributeError):
            version = None
    if version not in metadoc.READS_VERSIONS and version is not None:
        raise PageDBError(
            f"{path}: page database schema version {version}, "
            f"this frontera_linkrank reads version {metadoc.SCHEMA_VERSION}"
        )
    raise CorruptDatabase(f"{path}: page database lacks tables {missing} (corrupt database)")


def table_handle(env: Any, dbs: dict[bytes, Any], name: bytes, readonly: bool) -> Any:
    """Handle of the table ``name``: a writer creates it if new; None if a
    read-only database lacks it."""
    if name not in dbs and not readonly:
        dbs[name] = env.open_db(name)
    return dbs.get(name)


def reserve(env: Any, remap_lock: Any, fraction: float) -> None:
    """Double the map size of ``env`` (under ``remap_lock``) until at least
    ``fraction`` of it is free."""
    info, stat = env.info(), env.stat()
    used = (info["last_pgno"] + 1) * stat["psize"]
    size = info["map_size"]
    while size - used < fraction * size:
        size *= 2
    if size != info["map_size"]:
        with remap_lock:
            env.set_mapsize(size)


__all__ = ["SPARE_TABLES", "TABLES", "begin_read", "check_path", "clear_stale_readers", "open_env", "open_tables",
           "reserve", "table_handle", "write_error"]
