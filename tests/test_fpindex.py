"""The fingerprint index of a crawl, written behind: every committed page is
found after every commit and after reopening, and the table catches up."""

import hashlib
import subprocess
import sys
import textwrap

import lmdb
import numpy as np
import pytest

from frontera_linkrank.storage.keys import key_list, key_page
from frontera_linkrank.storage.pagedb import PageDB

HOST = "h.test"


def fps_of(urls):
    return [hashlib.sha1(u.encode()).digest() for u in urls]


def add_batch(db, start, k):
    urls = [f"http://{HOST}/{i}" for i in range(start, start + k)]
    return db.add_pages(fps_of(urls), urls, [db.host_id(HOST)] * k)


def table(db):
    """The ``fps`` table as it is on disk: fingerprint -> page."""
    with db.snapshot() as txn:
        return {bytes(k): key_page(v) for k, v in txn.cursor(db=db.dbs[b"fps"])}


def check(db):
    n = db.n_pages
    fps = fps_of([f"http://{HOST}/{i}" for i in range(n)])
    assert db.find_many(fps) == list(range(n))  # every page found, by the index in memory or on disk
    on_disk = table(db)
    start = db.meta["fps_from"]
    assert 0 <= start <= n
    # Every page before fps_from is in the table; each entry names its own page.
    assert all(on_disk.get(fp) == i for i, fp in enumerate(fps[:start]))
    assert all(fps[i] == fp for fp, i in on_disk.items())
    return len(on_disk), start


def written_behind(path, batches=40):
    """A crawl's writer adds ``batches`` batches of 500 pages, committing
    each; returns the pages it held at the end and its ``fps_from``."""
    with PageDB(path, sync=False, compact=True) as db:
        for _ in range(batches):
            add_batch(db, db.n_pages, 500)
            db.commit()
        return db._fps.held(), db.meta["fps_from"]


def test_every_page_is_found_after_each_commit_and_the_table_catches_up(tmp_path):
    path = tmp_path / "db"
    sizes = []
    with PageDB(path, sync=False, compact=True) as db:
        for b in range(60):
            add_batch(db, db.n_pages, 500)
            db.commit()
            if b % 10 == 9:
                sizes.append(check(db))
        # The ranges split as the table grew: writes are spread over many.
        assert db._fps._bits >= 3
        held = len(db._fps.held())
    entries, start = sizes[-1]
    n = 60 * 500
    assert entries + held == n  # nothing both held and written, nothing lost
    assert 0 < held < n // 5  # written behind, and not far behind
    assert start < n


def test_reopening_restores_what_the_table_lacks(tmp_path):
    path = tmp_path / "db"
    held, _ = written_behind(path)
    assert held
    with PageDB(path, sync=False, compact=True) as db:
        assert db._fps.held() == held  # read back from the page records
        check(db)
        add_batch(db, db.n_pages, 500)
        db.commit()
        check(db)
    with PageDB(path, readonly=True) as db:  # tools see every page either way
        assert db.find_many(fps_of([f"http://{HOST}/{i}" for i in range(db.n_pages)])) == list(range(20500))


def test_a_killed_writer_loses_no_page_of_the_index(tmp_path):
    path = tmp_path / "db"
    script = textwrap.dedent(f"""
        import hashlib, os
        from frontera_linkrank.storage.pagedb import PageDB
        db = PageDB({str(path)!r}, sync=False, compact=True)
        for b in range(30):
            urls = [f"http://{HOST}/{{i}}" for i in range(db.n_pages, db.n_pages + 500)]
            db.add_pages([hashlib.sha1(u.encode()).digest() for u in urls], urls, [db.host_id({HOST!r})] * 500)
            db.commit()
        urls = [f"http://{HOST}/uncommitted/{{i}}" for i in range(100)]
        db.add_pages([hashlib.sha1(u.encode()).digest() for u in urls], urls, [db.host_id({HOST!r})] * 100)
        os.kill(os.getpid(), 9)
    """)
    done = subprocess.run([sys.executable, "-c", script])
    assert done.returncode == -9
    with PageDB(path, sync=False, compact=True) as db:
        assert db.n_pages == 15000
        assert db._fps.held()  # the run was killed with pages held
        check(db)
        assert db.find_many(fps_of([f"http://{HOST}/uncommitted/0"])) == [None]
        add_batch(db, db.n_pages, 500)
        db.commit()
        check(db)


def test_key_ranges_are_the_top_bits():
    from frontera_linkrank.storage.fpindex import key_ranges

    fps = [bytes([b]) + bytes(19) for b in (0x00, 0x3F, 0x40, 0xFF)]
    assert key_ranges(fps, 2).tolist() == [0, 0, 1, 3]
    assert key_ranges(fps, 0).tolist() == [0, 0, 0, 0]
    assert np.array_equal(key_ranges([], 5), np.zeros(0, np.int64))


