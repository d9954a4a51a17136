"""Example Scrapy project crawling with frontera_linkrank (``scrapy crawl example``)."""
