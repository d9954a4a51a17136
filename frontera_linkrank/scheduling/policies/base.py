"""The crawl-policy protocol: a policy owns its keys and whatever state they need.

The frontier core builds one policy object when it opens a page database
(:class:`PolicyContext` gives it the page arrays, the AOPIC books, the
last ranking, the database and the settings) and then only calls the
methods below. A policy that needs no state of its own defines
:meth:`Policy.keys` and nothing else.

=======================  ==========================================================
call                     when, and what the policy does
=======================  ==========================================================
``Policy(ctx)``          the database opens: build the state (read stored links...)
:meth:`~Policy.keys`     pages enter or re-enter the queue: their float keys
:meth:`~Policy.on_batch` after each batch of fetched pages was read: update the
                         state; return the pages whose key rose besides the
                         links' targets (which the core offers anyway)
:meth:`~Policy.on_ranking`  a periodic ranking was installed: True to rebuild the queue
:meth:`~Policy.rekey`    before each batch is handed out: True when the keys were
                         changed in a way that may lower them (the queue is rebuilt)
:meth:`~Policy.estimate` the policy's importance estimate (the simulator reports it)
:meth:`~Policy.stats`    figures for the crawl's stats
:meth:`~Policy.save`     the crawl closes: store what reopening needs (its commit follows)
=======================  ==========================================================

The queue is lazy: between two rebuilds the key of a waiting page may only
grow (a page whose key rose is queued again; stale entries are dropped
when they surface).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ...numeric import value_at

if TYPE_CHECKING:
    from ...scoring.aopic import Aopic
    from ...scoring.ranker import Ranking, RankScores
    from ...storage.pagedb import PageDB
    from ...storage.vertices import VertexTable

KeyFunction = Callable[[np.ndarray], np.ndarray]
"""Keys of pages ``idx`` (an int64 array): float64, higher first."""


class PolicySettings(Protocol):
    """The settings fields a policy may read (a
    :class:`~frontera_linkrank.settings.LinkRankSettings` has them; this
    layer sits below the settings package, so it names only the fields)."""

    DAMPING: float
    PUSH_THRESHOLD: float
    HYBRID_WEIGHT: float


@dataclass
class PolicyContext:
    """What a policy is built from (the frontier core fills it)."""

    table: VertexTable
    aopic: Aopic
    ranks: RankScores
    settings: PolicySettings
    db: PageDB | None = None  # None: nothing stored yet (a policy built outside a crawl)


@dataclass
class Batch:
    """What one applied batch read, in the order it was read.

    Attributes
    ----------
    pages : int64 array
        Pages read (fetched: AOPIC moved their cash to their links).
    rows : list of int64 arrays
        Their out-links (distinct, no self-link), one array per page.
    late_pages : int64 array
        Pages read in an earlier batch that got more links; ``late_rows``
        holds their whole new rows.
    reads : list
        The read records themselves (status, time, content hash...), for
        features that need more than the links.
    """

    pages: np.ndarray
    rows: list[np.ndarray]
    late_pages: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    late_rows: list[np.ndarray] = field(default_factory=list)
    reads: list[Any] = field(default_factory=list)


class Policy:
    """A crawl policy over one crawl (see the module docstring).

    Subclasses set the class attributes and define :meth:`keys`; the other
    methods default to a policy without state.

    Attributes
    ----------
    name : str
        The value of ``LINKRANK_POLICY``.
    rankings : tuple of str
        Periodic rankings the policy needs (``"pagerank"``, ``"hits"``).
    vectors : tuple of str
        Ranking vectors its keys read (``"pagerank"``, ``"authority"``,
        ``"hub"``), held in memory.
    reads_on_ranking : tuple of str
        Ranking vectors :meth:`on_ranking` reads besides ``vectors``; the
        ranking it is given holds only those two kinds (the others are
        stored and let go first, so that a queue rebuild's temporaries
        do not come on top of them).
    cash_keys : bool
        Keys are AOPIC cash, so hosts are split into the classes of
        :func:`host_class` and small rises are not requeued
        (``LINKRANK_REQUEUE_TOLERANCE``).
    uses_hints : bool
        Keys read the pages' ``hint`` (content scores): seeds get a hint of
        at least 1 and crawled pages pass their score on to their links.
    estimate_name : str
        What :meth:`estimate` returns: ``"importance"`` (AOPIC), a ranking
        vector (``"pagerank"``, ``"authority"``) or the policy's own.
    """

    name: ClassVar[str] = ""
    rankings: ClassVar[tuple[str, ...]] = ()
    vectors: ClassVar[tuple[str, ...]] = ()
    reads_on_ranking: ClassVar[tuple[str, ...]] = ()
    cash_keys: ClassVar[bool] = False
    uses_hints: ClassVar[bool] = False
    estimate_name: ClassVar[str] = "importance"

    def __init__(self, ctx: PolicyContext) -> None:
        self.table = ctx.table
        self.aopic = ctx.aopic
        self.ranks = ctx.ranks
        self.settings = ctx.settings

    def keys(self, idx: np.ndarray) -> np.ndarray:
        """Float64 keys of pages ``idx``, higher first."""
        raise NotImplementedError

    def on_batch(self, batch: Batch) -> np.ndarray | None:
        """A batch was read; returns pages whose key rose (or None)."""
        return None

    def on_ranking(self, ranking: Ranking) -> bool:
        """A ranking was installed; True when the queue must be rebuilt."""
        return False

    def rekey(self) -> bool:
        """Called before each batch is handed out; True when keys changed
        so that some may have fallen (the queue is then rebuilt)."""
        return False

    def estimate(self, idx: np.ndarray) -> np.ndarray:
        """The policy's importance estimate of pages ``idx`` (default: AOPIC's)."""
        return self.aopic.importance(idx)

    def stats(self) -> dict[str, float]:
        """Figures for the crawl's stats (none by default)."""
        return {}

    def save(self) -> None:
        """The crawl closes: store what the next open needs to start where
        this one ends (nothing by default: the state is rebuilt)."""


def host_class(policy: type[Policy] | Policy, aopic: Aopic) -> Callable[[np.ndarray], np.ndarray]:
    """Queue classes of hosts (an array of host ids): 0 for a host whose
    unfetched pages are owed ω's cash (their keys exclude the accumulator
    ``A``, added back as the class offset), else 1. Only policies keyed
    by cash use classes."""
    if not policy.cash_keys or aopic.policy in ("all", "unfetched"):
        return lambda h: np.zeros(len(h), np.int8)
    if aopic.policy == "fetched":
        return lambda h: np.ones(len(h), np.int8)

    def classes(h: np.ndarray) -> np.ndarray:
        return np.where(value_at(aopic.host_target, h, False), 0, 1).astype(np.int8)

    return classes


def queue_keys(policy: Policy, aopic: Aopic, hosts: np.ndarray, pages: np.ndarray, n_hosts: int) -> np.ndarray:
    """The keys the queue compares for ``pages`` (of hosts ``hosts``, a
    host id per page): the policy's key plus its host class's offset, the
    accumulator ``A`` for hosts owed ω's cash through it (class 0)."""
    keys = np.asarray(policy.keys(pages), np.float64)
    if policy.cash_keys and aopic.A and len(pages):
        owed = host_class(policy, aopic)(np.arange(n_hosts)) == 0
        keys = keys + np.where(owed[hosts], aopic.A, 0.0)
    return keys
