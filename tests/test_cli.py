"""The page_db_* tools on a crawled database, on a live one, and on broken ones."""

import csv
import json
import os
import shutil
import struct
import subprocess
import sys
import time

import lmdb
import numpy as np
import pytest

from frontera_linkrank.cli import check, dump, export, find, links, path, stats
from frontera_linkrank.simulation.crawl import simulate
from frontera_linkrank.simulation.graphs import load_hollins
from frontera_linkrank.storage.pagedb import PageDB, page_key
from frontera_linkrank.storage.vertices import LEASED
from conftest import PROJECT_DATA, SHARED_DATA

TOOLS = ["page_db_dump", "page_db_find", "page_db_links", "page_db_path", "page_db_stats", "page_db_check", "page_db_export"]
BIN = os.path.dirname(sys.executable)


def hollins_dir():
    for base in (PROJECT_DATA, SHARED_DATA):
        d = os.path.join(base, "hollins")
        if os.path.exists(os.path.join(d, "hollins.dat")):
            return d
    pytest.skip("needs the Hollins data set (data/hollins or ../shared/data/hollins)")


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """A page database made by crawling half of the Hollins site through
    FrontierManager (each fetch reveals the page's out-links)."""
    work = tmp_path_factory.mktemp("hollins")
    g = load_hollins(hollins_dir())
    order = simulate(g, "frontera_linkrank.LinkRankBackend", [0, 1], 3000, workdir=str(work))
    return str(work / "db"), g, order


