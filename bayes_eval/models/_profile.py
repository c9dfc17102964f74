r"""Per-stratum score histograms: the covariate of the pooled model, built in one O(N) pass.

The pooled model (:mod:`bayes_eval.models.pooled`) needs, for every stratum, the distribution of
its items' covariate :math:`x` (the logit of a probability score, or a standardised margin), so
that a stratum's rate is the mean of the item-level calibration curve over its own items rather
than the curve at the stratum's mean score. :func:`score_profile` bins :math:`x` once on a global
grid of ``bins`` equal-width cells and keeps, per stratum, the occupied cells with their mean
:math:`x` and item share. Equal-width cells in logit space keep the resolution of the tails, where
a needle population's positives live (an equal-mass grid would lump every predicted positive of a
0.05 %-prevalence population into one cell). With 256 cells over the logit range of
:math:`\pm 20.7` a cell is about 0.16 wide, and averaging the convex/concave ``expit`` inside
a cell at its mean changes a rate by less than 0.4 % relative.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata).
"""

from __future__ import annotations

import numbers
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._protocols import StrataLike

__all__ = [
    "FULL_CLIP",
    "SCORE_KINDS",
    "SCORE_READINGS",
    "CovariateGrid",
    "ScoreProfile",
    "covariate",
    "inner_range",
    "probability_clip",
    "profile_from_cells",
    "resolve_kind",
    "score_profile",
    "score_profile_of",
    "score_reading",
]

#: values of ``kind`` accepted by :func:`score_profile` (``"constant"`` is detected, never asked)
SCORE_KINDS: tuple[str, ...] = ("auto", "probability", "margin")

#: how the pooled model reads the scores (a profile's ``kind``), as ``status`` and the report's
#: disclosure block say it
SCORE_READINGS: dict[str, str] = {
    "probability": "probabilities (the calibration curve anchored at each side's mean score)",
    "margin": "margins (not all within [0, 1]: the calibration learnt from the labels alone)",
    "constant": "one constant score (no information in the scores)",
}

#: probabilities are never clipped tighter than [CLIP, 1 - CLIP] before the logit (logit range
#: +-20.7); scores of exactly 0 or 1 go to the scores' own resolution (:func:`probability_clip`)
CLIP = 1e-9

#: the clip of populations without scores inside (0, 1), and of margins (which are not clipped)
FULL_CLIP = (CLIP, 1.0 - CLIP)


def probability_clip(inner_min: float, inner_max: float) -> tuple[float, float]:
    """The range ``(lo, hi)`` probability scores are clipped to before the logit, from the
    smallest and largest score strictly inside (0, 1) (NaN when there is none).

    A score of exactly 0 or 1 says "below (above) the classifier's resolution", not "one in a
    billion": a random forest of 100 trees scores in steps of 0.01, and a 0 there means no tree
    saw a positive in the item's leaves. It goes half a step beyond the nearest score inside:
    ``lo = max(CLIP, inner_min / 2)``, ``hi = min(1 - CLIP, (1 + inner_max) / 2)``. Scores
    inside (0, 1) are never moved (``lo <= inner_min``, ``hi >= inner_max`` unless they are
    within ``CLIP`` of the ends, clipped as always), so a population without exact 0 or 1
    scores has the covariate it always had.

    Measured (session 37, the forest held-out group, ``benchmarks/bench_heldout.py --forest``):
    with exact zeros mapped to ``logit(1e-9) = -20.7``, 16 logits below the next score, the
    calibration curve put next to no rate on 85 % of ``vietnam_injury``'s items, which hold 44
    of its 61 missed positives, and recall's 95 % lower bound covered 0.887 +- 0.018 at 1,000
    labels; read at 0.005 it covers 1.000, and the population's needle has F1 RMSE 0.161
    instead of 0.278 (OASIS 0.083). Where the exact zeros are true zeros (``k401k_participant``:
    the ineligible never participate) the needle's RMSE rises from 0.0086 to 0.0103.
    """
    lo = CLIP if not np.isfinite(inner_min) else max(CLIP, 0.5 * float(inner_min))
    hi = 1.0 - CLIP if not np.isfinite(inner_max) else min(1.0 - CLIP, 0.5 * (1.0 + inner_max))
    return lo, hi


def inner_range(s: np.ndarray) -> tuple[float, float]:
    """(smallest, largest) of the scores ``s`` strictly inside (0, 1); NaN, NaN if none are."""
    inner = s[(s > 0.0) & (s < 1.0)]
    if inner.size == 0:
        return float("nan"), float("nan")
    return float(inner.min()), float(inner.max())


