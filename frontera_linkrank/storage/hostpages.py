"""The pages of each host, in LMDB: where the frontier finds a host's
waiting pages again when the few it holds in memory run out.

Every page is listed under its host when it is added. A host's list is a
run of blocks keyed ``host (u4 BE) + seq (u4 BE)``, each block the page
indices added to the host in one commit (u4 little-endian), so reading a
host's pages is one range scan and a ``numpy.frombuffer`` per block. The
frontier rewrites a host's list as one block when most of it is crawled
(:meth:`HostPages.replace`), so a list stays within twice the host's
waiting pages plus one commit's additions.

Memory: the additions and replacements of the current batch, and the
next block number of each host touched since the database was opened.

Examples
--------
>>> import lmdb, tempfile, numpy as np
>>> env = lmdb.open(tempfile.mkdtemp(), max_dbs=1)
>>> hp = HostPages(env.open_db(b"hostpages"))
>>> hp.add(np.array([0, 1, 0]), np.array([10, 11, 12]))
>>> with env.begin(write=True) as txn:
...     hp.write(txn)
>>> hp.written()
>>> hp.add(np.array([0]), np.array([13]))
>>> with env.begin() as txn:
...     hp.pages(txn, 0).tolist(), hp.pages(txn, 1).tolist()
([10, 12, 13], [11])
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..numeric import at_least
from .errors import CorruptValue

_KEY = struct.Struct(">II")
_KEYS = np.dtype([("host", ">u4"), ("seq", ">u4")])  # the same keys as an array


class HostPages:
    """Per-host page lists in the LMDB table ``db`` (see the module docstring)."""

    def __init__(self, db: Any) -> None:
        self.db = db
        # This batch's additions as arrays (host, page), in the order added;
        # grouped by host once, when read or written.
        self._add_hosts: list[np.ndarray] = []
        self._add_pages: list[np.ndarray] = []
        self._grouped: tuple[np.ndarray, np.ndarray] | None = None
        self._replaced: dict[int, np.ndarray] = {}  # host -> its whole list, to write at commit
        # host -> next block number, 0 for a host not seen since the open (its
        # last block is looked up then): an array, one slot a host.
        self._next = np.zeros(0, np.int64)

    def add(self, hosts: np.ndarray, pages: np.ndarray) -> None:
        """List ``pages[k]`` under ``hosts[k]`` (new pages, in index order)."""
        if not len(pages):
            return
        self._add_hosts.append(np.array(hosts, np.int64))  # copies: the caller's arrays may change
        self._add_pages.append(np.array(pages, np.uint32))
        self._grouped = None

    def _added(self) -> tuple[np.ndarray, np.ndarray]:
        """This batch's additions (hosts, pages) sorted by host, each host's
        pages in the order added."""
        if self._grouped is None:
            if len(self._add_hosts) == 1:
                hosts, pages = self._add_hosts[0], self._add_pages[0]
            else:
                hosts, pages = np.concatenate(self._add_hosts), np.concatenate(self._add_pages)
            order = np.argsort(hosts, kind="stable")
            self._set_added(hosts[order], pages[order])
        assert self._grouped is not None
        return self._grouped

    def _set_added(self, hosts: np.ndarray, pages: np.ndarray) -> None:
        """Make ``hosts``, ``pages`` (grouped by host) the batch's additions."""
        self._grouped = hosts, pages
        self._add_hosts, self._add_pages = [hosts], [pages]

    def _added_to(self, host: int) -> np.ndarray:
        if not self._add_hosts:
            return np.zeros(0, np.uint32)
        hosts, pages = self._added()
        return pages[np.searchsorted(hosts, host) : np.searchsorted(hosts, host, "right")]

    def pages(self, txn: Any, host: int) -> np.ndarray:
        """Every page listed under ``host`` (committed in ``txn``, and this
        batch's), as uint32, in no particular order."""
        parts = [self._replaced[host]] if host in self._replaced else self._stored(txn, host)
        added = self._added_to(host)
        if len(added):
            parts.append(added)
        if not parts:
            return np.zeros(0, np.uint32)
        return parts[0].astype(np.uint32) if len(parts) == 1 else np.concatenate(parts).astype(np.uint32)

    def _stored(self, txn: Any, host: int) -> list[np.ndarray]:
        out = []
        cur = txn.cursor(db=self.db)
        prefix = host.to_bytes(4, "big")
        if cur.set_range(prefix):
            for key, value in cur:
                if bytes(key[:4]) != prefix:
                    break
                if len(value) % 4:
                    raise CorruptValue(f"host page block {bytes(key).hex()} is corrupt ({len(value)} bytes)")
                out.append(np.frombuffer(value, "<u4"))
        return out

    def replace(self, host: int, pages: np.ndarray) -> None:
        """Make ``pages`` the whole list of ``host`` (written at commit)."""
        self._replaced[host] = np.asarray(pages, np.uint32).copy()
        if self._add_hosts:  # additions made before are in ``pages``
            hosts, added = self._added()
            lo, hi = np.searchsorted(hosts, host), np.searchsorted(hosts, host, "right")
            if hi > lo:
                self._set_added(np.delete(hosts, np.s_[lo:hi]), np.delete(added, np.s_[lo:hi]))

    def write(self, txn: Any) -> None:
        """Write this batch's replacements and additions in ``txn``: each
        host's additions are one new block, all of them put in key order."""
        db = self.db
        for host, pages in self._replaced.items():
            cur = txn.cursor(db=db)
            prefix = host.to_bytes(4, "big")
            while cur.set_range(prefix) and bytes(cur.key()[:4]) == prefix:
                cur.delete()
            txn.put(_KEY.pack(host, 0), pages.astype("<u4").tobytes(), db=db)
            self._next = at_least(self._next, host + 1)
            self._next[host] = 1
        if not self._add_hosts:
            return
        hosts, pages = self._added()
        if not len(hosts):  # every addition was to a host replaced since
            return
        first = np.flatnonzero(np.r_[True, hosts[1:] != hosts[:-1]])
        bounds = np.r_[first, len(hosts)].tolist()
        listed = hosts[first]
        self._next = known = at_least(self._next, int(listed.max()) + 1)
        seqs = known[listed]
        for i in np.flatnonzero(seqs == 0).tolist():
            seqs[i] = self._last(txn, int(listed[i])) + 1
        keys = np.empty(len(listed), _KEYS)
        keys["host"], keys["seq"] = listed, seqs
        raw_keys, raw_pages = keys.tobytes(), pages.astype("<u4").tobytes()
        txn.cursor(db=db).putmulti([(raw_keys[8 * k : 8 * k + 8], raw_pages[4 * a : 4 * b])
                                    for k, (a, b) in enumerate(zip(bounds, bounds[1:]))])
        known[listed] = seqs + 1

    def _last(self, txn: Any, host: int) -> int:
        """Number of the last block of ``host`` (-1: none)."""
        cur = txn.cursor(db=self.db)
        if cur.set_range((host + 1).to_bytes(4, "big") if host < 0xFFFFFFFF else b"\xff" * 5):
            if not cur.prev():
                return -1
        elif not cur.last():
            return -1
        key = bytes(cur.key())
        return _KEY.unpack(key)[1] if key[:4] == host.to_bytes(4, "big") else -1

    def written(self) -> None:
        """The batch was committed: forget its additions and replacements."""
        self._add_hosts, self._add_pages, self._grouped = [], [], None
        self._replaced.clear()

    def discard(self) -> None:
        """The batch was dropped (a failed commit is retried with it, so
        this is only for a reload): forget it, and the block numbers."""
        self.written()
        self._next = np.zeros(0, np.int64)

    @property
    def n_pending(self) -> int:
        """Pages added in this batch (not committed yet)."""
        return sum(len(p) for p in self._add_pages)
