"""The population of scored items that an audit evaluates.

A :class:`Population` is array-backed: scores (float64), predicted labels (bool) and ids (int64 or
strings), with no Python object per item, so that 10^8 items fit in memory. The rest of the package
only asks a population for the narrow interface of
:class:`bayes_eval._protocols.PopulationLike`; an out-of-core
(Dask-backed) population can stand in by implementing the same members.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._mapped import searchsorted, take
from ._protocols import PopulationLike
from ._validation import as_finite_1d

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

__all__ = ["Population", "PopulationLike"]


def check_columns(
    names: Any, where: str, *, score_col: str, id_col: str | None, prediction_col: str | None
) -> None:
    """Refuse column arguments that name no column of ``names`` (``where`` names the source)."""
    names = list(names)
    for arg, col in (
        ("score_col", score_col),
        ("id_col", id_col),
        ("prediction_col", prediction_col),
    ):
        if col is not None and col not in names:
            raise ValueError(f"{arg}={col!r} is not a column of {where}; columns are {names}")


def as_id_query(ids: Any, name: str) -> np.ndarray:
    """A 1-D array of ids to look up (a scalar becomes length 1)."""
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D sequence of ids")
    return arr


def as_int_id_query(arr: np.ndarray, name: str, allowed: str) -> np.ndarray:
    """Integer ids to look up, refusing non-integer queries; ``allowed`` describes the ids."""
    if arr.dtype == object:
        bad = [
            v for v in arr.tolist() if isinstance(v, bool) or not isinstance(v, numbers.Integral)
        ]
        if bad:
            raise ValueError(f"{name} contains {bad[0]!r}; allowed: {allowed}")
        return _to_int64(arr, name)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} has dtype {arr.dtype}; allowed: {allowed}")
    return _to_int64(arr, name)


def check_position_ids(arr: np.ndarray, size: int, name: str) -> np.ndarray:
    """Integer ids of a population whose ids are its positions ``0..size-1``, as int64
    positions; an id outside that range is a ``ValueError`` naming it."""
    bad = (arr < 0) | (arr >= size)
    if bad.any():
        raise ValueError(
            f"{name} contains unknown id {arr[np.flatnonzero(bad)[0]].item()!r}; "
            f"allowed: ids 0..{size - 1}"
        )
    return arr.astype(np.int64)


_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _to_int64(arr: np.ndarray, name: str = "ids") -> np.ndarray:
    """Integer ids as int64, refusing values that int64 cannot hold (never wrapping them)."""
    if arr.dtype == object:
        ints = arr.tolist()
        big = next((v for v in ints if not _INT64_MIN <= int(v) <= _INT64_MAX), None)
        if big is not None:
            raise ValueError(
                f"{name} contains {int(big)}, outside the 64-bit signed range; allowed: integers "
                f"from {_INT64_MIN} to {_INT64_MAX}, or string ids"
            )
        return np.asarray([int(v) for v in ints], dtype=np.int64)
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:
        raise ValueError(
            f"{name} contains {int(arr.max())}, above the 64-bit signed maximum {_INT64_MAX}; "
            "allowed: integers that fit int64, or string ids"
        )
    return arr.astype(np.int64)


def _as_predictions(predictions: Any, n: int) -> np.ndarray:
    arr = np.asarray(predictions)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"predictions has shape {arr.shape}; allowed: a 1-D array of length {n} (one per score)"
        )
    if arr.dtype == bool:
        return arr.copy()
    if not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"predictions has dtype {arr.dtype}; allowed: bool or 0/1 integers")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"predictions has value {arr[i].item()!r} at position {i}; allowed: 0/1 or True/False"
        )
    return arr.astype(bool)


def _as_ids(ids: Any, n: int) -> np.ndarray:
    # a list mixing str and int would become all-str under np.asarray: check each value
    arr = np.asarray(ids, dtype=object) if isinstance(ids, list | tuple) else np.asarray(ids)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"ids has shape {arr.shape}; allowed: a 1-D array of length {n}")
    if arr.dtype == bool:
        raise TypeError("ids has dtype bool; allowed: integers or strings")
    if np.issubdtype(arr.dtype, np.integer):
        arr = _to_int64(arr)
    elif np.issubdtype(arr.dtype, np.str_):
        pass
    elif arr.dtype == object:
        kinds = {type(v) for v in arr.tolist()}  # every id, not a sample
        if kinds <= {str}:
            arr = arr.astype(str)
        elif all(issubclass(k, numbers.Integral) and not issubclass(k, bool) for k in kinds):
            arr = _to_int64(arr)
        else:
            bad = next(
                v
                for v in arr.tolist()
                if not isinstance(v, str if str in kinds else numbers.Integral)
                or isinstance(v, bool)
            )
            raise TypeError(
                f"ids has values of type(s) {sorted(k.__name__ for k in kinds)} (e.g. {bad!r}); "
                "allowed: all integers or all strings"
            )
    else:
        raise TypeError(f"ids has dtype {arr.dtype}; allowed: integers or strings")
    import pandas as pd  # pandas only where a population is built (never in `next`/`record`)

    index = pd.Index(arr)
    if not index.is_unique:
        dup = index[index.duplicated()][0]
        raise ValueError(
            f"ids must be unique; id {getattr(dup, 'item', lambda: dup)()!r} occurs more than once"
        )
    return arr


class Population:
    """A scored population of items with predicted labels.

    Parameters
    ----------
    scores : array_like, shape (N,)
        Real-valued classifier scores (probabilities or raw margins). NaN, inf and non-numeric
        values are refused.
    threshold : float, optional
        Decision threshold: an item is predicted positive iff ``score >= threshold``.
    predictions : array_like of bool or 0/1, shape (N,), optional
        Predicted labels given explicitly. Exactly one of ``threshold`` and ``predictions``.
    ids : array_like of int or str, shape (N,), optional
        Unique item ids; default ``0..N-1`` (stored implicitly, costing no memory).

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> pop = be.Population(np.array([0.1, 0.7, 0.4, 0.9]), threshold=0.5)
    >>> pop.size, int(pop.predictions.sum())
    (4, 2)
    """

    __slots__ = ("_fingerprint", "_ids", "_index", "_predictions", "_scores", "_threshold")

    def __init__(
        self,
        scores: ArrayLike,
        *,
        threshold: float | None = None,
        predictions: ArrayLike | None = None,
        ids: ArrayLike | None = None,
    ) -> None:
        scores = as_finite_1d(scores, "scores")
        if (threshold is None) == (predictions is None):
            raise ValueError(
                "give exactly one of threshold= and predictions= "
                f"(got threshold={threshold!r} and predictions="
                f"{'None' if predictions is None else 'an array'})"
            )
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
                raise TypeError(f"threshold={threshold!r} must be a finite real number")
            threshold = float(threshold)
            if not np.isfinite(threshold):
                raise ValueError(f"threshold={threshold!r} must be a finite real number")
            preds = scores >= threshold
        else:
            preds = _as_predictions(predictions, scores.shape[0])
        self._scores = scores
        self._scores.flags.writeable = False
        self._predictions = preds
        self._predictions.flags.writeable = False
        self._threshold = threshold
        self._ids = None if ids is None else _as_ids(ids, scores.shape[0])
        if self._ids is not None:
            self._ids.flags.writeable = False
        self._index: Any = None
        self._fingerprint: str | None = None

    # ----------------------------------------------------------------- constructors
    @classmethod
    def _from_checked_arrays(
        cls,
        scores: np.ndarray,
        predictions: np.ndarray,
        ids: np.ndarray | None,
        threshold: float | None,
        fingerprint: str,
        index: SortedIds | None = None,
    ) -> Population:
        """A population from arrays this package validated and stored itself (the arrays of an
        audit directory, possibly memory-mapped), without validating them again; ``fingerprint``
        and the id ``index`` (see :class:`SortedIds`) are trusted."""
        self = cls.__new__(cls)
        # memory maps stay memory maps (np.asarray would drop the subclass that `take` reads)
        self._scores = scores if scores.dtype == np.float64 else scores.astype(np.float64)
        self._predictions = predictions if predictions.dtype == bool else predictions.astype(bool)
        self._threshold = threshold
        self._ids = ids
        for arr in (self._scores, self._predictions, self._ids):
            if arr is not None:
                arr.flags.writeable = False
        self._index = index
        self._fingerprint = fingerprint
        return self

    @classmethod
    def from_pandas(
        cls,
        frame: pd.DataFrame,
        *,
        score_col: str,
        id_col: str | None = None,
        prediction_col: str | None = None,
        threshold: float | None = None,
    ) -> Population:
        """Build a population from columns of a :class:`pandas.DataFrame`."""
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame has type {type(frame).__name__}; allowed: a pandas DataFrame")
        check_columns(
            frame.columns,
            "the frame",
            score_col=score_col,
            id_col=id_col,
            prediction_col=prediction_col,
        )
        score_values = frame[score_col]
        if not pd.api.types.is_numeric_dtype(score_values) or pd.api.types.is_bool_dtype(
            score_values
        ):
            raise TypeError(
                f"score column {score_col!r} has dtype {score_values.dtype}; allowed: real numbers"
            )
        return cls(
            score_values.to_numpy(dtype=np.float64, na_value=np.nan),
            threshold=threshold,
            predictions=None if prediction_col is None else frame[prediction_col].to_numpy(),
            ids=None if id_col is None else frame[id_col].to_numpy(),
        )

    @classmethod
    def from_parquet(
        cls,
        path: str | Path,
        *,
        score_col: str,
        id_col: str | None = None,
        prediction_col: str | None = None,
        threshold: float | None = None,
        engine: str = "memory",
        client: Client | None = None,
    ) -> Population:
        """Read a population from a Parquet file or partitioned dataset into memory.

        Only the named columns are read, with pyarrow. ``engine`` accepts only ``"memory"``
        (and ``client`` only None): out-of-core populations are opened by
        :func:`bayes_eval.parquet.read_parquet` with ``engine="dask"`` or by
        :meth:`bayes_eval.dask.DaskPopulation.from_parquet`, so that this module never imports
        the Dask engine (which builds on it).
        """
        if engine != "memory":
            raise ValueError(
                f"engine={engine!r} is not read by Population.from_parquet, which reads into "
                "memory (allowed: 'memory'); for engine='dask' call "
                "bayes_eval.parquet.read_parquet(path, engine='dask', ...)"
            )
        if client is not None:
            raise ValueError(
                f"client={client!r} is for out-of-core populations; allowed here: None (use "
                "bayes_eval.parquet.read_parquet(path, engine='dask', client=...))"
            )
        import pyarrow.parquet as pq

        columns = [c for c in (score_col, id_col, prediction_col) if c is not None]
        path = Path(path)
        if not path.exists():
            raise ValueError(f"path={str(path)!r} does not exist")
        schema_names = pq.read_schema(path).names if path.is_file() else None
        if schema_names is not None:
            check_columns(
                schema_names,
                repr(str(path)),
                score_col=score_col,
                id_col=id_col,
                prediction_col=prediction_col,
            )
        table = pq.read_table(path, columns=columns)
        return cls.from_pandas(
            table.to_pandas(),
            score_col=score_col,
            id_col=id_col,
            prediction_col=prediction_col,
            threshold=threshold,
        )

    # ----------------------------------------------------------------- narrow interface
    @property
    def size(self) -> int:
        """Number of items N."""
        return int(self._scores.shape[0])

    @property
    def threshold(self) -> float | None:
        """Decision threshold, or None when predictions were given explicitly."""
        return self._threshold

    @property
    def scores(self) -> np.ndarray:
        """Scores in population order (read-only float64 array)."""
        return self._scores

    @property
    def predictions(self) -> np.ndarray:
        """Predicted labels in population order (read-only bool array)."""
        return self._predictions

    @property
    def ids(self) -> np.ndarray:
        """Item ids in population order (materialised on demand for default ids)."""
        if self._ids is None:
            return np.arange(self.size, dtype=np.int64)
        return self._ids

    @property
    def has_default_ids(self) -> bool:
        """True when ids are the implicit ``0..N-1``."""
        return self._ids is None

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        """Ids of the items at integer ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        if self._ids is None:
            return positions.copy()
        return take(self._ids, positions)

    def scores_at(self, positions: np.ndarray) -> np.ndarray:
        """Scores of the items at integer ``positions``."""
        return take(self._scores, positions)

    def predictions_at(self, positions: np.ndarray) -> np.ndarray:
        """Predicted labels of the items at integer ``positions``."""
        return take(self._predictions, positions)

    def positions_of(self, ids: ArrayLike, *, name: str = "ids") -> np.ndarray:
        """Positions of the items with the given ids; unknown ids raise ``ValueError``."""
        arr = as_id_query(ids, name)
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
        if self._ids is None:
            arr = as_int_id_query(arr, name, f"integer ids 0..{self.size - 1}")
            return check_position_ids(arr, self.size, name)
        if self._index is None:
            import pandas as pd

            self._index = pd.Index(self._ids)
        if np.issubdtype(self._ids.dtype, np.integer) and arr.dtype == object:
            with contextlib.suppress(TypeError, ValueError):
                arr = _to_int64(arr, name)
        elif np.issubdtype(self._ids.dtype, np.integer) and arr.dtype == np.uint64:
            arr = _to_int64(arr, name)
        if np.issubdtype(self._ids.dtype, np.str_) and arr.dtype == object:
            arr = arr.astype(str)
        pos = self._index.get_indexer(arr)
        if (pos < 0).any():
            raise ValueError(
                f"{name} contains unknown id {arr[np.flatnonzero(pos < 0)[0]].item()!r}; "
                "allowed: ids of items in the population"
            )
        return pos.astype(np.int64)

    def fingerprint(self) -> str:
        """SHA-256 of scores, predictions and ids: detects a changed population file."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(np.ascontiguousarray(self._scores).view(np.uint8))
            h.update(np.packbits(self._predictions).tobytes())
            if self._ids is not None:
                if np.issubdtype(self._ids.dtype, np.integer):
                    h.update(np.ascontiguousarray(self._ids).view(np.uint8))
                else:
                    h.update(_string_ids_digest_input(self._ids))
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def __len__(self) -> int:
        return self.size


class SortedIds:
    """An id index from plain (possibly memory-mapped) arrays: the ids sorted, and their positions.

    A lookup is a binary search, O(log N) per id (reading single items of memory-mapped arrays,
    :mod:`bayes_eval._mapped`), so a stored population answers ``positions_of`` without building
    a hash table of all N ids.

    Parameters
    ----------
    sorted_ids : ndarray, shape (N,)
        The ids in increasing order (int64, or fixed-width strings).
    positions : ndarray of int, shape (N,)
        ``positions[i]`` is the population position of ``sorted_ids[i]``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.population import SortedIds
    >>> SortedIds.build(np.array([30, 10, 20])).get_indexer(np.array([20, 30, 5]))
    array([ 2,  0, -1])
    """

    __slots__ = ("positions", "sorted_ids")

    def __init__(self, sorted_ids: np.ndarray, positions: np.ndarray) -> None:
        self.sorted_ids = sorted_ids
        self.positions = positions

    @classmethod
    def build(cls, ids: np.ndarray) -> SortedIds:
        """The index of ``ids`` (an O(N log N) sort)."""
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], order.astype(np.int64))

    def get_indexer(self, query: np.ndarray) -> np.ndarray:
        """Positions of the ``query`` ids, -1 for ids not present (as ``pandas.Index``)."""
        n = self.sorted_ids.shape[0]
        try:
            at = searchsorted(self.sorted_ids, query)
        except TypeError:  # a query of another kind (strings against integers): none found
            return np.full(query.shape[0], -1, dtype=np.int64)
        inside = at < n
        found = np.zeros(query.shape[0], dtype=bool)
        found[inside] = take(self.sorted_ids, at[inside]) == query[inside]
        out = np.full(query.shape[0], -1, dtype=np.int64)
        out[found] = take(self.positions, at[found])
        return out


def _string_ids_digest_input(ids: np.ndarray) -> bytes:
    """An injective byte encoding of string ids for the fingerprint.

    Ids without NUL characters are joined with NUL as in earlier releases (unambiguous for them,
    and old audit directories keep their fingerprint). Otherwise (``['a\\0b', 'c']`` and
    ``['a', 'b\\0c']`` would join alike) the encoding is the byte 0xFF, which never occurs in
    UTF-8 and so never starts the joined form, then every id's UTF-8 length as int64, then the
    ids' bytes.
    """
    values = ids.tolist()
    joined = "\x00".join(values)
    if joined.count("\x00") == max(len(values) - 1, 0):
        try:
            return joined.encode()
        except UnicodeEncodeError:  # lone surrogates: use the length-prefixed form
            pass
    raw = [v.encode("utf-8", "surrogatepass") for v in values]
    lengths = np.fromiter((len(b) for b in raw), dtype="<i8", count=len(raw))
    return b"\xff" + lengths.tobytes() + b"".join(raw)

    def __repr__(self) -> str:
        npos = int(self._predictions.sum())
        rule = f"threshold={self._threshold:g}" if self._threshold is not None else "given"
        return (
            f"Population(N={self.size:,}, predicted positive={npos:,}, predictions {rule}, "
            f"scores in [{self._scores.min():.4g}, {self._scores.max():.4g}])"
        )
