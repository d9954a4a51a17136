"""The local test web: an HTTP proxy on 127.0.0.1 that serves a link graph.

A crawler pointed at it as its HTTP proxy (``http_proxy=http://127.0.0.1:PORT``)
sends absolute URIs (``GET http://www.hollins.edu/ HTTP/1.1``), so pages
keep their real host names, and every request is answered from the graph:
nothing leaves the machine. ``CONNECT`` (HTTPS tunnels) is refused.
Requests sent directly (not as a proxy) are answered from the ``Host``
header. Each request can be logged (time, method, URL, status) so tests
can count fetches, and the server stops by itself after ``max_requests``
requests or ``timeout`` seconds when asked to.
"""

from __future__ import annotations

import datetime
import email.utils
import logging
import time
from collections.abc import Callable
from typing import IO

from twisted.internet import reactor
from twisted.web import resource, server

from .web import TestWeb

logger = logging.getLogger(__name__)


def http_date(value: str | None) -> float | None:
    """UNIX time of an HTTP date (GMT when it names no zone); None for
    anything else: a malformed ``If-Modified-Since`` is ignored, as a
    server should, and the page is served in full."""
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return when.timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


class WebResource(resource.Resource):
    isLeaf = True

    def __init__(
        self,
        web: TestWeb,
        log: IO[str] | None = None,
        clock: Callable[[], float] = time.time,
        max_requests: int = 0,
        on_limit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.web = web
        self.log = log
        self.clock = clock
        self.max_requests = max_requests
        self.on_limit = on_limit
        self.requests = 0

    def _url(self, request):
        uri = request.uri.decode("latin-1")
        if uri.startswith(("http://", "https://")):
            return uri
        host = (request.getHeader("host") or "localhost").lower()
        return f"http://{host}{uri}"

    def render(self, request: server.Request) -> bytes | int:
        method = request.method.decode("latin-1")
        if method == "CONNECT":
            request.setResponseCode(405)
            return b"no tunnels: this test web serves http only\n"
        url = self._url(request)
        if method not in ("GET", "HEAD"):
            status, headers, body = 405, {"Allow": "GET, HEAD"}, b""
            delay = 0.0
        else:
            ims = http_date(request.getHeader("if-modified-since"))
            status, headers, body = self.web.answer(url, self.clock(), request.getHeader("if-none-match"), ims)
            v = self.web.page_of(url)
            delay = self.web.slow_delay if (v is not None and self.web.slow[v]) else 0.0
        self.requests += 1
        if self.log is not None:
            self.log.write(f"{time.time():.3f}\t{method}\t{url}\t{status}\n")
            self.log.flush()
        request.setResponseCode(status)
        for k, val in headers.items():
            request.setHeader(k, val)
        if method == "HEAD":
            body = b""
        if self.max_requests and self.requests >= self.max_requests and self.on_limit:
            reactor.callLater(0.5, self.on_limit)
        if delay:
            def finish():
                if not request.finished and not getattr(request, "_disconnected", False):
                    request.write(body)
                    request.finish()

            reactor.callLater(delay, finish)
            return server.NOT_DONE_YET
        return body


def serve(
    web: TestWeb,
    port: int = 0,
    log_path: str | None = None,
    max_requests: int = 0,
    timeout: float = 0,
    ready: Callable[[int], None] | None = None,
) -> int:
    """Run the test web until stopped (or the limits are reached).

    ``ready(port)`` is called once it listens. Binds 127.0.0.1 only.
    """
    log = open(log_path, "a", encoding="utf-8") if log_path else None

    def stop():
        if reactor.running:
            reactor.stop()

    res = WebResource(web, log, max_requests=max_requests, on_limit=stop)
    site = server.Site(res)
    site.noisy = False
    listening = reactor.listenTCP(port, site, interface="127.0.0.1")
    if timeout:
        reactor.callLater(timeout, stop)
    if ready:
        ready(listening.getHost().port)
    try:
        reactor.run()
    finally:
        if log:
            log.close()
    return res.requests
