# A long-running crawl whose importance estimates follow a changing web.
#
# What exists now: Adaptive OPIC (a history window, so a page's importance
# reflects its recent in-links, not all it ever had), the virtual page's
# cash spread over fetched pages, and change detection: every time a page is
# fetched again its content hash is compared and its change count kept in
# the page database (page_db_dump shows them), which the change-rate
# estimators in frontera_linkrank.recrawl read.
#
# What does not exist yet: the frontier does not schedule re-fetches of
# crawled pages by themselves. Refresh scheduling by the value of a refresh,
# V(tau) = (w / lambda) [1 - (1 + lambda tau) e^(-lambda tau)]
# (ALGORITHMS.md section 5), is being built (issue 7) and will add its own
# settings here. Until then a second run on the same database resumes the
# crawl of unfetched pages; it does not re-fetch crawled ones.

SCHEDULER = "frontera_linkrank.scrapy.LinkRankScheduler"
SPIDER_MIDDLEWARES = {"frontera_linkrank.scrapy.LinkRankSpiderMiddleware": 30}

LINKRANK_PATH = "crawl_db"
LINKRANK_SEEDS_FILE = "seeds.txt"
LINKRANK_POLICY = "opic"
LINKRANK_OMEGA_POLICY = "fetched"         # the virtual page's cash goes to pages already fetched
LINKRANK_HISTORY_WINDOW = 7 * 24 * 3600   # Adaptive OPIC: a week of history (seconds)
LINKRANK_HISTORY_TIME = "wall"
LINKRANK_SYNC = True                      # a long crawl: every commit survives a power cut
LINKRANK_LEASE_TIMEOUT = 3600             # a request not finished within an hour is offered again
LINKRANK_MAX_RETRIES = 3
LINKRANK_RETRY_DELAY = 600

CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 1.0
ROBOTSTXT_OBEY = True
