"""CPU a Scrapy crawl spends per page with the frontier as its scheduler,
against Scrapy's own scheduler, on the same local web in the same run.

Each run is a real ``scrapy runspider`` process with one spider (follow
every link of every page, as the example project's spider does) against
``frontera-linkrank serve-web`` (Hollins by default) on 127.0.0.1,
stopped after a number of pages (``CLOSESPIDER_PAGECOUNT``). The two
schedulers:

- ``scrapy``: Scrapy's default scheduler, its memory queues and its
  duplicate filter;
- ``linkrank``: the frontier (``SCHEDULER =
  "frontera_linkrank.scrapy.LinkRankScheduler"``) with its default
  settings: the page database on disk with fsync at every commit, AOPIC
  cash, the push estimate, PageRank and HITS in the background, a final
  ranking at close.

The CPU of a run is the crawl process's (user + system, from the
kernel's accounting of the child). Start-up and close (imports, opening
the database, the final ranking) cost the same whatever the crawl's
length, so the cost of a page is the slope between two lengths: the CPU
of the long run minus that of the short one, over the pages between.
Runs alternate between the two schedulers, so that both see the same
machine.

    python benchmarks/scrapy_overhead.py                    # 300 and 3,000 pages, 2 rounds
    python benchmarks/scrapy_overhead.py --pages 200 2000 --rounds 3
    python benchmarks/scrapy_overhead.py --set LINKRANK_BATCH_SIZE=64
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from crawlweb import TestWebServer, crawl_env  # noqa: E402

BIN = os.path.dirname(sys.executable)
SEEDS = {"hollins": "http://www.hollins.edu/"}  # another graph starts from its page with the most links
SCHEDULERS = {
    "scrapy": "scrapy.core.scheduler.Scheduler",
    "linkrank": "frontera_linkrank.scrapy.LinkRankScheduler",
}

SPIDER = '''
import json

import scrapy
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor


class FollowAll(scrapy.Spider):
    """Every link of every page, as the example project's spider follows them."""

    name = "follow_all"
    link_extractor = LinkExtractor()

    async def start(self):
        yield scrapy.Request(self.seed)

    def parse(self, response):
        if not isinstance(response, TextResponse):
            return
        yield {"url": response.url, "title": response.css("title::text").get()}
        for link in self.link_extractor.extract_links(response):
            yield scrapy.Request(link.url)

    def closed(self, reason):
        with open(self.stats_file, "w") as f:
            json.dump({k: v for k, v in self.crawler.stats.get_stats().items() if isinstance(v, (int, float))}, f)
'''


def seed_of(graph: str) -> str:
    if graph in SEEDS:
        return SEEDS[graph]
    from frontera_linkrank.simulation.datasets import load_graph

    g = load_graph(graph)
    return g.urls[int(np.diff(g.indptr).argmax())]


def run(work: str, proxy: str, seed: str, scheduler: str, pages: int, tag: str, extra: list[str]) -> dict:
    """One crawl of ``pages`` pages; its CPU, wall time and Scrapy's counts."""
    stats = os.path.join(work, f"{tag}.json")
    cmd = [os.path.join(BIN, "scrapy"), "runspider", os.path.join(work, "follow_all.py"),
           "-a", f"seed={seed}", "-a", f"stats_file={stats}",
           "-s", f"SCHEDULER={SCHEDULERS[scheduler]}", "-s", f"CLOSESPIDER_PAGECOUNT={pages}",
           "-s", f"LINKRANK_PATH={os.path.join(work, tag + '.db')}",
           "-s", "CONCURRENT_REQUESTS=16", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=8", "-s", "DOWNLOAD_DELAY=0",
           "-s", "ROBOTSTXT_OBEY=False", "-s", "LOG_LEVEL=WARNING", "-s", "TELNETCONSOLE_ENABLED=False",
           *(a for setting in extra for a in ("-s", setting))]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=work, env=crawl_env(proxy), capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = {}
    if os.path.exists(stats):
        with open(stats) as f:
            counts = json.load(f)
    if done.returncode or not counts.get("response_received_count"):
        raise SystemExit(f"{scheduler} crawl of {pages} pages failed (exit {done.returncode}, "
                         f"{counts.get('response_received_count', 0)} pages):\n{done.stderr[-3000:]}")
    return {"cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, "wall": wall,
            "pages": int(counts.get("response_received_count", 0)), "items": int(counts.get("item_scraped_count", 0)),
            "links": int(counts.get("linkrank/links_extracted", 0))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, nargs=2, default=(300, 3000), metavar=("SHORT", "LONG"),
                    help="the two crawl lengths (pages fetched)")
    ap.add_argument("--graph", default="hollins", help="the web served: hollins, uk2007, ukwa, a .npz (see serve-web)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for both crawls (LINKRANK_* ones reach only the frontier)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each scheduler and length")
    ap.add_argument("--json", metavar="FILE", help="write every run's figures here")
    args = ap.parse_args(argv)
    short, long_ = args.pages
    if not 0 < short < long_:
        ap.error("--pages SHORT LONG with 0 < SHORT < LONG")
    results: dict = {name: {short: [], long_: []} for name in SCHEDULERS}
    seed = seed_of(args.graph)
    with tempfile.TemporaryDirectory(prefix="lr-overhead-") as work:
        with open(os.path.join(work, "follow_all.py"), "w") as f:
            f.write(SPIDER)
        # The web stops by itself at the latest after the longest the runs can take.
        with TestWebServer(args.graph, work, timeout=args.rounds * 4 * 900) as web:
            for r in range(args.rounds):
                for pages in (short, long_):
                    for name in SCHEDULERS:
                        row = run(work, web.proxy, seed, name, pages, f"{name}-{pages}-{r}", args.set)
                        results[name][pages].append(row)
                        links = f", {row['links'] / row['pages']:.1f} links a page" if row["links"] else ""
                        print(f"round {r + 1}, {name:8s} {pages:6,} pages asked: {row['pages']:6,} fetched, "
                              f"{row['cpu']:6.2f} s CPU, {row['wall']:6.2f} s wall{links}", flush=True)
    print()
    print("| scheduler | CPU ms per page (slope) | start-up and close, CPU s | pages/s (long runs, wall) "
          "| vs Scrapy's |")
    print("|---|---|---|---|---|")
    per_page = {}
    for name in SCHEDULERS:
        slopes, fixed, rates = [], [], []
        for a, b in zip(results[name][short], results[name][long_]):
            slope = (b["cpu"] - a["cpu"]) / (b["pages"] - a["pages"])
            slopes.append(slope)
            fixed.append(a["cpu"] - slope * a["pages"])
            rates.append(b["pages"] / b["wall"])
        per_page[name] = statistics.median(slopes)
        print(f"| {name} | {1000 * per_page[name]:.2f} ({', '.join(f'{1000 * s:.2f}' for s in slopes)}) | "
              f"{statistics.median(fixed):.2f} | {statistics.median(rates):,.0f} | "
              f"{per_page[name] / per_page['scrapy']:.2f} x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pages": [short, long_], "runs": results, "cpu_per_page": per_page}, f, indent=1)


if __name__ == "__main__":
    main()
