"""The curves of a policy report (:func:`.report.run_report`) in one figure.

Four panels: true PageRank collected, recall of the true top 1%, the
quality of each policy's own estimate, and either the share of the
omniscient crawl's PR* collected or, with politeness, PR* over simulated
time. Each run keeps one colour (and line style: solid for the policies,
dashed for the baselines) in every panel, and every panel has a legend, so
a panel reads alone. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .report import ORACLE

if TYPE_CHECKING:
    import os

    from matplotlib.figure import Figure


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install 'frontera_linkrank[plot]'") from None
    return plt


def run_colours(names: list[str]) -> dict[str, Any]:
    """One colour per run, in order: matplotlib's default cycle, or a
    20-colour map when there are more runs than it has colours."""
    plt = _pyplot()
    cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", [])
    if len(names) > len(cycle):
        cmap = plt.get_cmap("tab20")
        cycle = [cmap(i % cmap.N) for i in range(len(names))]
    return {name: cycle[i] for i, name in enumerate(names)}


def _mean(values: list[float | None]) -> float:
    """Mean of the values that are numbers; NaN if none is (no estimate
    at that point in any draw)."""
    a = np.array([np.nan if v is None else v for v in values], np.float64)
    a = a[~np.isnan(a)]
    return float(a.mean()) if len(a) else math.nan


def report_figure(report: Mapping[str, Any]) -> Figure:
    """The figure of ``report``'s curves. Every line carries its run's
    name as ``gid``, so the figure can be checked run by run."""
    plt = _pyplot()
    g = report["graph"]
    polite = report["politeness"] is not None
    colours = run_colours([r["name"] for r in report["runs"]])
    oracle = next(o for o in report["runs"] if o["name"] == ORACLE)["curve"]["collected"]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    (a1, a2), (a3, a4) = axes
    for r in report["runs"]:
        kw = {"color": colours[r["name"]], "gid": r["name"], "label": r["label"],
              "linestyle": "-" if r["kind"] == "policy" else "--"}  # fmt: skip
        x = np.asarray(r["curve"]["pages"]) / g["pages"] * 100
        a1.plot(x, r["curve"]["collected"], **kw)
        a2.plot(x, r["curve"]["recall_top1"], **kw)
        pts: dict[int, list[float]] = {}
        for d in r["draws"]:
            for o in d["estimate_curve"]:
                pts.setdefault(o["checkpoint"], []).append(o["weighted_tau"])
        if pts:
            ks = sorted(pts)
            a3.plot(np.asarray(ks) / g["pages"] * 100, [_mean(pts[k]) for k in ks], marker="o", markersize=3,
                    **{**kw, "label": f"{r['label']} ({r['mean'].get('estimate', '')})"})  # fmt: skip
        if polite:
            tc = np.asarray(r["draws"][0].get("time_curve", []))
            if len(tc):
                a4.plot(tc[:, 0] / 3600, tc[:, 1], **kw)
        else:
            with np.errstate(all="ignore"):
                a4.plot(x, np.asarray(r["curve"]["collected"]) / np.asarray(oracle), **kw)
    _label(a1, a2, a3, a4, polite)
    fig.suptitle(f"{g['name']}: {g['pages']:,} pages, {report['draws']} seed draws, means")
    fig.tight_layout()
    return fig


def _label(a1: Any, a2: Any, a3: Any, a4: Any, polite: bool) -> None:
    pages = "pages fetched (% of the graph)"
    a1.set(xlabel=pages, ylabel="true PageRank collected", title="PR* collected")
    a2.set(xlabel=pages, ylabel="recall", title="recall of the true top 1%")
    a3.set(xlabel=pages, ylabel="weighted Kendall tau", title="estimate vs PR* over the known pages")
    if polite:
        a4.set(xlabel="simulated time (hours)", ylabel="true PageRank collected",
               title="PR* collected over simulated time (first draw)")
    else:
        a4.set(xlabel=pages, ylabel="ratio", title="PR* collected / omniscient crawl")
    for a in (a1, a2, a3, a4):
        a.grid(alpha=0.3)
        if a.lines:
            a.legend(fontsize=8)
        else:  # no run measured this (no estimate, no simulated time): say so where the legend goes
            a.text(0.5, 0.5, "no run records this", ha="center", va="center", transform=a.transAxes)


def plot_report(report: Mapping[str, Any], path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """Write :func:`report_figure` of ``report`` to the PNG ``path``."""
    plt = _pyplot()
    fig = report_figure(report)
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path
