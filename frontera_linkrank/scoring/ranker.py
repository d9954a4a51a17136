"""PageRank and HITS over a page database, once or periodically during a crawl.

:func:`rank_snapshot` computes the rankings on one LMDB read transaction,
so every product of every iteration sees the same commit (Aduana's
PageRank turned every value into NaN when pages were added while it ran:
each pass saw another snapshot). Pages committed later are simply beyond
the vectors' length; :class:`RankScores` gives them a defined value.

:class:`BackgroundRanker` runs :func:`rank_snapshot` in a thread with its
own snapshot while the crawl goes on: the products are scipy/numpy calls
that release the GIL for most of their time, and the crawl's thread only
waits for the (short) hand-over of the finished vectors. The snapshot ends
once the links are loaded (streamed links are read from a copy in a
temporary file), so the crawl's commits meanwhile reuse the pages they
free.

Score vectors are stored in the page database's ``scores`` table under the
names ``pagerank``, ``authority`` and ``hub``, each with an info record
(version, time, pages covered, iterations, what stopped the iteration).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..numeric import top_k
from ..storage.vectors import top_rows
from .hits import hits
from .links import database_links, snapshot_pages
from .pagerank import pagerank
from .pattern import preload_scipy

if TYPE_CHECKING:
    import lmdb

    from ..storage.pagedb import PageDB

logger = logging.getLogger(__name__)


class RankSettings(Protocol):
    """What a ranking reads from the crawl's settings (a
    :class:`~frontera_linkrank.settings.LinkRankSettings` has these; scoring
    sits below the settings package, so it names only the fields)."""

    RANK_ALGORITHMS: list[str]
    RANK_PERSONALIZED: bool
    RANK_INTER_HOST: bool
    RANK_EDGES: str
    RANK_MEMORY_LIMIT: int
    DAMPING: float
    RANK_TOLERANCE: float
    RANK_MAX_ITERATIONS: int

ALGORITHMS = ("pagerank", "hits")
"""Rankings :func:`rank_snapshot` computes (``"hits"`` gives authority and hub)."""
EDGE_MODES = ("auto", "memory", "stream")
"""How :func:`~.links.database_links` reads the links (``RankConfig.edges``)."""


@dataclass
class RankConfig:
    """What to compute and how: the ``LINKRANK_RANK_*`` settings (and
    ``LINKRANK_DAMPING``), built with :meth:`from_settings`.

    Attributes
    ----------
    algorithms : tuple of str
        Some of :data:`ALGORITHMS`.
    personalized : bool
        Teleport (and flow authority back) by the pages' content scores.
    inter_host : bool
        Only links between different hosts.
    edges : {"auto", "memory", "stream"}
        How the links are read (:data:`EDGE_MODES`).
    memory_limit : int
        ``edges="auto"`` loads links taking up to this many bytes.
    damping : float
        PageRank damping.
    tol : float
        Stop when the L1 change of an iteration is below this.
    max_iter : int
        At most this many iterations.
    """

    algorithms: tuple[str, ...]
    personalized: bool
    inter_host: bool
    edges: str
    memory_limit: int
    damping: float
    tol: float
    max_iter: int

    @classmethod
    def from_settings(cls, s: RankSettings, algorithms: Sequence[str] | None = None) -> RankConfig:
        """From :class:`~frontera_linkrank.settings.LinkRankSettings`;
        ``algorithms`` replaces ``LINKRANK_RANK_ALGORITHMS``."""
        return cls(
            algorithms=tuple(algorithms or s.RANK_ALGORITHMS),
            personalized=s.RANK_PERSONALIZED,
            inter_host=s.RANK_INTER_HOST,
            edges=s.RANK_EDGES,
            memory_limit=s.RANK_MEMORY_LIMIT,
            damping=s.DAMPING,
            tol=s.RANK_TOLERANCE,
            max_iter=s.RANK_MAX_ITERATIONS,
        )


@dataclass
class Ranking:
    """Score vectors of one recomputation, covering pages ``0 .. n_pages-1``."""

    version: int
    time: float
    n_pages: int
    vectors: dict[str, np.ndarray]  # name -> float64 array of length n_pages
    info: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> details (JSON-serialisable)


def content_scores(db: PageDB, n: int) -> np.ndarray:
    """Copy of the spider's content scores of the first ``n`` pages (nan: none)."""
    return db.vertices.score[:n].astype(np.float64)