@dataclass(frozen=True, slots=True)
class ScoreProfile:
    """Histogram of the model's covariate within every stratum.

    Attributes
    ----------
    x : ndarray of float64, (K, B)
        Mean covariate of each occupied cell of the stratum (padding cells: 0 with weight 0).
    weight : ndarray of float64, (K, B)
        Share of the stratum's items in each cell; rows sum to 1.
    sizes : ndarray of int64, (K,)
        Stratum sizes ``N_k``.
    predicted : ndarray of bool, (K,)
        Predicted class of each stratum.
    kind : {"probability", "margin", "constant"}
        ``x = logit(score)`` for probabilities, ``(score - median) / sd`` for margins; every
        item at the same covariate gives ``"constant"`` (the scores carry no information).
    center : float
        Population median of ``x`` (the point where the calibration shift is defined).
    """

    x: np.ndarray
    weight: np.ndarray
    sizes: np.ndarray
    predicted: np.ndarray
    kind: str
    center: float

    @property
    def n_strata(self) -> int:
        """Number of strata ``K``."""
        return int(self.sizes.shape[0])

    @property
    def side_share(self) -> np.ndarray:
        """``N_k`` over the size of stratum k's predicted side, ``(K,)`` (sums to 1 per side)."""
        sizes = self.sizes.astype(np.float64)
        pos = self.predicted
        tot = np.where(pos, sizes[pos].sum(), sizes[~pos].sum())
        return sizes / tot


def _check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in SCORE_KINDS:
        raise ValueError(f"kind={kind!r} is not allowed; allowed: {', '.join(SCORE_KINDS)}")
    return kind


def score_profile(
    scores: Any,
    assignment: Any,
    *,
    predicted: Any,
    sizes: Any,
    bins: int = 256,
    max_cells: int = 16,
    kind: str = "auto",
) -> ScoreProfile:
    """Build the :class:`ScoreProfile` of a stratified population in one O(N) pass.

    Parameters
    ----------
    scores : array of float, (N,)
        The classifier's scores.
    assignment : array of int, (N,)
        Stratum of every item (``Strata.assignment``).
    predicted : array of bool, (K,)
        Predicted class of every stratum.
    sizes : array of int, (K,)
        Items per stratum; must equal the counts of ``assignment``.
    bins : int >= 2
        Cells of the global equal-width grid over the covariate's range.
    max_cells : int >= 1
        At most this many cells are kept per stratum: neighbouring occupied cells are merged
        into ``max_cells`` groups of about equally many cells (each keeps its mean covariate and
        share), which bounds the per-fit cost at ``K * max_cells`` curve evaluations per node.
    kind : {"auto", "probability", "margin"}
        ``"auto"`` reads scores within [0, 1] as probabilities.

    Returns
    -------
    ScoreProfile

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.models._profile import score_profile
    >>> prof = score_profile(np.array([0.1, 0.2, 0.7, 0.9]), np.array([0, 0, 1, 1]),
    ...                      predicted=[False, True], sizes=[2, 2])
    >>> prof.kind, prof.weight.sum(axis=1).tolist()
    ('probability', [1.0, 1.0])
    """
    kind = _check_kind(kind)
    bins = _check_bins(bins)
    max_cells = _check_max_cells(max_cells)
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0 or not np.isfinite(s).all():
        raise ValueError("scores must be a non-empty array of finite numbers")
    assign = np.asarray(assignment)
    if assign.shape != s.shape or not np.issubdtype(assign.dtype, np.integer):
        raise ValueError(
            f"assignment must be integers of the same shape as scores {s.shape}; got "
            f"{assign.dtype} {assign.shape}"
        )
    pred = np.asarray(predicted, dtype=bool).ravel()
    sz = np.asarray(sizes, dtype=np.int64).ravel()
    k = sz.shape[0]
    if pred.shape != (k,):
        raise ValueError(f"predicted has shape {pred.shape}; allowed: one value per stratum ({k},)")
    if assign.min() < 0 or assign.max() >= k:
        raise ValueError(f"assignment has values outside 0..{k - 1}")
    assign = assign.astype(np.int64)
    counts_k = np.bincount(assign, minlength=k)
    if not np.array_equal(counts_k, sz) or (sz <= 0).any():
        raise ValueError("sizes must be the positive item counts of every stratum in assignment")
    kind = resolve_kind(kind, float(s.min()), float(s.max()))
    shift, scale = (0.0, 1.0) if kind == "probability" else margin_standardisation(s)
    clip = probability_clip(*inner_range(s)) if kind == "probability" else FULL_CLIP
    x = covariate(s, kind, shift, scale, clip)
    grid = CovariateGrid(kind, shift, scale, float(x.min()), float(x.max()), bins, clip)
    if grid.constant:
        return grid.constant_profile(sz, pred)
    cnt, tot = grid.histogram(x, assign, k)
    return profile_from_cells(cnt, tot, sz, pred, kind, max_cells)


