"""The frontier service: one process owning the page database, serving
spiders through a broker (``frontera-linkrank serve-frontier``).

One loop, one thread (ranking keeps its own background thread, as in a
single-process crawl):

1. **read** the log (reports and seeds), apply each report once
   (:class:`~.leases.LeaseBook`);
2. **coordinate**: live spiders from their heartbeats, the partition
   assignment (:func:`~.assignment.plan`);
3. **refill**: lease the best pages of the hosts whose owner has room
   (at most its prefetch outstanding, at most
   ``LINKRANK_MAX_REQUESTS_PER_HOST`` per host); one commit holds the
   round's reports, log offset and leases; then the log entries are
   acknowledged and the leases published;
4. **republish** at start and whenever the broker's epoch changes: every
   open lease whose sequence is above its partition's last entry;
5. **state**: ``running`` or ``finished`` (nothing queued, nothing leased,
   the log drained) with the core's stats, for spiders and
   ``frontier-status``.
"""

from __future__ import annotations

import binascii
import logging
import os
import threading
import time
from collections import Counter
from typing import Any

import numpy as np

from ..core.codec import FINGERPRINT_KEY, RETRIED_KEY, OutgoingRequest
from ..core.frontier_core import FrontierCore
from . import codec
from .assignment import partition_of, plan
from .leases import LeaseBook
from .transport import Transport, offset_key

logger = logging.getLogger(__name__)

FAULT_ENV = "FRONTERA_LINKRANK_FAULT"  # "after_lease_commit": exit between committing leases and publishing (tests)
READ_BATCH = 500  # log entries per read (each a batch of reports)


class FrontierStopped(Exception):
    """The frontier core stopped (a commit could not be written): serving ends."""


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


