# Focused crawl: pages on a topic first, by the spider's content score.
#
# The spider scores each page (a number, say in [0, 1]) and puts it in
# response.meta["linkrank_score"] (frontera_linkrank.scrapy.SCORE_META) in
# its callback; it may also give a link a hint in request.meta["linkrank_score"].
# With the "score" policy an unfetched page is ranked by its hint, else by
# the best score of the crawled pages linking to it: links of on-topic pages
# are followed first.
#
# Alternatively, personalised PageRank: recomputed every
# LINKRANK_RANK_EVERY_PAGES pages with the teleport in proportion to the
# content scores, so pages close (by links) to many on-topic pages rank
# high, not only the children of the best page:
#     LINKRANK_POLICY = "pagerank"
#     LINKRANK_RANK_PERSONALIZED = True
#     LINKRANK_RANK_EVERY_PAGES = 1000

ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

LINKRANK_PATH = "crawl_db"
LINKRANK_SEEDS_FILE = "seeds.txt"     # on-topic pages make the best seeds
LINKRANK_POLICY = "score"
# AOPIC still runs (importance for reports, `frontera-linkrank top`); keep its
# virtual page's cash on the seed hosts so the estimate is topic-biased too:
LINKRANK_OMEGA_POLICY = "hosts"
LINKRANK_OMEGA_HOSTS = ["www.example.org"]   # <- the hosts of your seeds
LINKRANK_MAX_PAGES = 100_000
LINKRANK_MAX_PAGES_PER_HOST = 20_000

CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 0.5
ROBOTSTXT_OBEY = True
