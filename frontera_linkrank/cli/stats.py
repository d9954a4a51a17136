"""page_db_stats: a summary of a page database.

    page_db_stats PATH [--top N] [--json]

Pages by state, links, hosts, the AOPIC cash books (virtual page, total
history G, error bound 1/G, invariant residual), counters of the crawl,
the last ranking runs, and the top pages and hosts.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from ..numeric import top_k
from ..storage.pagedb import PageDB
from ..storage.vectors import top_rows
from ..storage.vertices import F_SEED, STATE_NAMES
from .common import Argv, books, open_db, parser, printable_url, scores, tool


def summary(db: PageDB, top: int = 10) -> dict[str, Any]:
    """The summary as plain data (what ``--json`` prints)."""
    v, n = db.vertices, db.n_pages
    a = books(db)
    state = v.state[:n]
    importance = a.importance()
    out = {
        "path": db.path,
        "pages": n,
        "pages_by_state": {name: int((state == s).sum()) for s, name in STATE_NAMES.items()},
        "seeds": int(((v.flags[:n] & F_SEED) != 0).sum()),
        "links": int(v.n_out[:n].sum()),
        "hosts": len(db.host_names),
        "cash": {
            "virtual_page": a.omega,
            "pages": float(a.effective_cash().sum()),
            "history_total": a.G,
            "error_bound": a.error_bound,
            "residual": a.residual(),
            "omega_policy": a.policy,
            "reads": a.reads,
        },
        "counters": db.meta.get("counters", {}),
        "ranking": {},
        "top_pages": {},
    }
    with db.snapshot() as txn:
        for name in db.score_names(txn):
            info = db.score_info(name, txn)
            out["ranking"][name] = info
        ranked = {"importance": importance}
        for name in out["ranking"]:
            ranked[name] = scores(db, name)
        for name, values in ranked.items():
            best = top_k(values, top)
            urls = db.urls(best, txn)
            out["top_pages"][name] = top_rows(name, values, best, urls)
    hosts = v.host[:n].astype(np.int64)
    per_host = np.bincount(hosts, minlength=len(db.host_names))
    crawled = np.bincount(hosts, weights=(state == 2), minlength=len(db.host_names))
    imp = np.bincount(hosts, weights=importance, minlength=len(db.host_names))
    out["top_hosts"] = [
        {"host": db.host_names[h], "pages": int(per_host[h]), "crawled": int(crawled[h]), "importance": float(imp[h])}
        for h in np.argsort(-imp, kind="stable")[:top]
    ]
    return out


def text(s: dict[str, Any]) -> str:
    """The summary :func:`summary` made, as aligned lines."""
    lines = [f"page database {s['path']}"]
    by_state = ", ".join(f"{k} {v:,}" for k, v in s["pages_by_state"].items())
    lines.append(f"pages      {s['pages']:,}  ({by_state}; seeds {s['seeds']:,})")
    lines.append(f"links      {s['links']:,}")
    lines.append(f"hosts      {s['hosts']:,}")
    c = s["cash"]
    lines.append(
        f"cash       virtual page {c['virtual_page']:.6g}, pages {c['pages']:.6g}, residual {c['residual']:.2e} "
        f"(omega policy {c['omega_policy']})"
    )
    lines.append(
        f"history    G = {c['history_total']:.6g}, error bound 1/G = {c['error_bound']:.3g}, reads {c['reads']:,}"
    )
    if s["counters"]:
        lines.append("counters   " + ", ".join(f"{k} {v:,}" for k, v in sorted(s["counters"].items())))
    for name, info in s["ranking"].items():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["time"])) if "time" in info else "?"
        extra = ", ".join(f"{k} {v}" for k, v in info.items() if k not in ("time", "n_pages"))
        lines.append(f"ranking    {name}: {info['n_pages']:,} pages at {when}; {extra}")
    for name, rows in s["top_pages"].items():
        lines.append(f"top pages by {name}:")
        lines += [f"  {r[name]:.6g}  {printable_url(r['url'])}" for r in rows]
    lines.append("top hosts by importance:")
    for h in s["top_hosts"]:
        lines.append(f"  {h['importance']:.6g}  {h['host']}  ({h['pages']:,} pages, {h['crawled']:,} crawled)")
    return "\n".join(lines)


@tool("page_db_stats")
def main(argv: Argv, prog: str) -> None:
    """Print the summary of the database at PATH (text or ``--json``)."""
    ap = parser(prog, __doc__)
    ap.add_argument("path", help="page database directory")
    ap.add_argument("--top", type=int, default=10, metavar="N", help="pages and hosts to list (default 10)")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    db = open_db(args.path)
    try:
        s = summary(db, args.top)
    finally:
        db.close()
    if args.json:
        json.dump(s, sys.stdout, indent=1, default=float)
        sys.stdout.write("\n")
    else:
        print(text(s))


if __name__ == "__main__":
    sys.exit(main())
