"""Memory, disk and speed of the frontier as a broad crawl grows.

A crawler's loop over :class:`~frontera_linkrank.core.frontier_core.FrontierCore`
(``next_requests`` of ``--batch`` pages, then each page reported fetched
with its 10 links) on a synthetic broad web discovered as it is crawled
(``benchmarks/scale_web.py``: 5 new pages a page, mostly on the parent's
host, about 1% of them founding new hosts, or one in ``--host-block``;
5 links to known pages by a Zipf law), default settings (LMDB fsync on), until the frontier knows
``--pages`` pages. The web is computed from page numbers, so this process
holds no memory per page but the frontier's: its RSS is the frontier's.

At each checkpoint (1, 2, 5, 10, 20, 50, 100M known pages up to
``--pages``, and ``--pages`` itself) it prints the crawl rate over the
segment, the process's memory (peak, now, anonymous and file-backed:
LMDB's memory map appears in RSS as file pages the kernel may drop),
memory per known page and per page added since the last checkpoint
(marginal), the same for the anonymous memory held between rankings (the
last sample taken while no background ranking ran, which leaves out a
ranking's transient arrays), bytes on disk per known page, and hosts.
Then it closes the frontier, reopens it in a new process (time to the
first batch of requests) and times ``page_db_check`` on the database.
Ctrl-C ends the crawl early; what was measured is reported.

``--resume`` continues the crawl of ``--dir DIR`` (closed, or killed) up
to ``--pages``: the web holds no state, so the crawl goes on where the page
database stands. With ``--json FILE`` every checkpoint is written to FILE
as it is reached, and a resumed run keeps the checkpoints FILE holds from
earlier runs in DIR: the table then covers the whole crawl, each row
measured by the process that reached it (the first row after a resume
counts its marginal figures from the reopened frontier's, and its rate
leaves out the open, which is reported apart).

    python benchmarks/scale.py                        # to 100M known pages
    python benchmarks/scale.py --pages 2000000        # checkpoints at 1M and 2M
    python benchmarks/scale.py --pages 200000 --checkpoints 50000 100000 200000
    python benchmarks/scale.py --generator-only --pages 20000000   # the web alone: flat RSS
    python benchmarks/scale.py --serve-frontier       # serve-frontier + fake spiders to 10M
    python benchmarks/scale.py --pages 300000 --set LINKRANK_SYNC=False --json out.json
    python benchmarks/scale.py --pages 1000000 --host-block 10   # ten times the hosts: memory per host
    python benchmarks/scale.py --pages 50000000 --dir DIR --json out.json            # then:
    python benchmarks/scale.py --pages 100000000 --dir DIR --json out.json --resume  # on to 100M

Rates count only the time spent in the frontier's calls (wall time is in
the JSON); the rate at each checkpoint is also given relative to the first
checkpoint's, measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from scale_report import derive, disk_bytes, memory, progress_line  # noqa: E402
from scale_web import HOST_BLOCK, BroadWeb, IdSpaceExceeded, depth, fingerprint_hex, page_number  # noqa: E402

BIN = os.path.dirname(sys.executable)
CHECKPOINTS = [1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000]
SERVE_PAGES = 10_000_000


def checkpoint_list(pages: int, custom: list[int] | None) -> list[int]:
    points = sorted(set(p for p in (custom or CHECKPOINTS) if p <= pages) | {pages})
    return points


# -- the crawler's side -----------------------------------------------------------------------------
class StopOnInterrupt:
    """A first Ctrl-C ends the crawl at the next batch (the frontier is then
    closed as usual); a second one interrupts at once."""

    def __enter__(self):
        self.hit = False
        self.previous = signal.signal(signal.SIGINT, self._handle)
        return lambda: self.hit

    def _handle(self, signum, frame):
        if self.hit:
            raise KeyboardInterrupt
        self.hit = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)


class Fetched:
    """A fetched page as the core reads it (status 200, no body)."""

    def __init__(self, request):
        self.url, self.status_code, self.headers, self.body = request.url, 200, {}, b""
        self.request = request
        self.meta = request.meta


def link_requests(web: BroadWeb, ids: np.ndarray, request) -> list[list]:
    """The link requests of pages ``ids``, with the fingerprint a crawler's
    middleware puts in their meta."""
    return [[request(u, meta={b"fingerprint": fingerprint_hex(u), b"scrapy_meta": {}}) for u in urls]
            for urls in web.link_urls(ids)]


class Crawl:
    """The crawl loop and its checkpoints (``core`` None: the web alone,
    pages taken in breadth-first order)."""

    def __init__(self, core, web: BroadWeb, path: str | None, points: list[int], batch: int, echo=print,
                 saved=None):
        from frontera_linkrank.core.codec import OutgoingRequest

        self.core, self.web, self.path, self.batch, self.echo = core, web, path, batch, echo
        self.request = OutgoingRequest
        self.points = list(points)
        self.rows: list[dict] = []
        self.crawled = 0
        self.core_s = 0.0
        self.max_depth = 0
        self.peak_anon = 0  # RssAnon sampled after every next_requests (the kernel keeps no peak of it)
        self.held: dict | None = None  # the last sample taken while no ranking ran: what the frontier holds
        self.fp_lookups = 0  # fingerprints this process looked up in the LMDB table, to the last checkpoint
        self.start = {**memory(), "wall": time.perf_counter(), "core": 0.0, "known": 0, "crawled": 0}
        self.saved = saved or (lambda rows: None)  # called with the rows at every checkpoint

    def resume(self) -> None:
        """Go on from the pages the reopened frontier knows (the open is
        timed apart: a segment's rate is that of crawling)."""
        known = int(self.core.stats()["pages"])
        if (known - 1) % 5:
            raise SystemExit(f"{self.path}: {known:,} known pages is no state of this benchmark's crawl")
        self.crawled = (known - 1) // 5
        self.start.update(memory(), known=known, crawled=self.crawled, wall=time.perf_counter(), core=0.0)
        self.points = [p for p in self.points if p > known]

    def known(self) -> int:
        return 1 + 5 * self.crawled  # every page has 5 new pages (checked against the core's count)

    def seed(self) -> None:
        """Give the frontier the web's first page (timed)."""
        t = time.perf_counter()
        root = self.web.url(np.array([0]))[0]
        self.core.add_seeds([self.request(root, meta={b"fingerprint": fingerprint_hex(root), b"scrapy_meta": {}})])
        self.core_s += time.perf_counter() - t

    def timed_take(self) -> list:
        """The next batch, its time counted in the frontier's."""
        t = time.perf_counter()
        requests = self.take()
        self.core_s += time.perf_counter() - t
        return requests

    def run(self) -> None:
        if self.core is not None and not self.crawled:
            self.seed()
        with StopOnInterrupt() as interrupted:
            while self.points and not interrupted():
                requests = self.timed_take()
                anon = memory()["anon"]
                self.peak_anon = max(self.peak_anon, anon)
                if self.core is not None and not self.core.ranking.running:
                    self.held = {"held_anon": anon, "held_known": self.known()}
                while self.points and self.known() >= self.points[0]:
                    self.checkpoint(self.points.pop(0))
                if not requests or not self.points:
                    break
                try:
                    self.report(requests)
                except IdSpaceExceeded as e:
                    self.echo(f"the crawl stops here: {e}", flush=True)
                    break
            if interrupted():
                self.echo("interrupted: the crawl stops here", flush=True)

    def take(self) -> list:
        if self.core is None:
            return [self.request(u) for u in self.web.url(np.arange(self.crawled, self.crawled + self.batch))]
        return self.core.next_requests(self.batch)

    def report(self, requests: list) -> None:
        ids = np.fromiter((page_number(r.url) for r in requests), np.int64, len(requests))
        self.max_depth = max(self.max_depth, int(depth(ids).max()))
        links = link_requests(self.web, ids, self.request)
        fetched = [Fetched(r) for r in requests]
        core = self.core
        if core is not None:
            t = time.perf_counter()
            for f, r, ls in zip(fetched, requests, links):
                core.page_fetched(f)
                core.links_found(r, ls)
            self.core_s += time.perf_counter() - t
        self.crawled += len(requests)

    def checkpoint(self, point: int) -> None:
        mem = memory()
        row = {"checkpoint": point, "crawled": self.crawled, "known": self.known(),
               "wall": time.perf_counter(), "core": self.core_s, "max_depth": self.max_depth, **mem,
               "peak_anon": max(self.peak_anon, mem["anon"]), **(self.held or {})}
        if self.core is not None:
            stats = self.core.stats()
            row.update(known=int(stats["pages"]), predicted_known=self.known(), hosts=int(stats["hosts"]),
                       rankings=int(stats.get("rankings", 0)), disk=disk_bytes(self.path),
                       fp_lookups=self.core.db.fingerprint_lookups - self.fp_lookups)  # asked of the LMDB table since
            self.fp_lookups += row["fp_lookups"]
        prev = self.rows[-1] if self.rows else self.start
        derive(row, prev, timed=self.core is not None)
        self.rows.append(row)
        self.saved(self.rows)
        self.echo(progress_line(row), flush=True)



# -- after the crawl: close, reopen, check ------------------------------------------------------------
def settings_of(path: str, overrides: list[str]):
    from frontera_linkrank.settings import LinkRankSettings

    return LinkRankSettings({"LINKRANK_PATH": path, **dict(s.split("=", 1) for s in overrides)})


def reopen_child(path: str, overrides: list[str], batch: int) -> None:
    """In a new process: open the frontier, time its first batch, close; print JSON."""
    t0 = time.perf_counter()
    from frontera_linkrank.core.frontier_core import FrontierCore

    core = FrontierCore(settings_of(path, overrides))
    t1 = time.perf_counter()
    got = core.next_requests(batch)
    t2 = time.perf_counter()
    mem = memory()
    known = int(core.stats()["pages"])
    core.close()
    t3 = time.perf_counter()
    print(json.dumps({"open_s": t1 - t0, "first_batch_s": t2 - t0, "requests": len(got), "close_s": t3 - t2,
                      "known": known, **mem}))


def after_crawl(path: str, overrides: list[str], batch: int, check: bool, saved=lambda out: None) -> dict:
    """Reopen in a new process, then check; ``saved`` gets the figures
    after the reopening (a check of a large database takes long)."""
    out: dict = {}
    t = time.perf_counter()
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--reopen", path, "--batch", str(batch),
                           *sum((["--set", s] for s in overrides), [])], capture_output=True, text=True)
    out["reopen_wall_s"] = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"reopening failed: {done.stderr.strip()[-2000:]}")
    out["reopen"] = json.loads(done.stdout.strip().splitlines()[-1])
    saved(out)
    if check:
        t = time.perf_counter()
        done = subprocess.run([os.path.join(BIN, "page_db_check"), path], capture_output=True, text=True)
        out["check_s"] = time.perf_counter() - t
        out["check_status"] = done.returncode
        out["check_output"] = (done.stdout + done.stderr).strip()[-2000:]
    out["disk_after_close"] = disk_bytes(path)
    return out


