"""A synthetic broad web, discovered as it is crawled, with no per-page table.

Pages are numbered as a 5-ary tree: page 0 is the seed, the pages first
linked from page ``p`` are ``5p+1`` .. ``5p+5``. Everything about a page
is a function of its number, computed for arrays of numbers at once, so
the process that generates the web holds no memory per page: a benchmark
of the frontier's memory measures the frontier, not its web.

Every crawled page has 10 links:

- 5 **new** pages, its children. The seed and the pages of the next three
  levels are each on a host of their own (156 hosts: the sites a broad
  crawl starts from); below, one page in every block of 100 consecutive
  numbers founds a new host (1% of the pages, at an offset drawn per
  block), and each other page is on another known host with probability
  0.09 (the host of a child of one of its ancestors, which any crawl
  order found before it), else on its parent's host. A page's host is
  found by walking up its parent chain; the largest host holds about 2%
  of the pages.
- 5 **known** pages: for a page at depth ``d``, a distance ``m`` in
  ``0 .. d-1`` is drawn by a Zipf law (weight ``1/(m+1)``), then one of the
  children of the page's ancestor ``m + 1`` levels up: a sibling most
  often, a page near the seed sometimes. An ancestor of a page the crawl
  fetches was fetched (a page is only ever discovered as a child), so
  these pages are always known already and the crawl finds exactly 5 new
  pages per page: ``known pages = 1 + 5 * pages crawled``, and about 1% of
  them are on new hosts, in any crawl order. In-degrees follow a power
  law: a page ``k`` levels below the seed is linked from the pages of its
  parent's subtree.

A page's URL is ``http://h{host}.example/{number}``, its host the number
of the page that founded it; URLs are canonical, so their Frontera
fingerprint is the SHA-1 of the URL itself.

>>> web = BroadWeb()
>>> web.url(np.array([0, 1, 6]))
['http://h0.example/0', 'http://h1.example/1', 'http://h6.example/6']
>>> new, known = web.links(np.array([7]))
>>> new.tolist()                  # page 7's children
[[36, 37, 38, 39, 40]]
>>> sorted(set(known[0].tolist()) - {1, 2, 3, 4, 5, 6, 8, 9, 10})  # its ancestors' children, or page 0 or 1
[]
"""

from __future__ import annotations

import hashlib

import numpy as np

