"""Score strata: partitions of a population by predicted side and score.

:func:`stratify` splits each predicted side (negatives first, then positives) into strata over a
stratification variable (the score, or the classifier's confidence in its own prediction). The
decision threshold is always a stratum boundary, so every stratum lies wholly on one predicted side;
tied values are never split; no stratum is empty. Strata are numbered with the negative side first,
each side in increasing score.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata for precision).
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (stratification methods, confidence
as the stratification variable).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike
from scipy import ndimage

from ._protocols import PopulationLike, strata_repr
from ._score_histogram import histogram_strata, index_dtype
from ._stratifiers import STRATIFIERS, equal_size, equal_size_from_counts, equal_width
from ._validation import RNGLike, as_generator, check_option
from .population import Population

__all__ = ["FewerStrataWarning", "Strata", "side_n_strata", "stratify"]


class FewerStrataWarning(UserWarning):
    """Ties on a predicted side leave fewer distinct scores than the strata asked for."""


class Strata:
    """A stratification of a population (read-only).

    Attributes
    ----------
    population : Population
    method : str
        Name of the stratifier that made the strata (``"custom"`` for :meth:`from_assignment`).
    variable : {"score", "confidence"}
    sizes : ndarray of int64, shape (K,)
        Items per stratum, ``N_k``.
    predicted : ndarray of bool, shape (K,)
        Predicted class of each stratum.
    score_min, score_max : ndarray of float64, shape (K,)
        Range of the scores in each stratum.
    assignment : ndarray of int, shape (N,)
        Stratum index of every item, in population order.
    """

    __slots__ = (
        "_members_offsets",
        "_members_order",
        "assignment",
        "method",
        "population",
        "predicted",
        "requested",
        "score_max",
        "score_min",
        "sizes",
        "variable",
    )

    def __init__(
        self,
        population: PopulationLike,
        assignment: np.ndarray,
        predicted: np.ndarray,
        sizes: np.ndarray,
        score_min: np.ndarray,
        score_max: np.ndarray,
        *,
        method: str,
        variable: str = "score",
        requested: tuple[int, int] | None = None,
    ) -> None:
        self.population = population
        self.assignment = assignment
        self.predicted = np.asarray(predicted, dtype=bool)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.score_min = np.asarray(score_min, dtype=np.float64)
        self.score_max = np.asarray(score_max, dtype=np.float64)
        self.method = method
        self.variable = variable
        self.requested = requested
        self._members_order: np.ndarray | None = None
        self._members_offsets: np.ndarray | None = None
        for arr in (self.predicted, self.sizes, self.score_min, self.score_max):
            arr.flags.writeable = False
        if isinstance(assignment, np.ndarray):
            assignment.flags.writeable = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_assignment(cls, population: Population, assignment: ArrayLike) -> Strata:
        """Strata from a user-given stratum index per item (0..K-1, every stratum non-empty,
        each wholly on one predicted side)."""
        arr = np.asarray(assignment)
        if arr.shape != (population.size,) or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(
                f"assignment has shape {arr.shape} and dtype {arr.dtype}; allowed: integers, "
                f"one per item (shape ({population.size},))"
            )
        if arr.min() < 0:
            raise ValueError(f"assignment has negative stratum index {int(arr.min())}")
        k = int(arr.max()) + 1
        sizes = np.bincount(arr, minlength=k)
        if (sizes == 0).any():
            raise ValueError(
                f"assignment leaves stratum {int(np.flatnonzero(sizes == 0)[0])} empty; "
                "allowed: stratum indices 0..K-1, each used at least once"
            )
        npos = np.bincount(arr, weights=population.predictions, minlength=k)
        mixed = (npos > 0) & (npos < sizes)
        if mixed.any():
            raise ValueError(
                f"stratum {int(np.flatnonzero(mixed)[0])} of assignment mixes predicted "
                "positives and negatives; every stratum must lie on one predicted side"
            )
        labels = arr.astype(np.int64)
        idx = np.arange(k)
        smin = np.asarray(ndimage.minimum(population.scores, labels, idx), dtype=float)
        smax = np.asarray(ndimage.maximum(population.scores, labels, idx), dtype=float)
        return cls(
            population,
            arr.astype(index_dtype(k)),
            npos == sizes,
            sizes,
            smin,
            smax,
            method="custom",
        )

    # ------------------------------------------------------------------ interface
    @property
    def n_strata(self) -> int:
        """Number of strata K."""
        return int(self.sizes.shape[0])

    def stratum_of(self, positions: np.ndarray) -> np.ndarray:
        """Stratum index of the items at ``positions``."""
        return np.asarray(self.assignment[np.asarray(positions, dtype=np.int64)], dtype=np.int64)

    def members(self, k: int) -> np.ndarray:
        """Positions (population order) of the items of stratum ``k``, increasing."""
        if self._members_order is None:
            # stable sort of small integer keys: radix sort, O(N)
            self._members_order = np.argsort(self.assignment, kind="stable")
            self._members_offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        assert self._members_offsets is not None
        return self._members_order[self._members_offsets[k] : self._members_offsets[k + 1]]

    def to_dataset(self) -> xr.Dataset:
        """Per-stratum facts as an :class:`xarray.Dataset` over dim ``stratum``."""
        return xr.Dataset(
            {
                "N": ("stratum", self.sizes),
                "predicted": ("stratum", self.predicted.astype(np.int8)),
                "score_min": ("stratum", self.score_min),
                "score_max": ("stratum", self.score_max),
            },
            coords={"stratum": np.arange(self.n_strata)},
            attrs={"method": self.method, "variable": self.variable},
        )

    def __repr__(self) -> str:
        return strata_repr(self)


def _as_n_strata(n_strata: Any) -> tuple[int | str, int | str]:
    def one(v: Any) -> int | str:
        if isinstance(v, str) and v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1:
            raise ValueError(
                f"n_strata={n_strata!r} is not allowed; allowed: a positive int, 'auto', or a "
                "(negative side, positive side) pair of them"
            )
        return int(v)

    if isinstance(n_strata, tuple | list):
        if len(n_strata) != 2:
            raise ValueError(
                f"n_strata={n_strata!r} has {len(n_strata)} entries; a pair is "
                "(negative side, positive side)"
            )
        return one(n_strata[0]), one(n_strata[1])
    v = one(n_strata)
    return v, v


def _confidence(population: PopulationLike, score_kind: str) -> np.ndarray:
    scores = population.scores
    preds = population.predictions
    if score_kind == "auto":
        score_kind = "probability" if (scores.min() >= 0.0 and scores.max() <= 1.0) else "margin"
    if score_kind == "probability":
        out = 1.0 - scores
        np.copyto(out, scores, where=preds)
        return out
    threshold = population.threshold if population.threshold is not None else 0.0
    return np.abs(scores - threshold)


#: most strata per side chosen by ``n_strata="auto"``
AUTO_MAX_STRATA = 10
#: fewest items per stratum on average: a side of N items gets at most
#: ``max(2, ceil(N / MIN_ITEMS_PER_STRATUM))`` strata, asked for or ``"auto"``
MIN_ITEMS_PER_STRATUM = 5


def side_n_strata(want: int | str, count: int) -> int:
    r"""Strata for a predicted side of ``count`` items when ``want`` (an int or ``"auto"``) are
    asked for: ``"auto"`` is :func:`_auto_n_strata`; an int is capped at
    :math:`\max(2, \lceil N / 5\rceil)`, one stratum per :data:`MIN_ITEMS_PER_STRATUM` items.

    Why the cap (session 16): the designs choose *strata*, and only within a stratum is the item
    drawn at random. Asked for 50 strata, a needle's 64 predicted positives made strata of one or
    two items; ``posterior_variance`` labelled exactly the 14 two-item strata, one item each, at
    200 labels, so the other 36 items could never be labelled and the same 28 items were the
    only ones ever sampled: the audits' randomness was three coin flips, and the precision bound
    rested on whether those 28 happened to be typical of the 64. Over six seeded populations
    (0.05 % shifted needles, 100,000 items, ``bench_pooled.py`` row 25) the 95 % lower bound of
    precision covered 0.89, 0.62, 1.00, 1.00, 1.00, 1.00; with at most 13 strata on that side
    (five items each) 0.963-0.978 (400-600 replications each; ``bench_pooled.txt``,
    session 16). The pooled model is K-invariant, so fewer strata cost it no prior honesty; they
    cost efficiency where a small side is labelled to census (synthetic needles, 25 strata asked
    per side: F1 RMSE 2.35x / 2.92x OASIS against 1.68x / 1.89x uncapped).
    ``Strata.n_strata`` and ``Strata.requested`` say how many were made and asked for.
    """
    cap = max(2, math.ceil(count / MIN_ITEMS_PER_STRATUM))
    if want == "auto":
        return min(cap, AUTO_MAX_STRATA)
    return min(int(want), cap)


def _auto_n_strata(values: np.ndarray) -> int:
    """The ``"auto"`` rule: ``K = clip(ceil(N / 5), 2, 10)`` strata per side: 10, or one per five
    items on a side of fewer than 50 (at least 2). Never more than the distinct values.

    The cap of 10 follows the seed papers: Kumar & Raj (section 4, Figures 3 and 5) vary K from
    2 to 10 and find that "once K is large enough major variation in MVR values cannot be
    expected", and Cochran (1977, section 5A.8) shows the gain of more strata levels off after
    about six; the pooled model's coverage battery at 10 strata per side is in
    ``benchmarks/results/bench_pooled.txt``.

    Why a small side gets fine strata (session 11; until then ``round(N^(1/3) / 2)``, which
    gave a needle's 25-60 predicted positives 2 strata): the default pooled model sees the
    scores through the strata, and a side that is labelled (nearly) to census is where the labels
    pin the calibration curve's slope -- in 2 strata the association of score and label within
    the side is averaged away, the slope is loose, and the curve spreads phantom missed
    positives over the haystack's strata. On synthetic 0.05 % needles (100,000 items, separation
    4 and 5) the default audit's F1 bias at 1,000 labels went from -0.174 +- 0.018 and
    -0.141 +- 0.016 to -0.060 +- 0.020 and -0.077 +- 0.012 (RMSE 0.187 / 0.155 to 0.098 / 0.090;
    16 seeds), and on the five real needles RMSE 0.005-0.024 to 0.006-0.029 (16 seeds, within
    their noise; ``benchmarks/bench_default_needles.py``). The cube-root rule's reason (each
    stratum of a design-based estimator costs an initial sample, Kumar & Raj's ``n_ini``) does not
    hold for the pooled model; with ``model="independent"`` pass fewer strata explicitly.
    """
    return side_n_strata("auto", values.shape[0])


def _locate(values: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local stratum index (number of edges <= value) and counts per stratum.

    One comparison pass per edge; for the few edges of a stratification this is several times
    faster than a binary search (``np.searchsorted``) over 10^7 values.
    """
    m = edges.shape[0]
    if m > 64:
        local = np.searchsorted(edges, values, side="right")
        return local, np.bincount(local, minlength=m + 1)
    local = np.zeros(values.shape[0], dtype=np.int16 if m < 32000 else np.int32)
    ge = np.empty(m + 2, dtype=np.int64)
    ge[0] = values.shape[0]
    ge[m + 1] = 0
    for j, e in enumerate(edges):
        above = values >= e
        ge[j + 1] = np.count_nonzero(above)
        local += above
    return local, ge[:-1] - ge[1:]


