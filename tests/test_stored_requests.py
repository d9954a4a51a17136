"""Stored requests through the Frontera API: what comes back, what cannot
be stored, and crafted page databases (nothing read from the database is
ever executed)."""

import gc
import json
import logging
import os
import pickle
import weakref

import lmdb
import pytest
from frontera.core.models import Request, Response

from frontera_linkrank.storage.errors import PageDBError
from frontera_linkrank.storage.keys import page_key
from frontera_linkrank.storage.pagedb import PageDB
from util import page_index


class Payload:
    """Unpickling this runs ``touch <path>``: a stand-in for any command."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def own(meta):
    """The meta keys of a handed-out request that are not the frontier's."""
    return {k: v for k, v in meta.items() if k not in (b"fingerprint", b"depth", b"scrapy_meta")}


def crawl_seed(m):
    (r,) = m.get_next_requests(1)
    m.page_crawled(Response(r.url, request=r))
    return r


# -- what comes back ---------------------------------------------------------------------------
def test_a_single_custom_meta_key_comes_back(make_manager):
    m = make_manager()
    m.add_seeds([Request("http://seed.test/", meta={b"x": 1})])
    r = crawl_seed(m)
    assert own(r.meta) == {b"x": 1}
    m.links_extracted(r, [Request("http://a.test/", meta={b"y": "z"}), Request("http://b.test/", meta={b"score": 7.0})])
    got = {x.url: own(x.meta) for x in m.get_next_requests(10)}
    assert got == {"http://a.test/": {b"y": "z"}, "http://b.test/": {}}
    # a link's own score alone is its hint
    db = m.backend.db
    assert db.vertices.hint[page_index(db, "http://b.test/")] == 7.0


def test_a_plain_link_is_let_go_until_the_batch_is_applied(make_manager):
    """Until the next batch the frontier keeps a plain link as its key and
    URL, not the crawler's request object (a batch's worth of them would
    outlive the garbage collector's young generations); a link with parts
    of its own is kept whole, and both come back as they were sent."""
    m = make_manager()
    m.add_seeds([Request("http://seed.test/")])
    r = crawl_seed(m)
    plain = Request("http://a.test/")
    post = Request("http://b.test/", method=b"POST", body=b"q=1", meta={b"score": 3.0})
    refs = weakref.ref(plain), weakref.ref(post)
    m.links_extracted(r, [plain, post])
    del plain, post
    gc.collect()
    assert refs[0]() is None and refs[1]() is not None
    got = {x.url: (x.method, x.body or b"") for x in m.get_next_requests(10)}
    assert got == {"http://a.test/": (b"GET", b""), "http://b.test/": (b"POST", b"q=1")}
    db = m.backend.db
    assert db.vertices.hint[page_index(db, "http://b.test/")] == 3.0


VALUES = {
    b"bytes_key": b"\x00\xff",
    "str_key": "é",
    b"tuple": (1, ("a", b"b"), None),
    b"set": {1, 2, 3},
    b"frozenset": frozenset({"a"}),
    b"nested": {b"k": [1.5, True, {"s": {(1, 2): b"v"}}]},
    b"big": 2**63,
    b"scrapy_meta": {"fingerprint": "str, not bytes", b"fingerprint": b"bytes"},
}


def test_parts_come_back_exactly_after_a_restart(make_manager, tmp_path):
    m = make_manager()
    m.add_seeds([Request("http://seed.test/")])
    r = crawl_seed(m)
    post = Request("http://post.test/form", method=b"POST", headers={b"X-A": [b"1"]}, cookies={"c": "v"},
                   body=b"q=1", meta=dict(VALUES))
    m.links_extracted(r, [post])
    m.get_next_requests(0)  # committed
    m.stop()
    m2 = make_manager()
    (got,) = m2.get_next_requests(10)
    assert (got.method, got.headers, got.cookies, got.body) == (b"POST", {b"X-A": [b"1"]}, {"c": "v"}, b"q=1")
    back = own(got.meta)
    assert back == own(VALUES) and got.meta[b"scrapy_meta"] == VALUES[b"scrapy_meta"]
    for key, value in VALUES.items():  # types too: tuples stay tuples, bytes and str keys stay apart
        assert type(got.meta[key]) is type(value)
    assert type(back[b"tuple"][1]) is tuple and set(got.meta[b"scrapy_meta"]) == {"fingerprint", b"fingerprint"}


