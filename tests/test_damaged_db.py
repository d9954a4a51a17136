"""A damaged ``data.mdb`` is reported, never a crash.

LMDB maps the file and trusts it: a file cut short was a bus error (exit
135, no message) in every tool and in ``scrapy crawl``, and random damage
gave tracebacks or huge allocations. Now the meta pages and every B-tree
page are checked with plain file reads before anything is read through
the map (``storage/integrity.py``), stored lengths are checked before
anything is allocated from them, and every tool exits 0 (the damage was in
bytes it does not read) or 1 with one line naming the failed check.
"""

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

import lmdb
import pytest
from frontera.core.models import Request, Response

from crawlweb import BIN, EXAMPLE, run_crawl
from frontera_linkrank.storage.errors import CorruptDatabase

# name -> frontera-linkrank subcommand (each but top also a page_db_* script)
TOOLS = {
    "check": ["check", "{db}"],
    "stats": ["stats", "{db}"],
    "info": ["dump", "info", "{db}"],
    "links": ["dump", "links", "{db}"],
    "top": ["top", "{db}"],
    "find": ["find", "{db}", "p1"],
    "path": ["path", "{db}", "http://h3.test/p12"],
}

# Runs every tool in one process (as their scripts do), then opens the
# database as a crawl; prints one JSON line per tool. A signal kills it:
# the test sees the exit status.
RUNNER = r"""
import contextlib, io, json, sys, traceback
from frontera_linkrank.cli.main import main
from frontera_linkrank.storage.errors import PageDBError
db, crawl_copy, tools = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for name, argv in tools.items():
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([a.replace("{db}", db) for a in argv])
        said = [l for l in out.getvalue().splitlines() if l.startswith("FAIL")] + err.getvalue().splitlines()
        last = (said or [""])[-1]
    except BaseException:
        code, last = "traceback", traceback.format_exc()
    print(json.dumps([name, code, last]), flush=True)
from frontera_linkrank import LinkRankBackend
try:
    b = LinkRankBackend(settings={"LINKRANK_PATH": crawl_copy, "LINKRANK_SYNC": False, "LINKRANK_RECRAWL": True})
    b.get_next_requests(100)
    b.frontier_stop()
    print(json.dumps(["crawl", 0, ""]))
except PageDBError as e:
    print(json.dumps(["crawl", 1, str(e)]))
except BaseException:
    print(json.dumps(["crawl", "traceback", traceback.format_exc()]))
"""


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    """A crawled database with every table in use: pages, links, hosts,
    errors, stored requests, recrawl validators, rankings."""
    from frontera_linkrank import LinkRankBackend
    from frontera_linkrank.cli import rank

    path = str(tmp_path_factory.mktemp("damage") / "base")
    b = LinkRankBackend(settings={"LINKRANK_PATH": path, "LINKRANK_SYNC": False, "LINKRANK_RECRAWL": True,
                                  "LINKRANK_MAP_SIZE": 1 << 20})
    b.add_seeds([Request("http://h0.test/p0")])
    n = 0
    while n < 1500:
        got = b.get_next_requests(50)
        assert got
        for r in got:
            n += 1
            if n % 17 == 0:
                b.request_error(r, f"boom {n}")
                continue
            b.page_crawled(Response(r.url, request=r, headers={b"ETag": b'"%d"' % n}, body=b"<p>%d</p>" % n))
            b.links_extracted(r, [Request(f"http://h{(n * 7 + k) % 13}.test/p{n * 5 + k}",
                                          method=b"POST" if k == 0 and n % 5 == 0 else b"GET",
                                          meta={b"x": n} if k == 1 else {}) for k in range(5)])
    b.frontier_stop()
    assert rank.main([path]) == 0
    return path


def damaged_copy(base, dest, damage):
    shutil.copytree(base, dest)
    damage(os.path.join(dest, "data.mdb"))
    return str(dest)


def run_everything(db, tmp_path, timeout=120):
    """Every tool and a crawl's open on ``db``; returns {name: (code, last line)}."""
    crawl_copy = str(tmp_path / "crawl_copy")
    shutil.copytree(db, crawl_copy)
    out = subprocess.run([sys.executable, "-c", RUNNER, db, crawl_copy, json.dumps(TOOLS)], capture_output=True,
                         text=True, timeout=timeout)
    shutil.rmtree(crawl_copy)
    assert out.returncode == 0, f"killed by signal {-out.returncode}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
    results = {name: (code, last) for name, code, last in map(json.loads, out.stdout.splitlines())}
    assert set(results) == {*TOOLS, "crawl"}, out.stdout
    return results


def cut_4k(data):
    os.truncate(data, os.path.getsize(data) - 4096)


