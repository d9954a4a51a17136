"""The content of the local test web: what each URL answers.

:class:`TestWeb` turns a link graph into web pages: every node's URL serves
an HTML page whose links are its out-links, with a title and a few words
taken from the URL (so keyword scoring means something) and filler text.
Options make it less tidy, deterministically from a seed:

- ``error_rate``: that share of pages answers 404;
- ``redirect_rate``: that share answers 301 to an alias URL
  (``<url>?moved=1``) which serves the page;
- ``slow_rate`` / ``slow_delay``: that share answers after a delay;
- ``change_rates``: pages change over time as Poisson processes (for
  recrawl tests).

Every host serves ``/robots.txt`` (allowing everything but
``disallow`` path prefixes). Unknown URLs answer 404.

>>> from frontera_linkrank.simulation.graphs import Graph
>>> import numpy as np
>>> g = Graph(np.array([0, 1, 1]), np.array([1]), urls=["http://a.test/x", "http://a.test/y"])
>>> web = TestWeb(g)
>>> status, headers, body = web.answer("http://a.test/x")
>>> status, b'href="http://a.test/y"' in body
(200, True)
>>> web.answer("http://a.test/nope")[0]
404
"""

from __future__ import annotations

import bisect
import hashlib
import html
import math
import re
from collections.abc import Iterable
from email.utils import formatdate
from typing import Protocol

import numpy as np

from ..storage.urls import fingerprint


class Graph(Protocol):
    """What the test web reads of a link graph (a
    :class:`~frontera_linkrank.simulation.graphs.Graph` has it)."""

    n: int
    urls: list[str]
    fingerprints: list[bytes]

    def out(self, v: int) -> np.ndarray: ...

Answer = tuple[int, dict[str, str], bytes]  # status, headers, body

WORDS = (
    "library campus student faculty admissions research science music art history news "
    "events calendar sports athletics alumni graduate course program degree writing "
    "poetry theatre dance biology chemistry physics mathematics economics policy archive "
    "community service office contact directory map tour housing dining health career"
).split()
_TOKEN = re.compile(r"[a-z]{3,}")


