"""``side``: follows every link through the frontier, and also asks for
each linked page with a callback that is not a spider method (a lambda):
that request cannot be stored, so it is kept in memory, but it still goes
through the frontier, which fetches each page once."""

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
