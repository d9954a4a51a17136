"""Throughput of a shared frontier (serve-frontier + spiders over Redis).

Three measurements in one run, on this machine:

1. **in-process**: the frontier core alone, fed in-process with instantly
   "fetched" pages of a synthetic web (10 links a page: 5 new pages of
   the same host, 5 drawn from a Zipf law over known pages); only the
   core's own calls are timed (fingerprints are computed outside, as a
   spider would);
2. **ceiling**: ``serve-frontier`` in its own process, fed by fake spider
   processes that take requests from the broker and report each one at
   once with the same 10 links (fingerprints computed by the fake
   spiders): the most pages a second the frontier applies through the
   broker. Both rates are measured over the same pages of the crawl
   (``--pages``: its costs grow with the crawl), one after the other,
   ``--repeats`` times (the median ratio is printed last);
3. **slow web**: ``scrapy crawl`` processes (1, 2, 4, 8 by default)
   against ``serve-web`` answering every page after 100 ms, on a graph of
   200 hosts (each host's first page a seed): pages a second as spiders
   are added. Each spider fetches at most ``--concurrency`` pages at a
   time (2 by default: 20 pages a second at most, so that eight of them
   fit on two cores, as spiders on machines of their own would; with 16,
   Scrapy's default, two spiders fill this machine's CPU).

Everything runs on 127.0.0.1 with a redis-server started here (unix
socket, AOF on) and stopped at the end.

    python benchmarks/distributed.py                  # all three
    python benchmarks/distributed.py --spiders 1 2 --window 15
    python benchmarks/distributed.py --skip-web       # in-process and ceiling only
    python benchmarks/distributed.py --concurrency 16 --spiders 1 2 4 --repeats 0
"""

import argparse
import functools
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from brokers import RedisServer  # noqa: E402  (the tests' broker helper)
from crawlweb import EXAMPLE, TestWebServer, crawl_env  # noqa: E402
from frontera_linkrank.core.codec import OutgoingRequest  # noqa: E402
from frontera_linkrank.core.frontier_core import FrontierCore  # noqa: E402
from frontera_linkrank.service.redis_transport import RedisTransport  # noqa: E402
from frontera_linkrank.settings import LinkRankSettings  # noqa: E402
from frontera_linkrank.storage.urls import fingerprint  # noqa: E402

BIN = os.path.dirname(sys.executable)
HOSTS = 2000
CRAWL = "bench"


# -- the synthetic web ------------------------------------------------------------------------
def url_of(p):
    return f"http://h{p % HOSTS}.example.com/page/{p}"


def page_of(url):
    return int(url.rsplit("/", 1)[1])


# Zipf draws made once: the fake spiders must cost little CPU, or they, not
# the frontier, set the ceiling on a small machine.
ZIPF = (np.random.default_rng(7).zipf(1.3, 1 << 20) - 1).tolist()


def links_of(p):
    own = [5 * p + k for k in range(1, 6)]
    popular = [ZIPF[(5 * p + k) & ((1 << 20) - 1)] % max(p, 1) for k in range(5)]
    return [url_of(q) for q in own + popular]


@functools.lru_cache(maxsize=1 << 18)
def fp_hex(url):
    return fingerprint(url).hex().encode()


class Fetched:
    """A fetched page as the core reads it (status 200, no body)."""

    def __init__(self, request):
        self.url, self.status_code, self.headers, self.body = request.url, 200, {}, b""
        self.request = request
        self.meta = request.meta


# -- 1. in-process -----------------------------------------------------------------------------
def in_process(workdir, first, last, batch=256):
    """Pages a second (and per CPU second) of the core's own calls while the
    crawl goes from ``first`` to ``last`` crawled pages."""
    os.makedirs(workdir, exist_ok=True)
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": os.path.join(workdir, "inproc"), "LINKRANK_SYNC": False}))
    core.add_seeds([OutgoingRequest(url_of(0))])
    timed = cpu = 0.0
    pages = 0
    while pages < last:
        on = pages >= first  # (a batch is timed whole: the range is rounded to batches)
        t, c = time.perf_counter(), time.process_time()
        requests = core.next_requests(batch)
        timed += (time.perf_counter() - t) * on
        cpu += (time.process_time() - c) * on
        # The spider's share (outside the timed region): links and their fingerprints.
        work = []
        for r in requests:
            links = [OutgoingRequest(u, meta={b"fingerprint": fp_hex(u), b"scrapy_meta": {}})
                     for u in links_of(page_of(r.url))]
            work.append((r, links))
        t, c = time.perf_counter(), time.process_time()
        for r, links in work:
            core.page_fetched(Fetched(r))
            core.links_found(r, links)
        timed += (time.perf_counter() - t) * on
        cpu += (time.process_time() - c) * on
        pages += len(requests)
        counted = pages - first if on else 0
    core.close()
    return counted / timed, counted / cpu


