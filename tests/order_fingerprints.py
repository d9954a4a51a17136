"""Crawl-order fingerprints: one SHA-256 per (graph, configuration).

The redesign of the package must not change what the frontier fetches: a
hash of the order every policy crawls in is recorded in
``tests/data/crawl_order_hashes.json`` and ``test_crawl_order_unchanged.py``
recomputes it. Re-record (only for an intended change of order) with::

    python tests/order_fingerprints.py --write

Each run goes through Frontera's ``FrontierManager`` (the public interface)
with rankings computed inline, so the order is reproducible.
"""

import hashlib
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "data", "crawl_order_hashes.json")

POLICIES = ("opic", "fifo", "score", "pagerank", "hits", "hybrid", "push", "hybrid-push")
# Variants of the default policy that take other paths of the frontier.
VARIANTS = {
    "hybrid+unfetched": {"LINKRANK_POLICY": "hybrid", "LINKRANK_OMEGA_POLICY": "unfetched"},
    "opic+fetched": {"LINKRANK_POLICY": "opic", "LINKRANK_OMEGA_POLICY": "fetched"},
    "opic+host-budget": {"LINKRANK_POLICY": "opic", "LINKRANK_MAX_PAGES_PER_HOST": 300},
    "opic+link-cap": {"LINKRANK_POLICY": "opic", "LINKRANK_MAX_LINKS_PER_PAGE": 10},
    "opic+window": {"LINKRANK_POLICY": "opic", "LINKRANK_HISTORY_WINDOW": 0.5, "LINKRANK_HISTORY_TIME": "cash"},
    "opic+exact-requeue": {"LINKRANK_POLICY": "opic", "LINKRANK_REQUEUE_TOLERANCE": 0},
    "hybrid-push+unfetched": {"LINKRANK_POLICY": "hybrid-push", "LINKRANK_OMEGA_POLICY": "unfetched"},
}


def _digest(order):
    return hashlib.sha256("\n".join(map(str, order)).encode()).hexdigest()


def _configs():
    out = {p: {"LINKRANK_POLICY": p} for p in POLICIES}
    out.update(VARIANTS)
    return out


def graph_orders(graph, budget, seeds, polite=False):
    """{config: sha256 of the fetch order} of a simulated crawl of ``graph``."""
    from frontera_linkrank.simulation.crawl import LINKRANK, Politeness, crawl

    out = {}
    for name, settings in _configs().items():
        with tempfile.TemporaryDirectory() as d:
            politeness = Politeness(delay=2.0, concurrency=16) if polite else None
            res = crawl(graph, LINKRANK, seeds, budget, batch=100, settings=settings, workdir=d, politeness=politeness)
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
        for batch, sim in ((1, BaseDownloaderSimulator), (10, BaseDownloaderSimulator), (3, DownloaderSimulator)):
            for name, settings in _configs().items():
                with tempfile.TemporaryDirectory() as d:
                    attrs = {
                        "BACKEND": "frontera_linkrank.LinkRankBackend",
                        "TEST_MODE": True,
                        "LINKRANK_PATH": os.path.join(d, "db"),
                        "LINKRANK_SYNC": False,
                        "LINKRANK_RANK_BACKGROUND": False,
                        "LINKRANK_RANK_INTERVAL": 0,
                        "LINKRANK_RANK_EVERY_PAGES": 3,
                        **settings,
                    }
                    manager = FrontierManager.from_settings(Settings(attributes=attrs))
                    simulator = sim(rate=1) if sim is DownloaderSimulator else sim()
                    tester = FrontierTester(manager, GraphManager().add_site_list(graph), simulator,
                                            max_next_requests=batch)
                    tester.run()
                order = [[r.url for r in reqs] for reqs, _, _ in tester.sequence]
                out[f"{gname}/b{batch}/{sim.__name__}/{name}"] = _digest(order)
    return out


def all_orders():
    from frontera_linkrank.simulation.datasets import load_graph

    out = {}
    hollins = load_graph("hollins")
    seeds = np.random.default_rng(0).choice(hollins.n, 10, replace=False).tolist()
    for k, v in graph_orders(hollins, hollins.n, seeds).items():
        out[f"hollins/batch/{k}"] = v
    for k, v in graph_orders(hollins, 3000, seeds, polite=True).items():
        out[f"hollins/polite/{k}"] = v
    uk = load_graph("uk2007")
    seeds = np.random.default_rng(0).choice(uk.n, 10, replace=False).tolist()
    for k, v in graph_orders(uk, 20_000, seeds).items():
        out[f"uk2007/batch/{k}"] = v
    for k, v in fixture_orders().items():
        out[f"frontera/{k}"] = v
    return out


if __name__ == "__main__":
    got = all_orders()
    if "--write" in sys.argv:
        os.makedirs(os.path.dirname(RECORD), exist_ok=True)
        with open(RECORD, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(got)} hashes to {RECORD}")
    else:
        json.dump(got, sys.stdout, indent=1, sort_keys=True)
