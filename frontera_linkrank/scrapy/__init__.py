"""Scrapy integration: a scheduler and a spider middleware.

In a Scrapy project's settings::

    SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
    SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}
    LINKRANK_PATH = "crawl_db"

Meta keys a spider uses: ``response.meta["linkrank_score"]`` (content
score of the page, set in the callback), ``request.meta["linkrank_score"]``
(a hint for a link), ``request.meta["dont_frontier"]`` (fetch through
Scrapy's own queue, not the frontier).
"""

from .converters import DONT_FRONTIER, SCORE_META
from .middleware import LinkRankSpiderMiddleware
from .scheduler import LinkRankScheduler

__all__ = ["DONT_FRONTIER", "SCORE_META", "LinkRankScheduler", "LinkRankSpiderMiddleware"]
