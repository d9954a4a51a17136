"""Stored requests through real ``scrapy crawl`` runs: requests the page
database cannot store whole are fetched from memory in their run (never a
hang), and a crafted page database runs nothing (stored callback names
select only the spider's public methods; pickled requests are refused)."""

import json
import os
import pickle

import lmdb
import pytest

from crawlweb import TestWebServer, multi_host_graph, reachable, run_crawl, scrapy_stats
from frontera_linkrank.core.codec import OutgoingRequest
from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.settings import LinkRankSettings
from frontera_linkrank.simulation.datasets import load_graph
from frontera_linkrank.storage.keys import page_key
from frontera_linkrank.storage.pagedb import PageDB
from frontera_linkrank.storage.urls import fingerprint
from frontera_linkrank.storage.vertices import CRAWLED, ERROR

PROJECT = os.path.join(os.path.dirname(__file__), "crawl_project")


class Payload:
    """Unpickling this runs ``touch <path>``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def keeper_crawl(srv, db, seeds, items, *spider_args, **settings):
    settings = {"FEEDS": json.dumps({items: {"format": "jsonlines"}}), **settings}
    args = [x for kv in spider_args for x in ("-a", kv)]
    return run_crawl(srv.proxy, db, seeds, cwd=PROJECT, spider="keeper", settings=settings, extra_args=args,
                     timeout=180)


def read_items(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


@pytest.mark.parametrize("mode", ["parent", "lambda"])
def test_requests_that_cannot_be_stored_are_fetched_in_their_run(tmp_path, mode):
    """A response in ``cb_kwargs`` (or a lambda callback) on every link: the
    crawl fetches every page once with them and finishes; a later run drops
    what an earlier one could only keep in memory, with the reason."""
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=2, pages=15, seed=3)
    g = load_graph(npz)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    db, items = str(tmp_path / "db"), str(tmp_path / "items.jsonl")
    expected = {g.urls[v] for v in reachable(g, 0)}
    with TestWebServer(npz, str(tmp_path), timeout=300) as srv:
        out = keeper_crawl(srv, db, str(seeds), items, f"mode={mode}")
        fetches = srv.page_fetches()
    assert out.returncode == 0, out.stdout[-3000:]
    stats = scrapy_stats(out.stdout)
    assert stats["finish_reason"] == "finished"
    assert set(fetches) == expected and max(fetches.values()) == 1
    what = "cb_kwargs['parent']" if mode == "parent" else "callback"
    assert out.stdout.count(f"the {what} of this request cannot be stored") == 1  # one warning
    assert stats["linkrank/requests_in_memory"] == len(expected) - 1
    got = read_items(items)
    assert sorted(x["page"] for x in got) == sorted(expected)
    if mode == "parent":  # the callback got the response of the page that linked to it
        for x in got:
            if x["page"] != g.urls[0]:
                assert g.index[x["page"]] in g.out(g.index[x["parent"]]).tolist()
    with PageDB(db, readonly=True) as pdb:
        assert all(pdb.vertices.state[pdb.find(fingerprint(u))] == CRAWLED for u in expected)


def test_a_later_run_drops_what_only_memory_held(tmp_path):
    npz = multi_host_graph(str(tmp_path / "web.npz"), hosts=2, pages=15, seed=3)
    g = load_graph(npz)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(g.urls[0] + "\n")
    db, items = str(tmp_path / "db"), str(tmp_path / "items.jsonl")
    with TestWebServer(npz, str(tmp_path), timeout=300) as srv:
        first = keeper_crawl(srv, db, str(seeds), items, "mode=parent", LINKRANK_MAX_PAGES=2)
        n_first = sum(srv.page_fetches().values())
        second = keeper_crawl(srv, db, str(seeds), items, "mode=parent")
        n_second = sum(srv.page_fetches().values())
    assert first.returncode == 0 and second.returncode == 0, second.stdout[-3000:]
    assert scrapy_stats(first.stdout)["finish_reason"] == "linkrank_page_budget"
    stats = scrapy_stats(second.stdout)
    assert stats["finish_reason"] == "finished" and n_second == n_first  # nothing fetched without its parent
    assert "could not be stored and were only kept in memory by an earlier run" in second.stdout
    with PageDB(db, readonly=True) as pdb, pdb.snapshot() as txn:
        v = pdb.vertices
        dropped = [i for i in range(v.n) if v.state[i] == ERROR]
        assert len(dropped) == stats["linkrank/dropped"] > 0 and v.n_crawls[dropped].sum() == 0
        assert "cb_kwargs['parent']" in pdb.error_message(dropped[0], txn)


# -- crafted page databases ------------------------------------------------------------------------
NAMES = ["parse_item", "__init__", "close", "closed", "start", "from_crawler", "_secret", "name", "__class__",
         "no_such_method"]


def stored_web(tmp_path):
    """A web of one page per callback name, and a page database whose
    seeds name those callbacks (plus one left for a crafted value)."""
    urls = {name: f"http://s.test/{name}" for name in NAMES + ["poisoned"]}
    graph = tmp_path / "web.tsv"
    graph.write_text("".join(f"http://s.test/\t{u}\n" for u in urls.values()))
    path = str(tmp_path / "db")
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": path, "LINKRANK_SYNC": False}))
    callback = {**{name: name for name in NAMES}, "poisoned": "parse_item"}
    core.add_seeds([OutgoingRequest(u, meta={b"scrapy_meta": {}, b"scrapy_callback": callback[name],
                                             b"scrapy_flags": ["stored"]}) for name, u in urls.items()])
    core.close()
    return str(graph), path, urls


def poison(path, url, value, drop_section=False):
    with PageDB(path, readonly=True) as db:
        i = db.find(fingerprint(url))
    env = lmdb.open(path, max_dbs=20)
    with env.begin(write=True) as txn:
        txn.put(page_key(i), value, db=env.open_db(b"requests", txn=txn))
        if drop_section:  # a database written before request format 1
            meta_db = env.open_db(b"meta", txn=txn)
            doc = json.loads(txn.get(b"meta", db=meta_db))
            doc.pop("requests", None)  # (absent before request format 1)
            txn.put(b"meta", json.dumps(doc).encode(), db=meta_db)
    env.close()


def test_a_crafted_database_runs_nothing_in_scrapy(tmp_path):
    graph, db, urls = stored_web(tmp_path)
    marker, touched = tmp_path / "pwned", tmp_path / "touched"
    poison(db, urls["poisoned"], pickle.dumps(Payload(marker)))
    empty = tmp_path / "seeds.txt"
    empty.write_text("")
    items = str(tmp_path / "items.jsonl")
    with TestWebServer(graph, str(tmp_path), timeout=300) as srv:
        out = keeper_crawl(srv, db, str(empty), items, f"marker={touched}")
        fetched = set(srv.page_fetches())
    assert out.returncode == 0, out.stdout[-3000:]
    assert scrapy_stats(out.stdout)["finish_reason"] == "finished"
    assert not marker.exists() and not touched.exists()
    assert fetched == {urls["parse_item"]}  # no other page is fetched at all
    assert read_items(items) == [{"page": urls["parse_item"], "via": "parse_item"}]
    with PageDB(db, readonly=True) as pdb, pdb.snapshot() as txn:
        for name, url in urls.items():
            i = pdb.find(fingerprint(url))
            if name == "parse_item":
                assert pdb.vertices.state[i] == CRAWLED
                continue
            message = pdb.error_message(i, txn)
            assert pdb.vertices.state[i] == ERROR and pdb.vertices.n_crawls[i] == 0, name
            if name == "poisoned":
                assert "stored request unreadable" in message
            else:
                assert f"stored callback name {name!r} refused" in message, message


def test_a_database_of_pickled_requests_is_refused_by_scrapy(tmp_path):
    graph, db, urls = stored_web(tmp_path)
    marker = tmp_path / "pwned"
    poison(db, urls["poisoned"], pickle.dumps(Payload(marker)), drop_section=True)
    empty = tmp_path / "seeds.txt"
    empty.write_text("")
    with TestWebServer(graph, str(tmp_path), timeout=300) as srv:
        out = keeper_crawl(srv, db, str(empty), str(tmp_path / "items.jsonl"))
        fetched = srv.page_fetches()
    assert not marker.exists() and not fetched
    assert "requests in the pickle format" in out.stdout and "Crawl into a new page database" in out.stdout


def test_generic_spiders_keep_their_dispatchers():
    """CrawlSpider's rule requests name its private ``_callback``: stored
    and resolved on a CrawlSpider, refused on any other spider."""
    from scrapy import Request, Spider
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import CrawlSpider, Rule

    from frontera_linkrank.scrapy.callbacks import UnusableRequest, spider_method
    from frontera_linkrank.scrapy.converters import to_frontier

    class Rules(CrawlSpider):
        name = "rules"
        rules = (Rule(LinkExtractor(), callback="parse_page"),)

        def parse_page(self, response):
            pass

    crawl, plain = Rules(), Spider(name="plain")
    fr = to_frontier(Request("http://a.test/", callback=crawl._callback, errback=crawl._errback), crawl)
    assert fr.meta[b"scrapy_callback"] == "_callback" and fr.meta[b"scrapy_errback"] == "_errback"
    assert spider_method(crawl, "_callback") == crawl._callback
    with pytest.raises(UnusableRequest, match="'_callback' refused"):
        spider_method(plain, "_callback")
    with pytest.raises(UnusableRequest, match="'_compile_rules' refused"):
        spider_method(crawl, "_compile_rules")
