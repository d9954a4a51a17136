"""frontera-linkrank serve-status: a live dashboard of a crawl, in the browser.

    frontera-linkrank serve-status PATH [--port 6790] [--bind HOST] [--token TOKEN] [--interval 5]
    frontera-linkrank serve-status --broker URL [--crawl NAME] [PATH]

Serves one page on http://127.0.0.1:PORT/ that updates itself: progress,
rate and ETA, the share of the estimated PageRank fetched, the next pages
handed out (as ``top --queued``), top pages, hosts, errors and rejected
URLs and, with ``--broker``, the shared frontier (what ``frontier-status``
reads); the same as JSON (``/api/...``) and Prometheus text
(``/metrics``). docs/dashboard.md describes it all.

It only reads: one background thread reads the page database (opened
read-only for the sample, closed after it) every ``--interval`` seconds,
or less often when a sample takes longer than a tenth of that, and the
process runs at a lower CPU priority: the crawl it watches shares the
machine. Requests are answered from the last sample. GET and HEAD only. With a
token (``--token`` or ``FRONTERA_LINKRANK_STATUS_TOKEN``) every request
must carry it. Binds 127.0.0.1 unless ``--bind`` says otherwise.
"""

from __future__ import annotations

import argparse
import collections
import hmac
import http.server
import importlib.resources
import ipaddress
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ..storage.pagedb import PageDB
from ..storage.vertices import ERROR, LEASED, UNFETCHED
from .common import Argv, ToolError, books, open_db, tool
from .status_metrics import metrics

DEFAULT_PORT = 6790
HISTORY = 720
"""Samples kept for the charts (an hour at the default interval)."""
RATE_WINDOW = 60.0
"""Seconds of history the crawl rate is measured over."""
ERROR_SAMPLE = 2000
"""Failed pages whose error message is read (the last discovered) per sample."""
SAMPLE_SHARE = 0.1
"""At most this share of the time goes to reading the crawl: when a sample
takes longer than this share of ``--interval``, the next one waits longer.
The crawl it watches shares the machine, and a viewer should not slow it."""
QUEUE_SHARE = 0.1
"""At most this share of the time goes to rebuilding the queue order (the
crawl policy's keys: on a large database the costliest part of a sample),
which is otherwise read at every sample."""
NICENESS = 10
"""How much the process lowers its CPU priority (``os.nice``): the crawl
comes first on a busy machine."""
SECTIONS = ("progress", "order", "hosts", "errors", "shared", "history", "database")
_REASON = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Timeout\w*|Refused|Lost|Failed|Done))\b")


