"""Policy report: which crawl policy collects the important pages first?

:func:`run_report` crawls a known graph with each policy of the real
backend (``LinkRankBackend`` with ``LINKRANK_POLICY`` = the policy) and
each baseline of :mod:`.baselines`, from the same random seed sets,
through ``FrontierManager`` (:func:`.crawl.crawl`), and measures
(docs/algorithms.md §6), against the graph's true PageRank PR* (d = 0.85, L1
change < 1e-12):

- PR* collected after 1, 5, 10, 20% of the pages were fetched, and that
  sum relative to the omniscient crawl's (always the frontier page with
  the highest PR*);
- recall of the true top 1% at the same points;
- the area under the collected-PR* curve up to the budget, relative to
  the omniscient crawl's;
- pages per second (simulator, manager and backend; measurements
  excluded); with politeness, the simulated time to reach each point;
- the quality of the policy's own importance estimate as the crawl
  proceeds: weighted Kendall tau (``scipy.stats.weightedtau``) and top-1%
  overlap against PR* over the pages the frontier knows at that moment.

:func:`format_report` renders the tables (Markdown),
:func:`.plot.plot_report` the curves (matplotlib, optional), and the report
itself is a JSON-able dict.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import metrics
from .baselines import BACKENDS
from .crawl import LINKRANK, crawl

if TYPE_CHECKING:

    from .crawl import CrawlResult, Politeness
    from .graphs import Graph

    _Results = dict[str, list[tuple[list[int], CrawlResult]]]  # run name -> (seeds, crawl) per draw

BASELINES = ("bfs", "random", "backlinks", "larger-sites-first", "batch-pagerank", "omniscient")
FRACTIONS = (0.01, 0.05, 0.10, 0.20)
ORACLE = "omniscient"
LABELS = {
    "bfs": "BFS (= Frontera memory BFS)",
    "frontera-bfs": "Frontera memory BFS",
    "random": "random",
    "backlinks": "backlink count",
    "larger-sites-first": "larger sites first",
    "batch-pagerank": "batch PageRank",
    "omniscient": "omniscient (true PR*)",
}


@dataclass
class Run:
    """One crawl configuration: a backend and its settings."""

    name: str
    backend: str
    settings: dict[str, Any] = field(default_factory=dict)
    kind: str = "policy"  # "policy" (LinkRankBackend) or "baseline"

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name)


def plan(policies: Iterable[str] | None = None, baselines: Iterable[str] = BASELINES,
         settings: Mapping[str, Any] | None = None, pagerank_every: int = 1000) -> list[Run]:
    """The runs of a report: ``policies`` (default: the default
    ``LINKRANK_POLICY`` alone) of LinkRankBackend with
    ``settings`` (``LINKRANK_*``; the backend's defaults otherwise, so its
    periodic rankings follow ``LINKRANK_RANK_EVERY_PAGES`` and
    ``LINKRANK_RANK_GROWTH``), then ``baselines``, the batch PageRank one
    recomputing every ``pagerank_every`` pages; the omniscient crawl is
    always included (the other runs are measured against it).
    """
    settings = dict(settings or {})
    if policies is None:
        from ..settings.table import TABLE

        policies = [str(TABLE["LINKRANK_POLICY"].default)]
    runs = [Run(p, LINKRANK, {**settings, "LINKRANK_POLICY": p}, "policy") for p in dict.fromkeys(policies)]
    base = list(dict.fromkeys(baselines))
    if ORACLE not in base:
        base.append(ORACLE)
    for b in base:
        if b not in BACKENDS:
            raise ValueError(f"unknown baseline {b!r}; choose from {', '.join(BACKENDS)}")
        extra = {"SIMULATION_PAGERANK_EVERY": pagerank_every} if b == "batch-pagerank" else {}
        runs.append(Run(b, BACKENDS[b], extra, "baseline"))
    return runs


def draw_seeds(graph: Graph, k: int, draw: int, random_seed: int = 0) -> list[int]:
    """``k`` seed pages drawn uniformly among pages with out-links (a seed
    without links would end the crawl at once), reproducibly per draw."""
    deg = np.diff(graph.indptr)
    pool = np.flatnonzero(deg > 0)
    if not len(pool):
        raise ValueError(f"{graph.name}: no page has out-links")
    rng = np.random.default_rng([random_seed, draw])
    return np.sort(rng.choice(pool, min(k, len(pool)), replace=False)).tolist()


class Observer:
    """Quality of a frontier's importance estimate over the pages it knows.

    Maps the frontier's pages to graph vertices by fingerprint (cached per
    backend, extended as pages appear) and compares its estimate with the
    true PageRank of those pages (:func:`metrics.estimate_quality`).
    """

    def __init__(self, graph: Graph, truth: np.ndarray, primary: str | None = None,
                 fp_vertex: dict[bytes, int] | None = None) -> None:
        self.truth = truth
        self.primary = primary
        self._fp_vertex = fp_vertex if fp_vertex is not None else dict(zip(graph.fingerprints, range(graph.n)))
        self._vertices = np.zeros(0, np.int64)

    def _map(self, fps: Sequence[bytes] | bytes | bytearray | memoryview) -> np.ndarray:
        """Graph vertices of the frontier's pages ``fps`` (hex bytes list or
        one bytes string of 20-byte digests), extending the cache."""
        have = len(self._vertices)
        if isinstance(fps, (bytes, bytearray, memoryview)):
            raw = bytes(fps)
            n = len(raw) // 20
            hexed = raw[20 * have :].hex().encode()
            new = [hexed[40 * k : 40 * k + 40] for k in range(n - have)]
        else:
            n = len(fps)
            new = fps[have:n]
        get = self._fp_vertex.get
        add = np.fromiter((get(fp, -1) for fp in new), np.int64, len(new))
        self._vertices = np.concatenate([self._vertices, add])
        return self._vertices[:n]

    def estimate(self, backend: Any) -> tuple[str, np.ndarray, np.ndarray] | None:
        """``(name, vertices, values)`` of the backend's estimate, or None."""
        core = getattr(backend, "core", None)
        if core is not None:  # LinkRankBackend
            n = core.db.n_pages
            have = len(self._vertices)
            new = core.db.fingerprints_of(np.arange(have, n)).tobytes().hex().encode()
            vertices = self._map([b""] * have + [new[40 * k : 40 * k + 40] for k in range(n - have)])
            if self.primary:
                name = self.primary
                values = (core.importance(np.arange(n)) if name == "importance"
                          else core.ranking.ranks.values(name, np.arange(n)))
            else:
                name, values = core.estimate()
            return name, vertices, values
        est = backend.estimate() if hasattr(backend, "estimate") else None
        if est is None:
            return None
        fps, values = est
        names = {"BacklinkBackend": "backlinks", "BatchPageRankBackend": "pagerank"}
        name = names.get(type(backend).__name__, "estimate")
        return name, self._map(fps), np.asarray(values, np.float64)

    def __call__(self, backend: Any, n_crawled: int) -> dict[str, Any] | None:
        got = self.estimate(backend)
        if got is None:
            return None
        name, vertices, values = got
        ok = vertices >= 0
        tau, overlap = metrics.estimate_quality(values[ok], self.truth[vertices[ok]])
        return {"crawled": n_crawled, "known": int(ok.sum()), "estimate": name,
                "weighted_tau": tau, "top_overlap": overlap}