def _check_bins(bins: Any) -> int:
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or int(bins) < 2:
        raise ValueError(f"bins={bins!r} is not allowed; allowed: an integer >= 2")
    return int(bins)


def _check_max_cells(max_cells: Any) -> int:
    if isinstance(max_cells, bool) or not isinstance(max_cells, numbers.Integral) or max_cells < 1:
        raise ValueError(f"max_cells={max_cells!r} is not allowed; allowed: an integer >= 1")
    return int(max_cells)


# ---------------------------------------------------------------- the pieces both engines share
# The in-memory :func:`score_profile` and the out-of-core pass of
# :mod:`bayes_eval.dask._profile` compute the profile from the same functions: the covariate
# (:func:`covariate`), the grid and per-(stratum, cell) counts and sums of a chunk
# (:class:`CovariateGrid`), and the profile from the summed cells (:func:`profile_from_cells`);
# only the order of the sums differs (one chunk in memory, one per piece on Dask).


def resolve_kind(kind: str, score_min: float, score_max: float) -> str:
    """``kind`` with ``"auto"`` resolved from the score range: probabilities within [0, 1]."""
    kind = _check_kind(kind)
    if kind == "auto":
        return "probability" if (score_min >= 0.0 and score_max <= 1.0) else "margin"
    if kind == "probability" and (score_min < 0.0 or score_max > 1.0):
        raise ValueError("kind='probability' needs scores within [0, 1]")
    return kind


def margin_standardisation(s: np.ndarray) -> tuple[float, float]:
    """(median, standard deviation, 1 when it is 0) of margin scores ``s``, in memory."""
    sd = float(s.std())
    return float(np.median(s)), (sd if sd > 0 else 1.0)


def covariate(
    s: np.ndarray,
    kind: str,
    shift: float = 0.0,
    scale: float = 1.0,
    clip: tuple[float, float] = FULL_CLIP,
) -> np.ndarray:
    """The covariate ``x`` of scores ``s``: ``logit(clip(s))`` for ``kind="probability"``
    (``clip``: the range of :func:`probability_clip`), ``(s - shift) / scale`` for
    ``"margin"``. Monotone in ``s``, so the range of ``x`` is the covariate of the score
    range."""
    s = np.asarray(s, dtype=np.float64)
    if kind == "probability":
        c = np.clip(s, clip[0], clip[1])
        return np.log(c) - np.log1p(-c)
    return (s - shift) / scale


