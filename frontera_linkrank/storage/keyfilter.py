"""A Bloom filter of the fingerprints in the ``fps`` table.

Most fingerprints a broad crawl looks up in the table belong to pages it
has never seen: the links of a crawled page lead to pages found for the
first time, while the pages many links lead to are answered from memory
(:mod:`.fpindex`). In the table a lookup that finds nothing costs what one
that finds its page costs: a walk down the B-tree to a leaf, one read
from disk once the table is larger than the page cache. The filter
answers "not in the table" for nearly all of those keys without reading
it (B. H. Bloom, "Space/time trade-offs in hash coding with allowable
errors", CACM 13(7), 1970; Heritrix's ``BloomUriUniqFilter`` does this
for its whole URL set).

It never answers "not in the table" for a key that is in it: every key
written to the table is added as it is written, and the keys already
there when the writer opened are read from the table, a slice at a time
as lookups come (:meth:`KeyFilter.maybe`), so that opening a large
database does not wait for them. Until that scan has reached the end,
the filter is not asked. A key it wrongly lets through (about 1 in 100)
is looked up in the table as before.

The filter grows in segments: the first holds the table's keys at the
open and half as many again; when the keys added reach the capacity of
the newest one, a new one as large as all the keys so far is added. At
``BITS_PER_KEY`` bits a key of capacity, it takes 1.25 to 2.5 bytes a
key. Each full segment lets about 1 in 100 keys through: a filter grown
from an empty table to 100M keys, in 8 segments, about 7 in 100 (a
filter filled from the table has one).

Examples
--------
>>> import hashlib
>>> keys = np.array([hashlib.sha1(b"%d" % i).digest() for i in range(1000)], "S20")
>>> f = KeyFilter(capacity=1000)
>>> f.add(keys[:500])
>>> bool(f.absent(keys[:500]).any())  # never for a key added
False
>>> int(f.absent(keys[500:]).sum()) > 480  # nearly always for the others
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

BITS_PER_KEY = 10  # bits of a segment per key of its capacity
HASHES = 6  # bits set per key, in one 64-byte block: about 1% false positives in a full segment
KIND = "blocked512"  # how keys map to bits: a filter stored by another mapping is not taken back
SCAN = 1 << 15  # keys of the table read per lookup while the filter is filled
MIN_CAPACITY = 1 << 20

_M64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every bit of the result depends on every
    bit of ``z`` (fingerprints need not be uniform hashes)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _mix_one(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _hashes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 64-bit hashes of each 20-byte key (an array of ``S20``)."""
    raw = np.ascontiguousarray(keys).view(np.uint8).reshape(-1, 20)
    words = np.ascontiguousarray(raw[:, :16]).view("<u8")
    tail = np.ascontiguousarray(raw[:, 16:]).view("<u4").ravel().astype(np.uint64)
    return _mix(words[:, 0] ^ (tail << np.uint64(32))), _mix(words[:, 1] ^ tail)


