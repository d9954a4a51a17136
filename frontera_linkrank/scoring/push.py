"""Online PageRank of the known graph, kept current by pushing residuals.

The known graph of a crawl has every page the frontier knows as a vertex
and the out-links of the crawled pages as edges; frontier pages have no
known out-links. Its PageRank with damping ``d``, uniform teleport and
dangling mass spread uniformly is proportional to the solution of::

    x = b + d * P^T x        (b = 1 on every known page)

where dangling pages (frontier pages, crawled pages without links) simply
absorb what reaches them: spreading their mass uniformly adds a multiple
of ``b`` and does not change the order. :class:`PushRank` keeps an
estimate ``x`` and a residual ``r`` with the invariant::

    solution = x + (I - d P^T)^{-1} r

(Andersen, Chung and Lang 2006, the Gauss-Southwell "push"): a new page
brings its teleport mass ``b = 1`` as residual; pushing a crawled page
``u`` moves ``r_u`` into ``x_u`` and ``d * r_u / out_u`` to the residual of
each out-link. A page is pushed only when its residual exceeds the
threshold ``eps``; every push removes at least ``(1 - d) * eps`` of the
mass still to settle, so the work per batch is bounded by the mass it
brings (``n_new + pushed mass``) over ``(1 - d) * eps``, each push costing
the out-degree of the page pushed. Frontier pages are never pushed: their
value ``x + r`` is all the mass that reached them, a key that only grows
(what a lazy queue needs). It is what AOPIC's cash would be if crawled
pages were read again whenever cash reached them: the cash that stays on
crawled pages in a one-pass crawl is passed on here.

Each page read: its stored row of out-links (kept in memory) becomes
pushable; a page read again keeps the mass its old row passed (the
estimate is then approximate for that page's old targets until the next
:meth:`PushRank.anchor`).

Residuals below the threshold are never pushed, so the estimate drifts
from the exact solution by up to ``eps`` per crawled page.
:meth:`PushRank.anchor` starts again from an exact PageRank (the crawl's
periodic ranking): ``x`` becomes the ranking, scaled, and the residuals are
recomputed from the equation, so the invariant holds exactly again.

Examples
--------
>>> p = PushRank(damping=0.5, threshold=1e-9)
>>> p.grow(3)
>>> p.read(np.array([0, 1]), [np.array([1, 2]), np.array([2])])
>>> _ = p.push()
>>> np.round(p.values(np.arange(3)), 6).tolist()  # 1; 1 + 0.25; 1 + 0.25 + 0.5 * 1.25
[1.0, 1.25, 1.875]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..numeric import at_least, exact_sum, row_slices, spans, unique

SPREAD_LINKS = 1 << 20
"""Links followed at a time by a push round or :meth:`PushRank.spread`."""


class PushRank:
    """The push estimate of the known graph's PageRank (module docstring).

    Memory: ``r`` (8 bytes) and a row slot (4 bytes) per known page; ``x``
    and the row's place (20 bytes) per crawled page; 4 bytes per link of a
    crawled page (the rows, as page indices).

    Parameters
    ----------
    damping : float
        ``d``, as in the true PageRank the crawl is measured against.
    threshold : float
        ``eps``: a crawled page is pushed when its residual exceeds it
        (the teleport mass of one page is 1).
    max_rounds : int
        Push rounds per :meth:`push` at most (the rest waits for the next batch).
    """

    def __init__(self, damping: float = 0.85, threshold: float = 0.3, max_rounds: int = 200) -> None:
        if not 0 < damping < 1 or not threshold > 0:
            raise ValueError("damping must be in (0, 1) and threshold > 0")
        self.damping = float(damping)
        self.threshold = float(threshold)
        self.max_rounds = int(max_rounds)
        self.n = 0
        self.r = np.zeros(1024)
        self.slot = np.zeros(1024, np.uint32)  # page -> its row's slot; 0: no row (never pushed)
        self.n_slots = 1  # slot 0 is "no row"
        self.xs = np.zeros(1024)  # slot -> x of its page
        self.start = np.zeros(1024, np.int64)  # slot -> its row: pool[start : start + deg]
        self.deg = np.zeros(1024, np.uint32)  # slot -> out-degree
        self.pool = np.zeros(4096, np.uint32)
        self.n_edges = 0
        self.mass = 0.0  # sum of x + r over the known pages, kept as it changes
        self.pushes = 0  # pages pushed, in total
        self.push_edges = 0  # links pushed along, in total: the estimate's whole work
        self.anchors = 0  # rankings it was re-anchored on
        self._pending: list[np.ndarray] = []  # pages whose residual changed since the last push

    # -- the known graph ---------------------------------------------------------------
    def grow(self, n: int) -> None:
        """Pages up to ``n`` are known (new ones bring their teleport mass)."""
        if n <= self.n:
            return
        self.r, self.slot = at_least(self.r, n), at_least(self.slot, n)  # one length: they grow alike
        self.r[self.n : n] = 1.0
        self.mass += n - self.n
        self.n = n

    def read(self, pages: np.ndarray, rows: list[np.ndarray]) -> None:
        """Crawled ``pages`` link to ``rows`` (distinct targets, no self-link):
        their rows become pushable."""
        if not len(pages):
            return
        lens = np.fromiter((len(r) for r in rows), np.int64, len(rows))
        flat = np.concatenate(rows) if len(rows) else np.zeros(0, np.int64)
        self.read_flat(pages, lens, flat)

    def read_flat(self, pages: np.ndarray, lens: np.ndarray, dst: np.ndarray) -> None:
        """:meth:`read` with the rows concatenated: page ``pages[k]`` links
        to the next ``lens[k]`` targets of ``dst``."""
        pages = np.asarray(pages, np.int64)
        lens = np.asarray(lens, np.int64)
        if not len(pages):
            return
        top = max(int(pages.max()), int(dst.max()) if len(dst) else -1) + 1
        self.grow(top)
        total = int(lens.sum())
        if self.n_edges + total > len(self.pool):
            self._compact(total)
        if total:
            self.pool[self.n_edges : self.n_edges + total] = dst
        slots = self.slot[pages].astype(np.int64)
        new = slots == 0
        k = int(new.sum())
        if k:
            self.xs, self.start, self.deg = (at_least(a, self.n_slots + k) for a in (self.xs, self.start, self.deg))
            slots[new] = np.arange(self.n_slots, self.n_slots + k)
            self.slot[pages[new]] = slots[new]
            self.n_slots += k
        self.start[slots] = self.n_edges + np.concatenate(([0], np.cumsum(lens)[:-1]))
        self.deg[slots] = lens
        self.n_edges += total
        self._pending.append(pages)

    def reserve(self, links: int, rows: int = 0) -> None:
        """Room for ``links`` more links and ``rows`` more rows without
        growing again (before reading many row sets one after the other)."""
        if self.n_edges + links > len(self.pool):
            self._compact(links)
        if rows:
            self.xs, self.start, self.deg = (at_least(a, self.n_slots + rows) for a in (self.xs, self.start, self.deg))

    def _compact(self, more: int) -> None:
        """Room for ``more`` links: drop the rows pages were read again
        since (the pool keeps only current rows), then grow if need be."""
        live = int(self.deg[1 : self.n_slots].sum())
        if live + more > len(self.pool) // 2:
            pool = np.zeros(max(live + more, 2 * len(self.pool)), np.uint32)
        else:
            pool = np.zeros(len(self.pool), np.uint32)
        slots = np.arange(1, self.n_slots)
        deg = self.deg[slots].astype(np.int64)
        pool[:live] = self._gather(slots, deg)
        self.start[slots] = np.concatenate(([0], np.cumsum(deg)[:-1]))
        self.pool, self.n_edges = pool, live

    def rows_of(self, pages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(pages with a row, their rows concatenated)`` among ``pages``."""
        pages = np.asarray(pages, np.int64)
        slots = self.slot[pages].astype(np.int64)
        has = slots > 0
        slots = slots[has]
        return pages[has], self._gather(slots, self.deg[slots].astype(np.int64))

    def _gather(self, slots: np.ndarray, deg: np.ndarray) -> np.ndarray:
        """Rows of ``slots`` (out-degrees ``deg``) concatenated, as int64."""
        start = self.start[slots].astype(np.int64)
        return self.pool[spans(start, start + deg)].astype(np.int64)

    def has_row(self, idx: np.ndarray | None = None) -> np.ndarray:
        """Whether each page of ``idx`` (default: all known) has a row of
        out-links (it was crawled); pages without one are never pushed."""
        slot = self.slot[: self.n] if idx is None else self.slot[np.asarray(idx, np.int64)]
        return slot > 0

    # -- pushing -------------------------------------------------------------------------
    def push(self, signed: bool = False, collect: bool = True) -> np.ndarray:
        """Push every crawled page whose residual exceeds the threshold, in
        rounds, until none does; returns the pages whose residual rose
        (the frontier re-keys the uncrawled ones; with ``collect`` False,
        nothing: the caller rebuilds its queue). ``signed`` pushes
        residuals below ``-threshold`` too: values then fall as well as
        rise (the caller rebuilds its queue). The links of a round are
        followed a slice of rows at a time (:func:`_slices`)."""
        d, eps, r = self.damping, self.threshold, self.r
        cand = unique(np.concatenate(self._pending)) if self._pending else np.zeros(0, np.int64)
        self._pending = []
        raised = []
        for _ in range(self.max_rounds):
            if len(cand):
                over = np.abs(r[cand]) > eps if signed else r[cand] > eps
                act = cand[(self.deg[self.slot[cand]] > 0) & over]  # slot 0 has degree 0
            else:
                act = cand
            if not len(act):
                break
            amount = r[act]
            slots = self.slot[act].astype(np.int64)
            self.xs[slots] += amount
            r[act] = 0.0
            deg = self.deg[slots].astype(np.int64)
            share = d * amount / deg
            parts = list(_slices(deg))
            reached = np.zeros(self.n, bool) if len(parts) > 1 else None  # the pages a large round reaches
            for lo, hi in parts:
                dst = self._gather(slots[lo:hi], deg[lo:hi])
                np.add.at(r, dst, np.repeat(share[lo:hi], deg[lo:hi]))
                self.push_edges += len(dst)
                if reached is not None:
                    reached[dst] = True
            self.mass += d * float(amount.sum())  # r_u moved into x_u, d * r_u on to the links
            self.pushes += len(act)
            cand = unique(dst) if reached is None else np.flatnonzero(reached)
            del reached
            if collect:
                raised.append(cand)
        else:
            self._pending = [cand]  # rounds left over: the next push goes on from here
        if not raised:
            return np.zeros(0, np.int64)
        return unique(np.concatenate(raised))

    def spread(self, v: np.ndarray) -> np.ndarray:
        """``d * P^T v`` over the known graph: what the crawled pages pass
        to their links when they hold ``v`` (length :attr:`n`)."""
        n = self.n
        out = np.zeros(n)
        crawled = np.flatnonzero(self.deg[self.slot[:n]])
        slots = self.slot[crawled].astype(np.int64)
        deg = self.deg[slots].astype(np.int64)
        share = self.damping * v[crawled] / deg
        del crawled
        for lo, hi in _slices(deg):
            np.add.at(out, self._gather(slots[lo:hi], deg[lo:hi]), np.repeat(share[lo:hi], deg[lo:hi]))
        return out

    def anchor(self, ranking: np.ndarray) -> None:
        """Start again from an exact ranking of the known graph.

        ``ranking`` (PageRank of pages ``0 .. len-1``, any scale), once
        scaled to this system, becomes the estimate ``x`` of the crawled
        pages, and the residuals are recomputed as ``r = b + d P^T x - x``
        over the known graph as it is now (pages and links found since the
        ranking included), so the invariant holds exactly; residuals of
        either sign over the threshold are then pushed (values may fall:
        the caller rebuilds its queue). A page without a row keeps its
        whole value in ``r``, as it always does, so its mass moves on when
        its row arrives. The scale ``s`` makes ``s * ranking`` solve
        ``x = b + d P^T x`` on the median ranked page: exact for PageRank
        of the same graph (its dangling and teleport mass is a uniform
        multiple of ``b``), and unmoved by the pages whose in-links
        changed since the ranking."""
        n = self.n
        k = min(len(ranking), n)
        v = np.zeros(n)
        v[:k] = ranking[:k]
        np.nan_to_num(v, copy=False)
        passed = self.spread(v)
        crawled = np.flatnonzero(self.slot[:n])
        x = v[crawled]
        owed = np.subtract(v[:k], passed[:k], out=v[:k])  # v is not read again: its memory holds what is owed
        median = _positive_median(owed)
        del v, owed
        if median is None:
            return
        s = 1.0 / median
        x *= s
        self.xs[self.slot[crawled].astype(np.int64)] = x
        np.multiply(passed, s, out=passed)
        passed += 1.0
        passed[crawled] -= x
        self.r[:n] = passed
        self.mass = exact_sum(x) + exact_sum(self.r[:n])
        self._pending = [crawled[self.deg[self.slot[crawled]] > 0]]
        self.push(signed=True, collect=False)
        self.anchors += 1

    # -- saving ----------------------------------------------------------------------------
    def state(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """``(x of pages rows, r of every known page, counters)``: what
        :meth:`restore` takes back, given the same links (``r`` a view,
        valid until the estimate changes)."""
        counters = {"mass": self.mass, "pushes": self.pushes, "push_edges": self.push_edges, "anchors": self.anchors}
        return self.x(rows), self.r[: self.n], counters

    def restore(self, rows: np.ndarray, x: np.ndarray, r: np.ndarray, counters: dict[str, float]) -> None:
        """Take back a :meth:`state` of the same known graph: ``rows`` are
        the pages read (:meth:`read_flat`) with their links then, ``x``
        their estimates, ``r`` the residual of every known page."""
        rows = np.asarray(rows, np.int64)
        if len(r) != self.n or len(x) != len(rows) or not self.has_row(rows).all():
            raise ValueError("a saved push estimate of another graph")
        self.xs[self.slot[rows].astype(np.int64)] = x
        self.r[: self.n] = r
        self.mass = float(counters["mass"])
        self.pushes, self.push_edges, self.anchors = (int(counters[k]) for k in ("pushes", "push_edges", "anchors"))
        self._pending = [rows[r[rows] > self.threshold]]  # push() goes on from where it stood

    # -- reading ---------------------------------------------------------------------------
    def x(self, idx: np.ndarray | None = None) -> np.ndarray:
        """``x`` of pages ``idx`` (default: all known): what they have pushed on."""
        slot = self.slot[: self.n] if idx is None else self.slot[np.asarray(idx, np.int64)]
        return self.xs[slot]  # slot 0's x is 0

    def values(self, idx: np.ndarray) -> np.ndarray:
        """``x + r`` of pages ``idx`` (unnormalised: a page's teleport mass is 1)."""
        idx = np.asarray(idx, np.int64)
        if len(idx) and int(idx.max()) >= self.n:
            self.grow(int(idx.max()) + 1)
        return self.xs[self.slot[idx]] + self.r[idx]

    def normalised(self, idx: np.ndarray | None = None) -> np.ndarray:
        """The estimate as PageRank of the known graph (sums to 1 over the known pages)."""
        n = self.n
        v = self.x() + self.r[:n]
        total = exact_sum(v)
        v = v / total if total > 0 else v
        return v if idx is None else v[np.asarray(idx, np.int64)]

    def stats(self) -> dict[str, float]:
        """Threshold, total pushes and links pushed along, residual left."""
        return {"push_threshold": self.threshold, "pushes": self.pushes, "push_edges": self.push_edges,
                "push_anchors": self.anchors,
                "push_residual": float(self.r[: self.n][self.slot[: self.n] > 0].sum())}


def _slices(deg: np.ndarray) -> Iterator[tuple[int, int]]:
    """Rows of out-degrees ``deg`` in slices of about :data:`SPREAD_LINKS`
    links (:func:`~frontera_linkrank.numeric.row_slices`).

    Following every row's links at once would make temporaries of a few
    words per link, more than the estimate itself holds; np.add.at adds in
    order, so slices sum exactly as one pass would."""
    return row_slices(np.concatenate(([0], np.cumsum(deg))), SPREAD_LINKS)


def _positive_median(a: np.ndarray) -> float | None:
    """``np.median(a[a > 0])`` (None if no value is positive), found in
    ``a`` itself, which it reorders: the others are sent below every
    positive value, so the middle ones of the positive values have known
    ranks, and a partition in place puts them there."""
    count = int(np.count_nonzero(a > 0))
    if not count:
        return None
    np.copyto(a, -np.inf, where=~(a > 0))  # NaN too
    low = len(a) - count + (count - 1) // 2
    high = len(a) - count + count // 2
    a.partition([low, high])
    return float(np.mean(a[[low, high]])) if high != low else float(a[low])
