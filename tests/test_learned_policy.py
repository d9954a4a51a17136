"""The ``learned`` policy: keys are the shipped model over counts kept from the crawl."""

from __future__ import annotations

import json

import numpy as np
import pytest

from frontera_linkrank.scheduling.policies import POLICIES, learned
from frontera_linkrank.simulation.crawl import LINKRANK, crawl
from frontera_linkrank.storage.vertices import CRAWLED, UNFETCHED
from test_simulate import random_graph


def test_learned_keys_are_the_model_over_the_crawled_links(tmp_path):
    graph = random_graph(n=400, hosts=8, deg=5, seed=4, dups=False)
    where = {fp: v for v, fp in enumerate(graph.fingerprints)}

    def check(backend, n_crawled):
        # Recompute the features of every waiting page from the graph and
        # the crawled pages, and compare with the frontier's keys.
        core = backend.core
        t = core.db.vertices
        n = t.n
        vert = np.array([where[bytes(t.fp[i]).hex().encode()] for i in range(n)])
        crawled = t.state[:n] == CRAWLED
        host = t.host[:n].astype(np.int64)
        indeg = np.zeros(n)
        same = np.zeros(n)
        local = {int(v): i for i, v in enumerate(vert)}
        for i in np.flatnonzero(crawled):
            kids = {local[int(w)] for w in graph.indices[graph.indptr[vert[i]]:graph.indptr[vert[i] + 1]]} - {i}
            for k in kids:
                indeg[k] += 1
                same[k] += host[k] == host[i]
        waiting = np.flatnonzero(t.state[:n] == UNFETCHED)
        h = host[waiting]
        template = same[waiting] / np.maximum(np.bincount(host[crawled], minlength=h.max() + 1)[h], 1) \
            * np.bincount(host, minlength=h.max() + 1)[h]
        f = np.column_stack([np.log(core.push.values(waiting)), np.log1p(indeg[waiting]),
                             t.depth[waiting].astype(np.float64), np.log1p(template)])
        return float(np.abs(core.frontier.priority(waiting) - f @ learned.WEIGHTS).max())

    res = crawl(graph, LINKRANK, [0, 7], 150, batch=20, workdir=str(tmp_path), observe=check,
                checkpoints=(40, 100), settings={"LINKRANK_POLICY": "learned"})
    assert len(res.order) == len(set(res.order)) == 150  # no duplicate fetch
    assert [c for c, _ in res.observations] == [40, 100]
    for _, err in res.observations:
        assert err < 1e-9


def test_learned_is_a_policy_and_its_weights_file_is_checked(tmp_path):
    assert POLICIES["learned"].estimate == "push"
    assert len(learned.load_weights()) == len(learned.FEATURES)
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps({"features": ["log_push"], "weights": [1.0]}))
    with pytest.raises(ValueError, match="w.json: features"):
        learned.load_weights(str(bad))
