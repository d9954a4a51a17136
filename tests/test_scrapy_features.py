"""The Scrapy scheduler's features, each through a real ``scrapy crawl``:
seeds from ``start()`` and from a file, content scores, ``dont_frontier``,
errbacks, network errors and their retries, robots.txt refusals, the page
budget across runs, and clear errors for a wrong configuration. The probe
project names the scheduler and its spider middleware in its settings
(tests/test_scrapy_setup.py has the scheduler alone and the add-on)."""

import json
import os
import re
import socket

import pytest
from scrapy.settings import Settings

from crawlweb import TestWebServer, multi_host_graph, run_crawl, scrapy_stats
from frontera_linkrank.scrapy.config import batch_size, linkrank_settings, read_seeds_file
from frontera_linkrank.settings import SettingsError
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED, ERROR, F_SEED
from frontera_linkrank.testweb.web import TestWeb

PROBE = os.path.join(os.path.dirname(__file__), "crawl_project")


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_web(path):
    """A small web for the probe spider, as a link list."""
    a, b, c = "http://a.probe.test", "http://b.probe.test", "http://c.probe.test"
    refused = f"http://127.0.0.1:{closed_port()}/refused"
    edges = [(f"{a}/", f"{a}/1"), (f"{a}/", f"{b}/"), (f"{a}/", refused), (f"{a}/", f"{a}/private/x")]
    edges += [(f"{a}/1", f"{a}/{k}") for k in range(2, 9)]
    edges += [(f"{b}/", f"{b}/{k}") for k in range(1, 9)]
    edges += [(f"{c}/side", f"{c}/from-side"), (f"{c}/lambda", f"{a}/")]
    with open(path, "w") as f:
        f.write("".join(f"{s}\t{d}\n" for s, d in edges))
    return {
        "start": f"{a}/",
        "side": f"{c}/side",
        "from_side": f"{c}/from-side",
        "lambda": f"{c}/lambda",
        "refused": refused,
        "private": f"{a}/private/x",
    }


def error_message(db, i):
    with db.snapshot() as txn:
        return db.error_message(i, txn)


def test_read_seeds_file(tmp_path):
    p = tmp_path / "seeds.txt"
    p.write_text("# comment\n\nhttp://a.test/\n   # indented comment\n http://b.test/?q=1#top \n")
    assert read_seeds_file(str(p)) == ["http://a.test/", "http://b.test/?q=1#top"]


def test_probe_spider_features(tmp_path):
    graph = str(tmp_path / "probe.tsv")
    u = probe_web(graph)
    g = load_graph(graph)
    special = [g.index[u[k]] for k in ("start", "side", "from_side", "lambda")]
    # a seed of the web where some pages answer 404, but not the special ones
    seed = next(
        s
        for s in range(100)
        if not TestWeb(g, error_rate=0.3, seed=s).error[special].any()
        and TestWeb(g, error_rate=0.3, seed=s).error.sum() >= 2
    )
    web = TestWeb(g, error_rate=0.3, seed=seed)
    not_found = {g.urls[v] for v in range(g.n) if web.error[v]} - {u["refused"], u["private"]}
    db_path = str(tmp_path / "db")
    items = str(tmp_path / "items.jsonl")
    settings = {
        "LINKRANK_MAX_RETRIES": 1,
        "LINKRANK_RETRY_DELAY": 1,
        "RETRY_TIMES": 1,
        "FEEDS": json.dumps({items: {"format": "jsonlines"}}),
    }
    args = {"spider": "probe", "cwd": PROBE, "settings": settings}
    spider_args = ["-a", f"start_url={u['start']}", "-a", f"side_url={u['side']}", "-a", f"lambda_url={u['lambda']}"]
    empty = tmp_path / "no_seeds.txt"
    empty.write_text("# seeds come from start()\n")
    with TestWebServer(
        graph, str(tmp_path), extra=["--errors", "0.3", "--seed", str(seed), "--disallow", "/private"]
    ) as srv:
        out = run_crawl(srv.proxy, db_path, str(empty), extra_args=spider_args, no_proxy="127.0.0.1", **args)
        assert out.returncode == 0, out.stdout[-4000:]
        fetches = srv.page_fetches()
        # A second run on the finished crawl fetches nothing.
        again = run_crawl(srv.proxy, db_path, str(empty), extra_args=spider_args, no_proxy="127.0.0.1", **args)
        assert again.returncode == 0, again.stdout[-4000:]
        assert srv.page_fetches() == fetches
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "finished" and scrapy_stats(again.stdout)["finish_reason"] == "finished"
    assert stats["linkrank/seeds_start"] == 1

    served = {x for x in g.urls if x not in (u["refused"], u["private"])}
    assert set(fetches) == served and max(fetches.values()) == 1
    # the lambda callback cannot be stored: the request is kept in memory, fetched through the frontier
    assert "the callback of this request cannot be stored in the page database" in out.stdout
    assert stats["linkrank/requests_in_memory"] == 1

    got = [json.loads(line) for line in open(items)]
    errors = [(x["error"], x["type"]) for x in got if "error" in x]
    # errbacks still run: 404s (HttpError), and the closed port once Scrapy's retry failed too
    assert sorted(e for e in errors if e[1] == "HttpError") == sorted((x, "HttpError") for x in not_found)
    refused = [e[1] for e in errors if e[0] == u["refused"]]
    assert len(refused) == 1 and all("ConnectionRefused" in t for t in refused), refused
    assert {"side": u["side"]} in got and {"lambda": u["lambda"]} in got

    db = PageDB(db_path, readonly=True)
    try:
        v = db.vertices
        page = lambda url: db.find(fingerprint(url))  # noqa: E731
        start = page(u["start"])
        assert v.flags[start] & F_SEED and v.score[start] == 1.0
        # network error: retried by Scrapy (RETRY_TIMES=1), then recorded, not retried by the frontier
        i = page(u["refused"])
        assert v.state[i] == ERROR and v.errors[i] == 1 and "ConnectionRefused" in error_message(db, i)
        # robots.txt refusal: not retried
        i = page(u["private"])
        assert v.state[i] == ERROR and v.errors[i] == 1 and "IgnoreRequest" in error_message(db, i)
        for url in not_found:
            assert v.state[page(url)] == CRAWLED and v.status[page(url)] == 404
        # dont_frontier requests went through Scrapy's queue...
        assert page(u["side"]) is None or v.n_crawls[page(u["side"])] == 0
        # ...the one with a lambda callback through the frontier, stored without it
        i = page(u["lambda"])
        assert v.state[i] == CRAWLED and v.n_crawls[i] == 1
        with db.snapshot() as txn:
            assert db.request_extras([i], txn)[i][3][b"linkrank_unstored"] == ["callback"]
        # ...and links of a page the frontier did not hand out enter it as seeds
        i = page(u["from_side"])
        assert v.state[i] == CRAWLED and v.flags[i] & F_SEED
        for url in served - not_found - {u["side"], u["lambda"], u["start"]}:
            assert v.score[page(url)] == 0.5, url
    finally:
        db.close()


