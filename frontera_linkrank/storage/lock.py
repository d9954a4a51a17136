"""The writer lock of a page database: one writing process at a time.

An exclusive ``flock`` on ``writer.lock`` in the database directory; the
holder writes its pid there so that a refused writer can say who holds it.
The lock dies with its process, so a killed crawl never leaves it behind.
"""

import errno
import fcntl
import os

from .errors import WriterLockedError


class WriterLock:
    """Take the writer lock of the database directory ``path`` (it must exist).

    Raises
    ------
    WriterLockedError
        Another process holds the lock.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> lock = WriterLock(d)
    >>> try:
    ...     WriterLock(d)  # flock is per open file: a second open is refused too
    ... except WriterLockedError as e:
    ...     e.holder == os.getpid()
    True
    >>> lock.release()
    """

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(os.path.join(path, "writer.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise WriterLockedError(
                    f"{path}: another process is writing to this page database"
                    + (f" (pid {holder})" if holder else "")
                    + "; open it read-only or stop that process",
                    int(holder) if holder.isdigit() else None,
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        """Release the lock (closing the file releases the flock); idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


__all__ = ["WriterLock"]