# -- what cannot be stored ------------------------------------------------------------------------
def test_unstorable_parts_are_kept_in_memory_and_lose_nothing_else(make_manager, caplog):
    m = make_manager()
    m.add_seeds([Request("http://seed.test/")])
    r = crawl_seed(m)
    f = lambda: 1  # noqa: E731
    links = [Request("http://a.test/", meta={b"f": f, b"keep": 1}), Request("http://b.test/", meta={b"z": 2}),
             Request("http://c.test/", meta={b"g": object(), b"inner": {"ok": 1, "bad": f}})]
    with caplog.at_level(logging.WARNING, logger="frontera_linkrank"):
        m.links_extracted(r, links)
        got = {x.url: own(x.meta) for x in m.get_next_requests(10)}
    # this run: every request as it came in, the others of the batch untouched
    assert got["http://a.test/"] == {b"f": f, b"keep": 1}
    assert got["http://b.test/"] == {b"z": 2}
    assert got["http://c.test/"][b"inner"]["bad"] is f
    warnings = [rec.getMessage() for rec in caplog.records if "cannot be stored" in rec.getMessage()]
    assert len(warnings) == 2 and "meta[b'f']" in warnings[0] and "meta[b'inner']['bad']" in warnings[1]
    assert m.backend.stats()["requests_unstored"] == 2
    # after a restart: what could be stored, and the names of what could not
    m.stop()
    m2 = make_manager()
    got = {x.url: own(x.meta) for x in m2.get_next_requests(10)}
    assert got["http://a.test/"] == {b"keep": 1, b"linkrank_unstored": ["meta[b'f']"]}
    assert got["http://b.test/"] == {b"z": 2}
    assert got["http://c.test/"] == {b"inner": {"ok": 1}, b"linkrank_unstored": ["meta[b'g']", "meta[b'inner']['bad']"]}


# -- crafted databases -----------------------------------------------------------------------------
def with_stored_request(make_manager, path, urls=("http://a.test/", "http://b.test/")):
    """A page database whose pages ``urls`` have stored request parts."""
    m = make_manager(LINKRANK_PATH=str(path))
    m.add_seeds([Request(u, meta={b"x": k, b"y": "two keys"}) for k, u in enumerate(urls)])
    m.get_next_requests(0)
    m.stop()


def rewrite(path, url_index, value, drop_section=False):
    """Write ``value`` (raw bytes) as the stored request of page
    ``url_index``; ``drop_section``: remove the request format from the
    metadata, as in a database of an earlier version."""
    env = lmdb.open(str(path), max_dbs=20)
    with env.begin(write=True) as txn:
        txn.put(page_key(url_index), value, db=env.open_db(b"requests", txn=txn))
        if drop_section:
            meta_db = env.open_db(b"meta", txn=txn)
            doc = json.loads(txn.get(b"meta", db=meta_db))
            doc.pop("requests", None)  # (absent before request format 1)
            txn.put(b"meta", json.dumps(doc).encode(), db=meta_db)
    env.close()


def test_a_database_of_pickled_requests_is_refused_not_unpickled(make_manager, tmp_path):
    path, marker = tmp_path / "old", tmp_path / "pwned"
    with_stored_request(make_manager, path)
    rewrite(path, 0, pickle.dumps(Payload(marker)), drop_section=True)
    with pytest.raises(PageDBError, match=r"pickle format.*not read.*run code.*new page database"):
        make_manager(LINKRANK_PATH=str(path))
    assert not marker.exists()
    # read-only tools still open it; reading its requests is refused the same way
    with PageDB(path, readonly=True) as db, db.snapshot() as txn:
        assert db.n_pages == 2
        with pytest.raises(PageDBError, match="pickle format"):
            db.request_extras([0, 1], txn)
    assert not marker.exists()


def test_an_old_database_without_stored_requests_is_adopted(make_manager, tmp_path):
    path = tmp_path / "old"
    m = make_manager(LINKRANK_PATH=str(path))
    m.add_seeds([Request("http://a.test/")])
    m.stop()
    env = lmdb.open(str(path), max_dbs=20)
    with env.begin(write=True) as txn:
        meta_db = env.open_db(b"meta", txn=txn)
        doc = json.loads(txn.get(b"meta", db=meta_db))
        doc.pop("requests", None)
        txn.put(b"meta", json.dumps(doc).encode(), db=meta_db)
    env.close()
    m = make_manager(LINKRANK_PATH=str(path))
    assert [r.url for r in m.get_next_requests(10)] == ["http://a.test/"]
    m.stop()
    with PageDB(path, readonly=True) as db:
        assert db.meta_section("requests") == {"format": "msgpack", "version": 1}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("pickle", id="pickle"),
        pytest.param(b"\xc7\x03\x63abc", id="unknown-extension"),
        pytest.param(b"\xd6\xff\x00\x00\x00\x01", id="timestamp"),
        pytest.param(b"\x93\x01\x02\x03", id="three-parts"),
        pytest.param(b"\x91" * 100_000, id="deep"),
        pytest.param(b"\x95", id="truncated"),
    ],
)
def test_a_crafted_stored_request_is_dropped_and_nothing_runs(make_manager, tmp_path, caplog, value):
    path, marker = tmp_path / "db", tmp_path / "pwned"
    with_stored_request(make_manager, path)
    if value == "pickle":
        value = pickle.dumps(Payload(marker))
    rewrite(path, 0, value)
    m = make_manager(LINKRANK_PATH=str(path))
    with caplog.at_level(logging.WARNING, logger="frontera_linkrank"):
        got = m.get_next_requests(10)
    assert [r.url for r in got] == ["http://b.test/"] and own(got[0].meta) == {b"x": 1, b"y": "two keys"}
    assert not marker.exists()
    assert any("stored request unreadable" in rec.getMessage() for rec in caplog.records)
    db = m.backend.db
    i = page_index(db, "http://a.test/")
    with db.snapshot() as txn:
        assert "stored request unreadable" in db.error_message(i, txn)
    assert m.backend.stats()["requests_unreadable"] == 1
    m.page_crawled(Response(got[0].url, request=got[0]))
    assert m.get_next_requests(10) == [] and m.backend.finished()
