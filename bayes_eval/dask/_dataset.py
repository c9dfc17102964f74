"""The passes engine of an out-of-core population: a set of Parquet pieces and its client.

:class:`PieceSet` maps a per-piece kernel over every piece as Dask tasks and reduces the results
with a tree; it runs the validating *scan* (row counts, predicted positives, per-side score
ranges, non-finite scores, invalid predictions, duplicate ids: ids are globally unique when the
pieces' id ranges do not overlap, otherwise a hash shuffle in Dask tasks looks for duplicates)
and the look-ups by position or id (one pass each, for user calls and reports, never per audit
batch). It knows nothing of strata; :mod:`bayes_eval.dask.population` builds the public
population on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._sampler import item_keys
from ..models._profile import inner_range
from ..population import as_id_query, as_int_id_query, check_position_ids
from ._pieces import Columns, Piece, as_bool_predictions, file_start, read_piece, tree_reduce

__all__ = ["PieceSet", "Scan"]


@dataclass(frozen=True, slots=True)
class Scan:
    """What the scan pass learns: ``n`` items; per predicted side (False, True) the
    (min score, max score, count); the overall score range; the smallest and largest score
    strictly inside (0, 1) (NaN if none: the pooled model's clip of exact 0 and 1 scores,
    :func:`bayes_eval.models._profile.probability_clip`)."""

    n: int
    side: dict[bool, tuple[float, float, int]]
    score_min: float
    score_max: float
    inner_min: float = float("nan")
    inner_max: float = float("nan")


# ====================================================================== per-piece kernels
def _scan_piece(piece: Piece, fs: Any, cols: Columns) -> dict:
    """Validate one piece and summarise it: rows, per-side score range, id range, first problem."""
    d = read_piece(piece, fs, cols, ("score", "pred", "id"))
    score, pred, ids = d["score"], d["pred"], d["id"]
    out: dict[str, Any] = {
        "n": int(score.shape[0]),
        "bad_score": None,
        "bad_pred": None,
        "dup": None,
        "ids": None,
    }
    finite = np.isfinite(score)
    if not finite.all():
        i = int(np.flatnonzero(~finite)[0])
        out["bad_score"] = (piece.path, i, float(score[i]))
    if cols.prediction is not None:
        if pred.dtype != bool:
            if not np.issubdtype(pred.dtype, np.number):
                out["bad_pred"] = (piece.path, 0, f"dtype {pred.dtype}")
            else:
                bad = ~np.isin(pred, (0, 1))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    out["bad_pred"] = (piece.path, i, pred[i].item())
        if out["bad_pred"] is None:
            pred = as_bool_predictions(pred)
    side: dict[bool, tuple[float, float, int]] = {}
    if out["bad_score"] is None and out["bad_pred"] is None:
        for s in (False, True):
            v = score[pred == s]
            if v.size:
                side[s] = (float(v.min()), float(v.max()), int(v.size))
        out["inner"] = inner_range(score)
    out["side"] = side
    if cols.id is not None and ids.size:
        if ids.dtype == object or not np.issubdtype(ids.dtype, np.integer):
            ids = ids.astype(object)
            kinds = {type(v) for v in ids[:1000]}
            if not kinds <= {str}:
                out["ids"] = ("bad", sorted(k.__name__ for k in kinds))
                return out
        if np.issubdtype(ids.dtype, np.integer) and ids.size > 1 and (ids[1:] > ids[:-1]).all():
            unique = True
        else:
            index = pd.Index(ids)
            unique = index.is_unique
            if not unique:
                out["dup"] = index[index.duplicated()][0]
                if hasattr(out["dup"], "item"):
                    out["dup"] = out["dup"].item()
        out["ids"] = (
            (min(ids), max(ids)) if ids.dtype == object else (int(ids.min()), int(ids.max()))
        )
    return out


def _combine_scan(parts: list[Any]) -> list[dict]:
    """The per-piece scan summaries as one list, in piece order."""
    flat: list[dict] = []
    for p in parts:
        flat.extend(p if isinstance(p, list) else [p])
    return flat


def _bucket_ids(piece: Piece, fs: Any, cols: Columns, n_buckets: int) -> list[np.ndarray]:
    """The ids of one piece split into ``n_buckets`` buckets by a hash (for the shuffle)."""
    ids = read_piece(piece, fs, cols, ("id",))["id"]
    bucket = item_keys(ids, 0) % np.uint64(n_buckets)
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
    return [ids[order[bounds[b] : bounds[b + 1]]] for b in range(n_buckets)]


def _first_duplicate(chunks: list[np.ndarray]) -> list:
    """The first duplicated id of one bucket and its count (empty when all are unique)."""
    ids = np.concatenate(chunks) if chunks else np.empty(0)
    index = pd.Index(ids)
    if index.is_unique:
        return []
    counts = index.value_counts()
    bad = counts[counts > 1]
    first = bad.index[0]
    return [(getattr(first, "item", lambda: first)(), int(bad.iloc[0]))]


def _combine_duplicates(parts: list[list]) -> list:
    """At most one duplicate found over the buckets."""
    return [d for p in parts for d in p][:1]


# ====================================================================== look-up kernels
def _lookup_piece(piece: Piece, fs: Any, cols: Columns, wanted: np.ndarray) -> pd.DataFrame:
    """Rows (id, position, score, prediction) of one piece whose id is in ``wanted``."""
    d = read_piece(piece, fs, cols, ("score", "pred", "id", "pos"))
    hit = pd.Index(d["id"]).isin(wanted) if cols.id is not None else np.isin(d["id"], wanted)
    hit = np.asarray(hit)
    return pd.DataFrame(
        {
            "id": d["id"][hit],
            "position": d["pos"][hit],
            "score": d["score"][hit],
            "prediction": as_bool_predictions(d["pred"][hit]),
        }
    )


def _combine_frames(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenated look-up rows (an empty frame with the columns when none)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(
            {
                "id": [],
                "position": np.empty(0, np.int64),
                "score": [],
                "prediction": np.empty(0, bool),
            }
        )
    return pd.concat(parts, ignore_index=True)


def _positions_piece(piece: Piece, fs: Any, cols: Columns, rows: np.ndarray) -> pd.DataFrame:
    """Rows (id, position, score, prediction) of one piece at local ``rows``."""
    d = read_piece(piece, fs, cols, ("score", "pred", "id", "pos"))
    return pd.DataFrame(
        {
            "id": d["id"][rows],
            "position": d["pos"][rows],
            "score": d["score"][rows],
            "prediction": as_bool_predictions(d["pred"][rows]),
        }
    )


def _frame_piece(piece: Piece, fs: Any, cols: Columns) -> pd.DataFrame:
    """One partition of the lazy DataFrame: the whole piece, indexed by global position."""
    d = read_piece(piece, fs, cols, ("score", "pred", "id"))
    return pd.DataFrame(
        {"id": d["id"], "score": d["score"], "prediction": as_bool_predictions(d["pred"])},
        index=pd.RangeIndex(piece.offset, piece.offset + piece.nrows),
    )


# ====================================================================== the engine
class PieceSet:
    """The pieces of a Parquet dataset, where passes over them run, and a position cache.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
    files : list of str
        In the (sorted) order that defines global positions.
    cols : Columns
    pieces : list of Piece
    client : distributed.Client or None
        Where passes run; None: Dask's default scheduler.
    meta : list of dict
        Per-file metadata from :func:`bayes_eval.dask._pieces.open_pieces`.
    """

    def __init__(
        self,
        fs: Any,
        files: list[str],
        cols: Columns,
        pieces: list[Piece],
        client: Any,
        meta: list[dict],
    ) -> None:
        self.fs = fs
        self.files = tuple(files)
        self.cols = cols
        self.pieces = pieces
        self.client = client
        self.meta = meta
        self._cache: dict[int, tuple[Any, float, bool]] = {}  # position -> (id, score, pred)

    # ------------------------------------------------------------------ running passes
    def compute(self, *objs: Any) -> tuple:
        """Compute delayed objects on the client (or Dask's default scheduler)."""
        import dask

        if self.client is not None:
            return tuple(self.client.gather(self.client.compute(list(objs))))
        return dask.compute(*objs)

    def map(self, fn: Callable, *args: Any) -> list:
        """``fn(piece, fs, cols, *args)`` as one delayed task per piece."""
        import dask

        fd = dask.delayed(fn, pure=True)
        return [fd(p, self.fs, self.cols, *args) for p in self.pieces]

    def reduce(self, fn: Callable, combine: Callable, *args: Any) -> Any:
        """One pass: ``fn`` over every piece, combined by a tree of ``combine``."""
        (res,) = self.compute(tree_reduce(self.map(fn, *args), combine))
        return res

    def id_dtype(self) -> Any:
        """int64 for integer (or default) ids, object for string ids."""
        if self.cols.id is None:
            return np.int64
        md = self.meta[0]["types"]
        used = [c for c in (self.cols.score, self.cols.id, self.cols.prediction) if c]
        t = md[used.index(self.cols.id)]
        return object if "string" in t else np.int64

    @property
    def size(self) -> int:
        """Rows in all pieces."""
        last = self.pieces[-1]
        return last.offset + last.nrows

    # ------------------------------------------------------------------ scan
    def scan(self) -> Scan:
        """The validating scan pass (see the module docstring)."""
        parts = self.reduce(_scan_piece, _combine_scan)
        n = 0
        side: dict[bool, list[float]] = {}
        inner = [np.inf, -np.inf]
        ranges = []
        cols = self.cols
        for piece, p in zip(self.pieces, parts, strict=True):
            if p["bad_score"] is not None:
                f, i, val = p["bad_score"]
                raise ValueError(
                    f"score column {cols.score!r} has a non-finite value {val!r} (row "
                    f"{piece.offset - file_start(self.pieces, piece) + i} of {f!r}); allowed: "
                    "finite real numbers"
                )
            if p["bad_pred"] is not None:
                f, i, val = p["bad_pred"]
                raise ValueError(
                    f"prediction column {cols.prediction!r} has value {val!r} in {f!r}; "
                    "allowed: 0/1 or True/False"
                )
            if p["ids"] is not None and p["ids"][0] == "bad":
                raise TypeError(
                    f"id column {cols.id!r} has values of type(s) {p['ids'][1]} in "
                    f"{piece.path!r}; allowed: all integers or all strings"
                )
            if p["dup"] is not None:
                raise ValueError(
                    f"ids must be unique; id {p['dup']!r} occurs more than once in {piece.path!r}"
                )
            n += p["n"]
            for s, (lo, hi, c) in p["side"].items():
                if s in side:
                    side[s] = [min(side[s][0], lo), max(side[s][1], hi), side[s][2] + c]
                else:
                    side[s] = [lo, hi, c]
            lo, hi = p["inner"]
            if np.isfinite(lo):
                inner = [min(inner[0], lo), max(inner[1], hi)]
            if p["ids"] is not None:
                ranges.append((p["ids"][0], p["ids"][1], piece.path))
        kinds = {type(r[0]) for r in ranges}
        if len(kinds) > 1:
            raise TypeError(
                f"id column {cols.id!r} holds integers in some files and strings in others;"
                " allowed: all integers or all strings"
            )
        ranges.sort(key=lambda r: (r[0], r[1]))
        if any(a[1] >= b[0] for a, b in itertools.pairwise(ranges)):
            self._check_unique_ids()
        return Scan(
            n=n,
            side={s: (float(v[0]), float(v[1]), int(v[2])) for s, v in side.items()},
            score_min=min(v[0] for v in side.values()),
            score_max=max(v[1] for v in side.values()),
            inner_min=float(inner[0]) if np.isfinite(inner[0]) else float("nan"),
            inner_max=float(inner[1]) if np.isfinite(inner[1]) else float("nan"),
        )

    def _check_unique_ids(self) -> None:
        """Global duplicate check when the pieces' id ranges overlap: a hash shuffle in Dask
        tasks (each piece splits its ids into ``B`` buckets by a hash; one task per bucket
        checks its ids), so no id reaches the driver."""
        import dask

        n_buckets = max(1, len(self.pieces))
        split = dask.delayed(_bucket_ids, pure=True, nout=n_buckets)
        parts = [split(p, self.fs, self.cols, n_buckets) for p in self.pieces]
        check = dask.delayed(_first_duplicate, pure=True)
        found = [check([part[b] for part in parts]) for b in range(n_buckets)]
        (dups,) = self.compute(tree_reduce(found, _combine_duplicates))
        if dups:
            bad, count = dups[0]
            raise ValueError(
                f"ids must be unique; id {bad!r} occurs more than once across the files "
                f"(id column {self.cols.id!r}, {count} occurrences)"
            )

    # ------------------------------------------------------------------ look-ups
    def rows_at(self, positions: Any, name: str = "positions") -> pd.DataFrame:
        """DataFrame(id, score, prediction) of the items at global ``positions`` (reads only
        the pieces holding the positions not yet cached)."""
        size = self.size
        pos = np.asarray(positions)
        if pos.ndim == 0:
            pos = pos.reshape(1)
        if pos.dtype == bool or not np.issubdtype(pos.dtype, np.integer):
            raise ValueError(f"{name} has dtype {pos.dtype}; allowed: integer positions")
        pos = pos.astype(np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= size):
            bad = pos[(pos < 0) | (pos >= size)][0]
            raise ValueError(f"{name} contains {int(bad)}; allowed: 0..{size - 1}")
        missing = np.unique(pos[[int(p) not in self._cache for p in pos]])
        if missing.size:
            import dask

            starts = np.array([p.offset for p in self.pieces])
            which = np.searchsorted(starts, missing, side="right") - 1
            fd = dask.delayed(_positions_piece, pure=True)
            tasks = [
                fd(
                    self.pieces[w],
                    self.fs,
                    self.cols,
                    missing[which == w] - self.pieces[w].offset,
                )
                for w in np.unique(which)
            ]
            (frame,) = self.compute(tree_reduce(tasks, _combine_frames))
            self._remember(frame)
        rows = [self._cache[int(p)] for p in pos]
        return pd.DataFrame(
            {
                "id": [r[0] for r in rows],
                "score": [r[1] for r in rows],
                "prediction": np.array([r[2] for r in rows], dtype=bool),
            }
        )

    def _remember(self, frame: pd.DataFrame) -> None:
        if len(self._cache) > 1_000_000:
            self._cache.clear()
        for i, p, s, pr in zip(
            frame["id"], frame["position"], frame["score"], frame["prediction"], strict=True
        ):
            self._cache[int(p)] = (i, float(s), bool(pr))

    def lookup(self, ids: Any, *, name: str = "ids") -> pd.DataFrame:
        """One pass: DataFrame(id, position, score, prediction) of ``ids``, in the given order;
        a ``ValueError`` names the first unknown id."""
        arr = as_id_query(ids, name)
        if arr.size == 0:
            return _combine_frames([])
        if self.id_dtype() is np.int64:
            arr = as_int_id_query(arr, name, "integer ids (this population has integer ids)")
        else:
            arr = arr.astype(object)
        if self.cols.id is None:
            arr = check_position_ids(arr, self.size, name)
            frame = self.rows_at(arr)
            frame.insert(1, "position", arr)
            return frame
        found = self.reduce(_lookup_piece, _combine_frames, pd.unique(arr))
        self._remember(found)
        index = pd.Index(found["id"].to_numpy())
        pos = index.get_indexer(arr)
        if (pos < 0).any():
            bad = arr[np.flatnonzero(pos < 0)[0]]
            raise ValueError(
                f"{name} contains unknown id {getattr(bad, 'item', lambda: bad)()!r}; "
                "allowed: ids of items in the population"
            )
        return found.iloc[pos].reset_index(drop=True)

    def frame(self) -> Any:
        """The dataset as a lazy Dask DataFrame (columns id, score, prediction; index = global
        position), one partition per piece."""
        return self.from_map(
            _frame_piece,
            pd.DataFrame(
                {
                    "id": pd.Series([], dtype=self.id_dtype()),
                    "score": pd.Series([], dtype=np.float64),
                    "prediction": pd.Series([], dtype=bool),
                }
            ),
        )

    def from_map(self, fn: Callable, meta: Any, *args: Any) -> Any:
        """A lazy Dask collection with one partition ``fn(piece, fs, cols, *args)`` per piece,
        indexed by global position."""
        import dask.dataframe as dd

        last = self.pieces[-1]
        divisions = [p.offset for p in self.pieces] + [last.offset + last.nrows - 1]
        return dd.from_map(
            fn,
            self.pieces,
            args=(self.fs, self.cols, *args),
            meta=meta,
            divisions=divisions,
            enforce_metadata=False,
        )
