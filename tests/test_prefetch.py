"""The pages of a table found from LMDB's B-tree (``readahead.table_pages``)
and asked of the kernel before the open reads the table whole
(``readahead.prefetch``): exactly the table's leaves and values, checked
against LMDB's own counts and the addresses py-lmdb hands out; nothing
asked, and no error, on a file that is not what the format says."""

import os
import shutil
import struct
import subprocess
import sys

import lmdb
import numpy as np
import pytest

from frontera_linkrank.storage import readahead
from frontera_linkrank.storage.pagedb import PageDB

SCALE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "scale.py")


def _table(txn, name):
    rec = txn.get(name)
    _, _, depth, _, _, _, _, root = struct.unpack("<IHHQQQQQ", rec)
    return depth, root


@pytest.fixture
def env_with_table(tmp_path):
    """A table of 3,000 entries: small values on the leaves and values of
    2 to 40 KiB on overflow pages, interleaved, deep enough for branch
    pages; written over several transactions with deletions between, so
    that later values reuse freed pages all over the file."""
    path = str(tmp_path / "env")
    env = lmdb.open(path, max_dbs=4, map_size=1 << 30)
    db = env.open_db(b"t")
    rng = np.random.default_rng(0)
    for round_ in range(4):
        with env.begin(write=True, db=db) as txn:
            for i in range(round_, 3000, 4):
                size = int(rng.integers(2048, 40960)) if i % 3 == 0 else int(rng.integers(1, 200))
                txn.put(i.to_bytes(4, "big"), rng.bytes(size))
            for i in range(0, 3000, 7 + round_):
                txn.delete(i.to_bytes(4, "big"))
    yield path, env, db
    env.close()


