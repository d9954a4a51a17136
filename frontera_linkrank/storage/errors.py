"""Errors raised by the page database."""


class PageDBError(Exception):
    """The path is not a usable page database (wrong kind, version, locked)."""


class CorruptDatabase(PageDBError):
    """A page database whose stored structures contradict each other."""


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


__all__ = ["CorruptDatabase", "PageDBError", "WriterLockedError"]
