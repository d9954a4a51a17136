"""Units of the shared frontier without a broker: the message codec, the
partition assignment, and the rule that applies each report once."""

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontera_linkrank.core.codec import OutgoingRequest
from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.service import codec
from frontera_linkrank.service.assignment import partition_of, plan
from frontera_linkrank.service.leases import LeaseBook
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.storage.urls import fingerprint


def fp(url):
    return fingerprint(url).hex().encode()


# -- codec -----------------------------------------------------------------------------------
def test_feed_entry_round_trip_with_parts():
    req = OutgoingRequest("http://a.test/x", method=b"POST", headers={b"X-A": [b"1"]}, body=b"q=1",
                          meta={b"fingerprint": fp("http://a.test/x"), b"depth": 3,
                                b"scrapy_callback": "parse_item", b"scrapy_meta": {"k": [1, "two"]}})
    e = codec.read_feed_entry(codec.feed_entry(42, req))
    assert (e.lease, e.fp, e.url, e.depth) == (42, fp("http://a.test/x"), "http://a.test/x", 3)
    assert e.parts["m"] == b"POST" and e.parts["b"] == b"q=1" and e.parts["h"] == {b"X-A": [b"1"]}
    assert e.parts["x"] == {b"scrapy_callback": "parse_item", b"scrapy_meta": {"k": [1, "two"]}}


def test_plain_get_has_no_parts_and_link_round_trip():
    req = OutgoingRequest("http://a.test/", meta={b"fingerprint": fp("http://a.test/"), b"scrapy_meta": {}})
    assert codec.request_parts(req) is None
    back = codec.to_request(codec.link(req, fp(req.url)))
    assert back.url == req.url and back.meta[b"fingerprint"] == fp(req.url) and back.method == b"GET"


def test_objects_in_meta_are_dropped_not_pickled():
    req = OutgoingRequest("http://a.test/", meta={b"scrapy_meta": {"ok": 1, "obj": object()}})
    parts = codec.request_parts(req)
    assert parts["x"] == {b"scrapy_meta": {"ok": 1}}


@pytest.mark.parametrize("raw, cause", [
    (b"\xc1", "not a msgpack message"),
    (msgpack.packb([1, 2]), "not a map"),
    (msgpack.packb({"v": 99, "t": "r", "i": []}), "schema version 99"),
    (msgpack.packb({"v": codec.SCHEMA, "t": "x", "i": []}), "unknown type"),
    # a pickle is just bytes that are not a message: refused, never loaded
    (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.", "not a msgpack message"),
])  # fmt: skip
def test_bad_log_messages_are_refused_with_their_cause(raw, cause):
    with pytest.raises(codec.CodecError, match=cause):
        codec.read_log(raw)


def test_bad_report_items_are_refused():
    good = {"k": "f", "l": 1, "f": fp("http://a.test/"), "u": "http://a.test/", "s": 200}
    assert codec.check_item(good) is good
    for bad in ({**good, "k": "z"}, {**good, "l": "1"}, {**good, "f": b"short"}, {**good, "s": None}, [1]):
        with pytest.raises(codec.CodecError):
            codec.check_item(bad)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=20), st.integers(0, 2**40)), max_size=5),
       st.dictionaries(st.text(max_size=8), st.one_of(st.integers(-5, 5), st.text(max_size=5), st.binary(max_size=5)),
                       max_size=4))
def test_report_round_trip(links, meta):
    items = [{"k": "f", "l": n, "f": fp(f"http://a.test/{n}"), "u": f"http://a.test/{u}", "s": 200,
              "ln": [[f"http://b.test/{u}", fp("http://b.test/"), {"x": {b"scrapy_meta": meta}}]]} for u, n in links]
    msg = codec.read_log(codec.report("s1", items))
    assert msg["s"] == "s1" and msg["i"] == items


# -- assignment -----------------------------------------------------------------------------
def test_partition_of_host_is_stable():
    assert partition_of("h1.test", 64) == partition_of("h1.test", 64)
    assert len({partition_of(f"h{i}.test", 8) for i in range(100)}) == 8


spider_names = st.sampled_from(["a", "b", "c", "d", "e"])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.lists(st.one_of(st.none(), spider_names), max_size=40),
       st.dictionaries(st.integers(0, 39), spider_names, max_size=10), st.lists(spider_names, max_size=5, unique=True))
def test_plan_gives_each_partition_one_live_owner(P, owners, moving, live):
    owners = (owners + [None] * P)[:P]
    moving = {p: t for p, t in moving.items() if p < P}
    new, new_moving = plan(owners, moving, live)
    assert len(new) == P
    if not live:
        assert new_moving == {} and all(o is None or o in live for o in new)
        return
    assert all(o in live for o in new)  # every partition: exactly one owner, a live one
    assert all(t in live and t != new[p] for p, t in new_moving.items())
    final = [new_moving.get(p, new[p]) for p in range(P)]
    counts = [final.count(s) for s in live]
    assert max(counts) - min(counts) <= 1  # balanced once the moves are done
    # sticky: a live owner keeps its partitions while it is within its share
    for p, o in enumerate(owners):
        if o in live and new[p] != o:
            pytest.fail(f"partition {p} taken from live {o} without a move")


