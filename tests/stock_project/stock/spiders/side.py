"""``side``: follows every link through the frontier, and also asks for
each linked page with a callback that is not a spider method (a lambda),
which cannot be stored in the frontier and goes through Scrapy's queue."""

import scrapy


class SideSpider(scrapy.Spider):
    name = "side"

    def __init__(self, start=None, **kw):
        super().__init__(**kw)
        self.start_urls = [start] if start else []

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
            yield response.follow(href, callback=lambda r: [{"side": r.url}])