# -- the run ----------------------------------------------------------------------------------------------
def run_core(args, points: list[int], header: str) -> dict:
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.numeric import release_free_memory

    work = args.dir or tempfile.mkdtemp(prefix="lr-scale-")
    path = os.path.join(work, "db")
    result: dict = {"header": header, "mode": "core", "settings": args.set, "batch": args.batch,
                    "host_block": args.host_block}
    earlier = earlier_rows(args, path)

    def saved(rows: list[dict]) -> None:
        if args.json:
            write_json(args.json, {**result, "checkpoints": earlier + rows})

    def saved_after(out: dict) -> None:
        if args.json:
            write_json(args.json, {**result, **out})

    try:
        before = memory()
        t = time.perf_counter()
        core = FrontierCore(settings_of(path, args.set))
        crawl = Crawl(core, BroadWeb(args.host_block), path, points, args.batch, saved=saved)
        crawl.start.update(before)  # the interpreter and the libraries: RSS before the frontier
        result["start"] = {k: crawl.start[k] for k in ("rss", "anon", "file")}
        if args.resume:
            open_s = time.perf_counter() - t
            crawl.resume()
            result["resumed"] = {"known": crawl.start["known"], "open_s": open_s,
                                 **{k: crawl.start[k] for k in ("rss", "anon", "file")}}
            print(f"resumed at {crawl.start['known']:,} known pages (opened in {open_s:.1f} s)", flush=True)
        crawl.run()
        t = time.perf_counter()
        core.close()
        result["close_s"] = time.perf_counter() - t
        result["checkpoints"] = earlier + crawl.rows
        # The reopening and the check run beside this process: the closed frontier's memory is let go first,
        # since a check holds every page's fields.
        del crawl, core
        gc.collect()
        release_free_memory()
        mem = memory()
        result["after_close"] = {k: mem[k] for k in ("rss", "anon")}
        saved_after({})
        if args.no_reopen:
            return result
        result.update(after_crawl(path, args.set, args.batch, not args.no_check, saved_after))
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return result


