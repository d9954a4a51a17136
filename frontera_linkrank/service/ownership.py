"""A crawl on a broker belongs to one page database and is served by one
frontier at a time.

- **The run.** The first time a page database serves a crawl it draws a
  run id, stored in the database (metadata section ``service``) and on the
  broker (record ``run``). A frontier whose database and broker disagree
  (the broker holds a crawl of the same name from another database, or an
  older one's feed) refuses to start, with one line saying how to go on:
  another ``--crawl`` name, or ``--reset-broker`` to delete that crawl's
  keys. Lease ids and publish sequences therefore never meet another
  crawl's entries. A broker that lost the record (restarted empty,
  ``FLUSHDB``) gets it back: the database is the source of truth.
- **The lock.** The serving frontier holds the record ``frontier`` (its
  host, pid, path, start time and a random token) with an expiry of
  :data:`LOCK_TTL` seconds, extended every second. A second frontier is
  refused with one line naming the first. A lock whose holder ran on this
  machine and is gone (``kill -9``) is taken over at once; one from another
  machine expires by itself.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from typing import Any

from . import codec
from .leases import LeaseBook
from .transport import Transport

LOCK_TTL = 30.0
"""Seconds a frontier's lock outlives its last extension."""


class FrontierRefused(Exception):
    """This frontier may not serve the crawl (the message says why and what to do)."""


def _when(ts: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ts)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _alive(pid: Any) -> bool:
    if not codec.is_int(pid, 1, 1 << 31):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Ownership:
    """The run record and the lock of crawl ``crawl`` for the database of ``book``.

    Parameters
    ----------
    transport : Transport
    book : LeaseBook
        Holds the database's run id (``book.run``).
    path : str
        The page database (shown to a frontier that is refused).
    broker : str
        The broker as logs show it (password masked).
    """

    def __init__(self, transport: Transport, book: LeaseBook, path: str, crawl: str, broker: str) -> None:
        self.t = transport
        self.book = book
        self.crawl = crawl
        self.broker = broker
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time(), "path": path,
                   "token": uuid.uuid4().hex}
        self.lock = codec.record("lock", self.me, getattr(transport, "key", None))
        self.run_record: bytes = b""

    def _holder(self) -> str:
        h = self.t.get("frontier") or {}
        return (f"{h.get('host', '?')} pid {h.get('pid', '?')}, serving since {_when(h.get('since'))}"
                f" ({h.get('path', '?')})")

    def claim(self, reset: bool = False, partitions: int = 0) -> None:
        """Take the lock and check (or set) the run; raises
        :class:`FrontierRefused`. With ``reset`` the crawl's keys on the
        broker are deleted first (refused while another frontier serves it)."""
        self._lock()
        if reset:
            self.t.reset()
            self._lock()
        raw = self.t.get_raw("run")
        rec = self.t.get("run")
        if raw is not None and (rec is None or not isinstance(rec.get("run"), str)):
            raise self._refuse("its run record is unreadable (written with another LINKRANK_SECRET, or by "
                               "another program)")
        if self.book.run is None:
            if rec is not None:
                raise self._refuse(f"it belongs to another page database ({rec.get('path', '?')} on "
                                   f"{rec.get('host', '?')}, first served {_when(rec.get('created'))})")
            if not self.book.served and any(self.t.published_top(p) for p in range(partitions)):
                raise self._refuse("its feed holds requests of an earlier crawl")
            self.book.run = uuid.uuid4().hex  # stored at the next commit
        elif rec is not None and rec["run"] != self.book.run:
            raise self._refuse(f"it belongs to another run ({rec.get('path', '?')} on {rec.get('host', '?')}, "
                               f"first served {_when(rec.get('created'))})")
        if rec is not None:
            self.run_record = raw  # type: ignore[assignment]
            return
        self.run_record = codec.record("run", {"run": self.book.run, "path": self.me["path"],
                                               "host": self.me["host"], "created": time.time()},
                                       getattr(self.t, "key", None))
        _, run = self.t.claim(self.lock, LOCK_TTL, self.run_record)
        if not run:
            raise self._refuse("another frontier claimed it meanwhile")

    def _lock(self) -> None:
        raw = self.t.get_raw("frontier")
        if raw is not None and raw != self.lock:
            h = self.t.get("frontier") or {}
            if h.get("host") == self.me["host"] and (h.get("pid") == self.me["pid"] or not _alive(h.get("pid"))):
                self.t.force_lock(self.lock, LOCK_TTL)  # its holder is gone (kill -9): ours
                return
            raise FrontierRefused(f"another frontier serves crawl {self.crawl!r} on {self.broker}: "
                                  f"{self._holder()}; stop it first (its lock expires {LOCK_TTL:.0f} s after it "
                                  "stops)")
        lock, _ = self.t.claim(self.lock, LOCK_TTL, None)
        if not lock:
            raise FrontierRefused(f"another frontier serves crawl {self.crawl!r} on {self.broker}: "
                                  f"{self._holder()}")

    def _refuse(self, why: str) -> FrontierRefused:
        self.t.release(self.lock)
        return FrontierRefused(
            f"crawl {self.crawl!r} on {self.broker} cannot be served from {self.me['path']}: {why}. Serve this "
            "database under another --crawl name, or add --reset-broker to delete that crawl's data on the broker")

    def tick(self) -> bool:
        """Extend the lock; True if the broker had lost the crawl's keys
        (the service then sets them up again and republishes). Raises
        :class:`FrontierRefused` if another frontier took the crawl over."""
        lock, run = self.t.tick(self.lock, LOCK_TTL, self.run_record)
        if lock == 0:
            raise FrontierRefused(f"another frontier took crawl {self.crawl!r} on {self.broker} over: "
                                  f"{self._holder()}; this one stops")
        if run == 0:
            raise FrontierRefused(f"crawl {self.crawl!r} on {self.broker} was reset and now belongs to another "
                                  "page database; this one stops")
        return lock == 2 or run == 2

    def release(self) -> None:
        """Give the lock up (at a clean stop)."""
        self.t.release(self.lock)
