"""A 0/1 sparse matrix held as its index arrays only and multiplied slice
by slice, both ways: the links a ranking loads (:mod:`.links`)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..numeric import row_slices

if TYPE_CHECKING:
    import scipy.sparse as sp

# Links a product handles in one sparse call. A 0/1 matrix is held as its
# two index arrays only; each call gets a CSR view of one slice of them
# whose weights are a shared array of ones this long, so no weight per
# link is ever stored.
SLICE_LINKS = 1 << 20


class Pattern:
    """A 0/1 sparse matrix held as its CSR index arrays, without weights.

    The rows are cut into slices of at most :data:`SLICE_LINKS` links (a
    row longer than that is a slice of its own), each a scipy CSR matrix
    over a view of the column indices, its own row pointers and a view of
    one array of ones; ``dot`` multiplies slice by slice.

    >>> p = Pattern(np.array([0, 2, 3]), np.array([0, 2, 1]), 3)
    >>> p.dot(np.array([1.0, 10.0, 100.0])).tolist(), p.tdot(np.array([1.0, 10.0])).tolist()
    ([101.0, 10.0], [1.0, 10.0, 1.0])
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, n_cols: int) -> None:
        self.indices = indices
        self.shape = (len(indptr) - 1, int(n_cols))
        cuts = list(row_slices(indptr, SLICE_LINKS))
        self._ones = np.ones(max((int(indptr[r1] - indptr[r0]) for r0, r1 in cuts), default=0))
        self._slices = [(r0, r1, slice_view(indptr, indices, r0, r1, n_cols, self._ones)) for r0, r1 in cuts]

    @property
    def nbytes(self) -> int:
        return self.indices.nbytes + self._ones.nbytes + sum(m.indptr.nbytes for _, _, m in self._slices)

    def dot(self, x: np.ndarray) -> np.ndarray:
        """``A @ x`` as a new float64 array."""
        out = np.zeros(self.shape[0])
        x = np.ascontiguousarray(x, np.float64)
        for r0, r1, m in self._slices:
            add_product(m, x, out[r0:r1])
        return out

    def tdot(self, y: np.ndarray) -> np.ndarray:
        """``A.T @ y`` as a new float64 array, without a transposed copy.

        Each entry is the sum of its terms in row order, added one by one
        from zero: bit for bit what a CSR product of the transpose (each
        row's indices sorted) gives.
        """
        out = np.zeros(self.shape[1])
        for r0, r1, m in self._slices:
            add_transposed_product(m, y[r0:r1], out)
        return out


def slice_view(indptr: np.ndarray, indices: np.ndarray, r0: int, r1: int, n_cols: int,
               ones: np.ndarray) -> sp.csr_matrix:
    """Rows ``r0 .. r1-1`` of the 0/1 matrix with row pointers ``indptr``
    and column ``indices``: a scipy CSR matrix over a view of the indices,
    its own row pointers and a view of ``ones`` as weights (at least as
    long as the slice's links)."""
    s0, s1 = int(indptr[r0]), int(indptr[r1])
    m = csr_matrix((ones[: s1 - s0], indices[s0:s1], indptr[r0 : r1 + 1] - indptr[r0]),
                   shape=(r1 - r0, int(n_cols)), copy=False)
    # scipy's constructor copies a view much shorter than its base array
    # (a weight per link): share the views instead.
    m.indices, m.data = indices[s0:s1], ones[: s1 - s0]
    return m


def csr_matrix(*args: Any, **kwargs: Any) -> sp.csr_matrix:
    """``scipy.sparse.csr_matrix(*args, **kwargs)``.

    scipy is imported here, at the first matrix, not with this module: a
    crawl that has not ranked yet and the tools that do not rank start
    without it."""
    import scipy.sparse as sp

    return sp.csr_matrix(*args, **kwargs)


def preload_scipy() -> None:
    """Import scipy's sparse matrices now, in the calling thread.

    A background ranking calls this in the crawl's thread before it
    starts: imported in the ranking's thread, scipy's long-lived
    allocations land in that thread's C heap among the ranking's transient
    arrays, and more of that heap stays resident
    (docs/research/measurements.md, "Start-up without scipy")."""
    _compiled_matvecs()


@functools.cache
def _compiled_matvecs() -> tuple[Any, Any]:
    """scipy's compiled CSR and CSC products, or ``(None, None)``.

    They add into an existing array: a product needs no temporary of its
    rows and no copy into place, and a transposed product over slices sums
    each entry in one sequence, as a CSR product of the transpose does.
    ``m @ x`` calls the same CSR product on a zeroed array, after checks
    that cost as much as the product on a small graph. Not public API:
    without it the products go through scipy's and numpy's public calls,
    with the same sums, more slowly."""
    try:
        from scipy.sparse._sparsetools import csc_matvec, csr_matvec
    except ImportError:  # pragma: no cover - depends on scipy's internals
        return None, None
    return csr_matvec, csc_matvec


def add_product(m: sp.csr_matrix, x: np.ndarray, out: np.ndarray) -> None:
    """``out += m @ x`` in place (``x`` float64 and contiguous, ``out`` a
    contiguous float64 array of ``m``'s rows): each entry's terms added
    one by one in the order stored, onto what ``out`` holds."""
    _csr_matvec = _compiled_matvecs()[0]
    if _csr_matvec is not None:
        _csr_matvec(m.shape[0], m.shape[1], m.indptr, m.indices, np.ascontiguousarray(m.data, np.float64), x, out)
    else:
        out += m @ x


def add_transposed_product(m: sp.csr_matrix, y: np.ndarray, out: np.ndarray) -> None:
    """``out += m.T @ y`` in place, each entry's terms added one by one in
    row order (no temporary as long as ``out``)."""
    y = np.ascontiguousarray(y, np.float64)
    _csc_matvec = _compiled_matvecs()[1]
    if _csc_matvec is not None:
        _csc_matvec(m.shape[1], m.shape[0], m.indptr, m.indices, np.ascontiguousarray(m.data, np.float64), y, out)
    else:
        np.add.at(out, m.indices, np.repeat(y, np.diff(m.indptr)) * m.data)


def transpose_indices(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and indices of the transposed 0/1 matrix, each row's
    indices sorted (scipy's counting sort, with 1-byte weights while it
    runs)."""
    t = csr_matrix((np.ones(len(indices), np.int8), indices, indptr), shape=shape).T.tocsr()
    return t.indptr, t.indices


__all__ = ["SLICE_LINKS", "Pattern", "add_product", "add_transposed_product", "csr_matrix", "preload_scipy",
           "slice_view", "transpose_indices"]
