"""Crawl-order fingerprints: one SHA-256 of the fetch order per (graph, configuration).

A refactoring guard: the order the frontier fetches in is its product, and
a restructuring of the code must not change it by accident. The hashes in
``tests/data/crawl_order_hashes.json`` were recorded from the code as it
was; ``test_crawl_order_unchanged.py`` recomputes them, one test per part
of :data:`PARTS` (so that pytest-xdist spreads them over its workers),
but for the uk-2007 parts, which ``test_crawl_quality.py`` checks on the
crawls it measures.

Re-record them only for a change that is *meant* to alter the order (a new
default, a fixed tie-break, a policy that ranks differently), and say so in
the commit, with the measurement that shows the new order is better or
equal::

    python tests/order_fingerprints.py --write

Re-recording after an unintended change would turn the guard into a
rubber stamp; a change that should not alter the order and does is a bug
to find, not hashes to update.

What is covered, each distinct configuration once: every policy, and each
setting variant that takes another path of the frontier, on Hollins (whole
crawl); the policies whose order depends on the politeness loop on Hollins
with host delays; the policies whose state grows with the crawl (cash,
periodic rankings, push mass) on the first 20,000 pages of
uk-2007-05@100000; Frontera's graph fixtures through ``FrontierTester``
with the configurations whose orders differ there. Variants that gave the
same order as another configuration in every context were dropped (``score``
is ``fifo`` without content scores, a history window of 0.5 with cash time
is plain ``opic``; Frontera's fixture graphs 04-07 give one order for every
configuration: one configuration is kept there).

Each run goes through Frontera's ``FrontierManager`` (the public interface)
with rankings computed inline, so the order is reproducible.
"""

import functools
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "data", "crawl_order_hashes.json")

POLICIES = ("opic", "fifo", "pagerank", "hits", "hybrid", "push", "hybrid-push")
# Variants that take other paths of the frontier.
VARIANTS = {
    "hybrid+unfetched": {"LINKRANK_POLICY": "hybrid", "LINKRANK_OMEGA_POLICY": "unfetched"},
    "opic+fetched": {"LINKRANK_POLICY": "opic", "LINKRANK_OMEGA_POLICY": "fetched"},
    "opic+host-budget": {"LINKRANK_POLICY": "opic", "LINKRANK_MAX_PAGES_PER_HOST": 300},
    "opic+link-cap": {"LINKRANK_POLICY": "opic", "LINKRANK_MAX_LINKS_PER_PAGE": 10},
    "opic+exact-requeue": {"LINKRANK_POLICY": "opic", "LINKRANK_REQUEUE_TOLERANCE": 0},
    "hybrid-push+unfetched": {"LINKRANK_POLICY": "hybrid-push", "LINKRANK_OMEGA_POLICY": "unfetched"},
}
CONFIGS = {**{p: {"LINKRANK_POLICY": p} for p in POLICIES}, **VARIANTS}

#: Configurations of each context (a name of :data:`CONFIGS`).
HOLLINS = tuple(CONFIGS)
POLITE = ("opic", "fifo", "hybrid", "hybrid-push", "opic+host-budget")
UK2007 = ("opic", "hybrid", "push", "hybrid-push")
# On Frontera's fixtures the setting variants of opic give opic's order
# (the graphs are too small for them to act): the others are kept.
FIXTURES = (*POLICIES, "hybrid+unfetched", "opic+fetched", "hybrid-push+unfetched")
FIXTURES_ONE_ORDER = ("GRAPH 04", "GRAPH 05", "GRAPH 06", "GRAPH 07")  # one order for every configuration

#: The parts the test checks one by one: a key prefix each.
UK2007_PARTS = tuple(f"uk2007/batch/{c}" for c in UK2007)  # checked by test_crawl_quality.py
PARTS = ("hollins/batch", "hollins/polite", *UK2007_PARTS, "frontera")


def _digest(order):
    return hashlib.sha256("\n".join(map(str, order)).encode()).hexdigest()


def graph_orders(graph, budget, seeds, configs, polite=False):
    """{config: sha256 of the fetch order} of simulated crawls of ``graph``."""
    from frontera_linkrank.simulation.crawl import LINKRANK, Politeness, crawl

    out = {}
    for name in configs:
        with tempfile.TemporaryDirectory() as d:
            politeness = Politeness(delay=2.0, concurrency=16) if polite else None
            res = crawl(graph, LINKRANK, seeds, budget, batch=100, settings=CONFIGS[name], workdir=d,
                        politeness=politeness)  # fmt: skip
        out[name] = _digest(res.order)
    return out


