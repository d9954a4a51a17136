"""The page registry: requests to pages (by fingerprint), new pages, hosts,
hints and rejected URLs."""

from __future__ import annotations

import logging
import math
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..scheduling.lifecycle import PageLifecycle
from ..scheduling.priority import Priorities
from ..scoring.aopic import Aopic
from ..storage.packed import Unencodable, Unreadable
from ..storage.pagedb import PageDB
from ..storage.urls import RejectedURL, check_url, fingerprint, fingerprint_key
from ..storage.vertices import F_EXTRAS, MAX_DEPTH, NO_PAGE
from .codec import (
    FINGERPRINT_KEY,
    SCORE_KEY,
    UNSTORED_KEY,
    Parts,
    RequestLike,
    malformed_parts,
    may_have_parts,
    request_parts,
    storable_parts,
)
from .counters import Counters
from .inputs import as_float, url_text

logger = logging.getLogger(__name__)


class PageRegistry:
    """Find or create the page of a request.

    Parameters
    ----------
    db : PageDB
    aopic : Aopic
        New hosts of the ``hosts`` target set are marked in its books.
    lifecycle : PageLifecycle
        New pages enter the books through :meth:`PageLifecycle.created`.
    counters : Counters
    max_url_length, log_rejected : int
        ``LINKRANK_MAX_URL_LENGTH`` and ``LINKRANK_LOG_REJECTED``.
    omega_hosts : list of str
        ``LINKRANK_OMEGA_HOSTS``.
    priorities : Priorities, optional
        Gets the priority of each new page's request (its queue level).
    """

    def __init__(self, db: PageDB, aopic: Aopic, lifecycle: PageLifecycle, counters: Counters,
                 max_url_length: int, log_rejected: int, omega_hosts: Sequence[str],
                 priorities: Priorities | None = None) -> None:
        self.db = db
        self.aopic = aopic
        self.lifecycle = lifecycle
        self.counters = counters
        self.max_url_length = max_url_length
        self.log_rejected = log_rejected
        self.omega_hosts = omega_hosts
        self.priorities = priorities  # new pages' request priorities (a queue level each)
        v = db.vertices
        # Known pages per host (the host budget LINKRANK_MAX_PAGES_PER_HOST): 8 bytes a host, no object.
        known = np.bincount(v.host[: v.n], minlength=len(db.host_names)).astype(np.int64)
        self.host_known = array("q", known.tobytes())
        self._rejected_logged: dict[str, int] = {}
        # page -> the full parts of a request that could not all be stored:
        # handed out as they came in this run, until the page is fetched.
        self.unstored: dict[int, Parts] = {}
        self._unstored_logged: set[str] = set()

    # -- hosts ------------------------------------------------------------------------------
    def host(self, name: str) -> int:
        """Host id of ``name``, registering new hosts with AOPIC."""
        hid = self.db.host_id(name)
        if hid >= len(self.host_known):  # new: ids are given in order
            self.host_known.extend([0] * (hid + 1 - len(self.host_known)))
            if self.aopic.policy == "hosts" and name in self.omega_hosts:
                self.aopic.set_host_target(hid, True)
        return hid

    # -- rejected URLs ------------------------------------------------------------------------
    def reject(self, exc: Exception, where: str) -> None:
        """Count and log (the first ``log_rejected`` of a reason at WARNING)
        a URL that cannot be a page."""
        reason = exc.reason if isinstance(exc, RejectedURL) else "malformed"
        self.counters.add("rejected_" + reason)
        seen = self._rejected_logged.get(reason, 0)
        self._rejected_logged[reason] = seen + 1
        level = logging.WARNING if seen < self.log_rejected else logging.DEBUG
        logger.log(level, "rejected %s URL (%s): %s", where, reason, exc)

    # -- pages ----------------------------------------------------------------------------------
    @staticmethod
    def key_of(req: RequestLike) -> bytes:
        """20-byte page key of a request (computed if the meta lacks it)."""
        fp = req.meta.get(FINGERPRINT_KEY)
        if not isinstance(fp, (bytes, str)):
            return fingerprint(req.url)
        return fingerprint_key(fp)

    def find(self, req: RequestLike) -> int | None:
        """Index of the page of ``req``, or None (unknown or rejected URL)."""
        try:
            return self.db.find(self.key_of(req))
        except RejectedURL:
            return None

    def find_or_create(self, req: RequestLike, depth: int = 0, parent: int = NO_PAGE, flags: int = 0) -> int | None:
        """Index of the page of request ``req``, creating it if new; None if
        its URL is rejected."""
        try:
            key = self.key_of(req)
        except RejectedURL as e:
            self.reject(e, "request")
            return None
        return self.page(req.url, key, req, depth, parent, flags)

    def page(self, url: str, key: bytes, req: RequestLike | None = None, depth: int = 0, parent: int = NO_PAGE,
             flags: int = 0) -> int | None:
        """Index of the page ``key``, creating (and queueing) it if new."""
        i = self.db.find(key)
        if i is not None:
            return i
        try:
            host = check_url(url, self.max_url_length)
        except RejectedURL as e:
            self.reject(e, "request")
            return None
        url = url_text(url)  # check_url accepted it: bytes become text
        hid = self.host(host)
        self.host_known[hid] += 1
        i = self.new_pages([key], [url], [hid], depth, parent, [req] if req is not None else [], flags)
        self.lifecycle.frontier.offer([i])
        return i

    def new_pages(self, fps: list[bytes], urls: list[str], hosts: list[int], depth: Any, parents: Any,
                  reqs: Sequence[RequestLike | None], flags: int = 0) -> int:
        """Append pages (``depth``/``parents`` arrays or scalars) with their
        requests' stored parts and hints; returns the first new index."""
        db, v = self.db, self.db.vertices
        start = db.add_pages(fps, urls, hosts, parents)
        k = len(fps)
        sl = slice(start, start + k)
        v.depth[sl] = np.minimum(depth, MAX_DEPTH)
        if flags:
            v.flags[sl] = flags
        for j, req in enumerate(reqs):
            # None: a plain GET link (BatchApplier.record_links), which has
            # nothing to store and no hint, like any request without parts.
            if req is None or not may_have_parts(req):
                continue
            if self.priorities is not None:
                self.priorities.note(start + j, req.meta)
            parts = request_parts(req)
            if parts is not None:
                self.store_parts(start + j, parts, req.url)
                v.flags[start + j] |= F_EXTRAS
            hint = req.meta.get(SCORE_KEY)
            if hint is not None:
                self.set_hint(start + j, hint)
        self.lifecycle.created(start, k)
        return start

    def store_parts(self, i: int, parts: Parts, url: str) -> None:
        """Store the request parts of new page ``i``; parts that cannot be
        stored are left out and the whole request is kept in memory (a
        warning names each kind of part left out, once). Parts of the wrong
        type (a header map that is a number) are left out too, and listed,
        so that the request is refused when it is handed out."""
        malformed = malformed_parts(parts)
        if malformed:
            self._malformed(i, parts, malformed, url)
            return
        try:
            self.db.set_request_extras(i, parts)
            return
        except Unencodable:
            pass
        stored, missing = storable_parts(parts)
        self.db.set_request_extras(i, stored)
        self.unstored[i] = parts
        self.counters.add("requests_unstored")
        new = [m for m in missing if m not in self._unstored_logged]
        if new:
            self._unstored_logged.update(new)
            logger.warning(
                "%s: request %s cannot be stored in the page database (not plain data): the request is kept "
                "in memory and handed out as it came in this run only (logged once per name)",
                url, ", ".join(new),
            )

    def _malformed(self, i: int, parts: Parts, names: list[str], url: str) -> None:
        if names == ["parts"]:
            parts, names = (b"GET", None, None, {}, b""), ["parts"]
        else:
            parts = tuple(d if n in names else x for x, d, n in zip(
                parts, (b"GET", None, None, {}, b""), ("method", "headers", "cookies", "meta", "body")))
        stored, _ = storable_parts(parts)
        stored[3][UNSTORED_KEY] = [f"malformed {n}" for n in names] + list(stored[3].get(UNSTORED_KEY, ()))
        self.db.set_request_extras(i, stored)
        self.counters.add("requests_malformed")
        if self.counters.get("requests_malformed", 0) <= self.log_rejected:
            logger.warning("%.200s: request %s malformed (wrong type): stored without, the request is refused "
                           "when handed out", url, ", ".join(names))

    def usable_parts(self, pages: list[int], urls: list, parts: dict[int, Any]) -> tuple[list[int], list]:
        """The leased ``pages`` (and their ``urls``) that can be handed out
        with ``parts`` (their stored parts, updated in place with those
        kept in memory). A page whose stored parts do not decode (a damaged
        or crafted database) is given up with the reason as its error."""
        memory = self.unstored
        if memory:
            parts.update((p, memory[p]) for p in pages if p in memory)
        bad = {p: e if isinstance(e, Unreadable) else Unreadable("malformed " + ", ".join(malformed_parts(e)))
               for p, e in parts.items() if isinstance(e, Unreadable) or malformed_parts(e)}
        if not bad:
            return pages, urls
        for p, url in zip(pages, urls):
            if p in bad:
                message = f"stored request unreadable ({bad[p]}): not fetched"
                logger.warning("%s: %s", url, message)
                self.db.set_error(p, message)
                self.lifecycle.give_up(p)
                self.counters.add("requests_unreadable")
        keep = [k for k, p in enumerate(pages) if p not in bad]
        return [pages[k] for k in keep], [urls[k] for k in keep]

    def set_hint(self, i: int, value: Any) -> None:
        """Raise page ``i``'s hint (content score of the links to it) to ``value``."""
        value = as_float(value)
        if value is None:
            self.counters.add("invalid_scores")
            return
        if math.isfinite(value) and value > self.db.vertices.hint[i]:
            self.db.vertices.hint[i] = value
