"""Start-up errors of the scheduler: one ERROR line, a clean close, exit
status 1.

An exception out of a Scrapy scheduler's ``from_crawler`` or ``open``
reaches Scrapy before its engine can close cleanly, and the real cause
ends up inside a cascade of unrelated tracebacks ("Scraper slot not
assigned", "Task exception was never retrieved"). So the scheduler keeps
its start-up error, logs it here in one line, and the spider is closed
from a ``spider_opened`` handler, once Scrapy has opened everything
(Scrapy >= 2.18 closes the spider cleanly on a ``CloseSpider`` raised
there).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import CloseSpider

from ..settings import SettingsError
from ..storage.errors import PageDBError
from .middleware import SetupError

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger("frontera_linkrank.scrapy.scheduler")

START_FAILED = "linkrank_start_failed"  # finish reason of a crawl whose frontier could not start
# Errors whose message says it all (no traceback in the log).
KNOWN_START_ERRORS = (SettingsError, SetupError, PageDBError, OSError)


class StartFailure:
    """Stops the crawl of ``crawler`` if :meth:`fail` is called before the
    spider has opened."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.failed = False
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    def fail(self, error: Exception) -> None:
        """Log ``error`` as the reason the frontier did not start."""
        known = isinstance(error, KNOWN_START_ERRORS)
        logger.error(
            "LinkRank frontier not started: %s",
            error if known else f"{type(error).__name__}: {error}",
            exc_info=error if not known else None,
        )
        self.failed = True
        self.crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    def _spider_opened(self, spider: Spider | None = None) -> None:
        if self.failed:
            raise CloseSpider(START_FAILED)

    def _spider_closed(self, spider: Spider | None = None, reason: str | None = None) -> None:
        # `scrapy crawl` exits with status 1 when its crawler ends without a
        # spider ("bootstrap failed"); Scrapy offers components no other way
        # to set the exit status. Done once the spider is closed.
        self.crawler.spider = None