def earlier_rows(args, path: str) -> list[dict]:
    """The checkpoints of earlier runs in the directory a resumed run goes on
    with (from its ``--json`` file), or none."""
    if not args.resume:
        return []
    if not args.dir or not os.path.isdir(path):
        raise SystemExit("--resume needs --dir DIR holding the page database of an earlier run")
    if not args.json or not os.path.exists(args.json):
        return []
    with open(args.json) as f:
        rows = json.load(f).get("checkpoints") or []
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("known"), int)]


def write_json(name: str, result: dict) -> None:
    """Replace ``name`` with ``result`` (whole, or the old file stays)."""
    with open(name + ".part", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(name + ".part", name)


def run_generator(args, points: list[int]) -> dict:
    crawl = Crawl(None, BroadWeb(args.host_block), None, points, args.batch)
    crawl.run()
    return {"mode": "generator", "batch": args.batch, "checkpoints": crawl.rows,
            "start": {k: crawl.start[k] for k in ("rss", "anon", "file")}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=None,
                    help=f"known pages to reach (default 100M; {SERVE_PAGES:,} with --serve-frontier)")
    ap.add_argument("--checkpoints", type=int, nargs="+", default=None, metavar="N",
                    help="known pages at which to measure (default 1, 2, 5, 10, 20, 50, 100M)")
    ap.add_argument("--batch", type=int, default=512, help="requests per next_requests")
    ap.add_argument("--host-block", type=int, default=HOST_BLOCK, metavar="N",
                    help=f"one new page in N founds a host (default {HOST_BLOCK}: 1%% of the pages); "
                         "10 for a web of many small sites (a resumed run needs the same N)")
    ap.add_argument("--set", action="append", default=[], metavar="LINKRANK_NAME=VALUE",
                    help="a setting other than the default (repeat for several)")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    ap.add_argument("--dir", help="work in this directory (kept) instead of a temporary one")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--resume", action="store_true",
                    help="go on with the crawl of --dir DIR (its --json checkpoints kept) up to --pages")
    ap.add_argument("--no-reopen", action="store_true", help="skip reopening and checking after the crawl")
    ap.add_argument("--no-check", action="store_true", help="skip page_db_check after the crawl")
    ap.add_argument("--generator-only", action="store_true",
                    help="the web alone, no frontier (its RSS must stay flat)")
    ap.add_argument("--serve-frontier", action="store_true",
                    help="through serve-frontier and fake spider processes over a local redis-server")
    ap.add_argument("--spiders", type=int, default=2, help="fake spiders with --serve-frontier")
    ap.add_argument("--reopen", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.host_block < 1:
        ap.error("--host-block must be at least 1")
    if args.serve_frontier and args.host_block != HOST_BLOCK:
        ap.error("--host-block is for the frontier core and --generator-only, not --serve-frontier")
    if args.reopen:
        return reopen_child(args.reopen, args.set, args.batch)
    pages = args.pages or (SERVE_PAGES if args.serve_frontier else CHECKPOINTS[-1])
    points = checkpoint_list(pages, args.checkpoints)
    header = (f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
              f"batch {args.batch}, a host per {args.host_block} pages, settings: {', '.join(args.set) or 'defaults'}")
    print(header, flush=True)
    if args.serve_frontier:
        from scale_serve import run_serve

        result = run_serve(args, points)
    elif args.generator_only:
        result = run_generator(args, points)
    else:
        result = run_core(args, points, header)
    result["header"] = header
    from scale_report import print_report

    print_report(result)
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
