"""A crawl policy owns its state: the protocol of ``scheduling/policies/base.py``.

- a policy defined and registered here, outside the package, with state of
  its own (known in-links per page, counted from each batch it is told
  of) is a valid ``LINKRANK_POLICY`` and crawls: its order is exactly
  that of the simulator's backlink-count baseline, an independent
  implementation of the same rule;
- its hooks are called as the protocol says (a ranking re-keys the queue
  when it asks for it, ``rekey`` rebuilds it);
- names are unique in the registry;
- the frontier core names no policy.

This file is the example docs/architecture.md ("Adding a crawl policy") points to.
"""

import os
import re

import numpy as np
import pytest

from frontera_linkrank.core.frontier_core import FrontierCore
from frontera_linkrank.scheduling.policies import POLICIES, Batch, Policy, PolicyContext, register
from frontera_linkrank.settings import LinkRankSettings, SettingsError
from frontera_linkrank.simulation.baselines import BACKENDS
from frontera_linkrank.simulation.crawl import LINKRANK, crawl
from frontera_linkrank.simulation.datasets import load_graph


class InLinks(Policy):
    """Most known in-links (from distinct crawled pages) first: a policy
    with state of its own, kept from the batches it is told of."""

    name = "test-inlinks"

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.count = np.zeros(max(ctx.table.n, 1024))
        self.calls = {"on_batch": 0, "on_ranking": 0, "rekey": 0}
        if ctx.db is not None and ctx.table.n:  # a reopened database: count its stored links
            from frontera_linkrank.scoring.links import database_adjacency

            with ctx.db.snapshot() as txn:
                a = database_adjacency(ctx.db, txn, ctx.table.n)
            self._grow(ctx.table.n)
            self.count[: ctx.table.n] = np.bincount(a.indices, minlength=ctx.table.n)

    def _grow(self, n: int) -> None:
        if n > len(self.count):
            self.count = np.concatenate((self.count, np.zeros(max(n, 2 * len(self.count)) - len(self.count))))

    def keys(self, idx: np.ndarray) -> np.ndarray:
        self._grow(self.table.n)
        return self.count[idx]

    def on_batch(self, batch: Batch) -> None:
        self.calls["on_batch"] += 1
        self._grow(self.table.n)
        for row in batch.rows:  # distinct targets, no self-link: one in-link each
            self.count[row] += 1.0
        # (The targets of the rows are offered to the queue by the core.)

    def on_ranking(self, ranking) -> bool:
        self.calls["on_ranking"] += 1
        return False

    def rekey(self) -> bool:
        self.calls["rekey"] += 1
        return False


@pytest.fixture(autouse=True, scope="module")
def registered():
    """The policy is registered for this module's tests only (the settings
    document lists the registered policies)."""
    register(InLinks)
    yield
    POLICIES.pop(InLinks.name, None)


def test_a_policy_registered_outside_the_package_is_a_valid_setting():
    assert POLICIES["test-inlinks"] is InLinks
    assert LinkRankSettings(POLICY="test-inlinks").POLICY == "test-inlinks"
    with pytest.raises(SettingsError, match="must be one of"):
        LinkRankSettings(POLICY="test-nothing")


def test_names_are_unique():
    register(InLinks)  # the same class again: fine
    clash = type("Clash", (InLinks,), {"name": "opic"})
    with pytest.raises(ValueError, match="already registered"):
        register(clash)
    with pytest.raises(ValueError, match="empty"):
        register(type("Nameless", (Policy,), {}))


def test_a_stateful_policy_crawls_as_the_reference_implementation_of_its_rule(tmp_path):
    graph = load_graph("hollins")
    seeds = [0, 100, 2000]
    calls = {}

    def observe(backend, n):
        calls.update(backend.core.policy.calls)
        return n

    ours = crawl(graph, LINKRANK, seeds, 1500, batch=50, workdir=str(tmp_path / "ours"), observe=observe,
                 checkpoints=(1500,), settings={"LINKRANK_POLICY": "test-inlinks", "LINKRANK_RANK_EVERY_PAGES": 500,
                                                "LINKRANK_RANK_GROWTH": 0})
    reference = crawl(graph, BACKENDS["backlinks"], seeds, 1500, batch=50)
    assert len(ours.order) == len(set(ours.order)) == 1500
    assert ours.order == reference.order
    # Told of every batch, asked before every hand-out, told of each ranking.
    assert calls["on_batch"] >= 1500 / 50 and calls["rekey"] >= 1500 / 50
    assert calls["on_ranking"] >= 2


def test_reopening_builds_the_state_from_the_database(tmp_path):
    graph = load_graph("hollins")
    crawl(graph, LINKRANK, [0, 100, 2000], 300, batch=50, workdir=str(tmp_path),
          settings={"LINKRANK_POLICY": "test-inlinks", "LINKRANK_RANK_ALGORITHMS": "none"})
    core = FrontierCore(LinkRankSettings({"LINKRANK_PATH": str(tmp_path / "db"), "LINKRANK_SYNC": False,
                                          "LINKRANK_POLICY": "test-inlinks", "LINKRANK_RANK_ALGORITHMS": "none"}))
    try:
        assert isinstance(core.policy, InLinks)
        v = core.db.vertices
        assert core.policy.count[: v.n].sum() == core.db.cold.get("n_out", np.arange(v.n)).sum() > 0
        queued = np.flatnonzero(v.state[: v.n] == 0)
        first = core.next_requests(1)
        assert len(first) == 1
        best = core.policy.count[queued].max()
        taken = core.db.find(bytes.fromhex(first[0].meta[b"fingerprint"].decode()))
        assert core.policy.count[taken] == best
    finally:
        core.close()


def test_the_core_names_no_policy():
    """core/ reaches policies only through the registry and the protocol:
    it imports no policy module and never compares the policy's name."""
    root = os.path.join(os.path.dirname(__file__), "..", "frontera_linkrank", "core")
    for file in os.listdir(root):
        if file.endswith(".py"):
            with open(os.path.join(root, file), encoding="utf-8") as f:
                text = f.read()
            assert "push" not in text, file
            assert not re.search(r"scheduling\.policies\.\w+ import|policies import \w+ as", text), file
            assert not re.search(r"(POLICY|policy\.name)\s*(==|!=|in\b)", text), file
