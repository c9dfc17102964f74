"""Hash-keyed bottom-k sampling within strata.

Every item gets a pseudo-random 64-bit key computed from its id and the audit's seed alone
(:func:`item_keys`). Inside a stratum, items are proposed in increasing key order (ties, which can
only occur for string ids, broken by the id itself). Because the keys of distinct items are
exchangeable, the first ``c`` items of that order are a uniform sample without replacement of size
``c``, and drawing ``c`` more continues the same sample. The order depends on nothing but ids and
the seed, so an in-memory population and the same items spread over any number of Parquet files
(Dask) give the same proposals, and an audit resumed after ``c_k`` proposals in stratum ``k``
continues exactly where it stopped (:meth:`KeyedStratumSampler.skip`).

This is the bottom-k (order) sampling of Rosen (1997) / Cohen & Kaplan (2007) with uniform keys;
Bennett & Carvalho (``../shared/seeds/000_51972d8d13fae9c1.txt``) and Kumar & Raj
(``../shared/seeds/003_d8c568d527ba610a.txt``) only require a uniform sample without replacement
within each stratum, which is what it provides.

Keys
----
* Integer ids (int64, negative allowed, viewed as uint64): with ``s = mix(seed)`` and
  ``t = mix(seed + 1)`` (mod 2^64), ``key = mix(mix(id + s) ^ t)`` where ``mix`` is the
  splitmix64 finaliser (Steele, Lea & Flood 2014). ``mix`` is a bijection of the 64-bit integers,
  so distinct ids never share a key.
* String ids: ``pandas.util.hash_array`` (SipHash-2-4 of the UTF-8 bytes) with the 16-character
  hash key ``format(mix(seed), "016x")``, then ``mix`` once more. SipHash is specified bytewise,
  so keys are the same on every platform; distinct strings share a key with probability 2^-64
  (handled by the id tie-break).

All arithmetic is modulo 2^64 in numpy ``uint64`` arrays (vectorised) or in Python ints (the
seed), so keys are identical on every platform and for every partitioning.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._protocols import StrataLike

__all__ = ["KeyedStratumSampler", "item_keys", "make_sampler", "mix64"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB

#: smallest reservoir kept per stratum (items whose keys are known to be the next smallest)
MIN_RESERVOIR = 1024


def mix64(x: int) -> int:
    """splitmix64 finaliser on a Python int (mod 2^64)."""
    z = (int(x) + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def _mix_array(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic, in place on a copy)."""
    z = z + np.uint64(_GOLDEN)
    z ^= z >> np.uint64(30)
    z *= np.uint64(_C1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(_C2)
    z ^= z >> np.uint64(31)
    return z


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed={seed!r} must be an integer in [0, 2**64)")
    seed = int(seed)
    if not 0 <= seed <= _M64:
        raise ValueError(f"seed={seed} is outside the allowed range [0, 2**64)")
    return seed


def item_keys(ids: Any, seed: int) -> np.ndarray:
    """Reproducible pseudo-random uint64 keys of items from their ids and a seed.

    Parameters
    ----------
    ids : array_like of int or str, shape (m,)
    seed : int in [0, 2**64)

    Returns
    -------
    ndarray of uint64, shape (m,)
        See the module docstring for the exact definition.

    Examples
    --------
    >>> from bayes_eval._sampler import item_keys
    >>> k = item_keys([0, 1, 2], seed=0)
    >>> k.dtype.name, len(set(k.tolist()))
    ('uint64', 3)
    """
    seed = _check_seed(seed)
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"ids has shape {arr.shape}; allowed: a 1-D array of ids")
    s, t = mix64(seed), mix64((seed + 1) & _M64)
    with np.errstate(over="ignore"):
        if arr.dtype == object and arr.size and all(isinstance(v, str) for v in arr[:1000]):
            arr = arr.astype(str)
        if (
            arr.dtype == object
            and arr.size
            and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in arr[:1000])
        ):
            arr = arr.astype(np.int64)
        if arr.size == 0:
            return np.empty(0, dtype=np.uint64)
        if arr.dtype != bool and np.issubdtype(arr.dtype, np.integer):
            z = arr.astype(np.int64).view(np.uint64) + np.uint64(s)
            z = _mix_array(z)
            z ^= np.uint64(t)
            return _mix_array(z)
        if np.issubdtype(arr.dtype, np.str_):
            import pandas as pd  # start-up time: only string ids need pandas

            h = pd.util.hash_array(arr.astype(object), hash_key=format(s, "016x"), categorize=False)
            return _mix_array(np.asarray(h, dtype=np.uint64) ^ np.uint64(t))
    raise TypeError(f"ids has dtype {arr.dtype}; allowed: integers or strings")


