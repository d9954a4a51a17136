"""Every frontera_linkrank setting, with its default.

Settings are read from the Frontera settings of the ``FrontierManager`` (or,
through the Scrapy scheduler, from the Scrapy project's settings), exactly
like Scrapy's own ``default_settings``: a value given there overrides the
default below. Names are ``LINKRANK_*``; :mod:`frontera_linkrank.settings`
validates them and fails with a message naming the setting.
"""

# -- Storage ------------------------------------------------------------------

# Directory of the LMDB page database. Created on first use.
LINKRANK_PATH = "linkrank_db"

# fsync on every commit (LMDB ``sync``/``metasync``). With True a committed
# batch survives a power failure; with False it survives a crash of the
# process (LMDB stays consistent) but the last commits may be lost if the
# machine itself goes down.
LINKRANK_SYNC = True

# Initial size of the LMDB memory map in bytes. The map doubles by itself
# when a commit needs more room; this only sets where it starts.
LINKRANK_MAP_SIZE = 256 * 1024**2

# Commit the current batch after this many crawled pages even if the crawler
# has not asked for new requests yet (bounds the work lost on a crash).
LINKRANK_COMMIT_PAGES = 2000

# ... or after this many seconds since the last commit.
LINKRANK_COMMIT_INTERVAL = 5.0

# Page records are persisted as a log of per-batch changes plus a checkpoint
# of the whole table; the log is folded into the checkpoint when it grows past
# this many bytes (or the size of the table, whichever is larger).
LINKRANK_CHECKPOINT_BYTES = 64 * 1024**2

# -- URLs and links -------------------------------------------------------------

# URLs longer than this are rejected (counted and logged). Matches Scrapy's
# URLLENGTH_LIMIT, so the frontier never stores a page Scrapy refuses to fetch.
# 0 disables the check.
LINKRANK_MAX_URL_LENGTH = 2083

# At most this many distinct out-links are kept per page; the shares of the
# rest go to the virtual page. 0 keeps them all.
LINKRANK_MAX_LINKS_PER_PAGE = 0

# Log at most this many rejected URLs per reason at WARNING level; the rest
# are logged at DEBUG. All of them are counted in the stats.
LINKRANK_LOG_REJECTED = 20

# -- AOPIC ----------------------------------------------------------------------

# Fraction of a page's cash passed on to its out-links; the rest goes to the
# virtual page. The on-line estimate converges to PageRank with this damping.
LINKRANK_DAMPING = 0.85

# Where the virtual page's cash goes when it is read:
#   "all"       every known page (the fixed point is plain PageRank)
#   "unfetched" pages not crawled yet (broadens the crawl)
#   "fetched"   crawled pages (favours recrawl)
#   "hosts"     pages of the hosts in LINKRANK_OMEGA_HOSTS (focused crawl)
LINKRANK_OMEGA_POLICY = "all"

# Hosts for LINKRANK_OMEGA_POLICY = "hosts".
LINKRANK_OMEGA_HOSTS = []

# The virtual page is read once every this many page reads. Reading it costs
# O(1) (a global accumulator), so 1 is fine.
LINKRANK_OMEGA_READ_EVERY = 1

# History window T of Adaptive OPIC, in units of LINKRANK_HISTORY_TIME.
# None (or 0) means an infinite window: plain OPIC, history += cash.
LINKRANK_HISTORY_WINDOW = None

# Clock of the history window: "wall" (seconds) or "cash" (total cash read
# so far, which makes simulations reproducible).
LINKRANK_HISTORY_TIME = "wall"

# Relative weights of links to the same host ("internal") and to other hosts
# ("external"); renormalised so each page's shares still sum to its cash.
LINKRANK_INTERNAL_WEIGHT = 1.0
LINKRANK_EXTERNAL_WEIGHT = 1.0

# -- Scheduling -------------------------------------------------------------

# Priority of unfetched pages:
#   "opic"  largest AOPIC cash first (greedy OPIC)
#   "fifo"  discovery order (breadth-first from the seeds)
#   "score" largest content score first: the score the spider gave the link,
#           else the best content score of the crawled pages linking to it
LINKRANK_POLICY = "opic"

# At most this many requests for one host in one batch. 0: no cap.
LINKRANK_MAX_REQUESTS_PER_HOST = 0

# Budget of pages per host (trap defence): once a host has this many known
# pages, further links to new pages of it are dropped (their cash goes to the
# virtual page). 0: no budget.
LINKRANK_MAX_PAGES_PER_HOST = 0

# A request handed out and neither crawled nor failed after this many seconds
# is offered again. Leases of a previous process are always offered again
# when the database is reopened.
LINKRANK_LEASE_TIMEOUT = 3600.0

# A page whose fetch failed (request_error) is retried this many times, each
# no sooner than LINKRANK_RETRY_DELAY seconds later; then it is given up and
# recorded as an error.
LINKRANK_MAX_RETRIES = 2
LINKRANK_RETRY_DELAY = 60.0
