"""Which crawled page to refresh next (docs/algorithms.md §5).

The value of refreshing page ``i`` now, ``τ`` after its last fetch, with
importance ``w`` and change rate ``λ``, is

    V(τ) = (w / λ) · [1 - (1 + λτ) e^{-λτ}]

V grows with τ (from 0 to ``w/λ``), so instead of evaluating it for every
page at every decision, each page gets a *due time*: the moment its value
reaches a threshold ``μ``, ``last + τ*`` with ``V(τ*) = μ``. Pages wait in
a heap ordered by due time (:class:`RefreshIndex`); the next refresh is the
most overdue page, found in O(log n). ``μ`` sets how often pages come due
overall: :func:`solve_threshold` picks it so that the refresh rate matches
the bandwidth given to refreshes.

>>> import numpy as np
>>> w, lam = np.array([1.0, 1.0]), np.array([0.1, 1.0])
>>> tau = due_interval(w, lam, 0.2)
>>> np.allclose(refresh_value(w, lam, tau), 0.2)
True
>>> bool(tau[1] < tau[0])  # the page that changes faster is due sooner
True
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike


def _f(x: np.ndarray) -> np.ndarray:
    """1 - (1 + x) e^{-x}, accurate for small x."""
    return -np.expm1(-x) - x * np.exp(-x)


def refresh_value(w: ArrayLike, lam: ArrayLike, tau: ArrayLike) -> np.ndarray:
    """``V(τ)`` for arrays of importance, change rate and time since fetch."""
    w, lam, tau = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (w, lam, tau)))
    x = lam * tau
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(lam > 0, w * _f(x) / np.where(lam > 0, lam, 1.0), 0.0)
    return v


# Inverse of _f by table: f is increasing from 0 to 1; a log-spaced grid of
# x and linear interpolation give a starting point that Newton's method
# (f' = x e^{-x}) refines to machine precision in a few steps.
_XGRID = np.logspace(-7, np.log10(700.0), 4096)


def _f_inverse(t: np.ndarray) -> np.ndarray:
    """x with 1 - (1 + x) e^{-x} = t, for t in (0, 1)."""
    fgrid = _f(_XGRID)
    x = np.interp(t, fgrid, _XGRID)
    small = t < fgrid[0]
    x[small] = np.sqrt(2.0 * t[small])  # f(x) ~ x^2/2
    for _ in range(6):
        fx = _f(x)
        dx = (fx - t) / np.maximum(x * np.exp(-x), 1e-300)
        x = np.clip(x - dx, 0.5 * x, 2.0 * x + 1e-12)  # keep steps sane far from the root
    return x


def due_interval(w: ArrayLike, lam: ArrayLike, mu: float) -> np.ndarray:
    """Time ``τ*`` after a fetch at which ``V(τ*) = mu`` (inf if never)."""
    w, lam = np.broadcast_arrays(np.asarray(w, np.float64), np.asarray(lam, np.float64))
    target = np.full(w.shape, np.inf)
    ok = (w > 0) & (lam > 0)
    target[ok] = mu * lam[ok] / w[ok]  # need f(x) = target, f < 1
    reach = ok & (target < 1.0)
    x = np.full(w.shape, np.inf)
    if reach.any():
        x[reach] = _f_inverse(target[reach])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(reach, x / np.where(lam > 0, lam, 1.0), np.inf)


def solve_threshold(
    w: ArrayLike, lam: ArrayLike, rate: float, lo: float = 1e-300, hi: float | None = None, rtol: float = 1e-9
) -> float:
    """Threshold ``μ`` at which pages come due ``rate`` times per unit time
    in total (``Σ 1/τ*(μ) = rate``), by bisection in log space to a
    relative width ``rtol`` (each step is a pass over all pages)."""
    w = np.asarray(w, np.float64)
    lam = np.asarray(lam, np.float64)
    if rate <= 0 or not len(w):
        return math.inf
    hi = hi or float(np.max(np.where(lam > 0, w / np.where(lam > 0, lam, 1), 0))) or 1.0

    def total(mu: float) -> float:
        return float((1.0 / due_interval(w, lam, mu)).sum())

    if total(lo) < rate:
        return lo  # even the lowest threshold cannot use the bandwidth
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if total(mid) > rate:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + rtol:
            break
    return math.sqrt(lo * hi)


class RefreshIndex:
    """Crawled pages by due time; lazily updated like the frontier queue.

    >>> idx = RefreshIndex()
    >>> idx.schedule(7, 10.0); idx.schedule(8, 5.0); idx.schedule(7, 3.0)
    >>> idx.pop_due(now=6.0, n=10)
    [7, 8]
    >>> idx.pop_due(now=100.0, n=10)
    []
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._due: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self._due)

    def schedule(self, page: int, due: float) -> None:
        """(Re)set ``page``'s due time (inf: never)."""
        if math.isinf(due) or math.isnan(due):
            self._due.pop(page, None)
            return
        self._due[page] = due
        heapq.heappush(self._heap, (due, page))

    def replace(self, pages: ArrayLike, due: ArrayLike) -> None:
        """Hold exactly ``pages`` with due times ``due`` (arrays; inf: not
        scheduled), built in one pass instead of a push per page."""
        pages = np.asarray(pages, np.int64)
        due = np.asarray(due, np.float64)
        ok = np.isfinite(due)
        pairs = list(zip(due[ok].tolist(), pages[ok].tolist()))
        self._due = {p: d for d, p in pairs}
        heapq.heapify(pairs)
        self._heap = pairs

    def pop_due(
        self, now: float, n: int, skip: Callable[[int], bool] | None = None, max_scan: int | None = None
    ) -> list[int]:
        """Up to ``n`` pages due at ``now``, most overdue first; pages for
        which ``skip(page)`` is true stay scheduled. At most ``max_scan``
        pages are looked at (default ``4 n + 1000``), so a crowd of skipped
        pages (a busy host's) cannot make one call scan the whole index."""
        out: list[int] = []
        kept: list[tuple[float, int]] = []
        heap, due = self._heap, self._due
        budget = 4 * n + 1000 if max_scan is None else max_scan
        while heap and len(out) < n and heap[0][0] <= now and budget > 0:
            budget -= 1
            d, page = heapq.heappop(heap)
            if due.get(page) != d:
                continue  # stale entry
            if skip is not None and skip(page):
                kept.append((d, page))
                continue
            del due[page]
            out.append(page)
        for entry in kept:
            heapq.heappush(heap, entry)
        if len(heap) > 4 * len(due) + 1024:  # drop stale entries
            self._heap = [(d, p) for p, d in due.items()]
            heapq.heapify(self._heap)
        return out
