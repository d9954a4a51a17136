"""The LMDB page database: any URL, durability, growth, clear errors, readers,
side tables and metadata sections."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import lmdb
import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontera_linkrank.storage.edges import EdgeStore, merge_rows
from frontera_linkrank.storage.hostpages import HostPages
from frontera_linkrank.storage.keys import page_key
from frontera_linkrank.storage.pagedb import VISIT, PageDB, PageDBError, WriterLockedError
from frontera_linkrank.storage.sidetable import Json, RecordLog
from frontera_linkrank.storage.vertices import FIELD_NAMES
from util import crawl, crawl_graph, page_index, req, url

LONG = "http://example.com/" + "x" * 1500 + "?q=" + "y" * 200  # well past LMDB's 511-byte keys
ODD_URLS = [
    LONG,
    "http://bücher.example/straße/ünïcödé?q=日本語",
    "http://example.com/a%20b/%E2%82%AC?x=%2F%3F",
    "https://EXAMPLE.com:8443/Case/Path",
    "http://[2001:db8::1]:8080/v6",
]


def test_urls_of_any_shape_round_trip(make_backend, tmp_path):
    b = make_backend()
    b.add_seeds([req(u) for u in ODD_URLS])
    got = [r.url for r in b.get_next_requests(10)]
    assert sorted(got) == sorted(ODD_URLS)
    b.frontier_stop()
    with PageDB(tmp_path / "db", readonly=True) as db:
        assert sorted(db.urls(range(db.n_pages))) == sorted(ODD_URLS)
        hosts = set(db.host_names)
    assert {"example.com", "xn--bcher-kva.example", "2001:db8::1"} <= hosts


def test_map_grows_by_itself(make_backend, tmp_path):
    b = make_backend(MAP_SIZE=1 << 20, CHECKPOINT_BYTES=1 << 16)
    b.add_seeds([req("http://a.test/0")])
    n = 0
    while n < 3000:
        reqs = b.get_next_requests(200)
        for r in reqs:
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [f"http://a.test/{10 * i + k}" for k in range(1, 11)])
            n += 1
    b.get_next_requests(0)
    size = b.db.env.info()["map_size"]
    assert size > 1 << 20
    pages = b.db.n_pages
    b.frontier_stop()
    b = make_backend()
    assert b.db.n_pages == pages
    assert abs(b.core.aopic.residual()) < 1e-9


def test_a_tool_reads_every_field_in_slices_as_it_would_whole(make_backend, tmp_path, monkeypatch):
    """A tool's page table (every field) is read a slice of records at a
    time, the same table whatever the slice; a record missing in the
    middle of a slice, or at the end, is named."""
    from frontera_linkrank.storage import coldrecords
    from frontera_linkrank.storage.pagedb import CorruptDatabase

    b = make_backend()
    b.add_seeds([req("http://a.test/0")])
    for _ in range(4):
        for r in b.get_next_requests(50):
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [f"http://a.test/{10 * i + k}" for k in range(1, 11)])
    b.frontier_stop()
    path = tmp_path / "db"

    def fields():
        with PageDB(path, readonly=True) as db:
            return db.n_pages, {name: getattr(db.vertices, name)[: db.n_pages].copy() for name in FIELD_NAMES}

    n, whole = fields()
    assert n > 100
    monkeypatch.setattr(coldrecords, "SLICE", 7)
    n_sliced, sliced = fields()
    assert n_sliced == n
    for name in FIELD_NAMES:
        np.testing.assert_array_equal(sliced[name], whole[name], err_msg=name)
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        pages = env.open_db(b"pages", txn=txn)
        assert txn.delete(page_key(50), db=pages)
    env.close()
    with pytest.raises(CorruptDatabase, match="page record 50 missing or damaged"):
        PageDB(path, readonly=True)
    monkeypatch.setattr(coldrecords, "SLICE", 1 << 18)
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        pages = env.open_db(b"pages", txn=txn)
        txn.put(page_key(50), txn.get(page_key(49), db=pages), db=pages)  # any whole record
        assert txn.delete(page_key(n - 1), db=pages)
    env.close()
    with pytest.raises(CorruptDatabase, match=f"1 of {n} page records missing"):
        PageDB(path, readonly=True)


def test_the_page_record_log_is_written_in_values_that_fit_a_page(tmp_path):
    """A commit's changed records go to the log in values of at most
    ``PART`` records, each under the size LMDB keeps in a B-tree page (a
    larger one needs a run of contiguous free pages, found by scanning the
    free list); a log whose older entry was written whole reads the same."""
    from frontera_linkrank.storage.pagelog import PART, pack_entry, parse_entry

    path = tmp_path / "db"
    urls = [f"http://a.test/{i}" for i in range(1000)]
    with PageDB(path, sync=False, compact=True) as db:
        db.add_pages([hashlib.sha1(u.encode()).digest() for u in urls], urls, [db.host_id("a.test")] * 1000)
        db.commit()
        db.vertices.cash[:200] = np.arange(200) / 1000
        db.touch(np.arange(200))
        db.commit()
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        vlog = env.open_db(b"vlog", txn=txn)
        items = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=vlog)]
        assert [len(k) for k, _ in items] == [12] * 4 and all(len(v) <= 2038 - 8 - 12 for _, v in items)
        parsed = [parse_entry(v) for _, v in items]
        assert [len(i) for i, _ in parsed] == [PART, PART, PART, 200 - 3 * PART]
        # The same records as one value under the sequence number alone, as written before parts.
        whole = pack_entry(np.concatenate([i for i, _ in parsed]), np.concatenate([r for _, r in parsed]))
        txn.drop(vlog, delete=False)
        txn.put(items[0][0][:8], whole, db=vlog)
    env.close()
    with PageDB(path, sync=False, compact=True) as db:
        np.testing.assert_array_equal(db.vertices.cash[:200], np.arange(200) / 1000)
        db.vertices.cash[100:300] = 0.5
        db.touch(np.arange(100, 300))
        db.commit()
    with PageDB(path, readonly=True) as db, db.snapshot() as txn:
        assert [len(bytes(k)) for k, _ in txn.cursor(db=db.dbs[b"vlog"])] == [8] + [12] * 4
        expected = np.zeros(1000)
        expected[:100] = np.arange(100) / 1000
        expected[100:300] = 0.5
        np.testing.assert_array_equal(db.vertices.cash[:1000], expected)


def test_a_crawl_that_closes_leaves_no_record_log(make_backend, tmp_path, monkeypatch):
    """The last commit folds the page record log into the checkpoint: the
    next open reads the table in chunks of contiguous pages, not in small
    values all over the file, and reads the records the crawl committed."""
    from frontera_linkrank.storage.vertices import HOT_RECORD

    committed = {}
    commit = PageDB.commit

    def recording_commit(self, sections=None, checkpoint=False):
        commit(self, sections, checkpoint)
        committed.update({name: getattr(self.vertices, name)[: self.n_pages].copy() for name in HOT_RECORD.names})

    monkeypatch.setattr(PageDB, "commit", recording_commit)
    b = make_backend()
    adjacency = {url(i): [url(3 * i + k) for k in (1, 2, 3)] for i in range(400)}
    crawl_graph(b, adjacency, [url(0)], batch=20, max_pages=300)

    def log_entries(db):
        with db.snapshot() as txn:
            return sum(1 for _ in txn.cursor(db=db.dbs[b"vlog"]))

    assert log_entries(b.db) > 0  # commits of the crawl logged their records
    b.frontier_stop()
    records = dict(committed)
    with PageDB(tmp_path / "db", readonly=True) as db:
        assert log_entries(db) == 0
        for name, values in records.items():
            np.testing.assert_array_equal(getattr(db.vertices, name)[: db.n_pages], values, err_msg=name)


def test_an_open_reads_the_map_with_readahead_and_leaves_it_random(tmp_path, monkeypatch):
    """The map is without readahead (lookups all over the file); an open,
    which reads whole tables, lets the kernel read around its faults on
    that map, except while it reads the host names (small entries whose
    leaves lie all over the file), and sets it back to random access when
    it is done."""
    from frontera_linkrank.core.frontier_core import FrontierCore
    from frontera_linkrank.settings import LinkRankSettings
    from frontera_linkrank.storage import readahead
    from frontera_linkrank.storage.hosts import HostTable

    calls = []
    monkeypatch.setattr(readahead, "_MADVISE", lambda lo, n, advice: calls.append((lo, lo + n, advice)))
    hosts_read_with = []  # the advice in force when the host names are read
    load_hosts = HostTable.load

    def load_watched(self, *args):
        hosts_read_with.append(calls[-1][2] if calls else None)
        return load_hosts(self, *args)

    monkeypatch.setattr(HostTable, "load", load_watched)
    path = tmp_path / "db"
    urls = [f"http://a.test/{i}" for i in range(100)]
    with PageDB(path, sync=False, compact=True) as db:
        db.add_pages([hashlib.sha1(u.encode()).digest() for u in urls], urls, [db.host_id("a.test")] * 100)
        db.commit()
        # the open's reload: read around faults, but the host names one page at a time
        assert [c[2] for c in calls] == [readahead.MADV_NORMAL, readahead.MADV_RANDOM, readahead.MADV_NORMAL,
                                         readahead.MADV_RANDOM]
        assert hosts_read_with == [readahead.MADV_RANDOM]
        calls.clear()
        with db.bulk_reads(), db.snapshot() as txn:
            value = next(iter(txn.cursor(db=db.dbs[b"vertices"])))[1]
            at = np.frombuffer(value, np.uint8).ctypes.data
            assert [c[2] for c in calls] == [readahead.MADV_NORMAL]
            assert any(lo <= at < hi for lo, hi, _ in calls)  # the range is the map's
        assert [c[2] for c in calls] == [readahead.MADV_NORMAL, readahead.MADV_RANDOM]
        assert calls[0][:2] == calls[1][:2]
    calls.clear()
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": str(path), "LINKRANK_SYNC": False}))
    try:
        advice = [c[2] for c in calls]
        assert advice and advice[0] == readahead.MADV_NORMAL and advice[-1] == readahead.MADV_RANDOM
        opened = len(calls)
        core.next_requests(10)  # handing out: random access
        assert len(calls) == opened
    finally:
        core.close()
    assert readahead.map_ranges(str(path)) == []  # closed: no mapping left


def test_readahead_blocks_nest_and_a_scattered_read_inside_one_goes_back_to_reading_around(tmp_path, monkeypatch):
    """Only the outermost bulk block puts the map back to random access; a
    scattered block reads one page per fault and then around faults again,
    and outside a bulk block it changes nothing."""
    from frontera_linkrank.storage import readahead

    calls = []
    monkeypatch.setattr(readahead, "_MADVISE", lambda lo, n, advice: calls.append(advice))
    path = str(tmp_path / "env")
    env = lmdb.open(path, readahead=False)
    try:
        with readahead.scattered(path):
            pass
        assert calls == []
        with readahead.bulk(path):
            with readahead.bulk(path):
                with readahead.scattered(path):
                    assert calls == [readahead.MADV_NORMAL, readahead.MADV_RANDOM]
                assert calls[-1] == readahead.MADV_NORMAL
            assert calls == [readahead.MADV_NORMAL, readahead.MADV_RANDOM, readahead.MADV_NORMAL]
        assert calls[-1] == readahead.MADV_RANDOM and len(calls) == 4
    finally:
        env.close()


def test_the_reopen_benchmark_leaves_the_database_as_its_crawl_closed_it(make_backend, tmp_path):
    """``benchmarks/reopen.py`` opens a closed database to its first batch
    again and again: it must not write to it, and must leave the record of
    the clean close, so that every run opens as the first one did."""
    from frontera_linkrank.storage import integrity

    b = make_backend()
    crawl_graph(b, {url(i): [url(2 * i + 1), url(2 * i + 2)] for i in range(100)}, [url(0)], batch=10, max_pages=60)
    b.frontier_stop()
    path = tmp_path / "db"
    stat = os.stat(path / "data.mdb")
    record = (path / integrity.CLEAN_CLOSE).read_bytes()
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "reopen.py")
    done = subprocess.run([sys.executable, bench, str(path), "--runs", "1", "--batch", "5"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0].strip() for line in lines[:2]] == ["readahead at open", "one page at a time"]
    assert all("first batch of 5 after" in line for line in lines[:2]) and lines[2].startswith("median:")
    after = os.stat(path / "data.mdb")
    assert (after.st_mtime_ns, after.st_ctime_ns, after.st_size) == (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)
    assert (path / integrity.CLEAN_CLOSE).read_bytes() == record
    meta = integrity.check_file(str(path))
    assert integrity.closed_cleanly(str(path), meta)


def test_refuses_a_directory_that_is_not_a_page_database(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(PageDBError, match="not empty and holds no page database"):
        PageDB(d)
    assert (d / "cat.jpg").read_bytes() == b"\xff\xd8"
    with pytest.raises(PageDBError, match="no page database here"):
        PageDB(tmp_path / "missing", readonly=True)
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(PageDBError, match="is a file"):
        PageDB(f)


def test_refuses_a_foreign_lmdb_environment(tmp_path):
    env = lmdb.open(str(tmp_path / "other"))
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()
    for ro in (False, True):
        with pytest.raises(PageDBError, match="not a page database"):
            PageDB(tmp_path / "other", readonly=ro)


def test_refuses_another_schema_version(tmp_path):
    PageDB(tmp_path / "db").close()
    env = lmdb.open(str(tmp_path / "db"), max_dbs=16)
    meta_db = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        meta = json.loads(txn.get(b"meta", db=meta_db))
        meta["version"] = 999
        txn.put(b"meta", json.dumps(meta).encode(), db=meta_db)
    env.close()
    with pytest.raises(PageDBError, match="schema version 999"):
        PageDB(tmp_path / "db")


def run_py(code, *args):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_one_writer_many_readers(make_backend, tmp_path):
    b = make_backend()
    b.add_seeds([req("http://a.test/1"), req("http://a.test/2")])
    b.get_next_requests(0)  # commit
    other_writer = run_py(
        """
        import sys
        from frontera_linkrank.storage.pagedb import PageDB, PageDBError
        try:
            PageDB(sys.argv[1])
        except PageDBError as e:
            print("refused:", e)
        """,
        tmp_path / "db",
    )
    assert "refused:" in other_writer.stdout and "another process is writing" in other_writer.stdout
    reader = """
        import sys
        from frontera_linkrank.storage.pagedb import PageDB
        with PageDB(sys.argv[1], readonly=True) as db:
            print(db.n_pages, sorted(db.urls(range(db.n_pages))))
        """
    out = run_py(reader, tmp_path / "db")
    assert out.stdout.startswith("2 "), out.stderr
    # The reader sees the next commit, not the uncommitted batch.
    b.add_seeds([req("http://a.test/3")])
    assert run_py(reader, tmp_path / "db").stdout.startswith("2 ")
    b.get_next_requests(0)
    assert run_py(reader, tmp_path / "db").stdout.startswith("3 ")


def test_record_log_and_checkpoint_give_the_same_table(make_backend, tmp_path):
    b = make_backend(CHECKPOINT_BYTES=1 << 16)
    b.add_seeds([req("http://a.test/0")])
    for _ in range(30):
        for r in b.get_next_requests(20):
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [f"http://a.test/{3 * i + k}" for k in (1, 2, 3)] + ["http://a.test/0"])
    b.get_next_requests(0)
    v, n = b.db.vertices, b.db.n_pages
    before = {name: np.asarray(getattr(v, name)[:n]).copy() for name in FIELD_NAMES}  # hot, and cold read back
    with b.db.env.begin() as txn:
        n_chunks = txn.stat(b.db.dbs[b"vertices"])["entries"]
        n_log = txn.stat(b.db.dbs[b"vlog"])["entries"]
    assert n_chunks > 0 and n_log > 0  # both a checkpoint and a log since
    b.frontier_stop()
    with PageDB(tmp_path / "db", readonly=True) as db:
        # Leases are reset on the next writer open only; readers see them.
        for name in FIELD_NAMES:
            assert getattr(db.vertices, name)[:n].tobytes() == before[name].tobytes(), name


def test_recrawl_replaces_out_links(make_backend):
    b = make_backend()
    b.add_seeds([req("http://a.test/0")])
    (r,) = b.get_next_requests(1)
    crawl(b, r, ["http://a.test/1", "http://a.test/2"])
    b.get_next_requests(0)
    crawl(b, req("http://a.test/0"), ["http://a.test/3"])
    b.get_next_requests(0)
    db = b.db
    with db.snapshot() as txn:
        assert db.urls(db.edges.out_links(txn, 0)) == ["http://a.test/3"]
        src, dst = db.edges.current_edges(txn, db.n_pages)
    assert list(zip(src.tolist(), dst.tolist())) == [(0, page_index(db, "http://a.test/3"))]
    assert db.vertices.n_out[0] == 1


def test_edge_blocks_merge_keep_newest_rows(tmp_path):
    env = lmdb.open(str(tmp_path / "e"), max_dbs=2)
    db = env.open_db(b"edges")
    store = EdgeStore(db)
    rng = np.random.default_rng(0)
    truth = {}
    for _batch in range(70):  # enough commits for several merge levels
        for _ in range(rng.integers(1, 6)):
            src = int(rng.integers(0, 40))
            dst = np.unique(rng.integers(0, 40, rng.integers(0, 5)))
            store.add(src, dst)
            truth[src] = sorted(dst.tolist())
        with env.begin(write=True) as txn:
            installed, _ = store.write(txn)
        installed()
    assert store.n_blocks < 20
    with env.begin(buffers=True) as txn:
        got = {}
        for src, ptr, dst in store.iter_current(txn, 40):
            for k, s in enumerate(src.tolist()):
                got[s] = sorted(dst[ptr[k] : ptr[k + 1]].tolist())
        assert got == truth
        for s, d in truth.items():
            assert sorted(store.out_links(txn, s).tolist()) == d
    with env.begin(write=True) as txn:
        installed, _ = store.compact(txn)
    installed()
    with env.begin(buffers=True) as txn:
        a, b = store.current_edges(txn, 40)
        assert sorted(zip(a.tolist(), b.tolist())) == sorted((s, x) for s, d in truth.items() for x in d)
    env.close()


def test_merge_rows_keeps_the_newest_row_per_source():
    old = (np.array([1, 2]), np.array([0, 2, 3]), np.array([5, 6, 7]))
    new = (np.array([2]), np.array([0, 1]), np.array([9]))
    src, ptr, dst = merge_rows([old, new])
    assert src.tolist() == [1, 2] and ptr.tolist() == [0, 2, 3] and dst.tolist() == [5, 6, 9]
    # One set: sorted as it is (a view of part of a block too), or put in order, the newest row kept.
    src, ptr, dst = merge_rows([(np.array([4, 7]), np.array([2, 3, 5]), np.array([0, 0, 8, 1, 2, 0]))])
    assert src.tolist() == [4, 7] and ptr.tolist() == [0, 1, 3] and dst.tolist() == [8, 1, 2]
    src, ptr, dst = merge_rows([(np.array([7, 4, 7]), np.array([0, 1, 2, 4]), np.array([3, 8, 1, 2]))])
    assert src.tolist() == [4, 7] and ptr.tolist() == [0, 1, 3] and dst.tolist() == [8, 1, 2]


def add(db, urls):
    """Add pages with these URLs (host "h.test") to a writer; first index."""
    fps = [hashlib.sha1(u.encode()).digest() for u in urls]
    return db.add_pages(fps, urls, [db.host_id("h.test")] * len(urls))


def test_side_table_sees_this_batch_and_commits_it(tmp_path):
    with PageDB(tmp_path / "db", sync=False) as db:
        add(db, [f"http://h.test/{i}" for i in range(10)])
        notes = db.side_table("notes", Json())
        assert db.side_table("notes") is notes
        notes.put(7, {"a": 1})
        notes.put(3, ["x"])
        notes.put(7, {"a": 2})  # the last value put wins
        with db.snapshot() as txn:
            assert notes.get(7, txn) == {"a": 2} and notes.get(5, txn, "none") == "none"
            assert notes.get_many([9, 7, 3, 7], txn) == {7: {"a": 2}, 3: ["x"]}
            assert notes.get_list([7, 0, 3], txn) == [{"a": 2}, None, ["x"]]
        db.commit()
        assert notes.n_pending == 0
        notes.put(3, "new")  # pending overrides the committed value
        with db.snapshot() as txn:
            assert notes.get_list([3, 7], txn) == ["new", {"a": 2}]
    with PageDB(tmp_path / "db", readonly=True) as db, db.snapshot() as txn:
        notes = db.side_table("notes", Json())
        assert notes.get_many(range(10), txn) == {3: ["x"], 7: {"a": 2}}  # "new" was never committed
        with pytest.raises(PermissionError):
            notes.put(1, 1)
        # A table a reader's database does not have reads as empty.
        assert db.side_table("absent", Json()).get_many(range(10), txn) == {}


def test_side_table_declarations_are_checked(tmp_path):
    with PageDB(tmp_path / "db", sync=False) as db:
        for own in ("urls", "meta", "edges", "scores"):
            with pytest.raises(ValueError, match="table of the page database itself"):
                db.side_table(own, Json())
        with pytest.raises(KeyError):
            db.side_table("never-declared")
        t = db.side_table("log", RecordLog(VISIT, keep=2))
        t.put(0, [(1.0, 1)])
        with pytest.raises(ValueError, match="pending"):
            db.side_table("log", RecordLog(VISIT, keep=5))
        assert db.side_table("log", RecordLog(VISIT, keep=2)) is t  # the same declaration is fine


def test_visit_log_keeps_the_last_visits_across_batches(tmp_path):
    with PageDB(tmp_path / "db", sync=False) as db:
        add(db, ["http://h.test/a", "http://h.test/b"])
        db.max_visits = 3
        for k in range(4):
            db.add_visit(0, k, k % 2)
            if k == 1:
                db.commit()
        with db.snapshot() as txn:  # two committed, two in this batch
            assert db.visits(0, txn)["interval"].tolist() == [1.0, 2.0, 3.0]
            assert len(db.visits(1, txn)) == 0
        db.commit()
    with PageDB(tmp_path / "db", readonly=True) as db, db.snapshot() as txn:
        got = db.visits(0, txn)
        assert got["interval"].tolist() == [1.0, 2.0, 3.0] and got["changed"].tolist() == [1, 0, 1]


def test_feature_tables_keep_their_encodings(tmp_path):
    """The bytes stored by each feature are those of schema 2 (databases
    written before side tables read the same), requests those of request
    format 1: a MessagePack array of the five parts."""
    path = tmp_path / "db"
    with PageDB(path, sync=False) as db:
        add(db, ["http://h.test/ü", "http://h.test/1"])
        db.max_visits = 32
        db.set_error(1, "é" * 3000)
        db.set_validators(0, '"etag"', None)
        db.add_visit(1, 2.5, True)
        parts = ("POST", {b"X": [b"1"]}, {}, {"k": 1}, b"body")
        db.set_request_extras(0, parts)
        db.commit({"counters": {"pages_crawled": 1}})
    env = lmdb.open(str(path), readonly=True, max_dbs=16)
    with env.begin() as txn:
        def raw(table, i):
            return txn.get(page_key(i), db=env.open_db(table, txn=txn, create=False))

        assert raw(b"urls", 0) == "http://h.test/ü".encode()
        assert raw(b"errors", 1) == ("é" * 3000).encode()[:4096]
        assert raw(b"validators", 0) == b'["\\"etag\\"", null]'
        assert raw(b"visits", 1) == np.array([(2.5, 1)], VISIT).tobytes()
        assert msgpack.unpackb(raw(b"requests", 0), strict_map_key=False) == list(parts)
        meta = json.loads(txn.get(b"meta", db=env.open_db(b"meta", txn=txn, create=False)))
    env.close()
    assert meta["counters"] == {"pages_crawled": 1} and meta["n_pages"] == 2 and meta["version"] == 3
    assert meta["requests"] == {"format": "msgpack", "version": 1}
    with PageDB(path, readonly=True) as db, db.snapshot() as txn:
        assert db.error_message(1, txn) == ("é" * 3000).encode()[:4096].decode("utf-8", "replace")
        assert db.validators([0, 1], txn) == {0: ('"etag"', None)}
        assert db.request_extras([0, 1], txn) == {0: parts}
        assert db.urls([1, 0, 5], txn) == ["http://h.test/1", "http://h.test/ü", None]


def test_metadata_sections_have_owners(tmp_path):
    state = {"n": 0}
    with PageDB(tmp_path / "db", sync=False) as db:
        db.own_meta_section("mine", lambda: dict(state))
        with pytest.raises(ValueError, match="already has an owner"):
            db.own_meta_section("mine", dict)
        for key in ("n_pages", "version", "edge_seq"):
            with pytest.raises(ValueError, match="belongs to the page database"):
                db.commit({key: 1})
        state["n"] = 5
        db.commit({"other": [1, 2]})
        assert db.meta_section("mine") == {"n": 5} and db.meta_section("other") == [1, 2]
        assert db.meta_section("missing", {}) == {}
        with pytest.raises(TypeError):
            db.meta["other"] = 3  # the document is changed by commits only
    with PageDB(tmp_path / "db", readonly=True) as db, db.snapshot() as txn:
        assert db.meta_section("mine") == {"n": 5} and db.meta["n_pages"] == 0
        assert db.committed_pages(txn) == 0


def test_a_second_writer_gets_writer_locked_error(tmp_path):
    with PageDB(tmp_path / "db", sync=False):
        with pytest.raises(WriterLockedError, match="another process is writing to this page database") as e:
            PageDB(tmp_path / "db")
        assert isinstance(e.value, PageDBError) and e.value.holder == os.getpid()
    PageDB(tmp_path / "db").close()  # released on close


def test_a_writer_opened_without_sizes_grows_and_checkpoints(tmp_path):
    """No map size or checkpoint size given: the map starts as LMDB's
    smallest and grows; the record log is folded once it outgrows the table."""
    with PageDB(tmp_path / "db", sync=False) as db:
        start = db.env.info()["map_size"]
        logged = set()
        for k in range(30):
            add(db, [f"http://h.test/{k}/{j}/" + "x" * 200 for j in range(500)])
            db.touch(np.arange(0, db.n_pages, 3))
            db.commit()
            with db.snapshot() as txn:
                log_bytes = sum(len(v) for _, v in txn.cursor(db.dbs[b"vlog"]))
                assert txn.stat(db.dbs[b"vertices"])["entries"] > 0 or k < 2
            assert log_bytes <= db.n_pages * db.vertices.records(slice(0, 1)).itemsize
            logged.add(log_bytes > 0)
        assert logged == {True, False}  # both appended to the log and folded it
        assert db.env.info()["map_size"] > start
        pages = db.n_pages
    with PageDB(tmp_path / "db", readonly=True) as db:
        assert db.n_pages == pages


def test_a_schema_2_database_is_read_and_upgraded_by_its_first_writer(make_backend, tmp_path):
    """A database of schema 2 (whole page records in the record log, no
    cold table, no fingerprint index): tools read it as it is; the first
    writer rewrites it as schema 3 (hot and cold records, fingerprints,
    host lists), every field kept; the crawl then goes on."""
    from frontera_linkrank.storage.vertices import RECORD_V2

    b = make_backend(POLICY="opic")
    b.add_seeds([req("http://a.test/0")])
    for _ in range(5):
        for r in b.get_next_requests(10):
            i = int(r.url.rsplit("/", 1)[1])
            crawl(b, r, [f"http://a.test/{3 * i + k}" for k in (1, 2, 3)] + [f"http://b.test/{i}"])
    b.get_next_requests(0)
    b.frontier_stop()
    path = str(tmp_path / "db")
    with PageDB(path, readonly=True) as db:
        n = db.n_pages
        want = {name: getattr(db.vertices, name)[:n].copy() for name in FIELD_NAMES}
    # Written as schema 2 wrote it.
    env = lmdb.open(path, max_dbs=16)
    with env.begin(write=True) as txn:
        dbs = {name: env.open_db(name, txn=txn) for name in (b"meta", b"vertices", b"vlog", b"pages", b"fps",
                                                             b"hostpages")}
        for name in (b"vlog", b"pages", b"fps", b"hostpages", b"vertices"):
            txn.drop(dbs[name], delete=name != b"vertices" and name != b"vlog")
        old = np.empty(n, RECORD_V2)
        for name in FIELD_NAMES:
            old[name] = want[name]
        old["flags"] &= 0xFF ^ 64  # schema 2 had no "crawled" flag
        for c in range(0, n, 4096):
            txn.put(page_key(c // 4096), old[c : c + 4096].tobytes(), db=dbs[b"vertices"])
        meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
        meta.update(version=2, vlog_seq=0)
        meta.pop("host_lists")
        txn.put(b"meta", json.dumps(meta).encode(), db=dbs[b"meta"])
    env.close()
    with PageDB(path, readonly=True) as db:  # read as it is
        assert db.meta["version"] == 2
        for name in FIELD_NAMES:
            assert np.array_equal(getattr(db.vertices, name)[:n], want[name], equal_nan=name not in ("fp",)), name
    b = make_backend(POLICY="opic")  # the first writer upgrades it
    assert b.db.meta["version"] == 3
    for name in FIELD_NAMES:
        got = np.asarray(getattr(b.db.vertices, name)[:n])
        assert np.array_equal(got, want[name], equal_nan=name not in ("fp",)), name
    assert b.db.find(bytes(want["fp"][7])) == 7
    assert len(b.get_next_requests(100)) > 0  # the queue came back from the host lists
    b.frontier_stop()
    with PageDB(path, readonly=True) as db:
        assert db.meta["version"] == 3 and db.n_pages >= n


class _Abort(Exception):
    pass


_HOST_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(0, 4), max_size=10)),
    st.tuples(st.just("replace"), st.integers(0, 4), st.integers(1, 3)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("abort")),
), max_size=25)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_HOST_OPS)
def test_host_page_lists_agree_with_lists_through_additions_replacements_and_failed_commits(tmp_path, ops):
    """Every host's list, read within a batch (committed blocks and the
    batch's additions), after commits, after a commit that failed and is
    retried with the next one, and from a new reader of the table, holds
    exactly the pages a plain list per host holds."""
    env = lmdb.open(str(tmp_path / f"hp{len(os.listdir(tmp_path))}"), max_dbs=1)
    db = env.open_db(b"hostpages")
    lists = HostPages(db)
    model: dict[int, list[int]] = {h: [] for h in range(5)}
    committed = {h: [] for h in range(5)}
    n = 0
    for op in ops:
        if op[0] == "add":
            hosts = op[1]
            lists.add(np.array(hosts, np.int64), np.arange(n, n + len(hosts)))
            for k, h in enumerate(hosts):
                model[h].append(n + k)
            n += len(hosts)
        elif op[0] == "replace":
            _, h, step = op
            model[h] = model[h][::step]
            lists.replace(h, np.array(model[h], np.int64))
        elif op[0] == "commit":
            with env.begin(write=True) as txn:
                lists.write(txn)
            lists.written()
            committed = {h: list(p) for h, p in model.items()}
        else:
            with pytest.raises(_Abort), env.begin(write=True) as txn:
                lists.write(txn)
                raise _Abort
        with env.begin() as txn:
            assert {h: sorted(lists.pages(txn, h).tolist()) for h in model} == {h: sorted(p) for h, p in model.items()}
            fresh = HostPages(db)
            assert {h: sorted(fresh.pages(txn, h).tolist()) for h in model} == {
                h: sorted(p) for h, p in committed.items()}
    env.close()
