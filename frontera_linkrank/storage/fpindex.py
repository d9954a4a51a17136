"""Fingerprint -> page index, in LMDB: the URL map a crawl does not hold in memory.

The ``fps`` table maps each page's 20-byte fingerprint to its index
(8-byte big-endian). :class:`FingerprintIndex` looks a batch's
fingerprints up in one sorted ``getmulti``, keeps the pages added in the
current batch in a dict until the commit writes them (one sorted
``putmulti``), and remembers at most ``cache`` recent answers, so that the
pages many links lead to are not looked up again and again.

Examples
--------
>>> import lmdb, tempfile
>>> env = lmdb.open(tempfile.mkdtemp(), max_dbs=1)
>>> ix = FingerprintIndex(env.open_db(b"fps"), lambda: env.begin(buffers=True))
>>> ix.add([b"a" * 20, b"b" * 20], 0)
>>> with env.begin(write=True) as txn:
...     ix.write(txn)
>>> ix.written()
>>> ix.find_many([b"b" * 20, b"c" * 20, b"a" * 20])
[1, None, 0]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from .errors import CorruptDatabase
from .keys import key_page, page_key


class FingerprintIndex:
    """The ``fps`` table (see the module docstring).

    Parameters
    ----------
    db
        LMDB handle of the ``fps`` table.
    snapshot : callable() -> context manager of a read transaction
    cache : int
        Answers remembered at most (0: none).
    """

    def __init__(self, db: Any, snapshot: Callable[[], Any], cache: int = 1 << 18) -> None:
        self.db = db
        self._snapshot = snapshot
        self.new: dict[bytes, int] = {}  # pages added in this batch
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self.cache_size = int(cache)
        self.lookups = 0  # fingerprints looked up in LMDB

    def add(self, fps: Sequence[bytes], start: int) -> None:
        """Pages ``start, start+1, ...`` have fingerprints ``fps``."""
        self.new.update(zip(fps, range(start, start + len(fps))))

    def find(self, fp: bytes) -> int | None:
        """Index of the page with fingerprint ``fp``, or None."""
        return self.find_many([fp])[0]

    def find_many(self, fps: Sequence[bytes]) -> list[int | None]:
        """Indices of the pages with fingerprints ``fps`` (None: unknown)."""
        new, cache = self.new, self._cache
        out: list[int | None] = []
        missing: dict[bytes, list[int]] = {}
        for k, fp in enumerate(fps):
            i = new.get(fp)
            if i is None:
                i = cache.get(fp)
            if i is None:
                missing.setdefault(fp, []).append(k)
            out.append(i)
        if missing:
            self.lookups += len(missing)
            with self._snapshot() as txn:
                found = txn.cursor(db=self.db).getmulti(sorted(missing))
            for key, value in found:
                if len(value) != 8:
                    raise CorruptDatabase(f"fingerprint {bytes(key).hex()} maps to {len(value)} bytes "
                                          "(corrupt database)")
                key = bytes(key)
                i = key_page(value)
                for k in missing[key]:
                    out[k] = i
                if self.cache_size:
                    cache[key] = i
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        return out

    def write(self, txn: Any) -> None:
        """Write this batch's new fingerprints in ``txn``."""
        if self.new:
            items = sorted((fp, page_key(i)) for fp, i in self.new.items())
            txn.cursor(db=self.db).putmulti(items)

    def written(self) -> None:
        """The batch was committed: its pages are in the table now."""
        if self.cache_size:
            cache = self._cache
            for fp, i in self.new.items():
                cache[fp] = i
            while len(cache) > self.cache_size:
                cache.popitem(last=False)
        self.new = {}

    def remember(self, fps: Sequence[bytes], pages: Sequence[int]) -> None:
        """Cache known pages the crawl will look up soon (pages handed out:
        their responses come back by fingerprint)."""
        if self.cache_size:
            cache = self._cache
            cache.update(zip(fps, pages))
            while len(cache) > self.cache_size:
                cache.popitem(last=False)

    def discard(self) -> None:
        """Forget the batch and the cache (a reload)."""
        self.new = {}
        self._cache.clear()


__all__ = ["FingerprintIndex"]
