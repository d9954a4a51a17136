"""Batch application: what the crawler reported, applied at once.

``record_response`` / ``record_links`` only note what happened; ``apply``
resolves every link of the batch to a page (creating new pages), reads the
fetched pages in order (AOPIC moves their cash to their links, through
:class:`~frontera_linkrank.scheduling.lifecycle.PageLifecycle`), then does
the batch-level bookkeeping (depths, parents, hints, revisits) vectorised,
and offers the pages whose keys rose to the frontier. The crawl policy
and the recrawler see each applied batch through their ``on_batch``
(:class:`~frontera_linkrank.scheduling.policies.Batch`) and keep their
own state.
"""

from __future__ import annotations

import binascii
import hashlib
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..numeric import unique
from ..scheduling.lifecycle import PageLifecycle
from ..scheduling.policies import Batch, Policy
from ..storage.pagedb import PageDB
from ..storage.urls import RejectedURL, check_url
from ..storage.vertices import CRAWLED, F_CRAWLED, F_NORM_HASH, F_REDIRECT, F_SEED, MAX_DEPTH
from .codec import CONTENT_HASH_KEY, FINGERPRINT_KEY, SCORE_KEY, OutgoingRequest, may_have_parts
from .counters import Counters
from .inputs import as_float, body_bytes, content_hash_of, int_list, url_list, url_text
from .pages import PageRegistry

if TYPE_CHECKING:
    from ..recrawl.recrawler import Recrawler


class PendingRead:
    """A fetched page waiting for its AOPIC read when the batch is applied."""

    __slots__ = ("idx", "status", "when", "score", "hash", "keys", "urls", "extra", "late", "redirect_to", "validators",
                 "kept_links")

    def __init__(self, idx: int, status: int, when: float, score: float = math.nan, content_hash: int = 0,
                 late: bool = False) -> None:
        self.idx = idx
        self.status = status
        self.when = when
        self.score = score
        self.hash = content_hash
        # The links, kept as their page keys (None: a rejected URL) and
        # URLs; a link with more to it than a plain GET is kept whole in
        # ``extra`` (by position). The crawler's request objects are not
        # held until the batch is applied.
        self.keys: list[bytes | None] = []
        self.urls: list[Any] = []
        self.extra: dict[int, Any] | None = None
        self.late = late  # links for a page already read: store them, move no cash
        self.redirect_to = None  # page index this one redirected to
        self.validators = None  # (etag, last_modified) to store (recrawl)
        self.kept_links = False  # 304: the page keeps its stored out-links