# -- 2. the ceiling with fake spiders ------------------------------------------------------------
def links_of_urls(urls):
    """The link URLs of each page of this web (a fake spider's ``web``)."""
    return [links_of(page_of(u)) for u in urls]


def fake_spider(url, sid, stop_at, web=links_of_urls):
    """A spider process that "fetches" each request at once and reports it
    with its links: ``web(urls)`` gives the link URLs of each page."""
    from frontera_linkrank.service.client import RemoteFrontier

    client = RemoteFrontier(lambda: RedisTransport(url, CRAWL), sid, prefetch=1024, interval=1.0)
    client.start()
    while time.time() < stop_at:
        got = client.take(512)
        if not got:
            time.sleep(0.002)
            continue
        for (p, entry_id, e), urls in zip(got, web([e.url for _, _, e in got])):
            links = [[u, fp_hex(u), None] for u in urls]
            client.done(p, entry_id, {"k": "f", "l": e.lease, "f": e.fp, "u": e.url, "s": 200, "h": 1, "ln": links})
    client.stop(2)


def state(url):
    """The frontier's last published state: (pages crawled, the time it was published)."""
    t = RedisTransport(url, CRAWL)
    try:
        st = t.get("state") or {}
    finally:
        t.close()
    return int((st.get("stats") or {}).get("pages_crawled", 0)), float(st.get("time", 0.0))


def crawled(url):
    return state(url)[0]


