"""``frontera-linkrank simulate GRAPH``: choose a crawl policy on your own graph.

See :mod:`.report` for what is measured. Examples::

    frontera-linkrank simulate uk2007 --policy opic --policy hybrid --plot uk2007.png
    frontera-linkrank simulate crawl_db --set LINKRANK_DAMPING=0.9 --json > report.json
    frontera-linkrank simulate links.tsv --host-delay 5 --concurrency 32
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .crawl import Politeness

GRAPH_HELP = (
    "a page database folder (a previous crawl), a SRC_URL<TAB>DST_URL file (gzip accepted), a CSR .npz "
    "(arrays indptr, indices, optional hosts), a Hollins-style folder, a UKWA host .tsv.gz, a GML file, "
    "or a graph's name: hollins, polblogs (installed with the package), uk2007, ukwa (in the datasets/ folder "
    "of the source repository)"
)


class UsageError(Exception):
    """Bad arguments or input: reported in one line, exit status 2."""


def default_policy() -> str:
    """The default ``LINKRANK_POLICY`` of the settings table: what a crawl
    runs when nothing is set, so what ``simulate`` measures by default."""
    from ..settings.table import TABLE

    return str(TABLE["LINKRANK_POLICY"].default)


def parser() -> argparse.ArgumentParser:
    from .baselines import BACKENDS
    from .report import BASELINES

    ap = argparse.ArgumentParser(
        prog="frontera-linkrank simulate",
        description="Simulate crawls of a known link graph with each policy of the frontier and with baselines, "
        "through Frontera's FrontierManager (a fetched page reveals only its out-links), and report how fast each "
        "collects the true PageRank.",
    )
    ap.add_argument("graph", help=GRAPH_HELP)
    ap.add_argument("--policy", action="append", metavar="NAME",
                    help="LINKRANK_POLICY of a run of the real backend (repeat for several; default: the default "
                    f"policy, {default_policy()})")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                    help="a LINKRANK_* setting for the backend runs (repeatable; the LINKRANK_ prefix may be left out)")
    ap.add_argument("--baselines", default=",".join(BASELINES), metavar="LIST",
                    help=f"comma-separated baselines among {', '.join(BACKENDS)}, or 'none' "
                    "(the omniscient crawl always runs: it is the reference). Default: %(default)s")
    ap.add_argument("--draws", type=int, default=3, help="random seed sets (default: %(default)s)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per draw (default: %(default)s)")
    ap.add_argument("--random-seed", type=int, default=0, help="seed of the seed draws (default: %(default)s)")
    ap.add_argument("--budget", type=float, default=0.2,
                    help="pages to fetch: a share of the graph (<= 1) or a count (default: %(default)s)")
    ap.add_argument("--fractions", default="0.01,0.05,0.1,0.2",
                    help="shares of the graph where the crawl is measured (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=100, help="requests asked at a time (default: %(default)s)")
    ap.add_argument("--pagerank-every", type=int, metavar="PAGES",
                    help="the batch PageRank baseline's recomputation period in crawled pages (default: 1%% of "
                    "the pages, at least 100); the backend's rankings follow its LINKRANK_RANK_* settings")
    ap.add_argument("--host-delay", type=float, metavar="SECONDS",
                    help="simulate host politeness: each fetch takes 1 s of a simulated clock and a host starts a "
                    "fetch at most every SECONDS; busy hosts are passed to the frontier as overused")
    ap.add_argument("--concurrency", type=int, default=16,
                    help="with --host-delay: requests the crawler holds at once (default: %(default)s)")
    ap.add_argument("--per-host", type=int, default=1,
                    help="with --host-delay: waiting requests that make a host overused (default: %(default)s)")
    ap.add_argument("--estimate-points", type=int, default=10,
                    help="points along the crawl where the estimate quality is measured, besides the fractions "
                    "(default: %(default)s)")
    ap.add_argument("--json", nargs="?", const="-", metavar="FILE",
                    help="the full report as JSON (per draw, curves, settings): on stdout instead of the tables, "
                    "or into FILE beside them")
    ap.add_argument("--plot", metavar="PNG", help="write the curves to this PNG (needs matplotlib)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def parse_settings(items: Sequence[str]) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> dict of LINKRANK_* settings (values as
    Python literals when they parse, else strings), validated."""
    from ..settings import LinkRankSettings, SettingsError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        name = key if key.upper().startswith("LINKRANK_") else "LINKRANK_" + key
        name = name.upper()
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if name == "LINKRANK_PATH":
            raise UsageError("--set LINKRANK_PATH: each simulated crawl gets its own temporary page database")
        out[name] = value
    try:
        LinkRankSettings({}, **out)
    except SettingsError as e:
        raise UsageError(f"--set: {e}") from None
    return out


