"""An out-of-core population: partitioned Parquet read lazily with Dask.

:class:`DaskPopulation` implements :class:`bayes_eval._protocols.PopulationLike` without ever
holding the population on the driver: ``size`` and ``threshold`` are known after one validating
scan pass (run at construction), look-ups by id or position are one pass each (meant for user
calls and reports, never per audit batch), and :meth:`DaskPopulation.stratify_lazy` (which
:func:`bayes_eval.stratify` calls) returns :class:`~bayes_eval.dask.DaskStrata` with the exact
in-memory strata.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (web-scale populations, score
strata).
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from .._stratifiers import STRATIFIERS
from .._validation import RNGLike, as_generator, check_option, check_positive_int
from ..strata import _as_n_strata
from ._dataset import PieceSet, Scan
from ._pieces import ROWS_PER_PIECE, Columns, common_root, list_files, open_pieces
from ._profile import margin_standardisation
from ._stratify import stratify_pieces
from .strata import DaskStrata

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["DaskPopulation"]


def _check_parquet_args(
    score_col: Any, id_col: Any, prediction_col: Any, threshold: Any
) -> float | None:
    """Column names must be strings; exactly one of threshold (finite) and prediction_col."""
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
    if threshold is None:
        return None
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, numbers.Real)
        or not np.isfinite(float(threshold))
    ):
        raise TypeError(f"threshold={threshold!r} must be a finite real number")
    return float(threshold)


class DaskPopulation:
    """A scored population read lazily from partitioned Parquet with Dask.

    Every pass over it is a Dask graph of one task per *piece* (a run of row groups of one file)
    followed by a tree reduction, so the driver only ever holds per-piece summaries. The global
    *position* of an item is its rank in (file order, row order); it equals the position of the
    in-memory :meth:`bayes_eval.Population.from_parquet` over the same files (sorted path order).

    Build it with :meth:`from_parquet` or ``bayes_eval.parquet.read_parquet(..., engine="dask")``.

    Attributes
    ----------
    files : tuple of str
        The Parquet files, in the (sorted) order that defines global positions.
    n_pieces : int
        Number of Dask tasks per pass (runs of row groups of at most ``rows_per_piece`` rows).

    Examples
    --------
    >>> import numpy as np, pandas as pd, tempfile
    >>> from bayes_eval.dask import DaskPopulation
    >>> d = tempfile.mkdtemp()
    >>> rng = np.random.default_rng(0)
    >>> for i in range(3):
    ...     pd.DataFrame({"id": np.arange(i * 1000, (i + 1) * 1000),
    ...                   "score": rng.random(1000)}).to_parquet(f"{d}/part-{i}.parquet")
    >>> pop = DaskPopulation.from_parquet(d, score_col="score", id_col="id", threshold=0.5)
    >>> pop.size, pop.n_pieces
    (3000, 3)
    >>> strata = pop.stratify_lazy(n_strata=2)
    >>> strata.sizes.tolist()
    [763, 763, 737, 737]
    >>> strata.make_sampler(0).draw(3, 4)  # the next 4 ids of stratum 3 in key order
    array([1725,  730,  517, 1970])
    """

    def __init__(self, pieces: PieceSet, scan: Scan) -> None:
        self._data = pieces
        self._scan = scan
        self.files = pieces.files
        self._fingerprint: str | None = None
        self._standardisation: tuple[float, float] | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_parquet(
        cls,
        path: str | Path | Sequence[str | Path],
        *,
        score_col: str,
        id_col: str | None = None,
        prediction_col: str | None = None,
        threshold: float | None = None,
        client: Client | None = None,
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
        storage_options : dict, optional
            For remote file systems (fsspec).

        Raises
        ------
        ValueError
            Missing path or column, NaN/inf scores, predictions not 0/1, duplicate ids.
        TypeError
            A non-numeric score column or ids that are neither integers nor strings.
        """
        threshold = _check_parquet_args(score_col, id_col, prediction_col, threshold)
        rows_per_piece = check_positive_int(rows_per_piece, "rows_per_piece")
        fs, files = list_files(path, storage_options)
        cols = Columns(score_col, id_col, prediction_col, threshold)
        pieces, meta = open_pieces(fs, files, cols, rows_per_piece)
        if not pieces:
            raise ValueError(f"path={path!r} holds no rows; at least one item is required")
        data = PieceSet(fs, files, cols, pieces, client, meta)
        return cls(data, data.scan())

    # ------------------------------------------------------------------ narrow interface
    @property
    def size(self) -> int:
        """Number of items N (from the scan pass)."""
        return int(self._scan.n)

    @property
    def threshold(self) -> float | None:
        """Decision threshold, or None when predictions come from a column."""
        return self._data.cols.threshold

    @property
    def n_pieces(self) -> int:
        """Dask tasks per pass."""
        return len(self._data.pieces)

    @property
    def n_predicted_positive(self) -> int:
        """Items predicted positive (from the scan pass)."""
        return int(self._scan.side.get(True, (0, 0, 0))[2])

    @property
    def scan_summary(self) -> Scan:
        """What the validating scan learnt: ``n``, per-side score ranges and counts, and the
        overall score range."""
        return self._scan

    def margin_standardisation(self) -> tuple[float, float]:
        """(median, standard deviation; 1 when it is 0) of the scores, which standardise margin
        scores into the pooled model's covariate: 2 passes (3 beyond ``COLLECT_LIMIT`` items) the
        first time, then cached."""
        if self._standardisation is None:
            self._standardisation = margin_standardisation(self._data, self._scan)
        return self._standardisation

    @property
    def frame(self) -> Any:
        """The population as a lazy Dask DataFrame (columns id, score, prediction; index =
        global position), one partition per piece."""
        return self._data.frame()

    @property
    def scores(self) -> np.ndarray:
        """Refused: the scores are not held in memory."""
        raise AttributeError(
            "DaskPopulation does not hold its scores in memory; use .frame['score'] (lazy), "
            "scores_of(ids) or scores_at(positions)"
        )

    @property
    def predictions(self) -> np.ndarray:
        """Refused: the predictions are not held in memory."""
        raise AttributeError(
            "DaskPopulation does not hold its predictions in memory; use .frame['prediction'] "
            "(lazy) or lookup(ids)"
        )

    @property
    def has_default_ids(self) -> bool:
        """Whether the ids are the global positions (no id column)."""
        return self._data.cols.id is None

    def ids_at(self, positions: ArrayLike) -> np.ndarray:
        """Ids of the items at global ``positions`` (reads only the pieces holding them)."""
        if self._data.cols.id is None:
            return np.asarray(positions, dtype=np.int64).copy()
        out = self._data.rows_at(positions)["id"].to_numpy()
        return out.astype(np.int64) if self._data.id_dtype() is np.int64 else out.astype(object)

    def scores_at(self, positions: ArrayLike) -> np.ndarray:
        """Scores of the items at global ``positions``."""
        return self._data.rows_at(positions)["score"].to_numpy(dtype=np.float64)

    def predictions_at(self, positions: ArrayLike) -> np.ndarray:
        """Predicted labels of the items at global ``positions``."""
        return self._data.rows_at(positions)["prediction"].to_numpy(dtype=bool)

    def lookup(self, ids: ArrayLike, *, name: str = "ids") -> pd.DataFrame:
        """One pass: DataFrame(id, position, score, prediction) of ``ids``, in the given order.

        Raises ``ValueError`` naming the first unknown id.
        """
        return self._data.lookup(ids, name=name)

    def positions_of(self, ids: ArrayLike, *, name: str = "ids") -> np.ndarray:
        """Global positions of ``ids`` (one pass; unknown ids raise ``ValueError``)."""
        return self.lookup(ids, name=name)["position"].to_numpy(dtype=np.int64)

    def scores_of(self, ids: ArrayLike) -> np.ndarray:
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
            root = common_root(self.files)
            cols = self._data.cols
            payload = {
                "columns": [cols.score, cols.id, cols.prediction],
                "threshold": cols.threshold,
                "files": [{**m, "file": m["file"][len(root) :]} for m in self._data.meta],
            }
            self._fingerprint = hashlib.sha256(
                json.dumps(payload, sort_keys=True, default=str).encode()
            ).hexdigest()
        return self._fingerprint

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        cols = self._data.cols
        rule = (
            f"threshold={cols.threshold:g}"
            if cols.threshold is not None
            else f"column {cols.prediction!r}"
        )
        return (
            f"DaskPopulation(N={self.size:,}, predicted positive={self.n_predicted_positive:,}, "
            f"predictions {rule}, scores in [{self._scan.score_min:.4g}, "
            f"{self._scan.score_max:.4g}], {len(self.files)} file(s), {self.n_pieces} piece(s))"
        )

    # ------------------------------------------------------------------ stratification
    def stratify_lazy(
        self,
        *,
        method: str = "equal_size",
        n_strata: int | str | tuple[int | str, int | str] = 10,
        variable: str = "score",
        score_kind: str = "auto",
        rng: RNGLike = None,
    ) -> DaskStrata:
        """Stratify out of core; same arguments and same result as :func:`bayes_eval.stratify`
        (which calls this method). See :func:`bayes_eval.dask._stratify.stratify_pieces` for the
        passes and which methods are exact."""
        check_option(method, "method", tuple(STRATIFIERS))
        check_option(variable, "variable", ("score", "confidence"))
        check_option(score_kind, "score_kind", ("auto", "probability", "margin"))
        layout = stratify_pieces(
            self._data,
            self._scan,
            method=method,
            wanted=_as_n_strata(n_strata),
            variable=variable,
            score_kind=score_kind,
            gen=as_generator(rng),
        )
        return DaskStrata(self, self._data, layout)
