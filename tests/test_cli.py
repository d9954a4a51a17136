"""The page_db_* tools on a crawled database, on a live one, and on broken ones."""

import csv
import importlib.metadata
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import lmdb
import numpy as np
import pytest

from conftest import dataset
from frontera_linkrank.cli import check, dump, export, find, importer, links, path, rank, stats
from frontera_linkrank.cli.commands import BY_NAME
from frontera_linkrank.cli.main import main as frontera_linkrank
from frontera_linkrank.simulation.crawl import simulate
from frontera_linkrank.simulation.graphs import load_hollins
from frontera_linkrank.storage.pagedb import PageDB, page_key
from frontera_linkrank.storage.vertices import COLD_RECORD, CRAWLED, F_SEED, HOT_RECORD, LEASED
from test_cli_import_rank import reference_pagerank

TOOLS = ["page_db_seeds", "page_db_dump", "page_db_find", "page_db_links", "page_db_path", "page_db_stats",
         "page_db_check", "page_db_export", "page_db_import", "page_db_rank"]  # fmt: skip
BIN = os.path.dirname(sys.executable)


def hollins_dir():
    return dataset("hollins")


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """A page database made by crawling half of the Hollins site through
    FrontierManager (each fetch reveals the page's out-links), by greedy
    OPIC, with the periodic rankings off: no ranking is stored until a test
    runs one."""
    work = tmp_path_factory.mktemp("hollins")
    g = load_hollins(hollins_dir())
    order = simulate(g, "frontera_linkrank.LinkRankBackend", [0, 1], 3000, workdir=str(work),
                     settings={"LINKRANK_POLICY": "opic", "LINKRANK_RANK_ALGORITHMS": "none"})
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
    (path.main, ["http://a/"]), (stats.main, []), (check.main, []), (rank.main, []),
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
    header = ("hash index url first_crawl last_crawl n_changes n_crawls depth score importance pagerank authority hub "
              "priority key")
    assert lines[0] == header
    rows = [l.split(" ") for l in lines[1:]]
    with PageDB(db_path, readonly=True) as db:
        assert len(rows) == db.n_pages
        assert [int(r[1]) for r in rows] == list(range(db.n_pages))
        assert {r[2] for r in rows} == set(db.urls(range(db.n_pages)))
    crawled_urls = {g.urls[v] for v in order}
    for r in rows:
        assert len(r) == 15 and len(r[0]) == 40
        if r[2] in crawled_urls:
            assert int(r[3]) > 0 and int(r[6]) == 1
        else:
            assert r[3] == "0" and r[6] == "0"
        assert r[10:13] == ["nan", "nan", "nan"]  # no ranking run yet
        assert r[13] == "0"  # no request priorities
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
                a = db.find(bytes.fromhex(g.fingerprints[v].decode()))
                b = db.find(bytes.fromhex(g.fingerprints[w].decode()))
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
    assert abs(s["cash"]["residual"]) < 1e-9
    assert s["cash"]["error_bound"] == pytest.approx(1 / s["cash"]["history_total"])
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


def copy_db(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("writer.lock"))
    return str(dst)


def link_matrix(links_text, n):
    """Adjacency of ``page_db_dump links`` output (distinct, no self-links)."""
    import scipy.sparse as sp

    pairs = np.array([l.split(" ") for l in links_text.splitlines()], np.int64).reshape(-1, 2)
    assert (pairs[:, 0] != pairs[:, 1]).all()
    a = sp.csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    assert a.nnz == len(pairs) and a.max() == 1  # stored distinct
    return a


def info_column(out, name):
    lines = out.splitlines()
    k = lines[0].split(" ").index(name)
    return np.array([float(l.split(" ")[k]) for l in lines[1:]])


