"""Out-of-core populations on Dask: partitioned Parquet, lazy strata and a keyed sampler.

An audit needs the stratum boundaries, the exact stratum sizes ``N_k`` and the few items it
proposes; none of that needs the population in one process's memory. :class:`DaskPopulation`
reads a partitioned Parquet dataset (a directory, a glob or a list of files) lazily; every pass
over it is a Dask graph of one task per *piece* (a run of row groups of one file) followed by a
tree reduction, so the driver only ever holds per-piece summaries: histograms, per-stratum
counts, bottom-k reservoirs.

Passes (each reads only the columns it needs):

1. **Scan** (at construction): row counts, predicted positives, per-side score range, NaN /
   non-finite scores, invalid predictions, id ranges and duplicate ids within a piece. Ids are
   globally unique when the pieces' id ranges do not overlap; otherwise a hash shuffle in Dask
   tasks (ids split into buckets by hash, one task per bucket) looks for duplicates.
2. **Stratify** (:meth:`DaskPopulation.stratify_lazy`): a histogram pass of the stratification
   variable per predicted side; for ``"equal_size"`` refinement passes that collect the exact
   values in the histogram bins containing the target ranks, so the boundaries are the *exact*
   order statistics the in-memory :func:`bayes_eval.stratify` uses; a counting pass for the exact
   ``N_k`` and score ranges.
3. **Reservoir** (:class:`DaskStratumSampler`): one pass keeps, per stratum, the items with the
   smallest keys :func:`bayes_eval._sampler.item_keys` (bottom-k per piece, merged); later
   batches are served from it, and a stratum that runs out is refilled by a further pass over
   items whose (key, id) exceed the last one served.

Costs: the scan, 3 stratification passes for ``"equal_size"`` (histogram, collect, count; one
more per re-binning level when a target bin holds over ``COLLECT_LIMIT`` items), 2 for the
other methods, 1 reservoir pass; then O(m) per batch of m proposals. Driver memory is bounded
by the summaries (K x reservoir items, ``HIST_BINS`` counts per piece and side, at most
``COLLECT_LIMIT`` values per target bin), whatever N; each task holds one piece.

The global *position* of an item is its rank in (file order, row order); it is fixed by the
Parquet footers, whatever the Dask partitioning, and equals the position of the in-memory
:meth:`bayes_eval.Population.from_parquet` over the same files (files in sorted path order).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (web-scale populations, score
strata). Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (stratification methods).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._sampler import _check_seed, item_keys
from ._stratifiers import STRATIFIERS, equal_size_from_counts
from ._validation import as_generator, check_option, check_positive_int
from .population import as_id_query, as_int_id_query, check_columns
from .strata import Strata, _as_n_strata, _auto_n_strata, _index_dtype

__all__ = ["DaskPopulation", "DaskStrata", "DaskStratumSampler"]

#: default number of rows per piece (one Dask task reads one piece)
ROWS_PER_PIECE = 2_000_000
#: histogram bins of the stratification variable per side and refinement level
HIST_BINS = 4096
#: a histogram bin holding at most this many items is collected exactly on the driver
COLLECT_LIMIT = 1_000_000
#: at most this many distinct values are gathered to repair tied equal_size edges
DISTINCT_LIMIT = 1_000_000
#: items per stratum kept by the first reservoir pass: a refill is a full pass, so the reservoir
#: should cover the labels an audit will want per stratum (8192 x K x 24 bytes on the driver)
DEFAULT_RESERVOIR = 8192
#: size of the sorted "quantile sample" fed to stratifiers that need raw values
QUANTILE_SAMPLE = 1 << 20
_PARQUET_EXT = (".parquet", ".parq", ".pq")


# ====================================================================== reading pieces
@dataclass(frozen=True, slots=True)
class _Piece:
    """A run of row groups of one Parquet file; ``offset`` is its first global position."""

    path: str
    row_groups: tuple[int, ...]
    offset: int
    nrows: int


@dataclass(frozen=True, slots=True)
class _Cols:
    """Column names and the rule for predictions (shipped to every task)."""

    score: str
    id: str | None
    prediction: str | None
    threshold: float | None


def _read(piece: _Piece, fs: Any, cols: _Cols, want: Sequence[str]) -> dict[str, np.ndarray]:
    """Read ``want`` (subset of "score", "pred", "id", "pos") of one piece as numpy arrays."""
    import pyarrow.parquet as pq

    names: list[str] = []
    if "score" in want or ("pred" in want and cols.prediction is None):
        names.append(cols.score)
    if "pred" in want and cols.prediction is not None:
        names.append(cols.prediction)
    if "id" in want and cols.id is not None:
        names.append(cols.id)
    names = list(dict.fromkeys(names))
    if _is_local(fs):
        pf = pq.ParquetFile(piece.path, memory_map=True)
        table = pf.read_row_groups(list(piece.row_groups), columns=names)
    else:
        with fs.open(piece.path, "rb") as fh:
            table = pq.ParquetFile(fh).read_row_groups(list(piece.row_groups), columns=names)
    out: dict[str, np.ndarray] = {}
    score = None
    if cols.score in names:
        col = table.column(cols.score)
        score = col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if col.null_count:
            score = np.where(
                np.asarray(col.is_null().to_numpy(zero_copy_only=False)), np.nan, score
            )
    if "score" in want:
        out["score"] = score
    if "pred" in want:
        if cols.prediction is None:
            assert score is not None and cols.threshold is not None
            out["pred"] = score >= cols.threshold
        else:
            out["pred"] = table.column(cols.prediction).to_numpy(zero_copy_only=False)
    if "id" in want or "pos" in want:
        pos = np.arange(piece.offset, piece.offset + piece.nrows, dtype=np.int64)
        if "pos" in want:
            out["pos"] = pos
        if "id" in want:
            if cols.id is None:
                out["id"] = pos
            else:
                ids = table.column(cols.id).to_numpy(zero_copy_only=False)
                if np.issubdtype(ids.dtype, np.integer):
                    ids = ids.astype(np.int64, copy=False)
                out["id"] = ids
    return out


def _is_local(fs: Any) -> bool:
    protocol = getattr(fs, "protocol", "file")
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "file" in protocols or "local" in protocols


def _as_bool_predictions(pred: np.ndarray) -> np.ndarray:
    if pred.dtype == bool:
        return pred
    return pred.astype(bool)


def _list_files(path: Any, storage_options: dict | None) -> tuple[Any, list[str]]:
    """Expand a directory, glob, file or list of them to sorted Parquet file paths."""
    import fsspec

    paths = [path] if isinstance(path, str | Path) else list(path)
    if not paths:
        raise ValueError("path is an empty list; allowed: a Parquet file, directory or glob")
    fs, _, _ = fsspec.core.get_fs_token_paths(str(paths[0]), storage_options=storage_options)
    files: list[str] = []
    for p in paths:
        p = str(p)
        if any(ch in p for ch in "*?["):
            found = fs.glob(p)
        elif fs.isdir(p):
            found = [f for f in fs.find(p) if not Path(f).name.startswith(("_", "."))]
            found = [f for f in found if f.endswith(_PARQUET_EXT)]
        elif fs.exists(p):
            found = [p]
        else:
            raise ValueError(f"path={p!r} does not exist")
        files.extend(str(f) for f in found if not fs.isdir(f))
    files = sorted(dict.fromkeys(files))
    if not files:
        raise ValueError(f"path={path!r} contains no Parquet files (*.parquet, *.parq, *.pq)")
    return fs, files


# ====================================================================== graph helpers
def _tree(parts: list[Any], combine: Callable[[list[Any]], Any], split_every: int = 8) -> Any:
    """Tree reduction of delayed objects (the driver only receives the root)."""
    import dask

    combine_d = dask.delayed(combine, pure=True)
    while True:  # combine at least once, so that the root always has the combined type
        parts = [combine_d(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
        if len(parts) <= 1:
            return parts[0] if parts else combine_d([])


# ====================================================================== scan pass
def _scan_piece(piece: _Piece, fs: Any, cols: _Cols) -> dict:
    d = _read(piece, fs, cols, ("score", "pred", "id"))
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
            pred = _as_bool_predictions(pred)
    side: dict[bool, tuple[float, float, int]] = {}
    if out["bad_score"] is None and out["bad_pred"] is None:
        for s in (False, True):
            v = score[pred == s]
            if v.size:
                side[s] = (float(v.min()), float(v.max()), int(v.size))
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
    flat: list[dict] = []
    for p in parts:
        flat.extend(p if isinstance(p, list) else [p])
    return flat


def _bucket_ids(piece: _Piece, fs: Any, cols: _Cols, n_buckets: int) -> list[np.ndarray]:
    ids = _read(piece, fs, cols, ("id",))["id"]
    bucket = item_keys(ids, 0) % np.uint64(n_buckets)
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
    return [ids[order[bounds[b] : bounds[b + 1]]] for b in range(n_buckets)]


def _first_duplicate(chunks: list[np.ndarray]) -> list:
    ids = np.concatenate(chunks) if chunks else np.empty(0)
    index = pd.Index(ids)
    if index.is_unique:
        return []
    counts = index.value_counts()
    bad = counts[counts > 1]
    first = bad.index[0]
    return [(getattr(first, "item", lambda: first)(), int(bad.iloc[0]))]


def _combine_duplicates(parts: list[list]) -> list:
    return [d for p in parts for d in p][:1]


# ====================================================================== stratification kernels
def _variable(score: np.ndarray, pred: np.ndarray, spec: dict) -> np.ndarray:
    """The stratification variable (same formula as :func:`bayes_eval.strata._confidence`)."""
    if spec["variable"] == "score":
        return score
    if spec["kind"] == "probability":
        return np.where(pred, score, 1.0 - score)
    return np.abs(score - spec["threshold"])


def _bin_index(v: np.ndarray, lo: float, width: float, nbins: int) -> np.ndarray:
    if width <= 0:
        return np.zeros(v.shape, dtype=np.int64)
    idx = np.floor((v - lo) / width)
    return np.clip(idx, 0, nbins - 1).astype(np.int64)


def _in_path(v: np.ndarray, path: tuple, top: dict, side: bool) -> np.ndarray:
    """Values whose nested bin indices equal ``path`` [(lo, width, bin), ...]; the first level's
    bin index of the whole side is computed once per piece (``top`` cache)."""
    lo, width, b = path[0]
    key = (side, lo, width)
    if key not in top:
        top[key] = _bin_index(v, lo, width, HIST_BINS)
    v = v[top[key] == b]
    for lo, width, b in path[1:]:
        v = v[_bin_index(v, lo, width, HIST_BINS) == b]
    return v


def _hist_piece(piece: _Piece, fs: Any, cols: _Cols, spec: dict, targets: list) -> list:
    """For every target (side, path, mode, (lo, width)) the values of the items of that side
    whose nested bins equal ``path``, summarised by ``mode``: ``"hist"`` (counts over
    ``HIST_BINS`` sub-bins, min, max), ``"collect"`` (the values) or ``"distinct"`` (distinct
    values and their counts, None beyond ``DISTINCT_LIMIT``)."""
    d = _read(piece, fs, cols, ("score", "pred"))
    pred = _as_bool_predictions(d["pred"])
    v_all = _variable(d["score"], pred, spec)
    by_side = {s: v_all[pred == s] for s in (False, True)}
    out: list[Any] = []
    top: dict = {}
    for side, path, mode, sub in targets:
        v = by_side[side]
        if path:
            v = _in_path(v, path, top, side)
        if mode == "collect":
            out.append(v)
        elif mode == "distinct":
            u, c = np.unique(v, return_counts=True)
            out.append(None if u.size > DISTINCT_LIMIT else (u, c.astype(np.int64)))
        else:
            lo, width = sub
            counts = np.bincount(_bin_index(v, lo, width, HIST_BINS), minlength=HIST_BINS)
            out.append(
                (
                    counts.astype(np.int64),
                    float(v.min()) if v.size else np.inf,
                    float(v.max()) if v.size else -np.inf,
                )
            )
    return out


def _combine_hist(parts: list[list], modes: tuple[str, ...]) -> list:
    out: list[Any] = []
    for j, mode in enumerate(modes):
        items = [p[j] for p in parts]
        if mode == "collect":
            out.append(np.concatenate(items))
        elif mode == "distinct":
            if any(x is None for x in items):
                out.append(None)
                continue
            u, inv = np.unique(np.concatenate([x[0] for x in items]), return_inverse=True)
            c = np.bincount(inv, weights=np.concatenate([x[1] for x in items]))
            out.append(None if u.size > DISTINCT_LIMIT else (u, c.astype(np.int64)))
        else:
            out.append(
                (
                    np.sum([x[0] for x in items], axis=0),
                    min(x[1] for x in items),
                    max(x[2] for x in items),
                )
            )
    return out


def _local(v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Number of edges <= v (= ``searchsorted(edges, v, "right")``); one comparison pass per
    edge, several times faster than a binary search for the few edges of a stratification."""
    if edges.shape[0] > 64:
        return np.searchsorted(edges, v, side="right")
    local = np.zeros(v.shape[0], dtype=np.int16)
    for e in edges:
        local += v >= e
    return local


