"""``LinkRankBackend``: a Frontera backend over the LMDB page database.

Calls are batched: ``page_crawled``/``links_extracted`` only record what
happened; the batch is applied (links resolved to pages, AOPIC reads, new
pages queued) and committed as one LMDB write transaction when the crawler
asks for more requests, when ``LINKRANK_COMMIT_PAGES`` pages are waiting,
or ``LINKRANK_COMMIT_INTERVAL`` seconds have passed. Requests are handed
out only after the transaction that leases them has committed, so a crash
never loses a page: uncommitted work is redone, leased pages are offered
again when the database is reopened.

Bad input never raises into the crawler: URLs that cannot be fetched are
rejected with a reason, logged and counted (``stats()``), and the rest of
the batch goes on.
"""

import binascii
import hashlib
import logging
import math
import socket
import time

import numpy as np
from frontera.core.components import Backend
from frontera.core.models import Request

from ..numeric import unique
from ..recrawl.content import content_hash as normalised_hash
from ..recrawl.recrawler import Recrawler, header, status_class, validators
from ..scheduling import priority as priorities
from ..scheduling.frontier import Frontier
from ..scoring.aopic import Aopic
from ..scoring.ranker import BackgroundRanker, RankConfig, RankScores, content_scores, load_stored, rank_snapshot, store
from ..settings import LinkRankSettings
from ..storage.pagedb import PageDB
from ..storage.urls import RejectedURL, check_url, fingerprint, fingerprint_key
from ..storage.vertices import (
    CRAWLED,
    ERROR,
    F_EXTRAS,
    F_NORM_HASH,
    F_REDIRECT,
    F_REFRESH,
    F_SEED,
    F_VALIDATORS,
    LEASED,
    NO_PAGE,
    UNFETCHED,
)
from .components import LinkRankMetadata, LinkRankQueue, LinkRankStates

logger = logging.getLogger(__name__)

# Meta keys the frontier manages itself; not stored with a request.
_INTERNAL_META = frozenset(
    (
        b"fingerprint",
        b"state",
        b"depth",
        b"id",
        b"_scr",
        b"score",
        b"domain",
        b"redirect_urls",
        b"redirect_fingerprints",
        b"redirect_domains",
        b"seed_weight",
    )
)
SCORE_KEY = b"score"  # response meta: content score of the page; link meta: its hint
SEED_WEIGHT_KEY = b"seed_weight"  # seed request meta: share of ω's cash


def _request_parts(req):
    """Non-default parts of a request, or None for a plain GET."""
    meta = req.meta
    plain = req.method == b"GET" and not req.headers and not req.cookies and not req.body
    if plain:
        for k, v in meta.items():
            if k not in _INTERNAL_META and (v or k != b"scrapy_meta"):
                plain = False
                break
        if plain:
            return None
    extra = {k: v for k, v in meta.items() if k not in _INTERNAL_META and (v or k != b"scrapy_meta")}
    return (req.method, req.headers, req.cookies, extra, req.body)


class _Read:
    """A crawled page waiting for its AOPIC read at the next flush."""

    __slots__ = ("idx", "status", "when", "score", "hash", "links", "late", "redirect_to", "validators", "kept_links")

    def __init__(self, idx, status, when, score=math.nan, content_hash=0, late=False):
        self.idx = idx
        self.status = status
        self.when = when
        self.score = score
        self.hash = content_hash
        self.links = []
        self.late = late  # links for a page already read: store them, move no cash
        self.redirect_to = None  # page index this one redirected to
        self.validators = None  # (etag, last_modified) to store (recrawl)
        self.kept_links = False  # 304: the page keeps its stored out-links


