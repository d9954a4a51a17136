"""Recrawl building blocks: change-rate estimators, change detection, refresh order."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontera_linkrank.recrawl.content import content_hash
from frontera_linkrank.recrawl.estimators import bias_reduced, estimate, mle
from frontera_linkrank.recrawl.refresh import RefreshIndex, due_interval, refresh_value, solve_threshold


@pytest.mark.parametrize("n", [10, 20, 50])
@pytest.mark.parametrize("lam_i", [0.05, 0.1, 0.25, 0.5, 0.75, 1.0])
def test_bias_reduced_estimator_bias_under_2_percent(n, lam_i):
    rng = np.random.default_rng(int(lam_i * 1000) + n)
    interval = 3600.0
    lam = lam_i / interval
    x = rng.binomial(n, 1 - math.exp(-lam_i), 200_000)
    est = -np.log((n - x + 0.5) / (n + 0.5)) / interval
    assert abs(est.mean() / lam - 1) < 0.02
    naive = x / (n * interval)
    if lam_i >= 0.25:
        assert naive.mean() / lam - 1 < -0.1  # what the bias reduction is for
    assert bias_reduced(n, int(x[0]), interval) == pytest.approx(est[0])


def test_regular_visits_use_the_bias_reduced_estimator():
    assert estimate([60.0] * 12, [True] * 5 + [False] * 7) == pytest.approx(bias_reduced(12, 5, 60.0))


def test_mle_on_irregular_visits_recovers_the_rate():
    rng = np.random.default_rng(3)
    lam = 0.02
    t = rng.uniform(5, 150, 4000)
    c = rng.random(4000) < 1 - np.exp(-lam * t)
    assert mle(t, c) == pytest.approx(lam, rel=0.05)
    assert estimate(t, c) == pytest.approx(mle(t, c))


def test_mle_edge_cases_and_the_prior():
    assert mle([1.0, 2.0], [False, False]) == 0.0
    assert mle([1.0, 2.0], [True, True]) == math.inf
    assert estimate([], [], prior_rate=0.01, prior_visits=2) == pytest.approx(0.01)
    # all changed: finite with a prior, between the prior and "very fast"
    r = estimate([10.0, 30.0], [True, True], prior_rate=0.01, prior_visits=2)
    assert 0.01 < r < math.inf
    # many visits swamp the prior
    rng = np.random.default_rng(0)
    t = rng.uniform(1, 3, 500)
    c = rng.random(500) < 1 - np.exp(-0.5 * t)
    assert estimate(t, c, prior_rate=10.0, prior_visits=2) == pytest.approx(mle(t, c), rel=0.05)


PAGE = """<html><head><title>News</title><script>var now = {ts};</script>
<style>.x{{color:red}}</style></head><body>
<!-- rendered in {ms} ms at {time} -->
<p>Last updated {date}. {text}</p>
<a href="/story?id=5&amp;sid={sid}">story</a> <a href='/about;jsessionid={sid}'>about</a>
<input type=hidden name=csrf value="{token}"> Visitors: {ts}
</body></html>"""


def page(text="Markets rose.", **kw):
    v = dict(
        ts="1732350000", ms="12", time="12:00:01", date="2024-11-23", sid="a1b2c3", token="f00dfeed1234567890abcdef"
    )
    v.update(kw)
    return PAGE.format(text=text, **v).encode()


def test_volatile_parts_are_not_a_change():
    base = content_hash(page())
    assert (
        content_hash(
            page(ts="1732359999", ms="40", time="13:45:09", date="2024-11-24", sid="zz9", token="0123456789abcdef0123")
        )
        == base
    )
    assert content_hash(page(text="Markets fell.")) != base
    assert content_hash(page().replace(b"/story?id=5", b"/story?id=6")) != base  # a link changed


def test_non_html_is_hashed_as_is():
    assert content_hash(b'{"a": 1}', "application/json") == content_hash(b'{"a":  1} ', "application/json")
    assert content_hash(b"\x00\x01", "image/png") != content_hash(b"\x00\x02", "image/png")
    assert content_hash(b"", "text/plain") != 0


@settings(max_examples=200, deadline=None)
@given(
    w=st.floats(1e-6, 1e3),
    lam=st.floats(1e-6, 10),
    mu_frac=st.floats(1e-6, 0.999),
)
def test_due_interval_inverts_the_refresh_value(w, lam, mu_frac):
    mu = mu_frac * w / lam  # reachable: below the limit w/lam
    tau = due_interval(np.array([w]), np.array([lam]), mu)[0]
    assert math.isfinite(tau) and tau > 0
    assert refresh_value(w, lam, tau) == pytest.approx(mu, rel=1e-6)
    assert refresh_value(w, lam, tau * 1.01) > refresh_value(w, lam, tau)  # increasing


def test_unreachable_thresholds_mean_never_due():
    assert math.isinf(due_interval(np.array([1.0]), np.array([1.0]), 1.0)[0])
    assert math.isinf(due_interval(np.array([1.0]), np.array([0.0]), 0.1)[0])


def test_threshold_matches_the_refresh_bandwidth():
    rng = np.random.default_rng(0)
    w = rng.pareto(1.5, 2000) + 0.01
    lam = 10 ** rng.uniform(-4, -1, 2000)
    for rate in (0.1, 1.0, 10.0):
        mu = solve_threshold(w, lam, rate)
        assert (1 / due_interval(w, lam, mu)).sum() == pytest.approx(rate, rel=1e-6)


def test_refresh_index_pops_most_overdue_first_and_skips():
    idx = RefreshIndex()
    for p, d in [(1, 50.0), (2, 10.0), (3, 30.0), (4, 200.0)]:
        idx.schedule(p, d)
    idx.schedule(3, 5.0)  # rescheduled earlier
    assert idx.pop_due(100.0, 10, skip=lambda p: p == 2) == [3, 1]
    assert idx.pop_due(100.0, 10) == [2]
    assert idx.pop_due(1000.0, 10) == [4] and len(idx) == 0
