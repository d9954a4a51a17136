"""Frontera's graph fixtures without SQLAlchemy.

``frontera/utils/graphs/data.py`` holds the crawl-order fixtures, but
importing ``frontera.utils.graphs`` needs SQLAlchemy < 1.4, so the module is
loaded by path and served by a small in-memory graph manager with the
interface ``FrontierTester`` uses (``seeds``, ``pages``, ``get_page``).

Fixtures without URLs name pages "A1", "A11", ...; they are mapped to
``http://aaa.com/1``-style URLs (as newer Frontera releases write them), so
both backends under test see fetchable URLs.
"""

import importlib.util
import os

import frontera

_DATA = os.path.join(os.path.dirname(frontera.__file__), "utils", "graphs", "data.py")


def load_data():
    spec = importlib.util.spec_from_file_location("frontera_graph_data", _DATA)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Page:
    def __init__(self, url, status=200, is_seed=False):
        self.url = url
        self.status = status
        self.is_seed = is_seed
        self.links = []

    @property
    def has_errors(self):
        return self.status is None

    def __repr__(self):
        return f"<Page {self.url}>"


class GraphManager:
    """In-memory stand-in for ``frontera.utils.graphs.Manager``."""

    def __init__(self):
        self._pages = {}
        self._order = []

    def _get_or_create(self, url, status=200):
        page = self._pages.get(url)
        if page is None:
            page = self._pages[url] = Page(url, status)
            self._order.append(page)
        return page

    def add_site_list(self, graph):
        for site in graph.sites:
            pages = site.pages if hasattr(site, "pages") else site
            for k, (url, links) in enumerate(pages):
                url = as_url(url, graph.use_urls)
                page = self._get_or_create(url)
                if k == 0:
                    page.is_seed = True
                for link in links:
                    child = self._get_or_create(as_url(link, graph.use_urls))
                    if child not in page.links:
                        page.links.append(child)
        return self

    @property
    def pages(self):
        return list(self._order)

    @property
    def seeds(self):
        return [p for p in self._order if p.is_seed]

    def get_page(self, url):
        return self._pages.get(url)


def as_url(name, use_urls):
    if use_urls:
        return name
    return f"http://{name[0].lower() * 3}.com/{name[1:]}"


def graphs():
    """All fixture graphs of ``data.py`` as (name, CrawlSiteListData)."""
    data = load_data()
    return [(g.name, g) for g in data.GRAPHS]
