"""Adaptive On-line Page Importance Computation (AOPIC), updated inline.

Implements docs/algorithms.md §1 over the page arrays of a
:class:`~frontera_linkrank.storage.vertices.VertexTable`. Each page has cash
``C``, history ``H`` and the time of its last read; a virtual page ω holds
the rest of the cash, so that at every commit::

    sum(C) + sum(owed) + C_omega == 1

Reading a page gives ``d * C`` to its out-links (weights summing to 1) and
``(1 - d) * C`` to ω (all of ``C`` when it has no out-links), then zeroes
``C``. The fixed point is PageRank with damping ``d``, uniform teleport and
dangling mass spread uniformly (ω reads spread over all pages).

Reading ω must not cost O(n): it adds ``C_omega / n_target`` to a global
accumulator ``A``; a page of the target set is owed ``A - stamp`` until it
is settled (when it is read, leaves the target set, or the policy changes).

Examples
--------
A three-page cycle read in turn converges to uniform importance:

>>> from frontera_linkrank.storage.vertices import VertexTable
>>> t = VertexTable(); _ = t.append(3)
>>> a = Aopic(t, damping=0.85)  # pages already in the table join the target set here
>>> a.fund([0])
>>> import numpy as np
>>> for step in range(3000):
...     i = step % 3
...     a.leave(i); a.read(i, np.array([(i + 1) % 3])); a.join(i)
>>> np.round(a.importance(np.arange(3)), 2).tolist()
[0.33, 0.33, 0.33]
>>> abs(a.residual()) < 1e-12
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..numeric import at_least, exact_sum, value_at
from ..storage.coldrecords import TableColdRecords
from ..storage.hosts import HostNames
from ..storage.vertices import ERROR, F_CRAWLED

if TYPE_CHECKING:
    from ..storage.coldrecords import ColdRecords
    from ..storage.vertices import VertexTable


class AopicSettings(Protocol):
    """What the books read from the crawl's settings (a
    :class:`~frontera_linkrank.settings.LinkRankSettings` has these; scoring
    sits below the settings package, so it names only the fields)."""

    DAMPING: float
    HISTORY_WINDOW: float | None
    HISTORY_TIME: str
    OMEGA_READ_EVERY: int
    INTERNAL_WEIGHT: float
    EXTERNAL_WEIGHT: float
    OMEGA_POLICY: str
    OMEGA_HOSTS: list[str]


OMEGA_POLICIES = ("all", "unfetched", "fetched", "hosts")
"""Target sets of the virtual page's cash (``omega_policy``)."""
HISTORY_TIMES = ("wall", "cash")
"""Clocks of the history window: seconds, or cash read so far (``cash_time``)."""


