"""The local test web (``frontera-linkrank serve-web``) answers conditional
requests: a valid ``If-Modified-Since`` gets a 304 when the page has not
changed since, a malformed one is ignored (the page in full), never a 500."""

import http.client

import pytest

from crawlweb import TestWebServer

BAD_DATES = [
    "yesterday", "", "Mon, 99 Foo 2024 25:61:61 GMT", "Mon, 01 Jan 99999 00:00:00 GMT", "0", "\t",
    "Mon, 01 Jan 2024", "Mon, 01 Jan 2024 00:00:00 +9999", "Sun, 06 Nov 1994 08:49:37 GMT garbage",
]  # fmt: skip


def get(port, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "http://www.hollins.edu/", headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    with TestWebServer("hollins", str(tmp_path_factory.mktemp("web")), timeout=120) as srv:
        yield srv


def test_a_valid_if_modified_since_gets_304(web):
    status, headers, body = get(web.port)
    assert status == 200 and body
    status, _, body = get(web.port, {"If-Modified-Since": headers["Last-Modified"]})
    assert status == 304 and body == b""
    status, _, _ = get(web.port, {"If-Modified-Since": "Sat, 01 Jan 1972 00:00:00 GMT"})
    assert status == 200  # changed since then


@pytest.mark.parametrize("value", BAD_DATES)
def test_a_malformed_if_modified_since_is_ignored(web, value):
    status, _, body = get(web.port, {"If-Modified-Since": value})
    assert status == 200 and b"<html" in body