class _Yardstick(NamedTuple):
    """What every crawl of a report is measured against."""

    truth: np.ndarray  # true PageRank of each vertex
    top: np.ndarray  # vertices of the true top 1%
    n: int  # vertices of the graph
    budget: int  # pages fetched per crawl
    fractions: list[float]  # shares of the pages measured at
    marks: list[int]  # page counts of ``fractions``
    grid: np.ndarray  # page counts the averaged curves are sampled at


def run_report(graph: Graph, runs: Sequence[Run], draws: int = 3, seeds: int = 10, budget: float = 0.2,
               fractions: Sequence[float] = FRACTIONS, batch: int = 100, politeness: Politeness | None = None,
               estimate_points: int = 10, random_seed: int = 0, truth: np.ndarray | None = None,
               progress: bool = False, curve_points: int = 200) -> dict[str, Any]:
    """Crawl ``graph`` with every run of ``runs`` (:func:`plan`) from
    ``draws`` random seed sets and measure them; returns the report dict.

    ``budget`` is a share of the pages (<= 1) or a page count; ``fractions``
    are shares of *all* pages (those beyond the budget are left out).
    ``progress``: show a progress bar (tqdm) on stderr.
    """
    from .datasets import merge_same_pages

    n_given = graph.n
    graph = merge_same_pages(graph)  # one vertex per page the frontier can tell apart
    n = graph.n
    pages = int(round(budget * n)) if budget <= 1 else int(budget)
    if pages < 1:
        raise ValueError("the budget is less than one page")
    kept = [f for f in fractions if 0 < round(f * n) <= pages]
    t0 = time.perf_counter()
    if truth is None:
        truth = metrics.reference_pagerank(graph.indptr, graph.indices)
    truth_seconds = time.perf_counter() - t0
    marks = [int(round(f * n)) for f in kept]
    grid = np.unique(np.linspace(1, pages, min(curve_points, pages)).round().astype(np.int64))
    ys = _Yardstick(truth, metrics.top_set(truth, 0.01), n, pages, kept, marks, grid)
    estimate_at = {max(1, int(round(pages * (k + 1) / estimate_points))) for k in range(estimate_points)}
    points = sorted(set(marks) | estimate_at)
    results = _crawl_runs(graph, runs, ys, draws=draws, seeds=seeds, batch=batch, politeness=politeness,
                          random_seed=random_seed, checkpoints=points, progress=progress)
    return {
        "graph": {"name": graph.name, "pages": n, "links": int(graph.n_edges),
                  "hosts": _n_hosts(graph), "merged_urls": n_given - n},
        "budget": pages,
        "fractions": list(kept),
        "draws": draws,
        "seeds_per_draw": seeds,
        "batch": batch,
        "random_seed": random_seed,
        "politeness": None if politeness is None else vars(politeness).copy(),
        "truth": {"algorithm": "PageRank", "damping": 0.85, "tolerance_l1": 1e-12, "seconds": truth_seconds,
                  "top1_pages": int(len(ys.top))},
        "runs": _measure_runs(runs, results, ys),
        "seconds": time.perf_counter() - t0,
    }


