"""Scrapy integration: a scheduler, its spider middleware and an add-on.

In a Scrapy project's settings, either the add-on::

    ADDONS = {"frontera_linkrank.scrapy.Addon": 0}
    LINKRANK_PATH = "crawl_db"

or the scheduler alone (it adds its spider middleware itself)::

    SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
    LINKRANK_PATH = "crawl_db"

Meta keys a spider uses: ``response.meta["linkrank_score"]`` (content
score of the page, set in the callback), ``request.meta["linkrank_score"]``
(a hint for a link), ``request.meta["dont_frontier"]`` (fetch through
Scrapy's own queue, not the frontier).
"""

from .addon import Addon
from .converters import DONT_FRONTIER, SCORE_META
from .middleware import LinkRankSpiderMiddleware
from .scheduler import LinkRankScheduler

__all__ = ["DONT_FRONTIER", "SCORE_META", "Addon", "LinkRankScheduler", "LinkRankSpiderMiddleware"]
