"""The transport between a frontier service and its spiders.

The page database is the source of truth; a transport only carries
messages (bytes made by :mod:`.codec`) and keeps what a broker keeps well:
which delivered requests a spider has not finished yet. What it must
provide, whatever the broker:

- a **feed** of ``P`` partitions (frontier -> spiders). Each entry has a
  publish sequence number chosen by the frontier, increasing within a
  partition; publishing an entry again with a sequence already there adds
  nothing, so the frontier can republish after a crash without duplicates.
  A spider reads the partitions it owns; an entry it has read stays
  *pending* (held by that spider) until it is acknowledged; a spider
  restarted under the same id reads its pending entries again; another
  spider can take over the pending entries of a partition.
- a **log** (spiders -> frontier) with offsets that sort in log order. A
  spider's report and the acknowledgement of the feed entries it reports
  on are written together, atomically where the broker can.
- **membership and control**: heartbeats with an expiry, the partition
  assignment, the frontier's state and stats, and an epoch that changes
  when the broker was restarted or replaced (the frontier then republishes
  what the broker may have lost);
- **ownership**: a lock with an expiry held by the one frontier of a
  crawl, and a run record naming the page database the crawl belongs to.

:class:`~.redis_transport.RedisTransport` implements it with Redis
Streams. Another broker (NATS JetStream, Kafka) would be a second
implementation; the frontier service and the spider client only see this
interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

FeedItem = tuple[int, str, "bytes | None"]
"""``(partition, entry id, payload)``; payload None: the entry was trimmed away."""


def offset_key(offset: str | bytes | None) -> tuple[int, int]:
    """Sort key of a log offset ``"<ms>-<seq>"`` (None sorts first).

    >>> offset_key("5-2") < offset_key("10-0"), offset_key(None)
    (True, (0, 0))
    """
    if not offset:
        return (0, 0)
    if isinstance(offset, bytes):
        offset = offset.decode("ascii")
    a, _, b = offset.partition("-")
    return (int(a), int(b or 0))


class Transport(ABC):
    """What the frontier service and the spiders need of a broker (see the module docstring)."""

    unavailable: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
    """Exceptions that mean "the broker cannot be reached now" (retry later), not a bug."""

    # -- set-up and identity ----------------------------------------------------------
    @abstractmethod
    def setup(self, partitions: int) -> None:
        """Create the log, the ``partitions`` feed partitions and their consumer groups (idempotent)."""

    @abstractmethod
    def epoch(self) -> str:
        """Identity of the running broker; it changes when the broker restarts or is replaced."""

    # -- the feed -----------------------------------------------------------------------
    @abstractmethod
    def publish(self, entries: list[tuple[int, int, bytes]], top: int = 0) -> Any:
        """Append ``(partition, sequence, payload)`` entries in order.
        ``top`` is the highest sequence the frontier has issued: entries
        above it in a partition are another writer's and are removed first.
        An entry whose sequence is there already with the same payload is
        skipped (republished); one that cannot be placed (its id is taken by
        another payload, or below the partition's top without an entry) is
        returned as a conflict, never dropped silently. Returns what was
        done (added, present, removed, repaired partitions, conflicts)."""

    @abstractmethod
    def published_top(self, partition: int) -> int:
        """The highest sequence ever appended to ``partition`` (0: none, or the broker lost it)."""

    @abstractmethod
    def trim_feed(self, partition: int, below: int) -> None:
        """Forget the entries of ``partition`` with a sequence below ``below``."""

    @abstractmethod
    def consumed(self, entries: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Of the feed entries ``(partition, sequence)``, those a spider has
        read and acknowledged (no spider will read them again)."""

    @abstractmethod
    def read_feed(self, spider: str, cursors: dict[int, str], max_n: int, block_ms: int) -> list[FeedItem]:
        """Entries for ``spider`` from the partitions in ``cursors``: cursor
        ``"0"`` re-reads the spider's own pending entries, ``">"`` new ones.
        Waits up to ``block_ms`` for new entries."""

    @abstractmethod
    def take_over(self, spider: str, partition: int) -> int:
        """Make every pending entry of ``partition`` (whoever held it) ``spider``'s; returns how many."""

    # -- the log ------------------------------------------------------------------------
    @abstractmethod
    def report(self, spider: str, payload: bytes, acks: list[tuple[int, str]]) -> str:
        """Append ``payload`` to the log and acknowledge the feed entries
        ``acks`` (``(partition, entry id)``) in one atomic step; returns its offset."""

    @abstractmethod
    def send(self, payload: bytes) -> str:
        """Append ``payload`` to the log; returns its offset."""

    @abstractmethod
    def read_log(self, max_n: int, block_ms: int, pending: bool = False) -> list[tuple[str, bytes | None]]:
        """Log entries for the frontier: ``pending`` re-reads those it read
        and has not acknowledged (after a restart), else new ones."""

    @abstractmethod
    def set_aside(self, offset: str, raw: bytes | None, reason: str) -> None:
        """Keep a refused log entry where it can be inspected (bounded), not in the log."""

    @abstractmethod
    def ack_log(self, offsets: list[str]) -> None:
        """Acknowledge log entries the frontier has applied (and committed)."""

    @abstractmethod
    def trim_log(self, through: str) -> None:
        """Forget log entries before offset ``through``."""

    # -- membership and control ------------------------------------------------------------
    @abstractmethod
    def heartbeat(self, spider: str, info: dict[str, Any], ttl: float) -> None:
        """``spider`` is alive for ``ttl`` seconds more; ``info`` describes it."""

    @abstractmethod
    def spiders(self) -> dict[str, dict[str, Any] | None]:
        """Spiders that ever sent a heartbeat: id -> info, or None once its heartbeat expired."""

    @abstractmethod
    def forget_spider(self, spider: str) -> None:
        """Drop a dead spider from :meth:`spiders`."""

    @abstractmethod
    def put(self, name: str, value: dict[str, Any]) -> None:
        """Store the control record ``name`` (``assignment``, ``state``)."""

    @abstractmethod
    def get(self, name: str) -> dict[str, Any] | None:
        """The control record ``name``, or None."""

    # -- one frontier per crawl --------------------------------------------------------------
    @abstractmethod
    def claim(self, lock: bytes, ttl: float, run: bytes | None) -> tuple[bool, bool]:
        """Take the frontier lock for ``ttl`` seconds if nobody holds it, and
        the crawl's run record ``run`` if it has none: whether each is ours now."""

    @abstractmethod
    def tick(self, lock: bytes, ttl: float, run: bytes) -> tuple[int, int]:
        """Extend the lock and check the run record: for each, 1 ours, 2 it
        was missing and is ours again (the broker lost it), 0 another's."""

    @abstractmethod
    def release(self, lock: bytes) -> None:
        """Give the lock up (if it is still ours)."""

    @abstractmethod
    def force_lock(self, lock: bytes, ttl: float) -> None:
        """Take the lock over from a holder known to be gone."""

    @abstractmethod
    def get_raw(self, name: str) -> bytes | None:
        """The stored bytes of a control record (``run``, ``frontier``)."""

    @abstractmethod
    def delete_record(self, name: str) -> None:
        """Delete a control record (another writer's bytes where a record should be)."""

    @abstractmethod
    def put_raw(self, name: str, raw: bytes) -> None:
        """Store a record's bytes as they were made (the run record, after another writer replaced it)."""

    @abstractmethod
    def clear_feed(self, partitions: int) -> None:
        """Empty the feed (a new run owns none of what is there)."""

    @abstractmethod
    def reset(self) -> int:
        """Delete everything of this crawl on the broker; returns the keys deleted."""

    @abstractmethod
    def backlog(self) -> dict[str, Any]:
        """Figures for status displays: log length and pending entries, feed entries."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""
