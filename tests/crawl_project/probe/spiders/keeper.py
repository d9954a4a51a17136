"""``keeper``: requests the page database cannot store whole (a response
in ``cb_kwargs``, a lambda callback), and callbacks named in a stored
request (``parse_item`` may be called; the others must never be)."""

import scrapy


class KeeperSpider(scrapy.Spider):
    name = "keeper"

    def __init__(self, mode="plain", marker=None, **kw):
        super().__init__(**kw)
        self.mode = mode
        self.marker = marker

    def parse(self, response, parent=None):
        yield {"page": response.url, "parent": parent.url if parent is not None else None, "via": "parse"}
        for href in response.css("a::attr(href)").getall():
            if self.mode == "parent":
                yield response.follow(href, cb_kwargs={"parent": response})
            elif self.mode == "lambda":
                yield response.follow(href, callback=lambda r: self.parse(r))
            else:
                yield response.follow(href)

    def parse_item(self, response):
        yield {"page": response.url, "via": "parse_item"}

    def _secret(self, response):
        self._touch("_secret")
        yield {"page": response.url, "via": "_secret"}

    def closed(self, reason):
        if not isinstance(reason, str):
            self._touch("closed")

    def _touch(self, what):
        if self.marker:
            with open(self.marker, "a") as f:
                f.write(what + "\n")
