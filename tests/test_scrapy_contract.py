"""Scrapy's contract about requests, kept: each through real ``scrapy crawl``
runs, side by side with Scrapy's own scheduler where both must agree.

- a stock ``scrapy genspider -t crawl`` spider, with nothing changed but
  the one ``ADDONS`` line, stays on its ``allowed_domains`` exactly as with
  Scrapy's scheduler: the same pages, the same offsite counts;
- three POSTs to one URL with different bodies are three fetches (a fourth
  with a repeated body is a duplicate);
- ``dont_filter=True`` fetches a page again; the same request without it
  is a duplicate (``request_dropped``, ``dupefilter/filtered``);
- a spider giving detail pages priority 10 gets them first.
"""

import collections
import os
import re
import shutil
import subprocess

from crawlweb import BIN, ROOT, TestWebServer, crawl_env, scrapy_stats

PROBE = os.path.join(os.path.dirname(__file__), "crawl_project")
SCRAPY_SCHEDULER = "scrapy.core.scheduler.Scheduler"


def write_web(path, edges):
    with open(path, "w") as f:
        f.write("".join(f"{s}\t{d}\n" for s, d in edges))
    return str(path)


def web_server(web, tmp_path, name):
    """The test web serving ``web``, with its log and port file in a folder of its own."""
    os.makedirs(tmp_path / name)
    return TestWebServer(web, str(tmp_path / name))


def fetches(srv):
    """(method, URL) -> fetches, robots.txt excluded."""
    return collections.Counter((m, u) for _, m, u, _ in srv.requests() if not u.endswith("/robots.txt"))


def drop_fresh_database(log):
    """Remove the fresh page database a crawl without LINKRANK_PATH made (the log names it)."""
    m = re.search(r"LinkRank page database of this crawl: (\S+) \(", log)
    assert m, "the end-of-crawl line names the database"
    assert os.path.isdir(m.group(1))
    shutil.rmtree(os.path.dirname(m.group(1)))


def two_domain_web(path):
    """www.a.test and www.b.test, linked both ways; some pages of a are
    linked only from b (so an offsite crawl would reach them)."""
    a = [f"http://www.a.test/Items/{k}" for k in range(12)]
    b = [f"http://www.b.test/Items/{k}" for k in range(12)]
    edges = [(a[k], a[k + 1]) for k in range(8)] + [(a[k], b[k]) for k in range(8)]
    edges += [(b[k], b[(k + 1) % 12]) for k in range(12)] + [(b[k], a[8 + k % 4]) for k in range(12)]
    # (No link back to the start page: Scrapy's scheduler would fetch it
    # twice, its start request being dont_filter and not recorded as seen.)
    return write_web(path, edges), a, b


def test_genspider_crawlspider_stays_on_its_domain_as_with_scrapys_scheduler(tmp_path):
    web, a, b = two_domain_web(tmp_path / "web.tsv")
    env = dict(crawl_env("http://127.0.0.1:9"), PYTHONPATH=ROOT)
    scrapy = os.path.join(BIN, "scrapy")
    subprocess.run([scrapy, "startproject", "shop", str(tmp_path / "shop")], check=True, capture_output=True,
                   env=env)
    project = tmp_path / "shop"
    subprocess.run([scrapy, "genspider", "-t", "crawl", "items", a[0]], cwd=project, check=True,
                   capture_output=True, env=env)
    assert 'allowed_domains = ["www.a.test"]' in (project / "shop" / "spiders" / "items.py").read_text()
    runs = {}
    for which in ("scrapy", "linkrank"):
        if which == "linkrank":
            with open(project / "shop" / "settings.py", "a") as f:
                f.write('\nADDONS = {"frontera_linkrank.scrapy.Addon": 0}\n')
        with web_server(web, tmp_path, which) as srv:
            out = subprocess.run([scrapy, "crawl", "items", "-s", "LOG_LEVEL=INFO"], cwd=project,
                                 env=crawl_env(srv.proxy), capture_output=True, text=True, timeout=180)
            assert out.returncode == 0, out.stderr[-3000:]
            runs[which] = (fetches(srv), scrapy_stats(out.stderr), out.stderr)
    (theirs, their_stats, _), (ours, our_stats, log) = runs["scrapy"], runs["linkrank"]
    assert "LinkRank frontier" in log and "LinkRank" not in runs["scrapy"][2]
    assert set(ours) == set(theirs) and max(ours.values()) == 1
    assert {u for _, u in ours} == set(a[:9])  # a[9:] are linked from b only
    for stat in ("offsite/filtered", "offsite/domains", "item_scraped_count", "response_received_count"):
        assert our_stats.get(stat) == their_stats.get(stat), stat
    assert our_stats["offsite/filtered"] > 0 and our_stats["scheduler/enqueued/linkrank"] == 9
    assert our_stats["scheduler/dequeued/linkrank"] == 9
    drop_fresh_database(log)


