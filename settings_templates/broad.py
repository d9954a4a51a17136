# Broad crawl, most important pages first.
#
# Every crawled page passes its AOPIC cash to the pages it links to
# (docs/algorithms.md section 1), and the PageRank of the known graph is
# kept current after every batch by pushing residuals along the crawled
# pages' links; the frontier fetches the page with the most cash plus 64 x
# its share of that PageRank first ("hybrid-push", the default: the best
# collector of PageRank on average in the simulations of docs/ordering.md).
# Good when the crawl has a budget and no topic: a crawl of a country's
# web, of many sites. LINKRANK_POLICY = "opic" is cash alone.

ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

LINKRANK_PATH = "crawl_db"            # the page database; a second run resumes it
LINKRANK_SEEDS_FILE = "seeds.txt"     # one URL per line (start() seeds work too)
LINKRANK_POLICY = "hybrid-push"
LINKRANK_OMEGA_POLICY = "unfetched"   # the virtual page's cash goes to unfetched pages: broadens the crawl
LINKRANK_DAMPING = 0.85
LINKRANK_MAX_PAGES = 1_000_000        # page budget (0: until the frontier is empty)
LINKRANK_MAX_PAGES_PER_HOST = 50_000  # trap defence: no host gets more pages than this
LINKRANK_EXTERNAL_WEIGHT = 2.0        # links to other hosts carry twice the cash of internal ones
LINKRANK_LOG_INTERVAL = 60

# Politeness: one host never holds more than 2 x 2 requests; the frontier
# hands out pages of other hosts meanwhile.
CONCURRENT_REQUESTS = 64
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 0.5
ROBOTSTXT_OBEY = True
LINKRANK_OVERUSED_SLOT_FACTOR = 2.0
# Scrapy's own queue settings (JOBDIR, SCHEDULER_*_QUEUE) do not apply: the
# page database is the queue and the duplicate filter of frontier requests.
