"""Politeness against throughput: real ``scrapy crawl example`` runs on the
local test web with one request at a time per host and a download delay.

Runs, on the same random 8-host graph (tests/crawlweb.py):

- ``one host``: every page on one host: at most ~1/delay pages/s;
- ``8 hosts``: the frontier skips overused hosts (the default);
- ``8 hosts, slow h0``: host 0 has a 10x longer delay (DOWNLOAD_SLOTS);
- the last two again with the overused-host logic switched off
  (``LINKRANK_OVERUSED_SLOT_FACTOR`` so large that no slot is ever overused):
  the baseline showing what it is for.

Pages per second are measured from the server's request log, between the
first and the last page fetch (Scrapy's start-up excluded).

    python benchmarks/politeness.py [--pages 100] [--delay 0.2]
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from crawlweb import TestWebServer, multi_host_graph, run_crawl  # noqa: E402
from frontera_linkrank.simulation.datasets import load_graph  # noqa: E402

OFF = 1e6  # LINKRANK_OVERUSED_SLOT_FACTOR that never marks a slot overused


def measure(work, single, settings, pages):
    os.makedirs(work)
    npz = multi_host_graph(os.path.join(work, "web.npz"), hosts=8, pages=60, seed=7, single_host=single)
    g = load_graph(npz)
    seeds = os.path.join(work, "seeds.txt")
    with open(seeds, "w") as f:
        f.write(g.urls[0] + "\n")
    with TestWebServer(npz, work) as srv:
        out = run_crawl(srv.proxy, os.path.join(work, "db"), seeds, settings=dict(settings, LINKRANK_MAX_PAGES=pages))
        if out.returncode:
            sys.exit(out.stdout[-3000:])
        times = sorted(t for t, _, u, _ in srv.requests() if not u.endswith("/robots.txt"))
    return (len(times) - 1) / (times[-1] - times[0]), times[-1] - times[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=100, help="page budget of each run")
    ap.add_argument("--delay", type=float, default=0.2, help="DOWNLOAD_DELAY (seconds)")
    args = ap.parse_args(argv)
    base = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY": args.delay}
    slow = {"DOWNLOAD_SLOTS": '{"h0.web.test": {"delay": %g}}' % (10 * args.delay)}
    runs = [
        ("one host", True, base),
        ("8 hosts", False, base),
        ("8 hosts, overused hosts not skipped", False, dict(base, LINKRANK_OVERUSED_SLOT_FACTOR=OFF)),
        ("8 hosts, slow h0", False, dict(base, **slow)),
        ("8 hosts, slow h0, overused hosts not skipped", False, dict(base, LINKRANK_OVERUSED_SLOT_FACTOR=OFF, **slow)),
    ]
    print(f"{args.pages} pages per run, CONCURRENT_REQUESTS_PER_DOMAIN=1, DOWNLOAD_DELAY={args.delay}")
    print("| run | seconds | pages/s | vs one host |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        first = None
        for k, (name, single, settings) in enumerate(runs):
            rate, secs = measure(os.path.join(tmp, str(k)), single, settings, args.pages)
            first = first or rate
            print(f"| {name} | {secs:.1f} | {rate:.1f} | {rate / first:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
