"""Host names and their dense ids (the ``hosts`` table: name -> id, 4-byte
little-endian). Ids are given in order of first sight, so the table loads
as a list."""

import struct
from typing import Any

import numpy as np

from .errors import CorruptDatabase

_ID = struct.Struct("<I")


class HostTable:
    """Host names by id (:attr:`names`) and ids by name (:attr:`ids`), with
    the hosts added since the last commit.

    >>> h = HostTable(None)
    >>> h.host_id("a.test"), h.host_id("b.test"), h.host_id("a.test"), h.names
    (0, 1, 0, ['a.test', 'b.test'])
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self._new: list[tuple[int, str]] = []

    def load(self, txn: Any, path: str) -> None:
        """Read every host of the snapshot ``txn`` (drops unsaved ones)."""
        keys, values = [], []
        for k, v in txn.cursor(self.db):
            keys.append(bytes(k))
            values.append(bytes(v))
        if any(len(v) != _ID.size for v in values):
            raise CorruptDatabase(f"{path}: a host id is not {_ID.size} bytes (corrupt database)")
        ids = np.frombuffer(b"".join(values), "<u4")  # one conversion: a broad crawl knows millions of hosts
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(ids[order], np.arange(len(order))):
            raise CorruptDatabase(f"{path}: host ids are not dense (corrupt database)")
        self.names = [keys[i].decode() for i in order.tolist()]
        self.ids, self._new = dict(zip(self.names, range(len(self.names)))), []

    def host_id(self, name: str) -> int:
        """Id of host ``name``, adding it if new."""
        hid = self.ids.get(name)
        if hid is None:
            hid = len(self.names)
            self.names.append(name)
            self.ids[name] = hid
            self._new.append((hid, name))
        return hid

    def write(self, txn: Any) -> None:
        """Write the new hosts in the write transaction ``txn``."""
        if self._new:
            items = sorted((name.encode(), _ID.pack(hid)) for hid, name in self._new)
            txn.cursor(self.db).putmulti(items)

    def written(self) -> None:
        """The new hosts are committed."""
        self._new = []


__all__ = ["HostTable"]