class Cancelled(Exception):
    """A ranking was cancelled (the crawl is stopping)."""


Stash = Callable[[str, np.ndarray, dict[str, Any]], None]
"""``stash(name, values, info)``: takes a finished vector off a ranking still running."""


def rank_snapshot(db: PageDB, config: RankConfig, txn: lmdb.Transaction | None = None, version: int | None = None,
                  previous: Ranking | None = None, scores: np.ndarray | None = None,
                  callback: Callable[[int, float], None] | None = None,
                  snapshot: Callable[[], AbstractContextManager[Any]] | None = None,
                  stash: Stash | None = None) -> Ranking:
    """Compute the rankings of ``config`` on one snapshot of ``db``.

    Parameters
    ----------
    db : PageDB
    config : RankConfig
    txn : lmdb.Transaction, optional
        Read transaction to use throughout (default: one opened by
        ``snapshot`` and ended as soon as the links are loaded, or copied
        when they are streamed).
    version : int, optional
        Version of the result (default: one more than the stored one).
    previous : Ranking, optional
        Last result: its PageRank starts the iteration (fewer steps).
    scores : ndarray, optional
        Content scores (default: read from ``db``'s page table).
    callback : callable(iteration, delta), optional
        Called after every iteration (it may raise to cancel).
    snapshot : callable, optional
        Opens the read transaction when ``txn`` is not given: ``db.snapshot``
        (the default) in the writer's thread, ``db.reader`` in another.
    stash : callable(name, values, info), optional
        Given PageRank as soon as it is computed when HITS follows, so that
        it is stored (and let go) while HITS runs; the result then has its
        info and not its vector.

    Returns
    -------
    Ranking
    """
    if txn is None:
        with (snapshot or db.snapshot)() as own:
            inputs = _inputs(db, config, own, version, previous, scores, spill=db.path)
        # The links are loaded or copied: the snapshot ends before the
        # iterations. LMDB cannot reuse a page freed after a reader began
        # while it lasts, so a long one makes the crawl's commits grow the
        # file.
        return _rank(config, inputs, callback, stash)
    return _rank(config, _inputs(db, config, txn, version, previous, scores), callback, stash)


def _inputs(db: PageDB, config: RankConfig, txn: lmdb.Transaction, version: int | None,
            previous: Ranking | None, scores: np.ndarray | None, spill: str | None = None) -> list[Any]:
    """What a ranking reads from snapshot ``txn``: ``[started, n, version,
    scores, links, x0]``; all copies but streamed links read in place (``x0``, the
    previous PageRank, is only read: pages beyond it start at 1/n)."""
    started = time.time()
    n = snapshot_pages(db, txn)
    if version is None:
        version = stored_version(db, txn) + 1
    if scores is None and config.personalized:
        scores = content_scores(db, n)
    links = database_links(db, txn, n, config.edges, config.inter_host, config.memory_limit, spill)
    x0 = None
    if "pagerank" in config.algorithms:
        x0 = previous.vectors.get("pagerank") if previous is not None else None
        if x0 is None:  # the stored one: the scheduler need not hold it
            x0, _ = db.read_scores("pagerank", txn)
    return [started, n, version, scores, links, x0]