class FrontierService:
    """Serve ``core`` to spiders over ``transport`` (see the module docstring).

    Parameters
    ----------
    core : FrontierCore
        Opened with ``keep_leases=True``.
    transport : Transport
    partitions : int
        Feed partitions (hosts are spread over them).
    heartbeat_timeout : float
        A spider silent this long is dead: its partitions go to others.
    """

    def __init__(self, core: FrontierCore, transport: Transport, partitions: int = 64,
                 heartbeat_timeout: float = 10.0) -> None:
        self.core = core
        self.t = transport
        self.P = partitions
        self.heartbeat_timeout = heartbeat_timeout
        self.book = LeaseBook(core.db, partitions)
        self.counters: Counter = Counter()
        self.host_cap = core.settings.MAX_REQUESTS_PER_HOST or 16
        self.fault = os.environ.get(FAULT_ENV)
        self.error: Exception | None = None  # what stopped the frontier, if something did
        self._host_part: list[int] = []
        self._issued: list = []
        self._issued_requests: list = []  # committed this round, published after the log's acknowledgement
        core.on_leased = self._leased
        self.owners: list[str | None] = [None] * partitions
        self.moving: dict[int, str] = {}
        self.paused_until: dict[int, float] = {}
        self.version = 0
        self._first_seen: float | None = None
        self.live: dict[str, dict] = {}
        self.epoch: str | None = None
        self._pending_phase = True  # after a start: our own unacknowledged log entries first
        self._drained = False
        self._recover = False  # a broker error interrupted a round: republish before the next
        self._next = {"coordinate": 0.0, "state": 0.0, "expire": 0.0, "trim": 0.0, "epoch": 0.0}
        self._rate = (time.monotonic(), 0)

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        """Set up the broker, record leases the database holds without a
        record, republish what the broker lacks, restore the assignment."""
        self.t.setup(self.P)
        self.epoch = self.t.epoch()
        if self.book.unrecorded:
            pages = self.book.unrecorded
            self.book.issue(pages, [self._partition_of_page(i) for i in pages])
            self.book.unrecorded = []
            self.core.next_requests(0)  # commit the records
        saved = self.t.get("assignment")
        if saved and len(saved.get("owners", ())) == self.P:
            self.owners = list(saved["owners"])
            self.moving = {int(p): t for p, t in (saved.get("moving") or {}).items()}
            self.version = int(saved.get("version", 0))
        self.t.put("assignment", self._assignment_record())
        self.republish()
        self._coordinate(time.monotonic())

    def republish(self) -> int:
        """Publish every open lease the broker lacks (after a crash or a broker restart)."""
        parts = sorted({x.partition for x in self.book.open.values()})
        tops = {p: self.t.published_top(p) for p in parts}
        missing = self.book.unpublished(tops)
        if missing:
            n = self._publish(missing, self.core.requests([x.page for x in missing]))
            self.counters["leases_republished"] += n
            logger.info("%d leases republished (the broker did not have them)", n)
            return n
        return 0

    # -- the loop ------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set; then commit and publish the final state."""
        self.start()
        logger.info("serving %s: %d partitions, %d open leases, log applied through %s", self.core.settings.PATH,
                    self.P, len(self.book.open), self.book.log_offset)
        try:
            self._serve(stop)
        except FrontierStopped as e:
            # A commit failed (disk full): what it held stays unacknowledged
            # in the broker and is applied by the next run on this database.
            self.error = e.args[0]
            self._publish_state(time.monotonic(), "stopped")
            return
        self.core.next_requests(0)
        self._publish_state(time.monotonic(), "stopped")

    def _serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self._recover:
                    self.republish()  # what was committed but not published while the broker was away
                    self._recover = False
                self.step()
            except self.t.unavailable as e:
                # Everything applied is committed before it is acknowledged:
                # wait, then re-read what is unacknowledged and republish.
                self.counters["broker_errors"] += 1
                logger.warning("broker unavailable (%s: %s): retrying", type(e).__name__, e)
                self._pending_phase = self._recover = True
                stop.wait(1.0)

    def step(self) -> int:
        """One round of the loop; returns the log entries applied."""
        now = time.monotonic()
        if now >= self._next["epoch"]:
            self._next["epoch"] = now + 1.0
            self._check_epoch()
        done = self._read(block_ms=0 if self._pending_phase else 20)
        if now >= self._next["coordinate"]:
            self._next["coordinate"] = now + 0.25
            self._coordinate(now)
        if now >= self._next["expire"]:
            self._next["expire"] = now + 1.0
            self.counters["leases_expired"] += self.book.drop_expired()
        # One commit a round (there were two): the reports applied, the log
        # offset and the new leases together.
        if not self._refill(now) and done:
            self.core.next_requests(0)
        self._check_stopped()  # not committed: the entries stay unacknowledged
        self.t.ack_log(done)
        leases, requests, self._issued_requests = self._issued, self._issued_requests, []
        if requests:
            self._publish(leases, requests)
        if now >= self._next["trim"]:
            self._next["trim"] = now + 5.0
            self._trim()
        if now >= self._next["state"]:
            self._next["state"] = now + 0.5
            self._publish_state(now)
        return len(done)

    def _check_epoch(self) -> None:
        epoch = self.t.epoch()
        if epoch != self.epoch:
            logger.warning("the broker restarted (epoch %s -> %s): recreating groups, republishing leases",
                           self.epoch, epoch)
            self.epoch = epoch
            self.counters["broker_restarts"] += 1
            self.t.setup(self.P)
            self.t.put("assignment", self._assignment_record())
            self.republish()

    # -- reading the log ---------------------------------------------------------------------
    def _read(self, block_ms: int) -> list[str]:
        """Apply what the log holds (uncommitted); returns the offsets read,
        to acknowledge after the round's commit."""
        entries = self.t.read_log(READ_BATCH, block_ms, pending=self._pending_phase)
        if not entries:
            if self._pending_phase:
                self._pending_phase = False
            else:
                self._drained = True
            return []
        self._drained = False
        done = []
        for offset, raw in entries:
            if self._pending_phase and offset_key(offset) <= offset_key(self.book.log_offset):
                self.counters["log_entries_skipped"] += 1  # applied and committed before a crash
            elif raw is not None:
                self._apply_entry(offset, raw)
            done.append(offset)
            if offset_key(offset) > offset_key(self.book.log_offset):
                self.book.log_offset = offset
        return done

    def _trim(self) -> None:
        """Forget applied log entries and feed entries of closed leases (Redis memory stays bounded)."""
        if self.book.log_offset:
            self.t.trim_log(self.book.log_offset)
        for p, low in self._feed_lows().items():
            self.t.trim_feed(p, low)

    def _check_stopped(self) -> None:
        if self.core.stopped is not None:
            raise FrontierStopped(self.core.stopped)

    def _apply_entry(self, offset: str, raw: bytes) -> None:
        try:
            msg = codec.read_log(raw)
        except codec.CodecError as e:
            self.counters["bad_messages"] += 1
            logger.warning("log entry %s ignored: %s", offset, e)
            return
        if msg["t"] == "s":
            seeds = []
            for item in msg["i"]:
                try:
                    seeds.append(codec.to_request(item))
                except codec.CodecError as e:
                    self.counters["bad_messages"] += 1
                    logger.warning("a seed in log entry %s ignored: %s", offset, e)
            self.core.add_seeds(seeds)
            self.counters["seed_messages"] += 1
            return
        for item in msg["i"]:
            try:
                self._apply_item(codec.check_item(item))
            except codec.CodecError as e:
                self.counters["bad_messages"] += 1
                logger.warning("a report in log entry %s ignored: %s", offset, e)

    def _apply_item(self, item: dict) -> None:
        fp = item["f"]
        try:
            page = self.core.db.find(binascii.unhexlify(fp))
        except (binascii.Error, ValueError):
            raise codec.CodecError("fingerprint is not hexadecimal") from None
        if not self.book.close(page, item["l"]):
            self.counters["duplicate_reports"] += 1
            return
        self.counters["reports_applied"] += 1
        if item["k"] == "e":
            meta = {FINGERPRINT_KEY: fp, b"scrapy_meta": {}}
            if item.get("p"):
                meta[b"dont_retry"] = True
            if item.get("rt"):
                meta[RETRIED_KEY] = True  # the spider's Scrapy retried it already
            self.core.page_failed(OutgoingRequest(url=item["u"], meta=meta), str(item.get("e", ""))[:1000])
            return
        chain = item.get("c") or []
        meta = {FINGERPRINT_KEY: fp, b"scrapy_meta": {}, b"content_hash": int(item.get("h") or 0)}
        if chain:
            meta[b"redirect_urls"] = list(chain)
            meta[b"redirect_reasons"] = list(item.get("rr") or [])
        if item.get("sc") is not None:
            meta[b"score"] = item["sc"]
        request = OutgoingRequest(url=chain[0] if chain else item["u"], meta=meta)
        self.core.page_fetched(_Response(item["u"], item["s"], item.get("hd") or {}, request))
        wire = item.get("ln") or ()
        try:
            links = [codec.to_request(link) for link in wire]
        except codec.CodecError:  # keep the good ones
            links = []
            for link in wire:
                try:
                    links.append(codec.to_request(link))
                except codec.CodecError:
                    self.counters["bad_links"] += 1
        if links:
            self.core.links_found(request, links)

    # -- assignment --------------------------------------------------------------------------
    def _coordinate(self, now: float) -> None:
        spiders = self.t.spiders()
        self.live = {s: info for s, info in spiders.items() if info is not None}
        for s, info in spiders.items():
            if info is None and s not in self.owners and s not in self.moving.values():
                self.t.forget_spider(s)
        if self.live and all(o is None for o in self.owners):
            # The first spiders: wait a heartbeat for those started with them,
            # so they split the partitions at once instead of by moves.
            self._first_seen = self._first_seen or now
            if now - self._first_seen < max(float(i.get("interval", 2.0)) for i in self.live.values()):
                return
        owners, moving = plan(self.owners, self.moving, sorted(self.live))
        open_by_p = self.book.by_partition()
        grace = max([float(i.get("interval", 2.0)) for i in self.live.values()] or [2.0]) + 0.5
        for p, target in list(moving.items()):
            if not open_by_p.get(p):  # the old owner has reported everything of p
                owners[p] = target
                del moving[p]
                self.paused_until[p] = now + grace
        if owners != self.owners or moving != self.moving:
            self.owners, self.moving = owners, moving
            self.version += 1
            self.t.put("assignment", self._assignment_record())

    def _assignment_record(self) -> dict[str, Any]:
        return {"version": self.version, "owners": self.owners, "moving": self.moving}

    # -- handing out ---------------------------------------------------------------------------
    def _partition_of_host(self, h: int) -> int:
        parts = self._host_part
        if h >= len(parts):
            names = self.core.db.host_names
            parts.extend(partition_of(n, self.P) for n in names[len(parts) :])
        return parts[h]

    def _partition_of_page(self, page: int) -> int:
        return self._partition_of_host(int(self.core.db.vertices.host[page]))

    def _leased(self, pages: list[int]) -> None:
        self._issued = self.book.issue(pages, [self._partition_of_page(i) for i in pages])

    def _room(self, now: float) -> tuple[int, np.ndarray]:
        """Requests to lease now, and which partitions are closed to new leases."""
        by_p = self.book.by_partition()
        held: Counter = Counter()
        for p, n in by_p.items():
            held[self.owners[p]] += n
        # At most a spider's prefetch out (published, held or reported but
        # not applied): what it has not read always fits in its room.
        room = {s: max(1, int(info.get("prefetch", 32))) - held[s] for s, info in self.live.items()}
        closed = np.zeros(self.P, bool)
        for p, owner in enumerate(self.owners):
            if owner not in self.live or p in self.moving or room[owner] <= 0 or self.paused_until.get(p, 0) > now:
                closed[p] = True
        n = sum(r for s, r in room.items() if r > 0 and s in self.owners)
        budget = self.core.settings.MAX_PAGES
        if budget:
            done = int(self.core.counters.get("pages_crawled", 0))
            n = min(n, budget - done - len(self.book.open))
        return n, closed

    def _refill(self, now: float) -> bool:
        """Lease what the spiders have room for and commit (the requests are
        published by :meth:`step` after the log is acknowledged); False if
        nothing was asked of the core (nothing committed)."""
        n, closed = self._room(now)
        if n <= 0 or closed.all():
            return False
        v = self.core.db.vertices
        host_out = Counter(int(v.host[x.page]) for x in self.book.open.values())
        # Per host: the frontier's cap, or less if a spider's slots hold less.
        cap = min([self.host_cap] + [int(i["host_cap"]) for i in self.live.values() if i.get("host_cap")])
        part = self._partition_of_host

        def skip(h: int) -> bool:
            return bool(closed[part(h)]) or host_out.get(h, 0) >= cap

        self._issued = []
        # Leases recorded (on_leased) and committed before this returns.
        requests = self.core.next_requests(n, skip_host=skip, max_per_host=cap, host_counts=dict(host_out))
        self._check_stopped()
        if requests and self.fault == "after_lease_commit":
            logger.error("fault injected: exiting after committing %d leases, before publishing", len(requests))
            os._exit(3)
        self._issued_requests = requests
        return True

    def _publish(self, leases: list, requests: list) -> int:
        entries = [(x.partition, x.seq, codec.feed_entry(x.lease, r)) for x, r in zip(leases, requests)]
        n = self.t.publish(entries)
        self.counters["leases_published"] += n
        return n

    def _feed_lows(self) -> dict[int, int]:
        """Per partition, the lowest sequence its feed must keep."""
        lows = self.book.lowest_open()
        return {p: lows.get(p, self.book.pub_seq + 1) for p in range(self.P)}

    # -- state ----------------------------------------------------------------------------------
    def finished(self) -> bool:
        """Nothing queued, nothing leased, nothing unread in the log (and
        some page known: an empty frontier waits for seeds)."""
        return (self.core.stopped is None and self._drained and not self.book.open and self.core.db.n_pages > 0
                and self.core.finished())

    def _publish_state(self, now: float, state: str | None = None) -> None:
        t0, c0 = self._rate
        crawled = int(self.core.counters.get("pages_crawled", 0))
        rate = (crawled - c0) / (now - t0) if now > t0 else 0.0
        if now - t0 >= 5.0:
            self._rate = (now, crawled)
        stats = {k: v for k, v in self.core.stats().items() if isinstance(v, (int, float))}
        stats.update(self.counters)
        stats.update(open_leases=len(self.book.open), pages_per_second=round(rate, 2), spiders=len(self.live))
        if state is None:
            state = "finished" if self.finished() else "running" if self.core.db.n_pages else "waiting for seeds"
        self.t.put("state", {"state": state, "applied": self.book.log_offset, "time": time.time(),
                             "version": self.version, "recrawl": self.core.recrawler is not None, "stats": stats})
