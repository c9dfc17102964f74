"""Reading a population from Parquet, in memory or out of core (the engine dispatch).

:func:`read_parquet` picks the reader by ``engine``: ``"memory"`` reads the named columns into a
:class:`~bayes_eval.Population` (:meth:`~bayes_eval.Population.from_parquet`), ``"dask"`` opens a
lazily read :class:`~bayes_eval.dask.DaskPopulation` (the ``dask`` extra). The dispatch lives
here, above both readers, so that :mod:`bayes_eval.population` never imports the Dask engine
that builds on it (no import cycle).

Examples
--------
>>> import numpy as np, pandas as pd, tempfile, pathlib
>>> from bayes_eval.parquet import read_parquet
>>> path = pathlib.Path(tempfile.mkdtemp()) / "scores.parquet"
>>> pd.DataFrame({"id": np.arange(5), "score": np.linspace(0, 1, 5)}).to_parquet(path)
>>> pop = read_parquet(path, score_col="score", id_col="id", threshold=0.5)
>>> pop.size, int(pop.predictions.sum())
(5, 3)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ._protocols import PopulationLike
from ._validation import check_option
from .dask import DaskPopulation
from .population import Population

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["ENGINES", "read_parquet"]

#: the engines :func:`read_parquet` accepts
ENGINES = ("memory", "dask")


def read_parquet(
    path: str | Path | list[str | Path],
    *,
    score_col: str,
    id_col: str | None = None,
    prediction_col: str | None = None,
    threshold: float | None = None,
    engine: str = "memory",
    client: Client | None = None,
) -> PopulationLike:
    """Read a population from a Parquet file or partitioned dataset.

    Parameters
    ----------
    path : str, Path or list of them
        A Parquet file or a directory of them (``engine="dask"`` also takes globs and lists).
    score_col, id_col, prediction_col : str
        Columns; without ``id_col`` the ids are the positions ``0..N-1``.
    threshold : float, optional
        Exactly one of ``threshold`` and ``prediction_col``.
    engine : {"memory", "dask"}
        ``"memory"``: a :class:`~bayes_eval.Population`; ``"dask"``: a lazily read, out-of-core
        :class:`~bayes_eval.dask.DaskPopulation` with the same positions, strata and proposals.
    client : distributed.Client, optional
        Where Dask passes run (``engine="dask"`` only).

    Returns
    -------
    Population or DaskPopulation

    Raises
    ------
    ValueError
        An unknown ``engine`` (the allowed ones are listed), a ``client`` with
        ``engine="memory"``, or what the reader refuses (missing path or column, bad values).
    """
    check_option(engine, "engine", ENGINES)
    if engine == "dask":
        return DaskPopulation.from_parquet(
            path,
            score_col=score_col,
            id_col=id_col,
            prediction_col=prediction_col,
            threshold=threshold,
            client=client,
        )
    if client is not None:
        raise ValueError(f"client={client!r} needs engine='dask'; engine='memory' reads here")
    return Population.from_parquet(
        path,
        score_col=score_col,
        id_col=id_col,
        prediction_col=prediction_col,
        threshold=threshold,
    )
