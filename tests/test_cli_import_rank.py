"""page_db_import of link lists and page_db_rank: the Hollins round trip
against a scipy reference, idempotence, unordered input in small chunks,
bad lines. (The dump-pair import, ranking a crawled database and both tools
during a crawl are in test_cli.py.)"""

import functools
import gzip
import hashlib
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from w3lib.url import canonicalize_url

from frontera_linkrank.cli import check, dump, import_resolve, importer, rank, stats
from frontera_linkrank.simulation.datasets import data_path
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import RejectedURL, check_url
from reference import reference_pagerank

BIN = os.path.dirname(sys.executable)


def run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@functools.cache
def fp_hex(url):
    """Frontera's page identity: sha1 of the canonical URL (written out here,
    independently of the package)."""
    return hashlib.sha1(canonicalize_url(url).encode("ascii")).hexdigest()


def hollins_pairs():
    """The Hollins links as (source URL, target URL), from the raw files."""
    folder = data_path("hollins")
    urls = {}
    with open(os.path.join(folder, "links.dat"), encoding="utf-8") as f:
        next(f)
        for line in f:
            parts = line.split()
            urls[parts[0]] = parts[1]
    with open(os.path.join(folder, "hollins.dat")) as f:
        next(f)
        return [(urls[a], urls[b]) for a, b in (line.split() for line in f if line.strip())]


def write_tsv(path, pairs):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in pairs)
    return str(path)


def dump_info(db_path, capsys):
    code, out, _ = run(dump.main, ["info", db_path], capsys)
    assert code == 0
    lines = out.splitlines()
    header = lines[0].split(" ")
    return header, [l.split(" ") for l in lines[1:]]


def url_links(db_path):
    """Current links of a page database as a set of (source URL, target URL)."""
    with PageDB(db_path, readonly=True) as db:
        with db.snapshot() as txn:
            s, d = db.edges.current_edges(txn, db.n_pages)
        urls = np.array(db.urls(range(db.n_pages)), dtype=object)
        return set(zip(urls[s].tolist(), urls[d].tolist()))


@pytest.fixture(scope="module")
def pairs():
    return hollins_pairs()


