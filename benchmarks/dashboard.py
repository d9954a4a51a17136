"""What a crawl pays for its dashboard (``serve-status``).

benchmarks/scale.py's crawl loop (FrontierCore, default settings, on the
synthetic broad web) runs until the frontier knows ``--known`` pages,
then goes on in segments of ``--segment`` crawled pages, alternately
without (A) and with (B) the dashboard open, in the order ABBA ABBA...
(``--segments`` of each), so that a drift of the crawl's speed or of the
machine's load weighs on both alike. For a B segment a
``frontera-linkrank serve-status`` process is started on the crawl's
database and waited for until it serves its first sample (that wait is
timed and not counted in the crawl's time); a poller process then opens
the page and, every ``--interval`` seconds as the page does, requests
``/api/status`` (what the page reads) and every other endpoint, timing
each answer; after the segment both are stopped. A segment's rate is its
crawled pages over the time spent in the frontier's calls (as scale.py
counts it), wall time beside it.

Two costs are measured apart from the rates, which vary between segments
of one kind by more than what is measured: the CPU time of the
``serve-status`` process (``/proc``) over each B segment, against the
crawl's; and the frontier's own status passes (``LINKRANK_STATUS_INTERVAL``:
what the dashboard reads), kept in A and B alike, as a share of the time
in the frontier's calls. Prints every segment, the medians of A and B and
their ratio, the answer times, and the time of one sample read in this
process after the segments.

    python benchmarks/dashboard.py                          # 10M known pages, 4 + 4 segments
    python benchmarks/dashboard.py --known 200000 --segments 2 --segment 5000
    python benchmarks/dashboard.py --dir DIR                # DIR/db is kept, and an existing one crawled on
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BIN = os.path.dirname(sys.executable)
ENDPOINTS = ("/api/status", "/", "/api/progress", "/api/order", "/api/hosts", "/api/errors", "/api/database",
             "/api/shared", "/api/history", "/metrics")
"""What the poller requests at each poll: first what the page reads, then everything else."""


# -- an open browser tab, in its own process ------------------------------------------------------------
def poll(port_file: str, interval: float) -> None:
    """Until SIGTERM: wait for ``serve-status`` to listen (the port in
    ``port_file``) and serve its first sample, then every ``interval``
    seconds GET each of ENDPOINTS. One JSON line on stdout when it first
    answered (``startup_s``, from this poller's start), then one per answer:
    endpoint, seconds until the whole answer was read, bytes, and for
    ``/api/status`` the time of the sample it holds."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    t = time.perf_counter()
    while not (os.path.exists(port_file) and open(port_file).read().endswith("\n")):
        time.sleep(0.05)
    url = f"http://127.0.0.1:{int(open(port_file).read())}"
    while json.loads(urllib.request.urlopen(url + "/api/progress", timeout=60).read())["known"] is None:
        time.sleep(0.05)  # the port is written after the first sample: this is only a check
    print(json.dumps({"startup_s": time.perf_counter() - t}), flush=True)
    while True:
        start = time.monotonic()
        for endpoint in ENDPOINTS:
            row: dict = {"endpoint": endpoint}
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(url + endpoint, timeout=60) as f:
                    body = f.read()
            except OSError as e:
                row["error"] = str(e)
            else:
                row.update(s=time.perf_counter() - t, bytes=len(body))
                if endpoint == "/api/status":
                    row["sampled"] = json.loads(body)["time"]
            print(json.dumps(row), flush=True)
        time.sleep(max(0.0, interval - (time.monotonic() - start)))


class Dashboard:
    """``serve-status`` on the crawl's database and a poller on it, started
    together and stopped by PID; ``wait``: until the first sample is served."""

    def __init__(self, path: str, work: str, interval: float, wait: bool) -> None:
        port_file = os.path.join(work, "status.port")
        if os.path.exists(port_file):
            os.remove(port_file)
        self.log = open(os.path.join(work, "serve-status.log"), "w+")
        self.polled = open(os.path.join(work, "poller.jsonl"), "w+")
        self.server = subprocess.Popen([os.path.join(BIN, "frontera-linkrank"), "serve-status", path, "--port", "0",
                                        "--port-file", port_file, "--interval", str(interval)],
                                       stdout=self.log, stderr=subprocess.STDOUT)
        self.poller = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--poll", port_file,
                                        "--interval", str(interval)], stdout=self.polled)
        while wait and not self.rows():
            if self.server.poll() is not None:
                self.stop()
                with open(os.path.join(work, "serve-status.log")) as f:
                    raise RuntimeError(f"serve-status did not start: {f.read()}")
            time.sleep(0.05)

    def rows(self) -> list[dict]:
        self.polled.seek(0)
        out = []
        for line in self.polled:
            try:
                out.append(json.loads(line))
            except ValueError:  # a line being written, or cut by SIGTERM
                pass
        return out

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of the serve-status process so far."""
        with open(f"/proc/{self.server.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> list[dict]:
        """Stop both; the poller's answers."""
        for proc in (self.poller, self.server):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        rows = self.rows()
        self.log.close()
        self.polled.close()
        return rows


