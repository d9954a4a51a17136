"""The lease book of a frontier service: which request each spider may
report on, and what of the broker's log the database has applied.

Every request handed to the broker is a *lease*: a lease id (from a
counter that only grows), the page, its feed partition and its publish
sequence. The rules that make the broker a mere transport:

- a lease is recorded in the same LMDB transaction that leases the page
  (:attr:`FrontierCore.on_leased`), and published only after it commits;
  a frontier restarted after a crash republishes every open lease the
  broker does not have (sequence above the partition's last one);
- a report is applied **once**: only while its page is leased under that
  very lease id (:meth:`LeaseBook.close`); a second report of the same
  fetch (a spider restarted, a retried write, a zombie) is counted and
  dropped;
- the offset of the last log entry applied is stored in the same
  transaction as its effects (metadata section ``service``), so entries
  re-read after a crash are skipped.

Lease records live in the side table ``leases`` (page -> ``[lease id,
sequence, partition]``); a page's record is its current lease while the
page is ``LEASED``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..storage.pagedb import PageDB
from ..storage.sidetable import Json
from ..storage.vertices import LEASED

SECTION = "service"
TABLE = "leases"


@dataclass(frozen=True)
class Lease:
    """One request handed out: its id, page, feed partition and publish sequence."""

    lease: int
    page: int
    partition: int
    seq: int


class LeaseBook:
    """Open leases of the page database ``db`` (see the module docstring).

    Parameters
    ----------
    db : PageDB
        Opened by the frontier core (writer).
    partitions : int
        Number of feed partitions; fixed for the life of a crawl.
    """

    def __init__(self, db: PageDB, partitions: int) -> None:
        self.db = db
        saved = db.meta_section(SECTION) or {}
        if saved.get("partitions", partitions) != partitions:
            raise ValueError(
                f"this crawl was started with {saved['partitions']} partitions, not {partitions}: "
                "the partition count cannot change during a crawl"
            )
        self.partitions = partitions
        self.lease_seq = int(saved.get("lease_seq", 0))
        self.pub_seq = int(saved.get("pub_seq", 0))
        self.log_offset: str | None = saved.get("log_offset")
        # The run of this page database on its broker (fixed at its first
        # start as a frontier service; None until then).
        self.run: str | None = saved.get("run")
        self.table = db.side_table(TABLE, Json())
        self.open: dict[int, Lease] = {}
        self.superseded: list[Lease] = []  # open leases replaced by a new one (the old one timed out)
        self.unrecorded: list[int] = []  # leased pages without a lease record (leased by a process without one)
        self._load()
        db.own_meta_section(SECTION, self.state_dict)

    def _load(self) -> None:
        v = self.db.vertices
        leased = np.flatnonzero(v.state[: v.n] == LEASED).tolist()
        if not leased:
            return
        with self.db.snapshot() as txn:
            records = self.table.get_many(leased, txn)
        for page in leased:
            rec = records.get(page)
            if rec is None:
                self.unrecorded.append(page)
            else:
                self.open[page] = Lease(int(rec[0]), page, int(rec[2]), int(rec[1]))

    def state_dict(self) -> dict[str, Any]:
        """The metadata section written at every commit."""
        return {"partitions": self.partitions, "lease_seq": self.lease_seq, "pub_seq": self.pub_seq,
                "log_offset": self.log_offset, "run": self.run}

    def issue(self, pages: list[int], partitions: list[int]) -> list[Lease]:
        """New leases for ``pages`` (in order), recorded for the next commit."""
        out = []
        for page, p in zip(pages, partitions):
            self.lease_seq += 1
            self.pub_seq += 1
            lease = Lease(self.lease_seq, page, p, self.pub_seq)
            old = self.open.get(page)
            if old is not None:  # expired and leased again in one round
                self.superseded.append(old)
            self.open[page] = lease
            self.table.put(page, [lease.lease, lease.seq, p])
            out.append(lease)
        return out

    def resequence(self, page: int) -> Lease | None:
        """Give the open lease of ``page`` a new publish sequence (its entry
        could not be placed in the feed); recorded for the next commit."""
        old = self.open.get(page)
        if old is None:
            return None
        self.pub_seq += 1
        lease = Lease(old.lease, page, old.partition, self.pub_seq)
        self.open[page] = lease
        self.table.put(page, [lease.lease, lease.seq, lease.partition])
        return lease

    def close(self, page: int | None, lease: int) -> bool:
        """The once-only rule: True (and the lease is closed) if ``page`` is
        leased under ``lease``; False for any other report."""
        if page is None:
            return False
        current = self.open.get(page)
        if current is None or current.lease != lease or self.db.vertices.state[page] != LEASED:
            return False
        del self.open[page]
        return True

    def drop_expired(self) -> list[Lease]:
        """Forget leases whose page is no longer leased (the lease timed out);
        returns them, and those replaced by a new lease of their page since."""
        out, self.superseded = self.superseded, []
        if not self.open:
            return out
        pages = np.fromiter(self.open, np.int64, len(self.open))
        gone = pages[self.db.vertices.state[pages] != LEASED].tolist()
        return out + [self.open.pop(page) for page in gone]

    def by_partition(self) -> Counter:
        """Open leases per partition."""
        return Counter(lease.partition for lease in self.open.values())

    def unpublished(self, tops: dict[int, int]) -> list[Lease]:
        """Open leases the broker lacks: sequence above their partition's top, in publish order."""
        return sorted((x for x in self.open.values() if x.seq > tops.get(x.partition, 0)), key=lambda x: x.seq)

    def lowest_open(self) -> dict[int, int]:
        """Lowest open sequence per partition (what a partition's feed must keep)."""
        out: dict[int, int] = {}
        for x in self.open.values():
            if x.seq < out.get(x.partition, 1 << 62):
                out[x.partition] = x.seq
        return out
