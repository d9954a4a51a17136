"""The table of every ``LINKRANK_*`` setting: the one place they are defined.

Each :class:`~.kinds.Setting` row gives the name, the kind of value (which
checks it), the default, a one-line doc and, where useful, a longer
explanation. :mod:`frontera_linkrank.default_settings`, the validation of
:class:`~frontera_linkrank.settings.LinkRankSettings` and the generated
settings document (``docs/settings.md``) are all read from here.

Choices are taken from the modules that implement them (the policy
registry, the AOPIC books, the ranker, the refresh scheduler), so a new
policy is a valid ``LINKRANK_POLICY`` as soon as it is registered.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..recrawl.scheduler import POLICIES as RECRAWL_POLICIES
from ..scheduling.policies import POLICIES as POLICY_REGISTRY
from ..scoring.aopic import HISTORY_TIMES, OMEGA_POLICIES
from ..scoring.ranker import ALGORITHMS as RANK_ALGORITHMS
from ..scoring.ranker import EDGE_MODES
from .kinds import (
    AlgorithmList,
    Bool,
    BrokerURL,
    Choice,
    Float,
    HostList,
    Int,
    Name,
    OptionalPath,
    Path,
    Secret,
    Setting,
    Window,
)

# Importance estimates the recrawler can weigh refreshes by (recrawl.recrawler).
RECRAWL_IMPORTANCES = ("aopic", "pagerank")


class Section(NamedTuple):
    """A group of settings (a heading of the settings document)."""

    title: str
    settings: tuple[Setting, ...]


S = Setting


def A(*args: Any, **kwargs: Any) -> Setting:
    """An advanced setting: one most crawls never change (see :class:`~.kinds.Setting`)."""
    return Setting(*args, advanced=True, **kwargs)


STORAGE = Section("Storage", (
    S("LINKRANK_PATH", Path(), "linkrank_db", "Directory of the LMDB page database; created on first use.",
      "The Scrapy scheduler uses it when it is set; unset, the database is `JOBDIR/linkrank_db` with a `JOBDIR`, "
      "else a fresh one for each crawl (docs/scrapy.md)."),
    S("LINKRANK_SYNC", Bool(), True, "fsync on every commit (LMDB `sync`/`metasync`).",
      "With True a committed batch survives a power failure; with False it survives a crash of the process "
      "(LMDB stays consistent) but if the machine itself goes down the last commits may be lost and the file "
      "may be damaged (opening it then says so: docs/guarantees.md)."),
    A("LINKRANK_MAP_SIZE", Int(lo=1 << 20, in_bytes=True), 256 * 1024**2,
      "Initial size of the LMDB memory map in bytes.",
      "The map doubles by itself when a commit needs more room; this only sets where it starts."),
    A("LINKRANK_COMMIT_PAGES", Int(lo=1), 2000,
      "Commit the current batch after this many crawled pages, even if the crawler has not asked for requests.",
      "Bounds the work lost on a crash."),
    A("LINKRANK_COMMIT_INTERVAL", Float(lo=0), 5.0,
      "Commit the current batch this many seconds after the last commit (0: not by time)."),
    A("LINKRANK_STATUS_INTERVAL", Float(lo=0), 5.0,
      "Refresh the crawl's status (what `serve-status` shows) this many seconds apart (0: keep none).",
      "A refresh reads the page fields held in memory, never the page records on disk, and takes at most "
      "half a percent of the time: on a large crawl it comes less often (docs/dashboard.md)."),
    A("LINKRANK_CHECKPOINT_BYTES", Int(lo=1 << 16, in_bytes=True), 64 * 1024**2,
      "Fold the log of page-record changes into the checkpoint past this many bytes.",
      "Page records are persisted as a log of per-batch changes plus a checkpoint of the whole table; the log "
      "is folded into the checkpoint when it grows past this many bytes (or the size of the table, whichever "
      "is larger)."),
))  # fmt: skip

URLS = Section("URLs and links", (
    A("LINKRANK_MAX_URL_LENGTH", Int(lo=0), 2083,
      "URLs longer than this are rejected, counted and logged (0: no limit).",
      "Matches Scrapy's `URLLENGTH_LIMIT`, so the frontier never stores a page Scrapy refuses to fetch."),
    A("LINKRANK_MAX_LINKS_PER_PAGE", Int(lo=0), 0,
      "Keep at most this many distinct out-links per page; the shares of the rest go to the virtual page "
      "(0: all)."),
    A("LINKRANK_LOG_REJECTED", Int(lo=0), 20,
      "Log at most this many rejected URLs per reason at WARNING level; the rest at DEBUG.",
      "All of them are counted in the stats."),
))  # fmt: skip

AOPIC = Section("AOPIC", (
    A("LINKRANK_DAMPING", Float(lo=0, hi=1, open_hi=True, why="cash must leak to the virtual page"), 0.85,
      "Fraction of a page's cash passed on to its out-links; the rest goes to the virtual page.",
      "The on-line estimate converges to PageRank with this damping."),
    S("LINKRANK_OMEGA_POLICY", Choice(OMEGA_POLICIES), "all", "Where the virtual page's cash goes when it is read.",
      "`all`: every known page (the fixed point is plain PageRank); `unfetched`: pages not crawled yet "
      "(broadens the crawl); `fetched`: crawled pages (favours recrawl); `hosts`: pages of the hosts in "
      "`LINKRANK_OMEGA_HOSTS` (focused crawl)."),
    S("LINKRANK_OMEGA_HOSTS", HostList(), (), "Hosts for `LINKRANK_OMEGA_POLICY = \"hosts\"`."),
    A("LINKRANK_OMEGA_READ_EVERY", Int(lo=1), 1, "Read the virtual page once every this many page reads.",
      "Reading it costs O(1) (a global accumulator), so 1 is fine."),
    S("LINKRANK_HISTORY_WINDOW", Window(), None,
      "History window T of Adaptive OPIC, in units of `LINKRANK_HISTORY_TIME` (None: infinite).",
      "None, 0 or inf mean an infinite window: plain OPIC, history += cash."),
    A("LINKRANK_HISTORY_TIME", Choice(HISTORY_TIMES), "wall", "Clock of the history window.",
      "`wall`: seconds; `cash`: total cash read so far, which makes simulations reproducible."),
    S("LINKRANK_INTERNAL_WEIGHT", Float(lo=0), 1.0, "Relative weight of links to the same host.",
      "Weights are renormalised so each page's shares still sum to its cash."),
    S("LINKRANK_EXTERNAL_WEIGHT", Float(lo=0), 1.0, "Relative weight of links to other hosts.",
      "Weights are renormalised so each page's shares still sum to its cash."),
))  # fmt: skip

SCHEDULING = Section("Scheduling", (
    S("LINKRANK_POLICY", Choice(POLICY_REGISTRY.keys()), "hybrid-push",
      "Order in which unfetched pages are handed out.",
      "`hybrid-push` (the default): AOPIC cash plus `LINKRANK_HYBRID_WEIGHT` times the known graph's PageRank, "
      "kept current after every batch by pushing residuals along the crawled pages' links "
      "(`LINKRANK_PUSH_THRESHOLD`) and re-anchored on every periodic PageRank; `opic`: largest AOPIC cash "
      "first (greedy OPIC); `fifo`: discovery order (breadth-first from the seeds); `score`: largest content "
      "score first (the score the spider gave the link, else the best content score of the crawled pages "
      "linking to it); `pagerank`: largest PageRank of the last periodic ranking (pages found since then: "
      "discovery order, after the ranked ones); `hits`: largest HITS authority of the last periodic ranking "
      "(idem); `hybrid`: AOPIC cash plus `LINKRANK_HYBRID_WEIGHT` times the PageRank of the last ranking "
      "(pages found since: their cash alone); `push`: the pushed PageRank estimate alone. A project can "
      "register a policy of its own (docs/architecture.md). docs/ordering.md compares them."),
    S("LINKRANK_MAX_REQUESTS_PER_HOST", Int(lo=0), 0,
      "At most this many requests for one host in one batch (0: no cap)."),
    S("LINKRANK_MAX_PAGES_PER_HOST", Int(lo=0), 0, "Budget of pages per host, a trap defence (0: no budget).",
      "Once a host has this many known pages, further links to new pages of it are dropped (their cash goes "
      "to the virtual page)."),
    A("LINKRANK_LEASE_TIMEOUT", Float(lo=0, open_lo=True), 3600.0,
      "A request neither crawled nor failed after this many seconds is offered again.",
      "Leases of a previous process are always offered again when the database is reopened."),
    S("LINKRANK_MAX_RETRIES", Int(lo=0), 2, "Retry a failed fetch this many times, then record the page as an error.",
      "Under Scrapy this applies with `RETRY_ENABLED = False` only: otherwise Scrapy's RetryMiddleware retries "
      "(`RETRY_TIMES`) and the frontier records its final failure without retrying it (docs/scrapy.md)."),
    S("LINKRANK_RETRY_DELAY", Float(lo=0), 60.0, "Seconds before a failed fetch is retried."),
    A("LINKRANK_PUSH_THRESHOLD", Float(lo=0, open_lo=True), 0.6,
      "Policies `hybrid-push` and `push`: a crawled page passes its residual on once it exceeds this (a page's "
      "teleport mass is 1).",
      "Smaller is closer to the known graph's PageRank and costs more pushes: each push settles at least "
      "(1 - d) times the threshold, so the work per batch is at most the mass it brings over that. In "
      "simulated crawls of the four development graphs 0.3 and 0.6 collect the same PageRank (within 0.003), "
      "and on uk-2007 0.03 to 0.9 do; 0.6 pushes about 5 links per link crawled (docs/ordering.md)."),
    A("LINKRANK_REQUEUE_TOLERANCE", Float(lo=0), 0.02,
      "Policies keyed by AOPIC cash (`opic`, `hybrid`, `hybrid-push`): a waiting page is queued again only "
      "when its key has risen by more than this fraction.",
      "Cash keys rise a little with every link found to a page, and queueing each rise is a heap push per "
      "link. A page left at its queued key is fetched at most this much later in key order than it should "
      "be (its key plus the accumulator, as the queue compares them). At 0.02 the PageRank collected is "
      "within 0.006 of exact requeueing on every development graph and a crawl through `FrontierManager` "
      "is about 5% faster (0: every rise is queued; docs/ordering.md, \"Requeue tolerance\")."),
))  # fmt: skip

SCRAPY = Section("Scrapy scheduler", (
    S("LINKRANK_SEEDS_FILE", OptionalPath(), None,
      "A file of seed URLs, one per line (None: the spider's start() only).",
      "Blank lines and lines starting with `#` are skipped. Read at every start; seeds crawled by an earlier "
      "run on the same database are skipped, so a second run resumes instead of restarting."),
    S("LINKRANK_MAX_PAGES", Int(lo=0), 0,
      "Page budget: stop once the database has recorded this many fetched pages (0: no budget).",
      "Counts every response (redirect hops included, earlier runs on the same database included); the spider "
      "is closed (reason `linkrank_page_budget`) when the requests in flight are back. Without a budget the "
      "crawl ends when the frontier is empty."),
    A("LINKRANK_BATCH_SIZE", Int(lo=0), 0, "Requests asked of the frontier at a time (0: `CONCURRENT_REQUESTS`).",
      "Each ask commits one write transaction and applies the pages crawled since the last one."),
    A("LINKRANK_OVERUSED_SLOT_FACTOR", Float(lo=0, open_lo=True), 2.0,
      "A host with this many times its concurrency in requests not finished is skipped (politeness).",
      "The concurrency is `CONCURRENT_REQUESTS_PER_DOMAIN` (or the downloader slot's own); the frontier then "
      "hands out pages of other hosts, so one slow host does not fill the downloader. With the Scrapy "
      "scheduler, `LINKRANK_MAX_REQUESTS_PER_HOST = 0` means the same number per host per batch."),
    S("LINKRANK_LOG_INTERVAL", Float(lo=0), 30.0,
      "Seconds between progress lines in the log and updates of the `linkrank/*` stats (0: only at the end)."),
))  # fmt: skip

RANKING = Section("Periodic ranking (PageRank, HITS)", (
    S("LINKRANK_RANK_ALGORITHMS", AlgorithmList(RANK_ALGORITHMS), ("pagerank", "hits"),
      "Rankings recomputed periodically during a crawl (`none`: no ranking).",
      "They are stored in the page database (`frontera-linkrank top --by pagerank|authority|hub`, "
      "`page_db_dump`) and feed the scheduler: each PageRank re-anchors the estimate of `hybrid-push` and "
      "`push` and re-keys `pagerank` and `hybrid`; HITS authority orders `hits`. A policy that needs a "
      "ranking refuses a list without it.", shown="pagerank, hits"),
    A("LINKRANK_RANK_EVERY_PAGES", Int(lo=0), 1000,
      "Rank again once at least this many pages were crawled since the last ranking (0: not by count).",
      "And once the crawl has grown by `LINKRANK_RANK_GROWTH`. Geometric growth keeps early rankings frequent and "
      "the total cost of the rankings about 1 + 1/growth (11) times that of one on the final graph: every 1,000 "
      "pages up to 10,000 pages crawled, then every 10% (100,000 pages at a million)."),
    A("LINKRANK_RANK_GROWTH", Float(lo=0), 0.1,
      "Rank again only once the crawl has also grown by this share of the pages crawled so far."),
    A("LINKRANK_RANK_INTERVAL", Float(lo=0), 600.0,
      "Rank again after this many seconds, if the page count has not triggered it first (0: not by time)."),
    A("LINKRANK_RANK_BACKGROUND", Bool(), True,
      "Rank in a background thread with its own LMDB snapshot while the crawl goes on.",
      "False: inline in the crawl's thread (the crawl waits, but runs are reproducible; simulations use it)."),
    S("LINKRANK_RANK_PERSONALIZED", Bool(), False,
      "Teleport (PageRank) and flow back authority (HITS) in proportion to the pages' content scores."),
    S("LINKRANK_RANK_INTER_HOST", Bool(), False,
      "Rank on links between different hosts only (same-host links are mostly navigation)."),
    A("LINKRANK_RANK_EDGES", Choice(EDGE_MODES), "auto", "How a ranking reads the links.",
      "`memory`: loaded once per ranking into index arrays (4 bytes per link and per page); `stream`: copied "
      "once per ranking to an unlinked temporary file in the database's directory (4 bytes per stored link on "
      "disk) and read from it on every iteration (about 4 bytes per page with out-links in memory); `auto`: "
      "memory while they fit `LINKRANK_RANK_MEMORY_LIMIT`. Either way the ranking's LMDB snapshot ends before "
      "its iterations, so the pages the crawl frees meanwhile are reused."),
    A("LINKRANK_RANK_MEMORY_LIMIT", Int(lo=0, in_bytes=True), 2 * 1024**3,
      "`LINKRANK_RANK_EDGES = \"auto\"` loads the links when they take at most this many bytes."),
    A("LINKRANK_RANK_TOLERANCE", Float(lo=0, open_lo=True), 1e-8,
      "Stop an iteration when the L1 change of the scores (which sum to 1) is below this.",
      "The stored info of a ranking says what stopped it."),
    A("LINKRANK_RANK_MAX_ITERATIONS", Int(lo=1), 200, "Stop an iteration after this many steps at most."),
    A("LINKRANK_HYBRID_WEIGHT", Float(lo=0), 64.0,
      "Policies `hybrid` and `hybrid-push`: weight of the PageRank term against AOPIC cash.",
      "Both sum to at most 1 over the pages, so the weight does not depend on the crawl's size. At 64 the "
      "ranking orders the pages it knows, cash orders the pages found since, and a new page with much cash "
      "can overtake weakly ranked ones. Measured on uk-2007 for `hybrid`: 16 and 256 collect less PageRank at "
      "10-20%; for `hybrid-push` 16, 64 and 256 are within 0.013 of each other on every development graph."),
))  # fmt: skip

RECRAWL = Section("Recrawl (refreshing crawled pages)", (
    S("LINKRANK_RECRAWL", Bool(), False, "Fetch crawled pages again when they are due (off: every page once).",
      "The crawl then never runs out of work: end it with a page budget or Scrapy's `CLOSESPIDER_*` settings."),
    S("LINKRANK_RECRAWL_POLICY", Choice(RECRAWL_POLICIES), "value", "When a crawled page is due again.",
      "`value`: when the value of refreshing it (importance / change rate) reaches a threshold set from the "
      "bandwidth: important, often changing pages first; `uniform`: every page equally often; `change_rate`: "
      "each page in proportion to its estimated change rate."),
    S("LINKRANK_RECRAWL_SHARE", Float(lo=0, hi=1), 0.5,
      "Share of each batch given to due refreshes when there are new pages too.",
      "Places one kind cannot fill go to the other."),
    A("LINKRANK_RECRAWL_IMPORTANCE", Choice(RECRAWL_IMPORTANCES), "pagerank", "Importance the `value` policy uses.",
      "`pagerank`: the last periodic ranking, which recrawl then turns on (AOPIC for pages it does not cover "
      "yet); `aopic`: the on-line estimate alone (cheaper, but after a few reads per page too rough to beat "
      "a uniform refresh)."),
    A("LINKRANK_RECRAWL_PRIOR_RATE", Float(lo=0, open_lo=True), 1 / 86400,
      "Prior change rate (changes per second) of a page with few visits: one change a day.", shown="1 / 86400"),
    A("LINKRANK_RECRAWL_PRIOR_VISITS", Float(lo=0), 1.0, "Weight of the prior change rate, in visits."),
    S("LINKRANK_RECRAWL_MIN_INTERVAL", Float(lo=0), 3600.0,
      "Never fetch a page again sooner than this many seconds after its last fetch."),
    A("LINKRANK_RECRAWL_HISTORY", Int(lo=2), 32, "Visits kept per page for the change-rate estimate."),
    A("LINKRANK_RECRAWL_CONDITIONAL", Bool(), True,
      "Ask with If-None-Match / If-Modified-Since (the page's stored ETag and Last-Modified).",
      "A 304 answer is a visit without change."),
    A("LINKRANK_RECRAWL_CALIBRATE_PAGES", Int(lo=1), 1000,
      "Re-derive the refresh schedule from the measured fetch rate after this many fetched pages.",
      "Or 10% of the crawled pages if that is more (each is a vectorised pass over all crawled pages)."),
))  # fmt: skip

DISTRIBUTED = Section("Several spiders, one frontier (serve-frontier)", (
    S("LINKRANK_FRONTIER_URL", BrokerURL(), None,
      "Broker of a shared frontier (`redis://HOST:PORT/DB`): the spider fetches for `serve-frontier`.",
      "Set, the scheduler keeps no page database of its own (no `LINKRANK_PATH`): seeds, fetched pages and "
      "their links go to the frontier through the broker, requests come from it. Crawl-policy settings "
      "belong to `serve-frontier --set`."),
    S("LINKRANK_CRAWL", Name(), "default", "Name of the crawl on the broker (`serve-frontier --crawl`).",
      "Several crawls can share one Redis database under different names."),
    A("LINKRANK_SPIDER_ID", Name(optional=True), None,
      "This spider's id on the broker (None: `<machine>-<pid>`).",
      "A spider restarted with the same id takes back at once the requests it held when it stopped; with a new "
      "id they go to other spiders after the heartbeat timeout."),
    A("LINKRANK_PREFETCH", Int(lo=0), 0,
      "Requests a spider holds at most, received and not yet reported (0: twice `CONCURRENT_REQUESTS`)."),
    A("LINKRANK_HEARTBEAT_INTERVAL", Float(lo=0, open_lo=True), 2.0,
      "Seconds between a spider's heartbeats (and checks of its share of the hosts).",
      "A spider silent for three intervals is taken for dead: the frontier gives its hosts, and the requests it "
      "held, to the other spiders."),
    S("LINKRANK_SECRET", Secret(), None,
      "Key signing every message of a shared frontier (set the same on `serve-frontier` and its spiders).",
      "Reports, seeds, heartbeats and the frontier's requests, assignment and state carry an HMAC under a key "
      "derived from the secret and the crawl name; unsigned or foreign messages are refused and counted. "
      "`serve-frontier` and `frontier-status` also read it from the environment. Without it, anyone who can "
      "write to the broker can add pages and make spiders fetch http(s) URLs (docs/guarantees.md). Nothing "
      "from the broker is ever unpickled."),
    S("LINKRANK_CLOSE_WHEN_FINISHED", Bool(), True,
      "Close the spider (reason `finished`) when the frontier says the crawl is finished.",
      "False keeps spiders waiting for more work (a continuous crawl fed with new seeds)."),
))  # fmt: skip

SECTIONS: tuple[Section, ...] = (STORAGE, URLS, AOPIC, SCHEDULING, SCRAPY, RANKING, RECRAWL, DISTRIBUTED)
"""The settings by topic, in the order the docs list them."""

TABLE: dict[str, Setting] = {s.name: s for section in SECTIONS for s in section.settings}
"""Every setting by full name."""



def policy_rankings(name: str) -> tuple[str, ...]:
    """Rankings the crawl policy ``name`` needs recomputed (from the policy registry)."""
    policy = POLICY_REGISTRY.get(name)
    return policy.rankings if policy is not None else ()
