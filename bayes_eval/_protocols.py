"""What the rest of bayes_eval asks of a population and of its strata.

Designs, the posterior, the audit and the certification never need a concrete
:class:`~bayes_eval.Population` or :class:`~bayes_eval.Strata`: they ask for the few members
listed in :class:`PopulationLike` and :class:`StrataLike` (found by ``grep`` over the package:
``strata.sizes``, ``strata.predicted``, ``strata.stratum_of``, ``population.ids_at``,
``population.positions_of``, ``population.fingerprint`` ...). The in-memory classes and the
out-of-core ones of :mod:`bayes_eval.dask` implement both protocols without inheriting from each
other, so neither can break the other's contract.

Members that only an in-memory population can offer (``scores`` and ``predictions`` as whole
arrays, ``Strata.assignment`` as an array, ``Strata.members``) are not part of the protocols;
code that needs them (the simulation, the hierarchical and pooled models' score profiles, the
in-memory sampler) says so in its signature by asking for a :class:`~bayes_eval.Strata`.

Both protocols are ``runtime_checkable``: ``isinstance(x, StrataLike)`` checks that the members
exist (not their types).

Examples
--------
>>> import numpy as np, bayes_eval as be
>>> from bayes_eval._protocols import PopulationLike, StrataLike
>>> pop = be.Population(np.linspace(0, 1, 100), threshold=0.5)
>>> isinstance(pop, PopulationLike), isinstance(be.stratify(pop, n_strata=2), StrataLike)
(True, True)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["PopulationLike", "StrataLike", "score_mean", "strata_repr"]


@runtime_checkable
class PopulationLike(Protocol):
    """A scored population, as the rest of bayes_eval sees it.

    ``size`` items at positions ``0..size-1``; ``threshold`` (None when predictions come from a
    column); look-ups of ids, scores and predicted labels at positions; ``positions_of(ids)``
    (a ``ValueError`` naming the first unknown id); ``fingerprint()``, a hash that changes when
    the data do; ``has_default_ids`` (ids are the positions).
    """

    @property
    def size(self) -> int: ...

    @property
    def threshold(self) -> float | None: ...

    @property
    def has_default_ids(self) -> bool: ...

    def ids_at(self, positions: np.ndarray) -> np.ndarray: ...

    def scores_at(self, positions: np.ndarray) -> np.ndarray: ...

    def predictions_at(self, positions: np.ndarray) -> np.ndarray: ...

    def positions_of(self, ids: ArrayLike, *, name: str = "ids") -> np.ndarray: ...

    def fingerprint(self) -> str: ...


@runtime_checkable
class StrataLike(Protocol):
    """A stratification of a :class:`PopulationLike`, as designs, posteriors and audits see it.

    Per stratum (arrays of shape ``(K,)``): ``sizes`` (``N_k``, int64), ``predicted`` (bool),
    ``score_min`` and ``score_max``; ``n_strata`` (``K``); ``stratum_of(positions)``; the
    ``population`` stratified and the ``method`` and ``variable`` that made the strata (disclosed
    in every posterior). Strata may also offer ``make_sampler(seed)`` (their own keyed sampler),
    ``score_mean`` (mean score per stratum) and ``compute_score_profile(bins=, max_cells=,
    kind=)`` (the pooled model's per-stratum score histogram, for strata whose population's
    scores are not in memory); :func:`bayes_eval._sampler.make_sampler`, the audit and
    :func:`bayes_eval.models._profile.profile_of_strata` use them when present.
    """

    population: PopulationLike
    method: str
    variable: str
    sizes: np.ndarray
    predicted: np.ndarray
    score_min: np.ndarray
    score_max: np.ndarray

    @property
    def n_strata(self) -> int: ...

    def stratum_of(self, positions: np.ndarray) -> np.ndarray: ...


def strata_repr(strata: StrataLike) -> str:
    """The repr every :class:`StrataLike` class shares: its class name, method, variable, ``K``
    (predicted negative and positive strata) and ``N``."""
    kneg = int((~np.asarray(strata.predicted, dtype=bool)).sum())
    k = strata.n_strata
    return (
        f"{type(strata).__name__}(method={strata.method!r}, variable={strata.variable!r}, "
        f"K={k} ({kneg} predicted negative, {k - kneg} predicted positive), "
        f"N={int(strata.sizes.sum()):,})"
    )


def score_mean(strata: StrataLike) -> np.ndarray:
    """Mean score of every stratum: given by the strata (``score_mean``, e.g. Dask strata), else
    from the in-memory assignment and scores, else the middle of each stratum's score range.

    The one definition used by the audit's manifest, :func:`bayes_eval.simulate` and the
    sequential calibration (what score-informed models and truths regress on)."""
    given = getattr(strata, "score_mean", None)
    if given is not None:
        return np.asarray(given, dtype=np.float64)
    assignment = getattr(strata, "assignment", None)
    scores = getattr(getattr(strata, "population", None), "scores", None)
    sizes = np.asarray(strata.sizes, dtype=np.float64)
    if isinstance(assignment, np.ndarray) and isinstance(scores, np.ndarray):
        sums = np.bincount(
            assignment.astype(np.int64, copy=False), weights=scores, minlength=sizes.shape[0]
        )
        return sums / sizes
    return (np.asarray(strata.score_min) + np.asarray(strata.score_max)) / 2.0


def check_strata(strata: Any, population: PopulationLike, data: str = "population") -> None:
    """Refuse ``strata`` that are not strata (``TypeError``) or that were made from another
    population than ``population`` (``ValueError``: neither the same object nor the same
    fingerprint). ``data`` names the argument holding the population, for the message. The one
    check of :class:`~bayes_eval.Audit` and :func:`~bayes_eval.simulate`."""
    if not isinstance(strata, StrataLike):  # every member of the protocol, population too
        raise TypeError(
            f"strata has type {type(strata).__name__}; allowed: a Strata from bayes_eval.stratify"
        )
    made_from = strata.population
    if made_from is population:
        return
    fingerprint = getattr(made_from, "fingerprint", None)
    if fingerprint is None or fingerprint() != population.fingerprint():
        raise ValueError(
            f"strata were made from a different population than the {data} given; allowed: "
            "strata that bayes_eval.stratify made from it (or from an equal copy)"
        )
