"""Per-page fixed-size fields, as numpy arrays.

Every page has a dense index (discovery order); each field below is one
numpy array indexed by it (struct of arrays, so ranking and scheduling work
on contiguous vectors). :data:`RECORD` is the packed layout of one whole
page; :class:`VertexTable` converts between the two.

The fields fall in two parts. The *hot* ones (:data:`HOT_FIELDS`: state,
flags, depth, host, cash, stamp, hint) are what scheduling reads for any
page at any time; a crawl holds them in memory for every page (24 bytes a
page, and 4 for its hint, which takes memory only where pages have hints:
:data:`ZERO_BACKED`). The *cold* ones (:data:`COLD_FIELDS`: fingerprint,
parent, crawl history, AOPIC history...) change only when the page itself
is fetched, handed out or fails; a crawl keeps them in the page database
and reads them for the pages of the batch at hand (:mod:`.coldrecords`).
Tools load both into one table.
"""

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import CorruptDatabase
from .keys import key_list

# Page states. The values match Frontera's States constants where they mean
# the same thing (NOT_CRAWLED=0, CRAWLED=2, ERROR=3); LEASED is "handed out".
UNFETCHED = 0
LEASED = 1
CRAWLED = 2
ERROR = 3
STATE_NAMES = {UNFETCHED: "unfetched", LEASED: "leased", CRAWLED: "crawled", ERROR: "error"}

# Bits of the ``flags`` field.
F_SEED = 1  # injected as a seed
F_EXTRAS = 2  # non-default method/headers/cookies/meta stored in "requests"
F_REDIRECT = 4  # its last fetch was redirected to another page
F_REFRESH = 8  # leased for a refresh (a recrawl of a crawled page)
F_VALIDATORS = 16  # ETag / Last-Modified of its last fetch stored in "validators"
F_NORM_HASH = 32  # content_hash is of the normalised content (recrawl on)
F_CRAWLED = 64  # fetched at least once (n_crawls > 0)

NO_PAGE = 0xFFFFFFFF  # "no parent" (seeds) in uint32 fields
MAX_DEPTH = 0xFFFF  # depths saturate here

# name, dtype, default for new pages
FIELDS = (
    ("fp", "V20", b"\0" * 20),  # SHA-1 of the canonical URL
    ("host", "<u4", 0),  # host id
    ("parent", "<u4", NO_PAGE),  # page it was first found on (shortest path)
    ("depth", "<u2", 0),  # links from the nearest seed (at most MAX_DEPTH)
    ("state", "u1", UNFETCHED),
    ("flags", "u1", 0),
    ("status", "<u2", 0),  # last HTTP status (0: none yet)
    ("errors", "<u2", 0),  # consecutive fetch errors
    ("n_crawls", "<u4", 0),
    ("n_changes", "<u4", 0),  # crawls whose content hash differed from the last
    ("n_out", "<u4", 0),  # stored out-links (current)
    ("first_crawl", "<f8", 0.0),  # UNIX seconds, 0: never
    ("last_crawl", "<f8", 0.0),
    ("lease", "<f8", 0.0),  # time it was handed out (state LEASED)
    ("content_hash", "<u8", 0),
    ("score", "<f8", math.nan),  # content score set by the spider
    ("hint", "<f4", 0.0),  # priority hint of an unfetched page ("score" policy)
    ("cash", "<f8", 0.0),  # AOPIC
    ("history", "<f8", 0.0),
    ("last_read", "<f8", math.nan),  # AOPIC time of last read, nan: never
    ("stamp", "<f8", 0.0),  # accumulator value when last settled
    ("rate", "<f8", math.nan),  # estimated changes per second (recrawl), nan: not yet
)
RECORD = np.dtype([(name, dt) for name, dt, _ in FIELDS])
FIELD_NAMES = tuple(name for name, _, _ in FIELDS)
# Schema 2 kept whole records, depth as u4 and hint as f8.
RECORD_V2 = np.dtype([(name, {"depth": "<u4", "hint": "<f8"}.get(name, dt)) for name, dt, _ in FIELDS])
HOT_NAMES = ("state", "flags", "depth", "host", "cash", "stamp", "hint")
HOT_FIELDS = tuple(f for name in HOT_NAMES for f in FIELDS if f[0] == name)
COLD_FIELDS = tuple(f for f in FIELDS if f[0] not in HOT_NAMES)
HOT_RECORD = np.dtype([(name, dt) for name, dt, _ in HOT_FIELDS])
COLD_RECORD = np.dtype([(name, dt) for name, dt, _ in COLD_FIELDS])
COLD_NAMES = tuple(name for name, _, _ in COLD_FIELDS)
# Fields that stay zero for most pages (a hint comes only with a link the
# spider scored): their arrays come zeroed from the allocator and only
# their non-zero entries are written, so the kernel backs with memory only
# the parts that hold a value; a crawl without hints holds none for them.
ZERO_BACKED = frozenset({"hint"})


