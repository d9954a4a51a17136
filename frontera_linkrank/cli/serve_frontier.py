"""frontera-linkrank serve-frontier: one frontier for many spiders, through a broker.

    frontera-linkrank serve-frontier PATH --broker redis://[:PASSWORD@]HOST:PORT/DB [--crawl NAME]
        [--seeds FILE] [--set LINKRANK_POLICY=hybrid ...] [--partitions 64] [--reset-broker]

Owns the page database at PATH (the one writer), hands out requests to the
spiders that run with ``LINKRANK_FRONTIER_URL`` set to the same broker, and
applies what they report. One frontier serves a crawl: a second one, or a
database other than the crawl's, is refused with one line. With
``LINKRANK_SECRET`` (``--set`` or the environment) every message is signed
and unsigned ones are refused. Stops cleanly (committing) on SIGTERM or
Ctrl-C, within seconds whatever the broker does.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
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
    ap.add_argument("--reset-broker", action="store_true",
                    help="delete what the broker holds of crawl NAME first (a new database on an old crawl name)")
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
    if os.environ.get("LINKRANK_SECRET") and "LINKRANK_SECRET" not in values:
        values["LINKRANK_SECRET"] = os.environ["LINKRANK_SECRET"]
    try:
        s = LinkRankSettings(values)
        if not s.MAX_REQUESTS_PER_HOST:
            # Outstanding requests per host: Scrapy's default per-domain concurrency (8) twice over.
            s = LinkRankSettings(values, MAX_REQUESTS_PER_HOST=16)
    except SettingsError as e:
        raise ToolError(str(e)) from None
    return s


STOP_GRACE = 10.0  # seconds a stop may take before the process exits anyway


def _on_signals(stop: threading.Event, log: logging.Logger) -> None:
    """SIGTERM / SIGINT: stop (committing); if that takes over
    :data:`STOP_GRACE` seconds (a broker that does not answer), or on a
    second signal, exit at once: what was committed stays, the rest is
    redone by the next start."""

    def now() -> None:
        log.warning("not stopped within %.0f s (the broker does not answer): exiting now; what was committed is "
                    "kept, the rest is read again at the next start", STOP_GRACE)
        logging.shutdown()
        os._exit(1)

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            now()
        stop.set()
        timer = threading.Timer(STOP_GRACE, now)
        timer.daemon = True
        timer.start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


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
    from ..service.ownership import FrontierRefused
    from ..service.redis_transport import BrokerError, RedisTransport, check_broker, mask
    from ..service.server import FrontierService

    seeds = []
    if args.seeds:
        from ..scrapy.config import read_seeds_file  # (imports Scrapy: only when needed)

        try:
            seeds = read_seeds_file(args.seeds)
        except OSError as e:
            raise ToolError(f"--seeds {args.seeds}: {e.strerror or e}") from None
    broker = mask(args.broker)
    try:  # fail at once, not after the reconnecting client's back-off, if the broker is not there
        check_broker(args.broker)
    except BrokerError as e:
        raise ToolError(str(e)) from None
    core = FrontierCore(settings, keep_leases=True)  # a second writer: WriterLockedError, one line
    # A long-lived process allocating a few objects per link: collect the
    # young generation less often, and never rescan what exists at start.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    stop = threading.Event()
    log = logging.getLogger(__name__)
    _on_signals(stop, log)
    # Few retries, short timeouts: the service waits out an outage itself, checking for a stop.
    transport = RedisTransport(args.broker, args.crawl, retries=2, secret=settings.SECRET, timeout=5.0)
    try:
        service = FrontierService(core, transport, args.partitions, crawl=args.crawl, broker=broker,
                                  reset=args.reset_broker)
        if seeds:
            core.add_seeds([OutgoingRequest(u) for u in seeds])
            log.info("%d seeds read from %s", len(seeds), args.seeds)
        service.run(stop)
        if service.error is not None:
            raise ToolError(f"frontier stopped: {service.error}")
    except FrontierRefused as e:
        raise ToolError(str(e)) from None
    except redis.AuthenticationError as e:
        raise ToolError(f"broker {broker}: authentication failed ({e})") from None
    except (ValueError, redis.RedisError) as e:
        raise ToolError(f"broker {broker}: {e}" if isinstance(e, redis.RedisError) else str(e)) from None
    finally:
        core.close()
        transport.close()
