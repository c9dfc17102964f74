"""What an audit does and where it stands: the value objects that stop rules, the sequential
correction and the batch engine share (so none of them needs the audit object itself)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._draws import DEFAULT_DRAWS
from ._protocols import StrataLike
from .priors import Prior

__all__ = ["Look", "Procedure"]


@dataclass(frozen=True, slots=True)
class Procedure:
    """What an audit does, fixed when it starts looking: everything a stop rule may need to know
    (and a sequential calibration must simulate).

    Attributes
    ----------
    strata : Strata
        The audit's strata (in memory or Dask-backed).
    metric : str
        Target metric.
    design : str
        Design name; ``design_options`` its keyword options.
    model : str
        Posterior model.
    prior : Prior
        The resolved prior.
    finite_population : bool
    draws : int
        Monte Carlo draws per look.
    batch_size : int or None
        Labels per batch (the steady-state size of a design's own schedule).
    budget : int or None
        Most labels the audit may use.
    seed : int or None
        The audit's seed.
    path : Path or None
        The audit directory, if persistent (rules may cache there).
    pilot_n, pilot_h : ndarray of int64 (K,)
        Labels and positives per stratum when the run started.
    """

    strata: StrataLike
    metric: str
    design: str
    design_options: dict[str, Any]
    model: str
    prior: Prior
    finite_population: bool = True
    draws: int = DEFAULT_DRAWS
    batch_size: int | None = None
    budget: int | None = None
    seed: int | None = None
    path: Path | None = None
    pilot_n: np.ndarray | None = None
    pilot_h: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Look:
    """One look of a running audit: the procedure, the labels so far and the looks taken."""

    procedure: Procedure
    n_labels: int
    looks: int = 1

    @property
    def metric(self) -> str:
        return self.procedure.metric
