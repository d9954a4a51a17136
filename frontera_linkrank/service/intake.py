"""Applying the broker's log to the frontier core: every value checked
where it enters, nothing malformed gets further.

A log entry is a report or a seeds message (:mod:`.codec`). What is
refused, and how:

- an entry that is not a message of this schema (or, with
  ``LINKRANK_SECRET``, not sealed with it): refused whole, counted in
  ``bad_messages``;
- a report item with a field of the wrong type or range, a link or seed
  that is malformed or whose fingerprint is not its URL's key
  (:func:`expected_key`), a report of a lease from a process that neither
  holds it nor is a live spider of the crawl (``foreign_reports``): that
  item or link is refused, counted, and the rest of the entry goes on (the
  service publishes such a lease again if its feed entry was consumed);
- anything the core still raises on (a bug, not a message): counted in
  ``items_failed`` and logged with its traceback once, never fatal.

One WARNING line per entry names its stream id and the first reason (past
the first hundred, one in a thousand: a flood does not fill the disk); the
entry is kept in the broker's ``rejected`` stream (bounded) for
inspection, and acknowledged like any other: a poison entry is never read
again.
"""

from __future__ import annotations

import binascii
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..core.codec import FINGERPRINT_KEY, RETRIED_KEY, OutgoingRequest
from ..core.frontier_core import FrontierCore
from ..storage.identity import SECTION, key_for, key_scheme
from ..storage.urls import RejectedURL
from . import codec
from .leases import LeaseBook
from .transport import Transport

logger = logging.getLogger(__name__)

LOUD = 100  # refused entries logged at WARNING before only every thousandth is


def expected_key(scheme: str, req: Any) -> bytes:
    """The 20-byte page key of request ``req`` in a database whose keys
    follow ``scheme`` (:mod:`~frontera_linkrank.storage.identity`: the
    canonical URL's fingerprint, or method, URL and body). Raises
    :class:`~frontera_linkrank.storage.urls.RejectedURL`."""
    scrapy_meta = req.meta.get(b"scrapy_meta")
    verbatim = bool(isinstance(scrapy_meta, dict) and scrapy_meta.get("verbatim_url"))
    return key_for(scheme, req.url, req.method, req.body, verbatim)


class _Response:
    """What the core reads of a fetched page, rebuilt from a report."""

    __slots__ = ("url", "status_code", "headers", "body", "meta", "request")

    def __init__(self, url: str, status: int, headers: dict, request: OutgoingRequest) -> None:
        self.url = url
        self.status_code = status
        self.headers = headers
        self.body = b""  # spiders send the content hash, not the body
        self.request = request
        self.meta = request.meta