class Aopic:
    """Cash, history and the virtual page for the pages of ``table``.

    A crawl builds its books with :meth:`from_settings` (the parameters
    are ``LINKRANK_*`` settings); :meth:`from_saved` reads the books of a
    page database. The parameters after ``damping`` default to the plain
    algorithm (no window, ω to every page at every read, unweighted links).

    Parameters
    ----------
    table : VertexTable
        Page arrays (``cash``, ``stamp``, ``state``, ``flags``, ``host``
        are used).
    damping : float
        Fraction of a read page's cash passed to its out-links.
    window : float
        History window T (``math.inf``: plain OPIC).
    cash_time : bool
        Measure time for the window in cash read so far instead of seconds.
    omega_policy : {"all", "unfetched", "fetched", "hosts"}
        Target set of ω's cash.
    omega_read_every : int
        Read ω after this many page reads.
    internal_weight, external_weight : float
        Relative link weights for same-host and other-host links.
    state : dict, optional
        Globals saved by :meth:`state_dict`.
    cold : ColdRecords, optional
        Where the pages' ``history`` and ``last_read`` are (default: in
        ``table``, which then has every field).
    """

    def __init__(
        self,
        table: VertexTable,
        damping: float,
        *,
        window: float = math.inf,
        cash_time: bool = False,
        omega_policy: str = "all",
        omega_read_every: int = 1,
        internal_weight: float = 1.0,
        external_weight: float = 1.0,
        state: Mapping[str, Any] | None = None,
        cold: ColdRecords | TableColdRecords | None = None,
    ) -> None:
        if omega_policy not in OMEGA_POLICIES:
            raise ValueError(f"omega_policy must be one of {OMEGA_POLICIES}")
        self.table = table
        self.cold = cold if cold is not None else TableColdRecords(table, lambda idx: None)
        self.damping = float(damping)
        self.window = float(window)
        self.cash_time = bool(cash_time)
        self.policy = omega_policy
        self.omega_read_every = int(omega_read_every)
        self.internal_weight = float(internal_weight)
        self.external_weight = float(external_weight)
        self.weighted = self.internal_weight != self.external_weight
        self.host_target = np.zeros(16, bool)  # per host id, for policy "hosts"
        self.omega = 1.0  # cash of the virtual page
        self.G = 0.0  # total history of real pages
        self.A = 0.0  # accumulator of ω reads per target page
        self.clock = 0.0  # total cash read from real pages ("cash" time)
        self.reads = 0
        self.omega_reads = 0
        self.n_target = 0
        self._omega_due = False
        if state:
            for k in ("omega", "G", "A", "clock"):
                setattr(self, k, float(state[k]))
            self.reads = int(state["reads"])
            self.omega_reads = int(state.get("omega_reads", 0))
        self.n_target = int(self.member_mask().sum())

    @staticmethod
    def parameters(settings: AopicSettings) -> dict[str, Any]:
        """Constructor parameters from the ``LINKRANK_*`` settings (all but
        ``omega_policy`` and ``state``)."""
        s = settings
        return {
            "damping": s.DAMPING,
            "window": s.HISTORY_WINDOW,
            "cash_time": s.HISTORY_TIME == "cash",
            "omega_read_every": s.OMEGA_READ_EVERY,
            "internal_weight": s.INTERNAL_WEIGHT,
            "external_weight": s.EXTERNAL_WEIGHT,
        }

    @classmethod
    def from_settings(cls, table: VertexTable, settings: AopicSettings, state: Mapping[str, Any] | None = None,
                      host_ids: Mapping[str, int] | HostNames | None = None,
                      cold: ColdRecords | TableColdRecords | None = None) -> Aopic:
        """The crawl's books: parameters and ω's target set
        (``LINKRANK_OMEGA_POLICY``, ``LINKRANK_OMEGA_HOSTS``) from
        ``settings``, globals from ``state`` (the ``aopic`` entry of the
        page database's metadata; None for a new database). ``host_ids``
        (host name -> id) places the target hosts; ``cold`` holds the
        pages' history."""
        a = cls(table, omega_policy=settings.OMEGA_POLICY, state=state, cold=cold, **cls.parameters(settings))
        a._target_hosts(settings.OMEGA_HOSTS, host_ids)
        return a

    @classmethod
    def from_saved(cls, table: VertexTable, saved: Mapping[str, Any] | None,
                   host_ids: Mapping[str, int] | HostNames | None = None,
                   settings: AopicSettings | None = None, **params: Any) -> Aopic:
        """Books as of a commit, with the target set they were kept for.

        ``saved`` is the ``aopic`` entry of the page database's metadata
        (``None`` for a new database). The parameters come from
        ``settings``, else from ``params``; a reader of the books that
        gives neither moves no cash along links: its damping is unknown
        (nan) and its importance is read without a window.
        """
        if settings is not None:
            params = {**cls.parameters(settings), **params}
        params.setdefault("damping", math.nan)
        if not saved:
            return cls(table, **params)
        a = cls(table, omega_policy=saved.get("policy", "all"), state=saved, **params)
        a._target_hosts(saved.get("hosts", []), host_ids)
        return a

    def _target_hosts(self, names: Iterable[str], host_ids: Mapping[str, int] | HostNames | None) -> None:
        if self.policy == "hosts":
            for name in names:
                hid = (host_ids or {}).get(name)
                if hid is not None:
                    self.set_host_target(hid, True)
            self.n_target = int(self.member_mask().sum())

    def state_dict(self) -> dict[str, Any]:
        """Globals to persist with each commit (JSON-serialisable)."""
        return {
            "omega": self.omega,
            "G": self.G,
            "A": self.A,
            "clock": self.clock,
            "reads": self.reads,
            "omega_reads": self.omega_reads,
            "policy": self.policy,
        }

    # -- target set of ω ---------------------------------------------------------
    def set_host_target(self, host_id: int, member: bool) -> None:
        """Mark a host in or out of the "hosts" target set (before its pages join)."""
        self.host_target = at_least(self.host_target, host_id + 1)
        self.host_target[host_id] = member

    def _member(self, i: int) -> bool:
        t = self.table
        p = self.policy
        if p == "all":
            return True
        if p == "hosts":
            h = t.host[i]
            return h < len(self.host_target) and bool(self.host_target[h])
        if t.state[i] == ERROR:
            return False
        fetched = bool(t.flags[i] & F_CRAWLED)
        return fetched if p == "fetched" else not fetched

    def member_mask(self, idx: Any = None) -> np.ndarray:
        """Boolean mask of target-set membership for ``idx`` (default: all pages)."""
        t = self.table
        if idx is None:
            idx = slice(0, t.n)
        p = self.policy
        if p == "all":
            return np.ones(len(t.state[idx]), bool)
        if p == "hosts":
            return value_at(self.host_target, t.host[idx], False)
        ok = t.state[idx] != ERROR
        fetched = (t.flags[idx] & F_CRAWLED) != 0
        return ok & (fetched if p == "fetched" else ~fetched)

    def join_new(self, start: int, k: int) -> None:
        """Pages ``start .. start+k-1`` were appended to the table after this
        object was built (cash 0)."""
        if k:
            sl = slice(start, start + k)
            self.table.stamp[sl] = self.A
            self.n_target += int(self.member_mask(sl).sum())

    def leave(self, i: int) -> None:
        """Settle page ``i`` before a change that may move it out of the
        target set (a read, an error); pair with :meth:`join` afterwards."""
        if self._member(i):
            t = self.table
            t.cash[i] += self.A - t.stamp[i]
            t.stamp[i] = self.A
            self.n_target -= 1

    def join(self, i: int) -> None:
        """Counterpart of :meth:`leave` after the page's state changed.

        A read of ω that fell due during a page read happens here, once the
        page is back in the target set: read inside the bracket, ω's cash
        would skip the page whose read produced it (a bias, not a leak)."""
        if self._member(i):
            self.table.stamp[i] = self.A
            self.n_target += 1
        if self._omega_due:
            self._omega_due = False
            self.read_omega()

    def owed(self, idx: Any = None) -> np.ndarray:
        """Cash owed to pages through the accumulator (0 outside the target set)."""
        t = self.table
        if idx is None:
            idx = slice(0, t.n)
        return np.where(self.member_mask(idx), self.A - t.stamp[idx], 0.0)

    def effective_cash(self, idx: Any = None) -> np.ndarray:
        t = self.table
        if idx is None:
            idx = slice(0, t.n)
        return t.cash[idx] + self.owed(idx)

    def settle_all(self) -> None:
        """Move all owed cash into the pages' cash (before a policy change)."""
        t = self.table
        n = t.n
        t.cash[:n] += self.owed()
        t.stamp[:n] = self.A

    # -- cash flows --------------------------------------------------------------
    def fund(self, idx: Any, weights: Any = None) -> None:
        """Move ω's cash to the pages ``idx`` (seeds): equal shares, or in
        proportion to ``weights``."""
        idx = np.asarray(idx, np.int64)
        if not len(idx) or self.omega == 0.0:
            return
        if weights is None:
            self.table.cash[idx] += self.omega / len(idx)
        else:
            w = np.asarray(weights, np.float64)
            total = w.sum()
            if not total > 0:
                raise ValueError("seed weights must be positive")
            self.table.cash[idx] += self.omega * (w / total)
        self.omega = 0.0

    def read(self, i: int, children: np.ndarray, n_dropped: int = 0, now: float = 0.0,
             same_host: np.ndarray | None = None, dropped_same_host: int = 0) -> None:
        """Read page ``i`` (call :meth:`leave` first, :meth:`join` after).

        Parameters
        ----------
        children : ndarray of int
            Distinct out-link targets, without ``i`` itself.
        n_dropped : int
            Links of ``i`` that were dropped after counting (over a host
            budget or the per-page cap): their shares go to ω.
        now : float
            Wall-clock time (ignored with ``cash_time``).
        same_host : ndarray of bool, optional
            For weighted links: which children are on ``i``'s host.
        dropped_same_host : int
            For weighted links: how many dropped links were on ``i``'s host.
        """
        t = self.table
        c = float(t.cash[i])
        self._history(i, c, self.clock if self.cash_time else now)
        n = len(children) + n_dropped
        if n == 0 or c == 0.0:
            self.omega += c
        else:
            dc = self.damping * c
            if self.weighted and same_host is not None:
                wi, we = self.internal_weight, self.external_weight
                w = np.where(same_host, wi, we)
                total = w.sum() + wi * dropped_same_host + we * (n_dropped - dropped_same_host)
                if total > 0:
                    give = dc * w / total
                    t.cash[children] += give
                    self.omega += c - float(give.sum())
                else:  # every link weighs 0: nothing to pass on
                    self.omega += c
            else:
                share = dc / n
                t.cash[children] += share
                self.omega += c - share * len(children)
        t.cash[i] = 0.0
        self.clock += c
        self.reads += 1
        if self.reads % self.omega_read_every == 0:
            self._omega_due = True  # read by join(i)

    def _history(self, i: int, c: float, now: float) -> None:
        cold = self.cold
        h_old = float(cold.get1("history", i))
        last = float(cold.get1("last_read", i))
        T = self.window
        if math.isnan(last):
            h = c
        elif T == math.inf:
            h = h_old + c
        else:
            delta = now - last
            h = h_old * (T - delta) / T + c if delta < T else c * T / delta
        cold.set1("history", i, h)
        cold.set1("last_read", i, now)
        self.G += h - h_old

    def read_omega(self) -> None:
        """Spread ω's cash over the target set (O(1)).

        Every member is owed what ``A`` actually grew by, rounding
        included: that rounding, multiplied by the size of the target set,
        would otherwise leave the books off by more at every read. ω gives
        exactly what the members are owed (``A`` rounded down if need be)
        and keeps the remainder, a rounding, for its next read."""
        n = self.n_target
        if n > 0 and self.omega > 0.0:
            a = self.A + self.omega / n
            while a > self.A and (a - self.A) * n > self.omega:
                a = math.nextafter(a, -math.inf)
            if a > self.A:
                self.omega -= (a - self.A) * n
                self.A = a
            self.omega_reads += 1

    # -- estimates ---------------------------------------------------------------
    def importance(self, idx: Any = None) -> np.ndarray:
        """``(H + C) / (G + sum C)`` over real pages (ω excluded)."""
        t = self.table
        if idx is None:
            idx = slice(0, t.n)
        denom = self.G + (1.0 - self.omega)
        if denom <= 0:
            return np.zeros(len(t.cash[idx]))
        history = self.cold.get("history", np.arange(t.n)[idx] if isinstance(idx, slice) else idx)
        return (history + self.effective_cash(idx)) / denom

    @property
    def error_bound(self) -> float:
        """Convergence estimate ``1/G`` (inf before any read)."""
        return 1.0 / self.G if self.G > 0 else math.inf

    def total_cash(self) -> float:
        """``sum C + sum owed + C_omega`` computed exactly-rounded (math.fsum)."""
        n = self.table.n
        return exact_sum(self.table.cash[:n]) + exact_sum(self.owed()) + self.omega

    def residual(self) -> float:
        """Deviation of the cash books from 1 (0 up to rounding)."""
        return self.total_cash() - 1.0
