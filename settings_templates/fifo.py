# Plain breadth-first crawl: pages in the order they were discovered.
#
# The same order as Frontera's memory FIFO backend (tests check it), with
# the page database's durability, resume and politeness. Useful as a
# baseline against the other policies (`frontera-linkrank top` after each),
# or when every reachable page is wanted and order does not matter.
# AOPIC still runs, so importance estimates are available all the same.

ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

LINKRANK_PATH = "crawl_db"
LINKRANK_SEEDS_FILE = "seeds.txt"
LINKRANK_POLICY = "fifo"
LINKRANK_MAX_PAGES = 0                # 0: until the frontier is empty

CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 4
ROBOTSTXT_OBEY = True