def run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("tool", TOOLS)
def test_console_scripts_have_help(tool):
    out = subprocess.run([os.path.join(BIN, tool), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "usage:" in out.stdout


@pytest.mark.parametrize("main,args", [
    (dump.main, ["info"]), (dump.main, ["links"]), (find.main, [".*"]), (links.main, ["http://a/"]),
    (path.main, ["http://a/"]), (stats.main, []), (check.main, []),
])
def test_wrong_path_is_a_clear_error(main, args, tmp_path, capsys):
    for bad in (str(tmp_path / "missing"), str(tmp_path)):
        argv = [args[0], bad, *args[1:]] if main is dump.main else [bad, *args]
        code, out, err = run(main, argv, capsys)
        assert code == 2 and "error:" in err and "Traceback" not in err


def test_dump_info(crawled, capsys):
    db_path, g, order = crawled
    code, out, _ = run(dump.main, ["info", db_path], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "hash index url first_crawl last_crawl n_changes n_crawls depth score importance pagerank authority hub"
    rows = [l.split(" ") for l in lines[1:]]
    with PageDB(db_path, readonly=True) as db:
        assert len(rows) == db.n_pages
        assert [int(r[1]) for r in rows] == list(range(db.n_pages))
        assert {r[2] for r in rows} == set(db.urls(range(db.n_pages)))
    crawled_urls = {g.urls[v] for v in order}
    for r in rows:
        assert len(r) == 13 and len(r[0]) == 40
        if r[2] in crawled_urls:
            assert int(r[3]) > 0 and int(r[6]) == 1
        else:
            assert r[3] == "0" and r[6] == "0"
        assert r[10:] == ["nan", "nan", "nan"]  # no ranking run yet
    imp = np.array([float(r[9]) for r in rows])
    assert abs(imp.sum() - 1) < 1e-9
    code, out, _ = run(dump.main, ["info", db_path, "--sort", "importance", "--top", "5"], capsys)
    top = [float(l.split(" ")[9]) for l in out.splitlines()[1:]]
    assert len(top) == 5 and top == sorted(imp, reverse=True)[:5]
    code, out, _ = run(dump.main, ["info", db_path, "--sort", "depth", "--ascending", "--top", "3"], capsys)
    assert [l.split(" ")[7] for l in out.splitlines()[1:]] == ["0", "0", "1"]


def test_dump_links_matches_the_graph(crawled, capsys):
    db_path, g, order = crawled
    code, out, _ = run(dump.main, ["links", db_path], capsys)
    pairs = [tuple(map(int, l.split())) for l in out.splitlines()]
    with PageDB(db_path, readonly=True) as db:
        urls = db.urls(range(db.n_pages))
        got = {(urls[a], urls[b]) for a, b in pairs}
        expected = set()
        by_fp = {bytes.fromhex(fp.decode()): u for fp, u in zip(g.fingerprints, g.urls)}
        for v in order:
            for w in g.out(v).tolist():
                a, b = db.find(bytes.fromhex(g.fingerprints[v].decode())), db.find(bytes.fromhex(g.fingerprints[w].decode()))
                if a != b:
                    expected.add((urls[a], urls[b]))
        del by_fp
    assert got == expected and len(pairs) == len(got)


def test_find_links_and_path(crawled, capsys):
    db_path, g, order = crawled
    code, out, _ = run(find.main, [db_path, r"admissions/visit"], capsys)
    hits = [l.split(" ", 1) for l in out.splitlines()]
    assert hits and all("admissions/visit" in u for _, u in hits)
    code, out, _ = run(find.main, [db_path, "(unclosed"], capsys)
    assert code == 2
    home = "http://www.hollins.edu/"
    code, out, _ = run(links.main, [db_path, home], capsys)
    lines = out.splitlines()
    back_n = int(lines[0].split("(")[1].rstrip(")"))
    fwd_at = next(k for k, l in enumerate(lines) if l.startswith("# forward links"))
    assert lines[0].startswith("# back links") and fwd_at == back_n + 1
    fwd = {l.split(" ", 1)[1] for l in lines[fwd_at + 1 :]}
    v = g.index[home]
    assert fwd == {g.urls[w] for w in g.out(v).tolist() if w != v}
    # the same page by its hash
    h = lines[1].split(" ")[0]
    code, out2, _ = run(links.main, [db_path, h], capsys)
    assert code == 0
    deep = hits[0][1]
    code, out, _ = run(path.main, [db_path, deep], capsys)
    steps = [l.split(" ") for l in out.splitlines()]
    assert steps[0][2] == deep and steps[-1][0] == "0"
    assert [int(s[0]) for s in steps] == sorted((int(s[0]) for s in steps), reverse=True)
    code, _, err = run(path.main, [db_path, "http://nowhere.test/"], capsys)
    assert code == 2 and "no page" in err


def test_stats_json_and_text(crawled, capsys):
    db_path, g, order = crawled
    code, out, _ = run(stats.main, [db_path, "--json"], capsys)
    s = json.loads(out)
    assert s["pages_by_state"]["crawled"] == len(order)
    assert s["pages"] == sum(s["pages_by_state"].values())
    assert abs(s["cash"]["residual"]) < 1e-9 and s["cash"]["error_bound"] == pytest.approx(1 / s["cash"]["history_total"])
    assert s["top_pages"]["importance"][0]["url"] in ("http://www.hollins.edu/", "http://www1.hollins.edu/")
    code, out, _ = run(stats.main, [db_path], capsys)
    assert "cash" in out and "top hosts" in out


def test_export_csv_and_parquet(crawled, tmp_path, capsys):
    db_path, g, order = crawled
    code, _, err = run(export.main, [db_path, str(tmp_path / "p.csv")], capsys)
    rows = list(csv.DictReader(open(tmp_path / "p.csv")))
    with PageDB(db_path, readonly=True) as db:
        assert len(rows) == db.n_pages
        assert rows[5]["url"] == db.url(5)
    assert sum(r["state"] == "crawled" for r in rows) == len(order)
    pq = pytest.importorskip("pyarrow.parquet")
    run(export.main, [db_path, str(tmp_path / "p.parquet")], capsys)
    t = pq.read_table(tmp_path / "p.parquet")
    assert t.num_rows == len(rows) and t.column("url").to_pylist() == [r["url"] for r in rows]
    code, _, err = run(export.main, [db_path, str(tmp_path / "no" / "x.csv")], capsys)
    assert code == 2


def test_check_passes_on_a_crawled_database(crawled, capsys):
    code, out, _ = run(check.main, [crawled[0]], capsys)
    assert code == 0 and out.startswith("OK"), out


# -- breaking a database with raw LMDB writes ------------------------------------

def raw_env(db_path):
    env = lmdb.open(db_path, max_dbs=16)
    return env, {n: env.open_db(n) for n in (b"meta", b"vlog", b"urls", b"edges", b"vertices")}


def append_records(db_path, change):
    """Append a record-log entry in which ``change(records)`` edited some pages."""
    with PageDB(db_path, readonly=True) as db:
        idx = np.arange(db.n_pages)
        recs = db.vertices.records(idx).copy()
    idx = change(recs)
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
        seq = meta.get("vlog_seq", 0)
        k = len(idx)
        entry = struct.pack("<8sQ", b"LRvlog01", k) + np.asarray(idx, "<u4").tobytes() + b"\0" * ((-4 * k) % 8) + recs[idx].tobytes()
        txn.put(page_key(seq), entry, db=dbs[b"vlog"])
        meta["vlog_seq"] = seq + 1
        txn.put(b"meta", json.dumps(meta).encode(), db=dbs[b"meta"])
    env.close()


def add_cash(recs):
    recs["cash"][3] += 0.01
    return [3]


def dup_fingerprint(recs):
    recs["fp"][4] = recs["fp"][5]
    return [4]


def future_lease(recs):
    recs["state"][6] = LEASED
    recs["lease"][6] = time.time() + 10**6
    return [6]


def wrong_degree(recs):
    recs["n_out"][0] += 1
    return [0]


def drop_url(db_path):
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        txn.delete(page_key(7), db=dbs[b"urls"])
    env.close()


def dangling_edge(db_path):
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
        n, seq = meta["n_pages"], meta["edge_seq"]
        block = struct.pack("<8sIIQ", b"LRedges1", 0, 1, 2) + np.array([1], "<u4").tobytes() + np.array([0, 2], "<u4").tobytes() + np.array([2, n + 5], "<u4").tobytes()
        txn.put(seq.to_bytes(8, "big"), block, db=dbs[b"edges"])
        meta["edge_seq"] = seq + 1
        txn.put(b"meta", json.dumps(meta).encode(), db=dbs[b"meta"])
    env.close()


def bad_log_magic(db_path):
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        txn.put(page_key(10**6), b"garbage-" + bytes(40), db=dbs[b"vlog"])
    env.close()


BREAKAGES = {
    "cash not conserved": lambda p: append_records(p, add_cash),
    "duplicate fingerprints": lambda p: append_records(p, dup_fingerprint),
    "future lease time": lambda p: append_records(p, future_lease),
    "stored out-degree differs": lambda p: append_records(p, wrong_degree),
    "URLs stored for": drop_url,
    "links to missing pages": dangling_edge,
    "corrupt": bad_log_magic,
}


@pytest.mark.parametrize("what", list(BREAKAGES))
def test_check_detects_a_broken_database(crawled, tmp_path, capsys, what):
    db_path = str(tmp_path / "db")
    shutil.copytree(crawled[0], db_path, ignore=shutil.ignore_patterns("writer.lock"))
    assert run(check.main, [db_path, "--no-urls"], capsys)[0] == 0
    BREAKAGES[what](db_path)
    code, out, _ = run(check.main, [db_path, "--no-urls"], capsys)
    assert code == 1, out
    assert any(what in l for l in out.splitlines() if l.startswith("FAIL")), out


def test_tools_read_a_database_while_a_crawl_writes(tmp_path):
    child = os.path.join(os.path.dirname(__file__), "crash_child.py")
    db_path, progress = tmp_path / "db", tmp_path / "progress"
    proc = subprocess.Popen([sys.executable, child, str(db_path), str(progress), "20000"])
    try:
        deadline = time.time() + 60
        while not (progress.exists() and progress.read_text().count("\n") >= 3):
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)
        seen = []
        for _ in range(3):
            outs = {}
            for tool, args in [("page_db_stats", ["--json"]), ("page_db_check", ["--no-urls"]),
                               ("page_db_dump", None), ("page_db_find", ["/1"])]:
                argv = [os.path.join(BIN, tool)] + (["info", str(db_path)] if args is None else [str(db_path), *args])
                r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, (tool, r.stdout[-500:], r.stderr[-500:])
                outs[tool] = r.stdout
            pages = json.loads(outs["page_db_stats"])["pages"]
            seen.append(pages)
            assert outs["page_db_check"].startswith(("OK", "note"))
            assert len(outs["page_db_dump"].splitlines()) >= pages + 1  # header + a snapshot at least as new
            time.sleep(0.3)
        assert proc.poll() is None, "the crawl should still be running"
        assert seen == sorted(seen) and seen[-1] > seen[0]  # the tools saw it grow
    finally:
        proc.kill()
        proc.wait()
