"""frontera-linkrank serve-web: a link graph served over HTTP as a local test web.

    frontera-linkrank serve-web GRAPH [--port N] [--errors SHARE] [--redirects SHARE] ...

Serves on 127.0.0.1 as an HTTP proxy: point a crawler at it with
``http_proxy=http://127.0.0.1:PORT`` and it fetches the graph's URLs, real
host names and all, without leaving the machine.
"""

from __future__ import annotations

import argparse
import math

from .common import Argv, ToolError, tool

SHARES = ("errors", "redirects", "slow")


def arguments(prog: str) -> argparse.ArgumentParser:
    """The command's argument parser."""
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Serve a link graph over HTTP on 127.0.0.1, as an HTTP proxy: point a crawler at it "
        "with http_proxy=http://127.0.0.1:PORT and it fetches the graph's URLs, real host names and all, "
        "without leaving the machine.",
    )
    ap.add_argument("graph", help="hollins, uk2007, ukwa, a Hollins-style folder, a CSR .npz, "
                    "or a SRC_URL<TAB>DST_URL file")
    ap.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    ap.add_argument("--port-file", help="write the port number here once listening")
    ap.add_argument("--errors", type=float, default=0.0, metavar="SHARE", help="share of pages answering 404")
    ap.add_argument("--redirects", type=float, default=0.0, metavar="SHARE", help="share of pages answering 301")
    ap.add_argument("--slow", type=float, default=0.0, metavar="SHARE", help="share of slow pages")
    ap.add_argument("--slow-delay", type=float, default=1.0, metavar="SECONDS")
    ap.add_argument("--disallow", action="append", default=[], metavar="PATH", help="robots.txt Disallow prefix")
    ap.add_argument("--changes", metavar="MIN:MAX",
                    help="pages change as Poisson processes with rates (per second) drawn log-uniformly "
                    "in [MIN, MAX], seeded by --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", help="append 'time method url status' for each request to this file")
    ap.add_argument("--max-requests", type=int, default=0, help="stop after this many requests")
    ap.add_argument("--timeout", type=float, default=0, help="stop after this many seconds")
    return ap  # fmt: skip


def change_range(spec: str) -> tuple[float, float]:
    """``MIN:MAX`` of ``--changes`` as two positive rates, MIN <= MAX."""
    try:
        lo, hi = (float(x) for x in spec.split(":"))
        if not 0 < lo <= hi:
            raise ValueError
    except ValueError:
        raise ToolError("--changes takes MIN:MAX, two positive rates with MIN <= MAX") from None
    return lo, hi


@tool("frontera-linkrank serve-web")
def main(argv: Argv, prog: str) -> None:
    """Serve GRAPH until --max-requests or --timeout (or Ctrl-C)."""
    args = arguments(prog).parse_args(argv)
    for name in SHARES:
        if not 0 <= getattr(args, name) <= 1:
            raise ToolError(f"--{name} must be a share between 0 and 1")

    # Imported here: the graph loaders and the server are only needed now.
    import time

    import numpy as np

    from ..simulation.datasets import load_graph
    from ..testweb.server import serve
    from ..testweb.web import TestWeb

    try:
        graph = load_graph(args.graph)
    except (OSError, ValueError) as e:
        raise ToolError(str(e)) from None
    rates = None
    start = time.time()
    if args.changes:
        lo, hi = change_range(args.changes)
        rng = np.random.default_rng(args.seed)
        rates = np.exp(rng.uniform(math.log(lo), math.log(hi), graph.n))
    web = TestWeb(graph, args.errors, args.redirects, args.slow, args.slow_delay, args.disallow, args.seed,
                  change_rates=rates, start_time=start)  # fmt: skip

    def ready(port: int) -> None:
        if args.port_file:
            with open(args.port_file, "w") as f:
                f.write(f"{port}\n")
        print(f"serving {graph.name}: {graph.n:,} pages, {graph.n_edges:,} links on http://127.0.0.1:{port} "
              f"(use it as http_proxy)", flush=True)  # fmt: skip

    served = serve(web, args.port, args.log, args.max_requests, args.timeout, ready)
    print(f"stopped after {served:,} requests", flush=True)
