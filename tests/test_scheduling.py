"""Best-first scheduling: priorities, politeness, budgets, leases, retries."""

import pytest
from frontera.core.models import Request

from frontera_linkrank.core.codec import OutgoingRequest
from util import crawl, page_index, req


def hosts_of(reqs):
    return [r.url.split("/")[2] for r in reqs]


def test_opic_hands_out_the_richest_pages_first(make_backend):
    b = make_backend()
    b.add_seeds([req("http://s.test/")])
    (r,) = b.get_next_requests(10)
    # /a is linked from the seed and from /b: after /b is read it has more cash.
    crawl(b, r, ["http://s.test/a", "http://s.test/b", "http://s.test/c"])
    (first, *_) = b.get_next_requests(1)
    assert first.url == "http://s.test/a"  # all equal: discovery order breaks the tie
    crawl(b, first, [])
    (second,) = b.get_next_requests(1)
    crawl(b, second, ["http://s.test/c"])  # /b gives its cash to /c
    (third,) = b.get_next_requests(1)
    assert third.url == "http://s.test/c"


def test_score_policy_follows_content_scores(make_backend):
    b = make_backend(POLICY="score")
    b.add_seeds([req("http://s.test/")])
    (r,) = b.get_next_requests(10)
    crawl(b, r, ["http://s.test/good", "http://s.test/bad"])
    got = {x.url: x for x in b.get_next_requests(10)}
    crawl(b, got["http://s.test/bad"], ["http://s.test/from-bad"], score=0.1)
    crawl(b, got["http://s.test/good"], ["http://s.test/from-good"], score=0.9)
    nxt = [x.url for x in b.get_next_requests(10)]
    assert nxt == ["http://s.test/from-good", "http://s.test/from-bad"]
    v = b.db.vertices
    assert v.score[page_index(b.db, "http://s.test/good")] == pytest.approx(0.9)


def test_link_score_meta_is_a_hint(make_backend):
    b = make_backend(POLICY="score")
    b.add_seeds([req("http://s.test/")])
    (r,) = b.get_next_requests(1)
    crawl(b, r, [req("http://s.test/low", score=0.2), req("http://s.test/high", score=0.7)])
    assert [x.url for x in b.get_next_requests(10)] == ["http://s.test/high", "http://s.test/low"]


@pytest.mark.parametrize("frontera_meta", [True, False])
def test_a_link_score_raises_the_hint_of_a_known_page(make_backend, frontera_meta):
    """A score on a link to a page already known raises that page's hint,
    for Frontera's requests and for requests whose meta holds only the
    fingerprint and the score (as the Scrapy scheduler and the frontier
    service send them)."""
    b = make_backend(POLICY="score")
    b.add_seeds([req("http://s.test/1"), req("http://s.test/2")])
    first, second = b.get_next_requests(2)
    crawl(b, first, ["http://s.test/a"])
    b.get_next_requests(0)
    a = page_index(b.db, "http://s.test/a")
    assert b.db.vertices.hint[a] != 0.8
    link = req("http://s.test/a", score=0.8)
    if not frontera_meta:
        link = OutgoingRequest("http://s.test/a", meta={b"fingerprint": link.meta[b"fingerprint"], b"score": 0.8})
    crawl(b, second, [link])
    b.get_next_requests(0)
    assert b.db.vertices.hint[a] == 0.8


@pytest.mark.parametrize("key_type,overused,skipped", [
    ("domain", ["b.test"], {"b.test"}),
    ("ip", ["127.0.0.1"], {"127.0.0.1", "localhost"}),
])
def test_overused_keys_skip_hosts_and_keep_their_pages(make_backend, key_type, overused, skipped):
    b = make_backend()
    urls = [f"http://{h}/{i}" for i in range(3) for h in ("a.test", "b.test", "127.0.0.1", "localhost")]
    b.add_seeds([req(u) for u in urls])
    got = b.get_next_requests(100, key_type=key_type, overused_keys=overused)
    assert len(got) == len(urls) - 3 * len(skipped)
    assert not set(hosts_of(got)) & skipped
    rest = b.get_next_requests(100, key_type=key_type, overused_keys=[])
    assert set(hosts_of(rest)) == skipped and len(rest) == 3 * len(skipped)


def test_cap_of_requests_per_host_per_batch(make_backend):
    b = make_backend(MAX_REQUESTS_PER_HOST=2)
    b.add_seeds([req(f"http://{h}.test/{i}") for i in range(5) for h in "abc"])
    batch = b.get_next_requests(100)
    assert sorted(hosts_of(batch)) == ["a.test"] * 2 + ["b.test"] * 2 + ["c.test"] * 2
    assert len(b.get_next_requests(100)) == 6
    assert len(b.get_next_requests(100)) == 3


def test_host_page_budget_drops_trap_links(make_backend):
    b = make_backend(MAX_PAGES_PER_HOST=5)
    b.add_seeds([req("http://trap.test/0")])
    (r,) = b.get_next_requests(1)
    crawl(b, r, [f"http://trap.test/{i}" for i in range(1, 50)] + ["http://ok.test/"])
    b.get_next_requests(0)
    s = b.stats()
    assert s["links_dropped"] == 45
    urls = [x.url for x in b.get_next_requests(100)]
    assert len([u for u in urls if "trap.test" in u]) == 4 and "http://ok.test/" in urls
    assert abs(b.core.aopic.residual()) < 1e-12