# -- what a sample reads ----------------------------------------------------


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float as None (JSON has no NaN), numpy scalars as Python ones."""
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (np.integer, np.bool_)):
        return x.item()
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def error_reason(message: str | None) -> str:
    """A fetch error message reduced to its kind: the exception's name when
    it names one, else its first line (at most 80 characters).

    >>> error_reason("[<twisted.python.failure.Failure twisted.internet.error.DNSLookupError: no such host>]")
    'DNSLookupError'
    >>> error_reason("robots.txt forbids it\\nmore")
    'robots.txt forbids it'
    """
    if not message:
        return "unknown"
    m = _REASON.search(message)
    return m.group(1) if m else message.strip().splitlines()[0][:80] if message.strip() else "unknown"


def queue_view(db: PageDB, top: int) -> dict[str, Any]:
    """The next ``top`` pages handed out (``top --queued``), with when they were read."""
    from .queued import queued_pages

    policy, queue = queued_pages(db, top)
    return {"policy": policy, "queued": [{"url": u, "priority": p, "key": k} for u, p, k in queue],
            "queued_time": time.time()}  # fmt: skip


def database_view(db: PageDB, top: int, queue: dict[str, Any]) -> dict[str, Any]:
    """What the dashboard shows of a page database (reloaded by the caller),
    with ``queue`` from :func:`queue_view`."""
    from .stats import summary

    s = summary(db, top)  # exactly page_db_stats' figures
    v, n = db.vertices, db.n_pages
    state = v.state[:n]
    fetched = v.n_crawls[:n] > 0
    importance = books(db).importance()
    total = float(importance.sum())
    hosts = v.host[:n].astype(np.int64)
    n_hosts = len(db.host_names)
    waiting = np.bincount(hosts[state == UNFETCHED], minlength=n_hosts)
    leased = np.bincount(hosts[state == LEASED], minlength=n_hosts)
    fetches = np.bincount(hosts, weights=v.n_crawls[:n], minlength=n_hosts).astype(np.int64)

    def host_rows(counts: np.ndarray) -> list[dict[str, Any]]:
        best = np.argsort(-counts, kind="stable")[:top]
        return [{"host": db.host_names[h], "waiting": int(waiting[h]), "in_flight": int(leased[h]),
                 "fetches": int(fetches[h])} for h in best if counts[h] > 0]  # fmt: skip

    status = v.status[:n]
    codes, counts = np.unique(status[status >= 400], return_counts=True)
    failed = np.flatnonzero(state == ERROR)[-ERROR_SAMPLE:]
    with db.snapshot() as txn:
        reasons = collections.Counter(error_reason(db.error_message(int(i), txn)) for i in failed)
    counters = s["counters"]
    return {
        "summary": s,
        "fetched_importance": float(importance[fetched].sum()) / total if total > 0 else None,
        **queue,
        "hosts_by_waiting": host_rows(waiting),
        "hosts_by_fetches": host_rows(fetches),
        "by_status": {str(int(c)): int(k) for c, k in zip(codes, counts)},
        "by_reason": dict(reasons.most_common(top)),
        "reasons_read": len(failed),
        "rejected": {k[len("rejected_"):]: v for k, v in sorted(counters.items()) if k.startswith("rejected_")},
    }


def progress(doc: dict[str, Any], max_pages: int | None) -> dict[str, Any]:
    """The progress figures of a sample: from the page database when there
    is one, else from the shared frontier's stats."""
    db, shared = doc.get("database"), doc.get("shared")
    stats = (shared or {}).get("stats") or {}
    if db is not None:
        s = db["summary"]
        by = s["pages_by_state"]
        out = {"known": s["pages"], "crawled": by["crawled"], "queued": by["unfetched"], "in_flight": by["leased"],
               "errors": by["error"], "fetch_errors": s["counters"].get("fetch_errors", 0),
               "fetched_importance": db["fetched_importance"]}  # fmt: skip
    else:
        out = {"known": stats.get("pages"), "crawled": stats.get("pages_crawled"), "queued": stats.get("queued"),
               "in_flight": stats.get("open_leases"), "errors": None, "fetch_errors": None,
               "fetched_importance": None}  # fmt: skip
    budget = out["max_pages"] = max_pages or stats.get("budget") or None
    out["budget_share"] = out["crawled"] / budget if budget and out["crawled"] is not None else None
    return out


def add_rate(p: dict[str, Any], history: collections.deque, now: float) -> None:
    """Crawl rate over the last :data:`RATE_WINDOW` seconds of ``history`` and the ETA."""
    rate = None
    if p["crawled"] is not None:
        past = [h for h in history if now - h["t"] <= RATE_WINDOW and h["crawled"] is not None]
        if past and now > past[0]["t"]:
            rate = max(0.0, (p["crawled"] - past[0]["crawled"]) / (now - past[0]["t"]))
    p["rate"] = rate
    left = None
    if p["max_pages"] and p["crawled"] is not None:
        left, p["eta_of"] = max(0, p["max_pages"] - p["crawled"]), "max_pages"
    elif p["queued"] is not None:
        left, p["eta_of"] = p["queued"] + (p["in_flight"] or 0), "queue"
    p["eta_seconds"] = 0.0 if left == 0 else None if left is None or not rate else left / rate


