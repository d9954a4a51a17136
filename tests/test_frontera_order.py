"""Crawl order through Frontera's own FrontierTester on its graph fixtures.

Frontera's memory FIFO backend is the oracle: with ``LINKRANK_POLICY =
"fifo"`` the sequence of handed-out URLs must be identical, batch for batch.
"""

import pytest
from frontera import FrontierManager, Settings
from frontera.utils.tester import BaseDownloaderSimulator, DownloaderSimulator, FrontierTester

from frontera_graphs import GraphManager, graphs

GRAPHS = graphs()
BATCHES = [1, 2, 5, 10, 100]


def run(graph, batch, path, backend="frontera_linkrank.LinkRankBackend", simulator=None, **settings):
    attrs = {
        "BACKEND": backend,
        "TEST_MODE": True,
        "LINKRANK_PATH": str(path),
        "LINKRANK_SYNC": False,
        **settings,
    }
    manager = FrontierManager.from_settings(Settings(attributes=attrs))
    tester = FrontierTester(
        manager,
        GraphManager().add_site_list(graph),
        simulator or BaseDownloaderSimulator(),
        max_next_requests=batch,
    )
    tester.run()  # also asserts method, headers, cookies and meta survive
    return [[r.url for r in reqs] for reqs, _, _ in tester.sequence]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("graph", [g for _, g in GRAPHS], ids=[n for n, _ in GRAPHS])
def test_fifo_equals_frontera_memory_fifo(graph, batch, tmp_path):
    expected = run(graph, batch, tmp_path / "fifo", backend="frontera.contrib.backends.memory.FIFO")
    got = run(graph, batch, tmp_path / "db", LINKRANK_POLICY="fifo")
    assert got == expected
    assert sum(map(len, got)) > 0


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("graph", [g for _, g in GRAPHS], ids=[n for n, _ in GRAPHS])
def test_opic_crawls_every_page_exactly_once(graph, batch, tmp_path):
    reachable = {
        u for reqs in run(graph, 100, tmp_path / "fifo", backend="frontera.contrib.backends.memory.FIFO") for u in reqs
    }
    urls = [u for reqs in run(graph, batch, tmp_path / "db", LINKRANK_POLICY="opic") for u in reqs]
    assert len(urls) == len(set(urls))
    assert set(urls) == reachable


@pytest.mark.parametrize("graph", [g for _, g in GRAPHS], ids=[n for n, _ in GRAPHS])
def test_opic_with_overused_slots_crawls_every_page_once(graph, tmp_path):
    # DownloaderSimulator reports hosts with a backlog as overused keys.
    reachable = {
        u for reqs in run(graph, 100, tmp_path / "fifo", backend="frontera.contrib.backends.memory.FIFO") for u in reqs
    }
    urls = [u for reqs in run(graph, 3, tmp_path / "db", simulator=DownloaderSimulator(rate=1)) for u in reqs]
    assert len(urls) == len(set(urls))
    assert set(urls) == reachable
