"""pytest plugin for benchmarks/scrapy_suite.py, loaded into Scrapy's own
test suite (``-p scrapy_suite_plugin``).

- Every test runs in its own empty folder (its current directory), so
  nothing a crawl leaves in the working directory reaches another test.
- With ``SCRAPY_SUITE_SCHEDULER`` set (an import path), that class is the
  default ``SCHEDULER`` (Scrapy's ``default_settings``): every crawl whose
  settings do not name a scheduler uses it.
- With ``SCRAPY_SUITE_OPENED`` set (a file name), the id of every test in
  which a scheduler opened is appended to that file: the tests that crawl.
"""

import os

import pytest


def pytest_configure(config):
    scheduler = os.environ.get("SCRAPY_SUITE_SCHEDULER")
    if scheduler:
        from scrapy.settings import default_settings

        default_settings.SCHEDULER = scheduler


@pytest.fixture(autouse=True)
def _own_empty_folder(request, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    opened = os.environ.get("SCRAPY_SUITE_OPENED")
    if opened:
        from scrapy.core.engine import ExecutionEngine

        original = ExecutionEngine.open_spider_async

        async def open_spider_async(self, *args, **kwargs):
            with open(opened, "a", encoding="utf-8") as f:
                f.write(request.node.nodeid + "\n")
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(ExecutionEngine, "open_spider_async", open_spider_async)
    yield