def check_policies(policies: Sequence[str], settings: dict[str, Any]) -> None:
    """Refuse a policy the settings reject (a usage error)."""
    from ..settings import LinkRankSettings, SettingsError

    for p in policies:
        try:
            LinkRankSettings({}, **{**settings, "LINKRANK_POLICY": p})
        except SettingsError as e:
            raise UsageError(f"--policy {p}: {e}") from None


def _fractions(text: str) -> list[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--fractions {text!r}: expected numbers like 0.01,0.05") from None
    if not out or any(not 0 < f <= 1 for f in out):
        raise UsageError("--fractions: each must be a share in (0, 1]")
    return sorted(out)


def main(argv: Sequence[str] | None = None) -> int:
    """``frontera-linkrank simulate``; returns the exit status (2: bad usage)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    try:
        return _main(args, argv)
    except UsageError as e:
        print(f"frontera-linkrank simulate: error: {e}", file=sys.stderr)
        return 2


def _checked(args: argparse.Namespace) -> tuple[list[float], dict[str, Any], list[str], list[str], Politeness | None]:
    """The arguments checked before any graph is loaded: fractions,
    settings, policies, baselines and politeness."""
    from .crawl import Politeness

    for name in ("draws", "seeds", "batch", "estimate_points", "concurrency", "per_host"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
    if not args.budget > 0:
        raise UsageError("--budget must be > 0")
    fractions = _fractions(args.fractions)
    settings = parse_settings(args.settings)
    policies = args.policy or [default_policy()]
    check_policies(policies, settings)
    baselines = [b.strip() for b in args.baselines.split(",") if b.strip() and b.strip() != "none"]
    politeness = None
    if args.host_delay is not None:
        if not (args.host_delay >= 0 and math.isfinite(args.host_delay)):
            raise UsageError("--host-delay must be >= 0 seconds")
        politeness = Politeness(args.host_delay, args.concurrency, args.per_host)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'frontera_linkrank[plot]'") from None
    return fractions, settings, policies, baselines, politeness


def _main(args: argparse.Namespace, argv: list[str]) -> int:
    from .datasets import load_graph
    from .report import plan, run_report

    fractions, settings, policies, baselines, politeness = _checked(args)
    try:
        graph = load_graph(args.graph)
    except (OSError, ValueError) as e:
        raise UsageError(str(e)) from None
    every = args.pagerank_every or max(100, int(round(0.01 * graph.n)))
    if every < 1:
        raise UsageError("--pagerank-every must be >= 1")
    try:
        runs = plan(policies, baselines, settings, every)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.json != "-":
        print(f"{graph.name}: {graph.n:,} pages, {graph.n_edges:,} links; runs: "
              + ", ".join(r.name for r in runs), file=sys.stderr, flush=True)
    report = run_report(
        graph, runs, draws=args.draws, seeds=args.seeds, budget=args.budget, fractions=fractions,
        batch=args.batch, politeness=politeness, estimate_points=args.estimate_points,
        random_seed=args.random_seed, progress=not args.no_progress,
    )
    report["command"] = "frontera-linkrank simulate " + " ".join(shlex.quote(a) for a in argv)
    report["pagerank_every"] = every
    return _write(report, args)


def _write(report: dict[str, Any], args: argparse.Namespace) -> int:
    """Plot, JSON and the text report, as the arguments ask."""
    from .plot import plot_report
    from .report import format_report

    if args.plot:
        plot_report(report, args.plot)
        report["plot"] = args.plot
    if args.json == "-":
        json.dump(_clean(report), sys.stdout, indent=1, allow_nan=False)
        print()
        return 0
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(_clean(report), f, indent=1, allow_nan=False)
        except OSError as e:
            raise UsageError(f"--json {args.json}: {e.strerror}") from None
    print(format_report(report, report["command"]))
    if args.plot:
        print(f"\ncurves: {args.plot}")
    return 0


def _clean(o: Any) -> Any:
    """JSON-safe copy: numpy scalars as Python numbers, nan/inf as null."""
    import numpy as np

    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o
