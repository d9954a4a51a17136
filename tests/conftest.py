import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)

# Scripts run as subprocesses by the tests, not test modules (the suite
# imports modules for their doctests).
collect_ignore = ["crash_child.py"]

SHARED_DATA = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data"))
# Small data sets copied into the project (with attribution) for when
# ../shared is absent.
PROJECT_DATA = os.path.normpath(os.path.join(HERE, "..", "data"))


def shared(*parts):
    """Path under ../shared/data, or skip the test with a clear message."""
    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.exists(path):
        pytest.skip(f"needs {path} (the shared data folder is absent)")
    return path


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
