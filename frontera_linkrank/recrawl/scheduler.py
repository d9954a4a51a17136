"""When to fetch a crawled page again (docs/algorithms.md §5).

:class:`Refresher` keeps every crawled page in a :class:`~.refresh.RefreshIndex`
by *due time* and hands out the most overdue ones. The due time depends on
the policy (``LINKRANK_RECRAWL_POLICY``):

``value``
    when the value of a refresh ``V(τ) = (w/λ)[1 - (1 + λτ)e^{-λτ}]``
    reaches a threshold ``μ`` (``w``: importance, ``λ``: estimated change
    rate): important pages that change often come first, and a page that
    changes far more often than it can be refreshed is not chased.
``uniform``
    every page once per period;
``change_rate``
    each page in proportion to its estimated change rate (intuitive, but
    worse than uniform for freshness: Cho & Garcia-Molina 2003).

Each policy has one free parameter (``μ``, the period, the constant of
proportionality); :meth:`Refresher.calibrate` sets it so that pages come
due at the rate the crawl can spend on refreshes, and recomputes every
due time (vectorised, O(pages)). Between calibrations a visited page is
rescheduled with the current parameter.

Change rates come from each page's visit history: the bias-reduced
estimator for regular visits, the maximum-likelihood one otherwise, with
a prior (``prior_visits`` pseudo-visits at rate ``prior_rate``) for pages
visited few times (:mod:`.estimators`).

Examples
--------
>>> import numpy as np
>>> r = Refresher("value", prior_rate=1 / 3600)
>>> w, lam, last = np.array([0.5, 0.1, 0.4]), np.array([1 / 60, 1 / 60, 1 / 86400]), np.zeros(3)
>>> r.calibrate(w, lam, bandwidth=1 / 120)  # a refresh every two minutes
>>> r.schedule(np.arange(3), last, w, lam)
>>> r.take(3, now=3600.0)  # the unimportant page changing every minute waits
[0, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from .estimators import estimate
from .refresh import RefreshIndex, due_interval, solve_threshold

POLICIES = ("value", "uniform", "change_rate")
THRESHOLD_SAMPLE = 100_000  # pages that set the value policy's threshold


class Refresher:
    """Refresh order of crawled pages.

    Parameters
    ----------
    policy : {"value", "uniform", "change_rate"}
    prior_rate : float
        Change rate (per second) assumed for a page not yet seen changing.
    prior_visits : float
        Weight of that prior in visits.
    min_interval : float
        Never due sooner than this many seconds after the last fetch.
    """

    def __init__(
        self, policy: str = "value", prior_rate: float = 1 / 86400, prior_visits: float = 1.0, min_interval: float = 0.0
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}")
        self.policy = policy
        self.prior_rate = float(prior_rate)
        self.prior_visits = float(prior_visits)
        self.min_interval = float(min_interval)
        self.index = RefreshIndex()
        self.param: float | None = None  # μ, the period, or the proportionality constant
        self.bandwidth: float | None = None

    def __len__(self) -> int:
        return len(self.index)

    # -- change rates ------------------------------------------------------------------
    def change_rate(self, visits: np.ndarray) -> float:
        """Estimated change rate from a :data:`~frontera_linkrank.storage.pagedb.VISIT`
        history (the prior alone for none)."""
        if not len(visits):
            return self.prior_rate
        return float(estimate(visits["interval"], visits["changed"].astype(bool), self.prior_rate, self.prior_visits))

    # -- due times --------------------------------------------------------------------
    def calibrate(self, w: ArrayLike, lam: ArrayLike, bandwidth: float) -> None:
        """Set the policy's parameter so that the pages with importance ``w``
        and change rates ``lam`` come due ``bandwidth`` times per second."""
        w = np.asarray(w, np.float64)
        lam = np.asarray(lam, np.float64)
        self.bandwidth = float(bandwidth)
        if not len(w) or not bandwidth > 0:
            self.param = None
        elif self.policy == "value":
            # Each bisection step is a pass over the pages: beyond
            # THRESHOLD_SAMPLE pages, a fixed random sample stands for them
            # (its share of the bandwidth); a 0.01% width is plenty.
            if len(w) > THRESHOLD_SAMPLE:
                pick = np.random.default_rng(0).choice(len(w), THRESHOLD_SAMPLE, replace=False)
                w, lam, bandwidth = w[pick], lam[pick], bandwidth * THRESHOLD_SAMPLE / len(w)
            self.param = solve_threshold(np.maximum(w, 1e-300), lam, bandwidth, rtol=1e-4)
        elif self.policy == "uniform":
            self.param = len(w) / bandwidth  # period
        else:
            self.param = float(lam.sum()) / bandwidth  # interval = param / λ

    def intervals(self, w: ArrayLike, lam: ArrayLike) -> np.ndarray:
        """Seconds from the last fetch to the next refresh (inf: never)."""
        w = np.asarray(w, np.float64)
        lam = np.asarray(lam, np.float64)
        if self.param is None:
            return np.full(len(w), math.inf)
        if self.policy == "value":
            tau = due_interval(np.maximum(w, 1e-300), lam, self.param)
        elif self.policy == "uniform":
            tau = np.full(len(w), self.param)
        else:
            with np.errstate(divide="ignore"):
                tau = np.where(lam > 0, self.param / np.where(lam > 0, lam, 1.0), math.inf)
        return np.maximum(tau, self.min_interval)

    def schedule(self, pages: ArrayLike, last: ArrayLike, w: ArrayLike, lam: ArrayLike) -> None:
        """(Re)schedule ``pages`` last fetched at ``last``."""
        due = np.asarray(last, np.float64) + self.intervals(w, lam)
        for p, d in zip(np.asarray(pages).tolist(), due.tolist()):
            self.index.schedule(p, d)

    def rebuild(self, pages: ArrayLike, last: ArrayLike, w: ArrayLike, lam: ArrayLike) -> None:
        """Replace the index with ``pages`` (after a calibration)."""
        self.index.replace(pages, np.asarray(last, np.float64) + self.intervals(w, lam))

    def take(self, n: int, now: float, skip: Callable[[int], bool] | None = None) -> list[int]:
        """Up to ``n`` due pages, most overdue first (``skip(page)``: keep
        for later, say its host is busy)."""
        return self.index.pop_due(now, n, skip)