def test_the_pages_found_are_the_tables_leaves_and_values(env_with_table):
    path, env, db = env_with_table
    psize, last = env.stat()["psize"], env.info()["last_pgno"]
    fd = os.open(os.path.join(path, "data.mdb"), os.O_RDONLY)
    try:
        with env.begin(buffers=True) as txn:
            depth, root = _table(txn, b"t")
            stat = txn.stat(db)
            runs = readahead.table_pages(fd, psize, root, depth, last)
            assert depth >= 2 and stat["branch_pages"] >= 1
            assert runs == sorted(runs)
            singles = [r for r in runs if r[1] == 1]
            # every leaf once, and every overflow page: LMDB's own counts
            assert len({p for p, _ in runs}) == len(runs)
            assert sum(n for _, n in runs) == stat["leaf_pages"] + stat["overflow_pages"]
            (base, _), *_ = readahead.map_ranges(path)
            big = set()
            for _, value in txn.cursor(db):
                if len(value) >= 1024:  # stored on overflow pages: their first page, then the data
                    at = np.frombuffer(value, np.uint8).ctypes.data - base - 16
                    assert at % psize == 0
                    big.add((at // psize, (len(value) + 15) // psize + 1))
            assert big and big <= set(runs)
            assert len(singles) - sum(1 for r in big if r[1] == 1) == stat["leaf_pages"]
    finally:
        os.close(fd)


def test_an_empty_table_has_no_pages(tmp_path):
    env = lmdb.open(str(tmp_path / "env"), max_dbs=2)
    try:
        env.open_db(b"empty")
        with env.begin() as txn:
            depth, root = _table(txn, b"empty")
            fd = os.open(os.path.join(str(tmp_path / "env"), "data.mdb"), os.O_RDONLY)
            try:
                assert readahead.table_pages(fd, env.stat()["psize"], root, depth, env.info()["last_pgno"]) == []
            finally:
                os.close(fd)
            assert readahead.prefetch(env, txn, str(tmp_path / "env"), b"empty") == 0
            assert readahead.prefetch(env, txn, str(tmp_path / "env"), b"no such table") == 0
    finally:
        env.close()


def test_a_file_not_laid_out_as_the_format_says_gives_no_pages(env_with_table, tmp_path):
    """A root past the end, a page whose own number is another, a page of
    random bytes, a tree deeper than its record says: None, never an
    exception (the open then reads the table as it would have)."""
    path, env, db = env_with_table
    psize, last = env.stat()["psize"], env.info()["last_pgno"]
    with env.begin() as txn:
        depth, root = _table(txn, b"t")
    env.close()
    damaged = str(tmp_path / "damaged")
    shutil.copytree(path, damaged)
    data = os.path.join(damaged, "data.mdb")
    fd = os.open(data, os.O_RDONLY)
    try:
        assert readahead.table_pages(fd, psize, last + 1, depth, last) is None
        assert readahead.table_pages(fd, psize, root, depth - 1, last) is None  # branch pages at the last level
        root_page = os.pread(fd, psize, root * psize)
        fd_w = os.open(data, os.O_WRONLY)
        try:
            os.pwrite(fd_w, (root + 1).to_bytes(8, "little") + root_page[8:], root * psize)  # another page's number
            assert readahead.table_pages(fd, psize, root, depth, last) is None
            # a branch whose children are all the branch itself: a loop, however deep the record says
            loop = bytearray(root_page)
            n = (int.from_bytes(loop[12:14], "little") - 16) // 2
            for k in range(n):
                off = int.from_bytes(loop[16 + 2 * k : 18 + 2 * k], "little")
                loop[off : off + 6] = root.to_bytes(6, "little")
            os.pwrite(fd_w, bytes(loop), root * psize)
            assert n > 1 and readahead.table_pages(fd, psize, root, 60000, last) is None
            rng = np.random.default_rng(1)
            for trial in range(50):
                page = bytearray(rng.bytes(psize))
                if trial % 2:  # a page that claims its own number, with garbage past its header
                    page[:8] = root.to_bytes(8, "little")
                    kind = readahead._P_LEAF if trial % 4 == 1 else readahead._P_BRANCH
                    page[10:12] = kind.to_bytes(2, "little")
                    lower = 16 + 2 * int(rng.integers(1, 200))  # node offsets, pointing anywhere
                    page[12:16] = lower.to_bytes(2, "little") + psize.to_bytes(2, "little")
                os.pwrite(fd_w, bytes(page), root * psize)
                got = readahead.table_pages(fd, psize, root, depth, last)
                assert got is None or all(0 <= p and p + n - 1 <= last for p, n in got)
        finally:
            os.close(fd_w)
    finally:
        os.close(fd)


def test_the_open_asks_for_the_pages_of_the_tables_it_reads_whole(tmp_path, monkeypatch):
    """A crawl's database (the scale benchmark's web, closed): the open
    asks for the checkpoint, its log, the host names, the fingerprints
    held at the close and the filter of the fingerprint table's keys, every
    leaf and overflow page of them, nothing else."""
    done = subprocess.run([sys.executable, SCALE, "--pages", "20001", "--dir", str(tmp_path), "--no-reopen",
                           "--set", "LINKRANK_SYNC=False"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    asked = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: asked.append((off, n, advice)))
    with PageDB(tmp_path / "db", sync=False, compact=True) as db:
        assert db.n_pages > 20000
        with db.snapshot() as txn:
            tables = (b"vertices", b"vlog", b"hosts", b"fpsheld", b"fpsmarks", b"fpsfilter")
            stats = {name: txn.stat(db.dbs[name]) for name in tables}
        psize = db.env.stat()["psize"]
    assert {a for _, _, a in asked} == {os.POSIX_FADV_WILLNEED}
    assert sum(n for _, n, _ in asked) == sum(s["leaf_pages"] + s["overflow_pages"] for s in stats.values()) * psize
    assert stats[b"vertices"]["overflow_pages"] and stats[b"hosts"]["leaf_pages"] and stats[b"fpsheld"]["leaf_pages"]
    assert stats[b"fpsfilter"]["overflow_pages"] and db._fps.filter.ready  # (stored at the crawl's close, taken back)