def fixture_orders():
    """{graph/batch/config: sha256} through Frontera's FrontierTester."""
    from frontera import FrontierManager, Settings
    from frontera.utils.tester import BaseDownloaderSimulator, DownloaderSimulator, FrontierTester

    sys.path.insert(0, HERE)
    from frontera_graphs import GraphManager, graphs

    out = {}
    for gname, graph in graphs():
        configs = FIXTURES[:1] if gname in FIXTURES_ONE_ORDER else FIXTURES
        for batch, sim in ((1, BaseDownloaderSimulator), (10, BaseDownloaderSimulator), (3, DownloaderSimulator)):
            for name in configs:
                with tempfile.TemporaryDirectory() as d:
                    attrs = {
                        "BACKEND": "frontera_linkrank.LinkRankBackend",
                        "TEST_MODE": True,
                        "LINKRANK_PATH": os.path.join(d, "db"),
                        "LINKRANK_SYNC": False,
                        "LINKRANK_RANK_BACKGROUND": False,
                        "LINKRANK_RANK_INTERVAL": 0,
                        "LINKRANK_RANK_EVERY_PAGES": 3,
                        **CONFIGS[name],
                    }
                    manager = FrontierManager.from_settings(Settings(attributes=attrs))
                    simulator = sim(rate=1) if sim is DownloaderSimulator else sim()
                    tester = FrontierTester(manager, GraphManager().add_site_list(graph), simulator,
                                            max_next_requests=batch)
                    tester.run()
                order = [[r.url for r in reqs] for reqs, _, _ in tester.sequence]
                out[f"{gname}/b{batch}/{sim.__name__}/{name}"] = _digest(order)
    return out


def _seeds(graph):
    return np.random.default_rng(0).choice(graph.n, 10, replace=False).tolist()


#: Pages of uk-2007-05@100000 crawled by each run of the uk2007 parts.
UK2007_BUDGET = 20_000


@functools.cache
def uk2007_order(config):
    """The fetch order of the first :data:`UK2007_BUDGET` pages of
    uk-2007-05@100000 (hosts inferred) with ``config`` (a name of
    :data:`CONFIGS`; ``"default"``: no setting; ``"bfs"``: Frontera's memory
    BFS), from 10 seeds.
    Kept for the process: ``test_crawl_quality.py`` measures these same
    crawls."""
    from frontera_linkrank.simulation.crawl import BFS, LINKRANK, crawl
    from frontera_linkrank.simulation.datasets import load_graph

    g = load_graph("uk2007")
    backend, settings = (BFS, {}) if config == "bfs" else (LINKRANK, CONFIGS.get(config, {}))
    if config not in CONFIGS and config not in ("bfs", "default"):
        raise ValueError(f"unknown configuration {config!r}")
    with tempfile.TemporaryDirectory() as d:
        return tuple(crawl(g, backend, _seeds(g), UK2007_BUDGET, batch=100, settings=settings, workdir=d).order)


def part_orders(part):
    """{key: sha256} of one part of :data:`PARTS` (keys start with ``part``)."""
    from frontera_linkrank.simulation.datasets import load_graph

    if part == "frontera":
        return {f"frontera/{k}": v for k, v in fixture_orders().items()}
    if part.startswith("hollins/"):
        g = load_graph("hollins")
        polite = part == "hollins/polite"
        got = graph_orders(g, 3000 if polite else g.n, _seeds(g), POLITE if polite else HOLLINS, polite=polite)
        return {f"{part}/{k}": v for k, v in got.items()}
    if part.startswith("uk2007/batch/"):
        return {part: _digest(uk2007_order(part.rsplit("/", 1)[1]))}
    raise ValueError(f"unknown part {part!r}")


def all_orders():
    out = {}
    for part in PARTS:
        out.update(part_orders(part))
    return out


if __name__ == "__main__":
    got = all_orders()
    if "--write" in sys.argv:
        os.makedirs(os.path.dirname(RECORD), exist_ok=True)
        with open(RECORD, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(got)} hashes ({len(set(got.values()))} distinct orders) to {RECORD}")
    else:
        json.dump(got, sys.stdout, indent=1, sort_keys=True)