def start_frontier(workdir, name, url, seeds, partitions=64, settings=("LINKRANK_SYNC=False",)):
    log = open(os.path.join(workdir, name + ".log"), "w")
    return subprocess.Popen([os.path.join(BIN, "frontera-linkrank"), "serve-frontier", os.path.join(workdir, name),
                             "--broker", url, "--crawl", CRAWL, "--seeds", seeds, "--partitions", str(partitions),
                             *[a for s in settings for a in ("--set", s)], "--log-level", "WARNING"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc, timeout=30):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` so far (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url, window, pid, warmup_pages=200, timeout=60, others=()):
    """``(pages a second, pages per CPU second of process pid, cores used by
    the processes ``others``)`` over ``window`` seconds after a warm-up."""
    t0 = time.monotonic()
    while crawled(url) < warmup_pages:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("the crawl did not start")
        time.sleep(0.2)
    c0, t0, u0 = crawled(url), time.monotonic(), cpu_seconds(pid)
    o0 = sum(cpu_seconds(p) for p in others)
    time.sleep(window)
    c1, t1, u1 = crawled(url), time.monotonic(), cpu_seconds(pid)
    o1 = sum(cpu_seconds(p) for p in others)
    return (c1 - c0) / (t1 - t0), (c1 - c0) / max(u1 - u0, 1e-9), (o1 - o0) / (t1 - t0), (u1 - u0) / (t1 - t0)


def measure_range(url, pid, first, last, timeout=600):
    """``(pages a second, pages per CPU second of process pid)`` while the
    crawl goes from ``first`` to ``last`` crawled pages (the CPU time is
    read within 50 ms of each state record)."""
    t0 = time.monotonic()

    def wait_for(n):
        # The count and the time of the frontier's own state record (published every 0.5 s).
        while (got := state(url))[0] < n:
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"the crawl did not reach {n:,} pages in {timeout} s")
            time.sleep(0.05)
        return got[0], got[1], cpu_seconds(pid)

    c0, w0, u0 = wait_for(first)
    c1, w1, u1 = wait_for(last)
    return (c1 - c0) / (w1 - w0), (c1 - c0) / max(u1 - u0, 1e-9)


def ceiling(workdir, redis_dir, n_spiders, first, last):
    os.makedirs(workdir, exist_ok=True)
    server = RedisServer(redis_dir)
    seeds = os.path.join(workdir, "seeds.txt")
    with open(seeds, "w") as f:
        f.write(url_of(0) + "\n")
    frontier = start_frontier(workdir, "ceiling", server.url, seeds)
    stop_at = time.time() + 600
    spiders = [mp.Process(target=fake_spider, args=(server.url, f"fake{k}", stop_at)) for k in range(n_spiders)]
    for p in spiders:
        p.start()
    try:
        rate = measure_range(server.url, frontier.pid, first, last)
    finally:
        for p in spiders:
            p.terminate()
            p.join(10)
        stop(frontier)
        server.stop()
    return rate


# -- 3. scrapy crawl against a slow web -----------------------------------------------------------
WEB_HOSTS, WEB_PAGES = 200, 100  # the slow web: hosts, pages per host


def slow_graph(path, hosts=WEB_HOSTS, pages=WEB_PAGES, seed=1):
    rng = np.random.default_rng(seed)
    n = hosts * pages
    host = np.repeat(np.arange(hosts), pages)
    rows = []
    for v in range(n):
        h = host[v]
        out = {h * pages, ((h + 1) % hosts) * pages}
        for _ in range(6):
            hh = rng.integers(hosts) if rng.random() < 0.2 else h
            out.add(int(hh * pages + rng.integers(pages)))
        out.discard(v)
        rows.append(sorted(out))
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    np.savez(path, indptr=indptr, indices=np.array([w for r in rows for w in r], np.int64), hosts=host)
    return path


def slow_web(workdir, redis_dir, n_spiders, window, web, concurrency=16):
    server = RedisServer(redis_dir)
    seeds = os.path.join(workdir, "web_seeds.txt")
    with open(seeds, "w") as f:  # every host's first page: the rate is not that of discovering hosts
        f.writelines(f"http://h{h}.web.test/p{h * WEB_PAGES}\n" for h in range(WEB_HOSTS))
    name = f"web{n_spiders}"
    frontier = start_frontier(workdir, name, server.url, seeds)
    procs = []
    for k in range(n_spiders):
        cmd = [os.path.join(BIN, "scrapy"), "crawl", "example", "-s", f"LINKRANK_FRONTIER_URL={server.url}",
               "-s", f"LINKRANK_CRAWL={CRAWL}", "-s", f"LINKRANK_SPIDER_ID=sp{k}", "-s", "LINKRANK_SEEDS_FILE=",
               "-s", "LINKRANK_LOG_INTERVAL=0", "-s", "LOG_LEVEL=WARNING", "-s", f"CONCURRENT_REQUESTS={concurrency}",
               "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2", "-s", "ROBOTSTXT_OBEY=False",
               "-s", f"LOG_FILE={os.path.join(workdir, name + f'_sp{k}.log')}"]
        procs.append(subprocess.Popen(cmd, cwd=EXAMPLE, env=crawl_env(web.proxy), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
    try:
        time.sleep(3)  # let every spider start before measuring
        rate, _, spiders_cpu, frontier_cpu = measure(server.url, window, frontier.pid, warmup_pages=100, timeout=120,
                                                     others=[p.pid for p in procs])
    finally:
        for p in procs:
            stop(p)
        stop(frontier)
        server.stop()
    return rate, spiders_cpu, frontier_cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spiders", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--fake-spiders", type=int, default=2)
    ap.add_argument("--window", type=float, default=20.0, help="seconds each slow-web rate is measured over")
    ap.add_argument("--pages", type=int, nargs=2, default=[5000, 65000], metavar=("FIRST", "LAST"),
                    help="the in-process and ceiling rates are measured from FIRST to LAST crawled pages")
    ap.add_argument("--repeats", type=int, default=3, help="in-process and ceiling runs, one after the other")
    ap.add_argument("--concurrency", type=int, default=2,
                    help="CONCURRENT_REQUESTS of each spider: at 100 ms a page at most 10x this pages a second, "
                         "so that 8 spiders fit on a small machine, as spiders on machines of their own")
    ap.add_argument("--skip-web", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lr-dist-bench-")
    try:
        first, last = args.pages
        print(f"pages {first:,} to {last:,} of the crawl, 10 links each, LMDB sync off, {os.cpu_count()} cores")
        ratios, ratios_cpu = [], []
        for k in range(args.repeats):  # interleaved: a noisy machine slows both alike
            rate, rate_cpu = in_process(os.path.join(work, f"in{k}"), first, last)
            top, top_cpu = ceiling(os.path.join(work, f"c{k}"), os.path.join(work, f"redis-c{k}"), args.fake_spiders,
                                   first, last)
            ratios.append(top / rate)
            ratios_cpu.append(top_cpu / rate_cpu)
            print(f"run {k + 1}: in-process core {rate:,.0f} pages/s ({rate_cpu:,.0f} per CPU second); "
                  f"serve-frontier with {args.fake_spiders} fake spiders {top:,.0f} pages/s ({top / rate:.0%}), "
                  f"{top_cpu:,.0f} per CPU second of the frontier ({top_cpu / rate_cpu:.0%}); "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        if ratios:
            print(f"ceiling / in-process, median of {args.repeats}: {np.median(ratios):.0%} of the pages a second, "
                  f"{np.median(ratios_cpu):.0%} of the pages per CPU second")
        if args.skip_web:
            return
        npz = slow_graph(os.path.join(work, "web.npz"))
        os.makedirs(os.path.join(work, "web"))
        with TestWebServer(npz, os.path.join(work, "web"), timeout=3600,
                           extra=["--slow", "1", "--slow-delay", "0.1"]) as web:
            for n in args.spiders:
                r, spiders_cpu, frontier_cpu = slow_web(work, os.path.join(work, f"redis-w{n}"), n, args.window, web,
                                                        args.concurrency)
                print(f"scrapy crawl x {n}, web answering in 100 ms: {r:,.1f} pages/s ({r / n:,.1f} per spider); "
                      f"CPU: spiders {spiders_cpu:.2f} cores, frontier {frontier_cpu:.2f}; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
