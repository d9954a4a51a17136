"""frontera-linkrank serve-status: a live dashboard of a crawl, in the browser.

    frontera-linkrank serve-status PATH [--port 6790] [--bind HOST] [--token TOKEN] [--interval 5]
    frontera-linkrank serve-status --broker URL [--crawl NAME] [PATH]

Serves one page on http://127.0.0.1:PORT/ that updates itself: progress,
rate and ETA, the share of the estimated PageRank fetched, the next pages
in the queue, top pages, hosts, errors and rejected URLs and, with
``--broker``, the shared frontier (what ``frontier-status`` reads); the
same as JSON (``/api/...``) and Prometheus text (``/metrics``).
docs/dashboard.md describes it all.

It only reads, and reads little: of a page database, the status its
frontier keeps in the metadata (every ``LINKRANK_STATUS_INTERVAL``
seconds of the crawl), the counters and the stored rankings' records,
every ``--interval`` seconds; never a page's record. Requests are
answered from the last sample. GET and HEAD only. With a token
(``--token`` or ``FRONTERA_LINKRANK_STATUS_TOKEN``) every request must
carry it. Binds 127.0.0.1 unless ``--bind`` says otherwise.
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
import signal
import socket
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ..storage.errors import PageDBError
from ..storage.viewer import read_metadata, read_top
from .common import Argv, ToolError, tool
from .status_metrics import metrics

DEFAULT_PORT = 6790
HISTORY = 720
"""Samples kept for the charts (an hour at the default interval)."""
RATE_WINDOW = 60.0
"""Seconds of history the crawl rate is measured over."""
SAMPLE_SHARE = 0.1
"""At most this share of the time goes to reading the crawl (a ranking
vector stored without its top list, by an older version, is read once):
when a sample takes longer than this share of ``--interval``, the next one
waits longer."""
NICENESS = 10
"""How much the process lowers its CPU priority (``os.nice``): the crawl
comes first on a busy machine."""
SECTIONS = ("progress", "order", "hosts", "errors", "shared", "history", "database")


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


def encode(data: Any) -> bytes:
    """A sample (or a part of it) as the JSON the endpoints send."""
    return json.dumps(data, allow_nan=False, default=str).encode()


def top_pages(path: str, infos: dict[str, dict[str, Any]], tops: dict[str, list[Any] | None], top: int,
              cache: dict[str, tuple[Any, list[dict[str, Any]]]]) -> dict[str, list[dict[str, Any]]]:
    """The top pages of each stored ranking vector: the list stored with it,
    or for a vector stored without one (by an older version), read off the
    vector once."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, info in infos.items():
        stored = tops.get(name)
        if stored is not None and len(stored) >= min(top, info.get("n_pages", 0)):
            out[name] = stored[:top]
            continue
        stamp = [info.get("version"), info.get("time"), info.get("n_pages")]
        if name not in cache or cache[name][0] != stamp:
            cache[name] = (stamp, read_top(path, name, top))
        out[name] = cache[name][1]
    return out


def _counted(counters: dict[str, int], prefix: str) -> dict[str, int]:
    """The counters named ``prefix...``, without it, largest first."""
    rows = [(k[len(prefix):], v) for k, v in counters.items() if k.startswith(prefix)]
    return dict(sorted(rows, key=lambda kv: (-kv[1], kv[0])))


def database_view(path: str, top: int, cache: dict[str, Any]) -> dict[str, Any]:
    """What the dashboard shows of the page database at ``path``: the status
    its frontier keeps (``LINKRANK_STATUS_INTERVAL``), the counters and the
    stored rankings' records. Only the metadata is read, never a page."""
    doc, infos, tops = read_metadata(path)
    st = doc.get("status")
    if not isinstance(st, dict) or "pages_by_state" not in st:
        st = {}
    counters = doc.get("counters") or {}
    summary = {
        "path": path, "pages": int(doc.get("n_pages", 0)), "pages_by_state": st.get("pages_by_state"),
        "seeds": st.get("seeds"), "links": st.get("links"), "hosts": st.get("hosts"), "cash": st.get("cash"),
        "counters": counters, "ranking": infos, "top_pages": top_pages(path, infos, tops, top, cache),
    }  # fmt: skip
    return {
        "summary": summary,
        "status_time": st.get("time"), "committed": st.get("committed"), "pass_seconds": st.get("pass_seconds"),
        "fetched_pagerank": st.get("fetched_pagerank"),
        "policy": st.get("policy"), "queued": (st.get("queued") or [])[:top], "queued_time": st.get("time"),
        "hosts_by_waiting": (st.get("hosts_by_waiting") or [])[:top],
        "hosts_by_fetched": (st.get("hosts_by_fetched") or [])[:top],
        "by_status": _counted(counters, "http_"), "by_reason": _counted(counters, "failed_"),
        "rejected": dict(sorted(_counted(counters, "rejected_").items())),
    }  # fmt: skip


def progress(doc: dict[str, Any], max_pages: int | None) -> dict[str, Any]:
    """The progress figures of a sample: from the page database when there
    is one, else from the shared frontier's stats."""
    db, shared = doc.get("database"), doc.get("shared")
    stats = (shared or {}).get("stats") or {}
    if db is not None:
        s = db["summary"]
        by = s["pages_by_state"] or {}
        out = {"known": s["pages"], "crawled": by.get("crawled"), "queued": by.get("unfetched"),
               "in_flight": by.get("leased"), "errors": by.get("error"),
               "fetches": s["counters"].get("pages_crawled", 0), "fetch_errors": s["counters"].get("fetch_errors", 0),
               "fetched_pagerank": db["fetched_pagerank"], "t": db["committed"]}  # fmt: skip
    else:
        out = {"known": stats.get("pages"), "crawled": stats.get("pages_crawled"), "queued": stats.get("queued"),
               "in_flight": stats.get("open_leases"), "errors": None, "fetches": stats.get("pages_crawled"),
               "fetch_errors": None, "fetched_pagerank": None, "t": None}  # fmt: skip
    budget = out["max_pages"] = max_pages or stats.get("budget") or None
    out["budget_share"] = out["crawled"] / budget if budget and out["crawled"] is not None else None
    return out


