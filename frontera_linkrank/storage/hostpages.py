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
from collections import defaultdict
from typing import Any

import numpy as np

from .errors import CorruptValue

_KEY = struct.Struct(">II")


class HostPages:
    """Per-host page lists in the LMDB table ``db`` (see the module docstring)."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self._added: dict[int, list[np.ndarray]] = defaultdict(list)  # host -> pages added in this batch
        self._replaced: dict[int, np.ndarray] = {}  # host -> its whole list, to write at commit
        self._next: dict[int, int] = {}  # host -> next block number (hosts seen since open)

    def add(self, hosts: np.ndarray, pages: np.ndarray) -> None:
        """List ``pages[k]`` under ``hosts[k]`` (new pages, in index order)."""
        hosts = np.asarray(hosts, np.int64)
        pages = np.asarray(pages, np.uint32)
        if not len(pages):
            return
        if (hosts == hosts[0]).all():
            self._added[int(hosts[0])].append(pages)
            return
        order = np.argsort(hosts, kind="stable")
        hosts, pages = hosts[order], pages[order]
        cuts = np.flatnonzero(np.diff(hosts)) + 1
        for h, part in zip(hosts[np.r_[0, cuts]].tolist(), np.split(pages, cuts)):
            self._added[h].append(part)

    def pages(self, txn: Any, host: int) -> np.ndarray:
        """Every page listed under ``host`` (committed in ``txn``, and this
        batch's), as uint32, in no particular order."""
        parts = []
        if host in self._replaced:
            parts.append(self._replaced[host])
        else:
            parts.extend(self._stored(txn, host))
        parts.extend(self._added.get(host, ()))
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
        self._added.pop(host, None)

    def write(self, txn: Any) -> None:
        """Write this batch's replacements and additions in ``txn``."""
        db = self.db
        for host, pages in self._replaced.items():
            cur = txn.cursor(db=db)
            prefix = host.to_bytes(4, "big")
            while cur.set_range(prefix) and bytes(cur.key()[:4]) == prefix:
                cur.delete()
            txn.put(_KEY.pack(host, 0), pages.astype("<u4").tobytes(), db=db)
            self._next[host] = 1
        for host in sorted(self._added):
            parts = self._added[host]
            seq = self._next.get(host)
            if seq is None:
                seq = self._last(txn, host) + 1
            data = (parts[0] if len(parts) == 1 else np.concatenate(parts)).astype("<u4").tobytes()
            txn.put(_KEY.pack(host, seq), data, db=db)
            self._next[host] = seq + 1

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
        self._added.clear()
        self._replaced.clear()

    def discard(self) -> None:
        """The batch was dropped (a failed commit is retried with it, so
        this is only for a reload): forget it, and the block numbers."""
        self.written()
        self._next.clear()

    @property
    def n_pending(self) -> int:
        """Pages added in this batch (not committed yet)."""
        return sum(len(p) for parts in self._added.values() for p in parts)
