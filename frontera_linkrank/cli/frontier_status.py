"""frontera-linkrank frontier-status: what a shared frontier and its spiders are doing.

    frontera-linkrank frontier-status --broker redis://[:PASSWORD@]HOST:PORT/DB [--crawl NAME] [--json]

Reads the broker only: the frontier's state and stats (a frontier whose
state has not been updated for :data:`STALE` seconds and whose lock has
expired is shown dead, with the age of its last update), the spiders with
their partitions, hosts, pages fetched and rate, the backlog of reports.
With ``LINKRANK_SECRET`` in the environment, signed records are read; an
unreachable broker or a wrong password ends in seconds with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from typing import Any

from .common import Argv, ToolError, tool

SHOWN_STATS = ("pages", "hosts", "pages_crawled", "budget", "queued", "open_leases", "pages_per_second",
               "reports_applied", "duplicate_reports", "leases_published", "leases_republished", "bad_messages",
               "bad_items", "bad_links", "bad_fingerprints", "foreign_reports", "feed_repairs", "spiders_stalled",
               "broker_restarts")  # fmt: skip
STALE = 15.0
"""Seconds without a state update after which a frontier that says it runs is taken for dead."""


def arguments(prog: str) -> argparse.ArgumentParser:
    """The command's argument parser."""
    ap = argparse.ArgumentParser(prog=prog, description="State of a shared frontier, read from its broker.")
    ap.add_argument("--broker", required=True, help="redis://[:PASSWORD@]HOST:PORT/DB (or rediss://, unix://)")
    ap.add_argument("--crawl", default="default", help="name of the crawl on the broker")
    ap.add_argument("--json", action="store_true", help="everything as one JSON document")
    return ap


def status(broker: str, crawl: str, secret: str | None = None) -> dict[str, Any]:
    """The status document of crawl ``crawl`` on ``broker``."""
    from ..service.redis_transport import RedisTransport

    t = RedisTransport(broker, crawl, retries=0, secret=secret, timeout=5.0)
    try:
        state = t.get("state") or {}
        signed = not state and t.get_raw("state") is not None
        assignment = t.get("assignment") or {}
        lock = t.get("frontier")
        spiders = t.spiders()
        backlog = t.backlog()
        owners = assignment.get("owners") if isinstance(assignment.get("owners"), list) else []
        feed = t.feed_pending(list(range(len(owners))))
    finally:
        t.close()
    held = Counter(o for o in owners if isinstance(o, str))
    age = round(time.time() - state["time"], 1) if isinstance(state.get("time"), (int, float)) else None
    name = state.get("state", "unreadable: signed with another LINKRANK_SECRET?" if signed else "no frontier")
    if name in ("running", "waiting for seeds") and lock is None and age is not None and age > STALE:
        name = f"dead (no update for {_age(age)}; it said {state.get('state')})"
    shares = state.get("spiders") if isinstance(state.get("spiders"), dict) else {}
    return {
        "crawl": crawl,
        "state": name,
        "reason": state.get("reason"),
        "state_age": age,
        "frontier": {k: lock.get(k) for k in ("host", "pid", "since", "path")} if lock else None,
        "applied_through": state.get("applied"),
        "stats": state.get("stats") if isinstance(state.get("stats"), dict) else {},
        "spiders": {s: {"alive": info is not None, "partitions": held.get(s, 0),
                        **(shares.get(s) if isinstance(shares.get(s), dict) else {}),
                        **{k: v for k, v in (info or {}).items() if k not in ("v", "t")}}
                    for s, info in spiders.items()},
        "partitions": len(owners),
        "unowned_partitions": sum(1 for o in owners if o is None),
        "moving_partitions": len(assignment.get("moving") or {}),
        "feed_entries": sum(n for n, _ in feed.values()),
        "feed_pending": sum(p for _, p in feed.values()),
        "backlog": backlog,
    }


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def text(doc: dict[str, Any]) -> list[str]:
    """The status document as lines of text."""
    head = f"crawl {doc['crawl']}: {doc['state']}"
    if doc.get("reason") and doc["reason"] != "finished":
        head += f" ({doc['reason']})"
    if doc["state_age"] is not None and not doc["state"].startswith("dead"):
        head += f" (updated {doc['state_age']} s ago)"
    lines = [head]
    f = doc.get("frontier")
    if f:
        lines.append(f"frontier: {f.get('host')} pid {f.get('pid')}, {f.get('path')}")
    lines += [f"log: {doc['backlog'].get('log_length', 0)} entries, {doc['backlog'].get('log_pending', 0)} "
              f"read and not applied, {doc['backlog'].get('rejected', 0)} refused; applied through "
              f"{doc['applied_through']}",
              f"feed: {doc['partitions']} partitions ({doc['unowned_partitions']} unowned, "
              f"{doc['moving_partitions']} moving), {doc['feed_entries']} entries, {doc['feed_pending']} held "
              "by spiders",
              f"broker memory: {doc['backlog'].get('used_memory')} bytes"]  # fmt: skip
    stats = doc["stats"]
    lines.append("frontier: " + ", ".join(f"{k} {stats[k]}" for k in SHOWN_STATS if k in stats))
    lines.append(f"spiders: {sum(1 for s in doc['spiders'].values() if s['alive'])} alive")
    for sid, s in sorted(doc["spiders"].items()):
        where = f"{s.get('machine', '?')} pid {s.get('pid', '?')}" if s["alive"] else "no heartbeat"
        lines.append(f"  {sid}: {'alive' if s['alive'] else 'dead'}{', stalled' if s.get('stalled') else ''}, "
                     f"{s['partitions']} partitions, {s.get('hosts', 0)} hosts, {s.get('fetched', 0)} pages "
                     f"fetched, {s.get('rate', 0)} pages/s, {where}")
    return lines


@tool("frontera-linkrank frontier-status")
def main(argv: Argv, prog: str) -> None:
    """Print the status of a shared frontier."""
    args = arguments(prog).parse_args(argv)
    import redis

    from ..service.redis_transport import BrokerError, check_broker, mask

    try:
        check_broker(args.broker, timeout=5.0)
        doc = status(args.broker, args.crawl, os.environ.get("LINKRANK_SECRET") or None)
    except BrokerError as e:
        raise ToolError(str(e)) from None
    except redis.RedisError as e:
        raise ToolError(f"broker {mask(args.broker)}: {e}") from None
    print(json.dumps(doc, indent=1, default=str) if args.json else "\n".join(text(doc)))
