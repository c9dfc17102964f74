"""Reading a partitioned Parquet dataset in *pieces*, one Dask task per piece.

A piece is a run of whole row groups of one file (at most ``rows_per_piece`` rows); every pass
of :mod:`bayes_eval.dask` maps a kernel over the pieces and reduces the per-piece summaries with
a tree (:func:`tree_reduce`), so the driver only receives the root. The global *position* of an
item is its rank in (file order, row order), fixed by the Parquet footers whatever the
partitioning.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (web-scale populations).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..population import check_columns

__all__ = [
    "ROWS_PER_PIECE",
    "Columns",
    "Piece",
    "as_bool_predictions",
    "common_root",
    "file_start",
    "list_files",
    "open_pieces",
    "read_piece",
    "tree_reduce",
]

#: default number of rows per piece (one Dask task reads one piece)
ROWS_PER_PIECE = 2_000_000
_PARQUET_EXT = (".parquet", ".parq", ".pq")


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of row groups of one Parquet file; ``offset`` is its first global position."""

    path: str
    row_groups: tuple[int, ...]
    offset: int
    nrows: int


@dataclass(frozen=True, slots=True)
class Columns:
    """Column names and the rule for predictions (shipped to every task)."""

    score: str
    id: str | None
    prediction: str | None
    threshold: float | None


def read_piece(piece: Piece, fs: Any, cols: Columns, want: Sequence[str]) -> dict[str, np.ndarray]:
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
    if is_local(fs):
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


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is the local file system (read with memory maps)."""
    protocol = getattr(fs, "protocol", "file")
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "file" in protocols or "local" in protocols


def as_bool_predictions(pred: np.ndarray) -> np.ndarray:
    """Predictions (bool, or 0/1 checked by the scan) as bool."""
    if pred.dtype == bool:
        return pred
    return pred.astype(bool)


def list_files(path: Any, storage_options: dict | None) -> tuple[Any, list[str]]:
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


def _column_stats(md: Any, idx: list[int]) -> list:
    """(min, max, null count) as strings per row group and used column (None without stats)."""
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
    return stats


def _check_types(schema: Any, f: str, cols: Columns) -> None:
    """Refuse a non-numeric score column and ids that are neither integers nor strings."""
    import pyarrow.types as pat

    stype = schema.field(cols.score).type
    if not (pat.is_integer(stype) or pat.is_floating(stype)) or pat.is_boolean(stype):
        raise TypeError(
            f"score column {cols.score!r} has type {stype} in {f!r}; allowed: real numbers "
            "(integer or floating point)"
        )
    if cols.id is not None:
        itype = schema.field(cols.id).type
        if not (
            pat.is_integer(itype)
            or pat.is_string(itype)
            or pat.is_large_string(itype)
            or pat.is_string_view(itype)
        ):
            raise TypeError(
                f"id column {cols.id!r} has type {itype} in {f!r}; allowed: integers or strings"
            )


def open_pieces(
    fs: Any, files: Sequence[str], cols: Columns, rows_per_piece: int
) -> tuple[list[Piece], list[dict]]:
    """Pieces of at most ``rows_per_piece`` rows (whole row groups) and per-file metadata (path,
    rows, row groups, byte size, column types and statistics), from the Parquet footers only.

    Raises ``ValueError``/``TypeError`` naming the file for a missing or mistyped column.
    """
    import pyarrow.parquet as pq

    pieces: list[Piece] = []
    meta: list[dict] = []
    offset = 0
    used = [c for c in (cols.score, cols.id, cols.prediction) if c is not None]
    for f in files:
        with fs.open(f, "rb") as fh:
            md = pq.ParquetFile(fh).metadata
        schema = md.schema.to_arrow_schema()
        check_columns(
            schema.names,
            repr(f),
            score_col=cols.score,
            id_col=cols.id,
            prediction_col=cols.prediction,
        )
        _check_types(schema, f, cols)
        meta.append(
            {
                "file": f,
                "rows": md.num_rows,
                "row_groups": md.num_row_groups,
                "size": fs.size(f),
                "stats": _column_stats(md, [schema.names.index(c) for c in used]),
                "types": [str(schema.field(c).type) for c in used],
            }
        )
        run: list[int] = []
        run_rows = 0
        for g in range(md.num_row_groups):
            n = md.row_group(g).num_rows
            if run and run_rows + n > rows_per_piece:
                pieces.append(Piece(f, tuple(run), offset, run_rows))
                offset += run_rows
                run, run_rows = [], 0
            run.append(g)
            run_rows += n
        if run:
            pieces.append(Piece(f, tuple(run), offset, run_rows))
            offset += run_rows
    return [p for p in pieces if p.nrows > 0], meta


def tree_reduce(parts: list[Any], combine: Callable[[list[Any]], Any], split_every: int = 8) -> Any:
    """Tree reduction of delayed objects (the driver only receives the root)."""
    import dask

    combine_d = dask.delayed(combine, pure=True)
    while True:  # combine at least once, so that the root always has the combined type
        parts = [combine_d(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
        if len(parts) <= 1:
            return parts[0] if parts else combine_d([])


def file_start(pieces: list[Piece], piece: Piece) -> int:
    """Global position of the first row of ``piece``'s file."""
    return min(p.offset for p in pieces if p.path == piece.path)


def common_root(files: Sequence[str]) -> str:
    """The directory the files share (with a trailing slash)."""
    if len(files) == 1:
        return str(Path(files[0]).parent) + "/"
    root = os.path.commonpath(list(files))
    return root.rstrip("/") + "/"
