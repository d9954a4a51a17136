"""The metadata document of a page database: named sections with owners.

One JSON object in the ``meta`` table under the key ``b"meta"``. Storage
owns the keys in :data:`STORAGE_KEYS` (schema, version, creation time,
page count, sequence numbers of the edge blocks and the record log); every
other top-level key is a *section* owned by one feature (the AOPIC books,
the counters, the crawl policy, the recrawl state...), whose value is any
JSON value. A feature reads its section with
:meth:`~MetaDocument.section` and writes it at a commit, either passing it
to ``commit`` or registering a function that returns it
(:meth:`~MetaDocument.own`).
"""

import json
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .errors import CorruptDatabase, PageDBError

SCHEMA_NAME = "frontera_linkrank.pagedb"
SCHEMA_VERSION = 3  # 2: page field "rate", tables "visits" and "validators"; 3: hot/cold page records
READS_VERSIONS = (2, 3)  # schema 2 is read, and upgraded by the first writer
STORAGE_KEYS = frozenset({"schema", "version", "created", "n_pages", "edge_seq", "vlog_seq", "host_lists", "fps_held",
                          "fps_filter"})


def new_document() -> dict[str, Any]:
    """The document of a new, empty page database."""
    return {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "created": time.time(), "n_pages": 0}


class Encoded(dict):  # type: ignore[type-arg]
    """A section whose JSON text its owner already has (``text``, the
    JSON of this dict): :func:`encode` writes that text instead of encoding
    the dict again. It reads as the dict it is.

    >>> encode({"n_pages": 2, "status": Encoded({"a": [1]}, '{"a": [1]}')})
    b'{"n_pages": 2, "status": {"a": [1]}}'
    """

    def __init__(self, value: Mapping[str, Any], text: str) -> None:
        super().__init__(value)
        self.text = text


def encode(doc: Mapping[str, Any]) -> bytes:
    """The stored bytes of a document (``json.dumps`` defaults; the text of
    an :class:`Encoded` section as it is)."""
    known = [name for name, value in doc.items() if isinstance(value, Encoded)]
    if not known:
        return json.dumps(doc).encode()
    rest = json.dumps({name: value for name, value in doc.items() if not isinstance(value, Encoded)})
    parts = ", ".join(f"{json.dumps(name)}: {doc[name].text}" for name in known)
    return (rest[:-1] + (", " if rest != "{}" else "") + parts + "}").encode()


def decode(raw: bytes | memoryview | None) -> dict[str, Any]:
    """The document stored as ``raw`` ({} for None)."""
    return json.loads(bytes(raw)) if raw is not None else {}


def check_schema(doc: Mapping[str, Any], path: str) -> None:
    """Raise :class:`PageDBError` unless ``doc`` is this schema's metadata
    (:class:`CorruptDatabase` when it is ours with its name or version damaged)."""
    if doc.get("schema") != SCHEMA_NAME:
        if "n_pages" in doc and "created" in doc:  # the keys of our document: its name is damaged
            raise CorruptDatabase(f"{path}: the metadata names the schema {str(doc.get('schema'))[:60]!r} "
                                  "(corrupt database)")
        raise PageDBError(f"{path}: not a frontera_linkrank page database")
    if not isinstance(doc.get("version"), int) or isinstance(doc.get("version"), bool):
        raise CorruptDatabase(f"{path}: the metadata's schema version is {doc.get('version')!r} (corrupt database)")
    if doc.get("version") not in READS_VERSIONS:
        raise PageDBError(
            f"{path}: page database schema version {doc.get('version')}, "
            f"this frontera_linkrank reads version {SCHEMA_VERSION}"
        )


class MetaDocument:
    """The committed metadata and the owners of its sections.

    Examples
    --------
    >>> m = MetaDocument(new_document())
    >>> m.own("counters", lambda: {"pages_crawled": 3})
    >>> doc = m.next({"policy": "opic"})
    >>> doc["counters"], doc["policy"], m.section("policy")  # committed: not yet
    ({'pages_crawled': 3}, 'opic', None)
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc
        self._owners: dict[str, Callable[[], Any]] = {}

    @property
    def view(self) -> Mapping[str, Any]:
        """The committed document, read-only at the top level."""
        return MappingProxyType(self._doc)

    def get(self, key: str, default: Any = None) -> Any:
        """A committed value, storage keys included."""
        return self._doc.get(key, default)

    def section(self, name: str, default: Any = None) -> Any:
        """The committed value of section ``name``, or ``default``."""
        return self._doc.get(name, default)

    def own(self, name: str, state: Callable[[], Any]) -> None:
        """Make ``state()`` the value of section ``name`` at every commit.

        Raises
        ------
        ValueError
            ``name`` is a storage key or already has an owner.
        """
        _check_section(name)
        if name in self._owners:
            raise ValueError(f"metadata section {name!r} already has an owner")
        self._owners[name] = state

    def next(self, sections: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The document to commit: the committed one, the owners' sections,
        then ``sections`` (storage keys are for the caller to set)."""
        doc = dict(self._doc)
        for name, state in self._owners.items():
            doc[name] = state()
        if sections:
            for name in sections:
                _check_section(name)
            doc.update(sections)
        return doc

    def install(self, doc: dict[str, Any]) -> None:
        """``doc`` has been committed."""
        self._doc = doc


def _check_section(name: str) -> None:
    if name in STORAGE_KEYS:
        raise ValueError(f"metadata key {name!r} belongs to the page database itself")


__all__ = [
    "READS_VERSIONS", "SCHEMA_NAME", "SCHEMA_VERSION", "STORAGE_KEYS", "Encoded", "MetaDocument", "check_schema",
    "decode", "encode",
    "new_document",
]  # fmt: skip