def test_a_file_cut_short_is_named_by_every_tool_and_refused_by_scrapy_crawl(base_db, tmp_path):
    db = damaged_copy(base_db, tmp_path / "db", cut_4k)
    for name, argv in TOOLS.items():
        script = ["frontera-linkrank", argv[0]] if name == "top" else [f"page_db_{argv[0]}"]
        out = subprocess.run([os.path.join(BIN, script[0]), *script[1:], *[a.replace("{db}", db) for a in argv[1:]]],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, (name, out.returncode, out.stdout[-500:], out.stderr[-500:])
        assert "Traceback" not in out.stderr, (name, out.stderr)
        assert "the file was cut short" in out.stdout + out.stderr, (name, out.stdout, out.stderr)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://h0.test/p0\n")
    out = run_crawl("http://127.0.0.1:9", db, str(seeds), cwd=EXAMPLE, timeout=120)
    assert out.returncode not in (0, 135, -7), out.stdout[-3000:]
    assert "(check: file size; the file was cut short)" in out.stdout, out.stdout[-3000:]


def flip_bits(seed):
    """Flip 1, 4, 16 or 64 random bits of the file (seeded)."""

    def damage(data):
        rng = random.Random(seed)
        size = os.path.getsize(data)
        with open(data, "r+b") as f:
            for _ in range(rng.choice([1, 4, 16, 64])):
                off = rng.randrange(size)
                f.seek(off)
                b = f.read(1)[0]
                f.seek(off)
                f.write(bytes([b ^ (1 << rng.randrange(8))]))

    return damage


def test_random_damage_never_crashes_a_tool_or_a_crawl(base_db, tmp_path):
    reported = 0
    for seed in range(30):
        db = damaged_copy(base_db, tmp_path / f"db{seed}", flip_bits(seed))
        results = run_everything(db, tmp_path)  # a tool that hangs fails it: the run has a timeout
        for name, (code, last) in results.items():
            assert code in (0, 1), (seed, name, code, last)
            if code == 1:  # one line naming the damage (page_db_check: its FAIL lines)
                assert "corrupt" in last or "damaged" in last or last.startswith("FAIL"), (seed, name, last)
        reported += any(code == 1 for code, _ in results.values())
        shutil.rmtree(db)
    assert reported >= 10  # most damage is found (the rest hit bytes no reader looks at)


def edit_raw(db, table, key, change):
    """Rewrite one stored value (``key`` None: the table's first) with plain LMDB calls."""
    env = lmdb.open(db, max_dbs=20)
    handle = env.open_db(table)
    with env.begin(write=True) as txn:
        if key is None:
            key = bytes(next(iter(txn.cursor(handle)))[0])
        txn.put(key, change(bytes(txn.get(key, db=handle))), db=handle)
    env.close()


def set_meta_pages(value):
    def change(raw):
        doc = json.loads(raw)
        doc["n_pages"] = value
        return json.dumps(doc).encode()

    return change


@pytest.mark.parametrize("what,table,key,change,message", [
    ("page count 2**40", b"meta", b"meta", set_meta_pages(2**40), "the file holds at most"),
    ("ranking length 2**40", b"scores", b"pagerank:info",
     lambda raw: json.dumps({**json.loads(raw), "n_pages": 2**40}).encode(), "vector 'pagerank' is corrupt"),
    ("edge block row bounds", b"edges", None,
     lambda raw: raw[:24 + 4 * struct.unpack_from("<I", raw, 12)[0]] + b"\xff\xff\xff\x7f"
     + raw[28 + 4 * struct.unpack_from("<I", raw, 12)[0]:], "edge block"),
])  # fmt: skip
def test_stored_lengths_are_checked_before_allocating(base_db, tmp_path, what, table, key, change, message):
    db = damaged_copy(base_db, tmp_path / "db", lambda data: None)
    edit_raw(db, table, key, change)
    # A 2**40 allocation would fail or swap for minutes: the timeout fails it.
    out = subprocess.run([os.path.join(BIN, "page_db_check"), db], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and message in out.stdout + out.stderr, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr


@pytest.fixture
def walks(monkeypatch):
    """How many times the B-tree walk ran, in this process."""
    from frontera_linkrank.storage import integrity

    count = []
    walk = integrity.check_tree
    monkeypatch.setattr(integrity, "check_tree", lambda path, env: count.append(path) or walk(path, env))
    return count


def test_a_file_its_writer_closed_is_opened_without_the_walk_and_any_change_brings_it_back(base_db, tmp_path,
                                                                                           walks):
    from frontera_linkrank.cli import check
    from frontera_linkrank.storage import integrity
    from frontera_linkrank.storage.pagedb import PageDB

    db = str(tmp_path / "db")
    shutil.copytree(base_db, db)  # a copy is another file: walked once, by its first writer
    PageDB(db).close()
    stamp = os.path.join(db, integrity.CLEAN_CLOSE)
    assert len(walks) == 1 and os.path.exists(stamp)
    PageDB(db, readonly=True).close()
    writer = PageDB(db)
    assert len(walks) == 1 and not os.path.exists(stamp)  # a writer that dies from here leaves no record
    writer.close()
    assert check.main([db]) == 0 and len(walks) == 2  # page_db_check walks always
    # Damage a B-tree page in place and put the modification time back: the change time moves.
    meta = integrity.check_file(db)
    data = os.path.join(db, "data.mdb")
    before = os.stat(data)
    time.sleep(0.05)  # past the file system's timestamp granularity
    with open(data, "r+b") as f:
        f.seek(meta.roots[1][0] * meta.page_size)
        f.write(struct.pack("<Q", 1 << 40))
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(CorruptDatabase, match="check: B-tree pages"):
        PageDB(db)
    assert len(walks) == 3