class BatchApplier:
    """The pending batch and how it is applied (see the module docstring).

    Parameters
    ----------
    db : PageDB
    registry : PageRegistry
    lifecycle : PageLifecycle
    policy : Policy
        The crawl policy: told of each batch (:meth:`Policy.on_batch`);
        whether crawled pages pass content scores on.
    counters : Counters
    recrawler : Recrawler or None
        Refresh bookkeeping (``LINKRANK_RECRAWL``).
    max_pages_per_host, max_links_per_page, max_url_length : int
        ``LINKRANK_MAX_PAGES_PER_HOST``, ``_MAX_LINKS_PER_PAGE``, ``_MAX_URL_LENGTH``.
    """

    def __init__(self, db: PageDB, registry: PageRegistry, lifecycle: PageLifecycle, policy: Policy,
                 counters: Counters, recrawler: Recrawler | None, max_pages_per_host: int,
                 max_links_per_page: int, max_url_length: int) -> None:
        self.db = db
        self.registry = registry
        self.lifecycle = lifecycle
        self.aopic = lifecycle.aopic
        self.frontier = lifecycle.frontier
        self.policy = policy
        self.counters = counters
        self.recrawler = recrawler
        self.max_pages_per_host = max_pages_per_host
        self.max_links_per_page = max_links_per_page
        self.max_url_length = max_url_length
        self.pending: list[PendingRead] = []
        self.pending_by_idx: dict[int, PendingRead] = {}
        self.links_stored = 0  # stored out-links added (less those replaced) since the core last took it

    def __len__(self) -> int:
        return len(self.pending)

    # -- recording ------------------------------------------------------------------------
    def record_response(self, response: Any, now: float) -> None:
        """Record a fetched page (any status) to be read at the next
        :meth:`apply`; its links may follow in :meth:`record_links`.

        After redirects every URL of the chain is marked crawled (with its
        3xx status from ``meta[b'redirect_reasons']``) and linked to the
        next; the final page gets the response. Both conventions are
        understood: Scrapy's (``redirect_urls`` lists the URLs before the
        response's URL) and Frontera's canonical solver's (the response is
        renamed to the first URL and the final one appended to the list).
        """
        meta = response.meta
        if url_text(response.url) is None:
            self.registry.reject(RejectedURL("malformed", repr(response.url)), "response")
            return
        chain = self._redirect_chain(response)
        if chain is None:
            try:
                key = self.registry.key_of(response)
            except RejectedURL as e:
                self.registry.reject(e, "response")
                return
            i = self.registry.page(response.url, key)
            hops = ()
        else:
            i, hops = chain
        if i is None:
            return
        score = meta.get(SCORE_KEY, math.nan)
        score = as_float(score)
        if score is None:
            self.counters.add("invalid_scores")
            score = math.nan
        status = response.status_code  # checked by the core (inputs.http_status)
        content_hash = content_hash_of(meta.get(CONTENT_HASH_KEY)) if 200 <= status < 300 else 0
        body = body_bytes(response.body)
        found = None
        if self.recrawler is not None:
            # Normalised, so a timestamp or session id is not a change
            # (costs a few ms a page: only when pages are refreshed).
            hashed, found = self.recrawler.response_fields(response.headers, status, body)
            content_hash = hashed or content_hash
        elif body and 200 <= status < 300:
            content_hash = int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little") or 1
        r = PendingRead(i, status, now, score, content_hash)
        r.validators = found
        for src, dst, code in hops:
            hop = PendingRead(src, code, now)
            hop.redirect_to = dst
            self.pending.append(hop)
            self.pending_by_idx[src] = r  # links sent for the first URL go to the final page
        self.pending.append(r)
        self.pending_by_idx[i] = r

    def _redirect_chain(self, response: Any) -> tuple | None:
        """``(final page, hops)`` of a redirected response, or None if it
        was not redirected. Each hop is ``(page, next page, 3xx status)``."""
        meta = response.meta
        urls = url_list(meta.get(b"redirect_urls"))
        request = response.request
        if not urls:
            if request is None or request.url == response.url or url_text(request.url) is None:
                return None
            urls = [url_text(request.url)]  # redirected without Scrapy's meta
        if url_text(response.url) not in urls:
            urls.append(url_text(response.url))
        reasons = int_list(meta.get(b"redirect_reasons"))
        pages = []
        for url in urls:
            j = self.registry.find_or_create(OutgoingRequest(url=url))
            if j is not None and (not pages or pages[-1] != j):
                pages.append(j)
        if not pages:
            return None, ()
        final = pages[-1]
        hops = []
        for k, (a, b) in enumerate(zip(pages, pages[1:])):
            code = reasons[k] if k < len(reasons) else 302
            hops.append((a, b, code if isinstance(code, int) and 300 <= code < 400 else 302))
        v, cold = self.db.vertices, self.db.cold
        if hops and v.state[final] != CRAWLED and not (v.flags[final] & F_SEED):
            v.depth[final] = v.depth[pages[0]]
            cold.set1("parent", final, cold.get1("parent", pages[0]))
        return final, hops

    def record_links(self, request: Any, links: list, now: float) -> None:
        """Record the out-links of a fetched page (resolved at the next :meth:`apply`)."""
        try:
            key = self.registry.key_of(request)
        except RejectedURL as e:
            self.registry.reject(e, "source")
            return
        i = self.db.find(key)
        r = self.pending_by_idx.get(i) if i is not None else None
        if r is None:
            # Links of a page crawled outside this batch (or never handed
            # out): keep them, but no cash moves.
            i = self.registry.find_or_create(request, depth=0)
            if i is None:
                return
            r = PendingRead(i, 0, now, late=True)
            self.pending.append(r)
            self.pending_by_idx[i] = r
            self.counters.add("late_links", len(links))
        keys, urls = r.keys, r.urls
        base = len(keys)
        unhex = binascii.unhexlify
        for k, link in enumerate(links):
            fp = link.meta.get(FINGERPRINT_KEY)
            try:
                key = unhex(fp)
                if len(key) != 20:
                    raise ValueError
            except (TypeError, ValueError):
                try:
                    key = self.registry.key_of(link)
                except RejectedURL as e:
                    self.registry.reject(e, "link")
                    key = None
            keys.append(key)
            urls.append(link.url)
            if may_have_parts(link):
                if r.extra is None:
                    r.extra = {}
                r.extra[base + k] = link

    # -- applying -------------------------------------------------------------------------
    def apply(self) -> None:
        """Apply the pending reads: resolve links, read pages, queue children."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        self.pending_by_idx = {}
        resolved = self.resolve(pending)
        self.read_pages(pending, resolved)

    def _known(self, pending: list[PendingRead]) -> dict:
        """The known pages among the links' keys (looked up at once: one
        index read for the batch); the cold records of the pages read are
        loaded with it."""
        wanted: dict[bytes | None, None] = {}
        for r in pending:
            wanted.update(dict.fromkeys(r.keys))
        wanted.pop(None, None)
        found = list(wanted)
        known = {k: i for k, i in zip(found, self.db.find_many(found)) if i is not None}
        self.db.cold.preload(np.fromiter((r.idx for r in pending), np.int64, len(pending)))
        return known

    def resolve(self, pending: list[PendingRead]) -> list:  # long: one pass per link, inline for speed
        """Map each pending page's links to page indices, creating new pages.

        Returns, per pending read, ``(children, n_dropped, hints,
        n_dropped_same_host)``: distinct targets in link order without
        self-links, valid links dropped after counting (host budget,
        per-page cap; their shares go to ω), ``(page, score)`` hints, and
        how many dropped links were on the page's own host.
        This loop runs once per link: keep it lean.
        """
        db, v = self.db, self.db.vertices
        index_get = self._known(pending).get
        cold = db.cold
        budget = self.max_pages_per_host
        cap = self.max_links_per_page
        max_len = self.max_url_length
        host_known = self.registry.host_known
        weighted = self.aopic.weighted
        new_key, new_url, new_host, new_depth, new_parent, new_req = [], [], [], [], [], []
        batch_new = {}
        batch_get = batch_new.get
        batch_hosts: dict[str, int] = {}  # the batch's hosts: most links to new pages stay on a few
        next_idx = v.n
        out = []
        n_links = n_self = n_dup = n_over = 0
        for r in pending:
            keys = r.keys
            if not keys:
                out.append(None)
                continue
            urls, extra = r.urls, r.extra
            src = r.idx
            own = cold.get1("fp", src)
            depth = min(int(v.depth[src]) + 1, MAX_DEPTH)
            src_host = int(v.host[src])
            seen = {own}
            kids = []
            hints = None
            dropped = dropped_same = 0
            n_links += len(keys)
            for pos, key in enumerate(keys):
                if key is None:
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
                    url = urls[pos]
                    try:
                        host = check_url(url, max_len)
                    except RejectedURL as e:
                        self.registry.reject(e, "link")
                        continue
                    if type(url) is not str:
                        url = url.decode("utf-8")  # bytes check_url could decode: stored as text
                    hid = batch_hosts.get(host)
                    if hid is None:
                        hid = batch_hosts[host] = self.registry.host(host)  # one lookup, adding a new host
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
                    new_req.append(extra.get(pos) if extra else None)
                    kids.append(j)
                    continue
                if cap and len(kids) >= cap:
                    dropped += 1
                    if weighted:
                        h = new_host[j - v.n] if j >= v.n else int(v.host[j])
                        dropped_same += h == src_host
                    continue
                kids.append(j)
                if extra:
                    link = extra.get(pos)
                    hint = link.meta.get(SCORE_KEY) if link is not None else None
                    if hint is not None:
                        hints = hints or []
                        hints.append((j, hint))
            n_over += dropped
            out.append((kids, dropped, hints, dropped_same))
        if new_key:
            start = self.registry.new_pages(new_key, new_url, new_host, new_depth, new_parent, new_req)
            assert start + len(new_key) == next_idx
        self.counters.add("links", n_links)
        self.counters.add("self_links", n_self)
        self.counters.add("duplicate_links", n_dup)
        self.counters.add("links_dropped", n_over)
        return out

    def read_pages(self, pending: list[PendingRead], resolved: list) -> None:
        """AOPIC reads of the pending pages, in order, then the batch-level
        bookkeeping (fields, depths, queue) in vectorised form."""
        v, db = self.db.vertices, self.db
        weighted = self.aopic.weighted
        empty = np.zeros(0, np.int64)
        reads, read_kids, late_kids, late = [], [], [], []
        for r, res in zip(pending, resolved):
            i = r.idx
            if res is None:
                kids, dropped, dropped_same = empty, 0, 0
            else:
                kids = np.array(res[0], np.int64)
                dropped, dropped_same = res[1], res[3]
                if res[2]:
                    for j, hint in res[2]:
                        self.registry.set_hint(j, hint)
            if r.redirect_to is not None:
                kids = np.array([r.redirect_to], np.int64)
            if r.status == 304 and v.flags[i] & F_CRAWLED and not r.late:
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
                self.links_stored += len(kids) - db.cold.get1("n_out", i)
                db.cold.set1("n_out", i, len(kids))
                db.touch(i)
                late.append(i)
                late_kids.append(kids)
                continue
            same = v.host[kids] == v.host[i] if weighted and len(kids) else None
            self.lifecycle.crawled(i, kids, dropped, r.when, same, dropped_same)
            if not r.kept_links:
                db.edges.add(i, kids)
            reads.append(r)
            read_kids.append(kids)
        batch = Batch(np.fromiter((r.idx for r in reads), np.int64, len(reads)), read_kids,
                      np.asarray(late, np.int64), late_kids, reads)
        if reads:
            self._record_reads(batch)
        self._offer(batch)

    def _offer(self, batch: Batch) -> None:
        """Offer the queue the pages whose keys may have risen: the links'
        targets (their cash changed) and what the policy says rose."""
        offered = []
        touched = batch.rows + batch.late_rows
        if touched:
            kids = np.concatenate(touched)
            if len(kids):
                offered.append(unique(kids))
                self.db.touch(offered[0])  # their cash changed
        raised = self.policy.on_batch(batch)
        if raised is not None and len(raised):
            offered.append(np.asarray(raised, np.int64))
        if len(offered) > 1:
            offered = [unique(np.concatenate(offered))]
        if offered and len(offered[0]):
            self.frontier.offer(offered[0])

    def _record_reads(self, batch: Batch) -> None:
        """Per-page fields of the pages read in this batch, and the depth,
        parent and hint their links imply (the recrawler records the
        visits first, from the fields as they were)."""
        v, cold = self.db.vertices, self.db.cold
        reads, kids_list, idx = batch.reads, batch.rows, batch.pages
        when = np.fromiter((r.when for r in reads), np.float64, len(reads))
        self.counters.add("pages_crawled", len(reads))
        if self.recrawler is not None:
            self.recrawler.on_batch(batch)
        cold.set("errors", idx, 0)
        cold.set("status", idx, [r.status for r in reads])
        redirected = np.fromiter((r.redirect_to is not None for r in reads), bool, len(reads))
        v.flags[idx] = np.where(redirected, v.flags[idx] | F_REDIRECT, v.flags[idx] & (0xFF ^ F_REDIRECT))
        first = cold.get("first_crawl", idx) == 0
        cold.set("first_crawl", idx[first], when[first])
        cold.set("last_crawl", idx, when)
        norm = F_NORM_HASH if self.recrawler is not None else 0
        for r in reads:
            if r.hash:
                i = r.idx
                old = cold.get1("content_hash", i)
                if old and old != r.hash and (v.flags[i] & F_NORM_HASH) == norm:
                    cold.set1("n_changes", i, cold.get1("n_changes", i) + 1)
                cold.set1("content_hash", i, r.hash)
                v.flags[i] = (v.flags[i] & (0xFF ^ F_NORM_HASH)) | norm
            if r.score == r.score:  # not nan
                cold.set1("score", r.idx, r.score)
        # Out-degree, depth and parent from the rows just read.
        n_out = np.fromiter((len(k) for k in kids_list), np.int64, len(kids_list))
        self.links_stored += int(n_out.sum() - cold.get("n_out", idx).astype(np.int64).sum())
        cold.set("n_out", idx, n_out)
        srcs, dsts = [], []
        for r, kids in zip(reads, kids_list):
            if len(kids):
                srcs.append(np.full(len(kids), r.idx, np.int64))
                dsts.append(kids)
        if not dsts:
            return
        src = np.concatenate(srcs)
        dst = np.concatenate(dsts)
        cand = np.minimum(v.depth[src].astype(np.int64) + 1, MAX_DEPTH)
        # Shortest candidate per target (ties: first link seen).
        order = np.lexsort((cand, dst))
        dst_o, cand_o, src_o = dst[order], cand[order], src[order]
        firsts = np.flatnonzero(np.r_[True, dst_o[1:] != dst_o[:-1]])
        d, c, p = dst_o[firsts], cand_o[firsts], src_o[firsts]
        better = v.depth[d] > c
        if better.any():
            v.depth[d[better]] = c[better]
            cold.set("parent", d[better], p[better])
        if self.policy.uses_hints:
            scores = cold.get("score", src)
            ok = ~np.isnan(scores)
            if ok.any():
                np.maximum.at(v.hint, dst[ok], scores[ok].astype(v.hint.dtype))
