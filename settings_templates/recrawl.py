# A long-running crawl that keeps its copies fresh: crawled pages are fetched
# again when refreshing them is worth most (docs/algorithms.md section 5).
#
# Each batch of requests gives LINKRANK_RECRAWL_SHARE of its places to due
# refreshes and the rest to new pages. A page is due when the value of a
# refresh, V(tau) = (w / lambda) [1 - (1 + lambda tau) e^(-lambda tau)],
# reaches a threshold set from the measured fetch rate: w is the page's
# last PageRank (recomputed as the crawl grows), lambda
# its change rate estimated from its visit history. Refreshes are
# conditional (If-None-Match / If-Modified-Since from the stored ETag and
# Last-Modified); a 304 is a visit without change. Changes are detected on
# normalised content, so timestamps and session ids are not changes.
# The freshness table of docs/measurements.md compares this with uniform
# and change-rate revisits.
#
# The crawl never runs out of work: end it with a page budget or Scrapy's
# CLOSESPIDER_TIMEOUT; the next run on the same database continues.

ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

LINKRANK_PATH = "crawl_db"
LINKRANK_SEEDS_FILE = "seeds.txt"
LINKRANK_POLICY = "opic"
LINKRANK_RECRAWL = True
LINKRANK_RECRAWL_POLICY = "value"         # or "uniform", "change_rate"
LINKRANK_RECRAWL_SHARE = 0.5              # half of each batch for refreshes, when both kinds wait
LINKRANK_RECRAWL_MIN_INTERVAL = 3600      # never fetch a page twice within an hour
LINKRANK_RECRAWL_PRIOR_RATE = 1 / 86400   # a page not seen changing yet: once a day
LINKRANK_RANK_EVERY_PAGES = 1000          # PageRank for the refresh value, recomputed in the background
LINKRANK_RANK_GROWTH = 0.1                # ... as the crawl grows by 10% (at least 1,000 pages)
LINKRANK_HISTORY_WINDOW = 7 * 24 * 3600   # Adaptive OPIC: a week of history (seconds)
LINKRANK_HISTORY_TIME = "wall"
LINKRANK_SYNC = True                      # a long crawl: every commit survives a power cut
LINKRANK_LEASE_TIMEOUT = 3600             # a request not finished within an hour is offered again
LINKRANK_MAX_RETRIES = 3
LINKRANK_RETRY_DELAY = 600

CLOSESPIDER_TIMEOUT = 7 * 24 * 3600       # <- how long this run lasts
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 1.0
ROBOTSTXT_OBEY = True
