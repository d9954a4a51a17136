"""Named float vectors over the pages (the ``scores`` table).

One float64 vector per name ("pagerank", "authority", "hub"...) in chunks
of :data:`SCORE_CHUNK` values under the keys ``name:<chunk, 8-byte
big-endian>``, plus a JSON info record under ``name:info`` (what the
writer wants to say about it, and ``n_pages``, the vector's length). A
vector covers the pages of the snapshot it was computed on; pages added
later are beyond its length. Writing a name replaces its whole vector.

The functions take a bare LMDB transaction and table handle, so tools and
tests can use them on an environment they opened themselves.
"""

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

SCORE_CHUNK = 1 << 20  # values per LMDB value (8 MiB)
STATE_PREFIX = "~"
"""Vectors named with it are a component's saved state, not rankings: :func:`names` leaves them out."""
_INFO = b":info"
_TOP = b":top"


def _chunk_key(name: str, chunk: int) -> bytes:
    return name.encode() + b":" + chunk.to_bytes(8, "big")


def read_info(txn: Any, db: Any, name: str) -> dict[str, Any] | None:
    """The info record of vector ``name`` (without reading the vector), or None."""
    raw = txn.get(name.encode() + _INFO, db=db)
    if raw is None:
        return None
    info = json.loads(bytes(raw))
    if not isinstance(info, dict) or not isinstance(info.get("n_pages"), int) or info["n_pages"] < 0:
        raise ValueError(f"info record of vector {name!r} is corrupt")
    return info


def read_scores(txn: Any, db: Any, name: str) -> tuple[np.ndarray, dict[str, Any]] | tuple[None, None]:
    """``(values, info)`` of the stored vector ``name``, or ``(None, None)``."""
    info = read_info(txn, db, name)
    if info is None:
        return None, None
    n = int(info["n_pages"])
    # The chunks first: their lengths, not the info record, decide what is allocated.
    chunks = []
    for c in range((n + SCORE_CHUNK - 1) // SCORE_CHUNK):
        buf = txn.get(_chunk_key(name, c), db=db)
        if buf is None or len(buf) != 8 * min(SCORE_CHUNK, n - c * SCORE_CHUNK):
            raise ValueError(f"vector {name!r} is corrupt (chunk {c} missing or of the wrong length)")
        chunks.append(buf)
    out = np.empty(n, np.float64)
    for c, buf in enumerate(chunks):
        lo = c * SCORE_CHUNK
        out[lo : lo + len(buf) // 8] = np.frombuffer(buf, "<f8")
    return out, info


def write_scores(txn: Any, db: Any, vectors: Mapping[str, np.ndarray], info: Mapping[str, Any],
                 tops: Mapping[str, list[Any]] | None = None) -> None:
    """Store the vectors ``{name: float array}``, each with ``info`` (a dict,
    JSON-serialisable) plus its length, and its list of top pages from
    ``tops`` if there (JSON-serialisable), in the write transaction ``txn``."""
    for name, values in vectors.items():
        values = np.ascontiguousarray(values, "<f8")
        prefix = name.encode() + b":"
        cur = txn.cursor(db)
        if cur.set_range(prefix):  # drop the previous vector (delete moves to the next key)
            while bytes(cur.key()).startswith(prefix) and cur.delete():
                pass
        for c, lo in enumerate(range(0, len(values), SCORE_CHUNK)):
            txn.put(_chunk_key(name, c), values[lo : lo + SCORE_CHUNK].tobytes(), db=db)
        txn.put(prefix + b"info", json.dumps({**info, "n_pages": len(values)}).encode(), db=db)
        if tops is not None and name in tops:
            txn.put(name.encode() + _TOP, json.dumps(tops[name]).encode(), db=db)


def top_rows(name: str, values: np.ndarray, best: np.ndarray, urls: list[str | None]) -> list[dict[str, Any]]:
    """A ranking's top list, ``[{"index", "url", name}]`` for the pages
    ``best`` (largest first) and their ``urls``: the rows stored with a
    vector and the ones ``stats`` lists."""
    return [{"index": i, "url": u, name: float(values[i])} for i, u in zip(np.asarray(best).tolist(), urls)]


def read_top(txn: Any, db: Any, name: str) -> list[Any] | None:
    """The list of top pages stored with vector ``name``, or None."""
    raw = txn.get(name.encode() + _TOP, db=db)
    if raw is None:
        return None
    top = json.loads(bytes(raw))
    if not isinstance(top, list):
        raise ValueError(f"top pages of vector {name!r} are corrupt")
    return top


def names(txn: Any, db: Any) -> list[str]:
    """Names of the stored rankings, sorted (saved state left out: :data:`STATE_PREFIX`)."""
    keys = txn.cursor(db).iternext(keys=True, values=False)  # the chunks' 8 MiB values are not read
    found = (bytes(k)[: -len(_INFO)].decode() for k in keys if bytes(k).endswith(_INFO))
    return sorted(name for name in found if not name.startswith(STATE_PREFIX))


__all__ = ["SCORE_CHUNK", "STATE_PREFIX", "names", "read_info", "read_scores", "read_top", "top_rows", "write_scores"]
