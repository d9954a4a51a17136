# The stock project with the frontier enabled by one setting.
from stock.settings import *  # noqa: F403

SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
