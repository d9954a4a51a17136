"""Inputs to pages for ``page_db_import``: URLs, and the indices of a dump pair.

A URL is checked and fingerprinted as the crawl does (so an imported page
is the page a crawl would find), with a shortcut for URLs already in
canonical form; :class:`UrlPages` maps raw URLs to page indices, adding
new pages to the database, and gives refused URLs a negative code naming
the reason. :class:`IndexPages` maps the page indices of a ``page_db_dump
info`` file to the pages they became.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Iterable, Sequence

import numpy as np

from ..core.graph_import import add_pages
from ..numeric import at_least, value_at
from ..storage.pagedb import PageDB
from ..storage.urls import RejectedURL, check_url, fingerprint

CACHE_URLS = 4_000_000  # URL -> page cache entries before it is cleared

# URLs that canonicalize_url leaves as they are: http(s), a lower-case host,
# an optional port without leading zeros, a path with no "." or ".."
# segment (w3lib resolves those), no query, fragment or ";params", made of
# characters w3lib keeps literally and escapes it keeps (upper-case, of a
# byte it would escape again). Their fingerprint is sha1 of the URL itself,
# ~30x cheaper than canonicalising it, which dominated imports of real
# lists, and their host is as written; test_cli_import_rank checks both
# against check_url and Frontera's fingerprint on generated URLs.
CANONICAL = re.compile(
    r"https?://([a-z0-9_-]+(?:\.[a-z0-9_-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(?:/(?:[A-Za-z0-9_~!$&'()*+,=:@|%-][A-Za-z0-9._~!$&'()*+,=:@|%-]*)?)+"
)
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
# RFC 3986 reserved and unreserved characters, "|" and "%": w3lib writes
# them literally in a path, so an escape of one of them is decoded ...
_LITERAL = set(b":/?#[]@!$&'()*+,;=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~|%")
# ... except these four, which it keeps escaped.
_KEPT_ESCAPES = {f"{c:02X}" for c in range(256) if c not in _LITERAL} | {"25", "2F", "3B", "3F"}


def host_and_fingerprint(url: str, max_length: int = 0) -> tuple[str, bytes]:
    """``(check_url(url, max_length), fingerprint(url))`` (raising
    :class:`RejectedURL` like them), with a shortcut for URLs already in
    canonical form: their host is in the URL as is, their fingerprint is
    sha1 of the URL."""
    m = CANONICAL.fullmatch(url)
    if m is not None and not (max_length and len(url) > max_length):
        port = m.group(2)
        escapes = _ESCAPE.findall(url) if "%" in url else ()
        if (port is None or int(port) < 65536) and len(escapes) == url.count("%") and _KEPT_ESCAPES.issuperset(escapes):
            return m.group(1), hashlib.sha1(url.encode("ascii")).digest()
    return check_url(url, max_length), fingerprint(url)


class UrlPages:
    """Raw URLs (bytes) -> page indices of a writer page database.

    Parameters
    ----------
    db : PageDB
        The database new pages are added to.
    max_url_length : int
        Longer URLs are refused (``too_long``), as the crawl does.

    Attributes
    ----------
    reasons : list of str
        Why URLs were refused: code ``-1 - k`` is ``reasons[k]``.
    new_pages : int
        Pages added so far.
    """

    def __init__(self, db: PageDB, max_url_length: int) -> None:
        self.db = db
        self.max_url_length = max_url_length
        self.cache: dict[bytes, int] = {}  # URL bytes -> page index, or -1 - reason code
        self.reasons: list[str] = []
        self.new_pages = 0

    def reason(self, code: int) -> str:
        """The reason a negative ``code`` stands for."""
        return self.reasons[-1 - code]

    def _reason_code(self, reason: str) -> int:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return -1 - self.reasons.index(reason)

    def add(self, raw_urls: Iterable[bytes]) -> None:
        """Put the pages of URLs (bytes, not cached yet) into the cache,
        adding new pages; refused URLs get a negative code."""
        urls, fps, hosts, keys = [], [], [], []
        cache = self.cache
        for raw in raw_urls:
            try:
                u = raw.decode("utf-8").strip()
                host, fp = host_and_fingerprint(u, self.max_url_length)
            except UnicodeDecodeError:
                cache[raw] = self._reason_code("invalid_utf8")
                continue
            except RejectedURL as e:
                cache[raw] = self._reason_code(e.reason)
                continue
            urls.append(u)
            fps.append(fp)
            hosts.append(host)
            keys.append(raw)
        before = self.db.n_pages
        index = add_pages(self.db, urls, fps, hosts)
        self.new_pages += self.db.n_pages - before
        cache.update(zip(keys, index.tolist()))

    def codes(self, flat: Sequence[bytes]) -> np.ndarray:
        """Page index (or negative refusal code) of each URL of ``flat``, adding new pages."""
        cache = self.cache
        if len(cache) > CACHE_URLS:
            cache.clear()  # bounded memory; pages are found again by fingerprint
        new = [u for u in dict.fromkeys(flat) if u not in cache]
        if new:
            self.add(new)
        # itemgetter looks them all up in one C call (2x faster than map)
        found = operator.itemgetter(*flat)(cache) if len(flat) > 1 else tuple(cache[u] for u in flat)
        return np.fromiter(found, np.int64, len(flat))


class IndexPages:
    """Page indices of a ``page_db_dump info`` file -> page indices of the database.

    An index maps to :data:`NOT_LISTED` until its info line is read, to
    :data:`SKIPPED` if that line was skipped (a refused URL).
    """

    NOT_LISTED = -1
    SKIPPED = -2

    def __init__(self) -> None:
        self.map = np.full(0, self.NOT_LISTED, np.int64)

    def listed(self, i: int) -> bool:
        """Whether info index ``i`` was read already (imported or skipped)."""
        return i < len(self.map) and self.map[i] != self.NOT_LISTED

    def set(self, idx: list[int], pages: np.ndarray, skipped: list[int]) -> None:
        """Info indices ``idx`` became ``pages``; those of ``skipped`` were skipped."""
        top = max(idx + skipped, default=-1)
        self.map = at_least(self.map, top + 1, self.NOT_LISTED)
        self.map[np.asarray(idx, np.int64)] = pages
        self.map[np.asarray(skipped, np.int64)] = self.SKIPPED

    def lookup(self, idx: np.ndarray) -> np.ndarray:
        """Pages of info indices ``idx`` (or NOT_LISTED / SKIPPED)."""
        return value_at(self.map, idx, self.NOT_LISTED)
