"""``contract``: what Scrapy promises about requests, one mode at a time.

- ``post``: four POSTs to one URL, three bodies (the fourth repeats the
  first): three fetches;
- ``refetch``: a page asks for the start page again with
  ``dont_filter=True`` (fetched again) and without (a duplicate);
- ``priority``: links to ``/detail/`` pages get priority 10.
"""

import scrapy


class ContractSpider(scrapy.Spider):
    name = "contract"
    handle_httpstatus_list = [405]  # the test web answers POST so

    def __init__(self, start=None, mode="post", **kw):
        super().__init__(**kw)
        self.start_url = start
        self.mode = mode
        self.asked_again = False

    async def start(self):
        if self.mode == "post":
            for body in ("q=1", "q=2", "q=3", "q=1"):
                yield scrapy.Request(self.start_url, method="POST", body=body, callback=self.parse_post,
                                     cb_kwargs={"sent": body})
        else:
            yield scrapy.Request(self.start_url)

    def parse_post(self, response, sent):
        yield {"post": sent, "status": response.status}

    def parse(self, response):
        yield {"page": response.url}
        for href in response.css("a::attr(href)").getall():
            priority = 10 if self.mode == "priority" and "/detail/" in href else 0
            yield response.follow(href, priority=priority)
        if self.mode == "refetch" and response.url != self.start_url and not self.asked_again:
            self.asked_again = True
            yield scrapy.Request(self.start_url, callback=self.parse_again, dont_filter=True)
            yield scrapy.Request(self.start_url, callback=self.parse_again)  # a duplicate: filtered

    def parse_again(self, response):
        yield {"again": response.url}
