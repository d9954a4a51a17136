"""Bad input never raises into the crawler; it is logged, counted, and the
rest of the batch is kept."""

import logging

from frontera.core.models import Request, Response

from util import page_index

GOOD = ["http://ok.test/1", "http://ok.test/2", "https://other.test/x?y=1"]
BAD = {
    "malformed": ["http://[bad", "http://a.test:99999/", "http:///nohost", "http://exa mple.com/", "//no-scheme.test/"],
    "too_long": ["http://a.test/" + "x" * 5000],
    "scheme": ["mailto:someone@example.com", "javascript:void(0)", "ftp://files.test/f", "data:text/plain,hi"],
    "invalid_utf8": ["http://a.test/\udcff\udcfe"],  # lone surrogates: undecodable bytes
}


def test_bad_links_are_counted_logged_and_the_rest_kept(make_manager, caplog):
    m = make_manager()
    m.add_seeds([Request("http://seed.test/")])
    (r,) = m.get_next_requests(10)
    links = [Request(u) for u in GOOD]
    for urls in BAD.values():
        links += [Request(u) for u in urls]
    links += [Request("http://seed.test/"), Request("http://seed.test/#frag")]  # self-links
    links += [Request("http://ok.test/1")]  # duplicate
    with caplog.at_level(logging.WARNING, logger="frontera_linkrank"):
        m.page_crawled(Response(r.url, request=r))
        m.links_extracted(r, links)
        got = m.get_next_requests(100)
    assert sorted(x.url for x in got) == sorted(GOOD)
    s = m.backend.stats()
    for reason, urls in BAD.items():
        assert s["rejected_" + reason] == len(urls), reason
    assert s["self_links"] == 2 and s["duplicate_links"] == 1
    assert len([rec for rec in caplog.records if "rejected" in rec.getMessage()]) == sum(map(len, BAD.values()))
    assert abs(m.backend.core.aopic.residual()) < 1e-12


def test_bad_seeds_responses_and_errors_do_not_raise(make_manager):
    m = make_manager()
    m.add_seeds([Request(u) for u in ["http://ok.test/", "mailto:x@y.z", "http://[bad", "http://a.test/\udcff"]])
    got = m.get_next_requests(10)
    assert [x.url for x in got] == ["http://ok.test/"]
    bad = Request("http://[bad")
    m.page_crawled(Response("http://[bad", request=bad))
    m.links_extracted(bad, [Request("http://ok.test/2")])
    m.request_error(Request("http://a.test/\udcff"), "error")
    m.page_crawled(Response(got[0].url, request=got[0]))
    m.links_extracted(got[0], [])
    assert m.get_next_requests(10) == []
    s = m.backend.stats()
    assert s["rejected_malformed"] >= 2 and s["rejected_scheme"] == 1 and s["rejected_invalid_utf8"] >= 2


def test_a_page_with_100000_links(make_manager):
    m = make_manager(MAX_NEXT_REQUESTS=10)
    m.add_seeds([Request("http://hub.test/")])
    (r,) = m.get_next_requests(1)
    links = [Request(f"http://h{i % 100}.test/page/{i}") for i in range(100_000)]
    m.page_crawled(Response(r.url, request=r))
    m.links_extracted(r, links)
    nxt = m.get_next_requests(50_000)
    assert len(nxt) == 50_000
    b = m.backend
    assert b.db.n_pages == 100_001 and b.db.vertices.n_out[0] == 100_000
    # each child got exactly d * C / 100000
    kids = b.db.vertices.cash[1:100_001]
    assert kids.max() - kids.min() < 1e-18
    assert abs(b.core.aopic.residual()) < 1e-9
    assert page_index(b.db, "http://h7.test/page/99907") is not None


def test_missing_fingerprints_are_computed(make_backend):
    b = make_backend()
    b.add_seeds([Request("http://a.test/?b=2&a=1")])  # no meta fingerprint at all
    (r,) = b.get_next_requests(1)
    b.page_crawled(Response(r.url, request=Request(r.url)))
    b.links_extracted(Request(r.url), [Request("http://a.test/?a=1&b=2"), Request("http://a.test/next")])
    # the first link is the same page (canonical URL): a self-link
    assert [x.url for x in b.get_next_requests(10)] == ["http://a.test/next"]
    assert b.stats()["self_links"] == 1