# -- the crawl --------------------------------------------------------------------------------------------
def crawl_pages(crawl, pages: int) -> dict:
    """Crawl at least ``pages`` pages; crawled pages, seconds in the frontier's calls, wall seconds,
    CPU seconds of this process, and seconds of the frontier's status passes."""
    status = crawl.core.status.doc
    c0, s0, w0, p0 = crawl.crawled, crawl.core_s, time.perf_counter(), status.get("pass_seconds_total", 0.0)
    cpu0 = time.process_time()
    while crawl.crawled - c0 < pages:
        requests = crawl.timed_take()
        if not requests:
            raise RuntimeError("the frontier handed out no page")
        crawl.report(requests)
    return {"pages": crawl.crawled - c0, "core_s": crawl.core_s - s0, "wall_s": time.perf_counter() - w0,
            "cpu_s": time.process_time() - cpu0, "status_s": status.get("pass_seconds_total", 0.0) - p0}


def build(core, crawl, known: int) -> int:
    """Crawl until the frontier knows ``known`` pages (a database that already does is left as it is)."""
    now = int(core.stats()["pages"])
    if now == 0:
        crawl.seed()
    start, shown = time.perf_counter(), now
    while now < known:
        crawl_pages(crawl, max(crawl.batch, min(50_000, (known - now) // 5)))
        now = int(core.stats()["pages"])
        if now >= known or now - shown >= 1_000_000:
            shown = now
            print(f"  built {now:,} known pages, {crawl.crawled:,} crawled in {time.perf_counter() - start:,.0f} s",
                  flush=True)
    return now


def answers(rows: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r["endpoint"], []).append(r["s"] if "s" in r else float("inf"))
    return out


def sample_period(rows: list[dict]) -> float | None:
    """Median seconds between the samples the poller saw."""
    times = sorted({r["sampled"] for r in rows if "sampled" in r})
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps) if gaps else None


def segment_line(i: int, kind: str, r: dict) -> str:
    line = (f"  segment {i} {kind}: {r['pages']:,} pages, {r['core_s']:.1f} s in the frontier "
            f"({r['rate']:,.0f} pages/s), wall {r['wall_s']:.1f} s ({r['rate_wall']:,.0f} pages/s), "
            f"load {r['load']:.1f}; status passes {r['status_s']:.2f} s")
    if kind == "B":
        line += f"; serve-status CPU {r['dashboard_cpu_s']:.2f} s (crawl CPU {r['cpu_s']:.1f} s)"
    if kind == "B":
        times = [t for ts in answers(r["answers"]).values() for t in ts]
        period = r["sample_period"]
        started = r["startup_s"]
        line += "; dashboard: " + (f"first sample served {started:.1f} s after start" if started is not None
                                   else "not serving yet at the segment's end")
        line += f", samples every {period:.1f} s" if period else ", no later sample during the segment"
        line += f", {len(times)} answers, slowest {max(times):.3f} s" if times else ", no answer"
    return line


def crawl_mode(args) -> None:
    from scale import Crawl, settings_of
    from scale_web import BroadWeb

    from frontera_linkrank.cli.serve_status import Sampler
    from frontera_linkrank.core.frontier_core import FrontierCore

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"batch {args.batch}, settings: {', '.join(args.set) or 'defaults'}; {args.segments} + {args.segments} "
          f"segments of {args.segment:,} crawled pages, dashboard interval {args.interval:g} s", flush=True)
    work = args.dir or tempfile.mkdtemp(prefix="lr-dashboard-")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "db")
    rows: list[dict] = []
    try:
        core = FrontierCore(settings_of(path, args.set))
        try:
            crawl = Crawl(core, BroadWeb(), path, [], args.batch)
            known = build(core, crawl, args.known)
            order = "".join("ABBA"[i % 4] for i in range(2 * args.segments))
            for i, kind in enumerate(order, 1):
                dash = Dashboard(path, work, args.interval, not args.open_in_segment) if kind == "B" else None
                dash_cpu = dash.cpu_seconds() if dash else 0.0
                try:
                    r = crawl_pages(crawl, args.segment)
                    r["dashboard_cpu_s"] = dash.cpu_seconds() - dash_cpu if dash else 0.0
                finally:
                    polled = dash.stop() if dash else []
                r.update(kind=kind, rate=r["pages"] / r["core_s"], rate_wall=r["pages"] / r["wall_s"],
                         load=os.getloadavg()[0])
                if dash:
                    startup = [p["startup_s"] for p in polled if "startup_s" in p]
                    r.update(startup_s=startup[0] if startup else None, answers=[p for p in polled if "endpoint" in p],
                             sample_period=sample_period(polled))
                rows.append(r)
                print(segment_line(i, kind, r), flush=True)
            end_known = int(core.stats()["pages"])
        finally:
            core.close()
        sampler = Sampler(path, None, "default", None, None, args.interval, 15)  # after close: one env a process
        try:
            t = time.perf_counter()
            sampler.sample()
            first = time.perf_counter() - t
            t = time.perf_counter()
            sampler.sample()
            sample = time.perf_counter() - t
        finally:
            sampler.stop()
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(rows, known, end_known, first, sample)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"known": known, "end_known": end_known, "first_sample_s": first, "sample_s": sample,
                       "segments": rows}, f, indent=1)