def test_plan_settles():
    owners, moving = plan([None] * 16, {}, ["a"])
    owners, moving = plan(owners, moving, ["a", "b", "c"])
    for p, t in moving.items():  # the frontier completes each move once the old owner is drained
        owners[p] = t
    again, moving2 = plan(owners, {}, ["a", "b", "c"])
    assert again == owners and moving2 == {}


class Fetched:
    """A fetched page as the core reads it (status 200, no body)."""

    def __init__(self, url):
        self.url, self.status_code, self.headers, self.body = url, 200, {}, b""
        self.request = OutgoingRequest(url)
        self.meta = self.request.meta


# -- applied once ---------------------------------------------------------------------------
def open_core(path):
    return FrontierCore(LinkRankSettings({"LINKRANK_PATH": str(path), "LINKRANK_SYNC": False}), keep_leases=True)


def test_a_report_is_applied_once_by_lease_id_and_the_offset_commits_with_it(tmp_path):
    core = open_core(tmp_path / "db")
    book = LeaseBook(core.db, 4)
    issued = []
    core.on_leased = lambda pages: issued.extend(book.issue(pages, [0] * len(pages)))
    core.add_seeds([OutgoingRequest("http://a.test/"), OutgoingRequest("http://b.test/")])
    core.next_requests(10)
    a, b = issued
    assert (a.lease, b.lease) == (1, 2) and book.pub_seq == 2
    assert not book.close(a.page, lease=99)  # another lease id: not this fetch
    assert book.close(a.page, a.lease)
    core.page_fetched(Fetched("http://a.test/"))  # applied
    assert not book.close(a.page, a.lease)  # the same report again: dropped
    book.log_offset = "7-0"
    core.next_requests(0)  # commit: the offset goes with it
    core.close()
    # Reopened (a restart): lease b is still open, with its record; a is not.
    core = open_core(tmp_path / "db")
    book = LeaseBook(core.db, 4)
    assert book.log_offset == "7-0" and (book.lease_seq, book.pub_seq) == (2, 2)
    assert set(book.open) == {b.page} and book.open[b.page] == b
    assert core.stats().get("leases_recovered", 0) == 0 and core.stats()["leased"] == 1  # kept, not re-offered
    assert [x.page for x in book.unpublished({0: 1})] == [b.page]
    assert book.unpublished({0: 2}) == []
    core.close()


def test_lease_records_commit_with_the_leases(tmp_path):
    """A crash after the lease transaction: every leased page has its record."""
    core = open_core(tmp_path / "db")
    book = LeaseBook(core.db, 4)
    core.on_leased = lambda pages: book.issue(pages, [1] * len(pages))
    core.add_seeds([OutgoingRequest(f"http://a.test/{i}") for i in range(5)])
    core.next_requests(5)
    core.db.close()  # no further commit: as if the process died here
    core = open_core(tmp_path / "db")
    book = LeaseBook(core.db, 4)
    assert len(book.open) == 5 and book.unrecorded == []
    with pytest.raises(ValueError, match="partition count"):
        LeaseBook(core.db, 8)
    core.close()


# -- signatures (LINKRANK_SECRET) --------------------------------------------------------------
def test_signed_parts_survive_the_frontier_and_tampering_is_seen(tmp_path):
    from frontera.core.models import Request as FRequest

    key = b"k3y"
    url = "http://a.test/form"
    spider_req = FRequest(url=url, method=b"POST", headers={b"X-Token": [b"t"]}, body=b"q=1",
                          meta={b"scrapy_callback": "parse_form", b"scrapy_meta": {"page": 2, "tags": ("a", "b")},
                                b"score": 0.5})
    wire = codec.link(spider_req, fp(url), key)
    # Through the frontier: decoded, stored in the page database, handed out, encoded.
    core = open_core(tmp_path / "db")
    core.add_seeds([codec.to_request(wire)])
    (out,) = core.next_requests(1)
    entry = codec.read_feed_entry(codec.feed_entry(1, out))
    core.close()
    assert entry.parts["x"][b"scrapy_callback"] == "parse_form"
    assert codec.verified(url, entry.parts, key)
    assert not codec.verified(url, entry.parts, b"other key")
    assert not codec.verified("http://a.test/elsewhere", entry.parts, key)
    forged = {**entry.parts, "x": {**entry.parts["x"], b"scrapy_callback": "delete_everything"}}
    assert not codec.verified(url, forged, key)
    unsigned = codec.link(spider_req, fp(url))[2]
    assert not codec.verified(url, unsigned, key)
    assert codec.verified(url, None, key)  # a plain GET has no parts to forge
