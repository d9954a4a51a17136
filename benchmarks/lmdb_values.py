"""Why the page record log is written in values that fit a B-tree page.

A commit of the frontier appends the hot records it changed to the log
(``storage/pagelog.py``): at scale, about 5,000 records (180 KB) a
commit. LMDB stores a value larger than about half a page (2,038 bytes
with 4 KiB pages) in a run of contiguous pages, and finds that run by
scanning its free list; a page database that has run for a while has a
large, fragmented free list (every commit frees the pages it copied, and
every checkpoint of the log frees the whole log at once). Values that fit
in a page need no run.

This benchmark makes an environment with a fragmented free list (half of
``--filler`` values of 1,500 bytes deleted at random), then commits, in
alternating rounds, the same 180 KB either as one value or as values of
at most a page log value's size (1,936 bytes), fsync on, and prints the time per
commit of each and their ratio, measured in the same run:

    python benchmarks/lmdb_values.py                  # 400,000 filler values
    python benchmarks/lmdb_values.py --filler 2000000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

import lmdb
import numpy as np

from frontera_linkrank.storage.pagelog import PART, pack_entry
from frontera_linkrank.storage.vertices import HOT_RECORD

# The size of one value of the page log: PART hot records, their indices and the header.
PART_BYTES = len(pack_entry(np.zeros(PART, np.int64), np.zeros(PART, HOT_RECORD)))


def fragmented_env(path: str, filler: int, seed: int = 1):
    """An environment whose free list holds ``filler / 2`` scattered pages."""
    env = lmdb.open(path, max_dbs=4, map_size=1 << 38, sync=True)
    table = env.open_db(b"filler")
    value = os.urandom(1500)  # two values fill a leaf page: a deleted one frees a page now and then
    for lo in range(0, filler, 50_000):
        with env.begin(write=True) as txn:
            txn.cursor(db=table).putmulti([(i.to_bytes(8, "big"), value) for i in range(lo, min(filler, lo + 50_000))],
                                          append=True)
    gone = sorted(random.Random(seed).sample(range(filler), filler // 2))
    for lo in range(0, len(gone), 50_000):
        with env.begin(write=True) as txn:
            for i in gone[lo : lo + 50_000]:
                txn.delete(i.to_bytes(8, "big"), db=table)
    return env


def free_pages(env) -> int:
    """Pages of the file no tree uses (the free list, give or take its own pages)."""
    with env.begin() as txn:
        stats = [env.stat()] + [txn.stat(env.open_db(name, txn=txn)) for name in (b"filler", b"log")]
    used = sum(st[k] for st in stats for k in ("branch_pages", "leaf_pages", "overflow_pages"))
    return env.info()["last_pgno"] + 1 - 2 - used  # 2: the meta pages


def commit(env, log, payload: bytes, seq: int, part_bytes: int | None) -> None:
    key = seq.to_bytes(8, "big")
    with env.begin(write=True) as txn:
        if part_bytes is None:
            txn.put(key, payload, db=log, append=True)
        else:
            parts = [payload[a : a + part_bytes] for a in range(0, len(payload), part_bytes)]
            txn.cursor(db=log).putmulti([(key + i.to_bytes(4, "big"), p) for i, p in enumerate(parts)], append=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filler", type=int, default=400_000, help="values written, half then deleted")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of each way")
    ap.add_argument("--commits", type=int, default=50, help="commits per round")
    ap.add_argument("--bytes", type=int, default=180_000, help="log bytes a commit")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="lr-lmdb-values-")
    try:
        t = time.perf_counter()
        env = fragmented_env(work, args.filler)
        log = env.open_db(b"log")
        print(f"environment: {args.filler:,} values written, half deleted ({time.perf_counter() - t:.1f} s; "
              f"about {free_pages(env):,} free pages); {args.bytes:,} bytes a commit, fsync on")
        payload = os.urandom(args.bytes)
        seq = 0
        totals = {"one value": 0.0, "parts": 0.0}
        print(f"| round | one value, ms/commit | parts of {PART_BYTES:,} bytes, ms/commit | ratio |")
        print("|---|---|---|---|")
        for r in range(args.rounds):
            got = {}
            for name, part in (("one value", None), ("parts", PART_BYTES)):
                t = time.perf_counter()
                for _ in range(args.commits):
                    commit(env, log, payload, seq, part)
                    seq += 1
                got[name] = (time.perf_counter() - t) * 1000 / args.commits
                totals[name] += got[name]
            print(f"| {r + 1} | {got['one value']:.2f} | {got['parts']:.2f} | "
                  f"{got['one value'] / got['parts']:.1f} |")
        print(f"\nall rounds: one value {totals['one value'] / args.rounds:.2f} ms a commit, parts "
              f"{totals['parts'] / args.rounds:.2f} ({totals['one value'] / totals['parts']:.1f} x)")
        env.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
