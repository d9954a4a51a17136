"""``probe``: seeds from ``start()``, a content score, a ``dont_frontier``
request, an errback, and a request whose callback cannot be stored."""

import scrapy

from frontera_linkrank.scrapy import DONT_FRONTIER, SCORE_META


class ProbeSpider(scrapy.Spider):
    name = "probe"

    def __init__(self, start_url=None, side_url=None, lambda_url=None, **kw):
        super().__init__(**kw)
        self.start_url = start_url
        self.side_url = side_url
        self.lambda_url = lambda_url

    async def start(self):
        if self.start_url:
            yield scrapy.Request(self.start_url, errback=self.on_error)

    def parse(self, response):
        # The page's content score: 0.5 everywhere, 1.0 on the start page.
        response.meta[SCORE_META] = 1.0 if response.url == self.start_url else 0.5
        yield {"page": response.url}
        if response.url == self.start_url:
            if self.side_url:
                yield scrapy.Request(self.side_url, callback=self.parse_side, meta={DONT_FRONTIER: True})
            if self.lambda_url:
                yield scrapy.Request(self.lambda_url, callback=lambda r: [{"lambda": r.url}])
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, errback=self.on_error)

    def parse_side(self, response):
        yield {"side": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)

    def on_error(self, failure):
        yield {"error": failure.request.url, "type": failure.type.__name__}
