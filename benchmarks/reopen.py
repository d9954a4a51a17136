"""Open a closed page database to its first batch, with the readahead at open and without.

    python benchmarks/reopen.py DIR/db                 # two runs of each, alternating
    python benchmarks/reopen.py DIR/db --runs 3 --cold # page cache emptied before each (root)
    python benchmarks/reopen.py DIR/db --cold --ahead  # and the open reading ahead of faults

Each run is a new process that opens the database with the frontier core
(default settings), takes one batch of 512 requests and exits without
committing: the file stays the one its writer closed, so every run skips
the tree walk as the first open after a clean close does (the record of
that close, which an opening writer removes, is put back when the file is
unchanged). Runs alternate between the open as it is, which reads the map
with the kernel's readahead around each fault (``MADV_NORMAL``), and the
same open with the map read one page at a time (``--cold`` makes the
difference show: with the file in the page cache both read nothing from
disk); ``--ahead`` adds the open reading ahead of each fault instead
(``MADV_SEQUENTIAL``). Prints
the seconds to the first batch, the phases (page table, policy, queue),
the bytes the process read from disk (``read_bytes`` of ``/proc/self/io``)
and the ratios of the medians.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def read_bytes() -> int | None:
    """Bytes this process has read from disk, or None without ``/proc``."""
    try:
        with open("/proc/self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("read_bytes"))
    except (OSError, StopIteration):
        return None


def child(path: str, mode: str, batch: int) -> None:
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.scheduling.frontier import Frontier
    from frontera_linkrank.settings import LinkRankSettings
    from frontera_linkrank.storage import integrity, readahead
    from frontera_linkrank.storage.pagedb import PageDB

    record = os.path.join(path, integrity.CLEAN_CLOSE)
    data = os.path.join(path, "data.mdb")
    saved = open(record).read() if os.path.exists(record) else None
    before = os.stat(data)
    if mode == "off":
        readahead._MADVISE = None
    elif mode == "ahead":
        readahead.MADV_NORMAL = 2  # MADV_SEQUENTIAL: the kernel reads ahead of each fault
    phases: dict[str, float] = {}

    def timed(cls, name, label):
        f = getattr(cls, name)

        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                phases[label] = phases.get(label, 0.0) + time.perf_counter() - t

        setattr(cls, name, g)

    timed(PageDB, "reload", "page table")
    timed(Frontier, "rebuild", "queue")
    PageDB.commit = lambda self, *a, **k: None  # the file stays the closed one
    read0 = read_bytes()
    t0 = time.perf_counter()
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": path}))
    t1 = time.perf_counter()
    got = core.next_requests(batch)
    t2 = time.perf_counter()
    read1 = read_bytes()
    core.ranking.cancel()
    core.db.env.close()
    after = os.stat(data)
    if saved is not None and (before.st_mtime_ns, before.st_ctime_ns, before.st_size) == (
            after.st_mtime_ns, after.st_ctime_ns, after.st_size):
        with open(record, "w") as f:
            f.write(saved)
    policy = t1 - t0 - phases.get("page table", 0.0) - phases.get("queue", 0.0)
    print(json.dumps({"first_batch_s": t2 - t0, "open_s": t1 - t0, "requests": len(got),
                      "read_bytes": None if read0 is None or read1 is None else read1 - read0,
                      "phases": {**phases, "policy and the rest": policy}}))
    os._exit(0)  # the environment is closed; no close() and its commit


LABELS = {"on": "readahead at open", "off": "one page at a time", "ahead": "reading ahead of faults"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a page database closed by a crawl (DIR/db)")
    ap.add_argument("--runs", type=int, default=2, help="runs of each kind")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--cold", action="store_true", help="empty the page cache before each run (needs root)")
    ap.add_argument("--ahead", action="store_true",
                    help="also run the open reading ahead of each fault (MADV_SEQUENTIAL) instead of around it")
    ap.add_argument("--child", choices=list(LABELS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.path, args.child, args.batch)
        return
    if not os.path.exists(os.path.join(args.path, "data.mdb")):
        sys.exit(f"{args.path}: no page database here")
    kinds = ("on", "off", "ahead") if args.ahead else ("on", "off")
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind in kinds:
            if args.cold:
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3")
            done = subprocess.run([sys.executable, __file__, args.path, "--child", kind, "--batch", str(args.batch)],
                                  capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"the open failed: {done.stderr.strip()[-2000:]}")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            times[kind].append(r["first_batch_s"])
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"].items())
            read = "" if r["read_bytes"] is None else f"; read {r['read_bytes'] / 2**20:,.0f} MiB from disk"
            print(f"{LABELS[kind]:>21}: first batch of {r['requests']} after {r['first_batch_s']:.1f} s "
                  f"({phases}{read})", flush=True)
    median = {kind: statistics.median(t) for kind, t in times.items()}
    on, off = median["on"], median["off"]
    ahead = f", {median['ahead']:.1f} s reading ahead ({median['ahead'] / on:.2f} x)" if args.ahead else ""
    print(f"median: {on:.1f} s with readahead, {off:.1f} s without: {off / on:.2f} x{ahead}"
          f"{' (page cache emptied before each)' if args.cold else ''}")


if __name__ == "__main__":
    main()