def _rank(config: RankConfig, inputs: list[Any], callback: Callable[..., Any] | None, stash: Stash | None) -> Ranking:
    """The rankings of ``inputs`` (what :func:`_inputs` read, emptied here
    so that the previous PageRank, handed over to :func:`pagerank`, is let
    go once copied into its first vector)."""
    started, n, version, scores, links = inputs[:5]
    start_from = inputs[5:]
    inputs.clear()
    common = {
        "version": version,
        "time": started,
        "n_links": int(links.n_links),
        "edges": "stream" if links.streamed else "memory",
        "inter_host": config.inter_host,
        "personalized": config.personalized,
    }
    vectors, info = {}, {}
    if "pagerank" in config.algorithms:
        teleport = None
        if config.personalized:
            assert scores is not None  # read above
            teleport = np.where(np.isfinite(scores) & (scores > 0), scores, 0.0)
            if not teleport.sum() > 0:
                logger.warning("personalised PageRank: no page has a positive content score yet; uniform teleport")
                teleport = None
        r = pagerank(links, config.damping, teleport, config.tol, config.max_iter, x0=start_from.pop(),
                     callback=callback)
        info["pagerank"] = {
            **common, "damping": config.damping, "iterations": r.iterations, "delta": r.delta,
            "stopped": r.stopped, "seconds": r.seconds,
            "personalized": config.personalized and teleport is not None,
        }  # fmt: skip
        if stash is not None and "hits" in config.algorithms:
            stash("pagerank", r.scores, info["pagerank"])
        else:
            vectors["pagerank"] = r.scores
        del r
    if "hits" in config.algorithms:
        h = hits(links, scores if config.personalized else None, config.tol, config.max_iter, callback)
        vectors["authority"] = h.authorities
        vectors["hub"] = h.hubs
        info["authority"] = info["hub"] = {
            **common, "iterations": h.iterations, "delta": h.delta, "stopped": h.stopped, "seconds": h.seconds,
        }  # fmt: skip
    return Ranking(version, started, n, vectors, info)


def stored_version(db: PageDB, txn: lmdb.Transaction | None = None) -> int:
    """Version of the last stored ranking (0 if none)."""
    best = 0
    for name in ("pagerank", "authority"):
        info = db.score_info(name, txn)
        if info:
            best = max(best, int(info.get("version", 0)))
    return best


TOP_PAGES = 50
"""Pages of the top list stored with each vector (what a viewer shows)."""


def store(db: PageDB, ranking: Ranking) -> None:
    """Write a ranking's vectors into ``db`` (writer), one transaction
    each (:func:`store_vector`)."""
    for name, values in ranking.vectors.items():
        store_vector(db, name, values, ranking.info.get(name, {}))


def store_vector(db: PageDB, name: str, values: np.ndarray, info: dict[str, Any]) -> None:
    """Write one vector into ``db`` (writer) with the list of its top
    :data:`TOP_PAGES` pages (a viewer reads it instead of the vector)."""
    best = top_k(values, TOP_PAGES)
    db.write_scores({name: values}, info, {name: top_rows(name, values, best, db.urls(best))})


VECTORS = ("pagerank", "authority", "hub")
"""The vectors a ranking stores (``"hits"`` gives authority and hub)."""


def load_stored(db: PageDB, names: Sequence[str] = VECTORS) -> Ranking | None:
    """The rankings stored in ``db`` as one :class:`Ranking` (vectors may
    cover different numbers of pages) holding the vectors ``names`` (the
    info of every stored one), or None."""
    vectors: dict[str, np.ndarray] = {}
    info: dict[str, dict[str, Any]] = {}
    with db.snapshot() as txn:
        for name in VECTORS:
            meta = db.score_info(name, txn)
            if meta is not None:
                info[name] = meta
                if name in names:
                    values, _ = db.read_scores(name, txn)
                    if values is not None:
                        vectors[name] = values
    if not info:
        return None
    version = max(int(m.get("version", 0)) for m in info.values())
    when = max(float(m.get("time", 0)) for m in info.values())
    return Ranking(version, when, max(int(m.get("n_pages", 0)) for m in info.values()), vectors, info)


STASH_WAIT = 5.0
"""Seconds a background ranking waits for the writer to store its PageRank
before it goes on to HITS (holding it meanwhile)."""