class Intake:
    """Applies log entries to ``core`` (see the module docstring).

    Parameters
    ----------
    core : FrontierCore
    book : LeaseBook
    transport : Transport
        Refused entries are set aside there.
    may_report : callable(spider, page) -> bool
        Whether ``spider`` holds the open lease of ``page``.
    key : bytes or None
        The crawl's sealing key (``LINKRANK_SECRET``).
    """

    def __init__(self, core: FrontierCore, book: LeaseBook, transport: Transport,
                 may_report: Callable[[str, int], bool], key: bytes | None = None) -> None:
        self.core = core
        self.book = book
        self.t = transport
        self.may_report = may_report
        self.key = key
        self.scheme = key_scheme(core.db.meta_section(SECTION))  # how the database keys its pages
        self.counters: Counter = Counter()
        self.progress: dict[str, int] = {}  # spider -> report items received (applied or not)
        self.fetched: Counter = Counter()  # spider -> reports applied
        self.applied: list[int] = []  # pages whose report was applied (the service counts them per partition)
        self.foreign: set[int] = set()  # pages whose open lease was reported as foreign (the service checks them)
        self._traced = False
        self._refused: list[str] = []  # reasons in the entry being applied

    def apply(self, offset: str, raw: Any) -> None:
        """Apply one log entry (uncommitted); never raises for its content."""
        self._refused = []
        try:
            msg = codec.read_log(raw, self.key)
        except codec.CodecError as e:
            self.counters["bad_messages"] += 1
            self._set_aside(offset, raw, str(e), whole=True)
            return
        try:
            if msg["t"] == "s":
                self._seeds(msg["i"])
            else:
                self._report(msg["s"], msg["i"])
        except Exception as e:  # noqa: BLE001 - a bug must not stop the crawl: counted, traced once
            self.counters["items_failed"] += 1
            logger.error("log entry %s: %s: %s", offset, type(e).__name__, e, exc_info=not self._traced)
            self._traced = True
            self._refused.append(f"{type(e).__name__}: {e}")
        if self._refused:
            self._set_aside(offset, raw, self._refused[0], whole=False)

    def _set_aside(self, offset: str, raw: Any, reason: str, whole: bool) -> None:
        n = len(self._refused)
        self.counters["entries_refused"] += 1
        seen = self.counters["entries_refused"]
        # One line an entry; past the first LOUD ones, every thousandth (a flood must not fill the disk).
        level = logging.WARNING if seen <= LOUD or seen % 1000 == 0 else logging.DEBUG
        more = f" ({seen} entries refused so far, the others logged at DEBUG)" if seen > LOUD else ""
        if whole:
            logger.log(level, "log entry %s refused: %s%s", offset, reason, more)
        else:
            logger.log(level, "log entry %s: %d item%s refused (first: %s); the rest applied%s", offset, n,
                       "" if n == 1 else "s", reason, more)
        try:
            self.t.set_aside(offset, raw if isinstance(raw, bytes) else None, reason)
        except Exception:  # noqa: BLE001 - keeping a copy is a courtesy, never a reason to stop
            logger.debug("could not set log entry %s aside", offset, exc_info=True)

    def _refuse(self, counter: str, reason: str) -> None:
        self.counters[counter] += 1
        self._refused.append(reason)

    # -- links and seeds ------------------------------------------------------------------
    def links(self, wire: Any) -> list:
        """Requests of the wire links ``wire`` that are well formed and whose
        fingerprint is their URL's key (checked for pages not known yet)."""
        out = []
        find = self.core.db.find
        for item in wire:
            try:
                req = codec.to_request(item)
            except codec.CodecError as e:
                self._refuse("bad_links", str(e))
                continue
            key = binascii.unhexlify(req.meta[FINGERPRINT_KEY])
            if find(key) is None:
                try:
                    ok = expected_key(self.scheme, req) == key
                except RejectedURL:
                    ok = True  # the core rejects the URL itself, with its reason
                if not ok:
                    self._refuse("bad_fingerprints", f"fingerprint of {req.url[:200]!r} is not its URL's")
                    continue
            out.append(req)
        return out

    def _seeds(self, wire: list) -> None:
        self.core.add_seeds(self.links(wire))
        self.counters["seed_messages"] += 1

    # -- reports ---------------------------------------------------------------------------
    def _report(self, spider: str, items: list) -> None:
        self.progress[spider] = self.progress.get(spider, 0) + len(items)
        for item in items:
            try:
                item = codec.check_item(item)
            except codec.CodecError as e:
                self._refuse("bad_items", str(e))
                continue
            self._item(spider, item)

    def _item(self, spider: str, item: dict) -> None:
        page = self.core.db.find(binascii.unhexlify(item["f"]))
        if page is not None and page in self.book.open and not self.may_report(spider, page):
            self._refuse("foreign_reports", f"spider {spider!r} reported a lease it does not hold")
            self.foreign.add(page)
            return
        if not self.book.close(page, item["l"]):
            self.counters["duplicate_reports"] += 1
            return
        self.counters["reports_applied"] += 1
        self.fetched[spider] += 1
        self.applied.append(page)
        fp = item["f"]
        if item["k"] == "e":
            meta: dict = {FINGERPRINT_KEY: fp, b"scrapy_meta": {}}
            if item.get("p"):
                meta[b"dont_retry"] = True
            if item.get("rt"):
                meta[RETRIED_KEY] = True  # the spider's Scrapy retried it already
            self.core.page_failed(OutgoingRequest(url=item["u"], meta=meta), item.get("e", "")[:1000])
            return
        chain = item.get("c") or []
        meta = {FINGERPRINT_KEY: fp, b"scrapy_meta": {}, b"content_hash": item.get("h", 0)}
        if chain:
            meta[b"redirect_urls"] = list(chain)
            meta[b"redirect_reasons"] = list(item.get("rr") or [])
        if "sc" in item:
            meta[b"score"] = item["sc"]
        request = OutgoingRequest(url=chain[0] if chain else item["u"], meta=meta)
        self.core.page_fetched(_Response(item["u"], item["s"], item.get("hd") or {}, request))
        links = self.links(item.get("ln") or ())
        if links:
            self.core.links_found(request, links)
