"""frontera-linkrank serve-frontier: one frontier for many spiders, through a broker.

    frontera-linkrank serve-frontier PATH --broker redis://HOST:PORT/DB [--crawl NAME]
        [--seeds FILE] [--set LINKRANK_POLICY=hybrid ...] [--partitions 64]

Owns the page database at PATH (the one writer), hands out requests to the
spiders that run with ``LINKRANK_FRONTIER_URL`` set to the same broker, and
applies what they report. Stops cleanly (committing) on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import threading

from .common import Argv, ToolError, tool


def arguments(prog: str) -> argparse.ArgumentParser:
    """The command's argument parser."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[2].replace("\n", " "))
    ap.add_argument("path", help="page database directory (created if new)")
    ap.add_argument("--broker", required=True, help="redis://HOST:PORT/DB (or rediss://, unix://)")
    ap.add_argument("--crawl", default="default", help="name of the crawl on the broker (spiders: LINKRANK_CRAWL)")
    ap.add_argument("--seeds", metavar="FILE", help="seed URLs, one per line, added at start")
    ap.add_argument("--set", action="append", default=[], metavar="LINKRANK_NAME=VALUE",
                    help="a crawl setting (policy, ranking, recrawl, budget...); repeat for several")
    ap.add_argument("--partitions", type=int, default=64,
                    help="partitions of the hosts (fixed for a crawl; a few per spider at least)")
    ap.add_argument("--log-level", default="INFO")
    return ap  # fmt: skip


def crawl_settings(path: str, pairs: list[str]) -> object:
    """The validated settings of ``--set`` pairs for the database at ``path``."""
    from ..settings import LinkRankSettings, SettingsError

    values = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ToolError(f"--set {pair!r}: expected LINKRANK_NAME=VALUE")
        values[name if name.startswith("LINKRANK_") else "LINKRANK_" + name] = value.strip()
    values["LINKRANK_PATH"] = path
    try:
        s = LinkRankSettings(values)
        if not s.MAX_REQUESTS_PER_HOST:
            # Outstanding requests per host: Scrapy's default per-domain concurrency (8) twice over.
            s = LinkRankSettings(values, MAX_REQUESTS_PER_HOST=16)
    except SettingsError as e:
        raise ToolError(str(e)) from None
    return s


@tool("frontera-linkrank serve-frontier")
def main(argv: Argv, prog: str) -> None:
    """Serve the frontier at PATH until SIGTERM or Ctrl-C."""
    args = arguments(prog).parse_args(argv)
    if not 1 <= args.partitions <= 4096:
        raise ToolError("--partitions must be between 1 and 4096")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s [%(name)s] %(levelname)s: %(message)s")
    settings = crawl_settings(args.path, args.set)

    import redis

    from ..core.codec import OutgoingRequest
    from ..core.frontier_core import FrontierCore
    from ..scrapy.config import read_seeds_file
    from ..service.redis_transport import RedisTransport
    from ..service.server import FrontierService

    seeds = []
    if args.seeds:
        try:
            seeds = read_seeds_file(args.seeds)
        except OSError as e:
            raise ToolError(f"--seeds {args.seeds}: {e.strerror or e}") from None
    try:  # fail at once, not after the reconnecting client's back-off, if the broker is not there
        redis.Redis.from_url(args.broker, socket_connect_timeout=5, socket_timeout=5).ping()
    except (redis.RedisError, OSError, ValueError) as e:
        raise ToolError(f"broker {args.broker}: {e}") from None
    core = FrontierCore(settings, keep_leases=True)  # a second writer: WriterLockedError, one line
    # A long-lived process allocating a few objects per link: collect the
    # young generation less often, and never rescan what exists at start.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    transport = RedisTransport(args.broker, args.crawl)
    try:
        service = FrontierService(core, transport, args.partitions)
        if seeds:
            core.add_seeds([OutgoingRequest(u) for u in seeds])
            logging.getLogger(__name__).info("%d seeds read from %s", len(seeds), args.seeds)
        service.run(stop)
        if service.error is not None:
            raise ToolError(f"frontier stopped: {service.error}")
    except (ValueError, redis.RedisError) as e:
        raise ToolError(str(e)) from None
    finally:
        core.close()
        transport.close()