def test_hollins_round_trip_agrees_with_scipy(pairs, tmp_path, capsys):
    edges = write_tsv(tmp_path / "hollins.tsv.gz", pairs)
    db_path = str(tmp_path / "db")
    code, _, err = run(importer.main, [db_path, edges], capsys)
    assert code == 0, err
    assert f"{len(pairs):,} links read" in err
    code, out, err = run(rank.main, [db_path], capsys)
    assert code == 0, err
    assert "pagerank: " in out and "stopped by tolerance" in out and "hits: " in out

    # The reference, on pages identified by fingerprint, distinct links, no self-links.
    ids = {}
    for a, b in pairs:
        for u in (a, b):
            ids.setdefault(fp_hex(u), len(ids))
    n = len(ids)
    s = np.array([ids[fp_hex(a)] for a, _ in pairs])
    t = np.array([ids[fp_hex(b)] for _, b in pairs])
    keep = s != t
    a = sp.csr_matrix((np.ones(keep.sum()), (s[keep], t[keep])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1.0
    ref = reference_pagerank(a)

    header, rows = dump_info(db_path, capsys)
    col = header.index("pagerank")
    assert len(rows) == n
    got = np.empty(n)
    for r in rows:
        got[ids[r[0]]] = float(r[col])
    assert np.abs(got - ref).sum() < 1e-6
    assert all(r[header.index("authority")] != "nan" for r in rows)
    code, out, _ = run(stats.main, [db_path, "--json"], capsys)
    assert f'"links": {a.nnz}' in out
    assert run(check.main, [db_path], capsys)[0] == 0


def test_import_is_idempotent(pairs, tmp_path, capsys):
    pairs = sorted(pairs)  # grouped by source (hollins.dat is sorted by target)
    cut = next(k for k in range(5000, len(pairs)) if pairs[k][0] != pairs[k - 1][0])  # a source boundary
    edges = write_tsv(tmp_path / "hollins.tsv", pairs[:cut])
    db_path = str(tmp_path / "db")
    dumps = []
    for _ in range(2):
        assert run(importer.main, [db_path, edges], capsys)[0] == 0
        dumps.append((run(dump.main, ["info", db_path], capsys)[1], run(dump.main, ["links", db_path], capsys)[1]))
    assert dumps[0] == dumps[1]
    # ... and a fresh database from the same file is the same database.
    other = str(tmp_path / "db2")
    assert run(importer.main, [other, edges], capsys)[0] == 0
    assert (run(dump.main, ["info", other], capsys)[1], run(dump.main, ["links", other], capsys)[1]) == dumps[0]
    # A second list adds its pages and links to the database ...
    more = write_tsv(tmp_path / "more.tsv", pairs[cut:])
    assert run(importer.main, [db_path, more], capsys)[0] == 0
    assert url_links(db_path) == {(a, b) for a, b in pairs if fp_hex(a) != fp_hex(b)}
    # ... and a page listed again gets the new list's links, like a recrawl.
    src = pairs[0][0]
    old = {b for a, b in pairs if a == src}
    assert len(old) > 1
    again = write_tsv(tmp_path / "again.tsv", [(src, "http://new.test/")])
    assert run(importer.main, [db_path, again], capsys)[0] == 0
    links = url_links(db_path)
    assert {b for a, b in links if a == src} == {"http://new.test/"}
    assert len(links) == len({(a, b) for a, b in pairs if fp_hex(a) != fp_hex(b)}) - len(old) + 1


def test_unordered_input_in_small_chunks(pairs, tmp_path, capsys):
    """A page's links spread over many chunks still end up as one row with
    all of them (the loader merges rows written earlier in the import)."""
    grouped = write_tsv(tmp_path / "grouped.tsv", sorted(pairs))
    shuffled = list(pairs)
    random.Random(3).shuffle(shuffled)
    loose = write_tsv(tmp_path / "shuffled.tsv", shuffled)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert run(importer.main, [a, grouped], capsys)[0] == 0
    code, _, err = run(importer.main, [b, loose, "--chunk-bytes", "65536"], capsys)
    assert code == 0, err
    assert url_links(a) == url_links(b)
    with PageDB(a, readonly=True) as da, PageDB(b, readonly=True) as db:
        deg_a = dict(zip(da.urls(range(da.n_pages)), da.vertices.n_out[: da.n_pages].tolist()))
        deg_b = dict(zip(db.urls(range(db.n_pages)), db.vertices.n_out[: db.n_pages].tolist()))
    assert deg_a == deg_b
    assert run(check.main, [b], capsys)[0] == 0


def test_bad_lines(tmp_path, capsys):
    lines = [
        b"# a previous crawl's links",  # 1 comment
        b"http://a.test/\thttp://b.test/",  # 2
        b"",  # 3 blank
        b"http://a.test/\tmailto:someone@a.test",  # 4 refused URL: skipped
        b"http://b.test/\thttp://a.test/\r",  # 5 CRLF
        b"http://b.test/\thttp://c.test/" + b"x" * 3000,  # 6 too long: skipped
        b"http://c.test/\xff\thttp://a.test/",  # 7 invalid UTF-8: skipped
        b"http://c.test/\thttp://a.test/",  # 8
    ]
    edges = tmp_path / "links.tsv"
    edges.write_bytes(b"\n".join(lines) + b"\n")
    db_path = str(tmp_path / "db")
    code, _, err = run(importer.main, [db_path, str(edges)], capsys)
    assert code == 0, err
    assert f"{edges}:4: skipped (scheme)" in err
    assert f"{edges}:6: skipped (too_long)" in err
    assert f"{edges}:7: skipped (invalid_utf8)" in err
    assert "skipped 3 lines" in err
    assert url_links(db_path) == {
        ("http://a.test/", "http://b.test/"), ("http://b.test/", "http://a.test/"), ("http://c.test/", "http://a.test/"),
    }  # fmt: skip

    # A line that is not SRC<TAB>DST stops the import with its number ...
    bad = tmp_path / "bad.tsv"
    bad.write_text("http://x.test/\thttp://y.test/\nhttp://x.test/ http://z.test/\nhttp://y.test/\thttp://z.test/\n")
    other = str(tmp_path / "other")
    code, _, err = run(importer.main, [other, str(bad)], capsys)
    assert code == 1
    assert f"{bad}:2: expected SRC_URL<TAB>DST_URL" in err and "--skip-malformed" in err
    assert url_links(other) == {("http://x.test/", "http://y.test/")}  # what came before is kept
    # ... or is skipped and counted on request.
    code, _, err = run(importer.main, [other, str(bad), "--skip-malformed"], capsys)
    assert code == 0 and f"{bad}:2: skipped (malformed line)" in err and "skipped 1 lines" in err
    assert url_links(other) == {("http://x.test/", "http://y.test/"), ("http://y.test/", "http://z.test/")}


def test_wrong_paths_are_clear_errors(tmp_path, capsys):
    edges = write_tsv(tmp_path / "e.tsv", [("http://a.test/", "http://b.test/")])
    (tmp_path / "notadb").mkdir()
    (tmp_path / "notadb" / "x.txt").write_text("x")
    (tmp_path / "afile").write_text("x")
    cases = [
        (importer.main, [str(tmp_path / "db"), str(tmp_path / "missing.tsv")], "no such file"),
        (importer.main, [str(tmp_path / "db"), str(tmp_path)], "is a directory"),
        (importer.main, [str(tmp_path / "notadb"), edges], "not empty and holds no page database"),
        (importer.main, [str(tmp_path / "afile"), edges], "is a file"),
        (importer.main, [str(tmp_path / "db"), edges, "--info", str(tmp_path / "afile")],
         "not a page_db_dump info file"),
        (rank.main, [str(tmp_path / "missing")], "no such directory"),
        (rank.main, [str(tmp_path / "notadb")], "no page database here"),
        (rank.main, [str(tmp_path / "afile")], "not a directory"),
    ]
    for main, argv, message in cases:
        code, out, err = run(main, argv, capsys)
        assert code == 2 and message in err and "Traceback" not in err, (argv, err)


def test_console_script_reads_stdin(pairs, tmp_path):
    db_path = str(tmp_path / "db")
    text = "".join(f"{a}\t{b}\n" for a, b in pairs[:300])
    r = subprocess.run([os.path.join(BIN, "page_db_import"), db_path, "-"], input=text, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "300 links read" in r.stderr
    assert url_links(db_path) == {(a, b) for a, b in pairs[:300] if fp_hex(a) != fp_hex(b)}


@pytest.mark.parametrize("policy", ["all", "unfetched", "fetched"])
def test_import_into_a_crawled_database_keeps_the_cash_books(policy, make_backend, tmp_path, capsys):
    """New pages join the virtual page's target set owed nothing, and pages
    that become crawled are settled first, whatever the target set."""
    from util import crawl_graph

    site = {f"http://s.test/{i}": [f"http://s.test/{(i * 3 + k) % 40}" for k in range(1, 4)] for i in range(40)}
    b = make_backend(OMEGA_POLICY=policy)
    crawl_graph(b, site, ["http://s.test/0"], batch=5, max_pages=15)
    b.frontier_stop()
    db_path = b.db.path
    b.db.close()
    code, out, _ = run(check.main, [db_path], capsys)
    assert code == 0, out
    with PageDB(db_path, readonly=True) as db:
        unfetched = [u for u, c in zip(db.urls(range(db.n_pages)), db.vertices.n_crawls[: db.n_pages]) if c == 0]
        assert db.meta["aopic"]["A"] > 0 and db.meta["aopic"]["policy"] == policy
    pairs = [(unfetched[0], "http://new.test/a"), (unfetched[1], unfetched[0]), ("http://new.test/b", "http://s.test/0"),
             ("http://s.test/0", "http://new.test/c")]  # fmt: skip
    edges = write_tsv(tmp_path / "more.tsv", pairs)
    assert run(importer.main, [db_path, edges], capsys)[0] == 0
    code, out, _ = run(check.main, [db_path], capsys)
    assert code == 0, out
    assert {(a, b) for a, b in url_links(db_path) if a in (unfetched[0], unfetched[1], "http://s.test/0")} == {
        (unfetched[0], "http://new.test/a"), (unfetched[1], unfetched[0]), ("http://s.test/0", "http://new.test/c"),
    }  # fmt: skip


def outcome(fn, *args):
    try:
        return fn(*args)
    except RejectedURL as e:
        return ("refused", e.reason)


def same_as_the_crawl(url, max_length=2083):
    """The importer's (host, fingerprint) of ``url`` is the crawl's: the
    host check_url gives and Frontera's fingerprint (written out here), or
    the same refusal."""
    host = outcome(check_url, url, max_length)
    got = outcome(import_resolve.host_and_fingerprint, url, max_length)
    if isinstance(host, tuple):
        assert got == host, url[:200]
    else:
        assert got == (host, bytes.fromhex(fp_hex(url))), url[:200]


def test_fast_fingerprint_equals_frontera_fingerprint():
    """The importer's shortcut for URLs already in canonical form gives the
    crawl's host and fingerprint, on URLs generated to sit on both sides of it."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    escape = st.sampled_from(["%20", "%7E", "%7e", "%2F", "%2f", "%25", "%3B", "%3b", "%3F", "%C3%A9", "%e9", "%E9",
                              "%21", "%2E", "%41", "%5B", "%7C", "%22", "%", "%2", "%G1"])  # fmt: skip
    literal = st.text("abXY09-_~!$&'()*+,=:@|", min_size=1, max_size=3)
    segment = st.one_of(
        st.lists(st.one_of(literal, literal, escape), max_size=3).map("".join),
        st.sampled_from([".", "..", ".x", "x.", "x..y"]),
    )
    bad = st.sampled_from(["", "", "", ";p", "?q=1", "#f", "[", ".", " ", "\u00e9", "//"])
    host = st.lists(st.text("abz09-_", min_size=1, max_size=4), min_size=1, max_size=3).map(".".join)
    port = st.sampled_from(["", "", ":80", ":8080", ":080", ":0", ":99999"])
    scheme = st.sampled_from(["http://", "https://", "http://", "HTTP://"])
    cases = {"fast": 0, "slow": 0}

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(scheme, host, port, st.lists(segment, max_size=4), bad, st.booleans())
    def check_one(sch, h, p, segments, tail, upper):
        url = sch + (h.upper() if upper and h.upper() != h else h) + p + "/" + "/".join(segments) + tail
        cases["fast" if import_resolve.CANONICAL.fullmatch(url) else "slow"] += 1
        same_as_the_crawl(url)

    check_one()
    assert cases["fast"] > 25 and cases["slow"] > 25, cases
    # Exhaustively: every escape (both cases) and every printable ASCII
    # character, in a path and as a whole segment.
    pieces = [f"%{c:02X}" for c in range(256)] + [f"%{c:02x}" for c in range(256)] + [chr(c) for c in range(33, 127)]
    for piece in pieces:
        for url in (f"http://a.test/p{piece}q", f"http://a.test/{piece}/q"):
            same_as_the_crawl(url)
    long_host = "http://" + "a" * 3000 + ".test/"
    for url in ("http://a.test:65535/", "http://a.test:65536/", "http://a.test:99999/x", long_host):
        same_as_the_crawl(url)
    same_as_the_crawl("http://a.test/" + "x" * 100, max_length=50)
