"""page_db_import throughput (links/s) on generated and real link lists.

    python benchmarks/import.py [--pages 200000] [--links-per-page 10] [--skip-uk]

Each case runs ``page_db_import`` (its ``main``) in a separate process (so
its peak memory is its own) on a fresh database, and reports links/s as
the tool measures it (lines read / seconds from opening the database to
the last commit), the wall time of the whole process (Python start-up and
imports add ~0.4 s) and peak RSS. The baseline, measured in the same run
on the same file, is the floor of any Python importer: reading the file and splitting every line
(``line.split("\\t")``),
nothing else.

Cases:
- generated: ``--pages`` pages on 2,000 hosts, ``--links-per-page`` links
  each (half to nearby pages, half to Zipf-distributed popular ones),
  grouped by source as a crawl writes them; then the same lines shuffled and gzipped (every page's links spread
  over the whole file: the loader's worst case);
- hollins: the Hollins site crawl (6,012 pages, 23,875 links, real URLs);
- uk-2007: uk-2007-05@100000 (100,000 pages, 3.05M links) with generated
  URLs on its inferred hosts; then importing it again into the same
  database (idempotent: nothing changes), and the ``page_db_dump links`` +
  ``info`` pair of the result (``--info``: no URL hashing).
"""

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from frontera_linkrank.simulation.datasets import data_path, load_hollins, load_uk2007  # noqa: E402

BIN = os.path.dirname(sys.executable)


def generated_pairs(pages, per_page, hosts=2000, seed=0):
    rng = np.random.default_rng(seed)
    host = rng.integers(0, hosts, pages)
    urls = [f"http://www.h{h}.example.test/section{i % 17}/page{i}.html" for i, h in enumerate(host.tolist())]
    # Half the links go to nearby pages (site navigation), half to pages
    # drawn by a Zipf law (a few hubs get most of them).
    src = np.repeat(np.arange(pages), per_page)
    ranks = rng.zipf(1.6, len(src)) - 1
    popular = np.where(ranks < pages, ranks, rng.integers(0, pages, len(src)))
    nearby = (src + rng.integers(1, 200, len(src))) % pages
    dst = np.where(rng.random(len(src)) < 0.5, nearby, popular)
    return urls, src, dst


def write_tsv(path, urls, src, dst, shuffle=False):
    u = np.array(urls, dtype=object)
    order = np.arange(len(src))
    if shuffle:
        np.random.default_rng(1).shuffle(order)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", **({"compresslevel": 1} if path.endswith(".gz") else {})) as f:
        for lo in range(0, len(order), 500_000):
            sel = order[lo : lo + 500_000]
            f.write("".join(a + "\t" + b + "\n" for a, b in zip(u[src[sel]].tolist(), u[dst[sel]].tolist())))
    return path


def graph_tsv(path, g, shuffle=False):
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    return write_tsv(path, g.urls, src, g.indices, shuffle)


def floor_seconds(path):
    """Read and split every line, nothing else."""
    opener = gzip.open if path.endswith(".gz") else open
    t = time.perf_counter()
    n = 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line.split("\t")
            n += 1
    return time.perf_counter() - t, n


# page_db_import's main, then the process's peak RSS (VmHWM: of this
# process image only, unlike ru_maxrss, which a forked child inherits).
_CHILD = """import sys
from frontera_linkrank.cli.importer import main
code = main(sys.argv[1:])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print("peak_kib", hwm, file=sys.stderr)
sys.exit(code)
"""


def run(db, edges, *extra):
    """page_db_import in its own process: (wall seconds, lines, links/s, peak RSS MiB)."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD, db, edges, "--quiet", *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"page_db_import failed ({r.returncode}): {r.stderr}")
    m = re.search(r"([\d,]+) links read in [\d.]+ s \(([\d,]+) links/s\)", r.stderr)
    lines, rate = (int(x.replace(",", "")) for x in m.groups())
    peak = int(re.search(r"peak_kib (\d+)", r.stderr).group(1)) / 1024
    return wall, lines, rate, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=200_000)
    ap.add_argument("--links-per-page", type=int, default=10)
    ap.add_argument("--skip-uk", action="store_true", help="skip the uk-2007 cases")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="linkrank-import-bench-")
    rows = []

    def case(name, edges, db=None, extra=(), floor_file=None):
        db = db or os.path.join(work, name.replace(" ", "_") + ".db")
        floor, _ = floor_seconds(floor_file or edges)
        wall, lines, rate, rss = run(db, edges, *extra)
        seconds = lines / rate
        rows.append((name, lines, seconds, rate, wall, floor, rss))
        print(f"{name:30s} {lines:>10,} links {seconds:6.2f} s {rate:>10,.0f} links/s (process {wall:.2f} s)  "
              f"x{seconds / floor:5.2f} the read+split floor ({floor:.2f} s)  peak RSS {rss:,.0f} MiB", flush=True)
        return db

    try:
        urls, src, dst = generated_pairs(args.pages, args.links_per_page)
        case("generated, grouped", write_tsv(os.path.join(work, "gen.tsv"), urls, src, dst))
        case("generated, shuffled, gzip", write_tsv(os.path.join(work, "gen_shuf.tsv.gz"), urls, src, dst, True))
        try:
            case("hollins", graph_tsv(os.path.join(work, "hollins.tsv"), load_hollins(data_path("hollins"))))
        except FileNotFoundError as e:
            print(f"hollins: skipped ({e})")
        if not args.skip_uk:
            try:
                g = load_uk2007()
            except FileNotFoundError as e:
                print(f"uk-2007: skipped ({e})")
            else:
                tsv = graph_tsv(os.path.join(work, "uk.tsv"), g)
                db = case("uk-2007", tsv)
                case("uk-2007 again (idempotent)", tsv, db=db)
                links, info = os.path.join(work, "uk.links"), os.path.join(work, "uk.info")
                with open(links, "w") as f:
                    subprocess.run([os.path.join(BIN, "page_db_dump"), "links", db], stdout=f, check=True)
                with open(info, "w") as f:
                    subprocess.run([os.path.join(BIN, "page_db_dump"), "info", db], stdout=f, check=True)
                case("uk-2007 dump pair (--info)", links, extra=("--info", info))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| input | links | seconds | links/s | process s | × read+split floor | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, lines, seconds, rate, wall, floor, rss in rows:
        print(f"| {name} | {lines:,} | {seconds:.2f} | {rate:,.0f} | {wall:.2f} | {seconds / floor:.1f} | {rss:,.0f} |")
    worst = min(r[3] for r in rows)
    print(f"\nslowest case: {worst:,.0f} links/s (target: at least 100,000)")


if __name__ == "__main__":
    main()