def add_rate(p: dict[str, Any], history: collections.deque, now: float) -> None:
    """Fetches a second over the last :data:`RATE_WINDOW` seconds of
    ``history`` (or since the point before, if older) and the ETA."""
    t, rate = p["t"] or now, None
    if p["fetches"] is not None:
        past = [h for h in history if h["fetches"] is not None and h["t"] < t]
        recent = [h for h in past if t - h["t"] <= RATE_WINDOW] or past[-1:]
        if recent:
            rate = max(0.0, (p["fetches"] - recent[0]["fetches"]) / (t - recent[0]["t"]))
    p["rate"] = rate
    left = None
    if p["max_pages"] and p["crawled"] is not None:
        left, p["eta_of"] = max(0, p["max_pages"] - p["crawled"]), "max_pages"
    elif p["queued"] is not None:
        left, p["eta_of"] = p["queued"] + (p["in_flight"] or 0), "queue"
    p["eta_seconds"] = 0.0 if left == 0 else None if left is None or not rate else left / rate


class Sampler:
    """Reads the crawl every ``interval`` seconds in one background thread
    and keeps the last sample and a history of the progress figures. Of a
    page database it reads the metadata only (the status its frontier
    keeps), in a read transaction as short as the read."""

    def __init__(self, path: str | None, broker: str | None, crawl: str, secret: str | None,
                 max_pages: int | None, interval: float, top: int) -> None:  # fmt: skip
        self.path, self.broker, self.crawl, self.secret = path, broker, crawl, secret
        self.max_pages, self.interval, self.top = max_pages, interval, top
        if path:
            try:  # a path that is not a page database fails at start
                read_metadata(path)
            except PageDBError as e:
                raise ToolError(str(e)) from None
        self.history: collections.deque = collections.deque(maxlen=HISTORY)
        self.doc: dict[str, Any] = {}
        self.doc_json = b"{}"
        self._tops: dict[str, Any] = {}  # top pages read from ranking vectors the frontier did not list
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> dict[str, Any]:
        """Read the crawl now; returns the new document (also kept as :attr:`doc`)."""
        now = time.time()
        doc: dict[str, Any] = {"time": now, "interval": self.interval, "path": self.path,
                               "crawl": self.crawl if self.broker else None, "problems": []}  # fmt: skip
        if self.path:
            try:
                doc["database"] = db = database_view(self.path, self.top, self._tops)
                if db["status_time"] is None:
                    doc["problems"].append("page database: no crawl status yet (a frontier writes it as it crawls, "
                                           "every LINKRANK_STATUS_INTERVAL seconds)")
            except Exception as e:  # noqa: BLE001 - shown on the page; the next sample tries again
                doc["problems"].append(f"page database: {e}")
        if self.broker:
            from .frontier_status import status

            try:  # what `frontier-status --json` prints
                doc["shared"] = status(self.broker, self.crawl, self.secret)
            except Exception as e:  # noqa: BLE001 - an unreachable broker is shown, not fatal
                from ..service.redis_transport import mask

                doc["problems"].append(f"broker {mask(self.broker)}: {str(e).replace(self.broker, mask(self.broker))}")
        p = doc["progress"] = progress(doc, self.max_pages)
        add_rate(p, self.history, now)
        point = {"t": p.pop("t") or now, "crawled": p["crawled"], "fetches": p["fetches"], "known": p["known"],
                 "rate": p["rate"], "fetched_pagerank": p["fetched_pagerank"]}  # fmt: skip
        if not self.history or point["t"] > self.history[-1]["t"]:  # one point per commit read
            self.history.append(point)
        doc["history"] = list(self.history)
        self.doc = _finite(doc)
        self.doc_json = encode(self.doc)  # what the page reads, once
        return self.doc

    def _timed_sample(self) -> float:
        """Sample; the seconds to wait before the next one."""
        start = time.monotonic()
        self.sample()
        took = time.monotonic() - start
        return max(0.0, max(self.interval, took / SAMPLE_SHARE) - took)

    def _run(self, pause: float) -> None:
        while not self._stop.wait(pause):
            pause = self._timed_sample()

    def start(self) -> None:
        """Take the first sample now, then sample in the background."""
        self._thread = threading.Thread(target=self._run, args=(self._timed_sample(),),
                                        name="serve-status sampler", daemon=True)  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


_PARTS = {"order": ("policy", "queued", "queued_time"), "hosts": ("hosts_by_waiting", "hosts_by_fetched"),
          "errors": ("by_status", "by_reason", "rejected")}  # fmt: skip
_SUMMARY_PARTS = {"order": "top_pages"}


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
            self._send(200, self.server.sampler.doc_json, "application/json", head=head)
        elif route.startswith("/api/") and route[5:] in SECTIONS:
            self._json(section(doc, route[5:]), head)
        elif route == "/favicon.ico":
            self._send(204, b"", "image/x-icon", head=head)
        else:
            self._send(404, b"not found: see / and /api/status\n", "text/plain; charset=utf-8", head=head)

    def _json(self, data: Any, head: bool) -> None:
        self._send(200, encode(data), "application/json", head=head)

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
    ap.add_argument("--top", type=int, default=15, metavar="N",
                    help="rows per table (default 15; the queue and hosts: at most 50)")
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
