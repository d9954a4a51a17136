"""Host names and their dense ids (the ``hosts`` table: name -> id, 4-byte
little-endian). Ids are given in order of first sight, so the table loads
as a list.

A broad crawl knows millions of hosts, and a name held as a Python string
with a dict entry and an id object costs over 100 bytes. :class:`HostNames`
keeps them in flat buffers instead: the names' UTF-8 bytes end to end, an
offset and a hash per host, and an open-addressing table of ids (24 to 32
bytes a host besides the name's bytes). Python's ``hash`` differs from
process to process: the table lives in memory only, built at each load.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .errors import CorruptDatabase

_ID = struct.Struct("<I")
_EMPTY = -1


class HostNames:
    """Host names by id (``names[i]``, ``len``, iteration) and ids by name
    (``get``), in flat buffers; names are only ever added.

    >>> h = HostNames()
    >>> h.add("a.test"), h.add("b.test"), h.get("a.test"), h.get("c.test"), h[1], list(h)
    (0, 1, 0, None, 'b.test', ['a.test', 'b.test'])
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._blob = bytearray()  # the names' UTF-8 bytes, end to end
        self._at = array("q", [0])  # host i's name is blob[at[i] : at[i + 1]]
        self._hash = array("q")  # host -> hash of its name's bytes: a probe compares names only when hashes agree
        self._slots = array("i", [_EMPTY]) * 16  # open addressing, linear probing: a host id or empty
        self.extend(names)

    def __len__(self) -> int:
        return len(self._at) - 1

    def __getitem__(self, host: int) -> str:
        if not -len(self) <= host < len(self):
            raise IndexError("host id out of range")
        host %= len(self)
        return self._blob[self._at[host] : self._at[host + 1]].decode()

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def get(self, name: str, default: int | None = None) -> int | None:
        """Id of host ``name``, or ``default``."""
        # Runs once per link to a new page: the probe is inlined.
        key = name.encode()
        h = hash(key)
        slots, hashes, at, blob = self._slots, self._hash, self._at, self._blob
        mask = len(slots) - 1
        i = h & mask
        while True:
            host = slots[i]
            if host == _EMPTY:
                return default
            if hashes[host] == h and blob[at[host] : at[host + 1]] == key:
                return host
            i = (i + 1) & mask

    def add(self, name: str) -> int:
        """Give the new host ``name`` (not known: :meth:`get` first) the next id."""
        host = len(self)
        key = name.encode()
        self._blob += key
        self._at.append(len(self._blob))
        self._hash.append(hash(key))
        if 2 * len(self) > len(self._slots):
            self._rehash()  # load factor at most 1/2: probes stay short
        else:
            self._place(host)
        return host

    def _place(self, host: int) -> None:
        slots = self._slots
        mask = len(slots) - 1
        i = self._hash[host] & mask
        while slots[i] != _EMPTY:
            i = (i + 1) & mask
        slots[i] = host

    def extend(self, names: Iterable[str]) -> None:
        """Add the new hosts ``names`` (distinct), in order."""
        self.extend_encoded([n.encode() for n in names])

    def extend_encoded(self, keys: list[bytes]) -> None:
        """Add the new hosts whose UTF-8 names are ``keys`` (distinct), in order."""
        if not keys:
            return
        k = len(keys)
        ends = len(self._blob) + np.cumsum(np.fromiter(map(len, keys), np.int64, k))
        self._blob += b"".join(keys)
        self._at.frombytes(ends.tobytes())
        self._hash.frombytes(np.fromiter(map(hash, keys), np.int64, k).tobytes())
        self._rehash()

    def utf8(self) -> bool:
        """Whether every name is valid UTF-8 (added by :meth:`extend_encoded`,
        they were not decoded). The names end to end decode, and no name
        starts with a continuation byte, exactly when each name decodes on
        its own: every name is then a run of whole characters."""
        try:
            self._blob.decode()
        except UnicodeDecodeError:
            return False
        at = np.frombuffer(self._at, np.int64)
        starts = at[:-1][at[1:] > at[:-1]]  # of the names that are not empty
        blob = np.frombuffer(self._blob, np.uint8)
        return not bool(((blob[starts] & 0xC0) == 0x80).any()) if len(starts) else True

    def _rehash(self) -> None:
        """Build the table of ids, twice as many slots as hosts or more.

        Linear probing in one pass: with the hosts in the order of the slot
        they want (``w``), each takes the first free slot from its own on,
        which is ``max(w[i], p[i - 1] + 1)``, so ``p = i + cummax(w - i)``.
        The few pushed past the table's end wrap around, placed one by one."""
        n = len(self)
        size = 16
        while size < 2 * n:
            size *= 2
        slots = np.full(size, _EMPTY, np.int32)
        wrapped: list[int] = []
        if n:
            want = np.frombuffer(self._hash, np.int64) & (size - 1)
            order = np.argsort(want, kind="stable")
            i = np.arange(n)
            pos = np.maximum.accumulate(want[order] - i) + i
            inside = pos < size
            slots[pos[inside]] = order[inside]
            wrapped = order[~inside].tolist()
        self._slots = array("i", slots.tobytes())
        for host in wrapped:
            self._place(host)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HostNames):
            return self._blob == other._blob and self._at == other._at
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable


class HostTable:
    """Host names by id and ids by name (:attr:`names`, a
    :class:`HostNames`), with the hosts added since the last commit.

    >>> h = HostTable(None)
    >>> h.host_id("a.test"), h.host_id("b.test"), h.host_id("a.test"), list(h.names)
    (0, 1, 0, ['a.test', 'b.test'])
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        self.names = HostNames()
        self._new: list[tuple[int, str]] = []

    @property
    def ids(self) -> HostNames:
        """Ids by name (``ids.get(name)``): the same object as :attr:`names`."""
        return self.names

    def load(self, txn: Any, path: str) -> None:
        """Read every host of the snapshot ``txn`` (drops unsaved ones)."""
        keys, values = [], []
        for k, v in txn.cursor(self.db):
            keys.append(bytes(k))
            values.append(bytes(v))
        if (np.fromiter(map(len, values), np.int64, len(values)) != _ID.size).any():
            raise CorruptDatabase(f"{path}: a host id is not {_ID.size} bytes (corrupt database)")
        ids = np.frombuffer(b"".join(values), "<u4")  # one conversion: a broad crawl knows millions of hosts
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(ids[order], np.arange(len(order))):
            raise CorruptDatabase(f"{path}: host ids are not dense (corrupt database)")
        names = HostNames()
        names.extend_encoded([keys[i] for i in order.tolist()])
        if not names.utf8():  # names are decoded when read: damage is found now
            raise CorruptDatabase(f"{path}: a host name is not UTF-8 (corrupt database)")
        self.names, self._new = names, []

    def host_id(self, name: str) -> int:
        """Id of host ``name``, adding it if new."""
        hid = self.names.get(name)
        if hid is None:
            hid = self.names.add(name)
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


__all__ = ["HostNames", "HostTable"]
