"""A crawl on a broker belongs to one page database and is served by one
frontier at a time.

- **The run.** The first time a page database serves a crawl it draws a
  run id, stored in the database (metadata section ``service``) and on the
  broker (record ``run``). A frontier whose database and broker disagree
  (the broker holds a crawl of the same name from another database)
  refuses to start, with one line saying how to go on:
  another ``--crawl`` name, or ``--reset-broker`` to delete that crawl's
  keys. Lease ids and publish sequences therefore never meet another
  crawl's entries. A broker that lost the record (restarted empty,
  ``FLUSHDB``) gets it back: the database is the source of truth. A new
  run starts on an empty feed (the log is kept: spiders started first may
  have sent seeds).
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
CLAIM_ATTEMPTS = 5
"""Times a starting frontier checks and claims the crawl before giving up."""


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


def _record_anyway(raw: bytes, kind: str) -> dict | None:
    """The record of ``kind`` in ``raw`` whatever secret sealed it (its MAC
    not checked: only to tell another secret's record from garbage)."""
    for body in (raw, raw[: -codec.MAC_BYTES]):
        try:
            return codec.unpack(body, kind)
        except codec.CodecError:
            continue
    return None


def _valid_lock(h: Any) -> bool:
    """A lock record of a frontier (not another writer's bytes)."""
    return (isinstance(h, dict) and isinstance(h.get("host"), str) and codec.is_int(h.get("pid"), 1, 1 << 31)
            and isinstance(h.get("token"), str) and isinstance(h.get("since"), (int, float)))


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
        raw = self.t.get_raw("frontier")
        h = self.t.get("frontier") or (_record_anyway(raw, "lock") if raw else None) or {}
        return (f"{h.get('host', '?')} pid {h.get('pid', '?')}, serving since {_when(h.get('since'))}"
                f" ({h.get('path', '?')})")

    def claim(self, reset: bool = False, partitions: int = 0) -> None:
        """Take the lock and check (or set) the run; raises
        :class:`FrontierRefused`. With ``reset`` the crawl's keys on the
        broker are deleted first (refused while another frontier serves it)."""
        if reset:
            self._lock()
            self.t.reset()
        # Another writer's bytes landing on the lock or the run record
        # between the check and the claim make the claim fail: checking
        # again removes them. A frontier that really claimed the crawl
        # meanwhile is named by the check.
        for _ in range(CLAIM_ATTEMPTS):
            self._lock()
            if self._claim_run(partitions):
                return
        raise self._refuse("another frontier claimed it meanwhile")

    def _claim_run(self, partitions: int) -> bool:
        """Check (or set) the run record; False if the final claim failed."""
        raw = self.t.get_raw("run")
        rec = self.t.get("run")
        if raw is not None and rec is None:
            if _record_anyway(raw, "run") is not None:
                raise self._refuse("its run record is signed with another LINKRANK_SECRET (or none)")
            self.t.delete_record("run")  # another writer's bytes, no run record: nobody's
        if rec is not None and not isinstance(rec.get("run"), str):
            rec = None
            self.t.delete_record("run")
        if self.book.run is None:
            if rec is not None:
                raise self._refuse(f"it belongs to another page database ({rec.get('path', '?')} on "
                                   f"{rec.get('host', '?')}, first served {_when(rec.get('created'))})")
            # A new run owns no feed entry yet: whatever is there is another
            # writer's (or a crawl of a version without run records).
            self.t.clear_feed(partitions)
            self.book.run = uuid.uuid4().hex  # stored at the next commit
        elif rec is not None and rec["run"] != self.book.run:
            raise self._refuse(f"it belongs to another run ({rec.get('path', '?')} on {rec.get('host', '?')}, "
                               f"first served {_when(rec.get('created'))})")
        if rec is not None:
            self.run_record = raw  # type: ignore[assignment]
            return True
        self.run_record = codec.record("run", {"run": self.book.run, "path": self.me["path"],
                                               "host": self.me["host"], "created": time.time()},
                                       getattr(self.t, "key", None))
        _, run = self.t.claim(self.lock, LOCK_TTL, self.run_record)
        return run

    def _lock(self) -> None:
        # The lock can change between reading and claiming it (another
        # writer's bytes, a frontier starting): read it again then.
        for _ in range(CLAIM_ATTEMPTS):
            raw = self.t.get_raw("frontier")
            if raw is not None and raw != self.lock:
                h = self.t.get("frontier") or _record_anyway(raw, "lock") or {}
                if not _valid_lock(h) or (h["host"] == self.me["host"] and (h["pid"] == self.me["pid"]
                                                                             or not _alive(h["pid"]))):
                    self.t.force_lock(self.lock, LOCK_TTL)  # not a lock, or its holder is gone (kill -9): ours
                    return
                raise FrontierRefused(f"another frontier serves crawl {self.crawl!r} on {self.broker}: "
                                      f"{self._holder()}; stop it first (its lock expires {LOCK_TTL:.0f} s after "
                                      "it stops)")
            lock, _ = self.t.claim(self.lock, LOCK_TTL, None)
            if lock:
                return
        raise FrontierRefused(f"another frontier serves crawl {self.crawl!r} on {self.broker}: {self._holder()}")

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
        lost = lock == 2 or run == 2
        if lock == 0:
            h = self.t.get("frontier")
            if _valid_lock(h):
                raise FrontierRefused(f"another frontier took crawl {self.crawl!r} on {self.broker} over: "
                                      f"{self._holder()}; this one stops")
            self.t.force_lock(self.lock, LOCK_TTL)  # not a lock (another writer's bytes): ours again
            lost = True
        if run == 0:
            rec = self.t.get("run")
            if rec is not None and isinstance(rec.get("run"), str) and rec["run"] != self.book.run:
                raise FrontierRefused(f"crawl {self.crawl!r} on {self.broker} was reset and now belongs to another "
                                      "page database; this one stops")
            self.t.put_raw("run", self.run_record)  # not a run record: ours again
            lost = True
        return lost

    def release(self) -> None:
        """Give the lock up (at a clean stop)."""
        self.t.release(self.lock)
