import os
import sys

import pytest
from hypothesis import settings

# The property tests draw the same examples on every run (CI included), so
# a failure is a change, not luck; HYPOTHESIS_PROFILE=explore draws new
# ones to look for more.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)

# Scripts run as subprocesses by the tests, not test modules (the suite
# imports modules for their doctests).
collect_ignore = ["crash_child.py", "order_fingerprints.py"]

# The real graphs not installed with the package (uk2007, ukwa) are in the
# repository's datasets/ folder: named here so that the loaders find them
# in this process and in the tools the tests run, whatever the install.
os.environ.setdefault("FRONTERA_LINKRANK_DATASETS", os.path.join(os.path.dirname(HERE), "datasets"))


def dataset(*parts):
    """Path of a real graph's file or folder (frontera_linkrank/data, or the
    repository's datasets/): always there, so no test skips for want of data."""
    from frontera_linkrank.data import path

    return path(*parts)


@pytest.fixture
def make_backend(tmp_path):
    """Factory of LinkRankBackend instances on a fresh database; closed at teardown."""
    from frontera_linkrank import LinkRankBackend

    made = []

    def make(path=None, clock=None, **settings):
        s = {"LINKRANK_PATH": str(path or tmp_path / "db"), "LINKRANK_SYNC": False}
        s.update({(k if k.startswith("LINKRANK_") else "LINKRANK_" + k): v for k, v in settings.items()})
        kw = {"clock": clock} if clock else {}
        b = LinkRankBackend(settings=s, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        if b.db.env is not None:
            b.db.close()


@pytest.fixture
def make_manager(tmp_path):
    """Factory of FrontierManagers with LinkRankBackend (or another backend)."""
    from frontera import FrontierManager, Settings

    made = []

    def make(backend="frontera_linkrank.LinkRankBackend", path=None, **settings):
        attrs = {
            "BACKEND": backend,
            "MIDDLEWARES": ["frontera_linkrank.backend.middleware.FingerprintMiddleware"],
            "LINKRANK_PATH": str(path or tmp_path / "db"),
            "LINKRANK_SYNC": False,
        }
        attrs.update(settings)
        m = FrontierManager.from_settings(Settings(attributes=attrs))
        made.append(m)
        return m

    yield make
    for m in made:
        b = m.backend
        db = getattr(b, "db", None)
        if db is not None and db.env is not None:
            db.close()


class FakeClock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, dt):
        self.t += dt


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server on a unix socket in tmp_path (AOF on), stopped by PID at teardown."""
    from brokers import RedisServer

    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()