def _crawl_runs(graph: Graph, runs: Sequence[Run], ys: _Yardstick, *, draws: int, seeds: int, batch: int,
                politeness: Politeness | None, random_seed: int, checkpoints: list[int], progress: bool) -> _Results:
    """Crawl with every run from each draw's seed set: run name -> one
    ``(seeds, result)`` per draw, the estimate observed at ``checkpoints``."""
    budget = ys.budget
    oracle = dict(zip(graph.fingerprints, ys.truth.tolist()))
    fp_vertex = dict(zip(graph.fingerprints, range(ys.n)))
    bar = _progress(len(runs) * draws * budget) if progress else None
    results: _Results = {r.name: [] for r in runs}
    try:
        for d in range(draws):
            seed_set = draw_seeds(graph, seeds, d, random_seed)
            for run in runs:
                if bar is not None:
                    bar.set_postfix_str(f"draw {d + 1}/{draws}: {run.name}")
                settings = dict(run.settings)
                if run.name == ORACLE:
                    settings["SIMULATION_ORACLE"] = oracle
                if run.name == "random":
                    settings.setdefault("SIMULATION_RANDOM_SEED", [random_seed, d])
                res = crawl(graph, run.backend, seed_set, budget, batch=batch, settings=settings,
                            politeness=politeness, observe=Observer(graph, ys.truth, fp_vertex=fp_vertex),
                            checkpoints=checkpoints, progress=None if bar is None else bar.update)
                if bar is not None:  # a crawl that ended early: its unused budget counts as done
                    bar.update(budget - len(res.order))
                results[run.name].append((seed_set, res))
    finally:
        if bar is not None:
            bar.close()
    return results


def _measure_runs(runs: Sequence[Run], results: _Results, ys: _Yardstick) -> list[dict[str, Any]]:
    """The report entry of each run: its draws measured, their means and mean curves."""
    oracle_area = [metrics.area(res.order, ys.truth, ys.budget) for _, res in results[ORACLE]]
    oracle_collected = [metrics.collected(res.order, ys.truth, ys.fractions) for _, res in results[ORACLE]]
    out_runs = []
    for run in runs:
        per_draw, curves, recalls = [], [], []
        for d, (seed_set, res) in enumerate(results[run.name]):
            entry, cur, rec = _measure_draw(seed_set, res, ys, oracle_collected[d], oracle_area[d])
            per_draw.append(entry)
            curves.append(cur)
            recalls.append(rec)
        out_runs.append({
            "name": run.name,
            "label": run.label,
            "kind": run.kind,
            "backend": run.backend,
            "settings": {k: v for k, v in run.settings.items() if _jsonable(v)},
            "draws": per_draw,
            "mean": _means(per_draw),
            "curve": {"pages": ys.grid.tolist(), "collected": np.mean(curves, 0).tolist(),
                      "recall_top1": np.mean(recalls, 0).tolist()},
        })
    return out_runs