NEW_LINKS = 5
KNOWN_LINKS = 5
HOST_BLOCK = 100  # one page in 100 founds a new host
DIRECTORY_DEPTH = 3  # the seed's pages down to this depth are each on a host of their own (156 hosts)
OTHER_HOST = 0.09 / 0.99  # of the others, this share are on another known host; the rest on their parent's
# First page number at each depth: (5^d - 1) / 4, in int64 to depth 27. The
# children of a page at depth 25 are the deepest whose numbers all fit.
LEVELS = 28
MAX_DEPTH = 25
FIRST = np.array([(5**d - 1) // 4 for d in range(LEVELS)], np.int64)
POW5 = np.array([5**d for d in range(LEVELS)], np.int64)
_SALT_HOST, _SALT_HOST_PAGE, _SALT_FOUNDER, _SALT_KNOWN = 0x51, 0x52, 0x53, 0x60

# Zipf law over the distance m = 0 .. d-1 (weight 1/(m+1)): CUM[d, m] is
# P(distance <= m) for a page at depth d, 2.0 past the last distance.
_W = 1.0 / np.arange(1, LEVELS + 1)
CUM = np.full((LEVELS, LEVELS), 2.0)
for _d in range(1, LEVELS):
    CUM[_d, :_d] = np.cumsum(_W[:_d]) / _W[:_d].sum()
    CUM[_d, _d - 1] = 1.0


class IdSpaceExceeded(RuntimeError):
    """The crawl went deeper than page numbers can go in int64."""


def uniform(ids: np.ndarray, salt: int | np.ndarray) -> np.ndarray:
    """A uniform draw in [0, 1) per page number and salt (SplitMix64;
    arrays broadcast)."""
    with np.errstate(over="ignore"):
        x = ids.astype(np.uint64) * np.uint64(0x100000001B3) + np.asarray(salt).astype(np.uint64)
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53


def depth(ids: np.ndarray) -> np.ndarray:
    """Depth of each page in the tree (the seed: 0)."""
    return np.searchsorted(FIRST, ids, side="right") - 1


def ancestor(ids: np.ndarray, d: np.ndarray, level: np.ndarray) -> np.ndarray:
    """The ancestor at depth ``level`` of pages ``ids`` at depth ``d``."""
    return (ids - FIRST[d]) // POW5[d - level] + FIRST[level]


def parent(ids: np.ndarray) -> np.ndarray:
    return (ids - 1) // NEW_LINKS


def founds_host(ids: np.ndarray, block: int = HOST_BLOCK) -> np.ndarray:
    """Whether each page founds a host of its own: the seed and the pages
    of the next ``DIRECTORY_DEPTH`` levels, then one page in every block of
    ``block`` consecutive numbers, at an offset drawn per block."""
    offset = (uniform(ids // block, _SALT_FOUNDER) * block).astype(np.int64)
    return (ids < FIRST[DIRECTORY_DEPTH + 1]) | (ids % block == offset)


def known_relative(ids: np.ndarray, d: np.ndarray) -> np.ndarray:
    """For pages at depth ``d >= 2``, a page found before them in any crawl
    order: a child of one of their ancestors, drawn uniformly over the
    levels, no deeper than their parent."""
    level = (uniform(ids, _SALT_HOST_PAGE) * (d - 1)).astype(np.int64)  # 0 .. d-2
    pick = (uniform(ids, _SALT_HOST_PAGE + 1) * NEW_LINKS).astype(np.int64)
    return NEW_LINKS * ancestor(ids, d, level) + 1 + pick


class BroadWeb:
    """The web described in the module docstring (stateless). ``host_block``:
    one page in that many founds a host (100: 1% of the pages; fewer pages
    per host make a web of many small sites)."""

    def __init__(self, host_block: int = HOST_BLOCK) -> None:
        if host_block < 1:
            raise ValueError(f"host_block must be at least 1, not {host_block}")
        self.host_block = host_block

    def host(self, ids: np.ndarray) -> np.ndarray:
        """Host of each page (the number of the page that founded it): up
        the parent chain until a page that founds a host, jumping to a known
        relative where a page is on another known host."""
        ids = np.asarray(ids, np.int64)
        out = np.empty(len(ids), np.int64)
        cur, todo = ids.copy(), np.arange(len(ids))
        while len(todo):
            x = cur[todo]
            found = founds_host(x, self.host_block)
            out[todo[found]] = x[found]
            x, todo = x[~found], todo[~found]
            d = depth(x)
            other = (uniform(x, _SALT_HOST) < OTHER_HOST) & (d >= 2)
            nxt = parent(x)
            nxt[other] = known_relative(x[other], d[other])
            cur[todo] = nxt
        return out

    def links(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(new, known)``: two ``(len(ids), 5)`` arrays of page numbers."""
        ids = np.asarray(ids, np.int64)
        d = depth(ids)
        if len(ids) and d.max() > MAX_DEPTH:
            raise IdSpaceExceeded(f"the crawl reached depth {d.max()}: page numbers would overflow int64")
        new = NEW_LINKS * ids[:, None] + np.arange(1, NEW_LINKS + 1)
        known = np.empty((len(ids), KNOWN_LINKS), np.int64)
        for k in range(KNOWN_LINKS):
            r = uniform(ids, _SALT_KNOWN + 2 * k)
            m = (CUM[d] < r[:, None]).sum(axis=1)  # Zipf distance, 0 .. d-1
            level = np.maximum(d - 1 - m, 0)
            a = ancestor(ids, d, level)
            pick = (uniform(ids, _SALT_KNOWN + 2 * k + 1) * NEW_LINKS).astype(np.int64)
            t = np.where(d > 0, NEW_LINKS * a + 1 + pick, ids)  # the seed links to itself only
            known[:, k] = np.where(t == ids, a, t)  # not to itself: to the ancestor then
        return new, known

    def url(self, ids: np.ndarray) -> list[str]:
        ids = np.asarray(ids, np.int64)
        return [f"http://h{h}.example/{i}" for h, i in zip(self.host(ids).tolist(), ids.tolist())]

    def link_urls(self, ids: np.ndarray) -> list[list[str]]:
        """The 10 link URLs of each page (5 new, then 5 known)."""
        new, known = self.links(ids)
        flat = self.url(np.concatenate([new, known], axis=1).ravel())
        per = NEW_LINKS + KNOWN_LINKS
        return [flat[k : k + per] for k in range(0, len(flat), per)]


def page_number(url: str) -> int:
    return int(url.rsplit("/", 1)[1])


def fingerprint_hex(url: str) -> bytes:
    """Frontera's ``meta[b'fingerprint']`` of a canonical URL (40 hex bytes)."""
    return hashlib.sha1(url.encode("ascii")).hexdigest().encode("ascii")
