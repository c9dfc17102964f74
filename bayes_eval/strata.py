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
from scipy import ndimage

from ._protocols import strata_repr
from ._stratifiers import STRATIFIERS, equal_size, equal_size_from_counts, equal_width
from ._validation import as_generator, check_option
from .population import Population

__all__ = ["FewerStrataWarning", "Strata", "stratify"]


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
        population: Any,
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
    def from_assignment(cls, population: Population, assignment: Any) -> Strata:
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
            arr.astype(_index_dtype(k)),
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


def _index_dtype(k: int) -> type:
    return np.int16 if k < np.iinfo(np.int16).max else np.int32


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


def _confidence(population: Any, score_kind: str) -> np.ndarray:
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
#: items per stratum of ``n_strata="auto"`` on a side too small for :data:`AUTO_MAX_STRATA`
AUTO_ITEMS_PER_STRATUM = 5


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
    n = values.shape[0]
    return int(np.clip(math.ceil(n / AUTO_ITEMS_PER_STRATUM), 2, AUTO_MAX_STRATA))


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
    rng: Any = None,
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
        model's curve). A side with no items gets none.
        Fewer strata than asked result only where ties or empty score ranges make more
        impossible (e.g. ``"equal_width"`` bins with no items are merged into the one below).
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
        n = _auto_n_strata(values) if want == "auto" else int(want)
        edges, _, counts = _stratify_side(values, n, method, gen, need_local=False)
        if edges.size + 1 < n and want != "auto":
            distinct = np.unique(values).size
            if distinct < n:
                # ties force fewer strata (e.g. a needle population's predicted positives with
                # a handful of distinct scores): one stratum per distinct value, said loudly
                warnings.warn(
                    f"n_strata={n} is more than the {distinct} distinct {variable} value(s) on "
                    f"the predicted-{'positive' if side else 'negative'} side; that side gets "
                    f"{distinct} strata",
                    FewerStrataWarning,
                    stacklevel=2,
                )
                edges, _, counts = _stratify_side(values, distinct, method, gen, need_local=False)
        side_results.append((None, None, counts, edges.size + 1, edges))
        k_total_guess += edges.size + 1
        del values, mask

    dtype = _index_dtype(k_total_guess)
    if fast:
        return _by_score_edges(population, side_results, dtype, method, wanted)
    return _by_variable_edges(population, var, side_results, dtype, method, variable, wanted)


def _by_variable_edges(
    population: Any,
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
    population: Any, side_results: list, dtype: type, method: str, wanted: Any
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

#: equal-width histogram bins (per predicted side when the sides interleave in score) of the
#: fast path of :func:`stratify`
FAST_BINS = 1 << 16


#: adding 2^52 to a float in [0, 2^51) rounds it to an integer held in the low mantissa bits
_ROUND = 2.0**52
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))


def _bin_keys(values: np.ndarray, lo: float, scale: float) -> np.ndarray:
    """Histogram bin ``round((x - lo) * scale)`` of every value, as ``intp`` (one temporary).

    With ``lo <= x <= lo + span`` and ``scale = (B - 1) / span`` the product lies in
    ``[0, B - 1]`` up to rounding, so adding :math:`2^{52}` rounds it to an integer in
    ``0..B-1`` kept in the low mantissa bits (read through an integer view, no second array).
    Every step (subtraction, product, addition) is monotone non-decreasing under
    round-to-nearest, and so is reading the bits of a positive float, so ``bin(x) < bin(y)``
    implies ``x < y``: the items of a lower bin are strictly smaller. Edges go through this
    same function (then clipped to ``0..B-1``).
    """
    t = np.subtract(values, lo)
    t *= scale
    t += _ROUND
    keys = t.view(np.intp)
    keys -= _ROUND_BITS
    return keys