def _measure_draw(seed_set: list[int], res: CrawlResult, ys: _Yardstick, oracle_collected: list[float],
                  oracle_area: float) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """One crawl measured: its report entry, its collected-PR* and top-1% recall curves at ``ys.grid``."""
    truth, budget, fractions, marks, grid = ys.truth, ys.budget, ys.fractions, ys.marks, ys.grid
    got = metrics.collected(res.order, truth, fractions)
    cur = metrics.curve(res.order, truth, budget)
    hit = np.zeros(ys.n, bool)
    hit[ys.top] = True
    rec = np.cumsum(hit[np.asarray(res.order, np.int64)]) / len(ys.top) if res.order else np.zeros(0)
    rec_full = np.concatenate([rec, np.full(budget - len(rec), rec[-1] if len(rec) else 0.0)])
    by_mark = {c: o for c, o in res.observations if o is not None}
    obs = [dict(o, checkpoint=c) for c, o in res.observations if o is not None]
    entry = {
        "seeds": seed_set,
        "pages": len(res.order),
        "seconds": res.seconds,
        "pages_per_second": len(res.order) / res.seconds if res.seconds > 0 else math.inf,
        "collected": got,
        "relative": [g / o if o > 0 else math.nan for g, o in zip(got, oracle_collected)],
        "recall_top1": metrics.recall(res.order, ys.top, ys.n, fractions),
        "auc_relative": float(cur.sum()) / oracle_area if oracle_area > 0 else math.nan,
        "estimate": [by_mark.get(m) for m in marks],
        "estimate_curve": obs,
        "measure_seconds": res.observe_seconds,
    }
    if res.times is not None:
        entry["time_to"] = [res.times[m - 1] if m <= len(res.times) else None for m in marks]
        entry["time_total"] = res.times[-1] if res.times else 0.0
        entry["time_curve"] = [[float(res.times[k - 1]), float(cur[k - 1])] for k in grid.tolist()
                               if k <= len(res.times)]
    return entry, cur[grid - 1], rec_full[grid - 1]


def _n_hosts(graph: Graph) -> int:
    from ..storage.urls import RejectedURL, check_url

    names = set()
    for u in graph.urls:
        try:
            names.add(check_url(u))
        except RejectedURL:
            pass
    return len(names)


def _jsonable(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool, type(None), list, tuple))


def _nanmean(rows: Iterable[Iterable[float | None]]) -> list[float | None]:
    a = np.array([[math.nan if x is None else x for x in r] for r in rows], np.float64)
    if a.size == 0:
        return []
    # A column with no value at all (no estimate yet at that point) is None.
    counts = np.sum(~np.isnan(a), 0)
    m = np.where(counts > 0, np.nansum(a, 0) / np.maximum(counts, 1), math.nan)
    return [None if math.isnan(x) else float(x) for x in m]


def _means(per_draw: list[dict[str, Any]]) -> dict[str, Any]:
    def col(key: str) -> list[float | None]:
        return _nanmean([d[key] for d in per_draw])

    out = {
        "collected": col("collected"),
        "relative": col("relative"),
        "recall_top1": col("recall_top1"),
        "auc_relative": _nanmean([[d["auc_relative"]] for d in per_draw])[0],
        "auc_range": [float(np.nanmin(a)), float(np.nanmax(a))]
        if (a := [d["auc_relative"] for d in per_draw]) and not all(math.isnan(x) for x in a) else None,
        "pages_per_second": float(np.mean([d["pages_per_second"] for d in per_draw])),
        "pages": float(np.mean([d["pages"] for d in per_draw])),
    }
    if per_draw and all(e is not None for d in per_draw for e in d["estimate"]) and per_draw[0]["estimate"]:
        out["estimate"] = per_draw[0]["estimate"][0]["estimate"]
        out["weighted_tau"] = _nanmean([[e["weighted_tau"] for e in d["estimate"]] for d in per_draw])
        out["top_overlap"] = _nanmean([[e["top_overlap"] for e in d["estimate"]] for d in per_draw])
    if per_draw and "time_to" in per_draw[0]:
        out["time_to"] = _nanmean([d["time_to"] for d in per_draw])
    return out