def report(rows: list[dict], known: int, end_known: int, first: float, sample: float) -> None:
    nan = float("nan")
    med = {k: {m: statistics.median(r[m] for r in rows if r["kind"] == k) for m in ("rate", "rate_wall")}
           for k in "AB"}
    ratio, ratio_wall = (med["B"][m] / med["A"][m] for m in ("rate", "rate_wall"))
    by_endpoint: dict[str, list[float]] = {}
    for r in rows:
        for endpoint, ts in answers(r.get("answers", [])).items():
            by_endpoint.setdefault(endpoint, []).extend(ts)
    print("answer times (s), every B segment: endpoint, answers, median, max")
    for endpoint in ENDPOINTS:
        ts = by_endpoint.get(endpoint, [])
        if ts:
            print(f"  {endpoint:<14} {len(ts):>5} {statistics.median(ts):8.3f} {max(ts):8.3f}")
    every = [t for ts in by_endpoint.values() for t in ts]
    slowest = max(by_endpoint, key=lambda e: max(by_endpoint[e])) if every else "-"
    startups = [r["startup_s"] for r in rows if r["kind"] == "B" and r["startup_s"] is not None]
    periods = [r["sample_period"] for r in rows if r.get("sample_period")]
    print(f"{known:,} to {end_known:,} known pages: crawl rate with the dashboard open / without "
          f"{ratio:.3f} (median {med['B']['rate']:,.0f} / {med['A']['rate']:,.0f} pages/s in the frontier; wall "
          f"{ratio_wall:.3f}); {len(every)} answers, median {statistics.median(every or [nan]):.3f} s, slowest "
          f"{max(every, default=nan):.3f} s ({slowest}); first sample served {max(startups, default=nan):.1f} s after "
          f"start (slowest); "
          f"samples every {statistics.median(periods or [nan]):.1f} s (median); one sample "
          f"{sample:.4f} s (the first {first:.4f} s)")
    b = [r for r in rows if r["kind"] == "B"]
    status_share = sum(r["status_s"] for r in rows) / sum(r["core_s"] for r in rows)
    dash_share = sum(r["dashboard_cpu_s"] for r in b) / sum(r["cpu_s"] for r in b)
    print(f"costs apart from the rates: the frontier's status passes {status_share:.2%} of its time "
          f"({sum(r['status_s'] for r in rows):.2f} s of {sum(r['core_s'] for r in rows):.1f} s); serve-status CPU "
          f"{dash_share:.2%} of the crawl's CPU over the B segments ({sum(r['dashboard_cpu_s'] for r in b):.2f} s "
          f"of {sum(r['cpu_s'] for r in b):.1f} s)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--known", type=int, default=10_000_000, help="known pages before the segments")
    ap.add_argument("--segment", type=int, default=50_000, help="crawled pages per segment")
    ap.add_argument("--segments", type=int, default=4, help="segments without, and as many with")
    ap.add_argument("--interval", type=float, default=5.0, help="serve-status --interval and the polling")
    ap.add_argument("--batch", type=int, default=512, help="requests per next_requests")
    ap.add_argument("--set", action="append", default=[], metavar="LINKRANK_NAME=VALUE",
                    help="a setting other than the default (repeat for several)")
    ap.add_argument("--dir", help="work in this directory (kept; its db is crawled on if it exists)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    ap.add_argument("--open-in-segment", action="store_true",
                    help="open the dashboard as a B segment starts (its first sample read during it)")
    ap.add_argument("--poll", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.poll:
        poll(args.poll, args.interval)
    else:
        crawl_mode(args)


if __name__ == "__main__":
    main()