def _neighbours(nonzero: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """Nearest non-empty bins strictly below and above each of ``bins`` (where they exist)."""
    below = np.searchsorted(nonzero, bins, side="left") - 1
    above = np.searchsorted(nonzero, bins, side="right")
    return np.concatenate([nonzero[below[below >= 0]], nonzero[above[above < nonzero.shape[0]]]])


def _fast_score_strata(population: Any, method: str, wanted: tuple) -> Strata | None:
    """``equal_size`` / ``equal_width`` strata of the score in O(N), or None for the general
    path.

    One pass bins every score into ``FAST_BINS`` equal-width bins between the population's
    minimum and maximum (with side-major keys when the sides interleave in score) and
    ``np.bincount`` counts them. Only the items of a few bins are gathered: the bins holding an
    edge (for ``equal_size`` the bins holding the order statistics ``floor(j N_side / n)``,
    found from the cumulative counts), the bin of the threshold, their nearest non-empty
    neighbours and the first and last non-empty bins of each side. The order statistics are
    exact (``np.partition`` within their bins), so the edges equal those of the kernels in
    :mod:`bayes_eval._stratifiers`. Every item then takes its stratum from a bin -> stratum
    table; only the gathered items (the only ones sharing a bin with an edge) are compared with
    the edges. Stratum sizes come from the histogram, score ranges from the gathered items,
    which hold the extremes of every stratum. Returns None where ties or empty strata need the
    general treatment (fewer strata than asked), or the score range does not fit a float grid.
    """
    scores = population.scores
    preds = population.predictions
    size = scores.shape[0]
    threshold = population.threshold
    n_pos = int(np.count_nonzero(preds))
    side_n = (size - n_pos, n_pos)
    gmin, gmax = float(scores.min()), float(scores.max())
    span = gmax - gmin
    nb = FAST_BINS
    if not (np.isfinite(span) and span > 0):
        return None
    scale = (nb - 1) / span
    if not (np.isfinite(scale) and scale > 0):
        return None
    keys = _bin_keys(scores, gmin, scale)
    if threshold is None:  # sides interleave in score: keys side-major, positives nb..2nb-1
        keys += nb * preds
        n_keys = 2 * nb
        side_bins = ((0, nb - 1), (nb, 2 * nb - 1))
        t_bin = None
    else:  # negatives are x < t <= positives: one grid, the threshold's bin is shared
        n_keys = nb
        t = float(threshold)
        t_bin = (
            0
            if t <= gmin
            else nb - 1
            if t >= gmax
            else int(_bin_keys(np.asarray([t]), gmin, scale)[0])
        )
        side_bins = ((0, t_bin), (t_bin, nb - 1))
    hist = np.bincount(keys, minlength=n_keys)
    if hist.shape[0] != n_keys:  # pragma: no cover - keys are in range by construction
        return None
    nonzero = np.flatnonzero(hist)
    cum = np.cumsum(hist)

    def edge_keys(edges: np.ndarray, side: int) -> np.ndarray:
        k = np.clip(_bin_keys(edges, gmin, scale), 0, nb - 1)
        return k + nb if (side and threshold is None) else k

    # bins always gathered: first/last non-empty bin of each side, the threshold's bin
    base = []
    for side in (0, 1):
        if side_n[side]:
            lo_b, hi_b = side_bins[side]
            sel = nonzero[(nonzero >= lo_b) & (nonzero <= hi_b)]
            base += [sel[0], sel[-1]]
    if t_bin is not None:
        base.append(t_bin)
    n_side = [
        0
        if not side_n[s]
        else (
            _auto_n_strata(np.broadcast_to(0.0, (side_n[s],)))
            if wanted[s] == "auto"
            else int(wanted[s])
        )
        for s in (0, 1)
    ]
    by_size = STRATIFIERS[method] is equal_size
    if by_size:
        ranks = []  # per side: ranks of the order statistics among all items by (side, score)
        for side in (0, 1):
            n, cnt = n_side[side], side_n[side]
            kth = np.unique((np.arange(1, n) * cnt) // n)
            kth = kth[(kth > 0) & (kth < cnt)]
            offset = side_n[0] if side else 0
            ranks.append(kth + offset)
        rank_all = np.concatenate(ranks).astype(np.intp)
        target = np.searchsorted(cum, rank_all, side="right")
        edge_bins = np.concatenate([target, np.asarray(base, dtype=np.intp)])
    else:
        edge_bins = np.asarray(base, dtype=np.intp)
    gather_bins = np.unique(np.concatenate([edge_bins, _neighbours(nonzero, edge_bins)]))

    def gather(bins_: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        table = np.zeros(n_keys, dtype=bool)
        table[bins_] = True
        pos = np.flatnonzero(table.take(keys))
        return pos, scores[pos], keys[pos]

    pos, vals, gkeys = gather(gather_bins)
    if pos.shape[0] > max(size // 2, 1 << 14):  # crowded bins: no gain over the general path
        return None
    gside = preds[pos]
    side_min = [vals[gside == s].min() if side_n[s] else None for s in (0, 1)]
    side_max = [vals[gside == s].max() if side_n[s] else None for s in (0, 1)]

    edges = []
    if by_size:
        stats = np.empty(rank_all.shape[0])
        for b in np.unique(target):
            hit = target == b
            in_bin = vals[gkeys == b]
            local = rank_all[hit] - (cum[b] - hist[b])
            stats[hit] = np.partition(in_bin, local)[local]
        split = ranks[0].shape[0]
        for side, part in ((0, stats[:split]), (1, stats[split:])):
            e = np.unique(part)
            edges.append(e[e > side_min[side]] if side_n[side] else e)
    else:
        kernel = STRATIFIERS[method]
        for side in (0, 1):
            if not side_n[side]:
                edges.append(np.empty(0))
                continue
            ends = np.asarray([side_min[side], side_max[side]], dtype=np.float64)
            e = np.unique(np.asarray(kernel(ends, n_side[side]), dtype=np.float64))
            edges.append(e[e > side_min[side]])
    for side in (0, 1):
        if side_n[side] and edges[side].size + 1 < n_side[side]:
            return None  # ties or empty ranges: the general path repairs or raises
    eb = [edge_keys(edges[s], s) for s in (0, 1)]
    if not by_size:  # gather the bins of the edges now that they are known
        more = np.concatenate([*eb, np.asarray(base, dtype=np.intp)])
        more = np.unique(np.concatenate([more, _neighbours(nonzero, more)]))
        pos, vals, gkeys = gather(more)
        gside = preds[pos]
    elif not np.isin(np.concatenate(eb), gather_bins).all():  # pragma: no cover - safety net
        return None

    k_side = [edges[s].size + 1 if side_n[s] else 0 for s in (0, 1)]
    k_total = k_side[0] + k_side[1]
    dtype = _index_dtype(k_total)
    # bin -> stratum for bins without an edge: number of edges in lower bins
    table = np.empty(n_keys, dtype=np.int64)
    if threshold is None:
        b = np.arange(nb)
        table[:nb] = np.searchsorted(eb[0], b, side="left")
        table[nb:] = k_side[0] + np.searchsorted(eb[1] - nb, b, side="left")
    else:
        b = np.arange(nb)
        table[:] = np.where(
            b < t_bin,
            np.searchsorted(eb[0], b, side="left"),
            k_side[0] + np.searchsorted(eb[1], b, side="left"),
        )
    exact = np.where(
        gside,
        k_side[0] + np.searchsorted(edges[1], vals, side="right"),
        np.searchsorted(edges[0], vals, side="right"),
    )
    gathered = np.zeros(n_keys, dtype=bool)
    gathered[np.unique(gkeys)] = True
    rest = ~gathered & (hist > 0)
    sizes = np.bincount(table[rest], weights=hist[rest], minlength=k_total).astype(np.int64)
    sizes += np.bincount(exact, minlength=k_total)
    if (sizes == 0).any():
        return None  # empty strata are merged by the general path
    assignment = table.astype(dtype).take(keys)
    assignment[pos] = exact
    lo = np.full(k_total, np.inf)
    hi = np.full(k_total, -np.inf)
    np.minimum.at(lo, exact, vals)
    np.maximum.at(hi, exact, vals)
    predicted = np.repeat([False, True], k_side)
    return Strata(
        population,
        assignment,
        predicted,
        sizes,
        lo,
        hi,
        method=method,
        variable="score",
        requested=wanted,
    )
