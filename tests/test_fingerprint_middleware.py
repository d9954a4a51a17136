"""The fingerprint middleware never raises, whatever a caller puts in
``meta[b'redirect_urls']``: through the Frontera API, the page is read and
the rest of the batch kept."""

import pytest
from frontera.core.models import Request, Response

from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED
from util import page_index

A, B = "http://a.test/", "http://b.test/"


@pytest.mark.parametrize(
    "redirect_urls",
    [5, None, 1.5, object(), {"a": 1}, [5, None, b"\xff", ["x"]], "http://[bad", [float("nan")]],
    ids=["int", "None", "float", "object", "dict", "list of junk", "bad URL", "nan"],
)
def test_junk_redirect_urls_do_not_raise(make_manager, redirect_urls):
    m = make_manager(LINKRANK_POLICY="fifo")
    m.add_seeds([Request(A), Request(B)])
    reqs = {r.url: r for r in m.get_next_requests(10)}
    a = reqs[A]
    a.meta[b"redirect_urls"] = redirect_urls
    m.page_crawled(Response(A, status_code=200, body=b"<p>a</p>", request=a))
    m.links_extracted(a, [Request("http://a.test/child")])
    m.page_crawled(Response(B, status_code=200, body=b"<p>b</p>", request=reqs[B]))
    m.get_next_requests(10)
    db = m.backend.db
    assert db.vertices.state[page_index(db, A)] == CRAWLED
    assert db.vertices.state[page_index(db, B)] == CRAWLED
    assert page_index(db, "http://a.test/child") is not None


def test_a_redirect_list_is_left_as_urls_the_canonical_solver_can_use(make_manager):
    m = make_manager()
    mw = m.middlewares[0]
    urls = [A, "http://a.test/2"]
    r = Request(B, meta={b"redirect_urls": urls})
    mw.add_seeds([r])  # the usual case: untouched
    assert r.meta[b"redirect_urls"] is urls
    assert r.meta[b"redirect_fingerprints"] == [fingerprint(u).hex().encode() for u in urls]
    r = Request(B, meta={b"redirect_urls": [7, A, "http://[bad", None]})
    mw.add_seeds([r])
    assert r.meta[b"redirect_urls"] == [A] and r.meta[b"redirect_fingerprints"] == [fingerprint(A).hex().encode()]
    r = Request(B, meta={b"redirect_urls": A})  # a lone URL: a list of one
    mw.add_seeds([r])
    assert r.meta[b"redirect_urls"] == [A] and r.meta[b"redirect_fingerprints"] == [fingerprint(A).hex().encode()]
    r = Request(B, meta={b"redirect_urls": 7, b"redirect_fingerprints": ["stale"]})
    mw.add_seeds([r])
    assert b"redirect_urls" not in r.meta and b"redirect_fingerprints" not in r.meta
    r = Request("http://[bad", meta={b"redirect_urls": [A]})  # the page's own URL is not one
    mw.add_seeds([r])
    assert b"redirect_urls" not in r.meta and b"fingerprint" not in r.meta


def test_a_redirect_with_junk_in_its_list_is_read_through_the_frontera_api(make_manager):
    m = make_manager(LINKRANK_POLICY="fifo")
    m.add_seeds([Request(A)])
    (a,) = m.get_next_requests(10)
    a.meta[b"redirect_urls"] = [5, "http://a.test/old", None]
    m.page_crawled(Response(A, status_code=200, body=b"<p>a</p>", request=a))
    m.get_next_requests(10)
    db = m.backend.db
    assert db.vertices.state[page_index(db, A)] == CRAWLED
    assert db.vertices.state[page_index(db, "http://a.test/old")] == CRAWLED  # the redirect hop
