"""Reading a few items of a memory-mapped array without mapping its pages.

The stored arrays of an audit directory (:mod:`bayes_eval.audit._store`) are opened as read-only
memory maps, so that a command may use them as arrays. A command such as ``next`` only reads a few
items of them, but every page fault on a mapping maps the whole page-cache folio behind it: on
current Linux kernels a large file's folios are up to 2 MB, so reading 20 scattered items of a
10^7-item array made the process's resident set 40 MB larger. These helpers read such items with
``os.pread`` instead, which copies just the bytes into the process (the page cache is shared and
not counted in its memory), and fall back to ordinary indexing for arrays that are not memory
maps, for views of them, and for many positions at once.

All three functions give exactly the results of the numpy expressions they replace
(``arr[positions]``, ``arr[start:stop]`` and ``np.searchsorted(arr, query)``).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

__all__ = ["searchsorted", "take", "take_range"]

#: above this many positions, one pass of numpy indexing over the mapping is cheaper
MAX_PREADS = 65_536


def _file_of(arr: Any) -> tuple[str, int] | None:
    """(path, byte offset of item 0) of a whole 1-D memory-mapped file, else None."""
    if (
        isinstance(arr, np.memmap)
        and isinstance(arr.base, mmap.mmap)  # the mapping itself, not a view of it
        and arr.ndim == 1
        and arr.flags.c_contiguous
        and arr.filename is not None
    ):
        return arr.filename, int(arr.offset)
    return None


def take(arr: np.ndarray, positions: Any) -> np.ndarray:
    """``arr[positions]`` for integer ``positions`` (``os.pread`` per item on a memory map)."""
    positions = np.asarray(positions, dtype=np.int64)
    where = _file_of(arr)
    if where is None or positions.ndim != 1 or positions.size > MAX_PREADS:
        return arr[positions]
    n = arr.shape[0]
    if positions.size and (int(positions.min()) < -n or int(positions.max()) >= n):
        bad = positions[(positions < -n) | (positions >= n)][0]
        raise IndexError(f"index {int(bad)} is out of bounds for axis 0 with size {n}")
    item = arr.dtype.itemsize
    path, base = where
    fd = os.open(path, os.O_RDONLY)
    try:
        data = b"".join(os.pread(fd, item, base + (p % n) * item) for p in positions.tolist())
    finally:
        os.close(fd)
    return np.frombuffer(data, dtype=arr.dtype).copy()


def take_range(arr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``arr[start:stop]`` (a copy; one ``os.pread`` on a memory map) for ``0 <= start <= stop``."""
    where = _file_of(arr)
    stop = min(int(stop), arr.shape[0])
    start = min(int(start), stop)
    if where is None:
        return np.array(arr[start:stop])
    item = arr.dtype.itemsize
    path, base = where
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, (stop - start) * item, base + start * item)
    finally:
        os.close(fd)
    return np.frombuffer(data, dtype=arr.dtype).copy()


def searchsorted(arr: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``np.searchsorted(arr, query)`` (left side) for a sorted 1-D ``arr``.

    On a memory map, a binary search per query item reading one item per step with
    ``os.pread``: ``O(len(query) log len(arr))`` small reads. A query of a kind that cannot be
    compared with ``arr`` (strings against integers) raises ``TypeError``, as numpy does.
    """
    query = np.asarray(query)
    where = _file_of(arr)
    if where is None or query.ndim != 1 or query.size > MAX_PREADS:
        return np.searchsorted(arr, query)
    if (query.dtype.kind in "US") != (arr.dtype.kind in "US"):
        raise TypeError(f"cannot search {query.dtype} values in a {arr.dtype} array")
    item = arr.dtype.itemsize
    path, base = where
    n = arr.shape[0]
    out = np.empty(query.shape[0], dtype=np.int64)
    fd = os.open(path, os.O_RDONLY)
    try:
        for i, q in enumerate(query.tolist()):
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) // 2
                value = np.frombuffer(os.pread(fd, item, base + mid * item), arr.dtype)[0]
                if value < q:
                    lo = mid + 1
                else:
                    hi = mid
            out[i] = lo
    finally:
        os.close(fd)
    return out