class BackgroundRanker:
    """One recomputation at a time in a daemon thread, with its own snapshot.

    ``start`` returns at once; ``poll`` returns the finished
    :class:`Ranking` once (or None). A failure is logged and reported by
    ``poll`` as None; the crawl goes on with the previous scores.
    """

    def __init__(self, db: PageDB, config: RankConfig) -> None:
        self.db = db
        self.config = config
        self._thread: threading.Thread | None = None
        self._result: Ranking | None = None
        self._error: Exception | None = None
        # A vector the thread finished before its end, and its wait for the writer to store it.
        self._stashed: list[tuple[str, np.ndarray, dict[str, Any]]] = []
        self._stored = threading.Event()
        self._cancel = threading.Event()
        self.started_at: float | None = None
        # Closing the database stops a running ranking and waits for it to
        # end: its snapshot must not outlive the environment.
        db.on_close(self.cancel)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, version: int, previous: Ranking | None = None, scores: np.ndarray | None = None) -> bool:
        if self.running:
            return False
        preload_scipy()  # in the crawl's thread: see preload_scipy
        self._result = self._error = None
        self._stashed = []
        self._cancel.clear()
        self.started_at = time.time()

        def check(_iteration: int, _delta: float) -> None:
            if self._cancel.is_set():
                raise Cancelled()

        def stash(name: str, values: np.ndarray, info: dict[str, Any]) -> None:
            # The next vectors are made once the writer has stored this one
            # and let it go (it stores it at its next step), or after
            # STASH_WAIT if it does not step meanwhile.
            self._stored.clear()
            self._stashed.append((name, values, info))
            del values
            waited = time.monotonic() + STASH_WAIT
            while not self._stored.wait(0.1) and time.monotonic() < waited:
                check(0, 0.0)

        def run() -> None:
            try:
                self._result = rank_snapshot(self.db, self.config, None, version, previous, scores, check,
                                             snapshot=self.db.reader, stash=stash)
            except Cancelled:
                logger.info("ranking cancelled")
            except Exception as e:  # noqa: BLE001 - reported, the crawl goes on
                logger.exception("ranking failed")
                self._error = e

        thread = self._thread = threading.Thread(target=run, name="linkrank-ranker", daemon=True)
        thread.start()
        return True

    def store_stashed(self, store: Stash) -> None:
        """``store(name, values, info)`` each vector the running ranking
        finished before its end and waits on (in the writer's thread);
        then the ranking goes on without it."""
        if not self._stashed:
            return
        try:
            while self._stashed:
                store(*self._stashed.pop(0))
        finally:
            self._stored.set()

    def poll(self) -> Ranking | None:
        """The finished ranking (once), or None if none is ready."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread = None
        result, self._result = self._result, None
        return result

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def cancel(self) -> None:
        """Stop a running ranking at its next iteration and wait for it
        (what it finished and left to store is let go)."""
        self._cancel.set()
        self.join()
        self._thread = None
        self._stashed = []


class RankScores:
    """The last ranking as the scheduler sees it: per-page values, with a
    defined value for pages discovered after the ranking was computed.

    ``values(name, idx)`` is the stored score for pages the ranking
    covered and ``fill`` (default 0) for newer pages, never nan. Only the
    vectors named in ``keep`` are held in memory (the others are in the
    page database): what the crawl policy's keys and the recrawler read.
    """

    def __init__(self, ranking: Ranking | None = None, keep: Sequence[str] = VECTORS,
                 load: Callable[[str], np.ndarray | None] | None = None) -> None:
        self.keep = tuple(keep)
        self.load = load  # reads a stored vector that is not kept (for an occasional reader)
        self.ranking: Ranking | None = None
        if ranking is not None:
            self.install(ranking)

    def install(self, ranking: Ranking) -> None:
        """Hold ``ranking`` (its vectors in ``keep``)."""
        vectors = {k: v for k, v in ranking.vectors.items() if k in self.keep}
        self.ranking = Ranking(ranking.version, ranking.time, ranking.n_pages, vectors, ranking.info)

    @property
    def n(self) -> int:
        return 0 if self.ranking is None else self.ranking.n_pages

    @property
    def version(self) -> int:
        return 0 if self.ranking is None else self.ranking.version

    def vector(self, name: str) -> np.ndarray | None:
        """Vector ``name`` of the last ranking: the copy held, else the one
        stored (None if there is none)."""
        kept = None if self.ranking is None else self.ranking.vectors.get(name)
        return kept if kept is not None or self.load is None else self.load(name)

    def values(self, name: str, idx: Any, fill: float = 0.0) -> np.ndarray:
        idx = np.asarray(idx, np.int64)
        out = np.full(len(idx), float(fill))
        if self.ranking is None or (name not in self.ranking.vectors and name not in self.ranking.info):
            return out
        vec = self.vector(name)
        if vec is None:
            return out
        known = idx < len(vec)
        out[known] = vec[idx[known]]
        return out