class Sampler:
    """Reads the crawl every ``interval`` seconds in one background thread
    and keeps the last sample and a history of the progress figures. The
    page database is opened read-only for each sample and closed after it
    (opened at once, so that a path that is not one fails at start)."""

    def __init__(self, path: str | None, broker: str | None, crawl: str, secret: str | None,
                 max_pages: int | None, interval: float, top: int) -> None:  # fmt: skip
        self.path, self.broker, self.crawl, self.secret = path, broker, crawl, secret
        self.max_pages, self.interval, self.top = max_pages, interval, top
        self.db = open_db(path) if path else None
        self.history: collections.deque = collections.deque(maxlen=HISTORY)
        self.doc: dict[str, Any] = {}
        self._queue: dict[str, Any] | None = None
        self._queue_due = 0.0
        self._queue_took = 0.0  # seconds the queue order took to rebuild in this sample
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> dict[str, Any]:
        """Read the crawl now; returns the new document (also kept as :attr:`doc`)."""
        now = time.time()
        doc: dict[str, Any] = {"time": now, "interval": self.interval, "path": self.path,
                               "crawl": self.crawl if self.broker else None, "problems": []}  # fmt: skip
        if self.path:
            try:
                if self.db is None:
                    self.db = open_db(self.path)
                doc["database"] = database_view(self.db, self.top, self._queue_view())
            except Exception as e:  # noqa: BLE001 - shown on the page; the next sample tries again
                doc["problems"].append(f"page database: {e}")
            finally:
                self._close_db()
        if self.broker:
            from .frontier_status import status

            try:  # what `frontier-status --json` prints
                doc["shared"] = status(self.broker, self.crawl, self.secret)
            except Exception as e:  # noqa: BLE001 - an unreachable broker is shown, not fatal
                from ..service.redis_transport import mask

                doc["problems"].append(f"broker {mask(self.broker)}: {str(e).replace(self.broker, mask(self.broker))}")
        p = doc["progress"] = progress(doc, self.max_pages)
        add_rate(p, self.history, now)
        self.history.append({"t": now, "crawled": p["crawled"], "known": p["known"], "rate": p["rate"],
                             "fetched_importance": p["fetched_importance"]})  # fmt: skip
        doc["history"] = list(self.history)
        self.doc = _finite(doc)
        return self.doc

    def _close_db(self) -> None:
        """Close the page database until the next sample: a read snapshot
        held between samples (minutes, on a large crawl) would keep the
        crawl's writer from reusing the pages it frees, and its file grows."""
        if self.db is not None:
            self.db.close()
            self.db = None

    def _queue_view(self) -> dict[str, Any]:
        start = time.monotonic()
        if self._queue is None or start >= self._queue_due:
            assert self.db is not None
            self._queue = queue_view(self.db, self.top)
            self._queue_took = time.monotonic() - start
            self._queue_due = start + self._queue_took / QUEUE_SHARE
        return self._queue

    def _timed_sample(self) -> float:
        """Sample; the seconds to wait before the next one. A rebuild of the
        queue order keeps to its own share, so it does not count here (the
        first one also imports the crawl policy's modules)."""
        start = time.monotonic()
        self._queue_took = 0.0
        self.sample()
        took = time.monotonic() - start
        return max(0.0, max(self.interval, (took - self._queue_took) / SAMPLE_SHARE) - took)

    def _run(self, pause: float) -> None:
        while not self._stop.wait(pause):
            pause = self._timed_sample()

    def start(self) -> None:
        """Take the first sample now, then sample in the background."""
        self._thread = threading.Thread(target=self._run, args=(self._timed_sample(),),
                                        name="serve-status sampler", daemon=True)  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and close the database."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._close_db()


_PARTS = {"order": ("policy", "queued", "queued_time"), "hosts": ("hosts_by_waiting", "hosts_by_fetches"),
          "errors": ("by_status", "by_reason", "reasons_read", "rejected")}  # fmt: skip
_SUMMARY_PARTS = {"order": "top_pages", "hosts": "top_hosts"}


def section(doc: dict[str, Any], name: str) -> Any:
    """One part of the document: ``/api/NAME``."""
    db = doc.get("database") or {}
    summary = db.get("summary") or {}
    if name in _PARTS:
        extra = {_SUMMARY_PARTS[name]: summary.get(_SUMMARY_PARTS[name])} if name in _SUMMARY_PARTS else {}
        return {k: db.get(k) for k in _PARTS[name]} | extra
    return summary if name == "database" else doc.get(name)


# -- the server -------------------------------------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    """GET and HEAD of the page, ``/api/...`` and ``/metrics``; 405 for any other method."""

    server: StatusServer
    server_version = "frontera-linkrank-status"
    protocol_version = "HTTP/1.1"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method: answered, not 501
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self.close_connection = True  # its body, if any, is not read
        self._send(405, b"only GET and HEAD\n", "text/plain; charset=utf-8", {"Allow": "GET, HEAD"})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _authorized(self, query: dict[str, list[str]]) -> bool:
        token = self.server.token
        if not token:
            return True
        given = query.get("token", [""])[0]
        auth = self.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())

    def _answer(self, head: bool) -> None:
        parts = urlsplit(self.path)
        if not self._authorized(parse_qs(parts.query)):
            self._send(401, b"a token is required: Authorization: Bearer TOKEN or ?token=TOKEN\n",
                       "text/plain; charset=utf-8", {"WWW-Authenticate": 'Bearer realm="serve-status"'}, head)
            return
        doc = self.server.sampler.doc
        route = parts.path.rstrip("/") or "/"
        if route in ("/", "/index.html"):
            page = importlib.resources.files(__package__).joinpath("dashboard.html").read_bytes()  # in the package
            self._send(200, page, "text/html; charset=utf-8", head=head)
        elif route == "/metrics":
            self._send(200, metrics(doc).encode(), "text/plain; version=0.0.4; charset=utf-8", head=head)
        elif route == "/api/status":
            self._json(doc, head)
        elif route.startswith("/api/") and route[5:] in SECTIONS:
            self._json(section(doc, route[5:]), head)
        elif route == "/favicon.ico":
            self._send(204, b"", "image/x-icon", head=head)
        else:
            self._send(404, b"not found: see / and /api/status\n", "text/plain; charset=utf-8", head=head)

    def _json(self, data: Any, head: bool) -> None:
        self._send(200, json.dumps(data, allow_nan=False, default=str).encode(), "application/json", head=head)

    def _send(self, code: int, body: bytes, ctype: str, headers: dict[str, str] | None = None,
              head: bool = False) -> None:  # fmt: skip
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
                         "style-src 'unsafe-inline'; connect-src 'self'; img-src data:")  # fmt: skip
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass  # quiet: a request line may carry the token


