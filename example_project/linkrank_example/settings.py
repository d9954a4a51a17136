# Settings of the example project. The frontier settings are the first
# block; settings_templates/ in the repository has ready sets for other
# kinds of crawl, and docs/settings.md documents every LINKRANK_* setting.

BOT_NAME = "linkrank_example"
SPIDER_MODULES = ["linkrank_example.spiders"]
NEWSPIDER_MODULE = "linkrank_example.spiders"

# -- frontera_linkrank ---------------------------------------------------------
# The frontier decides what is fetched next: its add-on replaces Scrapy's
# scheduler and sends each page's links to it.
ADDONS = {"frontera_linkrank.scrapy.Addon": 0}

# The page database (created on first use; a second `scrapy crawl` resumes).
# Without it a crawl keeps its database in JOBDIR, or in a fresh folder of
# its own (Scrapy's convention for a crawl's state).
LINKRANK_PATH = "crawl_db"
# Seed URLs, one per line.
LINKRANK_SEEDS_FILE = "seeds.txt"
# AOPIC cash plus the known graph's PageRank, kept current after every
# batch: the default, and the best collector on average in the simulations
# of docs/ordering.md. "opic" is cash alone.
LINKRANK_POLICY = "hybrid-push"
# Stop after this many fetched pages (0: when the frontier is empty).
LINKRANK_MAX_PAGES = 0
# A progress line every 10 seconds.
LINKRANK_LOG_INTERVAL = 10

# -- the example spider ----------------------------------------------------------
# Pages are scored by the share of these keywords their text contains.
EXAMPLE_KEYWORDS = ["music", "theatre", "dance", "art"]

# -- Scrapy ------------------------------------------------------------------------
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 16
# One host may hold this many requests; the frontier hands out pages of other
# hosts while a host is busy (LINKRANK_OVERUSED_SLOT_FACTOR).
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0
USER_AGENT = "frontera_linkrank-example (a test crawler)"
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