def test_lease_is_never_handed_out_twice_and_expires(make_backend, clock):
    b = make_backend(clock=clock, LEASE_TIMEOUT=100)
    b.add_seeds([req(f"http://a.test/{i}") for i in range(4)])
    first = b.get_next_requests(2)
    clock.advance(99)
    second = b.get_next_requests(10)
    assert {r.url for r in first}.isdisjoint(r.url for r in second)
    assert b.get_next_requests(10) == []
    clock.advance(2)  # the first two leases are now 101 s old
    again = b.get_next_requests(10)
    assert sorted(r.url for r in again) == sorted(r.url for r in first)
    assert b.stats()["leased"] == 4
    for r in first + second:
        crawl(b, r)
    b.get_next_requests(0)
    assert b.finished()


def test_errors_are_retried_then_given_up(make_backend, clock):
    b = make_backend(clock=clock, MAX_RETRIES=2, RETRY_DELAY=60)
    b.add_seeds([req("http://a.test/x")])
    for attempt in range(3):
        (r,) = b.get_next_requests(10)
        b.request_error(r, "DNSLookupError")
        assert b.get_next_requests(10) == []  # waiting for the retry delay (or given up)
        assert b.finished() == (attempt == 2)
        clock.advance(61)
    assert b.get_next_requests(10) == []
    assert b.finished()
    i = page_index(b.db, "http://a.test/x")
    assert b.db.vertices.state[i] == 3 and b.db.vertices.errors[i] == 3
    s = b.stats()
    assert s["retries"] == 2 and s["pages_failed"] == 1
    with b.db.snapshot() as txn:
        assert b.db.error_message(i, txn) == "DNSLookupError"
    assert abs(b.core.aopic.residual()) < 1e-12  # its cash went back to the virtual page


def test_requests_keep_method_headers_cookies_and_meta(make_backend):
    b = make_backend()
    seed = Request("http://a.test/form", method=b"POST", headers={b"X-A": b"1"}, cookies={b"c": b"v"},
                   meta={b"mine": [1, 2], b"scrapy_meta": {"callback": "parse_item"}}, body="q=1")
    plain = Request("http://a.test/plain")
    b.add_seeds([seed, plain])
    got = {r.url: r for r in b.get_next_requests(10)}
    r = got["http://a.test/form"]
    assert (r.method, r.headers, r.cookies, r.body) == (b"POST", {b"X-A": b"1"}, {b"c": b"v"}, "q=1")
    assert r.meta[b"mine"] == [1, 2] and r.meta[b"scrapy_meta"] == {"callback": "parse_item"}
    assert len(r.meta[b"fingerprint"]) == 40 and r.meta[b"depth"] == 0
    p = got["http://a.test/plain"]
    assert p.method == b"GET" and not p.headers and p.meta[b"scrapy_meta"] == {}


def test_leases_of_a_stopped_crawl_are_offered_again(make_backend, tmp_path):
    b = make_backend()
    b.add_seeds([req(f"http://a.test/{i}") for i in range(5)])
    out = b.get_next_requests(3)
    b.frontier_stop()  # the spider stopped with 3 requests in flight
    b = make_backend()
    assert b.stats()["leases_recovered"] == 3
    again = b.get_next_requests(10)
    assert {r.url for r in out} <= {r.url for r in again} and len(again) == 5


def test_redirect_marks_original_crawled_and_records_target(make_backend):
    from frontera.core.models import Response

    b = make_backend()
    b.add_seeds([req("http://a.test/old")])
    (r,) = b.get_next_requests(1)
    resp = Response("http://a.test/new", request=r)
    resp.meta[b"redirect_urls"] = ["http://a.test/old"]
    resp.meta[b"redirect_reasons"] = [301]
    b.page_crawled(resp)
    b.links_extracted(r, [req("http://a.test/child")])
    nxt = b.get_next_requests(10)
    assert [x.url for x in nxt] == ["http://a.test/child"]
    v, db = b.db.vertices, b.db
    old, new = page_index(db, "http://a.test/old"), page_index(db, "http://a.test/new")
    assert (v.state[old], v.status[old], v.state[new], v.status[new]) == (2, 301, 2, 200)
    with db.snapshot() as txn:
        assert db.edges.out_links(txn, old).tolist() == [new]
        assert db.urls(db.edges.out_links(txn, new)) == ["http://a.test/child"]
    assert abs(b.core.aopic.residual()) < 1e-12


def test_redirect_through_frontera_canonical_solver(make_manager):
    """FrontierManager's BasicCanonicalSolver renames the response to the
    first URL and appends the final one: the same pages must result."""
    from frontera.core.models import Response

    m = make_manager()
    m.add_seeds([Request("http://a.test/old")])
    (r,) = m.get_next_requests(1)
    resp = Response("http://a.test/new", request=r)
    resp.meta[b"redirect_urls"] = ["http://a.test/old"]
    m.page_crawled(resp)
    m.links_extracted(r, [Request("http://a.test/child")])
    assert [x.url for x in m.get_next_requests(10)] == ["http://a.test/child"]
    b = m.backend
    new = page_index(b.db, "http://a.test/new")
    assert b.db.vertices.state[new] == 2 and b.db.vertices.n_out[new] == 1


def test_http_errors_are_recorded_with_their_status(make_backend):
    b = make_backend()
    b.add_seeds([req("http://a.test/gone"), req("http://a.test/boom")])
    got = {r.url: r for r in b.get_next_requests(10)}
    crawl(b, got["http://a.test/gone"], status=404)
    crawl(b, got["http://a.test/boom"], status=503)
    b.get_next_requests(0)
    v = b.db.vertices
    assert v.status[page_index(b.db, "http://a.test/gone")] == 404
    assert v.status[page_index(b.db, "http://a.test/boom")] == 503
    assert b.finished() and abs(b.core.aopic.residual()) < 1e-12