class LinkRankBackend(Backend):
    """Frontera backend: LMDB page database, inline AOPIC, best-first queue.

    Build it through Frontera (``BACKEND = "frontera_linkrank.LinkRankBackend"``)
    or directly with a settings mapping::

        backend = LinkRankBackend(settings={"LINKRANK_PATH": "crawl_db"})

    All ``LINKRANK_*`` settings are listed in
    :mod:`frontera_linkrank.default_settings`.
    """

    component_name = "LinkRank Backend"

    def __init__(self, manager=None, settings=None, clock=time.time):
        source = settings if settings is not None else (manager.settings if manager is not None else None)
        self.settings = s = LinkRankSettings(source)
        self.manager = manager
        self.request_model = manager.request_model if manager is not None else Request
        self.clock = clock
        self.db = db = PageDB(s.PATH, map_size=s.MAP_SIZE, sync=s.SYNC, checkpoint_bytes=s.CHECKPOINT_BYTES)
        try:
            self._open_state()
        except BaseException:
            db.close()
            raise
        self._metadata = LinkRankMetadata(self)
        self._queue = LinkRankQueue(self)
        self._states = LinkRankStates(self)

    @classmethod
    def from_manager(cls, manager):
        return cls(manager)

    # -- Frontera component properties -----------------------------------------------
    @property
    def metadata(self):
        return self._metadata

    @property
    def queue(self):
        return self._queue

    @property
    def states(self):
        return self._states

    # -- opening -----------------------------------------------------------------------
    def _open_state(self):
        s, db = self.settings, self.db
        v = db.vertices
        meta = db.meta
        self.counters = dict(meta.get("counters", {}))
        saved = meta.get("aopic")
        aopic_kw = dict(
            damping=s.DAMPING,
            window=s.HISTORY_WINDOW,
            cash_time=s.HISTORY_TIME == "cash",
            omega_read_every=s.OMEGA_READ_EVERY,
            internal_weight=s.INTERNAL_WEIGHT,
            external_weight=s.EXTERNAL_WEIGHT,
        )
        if saved and (saved.get("policy") != s.OMEGA_POLICY or saved.get("hosts", []) != s.OMEGA_HOSTS):
            # Settle what the old target set is owed before switching sets.
            old = Aopic.from_saved(v, saved, db.host_ids, **aopic_kw)
            old.settle_all()
            db.touch(np.arange(v.n))
            logger.info("omega policy changed from %s to %s: settled", saved["policy"], s.OMEGA_POLICY)
        self.aopic = Aopic(v, omega_policy=s.OMEGA_POLICY, state=saved, **aopic_kw)
        self._mark_target_hosts(self.aopic, s.OMEGA_HOSTS)
        self.aopic.n_target = int(self.aopic.member_mask().sum())

        # Leases of a previous process: that process is gone (we hold the
        # writer lock), so its requests are offered again.
        leased = np.flatnonzero(v.state[: v.n] == LEASED)
        if len(leased):
            # (a leased refresh goes back to the crawled pages)
            v.state[leased] = np.where(v.flags[leased] & F_REFRESH, CRAWLED, UNFETCHED)
            v.flags[leased] &= 0xFF ^ F_REFRESH
            v.lease[leased] = 0.0
            db.touch(leased)
            self._count("leases_recovered", len(leased))
            logger.info("%d requests leased by a previous run are offered again", len(leased))
        self.host_known = np.bincount(v.host[: v.n], minlength=len(db.host_names)).tolist()
        self._host_ip = {}
        self._rejected_logged = {}
        self._open_ranking()
        make = priorities.PRIORITIES[s.POLICY]
        keys = make(v, self.aopic, ranks=self.ranks, weight=s.HYBRID_WEIGHT)
        self.frontier = Frontier(v, keys, priorities.host_class(s.POLICY, self.aopic))
        self.frontier.rebuild()
        self.recrawler = Recrawler(self) if s.RECRAWL else None
        self._pending = []
        self._pending_by_idx = {}
        self._last_commit = self.clock()

    def _open_ranking(self):
        """Periodic PageRank/HITS: the stored ranking, and when the next is due."""
        s = self.settings
        self.ranks = RankScores(load_stored(self.db) if s.RANK_ALGORITHMS else None)
        self.rank_config = RankConfig.from_settings(s) if s.RANK_ALGORITHMS else None
        self.ranker = BackgroundRanker(self.db, self.rank_config) if self.rank_config and s.RANK_BACKGROUND else None
        crawled = self.counters.get("pages_crawled", 0)
        # A crawl with pages but no ranking yet (say, switched to a ranked
        # policy) ranks at once; otherwise after the configured interval.
        self._rank_mark = (-1 if crawled and self.ranks.n == 0 else crawled, self.clock())

    def _mark_target_hosts(self, aopic, hosts):
        if aopic.policy != "hosts":
            return
        for name in hosts:
            hid = self.db.host_ids.get(name)
            if hid is not None:
                aopic.set_host_target(hid, True)

    def _host(self, name):
        """Host id of ``name``, registering new hosts with AOPIC."""
        hid = self.db.host_ids.get(name)
        if hid is None:
            hid = self.db.host_id(name)
            self.host_known.append(0)
            if self.aopic.policy == "hosts" and name in self.settings.OMEGA_HOSTS:
                self.aopic.set_host_target(hid, True)
        return hid

    # -- counters and logging ---------------------------------------------------------
    def _count(self, key, k=1):
        self.counters[key] = self.counters.get(key, 0) + k

    def _reject(self, exc, where):
        reason = exc.reason if isinstance(exc, RejectedURL) else "malformed"
        self._count("rejected_" + reason)
        seen = self._rejected_logged.get(reason, 0)
        self._rejected_logged[reason] = seen + 1
        level = logging.WARNING if seen < self.settings.LOG_REJECTED else logging.DEBUG
        logger.log(level, "rejected %s URL (%s): %s", where, reason, exc)

    # -- fingerprints and pages -----------------------------------------------------------
    def _key_of(self, req):
        """20-byte page key of a request (computed if the meta lacks it)."""
        fp = req.meta.get(b"fingerprint")
        if fp is None:
            return fingerprint(req.url)
        return fingerprint_key(fp)

    def _new_pages(self, fps, urls, hosts, depth, parents, reqs, flags=0):
        """Append pages; ``depth``/``parents`` are arrays or scalars."""
        db, v = self.db, self.db.vertices
        start = db.add_pages(fps, urls, hosts)
        k = len(fps)
        sl = slice(start, start + k)
        v.depth[sl] = depth
        v.parent[sl] = parents
        if flags:
            v.flags[sl] = flags
        for j, req in enumerate(reqs):
            # Inline fast path of _request_parts: most links are plain GETs.
            meta = req.meta
            if (
                len(meta) > 2
                or req.method != b"GET"
                or req.headers
                or req.cookies
                or req.body
                or meta.get(b"scrapy_meta")
            ):
                parts = _request_parts(req)
                if parts is not None:
                    db.set_request_extras(start + j, parts)
                    v.flags[start + j] |= F_EXTRAS
                hint = meta.get(SCORE_KEY)
                if hint is not None:
                    self._set_hint(start + j, hint)
        self.aopic.join_new(start, k)
        return start

    def _set_hint(self, i, value):
        try:
            value = float(value)
        except (TypeError, ValueError):
            self._count("invalid_scores")
            return
        if math.isfinite(value) and value > self.db.vertices.hint[i]:
            self.db.vertices.hint[i] = value

    def _find_or_create(self, req, depth=0, parent=NO_PAGE, flags=0):
        """Index of the page of request ``req``, creating it if new; None if
        its URL is rejected."""
        try:
            key = self._key_of(req)
        except RejectedURL as e:
            self._reject(e, "request")
            return None
        return self._page(req.url, key, req, depth, parent, flags)

    def _page(self, url, key, req=None, depth=0, parent=NO_PAGE, flags=0):
        i = self.db.find(key)
        if i is not None:
            return i
        try:
            host = check_url(url, self.settings.MAX_URL_LENGTH)
        except RejectedURL as e:
            self._reject(e, "request")
            return None
        hid = self._host(host)
        self.host_known[hid] += 1
        i = self._new_pages([key], [url], [hid], depth, parent, [req] if req is not None else [], flags)
        self.frontier.offer([i])
        return i

    # -- Frontera API ----------------------------------------------------------------------
    def frontier_start(self):
        pass

    def frontier_stop(self):
        if self.ranker is not None:
            self.ranker.cancel()  # it holds a snapshot of the database we close
        if self.db.env is not None:
            self._flush()
            self._commit()
            self.db.close()

    def add_seeds(self, seeds):
        """Add seed requests; ω's cash is split over the new ones (by
        ``meta[b'seed_weight']`` if given, else equally)."""
        self._flush()
        v = self.db.vertices
        funded, weights = [], []
        for seed in seeds:
            i = self._find_or_create(seed, depth=0, flags=F_SEED)
            if i is None:
                continue
            self._count("seeds")
            if v.n_crawls[i] or v.state[i] != UNFETCHED or i in funded:
                continue  # already crawled (a resumed crawl) or duplicate
            v.flags[i] |= F_SEED
            v.depth[i] = 0
            v.parent[i] = NO_PAGE
            if self.settings.POLICY == "score":
                self._set_hint(i, max(1.0, v.hint[i]))
            w = seed.meta.get(SEED_WEIGHT_KEY, 1.0)
            try:
                w = float(w)
                if not (w > 0 and math.isfinite(w)):
                    raise ValueError
            except (TypeError, ValueError):
                self._count("invalid_seed_weights")
                w = 1.0
            funded.append(i)
            weights.append(w)
        if funded:
            self.aopic.fund(funded, weights)
            self.db.touch(np.asarray(funded))
            self.frontier.offer(funded)

    def page_crawled(self, response):
        """Record a fetched page (any status); its links may follow in
        :meth:`links_extracted`.

        After redirects every URL of the chain is marked crawled (with its
        3xx status from ``meta[b'redirect_reasons']``) and linked to the
        next; the final page gets the response. Both conventions are
        understood: Scrapy's (``redirect_urls`` lists the URLs before the
        response's URL) and Frontera's canonical solver's (the response is
        renamed to the first URL and the final one appended to the list).
        """
        now = self.clock()
        # Commit the batch so far *before* recording this page, whose links
        # (links_extracted) are still to come.
        self._maybe_commit(now)
        meta = response.meta
        chain = self._redirect_chain(response)
        if chain is None:
            try:
                key = self._key_of(response)
            except RejectedURL as e:
                self._reject(e, "response")
                return
            i = self._page(response.url, key)
            hops = ()
        else:
            i, hops = chain
        if i is None:
            return
        score = meta.get(SCORE_KEY, math.nan)
        try:
            score = float(score)
        except (TypeError, ValueError):
            self._count("invalid_scores")
            score = math.nan
        status = response.status_code
        content_hash = 0
        body = response.body
        if body and 200 <= status < 300:
            if isinstance(body, str):
                body = body.encode("utf-8", "surrogateescape")
            if self.recrawler is not None:
                # Normalised, so a timestamp or session id is not a change
                # (costs a few ms a page: only when pages are refreshed).
                ctype = header(response.headers, "content-type")
                content_hash = normalised_hash(body, ctype)
            else:
                content_hash = int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little") or 1
        r = _Read(i, status, now, score, content_hash)
        if self.recrawler is not None and (200 <= status < 300 or status == 304):
            r.validators = validators(response.headers)
        for src, dst, code in hops:
            hop = _Read(src, code, now)
            hop.redirect_to = dst
            self._pending.append(hop)
            self._pending_by_idx[src] = r  # links sent for the first URL go to the final page
        self._pending.append(r)
        self._pending_by_idx[i] = r

    def _redirect_chain(self, response):
        """``(final page, hops)`` of a redirected response, or None if it
        was not redirected. Each hop is ``(page, next page, 3xx status)``."""
        meta = response.meta
        urls = list(meta.get(b"redirect_urls") or ())
        request = response.request
        if not urls:
            if request is None or request.url == response.url:
                return None
            urls = [request.url]  # redirected without Scrapy's meta
        if response.url not in urls:
            urls.append(response.url)
        reasons = list(meta.get(b"redirect_reasons") or ())
        pages = []
        for url in urls:
            j = self._find_or_create(self.request_model(url=url))
            if j is not None and (not pages or pages[-1] != j):
                pages.append(j)
        if not pages:
            return None, ()
        final = pages[-1]
        hops = []
        for k, (a, b) in enumerate(zip(pages, pages[1:])):
            code = reasons[k] if k < len(reasons) else 302
            hops.append((a, b, code if isinstance(code, int) and 300 <= code < 400 else 302))
        v = self.db.vertices
        if hops and v.state[final] != CRAWLED and not (v.flags[final] & F_SEED):
            v.depth[final] = v.depth[pages[0]]
            v.parent[final] = v.parent[pages[0]]
        return final, hops

    def links_extracted(self, request, links):
        """Record the out-links of a crawled page (resolved at the next flush)."""
        try:
            key = self._key_of(request)
        except RejectedURL as e:
            self._reject(e, "source")
            return
        i = self.db.find(key)
        r = self._pending_by_idx.get(i) if i is not None else None
        if r is None:
            # Links of a page crawled outside this batch (or never handed
            # out): keep them, but no cash moves.
            i = self._find_or_create(request, depth=0)
            if i is None:
                return
            r = _Read(i, 0, self.clock(), late=True)
            self._pending.append(r)
            self._pending_by_idx[i] = r
            self._count("late_links", len(links))
        r.links.extend(links)

    def request_error(self, request, error):
        """A fetch failed: retry later, or give up after ``LINKRANK_MAX_RETRIES``
        (at once if ``request.meta[b'dont_retry']``: robots.txt, offsite)."""
        now = self.clock()
        i = self._find_or_create(request, depth=0)
        if i is None:
            return
        self._flush()  # its pending reads, if any, come first
        v = self.db.vertices
        refresh = v.state[i] == LEASED and bool(v.flags[i] & F_REFRESH)
        if v.state[i] in (CRAWLED, ERROR) and v.n_crawls[i]:
            self._count("errors_after_crawl")
            return
        self.frontier.lease_done(i)
        v.errors[i] += 1
        self.db.set_error(i, error)
        self.db.touch(i)
        self._count("fetch_errors")
        if v.errors[i] > self.settings.MAX_RETRIES or request.meta.get(b"dont_retry"):
            self.frontier.discard(i)
            self.aopic.leave(i)
            v.state[i] = ERROR
            v.flags[i] &= 0xFF ^ F_REFRESH
            self.aopic.omega += float(v.cash[i])  # it will never be read: cash to ω
            v.cash[i] = 0.0
            self.aopic.join(i)
            self._count("pages_failed")
        elif refresh:
            # A failed refresh: the stored copy stays; try again later.
            self.recrawler.requeue(i, now + self.settings.RETRY_DELAY * 2 ** (int(v.errors[i]) - 1))
            self._count("refresh_retries")
        else:
            v.state[i] = UNFETCHED
            self.frontier.wait_retry(i, now + self.settings.RETRY_DELAY)
            self._count("retries")
        self._maybe_commit(now)

    def finished(self):
        return (
            not self._pending
            and self.frontier.is_empty()
            and (self.recrawler is None or not len(self.recrawler.refresher))
        )

    def get_next_requests(self, max_n_requests, **kwargs):
        """Lease and return up to ``max_n_requests`` requests, best first.

        kwargs from Frontera: ``key_type`` ("domain" or "ip") and
        ``overused_keys`` (hosts or IPs whose pages are kept for later).
        """
        self._flush()
        now = self.clock()
        self._rank_step(now)
        fr = self.frontier
        _, expired_refreshes = fr.expire(now, self.settings.LEASE_TIMEOUT)
        for page in expired_refreshes:
            self.recrawler.requeue(page, now)
        fr.release_retries(now)
        if max_n_requests <= 0:
            self._commit()
            return []
        skip = self._skip_function(kwargs.get("key_type", "domain"), kwargs.get("overused_keys") or ())
        cap = self.settings.MAX_REQUESTS_PER_HOST
        counts = {}  # host -> requests in this batch, refreshes and new pages alike
        rc = self.recrawler
        refresh = []
        if rc is not None:
            rc.step(now, self.counters.get("pages_crawled", 0))
            refresh = rc.take(round(rc.share * max_n_requests), now, skip, cap, counts)
        pages = fr.take(max_n_requests - len(refresh), now, skip_host=skip, max_per_host=cap,
                        offsets=(self.aopic.A, 0.0), counts=counts)
        if rc is not None and len(refresh) + len(pages) < max_n_requests:
            refresh += rc.take(max_n_requests - len(refresh) - len(pages), now, skip, cap, counts, fill=True)
        pages += refresh
        if pages:
            self.db.touch(np.asarray(pages))
            self._count("requests_out", len(pages))
            if refresh:
                self._count("refreshes_out", len(refresh))
        self._commit()
        return self._make_requests(pages)

    def _skip_function(self, key_type, overused):
        if not overused:
            return None
        overused = set(overused)
        names = self.db.host_names
        if key_type == "ip":
            return lambda h: self._ip(names[h]) in overused
        return lambda h: names[h] in overused

    def _ip(self, host):
        ip = self._host_ip.get(host)
        if ip is None:
            try:
                ip = socket.gethostbyname(host)
            except OSError:
                ip = host
            self._host_ip[host] = ip
        return ip

    def _make_requests(self, pages):
        if not pages:
            return []
        v = self.db.vertices
        with self.db.snapshot() as txn:
            urls = self.db.urls(pages, txn)
            idx = np.asarray(pages, np.int64)
            extra_pages = idx[(v.flags[idx] & F_EXTRAS) != 0].tolist()
            extras = self.db.request_extras(extra_pages, txn) if extra_pages else {}
            conditional = {}
            if self.recrawler is not None:
                want = (v.flags[idx] & (F_REFRESH | F_VALIDATORS)) == (F_REFRESH | F_VALIDATORS)
                conditional = self.recrawler.conditional_headers(idx[want].tolist(), txn)
        out = []
        model = self.request_model
        fps = v.fp[pages].tobytes().hex().encode("ascii")
        depths = v.depth[pages].tolist()
        for k, (p, url) in enumerate(zip(pages, urls)):
            parts = extras.get(p)
            cond = conditional.get(p)
            if parts is None:
                meta = {b"scrapy_meta": {}}
                req = model(url=url, meta=meta, headers=cond)
            else:
                method, headers, cookies, extra, body = parts
                meta = dict(extra)
                meta.setdefault(b"scrapy_meta", {})
                if cond:
                    headers = {**(headers or {}), **cond}
                req = model(url=url, method=method, headers=headers, cookies=cookies, meta=meta, body=body)
            meta[b"fingerprint"] = fps[40 * k : 40 * k + 40]
            meta[b"depth"] = depths[k]
            out.append(req)
        return out

    # -- periodic ranking --------------------------------------------------------------------
    def _rank_step(self, now):
        """Install a finished ranking; start the next one when it is due."""
        if self.rank_config is None:
            return
        if self.ranker is not None:
            done = self.ranker.poll()
            if done is not None:
                self._install_ranking(done)
            if self.ranker.running:
                return
        s = self.settings
        crawled = self.counters.get("pages_crawled", 0)
        last_crawled, last_time = self._rank_mark
        if crawled == last_crawled:
            return
        grown = crawled - last_crawled
        if not (
            (s.RANK_EVERY_PAGES and grown >= max(s.RANK_EVERY_PAGES, s.RANK_GROWTH * last_crawled))
            or (s.RANK_INTERVAL and now - last_time >= s.RANK_INTERVAL)
            or last_crawled < 0
        ):
            return
        self._commit()  # the ranking's snapshot holds everything crawled so far
        self._rank_mark = (crawled, now)
        version = self.ranks.version + 1
        # Content scores are copied now: the page table changes while a
        # background ranking runs.
        scores = content_scores(self.db, self.db.n_pages) if self.rank_config.personalized else None
        if self.ranker is not None:
            self.db.reserve()  # commits meanwhile should not need to grow the map
            self.ranker.start(version, self.ranks.ranking, scores)
        else:
            self._install_ranking(rank_snapshot(self.db, self.rank_config, version=version,
                                                previous=self.ranks.ranking, scores=scores))

    def _install_ranking(self, ranking):
        """Store a finished ranking and re-key the frontier by it."""
        store(self.db, ranking)
        self.ranks.ranking = ranking
        if self.settings.POLICY in ("pagerank", "hits", "hybrid"):
            self.frontier.rebuild()
        self._count("rankings")
        for name, info in ranking.info.items():
            if name != "hub":
                logger.info(
                    "ranking %d: %s over %d pages, %d links: %d iterations (%s), %.2f s",
                    ranking.version, name, ranking.n_pages, info["n_links"], info["iterations"],
                    info["stopped"], info["seconds"],
                )

    # -- applying a batch ------------------------------------------------------------------
    def _maybe_commit(self, now):
        s = self.settings
        if len(self._pending) >= s.COMMIT_PAGES or (s.COMMIT_INTERVAL and now - self._last_commit >= s.COMMIT_INTERVAL):
            self._flush()
            self._commit()

    def _commit(self):
        meta = {
            "aopic": {**self.aopic.state_dict(), "hosts": self.settings.OMEGA_HOSTS},
            "counters": self.counters,
            "policy": self.settings.POLICY,
        }
        if self.recrawler is not None:
            meta["recrawl"] = self.recrawler.state_dict()
        self.db.commit(meta)
        self._last_commit = self.clock()
        self._count("commits")

    def _flush(self):
        """Apply the pending reads: resolve links, read pages, queue children."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_by_idx = {}
        resolved = self._resolve(pending)
        self._read_pages(pending, resolved)

    def _resolve(self, pending):
        """Map each pending page's links to page indices, creating new pages.

        Returns, per pending read, ``(children, n_dropped, hints,
        n_dropped_same_host)``: distinct targets in link order without
        self-links, valid links dropped after counting (host budget,
        per-page cap; their shares go to ω), ``(page, score)`` hints, and
        how many dropped links were on the page's own host.
        This loop runs once per link: keep it lean.
        """
        db, v, s = self.db, self.db.vertices, self.settings
        index_get = db.fp_index.get
        host_ids = db.host_ids
        budget = s.MAX_PAGES_PER_HOST
        cap = s.MAX_LINKS_PER_PAGE
        max_len = s.MAX_URL_LENGTH
        host_known = self.host_known
        unhex = binascii.unhexlify
        weighted = self.aopic.weighted
        new_key, new_url, new_host, new_depth, new_parent, new_req = [], [], [], [], [], []
        batch_new = {}
        batch_get = batch_new.get
        next_idx = v.n
        out = []
        n_links = n_self = n_dup = n_over = 0
        for r in pending:
            links = r.links
            if not links:
                out.append(None)
                continue
            src = r.idx
            own = bytes(v.fp[src])
            depth = int(v.depth[src]) + 1
            src_host = int(v.host[src])
            seen = {own}
            kids = []
            hints = None
            dropped = dropped_same = 0
            n_links += len(links)
            for link in links:
                meta = link.meta
                fp = meta.get(b"fingerprint")
                try:
                    key = unhex(fp)
                    if len(key) != 20:
                        raise ValueError
                except (TypeError, ValueError):
                    try:
                        key = fingerprint_key(fp) if fp is not None else fingerprint(link.url)
                    except RejectedURL as e:
                        self._reject(e, "link")
                        continue
                if key in seen:
                    if key == own:
                        n_self += 1
                    else:
                        n_dup += 1
                    continue
                seen.add(key)
                j = index_get(key)
                if j is None:
                    j = batch_get(key)
                if j is None:
                    url = link.url
                    try:
                        host = check_url(url, max_len)
                    except RejectedURL as e:
                        self._reject(e, "link")
                        continue
                    hid = host_ids.get(host)
                    if hid is None:
                        hid = self._host(host)
                    if (cap and len(kids) >= cap) or (budget and host_known[hid] >= budget):
                        dropped += 1
                        dropped_same += hid == src_host
                        continue
                    host_known[hid] += 1
                    j = batch_new[key] = next_idx
                    next_idx += 1
                    new_key.append(key)
                    new_url.append(url)
                    new_host.append(hid)
                    new_depth.append(depth)
                    new_parent.append(src)
                    new_req.append(link)
                    kids.append(j)
                    continue
                if cap and len(kids) >= cap:
                    dropped += 1
                    if weighted:
                        h = new_host[j - v.n] if j >= v.n else int(v.host[j])
                        dropped_same += h == src_host
                    continue
                kids.append(j)
                if len(meta) > 2:
                    hint = meta.get(SCORE_KEY)
                    if hint is not None:
                        hints = hints or []
                        hints.append((j, hint))
            n_over += dropped
            out.append((kids, dropped, hints, dropped_same))
        if new_key:
            start = self._new_pages(new_key, new_url, new_host, new_depth, new_parent, new_req)
            assert start + len(new_key) == next_idx
        self._count("links", n_links)
        self._count("self_links", n_self)
        self._count("duplicate_links", n_dup)
        self._count("links_dropped", n_over)
        return out

    def _read_pages(self, pending, resolved):
        """AOPIC reads of the pending pages, in order, then the batch-level
        bookkeeping (fields, depths, queue) in vectorised form."""
        v, db, aopic, fr = self.db.vertices, self.db, self.aopic, self.frontier
        weighted = aopic.weighted
        empty = np.zeros(0, np.int64)
        reads, read_kids, late_kids = [], [], []
        for r, res in zip(pending, resolved):
            i = r.idx
            if res is None:
                kids, dropped, dropped_same = empty, 0, 0
            else:
                kids = np.array(res[0], np.int64)
                dropped, dropped_same = res[1], res[3]
                if res[2]:
                    for j, hint in res[2]:
                        self._set_hint(j, hint)
            if r.redirect_to is not None:
                kids = np.array([r.redirect_to], np.int64)
            if r.status == 304 and v.n_crawls[i] and not r.late:
                # Not modified: the page still links where it did.
                kids = db.edges.pending_row(i)
                if kids is None:
                    with db.snapshot() as txn:
                        kids = db.edges.out_links(txn, i).astype(np.int64)
                r.kept_links = True
            if r.late:
                # More links for a page read earlier: union with its row.
                old = db.edges.pending_row(i)
                if old is None:
                    with db.snapshot() as txn:
                        old = db.edges.out_links(txn, i)
                kids = np.union1d(old, kids).astype(np.int64)
                kids = kids[kids != i]
                db.edges.add(i, kids)
                v.n_out[i] = len(kids)
                db.touch(i)
                late_kids.append(kids)
                continue
            state = v.state[i]
            if state == LEASED:
                fr.lease_done(i)
            elif state == UNFETCHED:
                fr.discard(i)
            aopic.leave(i)
            same = v.host[kids] == v.host[i] if weighted and len(kids) else None
            aopic.read(i, kids, dropped, r.when, same_host=same, dropped_same_host=dropped_same)
            v.state[i] = CRAWLED
            v.n_crawls[i] += 1
            aopic.join(i)
            if not r.kept_links:
                db.edges.add(i, kids)
            reads.append(r)
            read_kids.append(kids)
        if reads:
            self._record_reads(reads, read_kids)
        touched = read_kids + late_kids
        if touched:
            kids = np.concatenate(touched)
            if len(kids):
                t = unique(kids)
                db.touch(t)
                fr.offer(t)

    def _record_reads(self, reads, kids_list):
        """Per-page fields of the pages read in this batch, and the depth,
        parent and hint their links imply."""
        v = self.db.vertices
        idx = np.fromiter((r.idx for r in reads), np.int64, len(reads))
        when = np.fromiter((r.when for r in reads), np.float64, len(reads))
        self.db.touch(idx)
        self._count("pages_crawled", len(reads))
        if self.recrawler is not None:
            self._record_revisits(reads, idx, when)
        v.errors[idx] = 0
        v.status[idx] = [r.status for r in reads]
        redirected = np.fromiter((r.redirect_to is not None for r in reads), bool, len(reads))
        v.flags[idx] = np.where(redirected, v.flags[idx] | F_REDIRECT, v.flags[idx] & (0xFF ^ F_REDIRECT))
        first = v.first_crawl[idx] == 0
        v.first_crawl[idx[first]] = when[first]
        v.last_crawl[idx] = when
        norm = F_NORM_HASH if self.recrawler is not None else 0
        for r in reads:
            if r.hash:
                i = r.idx
                if v.content_hash[i] and v.content_hash[i] != r.hash and (v.flags[i] & F_NORM_HASH) == norm:
                    v.n_changes[i] += 1
                v.content_hash[i] = r.hash
                v.flags[i] = (v.flags[i] & (0xFF ^ F_NORM_HASH)) | norm
            if r.score == r.score:  # not nan
                v.score[r.idx] = r.score
        # Out-degree, depth and parent from the rows just read.
        srcs, dsts = [], []
        for r, kids in zip(reads, kids_list):
            v.n_out[r.idx] = len(kids)
            if len(kids):
                srcs.append(np.full(len(kids), r.idx, np.int64))
                dsts.append(kids)
        if not dsts:
            return
        src = np.concatenate(srcs)
        dst = np.concatenate(dsts)
        cand = v.depth[src].astype(np.int64) + 1
        # Shortest candidate per target (ties: first link seen).
        order = np.lexsort((cand, dst))
        dst_o, cand_o, src_o = dst[order], cand[order], src[order]
        firsts = np.flatnonzero(np.r_[True, dst_o[1:] != dst_o[:-1]])
        d, c, p = dst_o[firsts], cand_o[firsts], src_o[firsts]
        better = v.depth[d] > c
        v.depth[d[better]] = c[better]
        v.parent[d[better]] = p[better]
        if self.settings.POLICY == "score":
            scores = v.score[src]
            ok = ~np.isnan(scores)
            if ok.any():
                np.maximum.at(v.hint, dst[ok], scores[ok])

    def _record_revisits(self, reads, idx, when):
        """Recrawl: visit history, change rates and refresh schedule of the
        pages read (before their fields are overwritten)."""
        v, db = self.db.vertices, self.db
        revisit = (v.n_crawls[idx] > 1).tolist()
        intervals = (when - v.last_crawl[idx]).tolist()
        # A 304 carries only some validators: keep the stored others.
        partial = [r.idx for r in reads if r.kept_links and r.validators and None in r.validators]
        with db.snapshot() as txn:
            stored = db.validators(partial, txn) if partial else {}
            changed = []
            for r, again, interval in zip(reads, revisit, intervals):
                i = r.idx
                ch = None  # unknown: not a usable observation
                if again and interval > 0:
                    old = int(v.status[i])
                    if r.kept_links:  # 304
                        ch = False
                    elif old and status_class(old) != status_class(r.status):
                        ch = True
                    elif r.hash and v.content_hash[i] and v.flags[i] & F_NORM_HASH:
                        ch = r.hash != int(v.content_hash[i])
                changed.append(ch)
                if r.validators is not None and any(r.validators):
                    old_v = stored.get(i, (None, None))
                    db.set_validators(i, *(new or kept for new, kept in zip(r.validators, old_v)))
                    v.flags[i] |= F_VALIDATORS
                v.flags[i] &= 0xFF ^ F_REFRESH
            self.recrawler.visited(reads, revisit, changed, intervals, txn)
        self._count("changes_detected", sum(1 for c in changed if c))
        self._count("not_modified", sum(1 for r in reads if r.kept_links))

    # -- reporting ---------------------------------------------------------------------------
    def stats(self):
        """Figures for logs and Scrapy's stats collector."""
        v = self.db.vertices
        a = self.aopic
        out = dict(self.counters)
        out.update(
            pages=v.n,
            hosts=len(self.db.host_names),
            queued=self.frontier.n_queued,
            leased=self.frontier.n_leased,
            waiting_retry=self.frontier.n_waiting,
            omega_cash=a.omega,
            history_total=a.G,
            error_bound=a.error_bound,
            ranking_version=self.ranks.version,
            ranking_pages=self.ranks.n,
        )
        if self.recrawler is not None:
            out["refresh_scheduled"] = len(self.recrawler.refresher)
        return out

    def importance(self, idx=None):
        """AOPIC importance estimate of pages ``idx`` (default all)."""
        return self.aopic.importance(idx)
