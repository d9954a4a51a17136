"""The spiders of a frontier service: who is alive, who makes progress,
who owns which partition.

- **Alive**: a heartbeat within three of the spider's intervals (checked
  field by field: a heartbeat that is not one of this schema, or not signed
  with ``LINKRANK_SECRET``, does not count).
- **Progress**: a spider that holds leases which expire while it reports
  nothing (a callback that hangs, a reactor blocked) is *stalled*: its
  partitions go to the other spiders, which take over what it held, until
  it reports again. A heartbeat alone does not keep partitions.
- **Ownership**: :func:`~.assignment.plan` by load, every
  :data:`LOAD_EVERY` seconds; in between only the partitions of dead or
  stalled spiders change hands. A move completes once the old owner has
  reported everything of the partition, after a grace period in which it
  sees the change.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..core.frontier_core import FrontierCore
from ..storage.vertices import UNFETCHED
from . import codec
from .assignment import plan
from .leases import Lease
from .transport import Transport

logger = logging.getLogger(__name__)

LOAD_EVERY = 5.0
"""Seconds between plans that balance the load (moves pause a partition)."""


class Spiders:
    """Liveness, progress and the partition assignment (see the module docstring).

    Parameters
    ----------
    transport : Transport
    partitions : int
    counters : collections.Counter
        The service's counters (``bad_records``, ``spiders_stalled``).
    """

    def __init__(self, transport: Transport, partitions: int, counters: Any) -> None:
        self.t = transport
        self.P = partitions
        self.counters = counters
        self.owners: list[str | None] = [None] * partitions
        self.moving: dict[int, str] = {}
        self.paused_until: dict[int, float] = {}
        self.published_to: dict[int, str] = {}  # page -> the spider its open lease was published to
        self.version = 0
        self.live: dict[str, dict] = {}
        self.stalled: dict[str, float] = {}  # spider -> when its leases expired without a report
        self.load = [0.0] * partitions
        self.recent = np.zeros(partitions)  # fetches per partition, decaying
        self._seen: dict[str, tuple[int, float]] = {}  # spider -> (report items, when that changed)
        self._last_alive: dict[str, tuple[float, dict]] = {}  # spider -> (when its heartbeat was last read, info)
        self.holders: list[set[str]] = [set() for _ in range(partitions)]  # spiders that owned each partition
        self._first_seen: float | None = None
        self._next_load = 0.0
        self._warned: set[str] = set()

    # -- the assignment record ------------------------------------------------------------
    def restore(self, saved: dict | None) -> None:
        """The assignment the broker kept, if it is one of this crawl (every field checked)."""
        if not saved:
            return
        owners, moving, version = saved.get("owners"), saved.get("moving") or {}, saved.get("version", 0)
        ok = (type(owners) is list and len(owners) == self.P and all(o is None or codec.is_name(o) for o in owners)
              and type(moving) is dict and all(codec.is_int(p, 0, self.P - 1) and codec.is_name(s)
                                               for p, s in moving.items()) and codec.is_int(version))
        if not ok:
            logger.warning("the partition assignment on the broker is malformed: ignored")
            self.counters["bad_records"] += 1
            return
        self.owners, self.moving, self.version = list(owners), dict(moving), version
        for p, o in enumerate(self.owners):
            self.holders[p].update(x for x in (o, self.moving.get(p)) if x)

    def record(self) -> dict[str, Any]:
        """The assignment as the broker keeps it."""
        return {"version": self.version, "owners": self.owners, "moving": self.moving}

    def may_report(self, spider: str, page: int, lease: Lease | None) -> bool:
        """A report of an open lease is accepted from the spider it was
        published to, from any spider that has owned (or been moving into)
        its partition while this frontier ran (a late report of a spider
        taken for dead, one that took the lease over) and from any spider
        alive now: one that read the entry while its view of the partitions
        was not the frontier's (an assignment record another writer
        changed) has fetched the page all the same, and its feed entry is
        gone. A process that is not a spider of the crawl is refused."""
        if lease is None:
            return True
        p = lease.partition
        return (spider == self.published_to.get(page) or spider in self.holders[p] or spider == self.owners[p]
                or spider in self.live)

    # -- liveness and progress ---------------------------------------------------------------
    def expired(self, leases: list[Lease], now: float, timeout: float) -> None:
        """Leases that timed out: their spider, if it reported nothing
        meanwhile, is stalled and loses its partitions until it reports."""
        for lease in leases:
            s = self.published_to.pop(lease.page, None) or self.owners[lease.partition]
            if not s or s in self.stalled:
                continue
            _, since = self._seen.get(s, (0, now - timeout))
            if now - since >= timeout * 0.99:
                self.stalled[s] = now
                self.counters["spiders_stalled"] += 1
                logger.warning("spider %s reported nothing while its leases expired: its partitions go to the "
                               "other spiders until it reports again", s)

    def _note_progress(self, now: float, progress: dict[str, int]) -> None:
        for s in set(self._seen) - set(self.live):
            del self._seen[s]
        for s in self.live:
            n = progress.get(s, 0)
            seen = self._seen.get(s)
            if seen is None or seen[0] != n:
                self._seen[s] = (n, now)
                if seen is not None and self.stalled.pop(s, None) is not None:
                    logger.info("spider %s reports again: it gets partitions again", s)

    def _alive(self, spiders: dict[str, dict | None], now: float) -> dict[str, dict]:
        """Spiders with a valid heartbeat, and those that had one within
        three of their intervals (a broker that lost its keys: no churn)."""
        out = {}
        for s, info in spiders.items():
            if info is None:
                continue
            prefetch, interval, cap = info.get("prefetch", 32), info.get("interval", 2.0), info.get("host_cap")
            if (codec.is_int(prefetch, 1, 1 << 20) and type(interval) in (int, float) and 0.01 <= interval <= 3600
                    and (cap is None or codec.is_int(cap, 1, 1 << 20))):
                out[s] = info
                self._last_alive[s] = (now, info)
            else:
                self.counters["bad_records"] += 1
        for s, (when, info) in list(self._last_alive.items()):
            if s not in out and spiders.get(s, info) is not None and now - when < 3 * float(info.get("interval", 2)):
                out[s] = info  # its heartbeat key is gone, not expired: the broker lost it
            elif s not in out:
                del self._last_alive[s]
        return out

    # -- the assignment -----------------------------------------------------------------------
    def coordinate(self, now: float, progress: dict[str, int], open_by_p: Any, core: FrontierCore) -> None:
        """Read the heartbeats, note progress, and move partitions (published to the broker)."""
        known = self.t.spiders()
        refused = getattr(self.t, "refused_spiders", set())
        for s in refused - self._warned:
            self._warned.add(s)
            logger.warning("spider %s ignored: its heartbeat is not signed with this frontier's LINKRANK_SECRET "
                           "(or is not a heartbeat)", s)
        refused.clear()
        self.live = self._alive(known, now)
        self._note_progress(now, progress)
        for s in known:
            if s not in self.live and s not in self.owners and s not in self.moving.values():
                self.t.forget_spider(s)
        working = sorted(s for s in self.live if s not in self.stalled)
        if not working:
            return  # nobody to give partitions to: the assignment stays as it is
        if all(o is None for o in self.owners):
            # The first spiders: wait a heartbeat for those started with them,
            # so they split the partitions at once instead of by moves.
            self._first_seen = self._first_seen or now
            if now - self._first_seen < max(float(self.live[s].get("interval", 2.0)) for s in working):
                return
        balance = now >= self._next_load
        if balance:
            self._next_load = now + LOAD_EVERY
            self._measure_load(core)
        owners, moving = plan(self.owners, self.moving, working, self.load, balance)
        grace = max([float(i.get("interval", 2.0)) for i in self.live.values()] or [2.0]) + 0.5
        for p, target in list(moving.items()):
            if not open_by_p.get(p):  # the old owner has reported everything of p
                owners[p] = target
                del moving[p]
                self.paused_until[p] = now + grace
        for p, o in enumerate(owners):
            self.holders[p].update(x for x in (o, moving.get(p)) if x)
        if owners != self.owners or moving != self.moving:
            self.owners, self.moving = owners, moving
            self.version += 1
            self.t.put("assignment", self.record())

    def fetched(self, partitions: np.ndarray) -> None:
        """Count fetches reported in ``partitions`` (one entry per fetch)."""
        np.add.at(self.recent, partitions, 1.0)

    def _measure_load(self, core: FrontierCore) -> None:
        """Work per partition: pages waiting in its hosts, plus its recent fetches."""
        v = core.db.vertices
        n, hosts = v.n, len(core.db.host_names)
        waiting = np.bincount(v.host[:n][v.state[:n] == UNFETCHED], minlength=hosts)
        by_p = np.bincount(np.arange(hosts) % self.P, weights=waiting, minlength=self.P)
        self.load = (by_p + self.recent).tolist()
        self.recent *= 0.5

    def shares(self, n_hosts: int, fetched: dict[str, int]) -> dict[str, dict[str, Any]]:
        """Per spider: partitions, hosts, load, reports applied, stalled."""
        hosts = np.bincount(np.arange(n_hosts) % self.P, minlength=self.P)
        out: dict[str, dict[str, Any]] = {}
        for p, o in enumerate(self.owners):
            if o is None:
                continue
            d = out.setdefault(o, {"partitions": 0, "hosts": 0, "load": 0.0})
            d["partitions"] += 1
            d["hosts"] += int(hosts[p])
            d["load"] = round(d["load"] + self.load[p], 1)
        for s, d in out.items():
            d["fetched"] = fetched.get(s, 0)
            d["stalled"] = s in self.stalled
        return out
