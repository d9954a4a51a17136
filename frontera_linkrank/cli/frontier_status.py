"""frontera-linkrank frontier-status: what a shared frontier and its spiders are doing.

    frontera-linkrank frontier-status --broker redis://HOST:PORT/DB [--crawl NAME] [--json]

Reads the broker only: the frontier's state and stats, the live spiders
and the partitions each owns, the backlog of reports.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

from .common import Argv, ToolError, tool

SHOWN_STATS = ("pages", "hosts", "pages_crawled", "queued", "open_leases", "pages_per_second", "reports_applied",
               "duplicate_reports", "leases_published", "leases_republished", "bad_messages", "broker_restarts")


def arguments(prog: str) -> argparse.ArgumentParser:
    """The command's argument parser."""
    ap = argparse.ArgumentParser(prog=prog, description="State of a shared frontier, read from its broker.")
    ap.add_argument("--broker", required=True, help="redis://HOST:PORT/DB (or rediss://, unix://)")
    ap.add_argument("--crawl", default="default", help="name of the crawl on the broker")
    ap.add_argument("--json", action="store_true", help="everything as one JSON document")
    return ap


def status(broker: str, crawl: str) -> dict[str, Any]:
    """The status document of crawl ``crawl`` on ``broker``."""
    from ..service.redis_transport import RedisTransport

    t = RedisTransport(broker, crawl)
    try:
        state = t.get("state") or {}
        assignment = t.get("assignment") or {}
        spiders = t.spiders()
        backlog = t.backlog()
        owners = assignment.get("owners") or []
        feed = t.feed_pending(list(range(len(owners))))
    finally:
        t.close()
    held = Counter(owners)
    return {
        "crawl": crawl,
        "state": state.get("state", "no frontier"),
        "state_age": round(time.time() - state["time"], 1) if state.get("time") else None,
        "applied_through": state.get("applied"),
        "stats": state.get("stats") or {},
        "spiders": {s: {"alive": info is not None, "partitions": held.get(s, 0),
                        **{k: v for k, v in (info or {}).items() if k != "v"}} for s, info in spiders.items()},
        "partitions": len(owners),
        "unowned_partitions": sum(1 for o in owners if o is None),
        "moving_partitions": len(assignment.get("moving") or {}),
        "feed_entries": sum(n for n, _ in feed.values()),
        "feed_pending": sum(p for _, p in feed.values()),
        "backlog": backlog,
    }


def text(doc: dict[str, Any]) -> list[str]:
    """The status document as lines of text."""
    lines = [f"crawl {doc['crawl']}: {doc['state']}"
             + (f" (updated {doc['state_age']} s ago)" if doc["state_age"] is not None else ""),
             f"log: {doc['backlog'].get('log_length', 0)} entries, {doc['backlog'].get('log_pending', 0)} "
             f"read and not applied; applied through {doc['applied_through']}",
             f"feed: {doc['partitions']} partitions ({doc['unowned_partitions']} unowned, "
             f"{doc['moving_partitions']} moving), {doc['feed_entries']} entries, {doc['feed_pending']} held "
             "by spiders",
             f"broker memory: {doc['backlog'].get('used_memory')} bytes"]  # fmt: skip
    stats = doc["stats"]
    lines.append("frontier: " + ", ".join(f"{k} {stats[k]}" for k in SHOWN_STATS if k in stats))
    lines.append(f"spiders: {sum(1 for s in doc['spiders'].values() if s['alive'])} alive")
    for sid, s in sorted(doc["spiders"].items()):
        where = f"{s.get('machine', '?')} pid {s.get('pid', '?')}" if s["alive"] else "no heartbeat"
        lines.append(f"  {sid}: {'alive' if s['alive'] else 'dead'}, {s['partitions']} partitions, {where}")
    return lines


@tool("frontera-linkrank frontier-status")
def main(argv: Argv, prog: str) -> None:
    """Print the status of a shared frontier."""
    args = arguments(prog).parse_args(argv)
    import redis

    try:
        doc = status(args.broker, args.crawl)
    except redis.RedisError as e:
        raise ToolError(f"{args.broker}: {e}") from None
    print(json.dumps(doc, indent=1, default=str) if args.json else "\n".join(text(doc)))