class KeyedStratumSampler:
    """In-memory bottom-k sampler: items of each stratum in increasing key order.

    Parameters
    ----------
    strata : Strata
        In-memory strata (``members(k)`` and ``population.ids_at`` are used).
    seed : int
        Key seed (see :func:`item_keys`).

    Notes
    -----
    Per stratum, a queue holds the next items in key order. It is built lazily on the first draw
    from the stratum, from ``np.argpartition`` over the stratum's keys (O(N_k) once), and
    refilled, with a reservoir twice as large each time, when a draw needs more than it holds.
    Draws are therefore O(m) amortised: the per-batch cost does not grow with N.
    """

    def __init__(self, strata: StrataLike, seed: int) -> None:
        self.strata = strata
        self.seed = _check_seed(seed)
        k = int(strata.n_strata)
        self.sizes = np.asarray(strata.sizes, dtype=np.int64)
        self.drawn = np.zeros(k, dtype=np.int64)
        self._queue: list[np.ndarray | None] = [None] * k  # positions, in key order
        self._head = np.zeros(k, dtype=np.int64)  # index of the next queued item
        self._queued = np.zeros(k, dtype=np.int64)  # items ever queued (prefix of key order)
        self._frontier: list[tuple[int, Any] | None] = [None] * k  # (key, id) of last queued
        self._reservoir = np.full(k, MIN_RESERVOIR, dtype=np.int64)

    # ------------------------------------------------------------------ internals
    def _refill(self, k: int, need: int) -> None:
        """Queue at least ``need`` more items of stratum ``k`` (or all that are left)."""
        pop = self.strata.population
        members = self.strata.members(k)
        ids = pop.ids_at(members)
        keys = item_keys(ids, self.seed)
        front = self._frontier[k]
        if front is not None:
            fkey, fid = front
            after = (keys > np.uint64(fkey)) | ((keys == np.uint64(fkey)) & (ids > fid))
            members, ids, keys = members[after], ids[after], keys[after]
        left = members.shape[0]
        want = int(min(left, max(need, self._reservoir[k])))
        self._reservoir[k] *= 2
        if want < left:
            cut = np.partition(keys, want - 1)[want - 1]
            sel = keys <= cut  # ties at the cut are all kept, so the tie-break stays exact
            members, ids, keys = members[sel], ids[sel], keys[sel]
        order = np.lexsort((ids, keys))
        new = members[order]
        if new.size:
            self._frontier[k] = (int(keys[order[-1]]), ids[order[-1]])
        old = self._queue[k]
        rest = old[self._head[k] :] if old is not None else np.empty(0, dtype=np.int64)
        self._queue[k] = np.concatenate([rest, new]).astype(np.int64)
        self._head[k] = 0
        self._queued[k] += new.size

    def _take(self, k: int, m: int) -> np.ndarray:
        if not 0 <= k < self.sizes.shape[0]:
            raise ValueError(f"stratum k={k} is outside 0..{self.sizes.shape[0] - 1}")
        if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 0:
            raise ValueError(f"m={m!r} must be a non-negative integer")
        m = int(m)
        if m > self.sizes[k] - self.drawn[k]:
            raise ValueError(
                f"m={m} is more than the {int(self.sizes[k] - self.drawn[k])} items of stratum "
                f"{k} not yet drawn"
            )
        if m == 0:
            return np.empty(0, dtype=np.int64)
        q = self._queue[k]
        have = 0 if q is None else q.shape[0] - int(self._head[k])
        if have < m:
            self._refill(k, m - have)
        q = self._queue[k]
        assert q is not None
        h = int(self._head[k])
        out = q[h : h + m]
        self._head[k] = h + m
        self.drawn[k] += m
        return out

    # ------------------------------------------------------------------ public
    def draw(self, k: int, m: int) -> np.ndarray:
        """Ids of the next ``m`` items of stratum ``k`` in key order (never repeated)."""
        return self.strata.population.ids_at(self._take(k, m))

    def draw_positions(self, k: int, m: int) -> np.ndarray:
        """Like :meth:`draw` but population positions (in-memory populations only)."""
        return self._take(k, m).copy()

    def skip(self, k: int, c: int) -> None:
        """Advance stratum ``k`` by ``c`` items, as if they had been drawn."""
        self._take(k, c)

    def available(self) -> np.ndarray:
        """Items not yet drawn, per stratum."""
        return self.sizes - self.drawn


def make_sampler(strata: StrataLike, seed: int) -> Any:
    """The keyed sampler for ``strata``: ``strata.make_sampler(seed)`` when the strata provide one
    (out-of-core strata), the in-memory :class:`KeyedStratumSampler` otherwise."""
    maker = getattr(strata, "make_sampler", None)
    if callable(maker):
        return maker(seed)
    return KeyedStratumSampler(strata, seed)
