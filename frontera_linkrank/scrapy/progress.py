"""The scheduler's progress line and its ``linkrank/*`` stats.

Modelled on Scrapy's ``LogStats`` extension: every
``LINKRANK_LOG_INTERVAL`` seconds one INFO line in crawl terms (pages
crawled, of the ``LINKRANK_MAX_PAGES`` budget when there is one, the rate
over the last interval, the time left at that rate, failed fetches, what
is queued and in flight), and one DEBUG line with the algorithm's figures
(the virtual page's cash, AOPIC's history total and error bound, the
ranking in use). The same figures go to Scrapy's stats as ``linkrank/*``
(docs/scrapy.md lists them).
"""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger("frontera_linkrank.scrapy.scheduler")


def _duration(seconds: float) -> str:
    """A duration as a person reads it.

    >>> _duration(59), _duration(3600 * 5 + 60 * 7), _duration(86400 * 3)
    ('59 s', '5 h 07 min', '3 d 0 h')
    """
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


class Progress:
    """Periodic figures of one crawl.

    Parameters
    ----------
    stats : Scrapy stats collector
    budget : int
        ``LINKRANK_MAX_PAGES`` (0: none).
    clock : callable() -> float
    """

    def __init__(self, stats: Any, budget: int, clock: Any = time.monotonic) -> None:
        self.stats = stats
        self.budget = budget
        self.clock = clock
        self._last: tuple[float, int] | None = None

    def start(self, crawled: int) -> None:
        self._last = (self.clock(), crawled)

    def update(self, st: dict[str, Any], in_flight: int, own: dict[str, int]) -> None:
        """Set the ``linkrank/*`` stats: the frontier's figures ``st`` (numbers
        only), what is out (``in_flight``) and this crawl's own counts."""
        for k, v in st.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.stats.set_value(f"linkrank/{k}", v)
        self.stats.set_value("linkrank/in_flight", in_flight)
        for k, v in own.items():
            self.stats.set_value(f"linkrank/{k}", v)

    def line(self, st: dict[str, Any], in_flight: int, final: bool = False) -> str:
        """The progress line (and the DEBUG line logged); moves the rate's window."""
        now = self.clock()
        crawled = int(st.get("pages_crawled", 0))
        t0, c0 = self._last if self._last is not None else (now, crawled)
        rate = (crawled - c0) / (now - t0) * 60 if now > t0 else 0.0
        self._last = (now, crawled)
        if self.budget:
            done = f"{crawled:,} of {self.budget:,} pages ({min(crawled / self.budget, 1.0):.1%})"
            left = self.budget - crawled
            eta = f", {_duration(left / rate * 60)} left" if rate > 0 and left > 0 and not final else ""
        else:
            done, eta = f"{crawled:,} pages", ""
        failed = int(st.get("pages_failed", 0))
        logger.debug(
            "LinkRank algorithm: omega cash %.4g, history total G %.4g, error bound %.3g, ranking version %s",
            st.get("omega_cash", 0.0), st.get("history_total", 0.0), st.get("error_bound", 0.0),
            st.get("ranking_version", "-"),
        )
        return (f"LinkRank{' (end)' if final else ''}: crawled {done} at {rate:,.0f} pages/min{eta}; "
                f"{failed:,} failed; {int(st.get('queued', 0)):,} queued, {in_flight:,} in flight, "
                f"{int(st.get('pages', 0)):,} known on {int(st.get('hosts', 0)):,} hosts")
