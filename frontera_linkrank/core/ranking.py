"""The ranking schedule: when the periodic PageRank/HITS of the known graph
runs, and installing its result.

A ranking starts when the crawl has grown by ``LINKRANK_RANK_GROWTH`` of
the pages crawled at the last one and by at least
``LINKRANK_RANK_EVERY_PAGES`` pages, or ``LINKRANK_RANK_INTERVAL`` seconds
have passed: every 1,000 pages up to 10,000 crawled, then every 10% with
the defaults, so all the rankings together cost about 1 + 1/growth (11)
times one ranking of the final graph (a geometric series; a background
ranking still running delays the next one). It runs in a background thread on its own LMDB snapshot
(``LINKRANK_RANK_BACKGROUND``) or inline. When the crawl closes, the
pages crawled since the last ranking are ranked once more (inline), so the
stored rankings cover what the crawl found, however short it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..scoring.ranker import (
    BackgroundRanker,
    RankConfig,
    Ranking,
    RankScores,
    content_scores,
    load_stored,
    rank_snapshot,
    store,
    store_vector,
)
from ..storage.pagedb import PageDB
from .counters import Counters

if TYPE_CHECKING:
    from ..settings import LinkRankSettings

logger = logging.getLogger(__name__)


class RankingSchedule:
    """Periodic rankings of a crawl (see the module docstring).

    Parameters
    ----------
    db : PageDB
    settings : LinkRankSettings
    counters : Counters
        ``pages_crawled`` drives the schedule; ``rankings`` counts installs.
    now : float
        The clock at open.
    keep : sequence of str
        Ranking vectors to hold in memory (what the policy's keys and the
        recrawler read); the others stay in the page database.
    told : sequence of str
        Vectors that ``installed`` (see :meth:`step`) reads besides those
        kept; it is given no other.
    """

    def __init__(self, db: PageDB, settings: LinkRankSettings, counters: Counters, now: float,
                 keep: Sequence[str] = (), told: Sequence[str] = ()) -> None:
        s = self.settings = settings
        self.told = tuple(told)
        self.db = db
        self.counters = counters
        self.ranks = RankScores(load_stored(db, keep) if s.RANK_ALGORITHMS else None, keep,
                                lambda name: db.read_scores(name)[0])
        self.config = RankConfig.from_settings(s) if s.RANK_ALGORITHMS else None
        self.ranker = BackgroundRanker(db, self.config) if self.config and s.RANK_BACKGROUND else None
        crawled = counters.get("pages_crawled", 0)
        # A crawl with pages but no ranking yet (say, switched to a ranked
        # policy) ranks at once; otherwise after the configured interval.
        self.mark = (-1 if crawled and self.ranks.n == 0 else crawled, now)

    @property
    def running(self) -> bool:
        """A background ranking is running (its links and vectors are in memory)."""
        return self.ranker is not None and self.ranker.running

    def _due(self, crawled: int, now: float) -> bool:
        s = self.settings
        last_crawled, last_time = self.mark
        if crawled == last_crawled:
            return False
        grown = crawled - last_crawled
        return bool(
            (s.RANK_EVERY_PAGES and grown >= max(s.RANK_EVERY_PAGES, s.RANK_GROWTH * last_crawled))
            or (s.RANK_INTERVAL and now - last_time >= s.RANK_INTERVAL)
            or last_crawled < 0
        )

    def step(self, now: float, commit: Callable[[], None], installed: Callable[[Ranking], None]) -> None:
        """Install a finished ranking (``installed`` is told); start the next
        one when it is due (after ``commit``: its snapshot then holds
        everything crawled so far)."""
        if self.config is None:
            return
        if self.ranker is not None:
            self._store_stashed()
            done = self.ranker.poll()
            if done is not None:
                self._store_stashed()
                self._install(done, installed)
            if self.ranker.running:
                return
        crawled = self.counters.get("pages_crawled", 0)
        if not self._due(crawled, now):
            return
        commit()
        self.mark = (crawled, now)
        version = self.ranks.version + 1
        # Content scores are copied now: the page table changes while a
        # background ranking runs.
        scores = content_scores(self.db, self.db.n_pages) if self.config.personalized else None
        if self.ranker is not None:
            self.db.reserve()  # commits meanwhile should not need to grow the map
            self.ranker.start(version, self.ranks.ranking, scores)
        else:
            ranking = rank_snapshot(self.db, self.config, version=version, previous=self.ranks.ranking, scores=scores,
                                    stash=self._store)
            self._install(ranking, installed)

    def _install(self, ranking: Ranking, installed: Callable[[Ranking], None]) -> None:
        """Store a finished ranking and tell ``installed`` (re-keys the
        queue); the vectors neither held nor in ``told`` are let go first,
        so that the re-keying's temporaries do not come on top of them."""
        store(self.db, ranking)
        for name in (set(self.ranks.keep) | set(self.told)) & (set(ranking.info) - set(ranking.vectors)):
            values, info = self.db.read_scores(name)  # stored while the ranking ran
            if values is not None and info.get("version") == ranking.version:
                ranking.vectors[name] = values
        self.ranks.install(ranking)
        for name in set(ranking.vectors) - set(self.ranks.keep) - set(self.told):
            del ranking.vectors[name]
        installed(ranking)
        self.counters.add("rankings")
        for name, info in ranking.info.items():
            if name != "hub":
                logger.info(
                    "ranking %d: %s over %d pages, %d links: %d iterations (%s), %.2f s",
                    ranking.version, name, ranking.n_pages, info["n_links"], info["iterations"],
                    info["stopped"], info["seconds"],
                )

    def finish(self, commit: Callable[[], None]) -> None:
        """At close: rank inline (after ``commit``) if pages were crawled
        since the last ranking started; a background ranking is cancelled
        first (this one covers more)."""
        if self.config is None:
            return
        if self.ranker is not None:
            self.ranker.cancel()
        crawled = self.counters.get("pages_crawled", 0)
        if crawled == self.mark[0] or not crawled:
            return
        commit()
        scores = content_scores(self.db, self.db.n_pages) if self.config.personalized else None
        ranking = rank_snapshot(self.db, self.config, version=self.ranks.version + 1, previous=self.ranks.ranking,
                                scores=scores, stash=self._store)
        self.mark = (crawled, self.mark[1])
        self._install(ranking, lambda r: None)

    def _store(self, name: str, values: np.ndarray, info: dict[str, Any]) -> None:
        """Store a vector a ranking finished before its end (it is let go
        while the ranking goes on)."""
        store_vector(self.db, name, values, info)

    def _store_stashed(self) -> None:
        """Store what the background ranking has finished so far."""
        assert self.ranker is not None
        self.ranker.store_stashed(self._store)

    def cancel(self) -> None:
        """Stop a background ranking (it holds a snapshot of the database)."""
        if self.ranker is not None:
            self.ranker.cancel()