def words_for(capacity: int) -> int:
    """64-bit words of a segment of ``capacity`` keys: whole blocks of 8."""
    return 8 * max(1, -(-int(capacity) * BITS_PER_KEY // 512))


class _Segment:
    """Bits blocked by cache line: a key sets :data:`HASHES` bits among the
    8 words of one 64-byte block (one memory access a key; M. Putze,
    P. Sanders, J. Singler, "Cache-, hash- and space-efficient Bloom
    filters", WEA 2007)."""

    def __init__(self, capacity: int, words: np.ndarray | None = None, count: int = 0) -> None:
        self.words = np.zeros(words_for(capacity), np.uint64) if words is None else words
        self.capacity = capacity
        self.count = count

    def _where(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The word and the bit of each of the keys' bits (one row a key)."""
        base = (h1 % np.uint64(len(self.words) // 8)) * np.uint64(8)
        g = h2[:, None] >> (np.arange(HASHES, dtype=np.uint64) * np.uint64(9))[None, :]
        return base[:, None] + (g & np.uint64(7)), np.uint64(1) << ((g >> np.uint64(3)) & np.uint64(63))

    def add(self, h1: np.ndarray, h2: np.ndarray) -> None:
        word, bit = (a.ravel() for a in self._where(h1, h2))
        order = np.argsort(word, kind="stable")  # the bits of one word OR-ed together, then set at once
        word, bit = word[order], bit[order]
        first = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1]))) if len(word) else word
        if len(first):
            self.words[word[first]] |= np.bitwise_or.reduceat(bit, first)
        self.count += len(h1)

    def holds(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        word, bit = self._where(h1, h2)
        return ((self.words[word] & bit) != 0).all(axis=1)

    def holds_one(self, h1: int, h2: int) -> bool:
        base = (h1 % (len(self.words) // 8)) * 8
        for i in range(HASHES):
            g = h2 >> (9 * i)
            if not int(self.words[base + (g & 7)]) >> ((g >> 3) & 63) & 1:
                return False
        return True


class KeyFilter:
    """The keys of one table: :meth:`add` every key written to it,
    :meth:`maybe` before looking keys up (see the module docstring)."""

    def __init__(self, capacity: int = MIN_CAPACITY) -> None:
        self._segments = [_Segment(max(int(capacity), 1))]
        self._scan_from: bytes | None = b""  # the next key of the table to read; None: all read
        self.count = 0

    @property
    def ready(self) -> bool:
        """Whether the keys the table held at the start are all in."""
        return self._scan_from is None

    def add(self, keys: np.ndarray) -> None:
        """Add ``keys`` (an array of ``S20``)."""
        if not len(keys):
            return
        h1, h2 = _hashes(keys)
        done = 0
        while done < len(keys):
            seg = self._segments[-1]
            room = seg.capacity - seg.count
            if room <= 0:
                self._segments.append(_Segment(max(MIN_CAPACITY, self.count)))
                continue
            take = slice(done, done + room)
            seg.add(h1[take], h2[take])
            self.count += len(h1[take])
            done += len(h1[take])

    def absent(self, keys: np.ndarray) -> np.ndarray:
        """Which of ``keys`` (``S20``) were surely never added."""
        h1, h2 = _hashes(keys)
        out = np.ones(len(keys), bool)
        for seg in reversed(self._segments):  # the largest first: most keys are answered there
            live = np.flatnonzero(out)
            if not len(live):
                break
            out[live[seg.holds(h1[live], h2[live])]] = False
        return out

    def absent_one(self, key: bytes) -> bool:
        """:meth:`absent` for one 20-byte key, without arrays."""
        tail = int.from_bytes(key[16:20], "little")
        h1 = _mix_one(int.from_bytes(key[0:8], "little") ^ (tail << 32))
        h2 = _mix_one(int.from_bytes(key[8:16], "little") ^ tail)
        return not any(seg.holds_one(h1, h2) for seg in self._segments)

    def maybe(self, keys: np.ndarray, snapshot: Callable[[], Any], db: Any) -> np.ndarray:
        """Which of ``keys`` may be in the table ``db`` (all of them until
        the filter holds the table; each call before then reads the next
        :data:`SCAN` keys of the table in a snapshot of its own)."""
        if not self.ready:
            self.fill(snapshot, db, SCAN)
            return np.ones(len(keys), bool)
        return ~self.absent(keys)

    def fill(self, snapshot: Callable[[], Any], db: Any, budget: int) -> None:
        """Read up to ``budget`` more keys of the table ``db`` into the filter."""
        start = self._scan_from
        if start is None:
            return
        with snapshot() as txn:
            if start == b"" and self.count == 0 and len(self._segments) == 1:
                # Sized for the table as it is and half as much again.
                entries = txn.stat(db)["entries"]
                self._segments = [_Segment(max(MIN_CAPACITY, entries + entries // 2))]
            cur = txn.cursor(db=db)
            got: list[bytes] = []
            if cur.set_range(start) if start else cur.first():
                for key in cur.iternext(keys=True, values=False):
                    got.append(bytes(key))
                    if len(got) >= budget:
                        break
        keys = np.array(got, "S20")
        self.add(keys)
        self._scan_from = got[-1] if len(got) >= budget else None

    def nbytes(self) -> int:
        """Bytes the filter's bits take."""
        return sum(seg.words.nbytes for seg in self._segments)

    def layout(self) -> list[list[int]]:
        """Each segment's capacity, keys added and 64-bit words: with the
        words (:meth:`parts`), what :meth:`restore` takes."""
        return [[seg.capacity, seg.count, len(seg.words)] for seg in self._segments]

    def parts(self) -> list[memoryview]:
        """The segments' words, little-endian, in the order of :meth:`layout`."""
        return [seg.words.astype("<u8", copy=False).data for seg in self._segments]

    @staticmethod
    def size_of(layout: Any) -> int:
        """Bytes of the words of ``layout``; ValueError if it is not one
        :meth:`layout` gives."""
        if not isinstance(layout, list) or not layout:
            raise ValueError("no segments")
        size = 0
        for seg in layout:
            if (not isinstance(seg, list) or len(seg) != 3 or not all(type(x) is int for x in seg)
                    or not 0 <= seg[1] <= seg[0] or seg[2] != words_for(seg[0])):
                raise ValueError(f"segment {seg!r} does not fit its capacity")
            size += 8 * seg[2]
        return size

    @classmethod
    def restore(cls, layout: list[list[int]], raw: bytearray) -> KeyFilter:
        """A filter holding what the one that gave ``layout`` and ``raw``
        (its :meth:`parts` end to end) held, ready: the table it stood for
        must hold the same keys."""
        words = np.frombuffer(raw, "<u8", count=cls.size_of(layout) // 8)  # (writable: a bytearray)
        f = cls(capacity=1)
        f._segments, at = [], 0
        for capacity, count, n in layout:
            f._segments.append(_Segment(capacity, words[at : at + n], count))
            at += n
        f.count, f._scan_from = sum(seg.count for seg in f._segments), None
        return f


__all__ = ["KeyFilter"]