def _assign(score: np.ndarray, pred: np.ndarray, plan: dict) -> np.ndarray:
    """Global stratum index of items from their score and predicted side (-1 never occurs)."""
    v = _variable(score, pred, plan["spec"])
    out = np.empty(score.shape[0], dtype=np.int64)
    for side in (False, True):
        m = pred == side
        if not m.any():
            continue
        info = plan["sides"].get(side)
        if info is None:  # pragma: no cover - population changed under us
            raise RuntimeError("an item lies on a predicted side that had no items at stratify")
        out[m] = info["offset"] + info["rank"][_local(v[m], info["edges"])]
    return out


def _count_piece(piece: _Piece, fs: Any, cols: _Cols, plan: dict) -> dict:
    """Per-side counts and score ranges of the candidate bins ``plan['sides'][s]['edges']``."""
    d = _read(piece, fs, cols, ("score", "pred"))
    score, pred = d["score"], _as_bool_predictions(d["pred"])
    v = _variable(score, pred, plan["spec"])
    out = {}
    for side, info in plan["sides"].items():
        m = pred == side
        k = info["edges"].shape[0] + 1
        local = _local(v[m], info["edges"])
        s = score[m]
        cnt = np.bincount(local, minlength=k).astype(np.int64)
        lo = np.full(k, np.inf)
        hi = np.full(k, -np.inf)
        np.minimum.at(lo, local, s)
        np.maximum.at(hi, local, s)
        out[side] = (cnt, lo, hi, np.bincount(local, weights=s, minlength=k))
    return out


