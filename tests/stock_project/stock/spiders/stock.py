"""``stock``: a plain CrawlSpider (rules with a LinkExtractor), written as
for Scrapy's own scheduler."""

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class StockSpider(CrawlSpider):
    name = "stock"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, start=None, **kw):
        super().__init__(**kw)
        self.start_urls = [start] if start else []

    def parse_page(self, response):
        yield {"url": response.url}