class StatusServer(http.server.ThreadingHTTPServer):
    """The HTTP server, holding the sampler and the token its handlers read."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], sampler: Sampler, token: str | None) -> None:
        self.sampler, self.token = sampler, token
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)


def arguments(prog: str) -> argparse.ArgumentParser:
    """The command's argument parser."""
    ap = argparse.ArgumentParser(prog=prog, description="A live dashboard of a crawl on http://127.0.0.1:PORT/: "
                                 "progress, the order at work, hosts, errors, a shared frontier's spiders.")
    ap.add_argument("path", nargs="?", help="page database directory (opened read-only)")
    ap.add_argument("--broker", help="a shared frontier's redis://[:PASSWORD@]HOST:PORT/DB")
    ap.add_argument("--crawl", default="default", help="with --broker: the crawl's name (default 'default')")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any)")
    ap.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)")
    ap.add_argument("--token", help="required on every request (default: $FRONTERA_LINKRANK_STATUS_TOKEN, if set)")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    ap.add_argument("--max-pages", type=int, default=0, help="the crawl's LINKRANK_MAX_PAGES, for the share done")
    ap.add_argument("--top", type=int, default=15, metavar="N", help="rows per table (default 15)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--timeout", type=float, default=0, help="stop after this many seconds (default: never)")
    return ap  # fmt: skip


def _check(args: argparse.Namespace) -> None:
    if not args.path and not args.broker:
        raise ToolError("give a page database PATH, --broker URL, or both")
    if args.interval <= 0 or args.top < 1 or args.max_pages < 0 or not 0 <= args.port <= 65535:
        raise ToolError("--interval must be > 0, --top >= 1, --max-pages >= 0, --port in 0..65535")


def _exposed(bind: str) -> bool:
    try:
        return not ipaddress.ip_address(bind).is_loopback
    except ValueError:  # a host name
        return bind != "localhost"


@tool("frontera-linkrank serve-status")
def main(argv: Argv, prog: str) -> None:
    """Serve the dashboard until Ctrl-C, SIGTERM or ``--timeout``."""
    args = arguments(prog).parse_args(argv)
    _check(args)
    token = args.token or os.environ.get("FRONTERA_LINKRANK_STATUS_TOKEN") or None
    if args.broker:
        from ..service.redis_transport import BrokerError, check_broker

        try:
            check_broker(args.broker, timeout=5.0)
        except BrokerError as e:
            raise ToolError(str(e)) from None
    sampler = Sampler(args.path, args.broker, args.crawl, os.environ.get("LINKRANK_SECRET") or None,
                      args.max_pages or None, args.interval, args.top)  # fmt: skip
    try:
        httpd = StatusServer((args.bind, args.port), sampler, token)
    except OSError as e:
        sampler.stop()
        raise ToolError(f"cannot listen on {args.bind}:{args.port}: {e.strerror or e}") from None
    if _exposed(args.bind):
        print(f"{prog}: warning: listening on {args.bind}, reachable from other machines"
              + ("" if token else " by anyone: set --token"), file=sys.stderr, flush=True)  # fmt: skip
    stop = threading.Event()

    def shutdown(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    try:
        os.nice(NICENESS)
    except OSError:  # not allowed here: the duty cycle alone keeps the reads in check
        pass
    if args.timeout:
        timer = threading.Timer(args.timeout, shutdown)
        timer.daemon = True
        timer.start()
    try:
        # The first sample is read before serving (the page then has figures):
        # on a crawl of millions of pages that takes a while, so say so.
        print(f"reading the first sample of {args.path or args.crawl}...", file=sys.stderr, flush=True)
        sampler.start()
        port = httpd.server_address[1]
        if args.port_file:
            with open(args.port_file, "w") as f:
                f.write(f"{port}\n")
        host = f"[{args.bind}]" if ":" in args.bind else args.bind
        print(f"serving the status of {args.path or args.crawl} on http://{host}:{port}/", flush=True)
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        sampler.stop()