def test_rank_a_crawled_database(crawled, tmp_path, capsys):
    db_path = copy_db(crawled[0], tmp_path / "db")
    code, out, err = run(rank.main, [db_path], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("ranked ") and "version 1" in lines[0]
    pr_line = next(l for l in lines if l.startswith("pagerank: "))
    hits_line = next(l for l in lines if l.startswith("hits: "))
    for l in (pr_line, hits_line):
        assert " iterations, final L1 change " in l and "stopped by tolerance" in l
    _, info, _ = run(dump.main, ["info", db_path], capsys)
    pr = info_column(info, "pagerank")
    assert np.isfinite(pr).all() and abs(pr.sum() - 1) < 1e-9
    assert np.isfinite(info_column(info, "authority")).all() and np.isfinite(info_column(info, "hub")).all()
    _, links_text, _ = run(dump.main, ["links", db_path], capsys)
    ref = reference_pagerank(link_matrix(links_text, len(pr)))
    assert np.abs(pr - ref).sum() < 1e-6
    s = json.loads(run(stats.main, [db_path, "--json"], capsys)[1])
    assert s["ranking"]["pagerank"]["iterations"] == int(pr_line.split()[1])
    assert s["ranking"]["pagerank"]["stopped"] == "tolerance" and s["ranking"]["pagerank"]["version"] == 1
    # Again, capped: stored anyway, with a note, and a newer version.
    code, out, _ = run(rank.main, [db_path, "--algorithm", "hits", "--max-iter", "2", "--edges", "stream"], capsys)
    assert code == 0 and "hits: 2 iterations" in out and "stopped by max_iter" in out and "note: hits stopped" in out
    s = json.loads(run(stats.main, [db_path, "--json"], capsys)[1])
    assert s["ranking"]["authority"]["stopped"] == "max_iter" and s["ranking"]["authority"]["version"] == 2
    assert s["ranking"]["authority"]["edges"] == "stream"
    assert s["ranking"]["pagerank"]["version"] == 1  # untouched
    assert run(check.main, [db_path], capsys)[0] == 0


def test_import_of_a_dump_pair_rebuilds_the_crawled_database(crawled, tmp_path, capsys):
    import gzip

    db_path = crawled[0]
    _, info, _ = run(dump.main, ["info", db_path], capsys)
    _, links_text, _ = run(dump.main, ["links", db_path], capsys)
    (tmp_path / "info.txt").write_text(info)
    with gzip.open(tmp_path / "links.txt.gz", "wt") as f:
        f.write(links_text)
    copy = str(tmp_path / "copy")
    argv = [copy, str(tmp_path / "links.txt.gz"), "--info", str(tmp_path / "info.txt")]
    code, _, err = run(importer.main, argv, capsys)
    assert code == 0, err
    for _ in range(2):  # and importing it again changes nothing
        _, info2, _ = run(dump.main, ["info", copy], capsys)
        assert run(dump.main, ["links", copy], capsys)[1] == links_text
        a = [l.split(" ") for l in info.splitlines()]
        b = [l.split(" ") for l in info2.splitlines()]
        importance, key = a[0].index("importance"), a[0].index("key")
        # Every column but the AOPIC importance and the cash policy's key
        # (cash is not copied) is identical.
        assert [r[:importance] + r[importance + 1 : key] for r in a] == [
            r[:importance] + r[importance + 1 : key] for r in b
        ]
        assert run(importer.main, argv, capsys)[0] == 0
    assert run(check.main, [copy], capsys)[0] == 0
    with PageDB(db_path, readonly=True) as old, PageDB(copy, readonly=True) as new:
        n = old.n_pages
        assert np.array_equal(old.vertices.state[:n] == CRAWLED, new.vertices.state[:n] == CRAWLED)
        assert np.array_equal(old.vertices.n_out[:n], new.vertices.n_out[:n])
        assert old.host_names == new.host_names

    # Content scores come along: personalised PageRank teleports by them.
    rows = info.splitlines()
    head = rows[0].split(" ")
    url_col, score_col = head.index("url"), head.index("score")
    scored = []
    for k in range(1, len(rows)):
        r = rows[k].split(" ")
        r[score_col] = "1.0" if "admissions" in r[url_col] else "nan"
        scored.append(r[score_col] == "1.0")
        rows[k] = " ".join(r)
    assert 0 < sum(scored) < len(scored) / 2
    (tmp_path / "scored.txt").write_text("\n".join(rows) + "\n")
    pers = str(tmp_path / "pers")
    argv = [pers, str(tmp_path / "links.txt.gz"), "--info", str(tmp_path / "scored.txt")]
    code, _, err = run(importer.main, argv, capsys)
    assert code == 0, err
    code, out, _ = run(rank.main, [pers, "--algorithm", "pagerank", "--personalized"], capsys)
    assert code == 0 and "pagerank personalized: " in out and "hits" not in out
    _, info3, _ = run(dump.main, ["info", pers], capsys)
    pr = info_column(info3, "pagerank")
    a = link_matrix(links_text, len(pr))
    ref = reference_pagerank(a, np.array(scored, float))
    assert np.abs(pr - ref).sum() < 1e-6
    assert np.abs(ref - reference_pagerank(a)).sum() > 0.1  # it is not plain PageRank
    assert np.isnan(info_column(info3, "authority")).all()  # HITS not run


# -- breaking a database with raw LMDB writes ------------------------------------

def raw_env(db_path):
    env = lmdb.open(db_path, max_dbs=16)
    return env, {n: env.open_db(n) for n in (b"meta", b"vlog", b"urls", b"edges", b"vertices", b"pages")}


def append_records(db_path, change):
    """Write, as a crawl would, pages whose records ``change(records)``
    edited: their hot fields as a record-log entry, their cold fields
    over their stored records."""
    with PageDB(db_path, readonly=True) as db:
        idx = np.arange(db.n_pages)
        recs = db.vertices.records(idx).copy()
    idx = change(recs)
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
        seq = meta.get("vlog_seq", 0)
        k = len(idx)
        pad = b"\0" * ((-4 * k) % 8)
        hot, cold = np.empty(k, HOT_RECORD), np.empty(k, COLD_RECORD)
        for part in (hot, cold):
            for name in part.dtype.names:
                part[name] = recs[name][idx]
        entry = struct.pack("<8sQ", b"LRvlog01", k) + np.asarray(idx, "<u4").tobytes() + pad + hot.tobytes()
        txn.put(page_key(seq), entry, db=dbs[b"vlog"])
        for i, rec in zip(idx, cold):
            txn.put(page_key(i), rec.tobytes(), db=dbs[b"pages"])
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


def edge_row(src, dsts):
    """Append an edge block holding one row ``src -> dsts`` (it becomes the
    page's current out-links)."""

    def breaker(db_path):
        env, dbs = raw_env(db_path)
        with env.begin(write=True) as txn:
            meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
            n, seq = meta["n_pages"], meta["edge_seq"]
            d = [x(n) if callable(x) else x for x in dsts]
            s = src(n) if callable(src) else src
            block = (struct.pack("<8sIIQ", b"LRedges1", 0, 1, len(d)) + np.array([s], "<u4").tobytes()
                     + np.array([0, len(d)], "<u4").tobytes() + np.array(d, "<u4").tobytes())  # fmt: skip
            txn.put(seq.to_bytes(8, "big"), block, db=dbs[b"edges"])
            meta["edge_seq"] = seq + 1
            txn.put(b"meta", json.dumps(meta).encode(), db=dbs[b"meta"])
        env.close()

    return breaker


def bad_log_magic(db_path):
    env, dbs = raw_env(db_path)
    with env.begin(write=True) as txn:
        txn.put(page_key(10**6), b"garbage-" + bytes(40), db=dbs[b"vlog"])
    env.close()


def edit_meta(change):
    def breaker(db_path):
        env, dbs = raw_env(db_path)
        with env.begin(write=True) as txn:
            meta = json.loads(txn.get(b"meta", db=dbs[b"meta"]))
            change(meta)
            txn.put(b"meta", json.dumps(meta).encode(), db=dbs[b"meta"])
        env.close()

    return breaker


def sparse_host_ids(db_path):
    env = lmdb.open(db_path, max_dbs=16)
    hosts = env.open_db(b"hosts")
    with env.begin(write=True) as txn:
        txn.put(b"gap.test", struct.pack("<I", 10**6), db=hosts)
    env.close()


def host_name_not_utf8(db_path):
    env = lmdb.open(db_path, max_dbs=16)
    hosts = env.open_db(b"hosts")
    with env.begin(write=True) as txn:
        txn.put(b"\xff\xfe.test", struct.pack("<I", txn.stat(hosts)["entries"]), db=hosts)  # the next id: dense
    env.close()


def store_scores(length, bad_value=None):
    from frontera_linkrank.storage.pagedb import write_scores

    def breaker(db_path):
        env = lmdb.open(db_path, max_dbs=16)
        meta_db, scores = env.open_db(b"meta"), env.open_db(b"scores")
        with env.begin(write=True) as txn:
            n = json.loads(txn.get(b"meta", db=meta_db))["n_pages"]
            values = np.full(length(n), 1.0 / n)
            if bad_value is not None:
                values[5] = bad_value
            write_scores(txn, scores, {"pagerank": values}, {"version": 1})
        env.close()

    return breaker


def edit(field, value, where=lambda r: 3):
    """A record-log breaker setting ``field`` of one page (chosen by
    ``where(records)``) to ``value(records, i)``."""

    def change(recs):
        i = int(where(recs))
        recs[field][i] = value(recs, i)
        return [i]

    return lambda p: append_records(p, change)


def move_cash_negative(recs):
    # conserved in total, but one page below zero
    recs["cash"][4] += recs["cash"][3] + 0.01
    recs["cash"][3] = -0.01
    return [3, 4]


def first_crawled(recs):
    return np.flatnonzero(recs["state"] == CRAWLED)[0]


def first_seed(recs):
    return np.flatnonzero(recs["flags"] & F_SEED)[0]


# Every failure page_db_check reports, each caused by a raw LMDB write:
# expected message -> (breaker, check URLs too)
BREAKAGES = {
    # cash books
    "cash not conserved": (lambda p: append_records(p, add_cash), False),
    "pages with negative cash": (lambda p: append_records(p, move_cash_negative), False),
    "owed negative cash": (edit("stamp", lambda r, i: r["stamp"][i] + 1.0), False),
    "pages with negative history": (edit("history", lambda r, i: -1.0), False),
    "the pages' history sums to": (edit("history", lambda r, i: r["history"][i] + 0.25), False),
    # page records and the dense index
    "duplicate fingerprints": (lambda p: append_records(p, dup_fingerprint), False),
    "URLs stored for": (drop_url, False),
    "pages with an unknown state": (edit("state", lambda r, i: 7), False),
    "pages point to missing hosts": (edit("host", lambda r, i: 10**6), False),
    "pages point to missing parents": (edit("parent", lambda r, i: len(r) + 10), False),
    "seed pages with a depth other than 0": (edit("depth", lambda r, i: 2, first_seed), False),
    "pages whose fingerprint is not their URL's": (edit("fp", lambda r, i: b"\x01" * 20), True),
    "pages whose host is not their URL's": (
        edit("host", lambda r, i: (r["host"][i] + 1) % (r["host"].max() + 1)), True),
    "crawled pages with no crawl counted": (edit("n_crawls", lambda r, i: 0, first_crawled), False),
    "crawled pages with inconsistent crawl times": (
        edit("first_crawl", lambda r, i: r["last_crawl"][i] + 100, first_crawled), False),
    # links
    "stored out-degree differs": (lambda p: append_records(p, wrong_degree), False),
    "links to missing pages": (edge_row(1, [2, lambda n: n + 5]), False),
    "links from 1 missing pages": (edge_row(lambda n: n + 5, [1]), False),
    "self-links stored": (edge_row(1, [1, 2]), False),
    "duplicate links stored": (edge_row(1, [2, 2]), False),
    # leases
    "future lease time": (lambda p: append_records(p, future_lease), False),
    # stored rankings
    "non-finite values": (store_scores(lambda n: n, np.nan), False),
    "the database has": (store_scores(lambda n: n + 3), False),
    # structures that cannot be read
    "page record log entry is corrupt": (bad_log_magic, False),
    "page records missing": (edit_meta(lambda m: m.update(n_pages=m["n_pages"] + 1)), False),
    "host ids are not dense": (sparse_host_ids, False),
    "a host name is not UTF-8": (host_name_not_utf8, False),
}


@pytest.mark.parametrize("what", list(BREAKAGES))
def test_check_detects_a_broken_database(crawled, tmp_path, capsys, what):
    breaker, urls_too = BREAKAGES[what]
    db_path = copy_db(crawled[0], tmp_path / "db")
    argv = [db_path] if urls_too else [db_path, "--no-urls"]
    assert run(check.main, argv, capsys)[0] == 0
    breaker(db_path)
    code, out, _ = run(check.main, argv, capsys)
    assert code == 1, out
    assert any(what in l for l in out.splitlines() if l.startswith("FAIL")), out


def tool_run(tool, *args):
    r = subprocess.run([os.path.join(BIN, tool), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, (tool, r.stderr[-2000:])
    return r


def test_tools_on_a_database_while_a_crawl_writes(tmp_path):
    """Every tool, as installed, on a page database that a crawl process
    (LinkRankBackend, fsync on) keeps committing to: the read-only tools see
    one consistent commit each; page_db_rank and page_db_import need the
    writer lock, refuse clearly while the crawl runs, and work after it."""
    child = os.path.join(os.path.dirname(__file__), "crash_child.py")
    db_path, progress = tmp_path / "db", tmp_path / "progress"
    edges = tmp_path / "more.tsv"
    edges.write_text("http://h0.test/0\thttp://elsewhere.test/\n")
    proc = subprocess.Popen([sys.executable, child, str(db_path), str(progress), str(10**6)])
    try:
        deadline = time.time() + 60
        while not (progress.exists() and progress.read_text().count("\n") >= 3):
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)
        pages = [json.loads(tool_run("page_db_stats", db_path, "--json").stdout)["pages"]]
        # The read-only tools, all at once (each sees the last commit when it opens).
        runs = {
            "check": ("page_db_check", db_path, "--no-urls"),
            "info": ("page_db_dump", "info", db_path),
            "links": ("page_db_dump", "links", db_path),
            "find": ("page_db_find", db_path, r"h1\.test/1$"),
            "page_links": ("page_db_links", db_path, "http://h0.test/0"),
            "path": ("page_db_path", db_path, "http://h3.test/14"),  # found on page 2, found on the seed
            "export": ("page_db_export", db_path, tmp_path / "live.csv"),
        }
        procs = {k: subprocess.Popen([os.path.join(BIN, v[0]), *map(str, v[1:])], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for k, v in runs.items()}  # fmt: skip
        r = {}
        for k, p in procs.items():
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and "Traceback" not in err, (k, out[-500:], err[-2000:])
            r[k] = out
        assert r["check"].startswith(("OK", "note")), r["check"]
        info_pages = len(r["info"].splitlines()) - 1
        assert info_pages >= pages[0]  # a snapshot at least as new as the one stats saw
        pairs = [tuple(map(int, l.split())) for l in r["links"].splitlines()]
        assert pairs and all(a != b and max(a, b) < 10**6 for a, b in pairs)
        assert r["find"].split()[1] == "http://h1.test/1"
        out = r["page_links"].splitlines()
        assert out[0].startswith("# back links")
        fwd = out[[k for k, l in enumerate(out) if l.startswith("# forward links")][0] + 1 :]
        assert {l.split(" ")[1] for l in fwd} == {f"http://h{q % 11}.test/{q}" for q in range(1, 6)}
        assert [l.split(" ")[2] for l in r["path"].splitlines()] == ["http://h3.test/14", "http://h2.test/2", "http://h0.test/0"]
        assert len(list(csv.DictReader(open(tmp_path / "live.csv")))) >= pages[0]
        # The two tools that write refuse, naming the crawl's process.
        for argv in (("page_db_rank", db_path), ("page_db_import", db_path, edges)):
            r = tool_run(*argv)
            assert r.returncode == 2, (argv, r.stdout, r.stderr)
            assert f"another process is writing to this page database (pid {proc.pid})" in r.stderr
            assert "stop" in r.stderr.split("(pid")[1]
        for _ in range(2):
            time.sleep(0.3)
            pages.append(json.loads(tool_run("page_db_stats", db_path, "--json").stdout)["pages"])
        assert proc.poll() is None, "the crawl should still be running"
        assert pages == sorted(pages) and pages[-1] > pages[0]  # the tools saw it grow
    finally:
        proc.kill()
        proc.wait()
    # After the crawl (killed: its leases are offered again on the next run).
    r = tool_run("page_db_rank", db_path)
    assert r.returncode == 0 and "stored pagerank, authority, hub" in r.stdout, r.stderr
    r = tool_run("page_db_dump", "info", db_path, "--sort", "pagerank", "--top", "3")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split(" ")[10] != "nan"
    r = tool_run("page_db_import", db_path, edges)
    assert r.returncode == 0, r.stderr
    r = tool_run("page_db_links", db_path, "http://h0.test/0")
    assert r.stdout.splitlines()[-1].endswith("http://elsewhere.test/")  # the seed's links, replaced
    r = tool_run("page_db_check", db_path)
    assert r.returncode == 0, r.stdout


# -- frontera-linkrank NAME is the page_db_* script -------------------------------


def script(alias):
    """The installed console script ``alias``'s function."""
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name=alias)
    return entry.load()


def scrub(text, name):
    """Output with what may differ between two runs made the same: the
    program name (``frontera-linkrank NAME`` -> its alias) and timings."""
    text = text.replace(f"frontera-linkrank {name}", BY_NAME[name].alias)
    text = re.sub(r"\b\d+\.\d+ s\b", "T s", text)
    return re.sub(r"\([\d,]+ links/s\)", "(R links/s)", text)


def both_ways(name, argv, capsys, before=None):
    """``frontera-linkrank NAME ARGV`` and ``page_db_NAME ARGV`` (in this
    process, through the installed script's function): their exit status,
    stdout and stderr, scrubbed. ``before`` runs before each (resets files)."""
    results = []
    for call in (script(BY_NAME[name].alias), lambda a: frontera_linkrank([name, *a])):
        if before:
            before()
        code, out, err = run(call, argv, capsys)
        results.append((code, scrub(out, name), scrub(err, name)))
    return results


def test_every_subcommand_is_its_page_db_script(crawled, tmp_path, capsys):
    """Same arguments, output and exit status both ways, on a crawled
    database (read-only tools), on copies of it (rank) and into a fresh
    directory (import); errors too."""
    db_path = crawled[0]
    missing = str(tmp_path / "missing")
    work = tmp_path / "work"

    def fresh_copy():
        shutil.rmtree(work, ignore_errors=True)
        copy_db(db_path, work)

    def no_db():
        shutil.rmtree(work, ignore_errors=True)

    edges = tmp_path / "edges.tsv"
    edges.write_text("http://a.test/\thttp://b.test/\nhttp://b.test/\tmailto:x@y\nnot two fields\n")
    cases = [
        ("seeds", [db_path, "-k", "3", "-o", "-"], None),
        ("seeds", [missing, "-k", "3", "-o", "-"], None),
        ("dump", ["info", db_path, "--sort", "importance", "--top", "40"], None),
        ("dump", ["links", db_path], None),
        ("dump", ["info", missing], None),
        ("find", [db_path, r"hollins\.edu/[a-c]"], None),
        ("find", [db_path, "("], None),
        ("links", [db_path, "http://www.hollins.edu/"], None),
        ("links", [db_path, "http://nowhere.test/"], None),
        ("path", [db_path, "http://www.hollins.edu/"], None),
        ("stats", [db_path], None),
        ("stats", [db_path, "--json"], None),
        ("check", [db_path, "--no-urls"], None),
        ("check", [missing], None),
        ("export", [db_path, str(tmp_path / "pages.csv")], None),
        ("export", [db_path, str(tmp_path / "nodir" / "pages.csv")], None),
        ("import", [str(work), str(edges)], no_db),
        ("import", [str(work), str(edges), "--skip-malformed", "--crawl-time", "1000"], no_db),
        ("rank", [str(work), "--algorithm", "pagerank"], fresh_copy),
        ("rank", [missing], None),
    ]
    seen = set()
    for name, argv, before in cases:
        seen.add(name)
        script_run, sub_run = both_ways(name, argv, capsys, before)
        assert script_run == sub_run, (name, argv)
        if name == "export" and script_run[0] == 0:
            written = (tmp_path / "pages.csv").read_bytes()
            frontera_linkrank([name, *argv])
            assert (tmp_path / "pages.csv").read_bytes() == written
            capsys.readouterr()
    assert seen == {c.name for c in BY_NAME.values() if c.alias}
    # Each case ran: outputs and failures as each tool documents them.
    assert both_ways("import", [str(work), str(edges)], capsys, no_db)[0][0] == 1  # stopped at the bad line
    code, out, err = both_ways("check", [missing], capsys)[1]
    assert (code, out) == (2, "") and err == f"page_db_check: error: {missing}: no such directory\n"
    assert frontera_linkrank(["check", missing]) == 2
    assert capsys.readouterr().err == f"frontera-linkrank check: error: {missing}: no such directory\n"


def test_a_subcommand_refuses_bad_arguments_like_its_script(crawled, capsys):
    """argparse's usage errors: exit status 2 both ways, the usage naming the command typed."""
    for call, prog in ((lambda a: dump.main(a), "page_db_dump"), (lambda a: frontera_linkrank(["dump", *a]), None)):
        with pytest.raises(SystemExit) as e:
            call(["info", crawled[0], "--sort", "nope"])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"usage: {prog or 'frontera-linkrank dump'} info ") and "invalid choice: 'nope'" in err