def _progress(total: int) -> Any:
    # tqdm: a maintained progress bar that adapts to the terminal width,
    # shows rate and ETA, and degrades to occasional lines when stderr is
    # not a terminal (disable=None turns it off there).
    from tqdm import tqdm

    return tqdm(total=total, unit="page", unit_scale=True, dynamic_ncols=True, disable=None, smoothing=0.05)


# -- output -----------------------------------------------------------------------------


def _pct(f: float) -> str:
    return f"{f * 100:g}%"


def _num(x: float | None, fmt: str = "{:.4f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def format_report(report: Mapping[str, Any], command: str | None = None) -> str:
    """The report as Markdown tables (means over the seed draws)."""
    g = report["graph"]
    fr = report["fractions"]
    lines = []
    if command:
        lines += [f"`{command}`", ""]
    pol = report["politeness"]
    n_merged = g.get("merged_urls")
    merged = f" (after merging {n_merged:,} URLs with the fingerprint of another)" if n_merged else ""
    lines.append(
        f"{g['name']}: {g['pages']:,} pages{merged}, {g['links']:,} links, {g['hosts']:,} hosts; "
        f"{report['draws']} draws of {report['seeds_per_draw']} random seeds; budget {report['budget']:,} pages "
        f"({report['budget'] / g['pages']:.0%}); "
        + (f"batches of {report['batch']}" if pol is None else
           f"politeness: {pol['delay']:g} s between fetches of a host, {pol['concurrency']} requests in the crawler")
        + ". Means over the draws; PR* = true PageRank (d = 0.85)."
    )
    lines.append("")
    head = "| policy | " + " | ".join(f"PR*@{_pct(f)} (vs omniscient)" for f in fr) + \
        " | top-1% recall@" + "/".join(_pct(f) for f in fr) + " | AUC vs omniscient (draws' range) | pages/s |"
    lines += [head, "|---|" + "---|" * (len(fr) + 3)]
    for r in report["runs"]:
        m = r["mean"]
        cells = [f"{_num(c)} ({_num(rel, '{:.2f}')})" for c, rel in zip(m["collected"], m["relative"])]
        rec = "/".join(_num(x, "{:.2f}") for x in m["recall_top1"])
        rng = m.get("auc_range")
        span = f" ({rng[0]:.2f}-{rng[1]:.2f})" if rng and len(r["draws"]) > 1 else ""
        auc = _num(m["auc_relative"], "{:.3f}") + span
        lines.append(f"| {r['label']} | " + " | ".join(cells) + f" | {rec} | {auc} | {m['pages_per_second']:,.0f} |")
    est = [r for r in report["runs"] if "estimate" in r["mean"]]
    if est:
        lines += ["", "Estimate quality over the pages known at each point (weighted Kendall tau / top-1% overlap "
                  "with PR*):", ""]
        lines += ["| policy | estimate | " + " | ".join(f"@{_pct(f)}" for f in fr) + " |",
                  "|---|---|" + "---|" * len(fr)]
        for r in est:
            m = r["mean"]
            cells = [f"{_num(t, '{:.3f}')} / {_num(o, '{:.2f}')}" for t, o in zip(m["weighted_tau"], m["top_overlap"])]
            lines.append(f"| {r['label']} | {m['estimate']} | " + " | ".join(cells) + " |")
    if pol is not None:
        lines += ["", "Simulated crawl time to reach each point (hours):", ""]
        lines += ["| policy | " + " | ".join(f"@{_pct(f)}" for f in fr) + " |", "|---|" + "---|" * len(fr)]
        for r in report["runs"]:
            t = r["mean"].get("time_to", [])
            lines.append(f"| {r['label']} | " + " | ".join(_num(x / 3600 if x is not None else None, '{:.2f}')
                                                           for x in t) + " |")
    return "\n".join(lines)