def _combine_count(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        for side, (cnt, lo, hi, tot) in p.items():
            if side not in out:
                out[side] = (cnt.copy(), lo.copy(), hi.copy(), tot.copy())
            else:
                c0, l0, h0, t0 = out[side]
                out[side] = (c0 + cnt, np.minimum(l0, lo), np.maximum(h0, hi), t0 + tot)
    return out


# ====================================================================== reservoir pass
def _bottom(keys: np.ndarray, ids: np.ndarray, r: int) -> np.ndarray:
    """Indices of the ``r`` smallest (key, id), in increasing order."""
    if keys.shape[0] > r:
        cut = np.partition(keys, r - 1)[r - 1]
        sel = np.flatnonzero(keys <= cut)  # keep key ties at the cut: the id decides
    else:
        sel = np.arange(keys.shape[0])
    order = np.lexsort((ids[sel], keys[sel]))
    return sel[order[:r]]


def _reservoir_piece(
    piece: _Piece, fs: Any, cols: _Cols, plan: dict, seed: int, want: dict[int, tuple]
) -> dict:
    """For each wanted stratum ``k -> (r, after_key, after_id, cutoff)``: the ``r`` smallest
    (key, id) after the frontier among items with key <= cutoff (None: no cutoff)."""
    d = _read(piece, fs, cols, ("score", "pred", "id"))
    ids = d["id"]
    keys = item_keys(ids, seed)
    cuts = [w[3] for w in want.values()]
    if any(c is None for c in cuts):
        idx = np.arange(ids.shape[0])
    else:  # keys are uniform: the cutoff leaves few candidates, whose strata are then computed
        idx = np.flatnonzero(keys <= np.uint64(max(cuts)))
    keys, ids = keys[idx], ids[idx]
    score = d["score"][idx]
    st = _assign(score, _as_bool_predictions(d["pred"][idx]), plan)
    out = {}
    for k, (r, akey, aid, cut) in want.items():
        m = st == k
        if cut is not None:
            m &= keys <= np.uint64(cut)
        if akey is not None:
            m &= (keys > np.uint64(akey)) | ((keys == np.uint64(akey)) & (ids > aid))
        sel = np.flatnonzero(m)
        if sel.size == 0:
            continue
        b = sel[_bottom(keys[sel], ids[sel], r)]
        out[k] = (keys[b], ids[b], score[b])
    return out


def _combine_reservoir(parts: list[dict], want: dict[int, tuple]) -> dict:
    """Merge bottom-r reservoirs (associative, so it can run as a tree)."""
    out = {}
    for k, w in want.items():
        got = [p[k] for p in parts if k in p]
        if not got:
            continue
        keys = np.concatenate([g[0] for g in got])
        ids = np.concatenate([g[1] for g in got])
        scores = np.concatenate([g[2] for g in got])
        b = _bottom(keys, ids, w[0])
        out[k] = (keys[b], ids[b], scores[b])
    return out


def _cutoff(r: int, left: int, front: int | None) -> int | None:
    """Key cutoff above which an item is very unlikely among the next ``r`` of ``left`` items
    whose keys are uniform on [front, 2^64): the expected count below it is
    ``r + 6 sqrt(r) + 20`` (a Poisson shortfall below ``r`` has probability < 1e-9, and is
    detected and repaired by a pass without cutoff)."""
    lam = r + 6.0 * np.sqrt(r) + 20.0
    if lam >= left:
        return None
    lower = 0 if front is None else int(front)
    return lower + int(((1 << 64) - lower) * (lam / left))


# ====================================================================== lookup pass
def _lookup_piece(piece: _Piece, fs: Any, cols: _Cols, wanted: np.ndarray) -> pd.DataFrame:
    d = _read(piece, fs, cols, ("score", "pred", "id", "pos"))
    hit = pd.Index(d["id"]).isin(wanted) if cols.id is not None else np.isin(d["id"], wanted)
    hit = np.asarray(hit)
    return pd.DataFrame(
        {
            "id": d["id"][hit],
            "position": d["pos"][hit],
            "score": d["score"][hit],
            "prediction": _as_bool_predictions(d["pred"][hit]),
        }
    )


def _combine_frames(parts: list[pd.DataFrame]) -> pd.DataFrame:
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


def _positions_piece(piece: _Piece, fs: Any, cols: _Cols, rows: np.ndarray) -> pd.DataFrame:
    d = _read(piece, fs, cols, ("score", "pred", "id", "pos"))
    return pd.DataFrame(
        {
            "id": d["id"][rows],
            "position": d["pos"][rows],
            "score": d["score"][rows],
            "prediction": _as_bool_predictions(d["pred"][rows]),
        }
    )


def _assign_frame(piece: _Piece, fs: Any, cols: _Cols, plan: dict) -> pd.Series:
    d = _read(piece, fs, cols, ("score", "pred"))
    st = _assign(d["score"], _as_bool_predictions(d["pred"]), plan)
    dtype = _index_dtype(plan["n_strata"])
    return pd.Series(
        st.astype(dtype),
        name="stratum",
        index=pd.RangeIndex(piece.offset, piece.offset + piece.nrows),
    )


def _frame_piece(piece: _Piece, fs: Any, cols: _Cols) -> pd.DataFrame:
    d = _read(piece, fs, cols, ("score", "pred", "id"))
    return pd.DataFrame(
        {"id": d["id"], "score": d["score"], "prediction": _as_bool_predictions(d["pred"])},
        index=pd.RangeIndex(piece.offset, piece.offset + piece.nrows),
    )


# ====================================================================== the population
class DaskPopulation:
    """A scored population read lazily from partitioned Parquet with Dask.

    Implements the narrow :class:`bayes_eval.population.PopulationLike` interface without ever
    holding the population on the driver: ``size`` and ``threshold`` are known after one scan pass
    (run at construction, which also validates the data), and look-ups by id or position are one
    pass each (meant for user calls and reports, never per audit batch).

    Build it with :meth:`from_parquet` or ``Population.from_parquet(..., engine="dask")``.

    Attributes
    ----------
    files : tuple of str
        The Parquet files, in the (sorted) order that defines global positions.
    n_pieces : int
        Number of Dask tasks per pass (runs of row groups of at most ``rows_per_piece`` rows).

    Examples
    --------
    >>> import numpy as np, pandas as pd, tempfile, bayes_eval as be
    >>> d = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> for i in range(3):
    ...     pd.DataFrame({"id": np.arange(i * 1000, (i + 1) * 1000),
    ...                   "score": rng.random(1000)}).to_parquet(f"{d}/part-{i}.parquet")
    >>> pop = be.Population.from_parquet(d, score_col="score", id_col="id", threshold=0.5,
    ...                                  engine="dask")
    >>> pop.size, pop.n_pieces
    (3000, 3)
    >>> strata = pop.stratify_lazy(n_strata=2)
    >>> strata.sizes.tolist()
    [763, 763, 737, 737]
    >>> strata.make_sampler(0).draw(3, 4)  # the next 4 ids of stratum 3 in key order
    array([1725,  730,  517, 1970])
    """

    def __init__(
        self,
        fs: Any,
        files: list[str],
        cols: _Cols,
        pieces: list[_Piece],
        client: Any,
        meta: list[dict],
    ) -> None:
        self._fs = fs
        self.files = tuple(files)
        self._cols = cols
        self._pieces = pieces
        self._client = client
        self._meta = meta
        self._scan: dict | None = None
        self._fingerprint: str | None = None
        self._cache: dict[int, tuple[Any, float, bool]] = {}  # position -> (id, score, pred)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_parquet(
        cls,
        path: Any,
        *,
        score_col: str,
        id_col: str | None = None,
        prediction_col: str | None = None,
        threshold: float | None = None,
        client: Any = None,
        rows_per_piece: int = ROWS_PER_PIECE,
        storage_options: dict | None = None,
    ) -> DaskPopulation:
        """Open a Parquet file, directory (searched recursively) or glob lazily.

        Parameters
        ----------
        path : str, Path or list of them
            Files are ordered by path; this order defines global positions.
        score_col, id_col, prediction_col : str
            Columns; without ``id_col`` the ids are the global positions ``0..N-1``.
        threshold : float, optional
            Exactly one of ``threshold`` and ``prediction_col``.
        client : distributed.Client, optional
            Where passes run; default: Dask's default scheduler (the current client if any).
        rows_per_piece : int
            Target rows per task; a piece is a run of whole row groups of one file.

        Raises
        ------
        ValueError
            Missing path or column, NaN/inf scores, predictions not 0/1, duplicate ids.
        TypeError
            A non-numeric score column or ids that are neither integers nor strings.
        """
        import pyarrow.parquet as pq
        import pyarrow.types as pat

        for arg, col in (
            ("score_col", score_col),
            ("id_col", id_col),
            ("prediction_col", prediction_col),
        ):
            if col is not None and not isinstance(col, str):
                raise TypeError(f"{arg}={col!r} must be a column name (str)")
        if (threshold is None) == (prediction_col is None):
            raise ValueError(
                "give exactly one of threshold= and prediction_col= (got threshold="
                f"{threshold!r}, prediction_col={prediction_col!r})"
            )
        if threshold is not None:
            if (
                isinstance(threshold, bool)
                or not isinstance(threshold, numbers.Real)
                or not (np.isfinite(float(threshold)))
            ):
                raise TypeError(f"threshold={threshold!r} must be a finite real number")
            threshold = float(threshold)
        rows_per_piece = check_positive_int(rows_per_piece, "rows_per_piece")
        fs, files = _list_files(path, storage_options)
        cols = _Cols(score_col, id_col, prediction_col, threshold)
        pieces: list[_Piece] = []
        meta: list[dict] = []
        offset = 0
        for f in files:
            with fs.open(f, "rb") as fh:
                md = pq.ParquetFile(fh).metadata
            schema = md.schema.to_arrow_schema()
            check_columns(
                schema.names,
                repr(f),
                score_col=score_col,
                id_col=id_col,
                prediction_col=prediction_col,
            )
            stype = schema.field(score_col).type
            if not (pat.is_integer(stype) or pat.is_floating(stype)) or pat.is_boolean(stype):
                raise TypeError(
                    f"score column {score_col!r} has type {stype} in {f!r}; allowed: real numbers "
                    "(integer or floating point)"
                )
            if id_col is not None:
                itype = schema.field(id_col).type
                if not (
                    pat.is_integer(itype)
                    or pat.is_string(itype)
                    or pat.is_large_string(itype)
                    or pat.is_string_view(itype)
                ):
                    raise TypeError(
                        f"id column {id_col!r} has type {itype} in {f!r}; allowed: integers or "
                        "strings"
                    )
            used = [c for c in (score_col, id_col, prediction_col) if c is not None]
            idx = [schema.names.index(c) for c in used]
            stats = []
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                for j in idx:
                    st = rg.column(j).statistics
                    stats.append(
                        None
                        if st is None or not st.has_min_max
                        else (str(st.min), str(st.max), st.null_count)
                    )
            meta.append(
                {
                    "file": f,
                    "rows": md.num_rows,
                    "row_groups": md.num_row_groups,
                    "size": fs.size(f),
                    "stats": stats,
                    "types": [str(schema.field(c).type) for c in used],
                }
            )
            run: list[int] = []
            run_rows = 0
            for g in range(md.num_row_groups):
                n = md.row_group(g).num_rows
                if run and run_rows + n > rows_per_piece:
                    pieces.append(_Piece(f, tuple(run), offset, run_rows))
                    offset += run_rows
                    run, run_rows = [], 0
                run.append(g)
                run_rows += n
            if run:
                pieces.append(_Piece(f, tuple(run), offset, run_rows))
                offset += run_rows
        pop = cls(fs, files, cols, [p for p in pieces if p.nrows > 0], client, meta)
        if offset == 0:
            raise ValueError(f"path={path!r} holds no rows; at least one item is required")
        pop._run_scan()
        return pop

    # ------------------------------------------------------------------ passes
    def _compute(self, *objs: Any) -> tuple:
        import dask

        if self._client is not None:
            return tuple(self._client.gather(self._client.compute(list(objs))))
        return dask.compute(*objs)

    def _map(self, fn: Callable, *args: Any) -> list:
        import dask

        fd = dask.delayed(fn, pure=True)
        return [fd(p, self._fs, self._cols, *args) for p in self._pieces]

    def _run_scan(self) -> None:
        (parts,) = self._compute(_tree(self._map(_scan_piece), _combine_scan))
        n = 0
        side: dict[bool, list[float]] = {}
        ranges = []
        for piece, p in zip(self._pieces, parts, strict=True):
            if p["bad_score"] is not None:
                f, i, val = p["bad_score"]
                raise ValueError(
                    f"score column {self._cols.score!r} has a non-finite value {val!r} (row "
                    f"{piece.offset - _file_start(self._pieces, piece) + i} of {f!r}); allowed: "
                    "finite real numbers"
                )
            if p["bad_pred"] is not None:
                f, i, val = p["bad_pred"]
                raise ValueError(
                    f"prediction column {self._cols.prediction!r} has value {val!r} in {f!r}; "
                    "allowed: 0/1 or True/False"
                )
            if p["ids"] is not None and p["ids"][0] == "bad":
                raise TypeError(
                    f"id column {self._cols.id!r} has values of type(s) {p['ids'][1]} in "
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
            if p["ids"] is not None:
                ranges.append((p["ids"][0], p["ids"][1], piece.path))
        kinds = {type(r[0]) for r in ranges}
        if len(kinds) > 1:
            raise TypeError(
                f"id column {self._cols.id!r} holds integers in some files and strings in others;"
                " allowed: all integers or all strings"
            )
        ranges.sort(key=lambda r: (r[0], r[1]))
        overlap = any(a[1] >= b[0] for a, b in itertools.pairwise(ranges))
        if overlap:
            self._check_unique_ids()
        self._scan = {
            "n": n,
            "side": side,
            "score_min": min(v[0] for v in side.values()),
            "score_max": max(v[1] for v in side.values()),
        }

    def _check_unique_ids(self) -> None:
        """Global duplicate check when the pieces' id ranges overlap: a hash shuffle in Dask
        tasks (each piece splits its ids into ``B`` buckets by a hash; one task per bucket
        checks its ids), so no id reaches the driver."""
        import dask

        n_buckets = max(1, len(self._pieces))
        split = dask.delayed(_bucket_ids, pure=True, nout=n_buckets)
        parts = [split(p, self._fs, self._cols, n_buckets) for p in self._pieces]
        check = dask.delayed(_first_duplicate, pure=True)
        found = [check([part[b] for part in parts]) for b in range(n_buckets)]
        (dups,) = self._compute(_tree(found, _combine_duplicates))
        if dups:
            bad, count = dups[0]
            raise ValueError(
                f"ids must be unique; id {bad!r} occurs more than once across the files "
                f"(id column {self._cols.id!r}, {count} occurrences)"
            )

    # ------------------------------------------------------------------ narrow interface
    @property
    def size(self) -> int:
        """Number of items N (from the scan pass, cached)."""
        assert self._scan is not None
        return int(self._scan["n"])

    @property
    def threshold(self) -> float | None:
        """Decision threshold, or None when predictions come from a column."""
        return self._cols.threshold

    @property
    def n_pieces(self) -> int:
        return len(self._pieces)

    @property
    def n_predicted_positive(self) -> int:
        """Items predicted positive (from the scan pass)."""
        assert self._scan is not None
        return int(self._scan["side"].get(True, [0, 0, 0])[2])

    @property
    def frame(self) -> Any:
        """The population as a lazy Dask DataFrame (columns id, score, prediction; index =
        global position), one partition per piece."""
        import dask.dataframe as dd

        meta = pd.DataFrame(
            {
                "id": pd.Series([], dtype=self._id_dtype()),
                "score": pd.Series([], dtype=np.float64),
                "prediction": pd.Series([], dtype=bool),
            }
        )
        divisions = [p.offset for p in self._pieces] + [
            self._pieces[-1].offset + self._pieces[-1].nrows - 1
        ]
        return dd.from_map(
            _frame_piece,
            self._pieces,
            args=(self._fs, self._cols),
            meta=meta,
            divisions=divisions,
            enforce_metadata=False,
        )

    def _id_dtype(self) -> Any:
        if self._cols.id is None:
            return np.int64
        md = self._meta[0]["types"]
        used = [c for c in (self._cols.score, self._cols.id, self._cols.prediction) if c]
        t = md[used.index(self._cols.id)]
        return object if "string" in t else np.int64

    @property
    def scores(self) -> np.ndarray:
        raise AttributeError(
            "DaskPopulation does not hold its scores in memory; use .frame['score'] (lazy), "
            "scores_of(ids) or scores_at(positions)"
        )

    @property
    def predictions(self) -> np.ndarray:
        raise AttributeError(
            "DaskPopulation does not hold its predictions in memory; use .frame['prediction'] "
            "(lazy) or lookup(ids)"
        )

    @property
    def has_default_ids(self) -> bool:
        return self._cols.id is None

    def _rows_at(self, positions: Any, name: str = "positions") -> pd.DataFrame:
        pos = np.asarray(positions)
        if pos.ndim == 0:
            pos = pos.reshape(1)
        if pos.dtype == bool or not np.issubdtype(pos.dtype, np.integer):
            raise ValueError(f"{name} has dtype {pos.dtype}; allowed: integer positions")
        pos = pos.astype(np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= self.size):
            bad = pos[(pos < 0) | (pos >= self.size)][0]
            raise ValueError(f"{name} contains {int(bad)}; allowed: 0..{self.size - 1}")
        missing = np.unique(pos[[int(p) not in self._cache for p in pos]])
        if missing.size:
            starts = np.array([p.offset for p in self._pieces])
            which = np.searchsorted(starts, missing, side="right") - 1
            import dask

            fd = dask.delayed(_positions_piece, pure=True)
            tasks = [
                fd(
                    self._pieces[w],
                    self._fs,
                    self._cols,
                    missing[which == w] - self._pieces[w].offset,
                )
                for w in np.unique(which)
            ]
            (frame,) = self._compute(_tree(tasks, _combine_frames))
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

    def ids_at(self, positions: Any) -> np.ndarray:
        """Ids of the items at global ``positions`` (reads only the pieces holding them)."""
        if self._cols.id is None:
            pos = np.asarray(positions, dtype=np.int64)
            return pos.copy()
        out = self._rows_at(positions)["id"].to_numpy()
        return out.astype(np.int64) if self._id_dtype() is np.int64 else out.astype(object)

    def scores_at(self, positions: Any) -> np.ndarray:
        """Scores of the items at global ``positions``."""
        return self._rows_at(positions)["score"].to_numpy(dtype=np.float64)

    def predictions_at(self, positions: Any) -> np.ndarray:
        """Predicted labels of the items at global ``positions``."""
        return self._rows_at(positions)["prediction"].to_numpy(dtype=bool)

    def lookup(self, ids: Any, *, name: str = "ids") -> pd.DataFrame:
        """One pass: DataFrame(id, position, score, prediction) of ``ids``, in the given order.

        Raises ``ValueError`` naming the first unknown id.
        """
        arr = as_id_query(ids, name)
        if arr.size == 0:
            return _combine_frames([])
        if self._id_dtype() is np.int64:
            arr = as_int_id_query(arr, name, "integer ids (this population has integer ids)")
        else:
            arr = arr.astype(object)
        if self._cols.id is None:
            bad = (arr < 0) | (arr >= self.size)
            if bad.any():
                raise ValueError(
                    f"{name} contains unknown id {arr[np.flatnonzero(bad)[0]].item()!r}; "
                    f"allowed: ids 0..{self.size - 1}"
                )
            frame = self._rows_at(arr)
            frame.insert(1, "position", arr)
            return frame
        wanted = pd.unique(arr)
        (found,) = self._compute(_tree(self._map(_lookup_piece, wanted), _combine_frames))
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

    def positions_of(self, ids: Any, *, name: str = "ids") -> np.ndarray:
        """Global positions of ``ids`` (one pass; unknown ids raise ``ValueError``)."""
        return self.lookup(ids, name=name)["position"].to_numpy(dtype=np.int64)

    def scores_of(self, ids: Any) -> np.ndarray:
        """Scores of the items with ``ids`` (one pass)."""
        return self.lookup(ids)["score"].to_numpy(dtype=np.float64)

    def fingerprint(self) -> str:
        """SHA-256 of the Parquet metadata: per file its path relative to the common root, byte
        size, row count, row groups, column types and the min/max/null-count statistics of the
        columns used, plus the column names and the threshold.

        No data pass and independent of modification times, so a copied or re-downloaded
        dataset keeps its fingerprint. A change that preserves every file's byte size, row
        counts and column statistics (e.g. two scores swapped inside a row group) goes unseen;
        the in-memory :meth:`Population.fingerprint` hashes the data itself.
        """
        if self._fingerprint is None:
            root = _common_root(self.files)
            payload = {
                "columns": [self._cols.score, self._cols.id, self._cols.prediction],
                "threshold": self._cols.threshold,
                "files": [{**m, "file": m["file"][len(root) :]} for m in self._meta],
            }
            self._fingerprint = hashlib.sha256(
                json.dumps(payload, sort_keys=True, default=str).encode()
            ).hexdigest()
        return self._fingerprint

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        assert self._scan is not None
        rule = (
            f"threshold={self._cols.threshold:g}"
            if self._cols.threshold is not None
            else f"column {self._cols.prediction!r}"
        )
        return (
            f"DaskPopulation(N={self.size:,}, predicted positive={self.n_predicted_positive:,}, "
            f"predictions {rule}, scores in [{self._scan['score_min']:.4g}, "
            f"{self._scan['score_max']:.4g}], {len(self.files)} file(s), "
            f"{len(self._pieces)} piece(s))"
        )

    # ------------------------------------------------------------------ stratification
    def stratify_lazy(
        self,
        *,
        method: str = "equal_size",
        n_strata: Any = 10,
        variable: str = "score",
        score_kind: str = "auto",
        rng: Any = None,
    ) -> DaskStrata:
        """Stratify out of core; same arguments and same result as :func:`bayes_eval.stratify`.

        Boundaries, per predicted side (threshold always a boundary):

        * ``"equal_size"``: the exact order statistics :math:`v_{(\\lfloor jN/n \\rfloor)}`,
          j = 1..n-1, that the in-memory kernel takes: a histogram pass (``HIST_BINS`` bins),
          then passes that re-bin the bins holding a target rank until each holds at most
          ``COLLECT_LIMIT`` items, which are collected and sorted. Ties that collapse edges are
          repaired exactly as in memory from the distinct values, when a side has at most
          ``DISTINCT_LIMIT`` of them (otherwise fewer strata result).
        * ``"equal_width"``: exact (needs only the side's range, known from the scan).
        * any other registered kernel (density-based, clustering): run on a sorted *quantile
          sample* of ``QUANTILE_SAMPLE`` values whose empirical CDF equals the side's at every
          histogram bin edge up to :math:`1/M` and interpolates linearly inside a bin, so the
          boundaries are approximate: their CDF error is at most :math:`1/M` plus one bin's
          mass. Kernels that offer ``kernel.from_histogram(edges, counts, n, rng=)`` are given
          the histogram instead.

        Whatever the method, a final counting pass gives the exact ``N_k`` and score ranges used
        by the posterior; strata that would be empty are merged as in memory.
        """
        check_option(method, "method", tuple(STRATIFIERS))
        check_option(variable, "variable", ("score", "confidence"))
        check_option(score_kind, "score_kind", ("auto", "probability", "margin"))
        wanted = _as_n_strata(n_strata)
        gen = as_generator(rng)
        assert self._scan is not None
        kind = score_kind
        if kind == "auto":
            kind = (
                "probability"
                if self._scan["score_min"] >= 0.0 and self._scan["score_max"] <= 1.0
                else "margin"
            )
        t = self._cols.threshold if self._cols.threshold is not None else 0.0
        spec = {"variable": variable, "kind": kind, "threshold": t}
        ranges = self._variable_ranges(spec)
        sides: dict[bool, dict] = {}
        for side, want in ((False, wanted[0]), (True, wanted[1])):
            if side not in ranges:
                continue
            vmin, vmax, count = ranges[side]
            n = _auto_n(count, vmin) if want == "auto" else int(want)
            sides[side] = {"n": n, "want": want, "vmin": vmin, "vmax": vmax, "count": count}
        if method == "equal_size":
            self._equal_size_edges(sides, spec)
        elif method == "equal_width":
            for info in sides.values():
                vals = np.array([info["vmin"], info["vmax"]])
                info["edges"] = np.asarray(STRATIFIERS[method](vals, info["n"], rng=gen), float)
        else:
            self._kernel_edges(sides, spec, method, gen)
        for info in sides.values():
            e = np.unique(info["edges"])
            info["edges"] = e[e > info["vmin"]]
        counted = self._count(sides, spec)
        for side, info in sides.items():
            cnt, lo, hi, tot = counted[side]
            if (cnt[1:] == 0).any():  # merge empty strata into the one below, as in memory
                keep = cnt[1:] > 0
                group = np.concatenate([[0], np.cumsum(keep)])
                k2 = int(keep.sum()) + 1
                cnt = np.bincount(group, weights=cnt, minlength=k2).astype(np.int64)
                tot = np.bincount(group, weights=tot, minlength=k2)
                lo2, hi2 = np.full(k2, np.inf), np.full(k2, -np.inf)
                np.minimum.at(lo2, group, lo)
                np.maximum.at(hi2, group, hi)
                lo, hi = lo2, hi2
                info["edges"] = info["edges"][keep]
            info["stats"] = (cnt, lo, hi, tot)
            n = info["n"]
            if info["edges"].size + 1 < n and info["want"] != "auto":
                distinct = self._distinct(side, info, spec)
                if distinct is not None and distinct[0].size < n:
                    raise ValueError(
                        f"n_strata={n} is more than the {distinct[0].size} distinct {variable} "
                        f"value(s) on the predicted-{'positive' if side else 'negative'} side; "
                        f"allowed: at most {distinct[0].size}"
                    )
        sizes, predicted, smin, smax, smean = [], [], [], [], []
        offset = 0
        for side in (False, True):
            if side not in sides:
                continue
            info = sides[side]
            cnt, lo, hi, tot = info["stats"]
            k = cnt.shape[0]
            order = np.argsort(lo, kind="stable")
            rank = np.empty(k, dtype=np.int64)
            rank[order] = np.arange(k)
            info["rank"], info["offset"] = rank, offset
            sizes.append(cnt[order])
            smin.append(lo[order])
            smax.append(hi[order])
            smean.append(tot[order] / cnt[order])
            predicted.append(np.full(k, side))
            offset += k
        plan = {
            "spec": spec,
            "n_strata": offset,
            "sides": {
                s: {"edges": i["edges"], "rank": i["rank"], "offset": i["offset"]}
                for s, i in sides.items()
            },
        }
        return DaskStrata(
            self,
            plan,
            np.concatenate(predicted),
            np.concatenate(sizes),
            np.concatenate(smin),
            np.concatenate(smax),
            method=method,
            variable=variable,
            requested=wanted,
            score_mean=np.concatenate(smean),
        )

    def _variable_ranges(self, spec: dict) -> dict[bool, tuple[float, float, int]]:
        """Per side (min, max, count) of the stratification variable, from the scan when the
        variable is a monotone function of the score on each side (no pass)."""
        assert self._scan is not None
        out = {}
        for side, (lo, hi, c) in self._scan["side"].items():
            if spec["variable"] == "score":
                out[side] = (lo, hi, c)
            elif spec["kind"] == "probability":
                out[side] = (lo, hi, c) if side else (1.0 - hi, 1.0 - lo, c)
            elif self._cols.threshold is not None:
                t = spec["threshold"]
                out[side] = (abs(lo - t), abs(hi - t), c) if side else (abs(hi - t), abs(lo - t), c)
            else:
                out = {}
                break
        if out:
            return out
        # |score| with explicit predictions is not monotone on a side: one pass for its range
        res = self._compute(_tree(self._map(_range_piece, spec), _combine_range))[0]
        return {s: (lo, hi, c) for s, (lo, hi, c) in res.items()}

    def _hist(self, spec: dict, targets: list) -> list:
        combine = functools.partial(_combine_hist, modes=tuple(t[2] for t in targets))
        (res,) = self._compute(_tree(self._map(_hist_piece, spec, targets), combine))
        return res

    def _equal_size_edges(self, sides: dict, spec: dict) -> None:
        """Exact order statistics at the in-memory kernel's ranks, by nested histograms."""
        # pending items: (side, rank, path, items below the path's bin, (lo, width), count)
        pending = []
        for side, info in sides.items():
            size, n = info["count"], info["n"]
            kth = np.unique((np.arange(1, n) * size) // n)
            kth = kth[(kth > 0) & (kth < size)]
            info["os"] = {}
            width = (info["vmax"] - info["vmin"]) / HIST_BINS
            for r in kth.tolist():
                pending.append((side, r, (), 0, (info["vmin"], width), size))
        while pending:  # one pass per level: histogram or collect every distinct (side, path)
            groups: dict[tuple, list] = {}
            for item in pending:
                groups.setdefault((item[0], item[2]), []).append(item)
            keys = list(groups)
            targets = []
            for side, path in keys:
                sub, cnt = groups[(side, path)][0][4:]
                mode = "collect" if cnt <= COLLECT_LIMIT or len(path) >= 12 else "hist"
                targets.append((side, path, mode, sub))
            res = self._hist(spec, targets)
            pending = []
            for (side, path), (_, _, mode, sub), out in zip(keys, targets, res, strict=True):
                os_ = sides[side]["os"]
                if mode == "collect":
                    out = np.sort(out)
                    for _, r, _, below, _, _ in groups[(side, path)]:
                        os_[r] = float(out[r - below])
                    continue
                counts, mn, mx = out
                cum = np.cumsum(counts)
                lo, width = sub
                for _, r, _, below, _, _ in groups[(side, path)]:
                    if mn == mx:  # every item of the bin has the same value
                        os_[r] = float(mn)
                        continue
                    b = int(np.searchsorted(cum, r - below, side="right"))
                    new_below = below + (int(cum[b - 1]) if b > 0 else 0)
                    pending.append(
                        (
                            side,
                            r,
                            (*path, (lo, width, b)),
                            new_below,
                            (lo + b * width, width / HIST_BINS),
                            int(counts[b]),
                        )
                    )
        for side, info in sides.items():
            os_ = np.array([info["os"][r] for r in sorted(info["os"])], dtype=float)
            edges = np.unique(os_)
            edges = edges[edges > info["vmin"]]
            n = info["n"]
            if edges.size + 1 < n:
                distinct = self._distinct(side, info, spec)
                if distinct is not None and distinct[0].size >= n:
                    edges = equal_size_from_counts(distinct[0], distinct[1], n)
            info["edges"] = edges

    def _distinct(self, side: bool, info: dict, spec: dict) -> tuple | None:
        if "distinct" not in info:
            (res,) = self._hist(spec, [(side, (), "distinct", None)])
            info["distinct"] = res
        return info["distinct"]

    def _kernel_edges(self, sides: dict, spec: dict, method: str, gen: Any) -> None:
        kernel = STRATIFIERS[method]
        targets = []
        for side, info in sides.items():
            width = (info["vmax"] - info["vmin"]) / HIST_BINS
            targets.append((side, (), "hist", (info["vmin"], width)))
        res = self._hist(spec, targets)
        for (side, _, _, (lo, width)), (counts, _, _) in zip(targets, res, strict=True):
            info = sides[side]
            bin_edges = lo + width * np.arange(HIST_BINS + 1)
            bin_edges[-1] = info["vmax"]
            if hasattr(kernel, "from_histogram"):
                info["edges"] = np.asarray(
                    kernel.from_histogram(bin_edges, counts, info["n"], rng=gen), dtype=float
                )
                continue
            sample = _quantile_sample(
                bin_edges, counts, info["vmin"], info["vmax"], min(info["count"], QUANTILE_SAMPLE)
            )
            info["edges"] = np.asarray(kernel(sample, info["n"], rng=gen), dtype=float)

    def _count(self, sides: dict, spec: dict) -> dict:
        plan = {"spec": spec, "sides": {s: {"edges": i["edges"]} for s, i in sides.items()}}
        (res,) = self._compute(_tree(self._map(_count_piece, plan), _combine_count))
        return res


def _range_piece(piece: _Piece, fs: Any, cols: _Cols, spec: dict) -> dict:
    d = _read(piece, fs, cols, ("score", "pred"))
    pred = _as_bool_predictions(d["pred"])
    v = _variable(d["score"], pred, spec)
    out = {}
    for s in (False, True):
        x = v[pred == s]
        if x.size:
            out[s] = (float(x.min()), float(x.max()), int(x.size))
    return out


def _combine_range(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        for s, (lo, hi, c) in p.items():
            out[s] = (
                (min(out[s][0], lo), max(out[s][1], hi), out[s][2] + c) if s in out else (lo, hi, c)
            )
    return out


def _quantile_sample(
    bin_edges: np.ndarray, counts: np.ndarray, vmin: float, vmax: float, m: int
) -> np.ndarray:
    """``m`` sorted values at evenly spaced ranks of the histogram, linear inside each bin, with
    the exact minimum and maximum as first and last values."""
    if m <= 1:
        return np.array([vmin])
    cdf = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    ranks = (np.arange(m) + 0.5) / m * cdf[-1]
    values = np.interp(ranks, cdf, bin_edges)
    values[0], values[-1] = vmin, vmax
    return np.sort(values)


def _auto_n(count: int, vmin: float) -> int:
    """:func:`bayes_eval.strata._auto_n_strata`, which depends on the count only, applied to a
    zero-stride stand-in of the side's values (no memory)."""
    return _auto_n_strata(np.broadcast_to(np.float64(vmin), (count,)))


def _file_start(pieces: list[_Piece], piece: _Piece) -> int:
    return min(p.offset for p in pieces if p.path == piece.path)


def _common_root(files: Sequence[str]) -> str:
    if len(files) == 1:
        return str(Path(files[0]).parent) + "/"
    import os

    root = os.path.commonpath(list(files))
    return root.rstrip("/") + "/"


# ====================================================================== strata
class DaskStrata(Strata):
    """Strata of a :class:`DaskPopulation`: exact per-stratum facts, lazy assignment.

    ``sizes``, ``predicted``, ``score_min`` and ``score_max`` are exact (from a counting pass);
    :attr:`assignment` is a lazy Dask Series (index = global position) that is never computed on
    the driver. :meth:`stratum_of` looks the items up by position (a pass, for user calls);
    :meth:`make_sampler` returns the out-of-core :class:`DaskStratumSampler`.

    ``score_mean`` (mean score per stratum, from the counting pass) is given for designs and
    the audit, which would otherwise need the assignment in memory; being summed piece by piece,
    it may differ from the in-memory mean in the last bits.
    """

    __slots__ = ("_plan", "score_mean")

    def __init__(
        self,
        population: DaskPopulation,
        plan: dict,
        predicted: np.ndarray,
        sizes: np.ndarray,
        score_min: np.ndarray,
        score_max: np.ndarray,
        *,
        method: str,
        variable: str,
        requested: Any,
        score_mean: np.ndarray,
    ) -> None:
        self._plan = plan
        self.score_mean = np.asarray(score_mean, dtype=np.float64)
        self.score_mean.flags.writeable = False
        super().__init__(
            population,
            None,
            predicted,
            sizes,
            score_min,
            score_max,  # type: ignore[arg-type]
            method=method,
            variable=variable,
            requested=requested,
        )
        self.assignment = self._lazy_assignment()

    def _lazy_assignment(self) -> Any:
        import dask.dataframe as dd

        pop: DaskPopulation = self.population
        pieces = pop._pieces
        divisions = [p.offset for p in pieces] + [pieces[-1].offset + pieces[-1].nrows - 1]
        meta = pd.Series([], dtype=_index_dtype(self.n_strata), name="stratum")
        return dd.from_map(
            _assign_frame,
            pieces,
            args=(pop._fs, pop._cols, self._plan),
            meta=meta,
            divisions=divisions,
            enforce_metadata=False,
        )

    @property
    def edges(self) -> dict[str, np.ndarray]:
        """Lower edges of the stratification variable per side ("negative", "positive")."""
        return {
            ("positive" if s else "negative"): v["edges"].copy()
            for s, v in self._plan["sides"].items()
        }

    def stratum_of(self, positions: np.ndarray) -> np.ndarray:
        """Stratum of the items at global ``positions`` (reads the pieces holding them)."""
        pop: DaskPopulation = self.population
        rows = pop._rows_at(positions)
        return _assign(
            rows["score"].to_numpy(dtype=float), rows["prediction"].to_numpy(bool), self._plan
        )

    def strata_of_ids(self, ids: Any) -> np.ndarray:
        """Stratum of the items with ``ids`` (one pass)."""
        rows = self.population.lookup(ids)
        return _assign(
            rows["score"].to_numpy(dtype=float), rows["prediction"].to_numpy(bool), self._plan
        )

    def members(self, k: int) -> np.ndarray:
        raise TypeError(
            "DaskStrata.members would materialise a stratum on the driver; use "
            "strata.assignment (a lazy Dask Series) or make_sampler(seed).draw(k, m)"
        )

    def make_sampler(self, seed: int, *, reservoir: int = DEFAULT_RESERVOIR) -> DaskStratumSampler:
        """The out-of-core keyed sampler (same proposals as the in-memory one)."""
        return DaskStratumSampler(self, seed, reservoir=reservoir)


# ====================================================================== sampler
class DaskStratumSampler:
    """Out-of-core bottom-k sampler: items of each stratum in increasing (key, id) order.

    Same contract and the same proposals as :class:`bayes_eval._sampler.KeyedStratumSampler`:
    keys are :func:`bayes_eval._sampler.item_keys` of (id, seed), so the order depends on ids and
    the seed only, never on the partitioning.

    The first draw runs one pass that keeps, per stratum, the ``reservoir`` items with the
    smallest keys (bottom-k per piece, merged by a tree reduction). Draws are then served from
    memory in O(m). A stratum whose reservoir runs out is refilled by one more pass over the
    items after the last (key, id) queued, with a reservoir twice as large each time, so a
    stratum needing ``c`` items costs O(log(c / reservoir)) passes in all.

    Parameters
    ----------
    strata : DaskStrata
    seed : int
    reservoir : int
        Items kept per stratum by the first pass.
    """

    def __init__(
        self, strata: DaskStrata, seed: int, *, reservoir: int = DEFAULT_RESERVOIR
    ) -> None:
        self.strata = strata
        self.seed = _check_seed(seed)
        self.reservoir = check_positive_int(reservoir, "reservoir")
        k = strata.n_strata
        self.sizes = np.asarray(strata.sizes, dtype=np.int64)
        self.drawn = np.zeros(k, dtype=np.int64)
        self.passes = 0
        self._queue: list[tuple[np.ndarray, np.ndarray] | None] = [None] * k  # (ids, scores)
        self._head = np.zeros(k, dtype=np.int64)
        self._queued = np.zeros(k, dtype=np.int64)
        self._frontier: list[tuple[int, Any] | None] = [None] * k
        self._next = np.full(k, self.reservoir, dtype=np.int64)

    def _refill(self, need: dict[int, int]) -> None:
        """One pass: queue at least ``need[k]`` more items of each stratum k in ``need``."""
        pop: DaskPopulation = self.strata.population
        want = {}
        for k, m in need.items():
            left = int(self.sizes[k] - self._queued[k])
            r = int(min(left, max(m, self._next[k])))
            if r <= 0:  # everything of stratum k is queued already
                continue
            front = self._frontier[k]
            fkey, fid = (None, None) if front is None else front
            want[k] = (r, fkey, fid, _cutoff(r, left, fkey))
            self._next[k] *= 2
        if not want:
            return
        res = self._pass(pop, want)
        found = {k: (res[k][0].shape[0] if k in res else 0) for k in want}
        short = {k: (*w[:3], None) for k, w in want.items() if w[3] is not None and found[k] < w[0]}
        if short:  # the cutoff left too few candidates (probability < 1e-9): redo without
            res.update(self._pass(pop, short))
        for k in want:
            keys, ids, scores = res.get(k, (np.empty(0, np.uint64), np.empty(0), np.empty(0)))
            if ids.size:
                self._frontier[k] = (int(keys[-1]), ids[-1])
            old = self._queue[k]
            h = int(self._head[k])
            if old is not None:
                ids = np.concatenate([old[0][h:], ids])
                scores = np.concatenate([old[1][h:], scores])
            self._queue[k] = (ids, scores)
            self._head[k] = 0
            self._queued[k] += keys.shape[0]

    def _pass(self, pop: DaskPopulation, want: dict[int, tuple]) -> dict:
        parts = pop._map(_reservoir_piece, self.strata._plan, self.seed, want)
        (res,) = pop._compute(_tree(parts, functools.partial(_combine_reservoir, want=want)))
        self.passes += 1
        return res

    def _check(self, k: Any, m: Any) -> tuple[int, int]:
        kk = self.sizes.shape[0]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= int(k) < kk:
            raise ValueError(f"stratum k={k!r} is outside 0..{kk - 1}")
        if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 0:
            raise ValueError(f"m={m!r} must be a non-negative integer")
        k, m = int(k), int(m)
        if m > self.sizes[k] - self.drawn[k]:
            raise ValueError(
                f"m={m} is more than the {int(self.sizes[k] - self.drawn[k])} items of stratum "
                f"{k} not yet drawn"
            )
        return k, m

    def _have(self, k: int) -> int:
        q = self._queue[k]
        return 0 if q is None else q[0].shape[0] - int(self._head[k])

    def prefetch(self) -> None:
        """Run the first reservoir pass for every stratum now (otherwise on the first draw)."""
        need = {
            k: 1
            for k in range(self.sizes.shape[0])
            if self._queue[k] is None and self.sizes[k] > self.drawn[k]
        }
        if need:
            self._refill(need)

    def _take(self, k: Any, m: Any) -> tuple[np.ndarray, np.ndarray]:
        k, m = self._check(k, m)
        if m == 0:
            return np.empty(0, dtype=self._id_dtype()), np.empty(0)
        if self._have(k) < m:
            if all(q is None for q in self._queue):
                self.prefetch()
            if self._have(k) < m:
                self._refill({k: m - self._have(k)})
        q = self._queue[k]
        assert q is not None
        h = int(self._head[k])
        ids, scores = q[0][h : h + m], q[1][h : h + m]
        self._head[k] = h + m
        self.drawn[k] += m
        return ids.copy(), scores.copy()

    def _id_dtype(self) -> Any:
        return self.strata.population._id_dtype()

    def draw(self, k: int, m: int) -> np.ndarray:
        """Ids of the next ``m`` items of stratum ``k`` in key order (never repeated)."""
        return self._take(k, m)[0]

    def draw_with_scores(self, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids and scores of the next ``m`` items of stratum ``k``."""
        return self._take(k, m)

    def skip(self, k: int, c: int) -> None:
        """Advance stratum ``k`` by ``c`` items, as if they had been drawn."""
        self._take(k, c)

    def available(self) -> np.ndarray:
        """Items not yet drawn, per stratum."""
        return self.sizes - self.drawn
