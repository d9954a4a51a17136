"""The example spider: follow every link, score pages by keywords.

As in the Aduana example: the content score of a page is how many of the
keywords of the ``EXAMPLE_KEYWORDS`` setting its text contains (a plain
substring test, no tokenization), as a share of the keywords, in [0, 1].
The spider hands the score to the frontier in
``response.meta["linkrank_score"]``; the frontier stores it with the page,
and the ``score`` policy (and personalised ranking) use it.

Seeds come from ``LINKRANK_SEEDS_FILE`` (``seeds.txt``); ``start_urls``
would work as well. Every link the spider yields goes to the frontier,
which decides what is fetched next.
"""

import scrapy
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor

from frontera_linkrank.scrapy import SCORE_META


class ExampleSpider(scrapy.Spider):
    name = "example"
    link_extractor = LinkExtractor()

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.keywords = [k.lower() for k in crawler.settings.getlist("EXAMPLE_KEYWORDS")]
        return spider

    def score(self, text):
        """Share of the keywords found in ``text``."""
        if not self.keywords:
            return 0.0
        text = text.lower()
        return sum(k in text for k in self.keywords) / len(self.keywords)

    def parse(self, response):
        if not isinstance(response, TextResponse):
            return  # an image, a PDF: nothing to score or follow
        text = " ".join(response.xpath("//body//text()").getall())
        score = self.score(text)
        response.meta[SCORE_META] = score
        yield {"url": response.url, "title": response.css("title::text").get(), "score": score}
        for link in self.link_extractor.extract_links(response):
            yield scrapy.Request(link.url)
