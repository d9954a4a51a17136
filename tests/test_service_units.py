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
    (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.", "msgpack message"),
])  # fmt: skip
def test_bad_log_messages_are_refused_with_their_cause(raw, cause):
    with pytest.raises(codec.CodecError, match=cause):
        codec.read_log(raw)


def test_bad_report_items_are_refused():
    good = {"k": "f", "l": 1, "f": fp("http://a.test/"), "u": "http://a.test/", "s": 200}
    assert codec.check_item(good) == good
    for bad in ({**good, "k": "z"}, {**good, "l": "1"}, {**good, "f": b"short"}, {**good, "s": None}, [1],
                {**good, "f": b"Z" * 40}, {**good, "l": 0}, {**good, "l": True}):
        with pytest.raises(codec.CodecError):
            codec.check_item(bad)


@pytest.mark.parametrize("field, value", [
    ("c", 5), ("c", {"a": 1}), ("c", [1, 2]), ("rr", 3), ("rr", ["x"]), ("h", "12"), ("h", [1]), ("h", -1),
    ("h", 2**64), ("h", float("nan")), ("sc", "high"), ("sc", float("inf")), ("hd", [b"x"]), ("hd", {b"a": b"b"}),
    ("ln", {}), ("s", 1.5), ("s", True),
])  # fmt: skip
def test_report_item_fields_of_the_wrong_type_are_refused_by_name(field, value):
    item = {"k": "f", "l": 1, "f": fp("http://a.test/"), "u": "http://a.test/", "s": 200, field: value}
    with pytest.raises(codec.CodecError, match=field if field != "s" else "status"):
        codec.check_item(item)


@pytest.mark.parametrize("parts", [
    {"h": 5, "c": "x", "b": 7}, {"m": "GET"}, {"m": b"G E T"}, {"x": []}, {"x": {b"scrapy_meta": 5}},
    {"h": {b"a": object}}, {"z": 1}, [],
])  # fmt: skip
def test_malformed_request_parts_of_a_link_are_refused(parts):
    with pytest.raises(codec.CodecError):
        codec.to_request(["http://a.test/", fp("http://a.test/"), parts])


def test_sealed_messages_need_the_same_secret_crawl_and_kind():
    key = codec.crawl_key("s3cret", "c")
    raw = codec.report("s1", [], key)
    assert codec.read_log(raw, key)["s"] == "s1"
    for other in (None, codec.crawl_key("other", "c"), codec.crawl_key("s3cret", "d")):
        if other is not None:
            with pytest.raises(codec.CodecError, match="LINKRANK_SECRET"):
                codec.read_log(raw, other)
    with pytest.raises(codec.CodecError):
        codec.read_log(raw, None)  # the MAC after the map: not one message
    with pytest.raises(codec.CodecError, match="LINKRANK_SECRET"):
        codec.read_log(codec.report("s1", []), key)  # unsigned
    with pytest.raises(codec.CodecError, match="LINKRANK_SECRET"):
        codec.read_feed_entry(raw, key)  # a report replayed as a feed entry


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
def test_hosts_are_spread_over_partitions_in_the_order_they_are_found():
    assert [partition_of(h, 8) for h in range(10)] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]


spider_names = st.sampled_from(["a", "b", "c", "d", "e"])


def complete(owners, moving):
    """The frontier completes each move once the old owner is drained."""
    owners = list(owners)
    for p, t in moving.items():
        owners[p] = t
    return owners


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.lists(st.one_of(st.none(), spider_names), max_size=40),
       st.dictionaries(st.integers(0, 39), spider_names, max_size=10), st.lists(spider_names, max_size=5, unique=True),
       st.lists(st.integers(0, 1000), max_size=40))
def test_plan_gives_each_partition_one_live_owner_and_settles_balanced(P, owners, moving, live, load):
    owners = (owners + [None] * P)[:P]
    moving = {p: t for p, t in moving.items() if p < P}
    load = (load + [0] * P)[:P]
    new, new_moving = plan(owners, moving, live, load)
    assert len(new) == P
    if not live:
        assert new_moving == {} and all(o is None or o in live for o in new)
        return
    assert all(o in live for o in new)  # every partition: exactly one owner, a live one
    assert all(t in live and t != new[p] for p, t in new_moving.items())
    # sticky: a live owner keeps its partitions unless they move (after draining)
    for p, o in enumerate(owners):
        if o in live and new[p] != o:
            pytest.fail(f"partition {p} taken from live {o} without a move")
    # Repeated plans settle (no partition moves back and forth for ever)...
    for _ in range(P + 2):
        new, new_moving = plan(complete(new, new_moving), {}, live, load)
        if not new_moving:
            break
    assert new_moving == {}
    # ... with no spider that could take a partition from the busiest and narrow the gap by much.
    if sum(load) == 0:
        counts = [new.count(s) for s in live]
        assert max(counts) - min(counts) <= 1


def test_without_load_the_partitions_are_split_evenly():
    owners, moving = plan([None] * 16, {}, ["a"])
    owners, moving = plan(owners, moving, ["a", "b", "c"])
    owners = complete(owners, moving)
    assert sorted(owners.count(s) for s in "abc") == [5, 5, 6]
    again, moving2 = plan(owners, {}, ["a", "b", "c"])
    assert again == owners and moving2 == {}


def test_two_big_hosts_go_to_two_spiders():
    # Both hosts' partitions with a; b owns the 62 empty ones: one big one moves.
    owners = ["a", "a"] + ["b"] * 62
    load = [4000, 3900] + [0] * 62
    owners, moving = plan(owners, {}, ["a", "b"], load)
    final = complete(owners, moving)
    assert final[0] != final[1]
    again, more = plan(final, {}, ["a", "b"], load)
    assert more == {}  # settled


def test_a_dead_or_stalled_spiders_partitions_go_at_once_to_the_least_loaded():
    owners = ["a", "b", "c", "c"]
    new, moving = plan(owners, {}, ["a", "b"], load=[100, 0, 50, 50], balance=False)
    assert new[:2] == ["a", "b"] and new[2:] == ["b", "b"] and moving == {}

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


# -- request parts through the frontier -------------------------------------------------------
def test_request_parts_survive_the_frontier(tmp_path):
    from frontera.core.models import Request as FRequest

    url = "http://a.test/form"
    spider_req = FRequest(url=url, method=b"POST", headers={b"X-Token": [b"t"]}, body=b"q=1",
                          meta={b"scrapy_callback": "parse_form", b"scrapy_meta": {"page": 2, "tags": ("a", "b")},
                                b"score": 0.5})
    wire = codec.link(spider_req, fp(url))
    core = open_core(tmp_path / "db")
    core.add_seeds([codec.to_request(wire)])
    (out,) = core.next_requests(1)
    key = codec.crawl_key("k3y", "c")
    entry = codec.read_feed_entry(codec.feed_entry(1, out, key), key)
    core.close()
    assert entry.parts["x"][b"scrapy_callback"] == "parse_form" and entry.parts["b"] == b"q=1"
    assert entry.parts["x"][b"scrapy_meta"] == {"page": 2, "tags": ["a", "b"]}