def contract_crawl(srv, tmp_path, start, mode, scheduler=None, **settings):
    cmd = [os.path.join(BIN, "scrapy"), "crawl", "contract", "-a", f"start={start}", "-a", f"mode={mode}",
           "-s", "LOG_LEVEL=DEBUG", "-s", "LINKRANK_SYNC=False", "-s", f"LINKRANK_PATH={tmp_path / mode / 'db'}"]
    if scheduler:
        cmd += ["-s", f"SCHEDULER={scheduler}"]
    for k, v in settings.items():
        cmd += ["-s", f"{k}={v}"]
    out = subprocess.run(cmd, cwd=PROBE, env=crawl_env(srv.proxy), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr, scrapy_stats(out.stderr)


def test_posts_with_different_bodies_are_different_requests(tmp_path):
    web = write_web(tmp_path / "web.tsv", [("http://www.a.test/form", "http://www.a.test/done")])
    counts = {}
    for scheduler in (SCRAPY_SCHEDULER, None):
        with web_server(web, tmp_path, str(scheduler)) as srv:
            log, stats = contract_crawl(srv, tmp_path, "http://www.a.test/form", "post", scheduler)
            counts[scheduler] = fetches(srv)
        assert stats["dupefilter/filtered"] == 1
    assert counts[None] == counts[SCRAPY_SCHEDULER] == {("POST", "http://www.a.test/form"): 3}
    assert stats["linkrank/pages"] == 3  # three pages, one URL


def test_dont_filter_fetches_again(tmp_path):
    s = "http://www.a.test/"
    web = write_web(tmp_path / "web.tsv", [(s, s + "1"), (s, s + "2"), (s + "1", s + "3"), (s + "2", s + "3")])
    counts = {}
    for scheduler in (SCRAPY_SCHEDULER, None):
        with web_server(web, tmp_path, str(scheduler)) as srv:
            log, stats = contract_crawl(srv, tmp_path, s, "refetch", scheduler)
            counts[scheduler] = fetches(srv)
    assert counts[None] == counts[SCRAPY_SCHEDULER]
    assert counts[None][("GET", s)] == 2 and all(n == 1 for (_, u), n in counts[None].items() if u != s)
    assert stats["linkrank/refetches"] == 1 and stats["dupefilter/filtered"] >= 1
    assert "Filtered duplicate request: <GET http://www.a.test/>" in log


def test_priority_goes_first(tmp_path):
    s = "http://www.a.test/"
    details = [f"{s}detail/{k}" for k in range(8)]
    lists = [f"{s}list/{k}" for k in range(8)]
    more = [f"{s}detail/{k}" for k in range(8, 16)]
    edges = [(s, u) for pair in zip(lists, details) for u in pair]
    edges += [(lists[k], more[k]) for k in range(8)] + [(lists[k], lists[(k + 1) % 8]) for k in range(8)]
    web = write_web(tmp_path / "web.tsv", edges)
    with web_server(web, tmp_path, "web") as srv:
        contract_crawl(srv, tmp_path, s, "priority", CONCURRENT_REQUESTS=1)
        order = [u for _, m, u, _ in srv.requests() if not u.endswith("/robots.txt")]
    assert order[0] == s and set(order) == {s, *details, *lists, *more}
    assert set(order[1:9]) == set(details)  # all priority 10, found with the lists
    # A detail page a list page revealed goes before the list pages after
    # it (but one: the next request may leave before the page's links are in).
    for k, u in enumerate(lists):
        between = order[order.index(u) + 1 : order.index(more[k])]
        assert len([v for v in between if v in lists]) <= 1, (u, order)
