"""``Addon``: the frontier as a Scrapy add-on, enabled in one line::

    ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

It sets what the frontier needs, at the add-on priority (so the project's
own settings still win): the scheduler and its spider middleware. Retries
stay with Scrapy's ``RetryMiddleware`` unless ``RETRY_ENABLED=False`` (then
the frontier retries): see the scheduler.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

from .middleware import LinkRankSpiderMiddleware
from .scheduler import LinkRankScheduler

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
MIDDLEWARE_ORDER = 30  # outermost but for StartSpiderMiddleware (25), before HttpErrorMiddleware (50)


class Addon:
    """Scrapy add-on of the LinkRank frontier (Scrapy's ``ADDONS`` setting)."""

    def update_settings(self, settings: BaseSettings) -> None:
        """Set ``SCHEDULER`` and add the spider middleware."""
        settings.set("SCHEDULER", SCHEDULER, priority="addon")
        settings.setdefault_in_component_priority_dict("SPIDER_MIDDLEWARES", LinkRankSpiderMiddleware, MIDDLEWARE_ORDER)
        scheduler = settings["SCHEDULER"]
        cls = load_object(scheduler) if isinstance(scheduler, str) else scheduler
        # (issubclass would not do: Scrapy's scheduler metaclass says yes to any scheduler)
        if LinkRankScheduler not in getattr(cls, "__mro__", ()):
            # A project setting wins over an add-on's: the frontier is not used.
            logger.warning(
                "frontera_linkrank.scrapy.Addon is enabled but SCHEDULER is %s in the settings: "
                "the frontier is not used (remove that setting)",
                scheduler,
            )
