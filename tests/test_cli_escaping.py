"""URLs holding line breaks, NULs, tabs or escape sequences (accepted by a
crawl through the Frontera API) are printed by every tool, as installed, as
one field of one line: percent-encoded, the way ``page_db_dump info`` does."""

import os
import subprocess
import sys

import pytest
from frontera.core.models import Request

from frontera_linkrank.backend.middleware import FingerprintMiddleware

BIN = os.path.dirname(sys.executable)
HOSTILE = {
    "http://a.test/x\ny": "http://a.test/x%0Ay",
    "http://a.test/nul\x00z": "http://a.test/nul%00z",
    "http://a.test/tab\tq": "http://a.test/tab%09q",
    "http://a.test/cr\rw": "http://a.test/cr%0Dw",
    "http://a.test/esc\x1b[2Jred": "http://a.test/esc%1B[2Jred",
    "http://a.test/c1\x85nbsp\xa0": "http://a.test/c1%C2%85nbsp%C2%A0",
}
PLAIN = "http://a.test/plain?q=1"
RAW = "\x00\t\r\x1b\x85\xa0"  # none of these may reach the output


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    from frontera_linkrank import LinkRankBackend

    path = str(tmp_path_factory.mktemp("escaping") / "db")
    b = LinkRankBackend(settings={"LINKRANK_PATH": path, "LINKRANK_SYNC": False, "LINKRANK_POLICY": "fifo"})
    seeds = FingerprintMiddleware().add_seeds([Request(u) for u in [*HOSTILE, PLAIN]])
    b.add_seeds(seeds)
    b.get_next_requests(100)
    b.frontier_stop()
    return path


def tool(*argv):
    out = subprocess.run([os.path.join(BIN, argv[0]), *argv[1:]], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout for c in RAW), repr(out.stdout)
    return out.stdout.splitlines()


def test_find_prints_one_line_per_page(db_path):
    lines = tool("page_db_find", db_path, "a.test")
    assert len(lines) == len(HOSTILE) + 1
    assert {line.split(" ", 1)[1] for line in lines} == {*HOSTILE.values(), PLAIN}


def test_path_links_stats_top_dump_and_seeds(db_path):
    hashes = dict(line.split(" ")[::-1] for line in tool("page_db_find", db_path, "a.test"))
    for shown in HOSTILE.values():
        (line,) = tool("page_db_path", db_path, hashes[shown])
        assert line == f"0 {hashes[shown]} {shown}"
    assert tool("page_db_links", db_path, PLAIN) == ["# back links (0)", "# forward links (0)"]
    stats = tool("page_db_stats", db_path, "--top", "10")
    assert {line.split()[-1] for line in stats if line.startswith("  0.")} == {*HOSTILE.values(), PLAIN}
    top = tool("frontera-linkrank", "top", db_path)
    assert len(top) == 2 + len(HOSTILE) + 1
    assert {line.split()[-1] for line in top[2:]} == {*HOSTILE.values(), PLAIN}
    dump = tool("page_db_dump", "info", db_path)
    assert {line.split(" ")[2] for line in dump[1:]} == {*HOSTILE.values(), PLAIN}
    seeds = tool("page_db_seeds", db_path, "-k", "10", "-o", "-")
    assert {line for line in seeds if not line.startswith("#")} <= {*HOSTILE.values(), PLAIN}


def test_printable_url_keeps_ordinary_urls_and_encodes_bytes_that_were_not_utf8():
    from frontera_linkrank.cli.common import printable_url

    for url in (PLAIN, "http://b.test/ünïcode/%20/\\", "https://x.test/?a=b&c=d#f"):
        assert printable_url(url) is url
    assert printable_url(b"http://a.test/\xff".decode("utf-8", "surrogateescape")) == "http://a.test/%FF"
    assert printable_url("http://a.test/\ud800") == "http://a.test/%ED%A0%80"
    assert printable_url(None) == "-"