def _unit(key, seed, salt):
    """A deterministic number in [0, 1) for ``key``."""
    h = hashlib.blake2b(f"{seed}:{salt}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2**64


class TestWeb:
    """Pages of a :class:`~frontera_linkrank.simulation.graphs.Graph`.

    Parameters
    ----------
    graph : Graph
    error_rate, redirect_rate, slow_rate : float
        Shares of pages that answer 404, redirect, or answer slowly.
    slow_delay : float
        Seconds a slow page waits.
    disallow : list of str
        Path prefixes ``/robots.txt`` disallows on every host.
    seed : int
        Chooses which pages misbehave.
    change_rates : array of float, optional
        Per-page change rate (changes per second): page ``i``'s content
        changes at the events of a Poisson process of that rate.
    start_time : float
        Time origin of the change processes (UNIX seconds).
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        graph: Graph,
        error_rate: float = 0.0,
        redirect_rate: float = 0.0,
        slow_rate: float = 0.0,
        slow_delay: float = 1.0,
        disallow: Iterable[str] = (),
        seed: int = 0,
        change_rates: np.ndarray | None = None,
        start_time: float = 0.0,
    ) -> None:
        self.graph = graph
        self.seed = seed
        self.slow_delay = float(slow_delay)
        self.disallow = list(disallow)
        self.start_time = float(start_time)
        n = graph.n
        keys = graph.urls
        u = np.array([[_unit(k, seed, s) for s in ("err", "red", "slow")] for k in keys]).reshape(n, 3)
        self.error = u[:, 0] < error_rate
        self.redirect = ~self.error & (u[:, 1] < redirect_rate)
        self.slow = u[:, 2] < slow_rate
        self._by_fp = {fp: v for v, fp in enumerate(graph.fingerprints)}
        self._alias = {}
        for v in np.flatnonzero(self.redirect).tolist():
            self._alias[self.alias_url(graph.urls[v])] = v
        self.change_rates = None if change_rates is None else np.asarray(change_rates, np.float64)
        self._change_times = {}

    # -- which page a URL is ----------------------------------------------------------
    @staticmethod
    def alias_url(url: str) -> str:
        return url + ("&" if "?" in url else "?") + "moved=1"

    def page_of(self, url: str) -> int | None:
        """Node of ``url`` (by canonical fingerprint), or None."""
        v = self._alias.get(url)
        if v is not None:
            return v
        try:
            return self._by_fp.get(fingerprint(url).hex().encode())
        except ValueError:
            return None

    # -- changes over time (Poisson) -------------------------------------------------
    def _changes(self, v, now):
        """Change times of page ``v`` up to ``now`` (arrivals drawn lazily
        from a per-page seeded generator, so every query sees the same
        process whatever the order of queries)."""
        state = self._change_times.get(v)
        if state is None:
            rng = np.random.default_rng([self.seed, v])
            state = self._change_times[v] = ([], rng, self.start_time)
        times, rng, last = state
        rate = float(self.change_rates[v]) if self.change_rates is not None else 0.0
        while rate > 0 and last <= now:
            last += rng.exponential(1.0 / rate)
            times.append(last)
        self._change_times[v] = (times, rng, last)
        return times

    def version(self, v: int, now: float) -> tuple[int, float]:
        """``(changes so far, time of the last change)`` of page ``v`` at ``now``."""
        if self.change_rates is None:
            return 0, self.start_time
        times = self._changes(v, now)
        k = bisect.bisect_right(times, now)
        return k, (times[k - 1] if k else self.start_time)

    def next_change(self, v: int, now: float) -> float:
        """Time of page ``v``'s first change after ``now`` (inf: never)."""
        if self.change_rates is None or not self.change_rates[v] > 0:
            return math.inf
        times = self._changes(v, now)  # generated past ``now``
        return times[bisect.bisect_right(times, now)]

    # -- rendering ---------------------------------------------------------------------
    def words(self, url: str) -> list[str]:
        path = url.split("://", 1)[-1].lower()
        found = [w for w in _TOKEN.findall(path) if w not in ("www", "http", "html", "htm", "edu", "com")]
        rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(url.encode(), digest_size=4).digest(), "little"))
        return found + [WORDS[i] for i in rng.integers(0, len(WORDS), 12)]

    def render(self, v: int, version: int = 0) -> bytes:
        g = self.graph
        url = g.urls[v]
        words = self.words(url)
        title = " ".join(words[:3]).title() or url
        links = "\n".join(
            f'<li><a href="{html.escape(g.urls[w], quote=True)}">{html.escape(g.urls[w])}</a></li>'
            for w in g.out(v).tolist()
        )
        body = (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head><body>\n"
            f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(' '.join(words))}</p>\n"
            f"<p>Revision {version}.</p>\n<ul>\n{links}\n</ul>\n</body></html>\n"
        )
        return body.encode("utf-8")

    def robots(self) -> bytes:
        lines = ["User-agent: *"] + [f"Disallow: {p}" for p in self.disallow] + ["Allow: /", ""]
        return "\n".join(lines).encode()

    def answer(
        self, url: str, now: float = 0.0, if_none_match: str | None = None, if_modified_since: float | None = None
    ) -> Answer:
        """``(status, headers, body)`` for a GET of ``url`` at time ``now``."""
        path = url.split("://", 1)[-1].partition("/")[2]
        if path == "robots.txt":
            return 200, {"Content-Type": "text/plain"}, self.robots()
        v = self.page_of(url)
        if v is None or self.error[v]:
            return 404, {"Content-Type": "text/html"}, b"<html><body><h1>Not Found</h1></body></html>"
        if self.redirect[v] and url == self.graph.urls[v]:
            return 301, {"Location": self.alias_url(url)}, b""
        version, changed = self.version(v, now)
        etag = f'"{v}-{version}"'
        headers = {
            "Content-Type": "text/html; charset=utf-8",
            "ETag": etag,
            "Last-Modified": formatdate(math.floor(changed), usegmt=True),
        }
        if if_none_match is not None and etag in [t.strip() for t in if_none_match.split(",")]:
            return 304, headers, b""
        # Last-Modified has whole seconds: compare at that precision
        if if_none_match is None and if_modified_since is not None and math.floor(changed) <= if_modified_since:
            return 304, headers, b""
        return 200, headers, self.render(v, version)