def test_page_budget_survives_restarts(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=4, pages=40, seed=2)
    g = load_graph(npz)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    db_path = str(tmp_path / "db")
    with TestWebServer(npz, str(tmp_path)) as srv:
        counts = []
        for budget in (30, 30, 70):
            out = run_crawl(srv.proxy, db_path, str(seeds), settings={"LINKRANK_MAX_PAGES": budget})
            assert out.returncode == 0, out.stdout[-3000:]
            stats = scrapy_stats(out.stdout)
            assert stats["finish_reason"] == "linkrank_page_budget"
            assert stats["linkrank/pages_crawled"] == budget
            counts.append(sum(srv.page_fetches().values()))
        fetches = srv.page_fetches()
    assert counts == [30, 30, 70]  # the second run had nothing left to do
    assert max(fetches.values()) == 1


@pytest.mark.parametrize(
    "values, message",
    [
        ({"LINKRANK_POLCY": "fifo"}, "unknown setting LINKRANK_POLCY"),
        ({"LINKRANK_POLICY": "best"}, "LINKRANK_POLICY='best': must be one of"),
        ({"LINKRANK_MAX_PAGES": "-1"}, "LINKRANK_MAX_PAGES='-1': must be >= 0"),
        ({"LINKRANK_OVERUSED_SLOT_FACTOR": 0}, "LINKRANK_OVERUSED_SLOT_FACTOR=0: must be > 0"),
        ({"LINKRANK_SEEDS_FILE": 3}, "LINKRANK_SEEDS_FILE=3: must be a file path"),
    ],
)
def test_bad_settings_are_named(values, message):
    with pytest.raises(SettingsError, match=re.escape(message)):
        linkrank_settings(Settings(values))


def test_scrapy_settings_reach_the_frontier():
    scrapy_settings = Settings(
        {
            "LINKRANK_POLICY": "FIFO",
            "LINKRANK_MAX_PAGES": "500",
            "CONCURRENT_REQUESTS": 32,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 3,
        }
    )
    s = linkrank_settings(scrapy_settings)
    assert (s.POLICY, s.MAX_PAGES) == ("fifo", 500)
    assert batch_size(scrapy_settings, s) == 32  # LINKRANK_BATCH_SIZE 0: CONCURRENT_REQUESTS
    assert s.MAX_REQUESTS_PER_HOST == 6  # 3 per slot x factor 2
    scrapy_settings = Settings({"LINKRANK_MAX_REQUESTS_PER_HOST": 1, "LINKRANK_BATCH_SIZE": 7})
    s = linkrank_settings(scrapy_settings)
    assert s.MAX_REQUESTS_PER_HOST == 1 and batch_size(scrapy_settings, s) == 7


def test_configuration_errors_stop_scrapy_crawl(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    settings = {"LINKRANK_POLCY": "fifo"}
    out = run_crawl("http://127.0.0.1:9", str(tmp_path / "db"), str(seeds), settings=settings, timeout=60)
    assert out.returncode != 0
    assert "unknown setting LINKRANK_POLCY" in out.stdout


def test_missing_seeds_file_is_clear(tmp_path):
    out = run_crawl("http://127.0.0.1:9", str(tmp_path / "db"), str(tmp_path / "nope.txt"), timeout=60)
    assert out.returncode != 0
    assert "LINKRANK_SEEDS_FILE=" in out.stdout and "No such file" in out.stdout


TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "settings_templates")


@pytest.mark.parametrize("name", ["broad", "focused_score", "recrawl", "fifo"])
def test_settings_templates_are_valid(name):
    values = {}
    with open(os.path.join(TEMPLATES, name + ".py")) as f:
        exec(f.read(), values)
    settings = Settings({k: v for k, v in values.items() if k.isupper()})
    linkrank_settings(settings)  # every LINKRANK_* known and valid
    assert settings.getdict("ADDONS") == {"frontera_linkrank.scrapy.Addon": 0}
