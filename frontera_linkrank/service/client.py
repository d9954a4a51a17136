"""A spider's side of a frontier service: :class:`RemoteFrontier`.

All broker I/O runs in one background thread, so the crawler's own thread
(Scrapy's reactor) never blocks on the network. The thread

- sends a heartbeat every ``interval`` seconds (it expires after three),
  reads the assignment and takes over the pending requests of partitions
  it gains (a dead spider's);
- reads requests from the partitions this spider owns while it holds fewer
  than ``prefetch`` (back-pressure); after a start, or on gaining a
  partition, it first re-reads what it held and had not reported;
- sends seeds, and reports in batches (each batch and the
  acknowledgements of the requests it reports on in one atomic write).

Every feed entry is checked before the crawler sees it: a malformed one,
one whose URL the frontier would not store (another scheme than http(s),
no host), or, with ``LINKRANK_SECRET``, one not signed with it, is
acknowledged, counted in ``refused_entries`` and never fetched.

The crawler's thread only calls :meth:`take`, :meth:`done`,
:meth:`add_seeds`, :meth:`finished` and :meth:`stats`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..storage.urls import RejectedURL, check_url
from . import codec
from .transport import Transport, offset_key

logger = logging.getLogger(__name__)

REPORT_BATCH = 200  # report items per log entry
REPORT_INTERVAL = 0.1  # seconds a report may wait for others to share its write
SEED_BATCH = 1000


class RemoteFrontier:
    """The frontier seen from a spider (see the module docstring).

    Parameters
    ----------
    transport_factory : callable() -> Transport
        Makes the connection (in the I/O thread).
    spider : str
        Spider id; a restart under the same id takes back what it held.
    prefetch : int
        Requests held at most (received, not reported).
    interval : float
        Heartbeat interval in seconds.
    info : dict
        What the frontier may read of this spider (``prefetch`` is added).
    key : bytes or None
        The crawl's sealing key (:func:`.codec.crawl_key` of ``LINKRANK_SECRET``).
    """

    def __init__(self, transport_factory: Callable[[], Transport], spider: str, prefetch: int = 32,
                 interval: float = 2.0, info: dict[str, Any] | None = None, key: bytes | None = None) -> None:
        self.factory = transport_factory
        self.key = key
        self.spider = spider
        self.prefetch = prefetch
        self.interval = interval
        self.info = {**(info or {}), "prefetch": prefetch, "interval": interval}
        self._lock = threading.Lock()
        self._inbox: collections.deque = collections.deque()  # (partition, entry id, FeedEntry)
        self._held: set[tuple[int, str]] = set()  # read and not reported
        self._reports: list[tuple[tuple[int, str], dict]] = []
        self._seeds: list[list] = []
        self._last_sent: str | None = None  # offset of this spider's last log entry
        self._state: dict[str, Any] = {}
        self._owned: dict[int, str] = {}  # partition -> read cursor
        self._version: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.counters: collections.Counter = collections.Counter()
        self.error: str | None = None  # last broker error, for the log
        self.last_received = time.monotonic()  # when a request last came (the spider says when it has none)
        self._rate = collections.deque(maxlen=30)  # (time, fetched) at each heartbeat
        self._warned = False

    # -- the crawler's side -------------------------------------------------------------------
    def start(self) -> None:
        """Start the I/O thread."""
        self._thread = threading.Thread(target=self._run, name=f"linkrank-remote-{self.spider}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Flush what is queued (up to ``timeout`` seconds) and stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def take(self, n: int) -> list[tuple[int, str, codec.FeedEntry]]:
        """Up to ``n`` received requests: ``(partition, entry id, entry)``."""
        out = []
        with self._lock:
            while self._inbox and len(out) < n:
                out.append(self._inbox.popleft())
        return out

    def done(self, partition: int, entry_id: str, item: dict) -> None:
        """Report ``item`` (a report item of :mod:`.codec`) for the feed entry ``(partition, entry_id)``."""
        with self._lock:
            self._reports.append(((partition, entry_id), item))
        self.counters["fetched" if item.get("k") == "f" else "failed"] += 1

    def ack(self, partition: int, entry_id: str) -> None:
        """Acknowledge the feed entry ``(partition, entry_id)`` without a
        report: its page is reported under another entry."""
        with self._lock:
            self._reports.append(((partition, entry_id), None))

    def add_seeds(self, links: list[list]) -> None:
        """Send seeds (wire links) to the frontier."""
        with self._lock:
            self._seeds.extend(links)

    @property
    def recrawl(self) -> bool:
        """The frontier refreshes pages (content hashes are then normalised)."""
        return bool(self._state.get("recrawl"))

    @property
    def n_waiting(self) -> int:
        """Requests received and not yet taken."""
        return len(self._inbox)

    def finished(self) -> bool:
        """The frontier says the crawl is finished and has applied all this spider sent."""
        with self._lock:
            if self._inbox or self._held or self._reports or self._seeds:
                return False
            st = self._state
            applied = st.get("applied")
            return (st.get("state") == "finished" and (applied is None or type(applied) is str)
                    and offset_key(self._last_sent) <= offset_key(applied))

    @property
    def state(self) -> dict[str, Any]:
        """The frontier's state record as last read (``state``, ``reason``, ``stats``...)."""
        return self._state

    def rate(self) -> float:
        """Pages this spider fetched per second over the last heartbeats."""
        if len(self._rate) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._rate[0], self._rate[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def stats(self) -> dict[str, Any]:
        """This spider's own figures, and the frontier's (as last
        published) under ``frontier/``: never mixed."""
        with self._lock:
            frontier = self._state.get("stats") or {}
            out: dict[str, Any] = {f"frontier/{k}": v for k, v in frontier.items()
                                   if isinstance(k, str) and type(v) in (int, float)}
            out["frontier/state"] = str(self._state.get("state", "unknown"))
            out["held"] = len(self._held)
            out["partitions"] = len(self._owned)
        out.update(self.counters)
        out["pages_per_second"] = round(self.rate(), 2)
        return out

    # -- the I/O thread -------------------------------------------------------------------------
    def _run(self) -> None:
        t = None
        next_hb = 0.0
        last_flush = time.monotonic()
        while True:
            stopping = self._stop.is_set()
            try:
                if t is None:
                    t = self.factory()
                now = time.monotonic()
                if now >= next_hb and not stopping:
                    self._heartbeat(t)
                    next_hb = now + self.interval
                if stopping or len(self._reports) >= REPORT_BATCH or self._seeds or now - last_flush >= REPORT_INTERVAL:
                    self._flush(t)
                    last_flush = now
                if stopping:
                    break
                self._read(t)
                self.error = None
            except Exception as e:  # the broker is away: keep what is queued, try again
                if self.error is None:
                    logger.warning("frontier broker: %s: %s (retrying)", type(e).__name__, e)
                self.error = str(e)
                self.counters["broker_errors"] += 1
                if stopping:
                    break
                time.sleep(0.5)
        if t is not None:
            t.close()

    def _heartbeat(self, t: Transport) -> None:
        now = time.monotonic()
        self._rate.append((now, self.counters["fetched"]))
        info = {**self.info, "fetched": self.counters["fetched"], "rate": round(self.rate(), 2)}
        t.heartbeat(self.spider, info, ttl=3 * self.interval)
        state = t.get("state") or {}
        assignment = t.get("assignment") or {}
        if not state and not self._warned and getattr(t, "get_raw", None) and t.get_raw("state") is not None:
            self._warned = True
            logger.warning("the frontier's state on the broker is not signed with this spider's LINKRANK_SECRET "
                           "(or is not one): set the same secret on serve-frontier and its spiders")
        with self._lock:
            self._state = state if isinstance(state.get("stats", {}), dict) else {}
        version, owners = assignment.get("version", -1), assignment.get("owners")
        if (version, owners) == self._version or type(owners) is not list:
            return
        self._version = (version, owners)  # any change counts (another writer may have reused a version)
        mine = {p for p, o in enumerate(owners) if o == self.spider}
        for p in list(self._owned):
            if p not in mine:
                del self._owned[p]
        for p in sorted(mine):
            if p not in self._owned:
                claimed = t.take_over(self.spider, p)
                if claimed:
                    self.counters["taken_over"] += claimed
                self._owned[p] = "0"  # our pending entries first (ours, and those just taken over)

    def _flush(self, t: Transport) -> None:
        with self._lock:
            seeds, self._seeds = self._seeds, []
        for k in range(0, len(seeds), SEED_BATCH):
            try:
                self._last_sent = t.send(codec.seeds(seeds[k : k + SEED_BATCH], self.key))
            except Exception:
                with self._lock:
                    self._seeds[:0] = seeds[k:]
                raise
        while True:
            with self._lock:
                batch = self._reports[:REPORT_BATCH]
            if not batch:
                return
            acks = [key for key, _ in batch]
            items = [item for _, item in batch if item is not None]
            offset = t.report(self.spider, codec.report(self.spider, items, self.key), acks)
            with self._lock:
                del self._reports[: len(batch)]
                self._last_sent = offset
                self._held.difference_update(acks)
            self.counters["reports_sent"] += len(batch)

    def _read(self, t: Transport) -> None:
        """Read what the frontier published for us, at most the room left
        under the prefetch."""
        room = self.prefetch - len(self._held)
        # A partition moving to another spider is read too: the frontier
        # publishes nothing new there, and the move waits for what it holds.
        owned = list(self._owned)
        if room <= 0 or not owned:
            time.sleep(0.05)
            return
        history = [p for p in owned if self._owned[p] != ">"]
        if history:
            p = history[0]  # what we held before a restart, or just took over
            got = t.read_feed(self.spider, {p: self._owned[p]}, room, 0)
            self._owned[p] = got[-1][1] if got else ">"
            self._receive(got)
            return
        # Every owned partition in one read (waiting up to 0.1 s for an
        # entry): the frontier keeps at most our prefetch out, so what is
        # unread fits in the room left. (Reading a few partitions at a time
        # left a spider with a small prefetch scanning empty ones.)
        self._receive(t.read_feed(self.spider, {p: ">" for p in owned}, room, 100))

    def _receive(self, got: list) -> None:
        entries = []
        for p, entry_id, raw in got:
            key = (p, entry_id)
            if key in self._held:
                continue
            if raw is None:
                # Trimmed away: its lease is closed. Acknowledge it with an empty report.
                with self._lock:
                    self._held.add(key)
                    self._reports.append((key, None))
                continue
            try:
                entry = codec.read_feed_entry(raw, self.key)
                check_url(entry.url)  # the frontier's own filter: http(s) with a host, nothing else
            except (codec.CodecError, RejectedURL) as e:
                self.counters["refused_entries"] += 1
                if self.counters["refused_entries"] <= 10:
                    logger.warning("feed entry %s of partition %d refused, not fetched: %s", entry_id, p, e)
                with self._lock:
                    self._held.add(key)
                    self._reports.append((key, None))
                continue
            entries.append((p, entry_id, entry))
        with self._lock:
            for p, entry_id, entry in entries:
                self._held.add((p, entry_id))
                self._inbox.append((p, entry_id, entry))
        if entries:
            self.last_received = time.monotonic()
        self.counters["received"] += len(entries)
