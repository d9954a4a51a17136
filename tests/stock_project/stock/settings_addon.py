# The stock project with the frontier enabled by its Scrapy add-on.
from stock.settings import *  # noqa: F403

ADDONS = {"frontera_linkrank.scrapy.Addon": 0}