def _counts_only(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    ge = [values.shape[0]] + [int(np.count_nonzero(values >= e)) for e in edges] + [0]
    return -np.diff(np.asarray(ge, dtype=np.int64))


def _stratify_side(
    values: np.ndarray, n: int, method: str, rng: np.random.Generator, need_local: bool = True
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Edges, local stratum index (if ``need_local``) and counts for one side (edges are lower
    edges of strata 1..)."""
    locate = _locate if need_local else (lambda v, e: (None, _counts_only(v, e)))
    edges = np.asarray(STRATIFIERS[method](values, n, rng=rng), dtype=np.float64)
    edges = np.unique(edges)
    vmin = values.min()
    edges = edges[edges > vmin]
    local, counts = locate(values, edges)
    if (counts[1:] == 0).any():
        keep = counts[1:] > 0
        edges = edges[keep]
        local, counts = locate(values, edges)
    if edges.size + 1 < n and method == "equal_size":
        uniq, cnt = np.unique(values, return_counts=True)
        if uniq.size >= n:
            edges = equal_size_from_counts(uniq, cnt, n)
            local, counts = locate(values, edges)
    return edges, local, counts


def stratify(
    population: Population,
    *,
    method: str = "equal_size",
    n_strata: int | str | tuple[int | str, int | str] = 10,
    variable: str = "score",
    score_kind: str = "auto",
    rng: RNGLike = None,
) -> Strata:
    """Stratify a population by predicted side and score.

    Parameters
    ----------
    population : Population
    method : str
        One of :data:`bayes_eval._stratifiers.STRATIFIERS`: ``"equal_size"`` (percentiles),
        ``"equal_width"``, ``"cum_sqrt_f"`` (Dalenius–Hodges), ``"cum_cbrt_f"``,
        ``"weighted_mean"`` (Hansen–Hurwitz–Madow), ``"kmeans"``, ``"gmm"`` (Kumar & Raj,
        section 3.5). Densities come from equal-width histograms
        (:func:`bayes_eval._stratifiers.histogram_bins`).
    n_strata : int, "auto" or (int, int)
        Strata per predicted side, or a (negative side, positive side) pair. ``"auto"`` takes
        ``clip(ceil(N_side / 5), 2, 10)``: 10, or one per five items on a side of fewer than 50
        (see ``_auto_n_strata``: fine strata on a needle's few predicted positives pin the pooled
        model's curve). An int is capped at ``max(2, ceil(N_side / 5))``, at least five items
        per stratum on average (:func:`side_n_strata`: the designs choose strata, and strata of
        one or two items leave most of a small side never labelled). A side with no items gets
        none. Otherwise fewer strata than asked result only where ties or empty score ranges
        make more impossible (e.g. ``"equal_width"`` bins with no items are merged into the
        one below).
    variable : {"score", "confidence"}
        Stratify on the score or on the classifier's confidence in its own prediction (the
        probability of the predicted class for probabilistic scores, ``|score - threshold|`` for
        margins), as Kumar & Raj do (section 3.5). Strata never straddle the threshold, and on
        each side the confidence is an affine, order-reversing (negative side) or order-keeping
        (positive side) map of the score, so equal-width, equal-size, cumulative-root, k-means
        and GMM strata are the same as on the score (up to which side of an edge a tie falls);
        the weighted-mean rule, which uses the values themselves, differs. Probabilities below
        about 1e-16 all have confidence 1.0 in floating point and so fall in one stratum.
    score_kind : {"auto", "probability", "margin"}
        How to read scores for ``variable="confidence"``; ``"auto"`` takes scores within [0, 1]
        as probabilities.
    rng : int, Generator or None
        For randomised stratifiers (k-means initialisation).

    Notes
    -----
    ``"equal_size"`` and ``"equal_width"`` on the score take an O(N) path
    (``_fast_score_strata``): one histogram of the scores over :math:`2^{16}` equal-width bins
    locates the bins holding the edges (for equal size, the order statistics of rank
    ``floor(j N_side / n)``), exact order statistics come from those bins alone, and every
    item takes its stratum from a bin -> stratum table, so the strata equal
    those of a full sort without sorting. Heavy ties, empty equal-width strata and scores
    crowded into a few bins (e.g. spread over hundreds of decades) take the general path:
    ``np.partition`` per side and one comparison pass per edge.

    Returns
    -------
    Strata

    Raises
    ------
    ValueError
        For an unknown method or a bad ``n_strata``.

    Warns
    -----
    FewerStrataWarning
        When a side has fewer distinct values than ``n_strata``: it gets one stratum per
        distinct value (``Strata.n_strata`` and ``Strata.sizes`` say how many).

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> pop = be.Population(np.linspace(0, 1, 1000), threshold=0.5)
    >>> s = be.stratify(pop, method="equal_size", n_strata=4)
    >>> s.sizes.tolist()
    [125, 125, 125, 125, 125, 125, 125, 125]
    """
    lazy = getattr(population, "stratify_lazy", None)
    if lazy is not None:  # out-of-core populations (bayes_eval.dask_population)
        return lazy(
            method=method, n_strata=n_strata, variable=variable, score_kind=score_kind, rng=rng
        )
    check_option(method, "method", tuple(STRATIFIERS))
    check_option(variable, "variable", ("score", "confidence"))
    check_option(score_kind, "score_kind", ("auto", "probability", "margin"))
    wanted = _as_n_strata(n_strata)
    lazy = getattr(population, "stratify_lazy", None)
    if lazy is not None:  # out-of-core populations stratify themselves (same arguments)
        return lazy(
            method=method, n_strata=n_strata, variable=variable, score_kind=score_kind, rng=rng
        )
    gen = as_generator(rng)
    if variable == "score" and STRATIFIERS.get(method) in _FAST_KERNELS:
        fast_result = _fast_score_strata(population, method, wanted)
        if fast_result is not None:
            return fast_result
    preds = population.predictions
    var = population.scores if variable == "score" else _confidence(population, score_kind)
    fast = variable == "score" and population.threshold is not None

    k_total_guess = 0
    side_results = []
    for side, want in ((False, wanted[0]), (True, wanted[1])):
        mask = preds == side
        if not mask.any():
            side_results.append(None)
            continue
        values = var[mask]
        n = side_n_strata(want, values.shape[0])
        edges, _, counts = _stratify_side(values, n, method, gen, need_local=False)
        if edges.size + 1 < n and want != "auto":
            distinct = np.unique(values).size
            if distinct < n:
                # ties force fewer strata (e.g. a needle population's predicted positives with
                # a handful of distinct scores): one stratum per distinct value, said loudly
                warnings.warn(
                    f"n_strata={want} is more than the {distinct} distinct {variable} value(s) on "
                    f"the predicted-{'positive' if side else 'negative'} side; that side gets "
                    f"{distinct} strata",
                    FewerStrataWarning,
                    stacklevel=2,
                )
                edges, _, counts = _stratify_side(values, distinct, method, gen, need_local=False)
        side_results.append((None, None, counts, edges.size + 1, edges))
        k_total_guess += edges.size + 1
        del values, mask

    dtype = index_dtype(k_total_guess)
    if fast:
        return _by_score_edges(population, side_results, dtype, method, wanted)
    return _by_variable_edges(population, var, side_results, dtype, method, variable, wanted)


def _by_variable_edges(
    population: PopulationLike,
    var: np.ndarray,
    side_results: list,
    dtype: type,
    method: str,
    variable: str,
    wanted: Any,
) -> Strata:
    """General path: strata are intervals of the stratification variable within each side.

    The local stratum of every item is counted on the whole population (one comparison pass per
    edge, restricted to the item's side by ``np.where``), so no masked copies or masked writes of
    10^7-element arrays are needed; strata are then renumbered by increasing score per side.
    """
    preds = population.predictions
    scores = population.scores
    k_neg = side_results[0][3] if side_results[0] is not None else 0
    raw = {}
    for side, res in zip((False, True), side_results, strict=True):
        if res is not None:
            raw[side], _ = _locate(var, res[4])
    if len(raw) == 2:
        combined = np.where(preds, raw[True].astype(dtype) + k_neg, raw[False].astype(dtype))
    else:
        ((side, loc),) = raw.items()
        combined = loc.astype(dtype, copy=False) + (k_neg if side else 0)
    k_total = sum(res[3] for res in side_results if res is not None)
    lo = np.full(k_total, np.inf)
    hi = np.full(k_total, -np.inf)
    np.minimum.at(lo, combined, scores)
    np.maximum.at(hi, combined, scores)
    rank = np.empty(k_total, dtype=np.int64)
    sizes, predicted, smin, smax = [], [], [], []
    offset = 0
    for side, res in zip((False, True), side_results, strict=True):
        if res is None:
            continue
        _, _, counts, k, _ = res
        # number strata by increasing score within the side
        order = np.argsort(lo[offset : offset + k], kind="stable")
        rank[offset + order] = offset + np.arange(k)
        sizes.append(counts[order])
        smin.append(lo[offset : offset + k][order])
        smax.append(hi[offset : offset + k][order])
        predicted.append(np.full(k, side))
        offset += k
    assignment = rank.astype(dtype)[combined]
    return Strata(
        population,
        assignment,
        np.concatenate(predicted),
        np.concatenate(sizes),
        np.concatenate(smin),
        np.concatenate(smax),
        method=method,
        variable=variable,
        requested=wanted,  # type: ignore[arg-type]
    )


def _by_score_edges(
    population: PopulationLike, side_results: list, dtype: type, method: str, wanted: Any
) -> Strata:
    """Fast path when predictions come from a threshold and strata are score intervals.

    Then every stratum is a half-open score interval and the threshold separates the sides, so
    the stratum of an item is the number of (global, increasing) edges at or below its score:
    one comparison pass per edge over the whole population, with no masked copies.
    """
    scores = population.scores
    parts = []
    sizes, predicted = [], []
    for side, res in zip((False, True), side_results, strict=True):
        if res is None:
            continue
        _, _, counts, k, edges = res
        if side and side_results[0] is not None:
            parts.append(np.asarray([population.threshold], dtype=np.float64))
        parts.append(edges)
        sizes.append(counts)
        predicted.append(np.full(k, side))
    global_edges = np.concatenate(parts)
    assignment, _ = _locate(scores, global_edges)
    assignment = assignment.astype(dtype, copy=False)
    k_total = global_edges.shape[0] + 1
    lo = np.full(k_total, np.inf)
    hi = np.full(k_total, -np.inf)
    np.minimum.at(lo, assignment, scores)
    np.maximum.at(hi, assignment, scores)
    return Strata(
        population,
        assignment,
        np.concatenate(predicted),
        np.concatenate(sizes),
        lo,
        hi,
        method=method,
        variable="score",
        requested=wanted,
    )


# ---------------------------------------------------------------------- fast score path
#: kernels with an O(N) histogram path (:func:`_fast_score_strata`)
_FAST_KERNELS = (equal_size, equal_width)


def _fast_score_strata(population: PopulationLike, method: str, wanted: tuple) -> Strata | None:
    """``equal_size`` / ``equal_width`` strata of the score in O(N)
    (:func:`bayes_eval._score_histogram.histogram_strata`), or None for the general path."""

    def n_strata_for(side: int, side_size: int) -> int:
        want = wanted[side]
        return side_n_strata(want, side_size)

    kernel = STRATIFIERS[method]
    found = histogram_strata(population, kernel is equal_size, kernel, n_strata_for)
    if found is None:
        return None
    return Strata(
        population,
        found.assignment,
        found.predicted,
        found.sizes,
        found.lo,
        found.hi,
        method=method,
        variable="score",
        requested=wanted,
    )