@dataclass(frozen=True, slots=True)
class CovariateGrid:
    """The global equal-width grid of ``bins`` cells over the covariate range ``[lo, hi]``.

    ``shift`` and ``scale`` standardise margins (0 and 1 for probabilities); ``clip`` is the
    probabilities' range before the logit (:func:`probability_clip`). A chunk of items is
    summarised by :meth:`histogram`; summaries of chunks add up to that of their union.
    """

    kind: str
    shift: float
    scale: float
    lo: float
    hi: float
    bins: int
    clip: tuple[float, float] = FULL_CLIP

    def covariate(self, s: np.ndarray) -> np.ndarray:
        """The covariate of scores ``s`` on this grid's reading (:func:`covariate`)."""
        return covariate(s, self.kind, self.shift, self.scale, self.clip)

    @property
    def constant(self) -> bool:
        """Whether every item has the same covariate (no grid)."""
        return self.hi - self.lo <= 1e-12 * max(1.0, abs(self.lo))

    def constant_profile(self, sizes: np.ndarray, predicted: np.ndarray) -> ScoreProfile:
        """The profile when the scores carry no information (``kind="constant"``)."""
        k = sizes.shape[0]
        x0 = self.lo if self.kind == "probability" else 0.0
        return ScoreProfile(np.full((k, 1), x0), np.ones((k, 1)), sizes, predicted, "constant", x0)

    def histogram(
        self, x: np.ndarray, assignment: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Item counts (int64) and sums of ``x`` (float64) per (stratum, cell), each ``(k, bins)``,
        of the items with covariates ``x`` in strata ``assignment``."""
        bins = self.bins
        cell = ((x - self.lo) * (bins / (self.hi - self.lo))).astype(np.int64)
        np.clip(cell, 0, bins - 1, out=cell)
        key = assignment.astype(np.int64, copy=False) * bins + cell
        cnt = np.bincount(key, minlength=k * bins).reshape(k, bins)
        tot = np.bincount(key, weights=x, minlength=k * bins).reshape(k, bins)
        return cnt.astype(np.int64, copy=False), tot


def profile_from_cells(
    cnt: np.ndarray,
    tot: np.ndarray,
    sizes: np.ndarray,
    predicted: np.ndarray,
    kind: str,
    max_cells: int,
) -> ScoreProfile:
    """The :class:`ScoreProfile` from the per-(stratum, cell) counts and sums of the covariate
    over the whole population (:meth:`CovariateGrid.histogram`, summed over chunks): the centre
    (mean covariate of the population's median cell), and each stratum's occupied cells merged
    into at most ``max_cells`` groups of neighbours."""
    k, bins = cnt.shape
    sz = np.asarray(sizes, dtype=np.int64)
    glob = cnt.sum(axis=0)
    med_cell = int(np.searchsorted(np.cumsum(glob), 0.5 * int(glob.sum())))
    center = float(tot[:, med_cell].sum() / glob[med_cell])
    if max_cells < bins:  # merge neighbouring cells of a stratum down to max_cells groups
        occ = cnt > 0
        rank = np.cumsum(occ, axis=1) - 1
        n_occ = occ.sum(axis=1, keepdims=True)
        group = (rank * max_cells) // np.maximum(n_occ, 1)
        key2 = (np.arange(k)[:, None] * max_cells + np.minimum(group, max_cells - 1))[occ]
        cnt = np.bincount(key2, weights=cnt[occ], minlength=k * max_cells).reshape(k, -1)
        tot = np.bincount(key2, weights=tot[occ], minlength=k * max_cells).reshape(k, -1)
    occupied = cnt > 0
    width = int(occupied.sum(axis=1).max())
    order = np.argsort(~occupied, axis=1, kind="stable")[:, :width]
    c_sel = np.take_along_axis(cnt, order, axis=1).astype(np.float64)
    t_sel = np.take_along_axis(tot, order, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xm = np.where(c_sel > 0, t_sel / c_sel, 0.0)
    return ScoreProfile(
        xm, c_sel / sz[:, None], sz, np.asarray(predicted, dtype=bool), kind, center
    )


#: curve evaluations per hyper-node the profile aims at (``K * max_cells``)
CELL_BUDGET = 256


def max_cells_for(n_strata: int) -> int:
    """``clip(CELL_BUDGET // K, 4, 16)``: cells kept per stratum for ``K`` strata."""
    return int(np.clip(CELL_BUDGET // max(int(n_strata), 1), 4, 16))


def profile_of_strata(strata: StrataLike, *, bins: int = 256, kind: str = "auto") -> ScoreProfile:
    """:func:`score_profile` of a stratification: its population's scores and its assignment.

    ``max_cells = clip(CELL_BUDGET // K, 4, 16)``: fine strata are narrow in score, so a few
    cells each describe them as well as 16 describe a coarse one, and the pooled model's cost per
    hyper-node stays about ``CELL_BUDGET`` curve evaluations whatever K.

    Strata that do not hold their population in memory give their own pass: their
    ``compute_score_profile(bins=, max_cells=, kind=)`` method is called
    (:meth:`bayes_eval.dask.DaskStrata.compute_score_profile`: the same profile out of core,
    from the same :class:`CovariateGrid` and :func:`profile_from_cells`).
    """
    k = int(np.asarray(strata.sizes).shape[0])
    own = getattr(strata, "compute_score_profile", None)
    if callable(own):
        return own(bins=bins, max_cells=max_cells_for(k), kind=kind)
    return score_profile(
        strata.population.scores,
        strata.assignment,
        predicted=strata.predicted,
        sizes=strata.sizes,
        bins=bins,
        max_cells=max_cells_for(k),
        kind=kind,
    )


#: score profiles of recently used strata (computing one is the O(N) pass the pooled model needs;
#: every later look reuses it, so per-batch work never scans the population)
_PROFILES: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
_PROFILES_KEPT = 8


def score_profile_of(strata: StrataLike) -> Any:
    """The pooled model's :class:`~bayes_eval.models._profile.ScoreProfile` of ``strata``,
    computed once per strata object (one O(N) pass) and then reused."""
    stored = getattr(strata, "score_profile", None)
    if isinstance(stored, ScoreProfile):  # e.g. the profile stored in an audit directory
        return stored
    key = id(strata)
    hit = _PROFILES.get(key)
    if hit is not None and hit[0] is strata:
        _PROFILES.move_to_end(key)
        return hit[1]
    prof = profile_of_strata(strata)
    _PROFILES[key] = (strata, prof)
    while len(_PROFILES) > _PROFILES_KEPT:
        _PROFILES.popitem(last=False)
    return prof


def score_reading(strata: StrataLike) -> str:
    """How the pooled model reads the scores of ``strata`` (its profile's ``kind`` in the words
    of :data:`SCORE_READINGS`), as ``init``, ``status`` and the report say it."""
    kind = score_profile_of(strata).kind
    return SCORE_READINGS.get(kind, kind)