def test_page_db_check_finds_a_page_the_table_lost_and_repair_writes_it(tmp_path, capsys):
    from frontera_linkrank.cli.check import main as page_db_check
    from frontera_linkrank.storage.fpindex import marked_written
    from frontera_linkrank.storage.fptables import read_marks

    path = tmp_path / "db"
    _, start = written_behind(path)
    with PageDB(path, readonly=True) as db:
        with db.snapshot() as txn:
            marks = read_marks(txn, db.dbs[b"fpsmarks"])
        # A page after fps_from whose range was written since: the check must expect it too.
        later = start + int(np.flatnonzero(marked_written(marks, db.vertices.fp[start : db.n_pages], start))[0])
    assert page_db_check([str(path), "--no-urls"]) == 0
    capsys.readouterr()
    lmdb_env = lmdb.open(str(path), max_dbs=32)
    fps_table = lmdb_env.open_db(b"fps")
    with lmdb_env.begin(write=True) as txn:
        for i in (3, later):
            assert txn.delete(fps_of([f"http://{HOST}/{i}"])[0], db=fps_table)
    lmdb_env.close()
    assert page_db_check([str(path), "--no-urls"]) == 1
    out = capsys.readouterr().out
    assert "2 pages missing from the fingerprint table (first: index 3)" in out, out
    assert page_db_check([str(path), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "fingerprint table rewritten" in out and "OK" in out, out
    with PageDB(path, sync=False, compact=True) as db:
        assert not db._fps.held()  # the repair wrote every page
        check(db)


def test_a_tool_writing_the_database_completes_the_table(tmp_path):
    path = tmp_path / "db"
    assert written_behind(path)[1] < 20000
    with PageDB(path, sync=False) as db:  # every field in memory: import, rank, --repair
        add_batch(db, db.n_pages, 10)
        db.commit()
        assert db.meta["fps_from"] == db.n_pages == 20010
        assert len(table(db)) == 20010
    with PageDB(path, sync=False, compact=True) as db:
        assert not db._fps.held()
        check(db)


@pytest.mark.parametrize("filtered", [False, True])
def test_the_index_answers_as_a_dict_does_through_splits_merges_retries_and_reopening(tmp_path, monkeypatch, filtered):
    """Against a dict, batch after batch: fingerprints with zero bytes at
    their ends and inside (compared as LMDB compares keys), ranges split
    as the table grows, held entries merged often, a cache of 64 slots
    overwritten all the time, a commit that fails and is retried, and a
    reopening that holds again what the table lacks. A writer's index
    (``filtered``) also keeps the table's keys in a Bloom filter, filled
    from the table 50 keys a lookup, in segments of 64 keys and more."""
    from frontera_linkrank.storage import fpindex, keyfilter
    from frontera_linkrank.storage.fpindex import FingerprintIndex

    monkeypatch.setattr(fpindex, "MERGE_AT", 64)
    monkeypatch.setattr(keyfilter, "SCAN", 50)
    monkeypatch.setattr(keyfilter, "MIN_CAPACITY", 64)
    rng = np.random.default_rng(7)
    env = lmdb.open(str(tmp_path / "db"), max_dbs=2, map_size=1 << 28)
    fps_db, marks_db = env.open_db(b"fps"), env.open_db(b"fpsmarks")

    def index():
        return FingerprintIndex(fps_db, lambda: env.begin(buffers=True), marks_db, cache=64, leaves_per_range=2,
                                filtered=filtered)

    def fingerprint(k):
        raw = bytearray(rng.bytes(20))
        if k % 3 == 0:
            tail = int(rng.integers(1, 6))
            raw[20 - tail :] = bytes(tail)
        if k % 5 == 0:
            raw[int(rng.integers(0, 20))] = 0
        return bytes(raw)

    ix, known, fps_from = index(), {}, 0
    strangers = [fingerprint(k) for k in range(200)]
    for batch in range(120):
        fps = [fingerprint(len(known) + k) for k in range(int(rng.integers(0, 90)))]
        fps = [fp for fp in dict.fromkeys(fps) if fp not in known]
        start = len(known)
        ix.add(fps, start)
        known.update(zip(fps, range(start, start + len(fps))))
        keys = list(known)
        asked = [keys[i] for i in rng.integers(0, len(keys), 150 if keys else 0)] + strangers[:20]
        # One at a time first (the table, the held pages, the cache it fills), then all at once.
        assert [ix.find(fp) for fp in asked] == [known.get(fp) for fp in asked]
        assert ix.find_many(asked) == [known.get(fp) for fp in asked]
        if batch % 17 == 5:  # a commit that fails: nothing changes in memory, and it is done again
            with env.begin(write=True) as txn:
                ix.write(txn, len(known))
                txn.abort()
        with env.begin(write=True) as txn:
            fps_from = ix.write(txn, len(known))
        ix.written()
        with env.begin() as txn:
            on_disk = {bytes(k): key_page(v) for k, v in txn.cursor(db=fps_db)}
        assert all(known[fp] == i for fp, i in on_disk.items())  # the table holds no wrong entry
        assert set(on_disk).isdisjoint(ix.held()) and len(on_disk) + len(ix.held()) == len(known)
        assert all(i >= fps_from for i in ix.held().values())
        if batch % 40 == 39:  # reopening: the pages from fps_from on, read back from their records
            held = ix.held()
            ix = index()
            order = sorted(known, key=known.get)[fps_from:]
            with env.begin() as txn:
                ix.restore(txn, np.frombuffer(b"".join(order), "V20"), fps_from)
            assert ix.held() == held
    assert ix._bits >= 3 and len(known) > 4000
    everything = list(known) + strangers
    for _ in range(len(known) // 50 + 2):  # (each lookup reads 50 more keys of the table into the filter)
        assert ix.find_many(everything) == [known.get(fp) for fp in everything]
    lookups = ix.lookups
    assert ix.find_many(strangers) == [None] * len(strangers)
    assert [ix.find(fp) for fp in strangers] == [None] * len(strangers)
    if filtered:  # the filter holds the table: nearly every stranger is answered without it
        assert ix.filter.ready and ix.lookups - lookups < 40
    else:
        assert ix.lookups - lookups == 2 * len(strangers)
    # A key of another length (a fingerprint from outside, damaged) names no page.
    assert ix.find(b"\0" * 19) is None and ix.find(b"") is None
    assert ix.find_many([everything[0], b"x" * 21, everything[1]]) == [0, None, 1]


def test_a_closing_writer_stores_what_it_holds_and_the_next_open_takes_it_from_there(tmp_path, monkeypatch, caplog,
                                                                                      capsys):
    """The pages held at close are stored with the last commit and taken
    back without reading the page records; any later commit drops them,
    and stored pages that do not fit the metadata are read back from the
    records instead."""
    from frontera_linkrank.cli.check import main as page_db_check
    from frontera_linkrank.storage import coldrecords
    from frontera_linkrank.storage.meta import decode, encode

    path = tmp_path / "db"
    held, start = written_behind(path)
    assert held
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin() as txn:
        assert txn.stat(env.open_db(b"fpsheld", txn=txn))["entries"] == 1
    env.close()
    read_all = coldrecords.ColdRecords.read_all
    reads = []
    def counted(*a):  # a crawl's opening reads the records from fps_from on (tools read them all)
        reads.extend(a[4:])
        return read_all(*a)

    monkeypatch.setattr(coldrecords.ColdRecords, "read_all", counted)
    with PageDB(path, sync=False, compact=True) as db:
        assert db.meta["fps_held"] == {"n_pages": 20000, "fps_from": start, "count": len(held)}
        assert db._fps.held() == held and not reads  # taken from the close's table
        check(db)
        add_batch(db, db.n_pages, 500)
        db.commit()
        assert "fps_held" not in db.meta
        with db.snapshot() as txn:
            assert txn.stat(db._fps_held)["entries"] == 0
        check(db)
        held = db._fps.held()
    with PageDB(path, sync=False, compact=True) as db:  # stored again by that close
        assert db._fps.held() == held and not reads
        record = db.meta["fps_held"]
    assert page_db_check([str(path), "--no-urls"]) == 0
    # The stored pages damaged (a chunk cut short), or the record not the metadata's: read from the records.
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:
        stored = env.open_db(b"fpsheld", txn=txn)
        txn.put((0).to_bytes(8, "big"), bytes(txn.get((0).to_bytes(8, "big"), db=stored))[:-28], db=stored)
    env.close()
    capsys.readouterr()
    assert page_db_check([str(path), "--no-urls"]) == 1
    assert "held fingerprints stored at close are damaged" in capsys.readouterr().out
    with PageDB(path, sync=False, compact=True) as db:
        assert db._fps.held() == held and len(reads) == 1
        check(db)
        assert "unusable" in caplog.text
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:  # stored again whole by that close; its record altered
        meta = env.open_db(b"meta", txn=txn)
        doc = decode(txn.get(b"meta", db=meta))
        assert doc["fps_held"] == record
        doc["fps_held"] = {**record, "n_pages": record["n_pages"] - 1}
        txn.put(b"meta", encode(doc), db=meta)
    env.close()
    with PageDB(path, sync=False, compact=True) as db:
        assert db._fps.held() == held and len(reads) == 2
        check(db)


def test_the_key_filter_never_loses_a_key_and_lets_few_others_through(tmp_path, monkeypatch):
    """Keys added in batches across growing segments, and keys read from a
    table a slice at a time: never reported absent; keys never added
    nearly always are, with or without arrays."""
    from frontera_linkrank.storage import keyfilter
    from frontera_linkrank.storage.keyfilter import KeyFilter

    monkeypatch.setattr(keyfilter, "MIN_CAPACITY", 512)
    rng = np.random.default_rng(3)
    keys = np.frombuffer(rng.bytes(20 * 6000), "S20")
    keys = keys[np.unique(keys, return_index=True)[1]]
    added, others = keys[:4000], keys[4000:]
    env = lmdb.open(str(tmp_path / "db"), max_dbs=1)
    table = env.open_db(b"fps")
    with env.begin(write=True) as txn:
        txn.cursor(db=table).putmulti([(bytes(k), b"") for k in sorted(key_list(added[:1500]))])
    f = KeyFilter(capacity=512)
    f.add(added[1500:1600])  # written before the scan started
    calls = 0
    while not f.ready:
        f.fill(lambda: env.begin(buffers=True), table, 100)
        calls += 1
    assert calls == 15 + 1  # 1,500 keys, 100 a time
    for lo in range(1600, 4000, 300):
        f.add(added[lo : lo + 300])
    assert len(f._segments) >= 3
    assert not f.absent(added).any()
    assert not any(f.absent_one(bytes(k)) for k in key_list(added))
    through = int((~f.absent(others)).sum())
    assert through < 0.05 * len(others)
    assert [f.absent_one(k) for k in key_list(others)] == f.absent(others).tolist()


def test_a_closing_writer_stores_its_filter_and_the_next_open_takes_it_back(tmp_path, caplog):
    """The Bloom filter of the table's keys, once filled, is stored with
    the close and taken back whole by the next writer, which asks the table
    only for the keys it may hold; the next commit drops it; a damaged one,
    or one stored for a table that has changed since, is filled again."""
    from frontera_linkrank.cli.check import main as page_db_check

    path = tmp_path / "db"
    written_behind(path)
    strangers = fps_of([f"http://elsewhere.test/{i}" for i in range(2000)])
    with PageDB(path, sync=False, compact=True) as db:
        assert not db._fps.filter.ready  # (no lookup yet: a new open fills it as lookups come)
        for _ in range(100):
            assert db.find_many(strangers) == [None] * len(strangers)
            if db._fps.filter.ready:
                break
        assert db._fps.filter.ready
        assert db.fingerprint_lookups >= len(strangers)  # asked of the table until then
        layout, words = db._fps.filter.layout(), [bytes(p) for p in db._fps.filter.parts()]
    with PageDB(path, sync=False, compact=True) as db:
        f = db._fps.filter
        assert f.ready and f.layout() == layout and [bytes(p) for p in f.parts()] == words
        lookups = db.fingerprint_lookups
        assert db.find_many(strangers) == [None] * len(strangers)
        assert db.fingerprint_lookups - lookups < 100  # about 1 in 100 let through
        check(db)
        add_batch(db, db.n_pages, 500)
        db.commit()
        assert "fps_filter" not in db.meta
        with db.snapshot() as txn:
            assert txn.stat(db.dbs[b"fpsfilter"])["entries"] == 0
        check(db)
    with PageDB(path, sync=False, compact=True) as db:  # stored again by that close
        assert db._fps.filter.ready
        check(db)
    assert page_db_check([str(path), "--no-urls"]) == 0
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:  # one bit of the stored filter flipped
        stored, first = env.open_db(b"fpsfilter", txn=txn), (0).to_bytes(8, "big")
        value = bytearray(txn.get(first, db=stored))
        value[100] ^= 4
        txn.put(first, bytes(value), db=stored)
    env.close()
    with PageDB(path, sync=False, compact=True) as db:
        assert not db._fps.filter.ready and "checksum does not match" in caplog.text
        check(db)
    caplog.clear()
    with PageDB(path, sync=False, compact=True) as db:  # filled, then stored whole by this close
        while not db._fps.filter.ready:
            db.find_many(strangers)
    env = lmdb.open(str(path), max_dbs=32)
    with env.begin(write=True) as txn:  # a key the filter never held, put in the table behind its back
        txn.put(strangers[0], (0).to_bytes(8, "big"), db=env.open_db(b"fps", txn=txn))
    env.close()
    with PageDB(path, sync=False, compact=True) as db:
        assert not db._fps.filter.ready and "has changed since" in caplog.text
        while not db._fps.filter.ready:
            assert db.find_many(strangers[:1]) == [0]
        assert db.find_many(strangers[:1]) == [0]