def default_records(k: int, dtype: np.dtype = RECORD) -> np.ndarray:
    """``k`` records of ``dtype`` with the fields' defaults (new pages)."""
    out = np.empty(k, dtype)
    for name, _, default in FIELDS:
        if name in (dtype.names or ()):
            out[name] = default
    return out


class VertexTable:
    """Growable struct of arrays with one entry per page.

    Arrays are attributes named like the fields (``table.cash``...): all
    of :data:`FIELDS`, or those given (:data:`HOT_FIELDS` for a crawl);
    they are reallocated when the table grows, so hold the table, not the
    arrays, across calls that add pages.

    >>> t = VertexTable()
    >>> t.append(3)
    0
    >>> t.n, t.cash[:t.n].tolist(), bool(t.parent[0] == NO_PAGE)
    (3, [0.0, 0.0, 0.0], True)
    >>> hasattr(VertexTable(fields=HOT_FIELDS), "parent")
    False
    """

    if TYPE_CHECKING:  # the FIELDS are attributes, set by _grow

        def __getattr__(self, name: str) -> np.ndarray: ...

    def __init__(self, capacity: int = 1024, fields: tuple = FIELDS) -> None:
        self.fields = fields
        self.names = tuple(name for name, _, _ in fields)
        self.record = np.dtype([(name, dt) for name, dt, _ in fields])
        self.n = 0
        self._cap = 0
        self._grow(max(int(capacity), 16))

    def _grow(self, capacity: int) -> None:
        for name, dt, _ in self.fields:
            if name in ZERO_BACKED:  # zeroed beyond ``n`` (:meth:`append` relies on it)
                new = np.zeros(capacity, dt)
                if self._cap:
                    old = getattr(self, name)[: self.n]
                    held = np.flatnonzero(old)
                    new[held] = old[held]
            else:
                new = np.empty(capacity, dt)
                if self._cap:
                    new[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, new)
        self._cap = capacity

    def append(self, k: int) -> int:
        """Add ``k`` pages with default fields; return the first new index."""
        start = self.n
        end = start + k
        if end > self._cap:
            self._grow(max(end, 2 * self._cap))
        for name, _, default in self.fields:
            if name not in ZERO_BACKED:
                getattr(self, name)[start:end] = default
        self.n = end
        return start

    def records(self, idx: Any) -> np.ndarray:
        """Packed records (of this table's fields) of the pages ``idx`` (array or slice)."""
        first = getattr(self, self.names[0])[idx]
        out = np.empty(len(first), self.record)
        out[self.names[0]] = first
        for name in self.names[1:]:
            out[name] = getattr(self, name)[idx]
        return out

    def load_records(self, recs: np.ndarray, idx: Any) -> None:
        """Store packed records at ``idx`` (slice or index array of existing
        pages): the fields both have."""
        for name in recs.dtype.names or ():
            if name not in self.names:
                continue
            if name in ZERO_BACKED:
                _load_sparse(getattr(self, name), recs[name], idx)
            else:
                getattr(self, name)[idx] = recs[name]

    def fingerprints(self) -> list[bytes]:
        """The fingerprints of all pages as a list of 20-byte strings."""
        return key_list(self.fp[: self.n])


def _load_sparse(a: np.ndarray, values: np.ndarray, idx: Any) -> None:
    """``a[idx] = values``, writing only the entries that are or become non-zero."""
    write = np.flatnonzero((values != 0) | (a[idx] != 0))
    if isinstance(idx, slice):
        start, _, step = idx.indices(len(a))
        a[start + write * step] = values[write]
    else:
        a[np.asarray(idx)[write]] = values[write]


def check_records(table: VertexTable, n_hosts: int, path: str) -> None:
    """Refuse a page table whose records point outside it (a host id with
    no host, a parent beyond the table, a state that does not exist):
    damage that would otherwise surface as an index error mid-crawl.

    Raises
    ------
    CorruptDatabase
        With the same wording as ``page_db_check``'s failure.
    """
    n = table.n
    problems = [
        ("pages with an unknown state", table.state[:n] > ERROR),
        ("pages point to missing hosts", table.host[:n] >= n_hosts),
    ]
    if "parent" in table.names:
        problems.append(("pages point to missing parents", (table.parent[:n] != NO_PAGE) & (table.parent[:n] >= n)))
    for what, bad in problems:
        if bad.any():
            raise CorruptDatabase(f"{path}: {int(bad.sum())} {what} (corrupt database)")
