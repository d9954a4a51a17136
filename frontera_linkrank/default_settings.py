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

# Priority of unfetched pages (README, "Which policy": hybrid collects the
# most PageRank in simulated crawls of uk-2007 and the UKWA host graph):
#   "opic"     largest AOPIC cash first (greedy OPIC; no ranking runs)
#   "fifo"     discovery order (breadth-first from the seeds)
#   "score"    largest content score first: the score the spider gave the
#              link, else the best content score of the crawled pages
#              linking to it
#   "pagerank" largest PageRank of the last periodic ranking (pages found
#              since then: discovery order, after the ranked ones)
#   "hits"     largest HITS authority of the last periodic ranking (idem)
#   "hybrid"   AOPIC cash plus LINKRANK_HYBRID_WEIGHT times the PageRank of
#              the last ranking (pages found since: their cash alone)
LINKRANK_POLICY = "hybrid"

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

# -- Scrapy scheduler (frontera_linkrank.scrapy.LinkRankScheduler) -------------
# Read from the Scrapy project's settings, like every LINKRANK_* setting.

# A file of seed URLs: one per line; blank lines and lines starting with "#"
# are skipped. Read at every start; seeds crawled by an earlier run on the
# same database are skipped, so a second run resumes instead of restarting.
# None: seeds come only from the spider's start().
LINKRANK_SEEDS_FILE = None

# Page budget: stop handing out requests once the page database has recorded
# this many fetched pages (its pages_crawled counter: every response, redirect
# hops included, earlier runs on the same database included), and close the
# spider (reason "linkrank_page_budget") when the requests in flight are back.
# 0: no budget, the crawl ends when the frontier is empty.
LINKRANK_MAX_PAGES = 0

# Requests asked of the frontier at a time (each ask commits one write
# transaction and applies the pages crawled since the last one).
# 0: Scrapy's CONCURRENT_REQUESTS.
LINKRANK_BATCH_SIZE = 0

# Politeness: a host (a Scrapy downloader slot) with this many times its
# concurrency (CONCURRENT_REQUESTS_PER_DOMAIN, or the slot's own) in requests
# handed out and not finished is overused: the frontier skips it
# (overused_keys) and hands out pages of other hosts, so one slow host does
# not fill the downloader. With the Scrapy scheduler,
# LINKRANK_MAX_REQUESTS_PER_HOST = 0 means the same number per host per batch.
LINKRANK_OVERUSED_SLOT_FACTOR = 2.0

# Seconds between progress lines in the log (and updates of the linkrank/*
# figures in Scrapy's stats). 0: only at the end of the crawl.
LINKRANK_LOG_INTERVAL = 30.0

# -- Periodic ranking (PageRank, HITS) -------------------------------------------

# Algorithms recomputed periodically during a crawl: a list of "pagerank"
# and "hits". None: what LINKRANK_POLICY needs ("pagerank" for pagerank and
# hybrid, "hits" for hits, nothing for the others). Rankings are stored in
# the page database (page_db_dump shows them).
LINKRANK_RANK_ALGORITHMS = None

# Recompute when the crawl has grown by LINKRANK_RANK_GROWTH (a share of
# the pages crawled so far) and by at least LINKRANK_RANK_EVERY_PAGES pages
# since the last ranking started (0: not by count). Geometric growth keeps
# the total cost of the rankings near that of one on the final graph, and
# early rankings frequent: every 1,000 pages up to 10,000 pages crawled,
# then every 10% (100,000 pages at a million).
LINKRANK_RANK_EVERY_PAGES = 1000
LINKRANK_RANK_GROWTH = 0.1

# ... or after this many seconds (0: not by time), whichever comes first.
LINKRANK_RANK_INTERVAL = 600.0

# Compute in a background thread with its own LMDB snapshot while the
# crawl goes on (True), or inline in the crawl's thread (False: the crawl
# waits, but runs are reproducible; simulations use it).
LINKRANK_RANK_BACKGROUND = True

# PageRank teleports to (and HITS authority flows back through) pages in
# proportion to their content score (meta b"score"), instead of uniformly.
LINKRANK_RANK_PERSONALIZED = False

# Rank on links between different hosts only (same-host links are mostly
# navigation).
LINKRANK_RANK_INTER_HOST = False

# Links "memory" (loaded once per ranking into a CSR matrix, ~12 bytes per
# link), "stream" (read from the LMDB blocks on every iteration, a few
# bytes per page) or "auto" (memory while they fit LINKRANK_RANK_MEMORY_LIMIT).
LINKRANK_RANK_EDGES = "auto"
LINKRANK_RANK_MEMORY_LIMIT = 2 * 1024**3

# Stop an iteration when the L1 change of the scores (which sum to 1) is
# below this, or after LINKRANK_RANK_MAX_ITERATIONS; the stored info says
# which stopped it.
LINKRANK_RANK_TOLERANCE = 1e-8
LINKRANK_RANK_MAX_ITERATIONS = 200

# Policy "hybrid": weight of the last PageRank against AOPIC cash (both sum
# to at most 1 over the pages, so the weight does not depend on the crawl's
# size). 64: the ranking orders the pages it knows, cash orders the pages
# found since, and a new page with much cash can overtake weakly ranked ones.
# Measured on uk-2007 (README): 16 and 256 collect less PageRank at 10-20%.
LINKRANK_HYBRID_WEIGHT = 64.0

# -- Recrawl (refreshing crawled pages) --------------------------------------------

# Fetch crawled pages again when they are due (see LINKRANK_RECRAWL_POLICY);
# the crawl then never runs out of work: end it with a page budget or
# Scrapy's CLOSESPIDER_* settings. Off: every page is fetched once.
LINKRANK_RECRAWL = False

# When a crawled page is due again:
#   "value"       when the value of refreshing it (importance / change rate,
#                 ALGORITHMS.md §5) reaches a threshold set from the
#                 bandwidth: important, often changing pages first
#   "uniform"     every page equally often
#   "change_rate" each page in proportion to its estimated change rate
LINKRANK_RECRAWL_POLICY = "value"

# Share of each batch of requests given to due refreshes when there are
# new pages too (places one kind cannot fill go to the other).
LINKRANK_RECRAWL_SHARE = 0.5

# Importance used by the "value" policy: "pagerank" (the last periodic
# ranking, which recrawl then turns on; AOPIC for pages it does not cover
# yet) or "aopic" (the on-line estimate alone: cheaper, but after a few
# reads per page too rough to beat a uniform refresh, README).
LINKRANK_RECRAWL_IMPORTANCE = "pagerank"

# Prior change rate (changes per second) of a page with few visits, and its
# weight in visits: one change a day, worth one visit.
LINKRANK_RECRAWL_PRIOR_RATE = 1 / 86400
LINKRANK_RECRAWL_PRIOR_VISITS = 1.0

# A page is never fetched again sooner than this many seconds after its
# last fetch.
LINKRANK_RECRAWL_MIN_INTERVAL = 3600.0

# Visits kept per page for the change-rate estimate.
LINKRANK_RECRAWL_HISTORY = 32

# Ask with If-None-Match / If-Modified-Since (the page's stored ETag and
# Last-Modified); a 304 answer is a visit without change.
LINKRANK_RECRAWL_CONDITIONAL = True

# Re-derive the refresh schedule from the measured fetch rate after this
# many fetched pages, or 10% of the crawled pages if that is more (each is
# a vectorised pass over all crawled pages).
LINKRANK_RECRAWL_CALIBRATE_PAGES = 1000
