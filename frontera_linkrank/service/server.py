"""The frontier service: one process owning the page database, serving
spiders through a broker (``frontera-linkrank serve-frontier``).

One loop, one thread (ranking keeps its own background thread, as in a
single-process crawl):

1. **own** the crawl: at start the run and the lock
   (:class:`~.ownership.Ownership`), refused with one line if another
   database or frontier has it; every second the lock is extended, and a
   broker that lost the crawl's keys (restarted empty, ``FLUSHDB``) or
   changed (a new ``run_id``) is set up again and every open lease
   republished;
2. **read** the log (reports and seeds) and apply each item once, every
   value checked (:class:`~.intake.Intake`);
3. **coordinate**: live spiders from their heartbeats, and progress: a
   spider whose leases expire while it reports nothing loses its
   partitions to the others; the partition assignment by load
   (:func:`~.assignment.plan`);
4. **refill**: lease the best pages of the hosts whose owner has room
   (at most its prefetch outstanding, at most
   ``LINKRANK_MAX_REQUESTS_PER_HOST`` per host, nothing beyond
   ``LINKRANK_MAX_PAGES``); one commit holds the round's reports, log
   offset and leases; then the log entries are acknowledged and the leases
   published (the publish step verifies every entry);
5. **state**: ``running`` or ``finished`` (nothing queued, or the page
   budget met; nothing leased; the log drained) with the core's stats and
   each spider's share, for spiders and ``frontier-status``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import Any

import numpy as np

from ..core.codec import FINGERPRINT_KEY, OutgoingRequest
from ..core.frontier_core import FrontierCore
from . import codec
from .assignment import partition_of
from .intake import Intake
from .leases import Lease, LeaseBook
from .ownership import FrontierRefused, Ownership
from .spiders import Spiders
from .transport import Transport, offset_key

logger = logging.getLogger(__name__)

FAULT_ENV = "FRONTERA_LINKRANK_FAULT"  # "after_lease_commit": exit between committing leases and publishing (tests)
READ_BATCH = 500  # log entries per read (each a batch of reports)


class FrontierStopped(Exception):
    """The frontier core stopped (a commit could not be written): serving ends."""


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
    crawl, broker : str
        The crawl's name and the broker as logs show it (password masked).
    reset : bool
        Delete the crawl's keys on the broker before serving (``--reset-broker``).
    """

    def __init__(self, core: FrontierCore, transport: Transport, partitions: int = 64,
                 heartbeat_timeout: float = 10.0, crawl: str = "default", broker: str = "the broker",
                 reset: bool = False) -> None:
        self.core = core
        self.t = transport
        self.P = partitions
        self.heartbeat_timeout = heartbeat_timeout
        self.reset = reset
        self.key = getattr(transport, "key", None)
        self.book = LeaseBook(core.db, partitions)
        self.owner = Ownership(transport, self.book, core.settings.PATH, crawl, broker)
        self.intake = Intake(core, self.book, transport, self._may_report, self.key)
        self.counters: Counter = self.intake.counters
        self.host_cap = core.settings.MAX_REQUESTS_PER_HOST or 16
        self.fault = os.environ.get(FAULT_ENV)
        self.error: Exception | None = None  # what stopped the frontier, if something did
        self._issued: list[Lease] = []
        self._issued_requests: list = []  # committed this round, published after the log's acknowledgement
        self._reissue: list[Lease] = []  # leases whose entry could not be placed: published again
        self._unacked: list[str] = []
        core.on_leased = self._leased
        self.spiders = Spiders(transport, partitions, self.counters)
        self.epoch: str | None = None
        self._pending_phase = True  # after a start: our own unacknowledged log entries first
        self._drained = False
        self._recover = False  # a broker error interrupted a round: republish before the next
        self._next = {"coordinate": 0.0, "state": 0.0, "expire": 0.0, "trim": 0.0, "tick": 0.0}
        self._rate = (time.monotonic(), 0)

    # -- start ---------------------------------------------------------------------------
    def start(self) -> None:
        """Claim the crawl (raises :class:`~.ownership.FrontierRefused`), set
        up the broker, record leases the database holds without a record,
        republish what the broker lacks, restore the assignment."""
        run = self.book.run
        self.owner.claim(self.reset, self.P)
        self.t.setup(self.P)
        self.epoch = self.t.epoch()
        if self.book.unrecorded or run != self.book.run:
            pages = self.book.unrecorded
            self.book.issue(pages, [self._partition_of_page(i) for i in pages])
            self.book.unrecorded = []
            self.core.next_requests(0)  # commit the run id and the records
        self.spiders.restore(self.t.get("assignment"))
        self.t.put("assignment", self.spiders.record())
        self.republish()
        self.spiders.coordinate(time.monotonic(), self.intake.progress, self.book.by_partition(), self.core)

    def republish(self) -> int:
        """Publish again every open lease: the publish step adds those the
        broker lacks (after a crash, a broker restart, ``FLUSHDB``, another
        writer), finds the others there, and re-sequences any whose id was
        taken meanwhile (a lost entry below entries published since)."""
        leases = sorted(self.book.open.values(), key=lambda x: x.seq)
        if not leases:
            return 0
        n = self._publish(leases, self.core.requests([x.page for x in leases]))
        self.counters["leases_republished"] += n
        if n:
            logger.info("%d leases republished (the broker did not have them)", n)
        return n

    # -- the loop ------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set; then commit, publish the final state
        (briefly: the broker may be away) and say what was left."""
        self.start()
        logger.info("serving %s: %d partitions, %d open leases, log applied through %s", self.core.settings.PATH,
                    self.P, len(self.book.open), self.book.log_offset)
        try:
            self._serve(stop)
        except FrontierStopped as e:
            # A commit failed (disk full): what it held stays unacknowledged
            # in the broker and is applied by the next run on this database.
            self.error = e.args[0]
        except FrontierRefused as e:
            self.error = e
        if self.error is None or isinstance(self.error, FrontierRefused):
            self.core.next_requests(0)
        self._final()

    def _final(self) -> None:
        """The last word to the broker, given 3 seconds (it may be unreachable)."""
        unpublished = len(self._issued_requests) + len(self._reissue)
        done = threading.Event()

        def last_word() -> None:
            try:
                if self._unacked and self.error is None:
                    self.t.ack_log(self._unacked)
                    self._unacked = []
                self._publish_state(time.monotonic(), "stopped")
                if not isinstance(self.error, FrontierRefused):
                    self.owner.release()
            except Exception as e:  # noqa: BLE001 - the broker is away: said below
                logger.debug("final state not published: %s", e)
            finally:
                done.set()

        threading.Thread(target=last_word, daemon=True).start()
        reached = done.wait(3.0)
        logger.info("stopped: %d pages crawled; %s; %d log entries applied and committed but not acknowledged "
                    "(skipped when read again), %d leases committed but not published (published at the next "
                    "start)", int(self.core.counters.get("pages_crawled", 0)),
                    "state published" if reached else "the broker did not answer", len(self._unacked), unpublished)

    def _serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self._recover:
                    self.t.setup(self.P)
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
        if now >= self._next["tick"]:
            self._next["tick"] = now + 1.0
            self._check_broker()
        done = self._read(block_ms=0 if self._pending_phase else 20)
        if self.intake.applied:
            pages, self.intake.applied = np.asarray(self.intake.applied, np.int64), []
            hosts = self.core.db.vertices.host[pages[pages < self.core.db.vertices.n]]
            self.spiders.fetched(hosts.astype(np.int64) % self.P)
        if now >= self._next["expire"]:
            self._next["expire"] = now + 1.0
            expired = self.book.drop_expired()
            self.counters["leases_expired"] += len(expired)
            self.spiders.expired(expired, now, self.core.settings.LEASE_TIMEOUT)
        if now >= self._next["coordinate"]:
            self._next["coordinate"] = now + 0.25
            self.spiders.coordinate(now, self.intake.progress, self.book.by_partition(), self.core)
        self._reissue_consumed()
        # One commit a round: the reports applied, the log offset and the new leases together.
        if not self._refill(now) and (done or self._reissue):
            self.core.next_requests(0)
        self._check_stopped()  # not committed: the entries stay unacknowledged
        self._unacked = done
        self.t.ack_log(done)
        self._unacked = []
        leases, requests, self._issued_requests = self._issued, self._issued_requests, []
        if requests:
            self._publish(leases, requests)
        if self._reissue:
            again, self._reissue = self._reissue, []
            self._publish(again, self.core.requests([x.page for x in again]))
        if now >= self._next["trim"]:
            self._next["trim"] = now + 5.0
            self._trim()
        if now >= self._next["state"]:
            self._next["state"] = now + 0.5
            self._publish_state(now)
        return len(done)

    def _check_broker(self) -> None:
        """Extend the lock; set the broker up again if it lost the crawl or restarted."""
        lost = self.owner.tick()
        epoch = self.t.epoch()
        if not lost and epoch == self.epoch:
            self.t.put("assignment", self.spiders.record())  # again: another writer may have changed it
            return
        logger.warning("the broker %s: setting the crawl up again, republishing leases",
                       f"restarted (epoch {self.epoch} -> {epoch})" if epoch != self.epoch else "lost the crawl's keys")
        self.epoch = epoch
        self.counters["broker_restarts"] += 1
        self.t.setup(self.P)
        self.t.put("assignment", self.spiders.record())
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
                self.intake.apply(offset, raw)
            done.append(offset)
            if offset_key(offset) > offset_key(self.book.log_offset):
                self.book.log_offset = offset
        return done

    def _trim(self) -> None:
        """Forget applied log entries and feed entries of closed leases (Redis memory stays bounded)."""
        if self.book.log_offset:
            self.t.trim_log(self.book.log_offset)
        lows = self.book.lowest_open()
        for p in range(self.P):
            self.t.trim_feed(p, lows.get(p, self.book.pub_seq + 1))

    def _check_stopped(self) -> None:
        if self.core.stopped is not None:
            raise FrontierStopped(self.core.stopped)

    def _may_report(self, spider: str, page: int) -> bool:
        return self.spiders.may_report(spider, page, self.book.open.get(page))

    def _reissue_consumed(self) -> None:
        """Leases reported this round by processes that do not hold them
        (a spider whose view of the partitions or whose heartbeat another
        writer changed, say), whose feed entry a spider has read and
        acknowledged: no spider will read that entry again, so the lease is
        published again under a new sequence now rather than at its expiry.
        An entry still unread or pending is left to its reader (so reports
        alone cannot grow the feed)."""
        leases = [self.book.open[p] for p in self.intake.foreign if p in self.book.open]
        gone = self.t.consumed([(x.partition, x.seq) for x in leases]) if leases else set()
        self.intake.foreign.clear()
        for x in leases:
            if (x.partition, x.seq) in gone:
                moved = self.book.resequence(x.page)
                if moved is not None:
                    self._reissue.append(moved)
                    self.counters["leases_resequenced"] += 1

    # -- handing out ---------------------------------------------------------------------------
    def _partition_of_page(self, page: int) -> int:
        return partition_of(int(self.core.db.vertices.host[page]), self.P)

    def _leased(self, pages: list[int]) -> None:
        self._issued = self.book.issue(pages, [self._partition_of_page(i) for i in pages])

    def _crawled(self) -> int:
        """Pages crawled, those reported and not applied yet included."""
        return int(self.core.counters.get("pages_crawled", 0)) + len(self.core.batch)

    def _room(self, now: float) -> tuple[int, np.ndarray]:
        """Requests to lease now, and which partitions are closed to new leases."""
        sp = self.spiders
        held: Counter = Counter()
        for p, n in self.book.by_partition().items():
            held[sp.owners[p]] += n
        # At most a spider's prefetch out (published, held or reported but
        # not applied): what it has not read always fits in its room.
        room = {s: int(info.get("prefetch", 32)) - held[s] for s, info in sp.live.items()}
        closed = np.zeros(self.P, bool)
        for p, owner in enumerate(sp.owners):
            if owner not in sp.live or p in sp.moving or room[owner] <= 0 or sp.paused_until.get(p, 0) > now:
                closed[p] = True
        n = sum(r for s, r in room.items() if r > 0 and s in sp.owners)
        budget = self.core.settings.MAX_PAGES
        if budget:
            n = min(n, budget - self._crawled() - len(self.book.open))
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
        cap = min([self.host_cap] + [int(i["host_cap"]) for i in self.spiders.live.values() if i.get("host_cap")])
        P = self.P

        def skip(h: int) -> bool:
            return bool(closed[h % P]) or host_out.get(h, 0) >= cap

        self._issued = []
        # Leases recorded (on_leased) and committed before this returns.
        requests = self.core.next_requests(n, skip_host=skip, max_per_host=cap, host_counts=dict(host_out))
        self._check_stopped()
        if requests and self.fault == "after_lease_commit":
            logger.error("fault injected: exiting after committing %d leases, before publishing", len(requests))
            os._exit(3)
        self._issued_requests = requests
        return True

    def _publish(self, leases: list[Lease], requests: list) -> int:
        """Publish the entries of ``leases``; what the broker did is checked:
        foreign entries removed are logged, entries that could not be placed
        get a new sequence and are published again next round. A lease whose
        request cannot be encoded is given up with the reason."""
        by_page = {x.page: x for x in leases}
        entries = []
        for r in requests:
            fp = r.meta.get(FINGERPRINT_KEY)
            lease = by_page.get(self.core.db.find(bytes.fromhex(fp.decode("ascii"))) if fp else None)
            if lease is None:
                continue
            try:
                entries.append((lease.partition, lease.seq, codec.feed_entry(lease.lease, r, self.key)))
            except (codec.CodecError, TypeError, ValueError) as e:
                self._unpublishable(lease, r, str(e))
                continue
            owner = self.spiders.owners[lease.partition]
            if owner:
                self.spiders.published_to[lease.page] = owner
        res = self.t.publish(entries, self.book.pub_seq)
        self.counters["leases_published"] += res.added
        if res.repaired:
            self.counters["feed_repairs"] += len(res.repaired)
            logger.warning("feed partitions %s held entries the frontier did not write (%d removed): set back",
                           res.repaired, res.removed)
        if res.conflicts:
            pages = {(x.partition, x.seq): x.page for x in leases}
            moved = [self.book.resequence(pages[c]) for c in res.conflicts if c in pages]
            self._reissue.extend(x for x in moved if x is not None)
            self.counters["leases_resequenced"] += len(res.conflicts)
            logger.warning("%d feed entries could not be placed (their id is taken): published again under new "
                           "sequences", len(res.conflicts))
        return res.added

    def _unpublishable(self, lease: Lease, request: Any, reason: str) -> None:
        logger.warning("%.200s: not handed out: %s", request.url, reason)
        self.book.close(lease.page, lease.lease)
        meta = {FINGERPRINT_KEY: request.meta[FINGERPRINT_KEY], b"scrapy_meta": {}}
        self.core.page_failed(OutgoingRequest(url=request.url, meta=meta), f"not handed out: {reason}", give_up=True)
        self.counters["requests_unpublishable"] += 1

    # -- state ----------------------------------------------------------------------------------
    def budget_met(self) -> bool:
        """``LINKRANK_MAX_PAGES`` is set and that many pages are crawled."""
        budget = self.core.settings.MAX_PAGES
        return bool(budget) and self._crawled() >= budget

    def finished(self) -> bool:
        """Nothing queued (or the page budget met), nothing leased, nothing
        unread in the log (and some page known: an empty frontier waits for seeds)."""
        return (self.core.stopped is None and self._drained and not self.book.open and self.core.db.n_pages > 0
                and (self.budget_met() or self.core.finished()))

    def _publish_state(self, now: float, state: str | None = None) -> None:
        t0, c0 = self._rate
        crawled = int(self.core.counters.get("pages_crawled", 0))
        rate = (crawled - c0) / (now - t0) if now > t0 else 0.0
        if now - t0 >= 5.0:
            self._rate = (now, crawled)
        stats = {k: v for k, v in self.core.stats().items() if isinstance(v, (int, float))}
        stats.update(self.counters)
        stats.update(open_leases=len(self.book.open), pages_per_second=round(rate, 2), spiders=len(self.spiders.live),
                     budget=self.core.settings.MAX_PAGES,
                     bad_records=self.counters["bad_records"] + getattr(self.t, "refused_records", 0))
        reason = None
        if state is None:
            finished = self.finished()
            state = "finished" if finished else "running" if self.core.db.n_pages else "waiting for seeds"
            reason = ("page_budget" if self.budget_met() else "finished") if finished else None
        self.t.put("state", {"state": state, "reason": reason, "applied": self.book.log_offset, "time": time.time(),
                             "version": self.spiders.version, "recrawl": self.core.recrawler is not None,
                             "budget": self.core.settings.MAX_PAGES, "stats": stats, "pid": os.getpid(),
                             "spiders": self.spiders.shares(len(self.core.db.host_names), self.intake.fetched)})
