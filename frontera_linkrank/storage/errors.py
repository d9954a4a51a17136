"""Errors raised by the page database."""

import lmdb

# LMDB's errors that mean the file itself is damaged (as opposed to full,
# read-only or locked).
LMDB_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError, lmdb.VersionMismatchError,
               lmdb.IncompatibleError, lmdb.BadChecksumError, lmdb.PanicError)  # fmt: skip


class PageDBError(Exception):
    """The path is not a usable page database (wrong kind, version, locked)."""


class CorruptDatabase(PageDBError):
    """A page database whose stored structures contradict each other."""


class CorruptValue(CorruptDatabase, ValueError):
    """A stored value that does not parse (also a ``ValueError``, for the
    callers that read values of any origin)."""


class WriteError(PageDBError):
    """A commit could not be written (the last committed state is intact)."""


class DiskFullError(WriteError):
    """A commit could not be written: the file system is full."""


class WriterLockedError(PageDBError):
    """Another process holds the database's writer lock.

    Attributes
    ----------
    holder : int or None
        Process id written in the lock file by its holder, if readable.
    """

    def __init__(self, message: str, holder: int | None = None) -> None:
        super().__init__(message)
        self.holder = holder


__all__ = ["LMDB_DAMAGE", "CorruptDatabase", "CorruptValue", "DiskFullError", "PageDBError", "WriteError",
           "WriterLockedError"]
