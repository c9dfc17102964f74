"""Shared pieces of :mod:`bayes_eval.recall`: Eq. (1)/(2) kernels, validators, result classes.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``). The kernels are
numpy in, numpy out; the result classes are frozen dataclasses holding an ``xarray.DataTree``
with ArviZ group names.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from .._draws import DrawSummaries, eti
from .._validation import _short, check_level, check_nonnegative_int, check_option
from ..priors import NAMED_PRIORS
from ._capture import RESOLVED_CELL, capture_draws, delta_grid

__all__ = [
    "ABOVE_ONE_FLAG",
    "PairRecall",
    "RecallAboveOneWarning",
    "RecallFromTotal",
    "eq1_recall",
    "eq2_joint_precision",
    "pair_quantities",
]

#: fraction of draws above 1 of a plug-in recall from which it is flagged
ABOVE_ONE_FLAG = 0.05

#: fraction of incoherent (projected) precision draws from which a result is flagged: in a
#: correctly specified pair most draws can be projected when a cell is small (up to 0.95 of them
#: with r = 0.9, 0.7 and 50 labels per set, 200 simulated universes), so only near-total conflict
#: is flagged
INCOHERENT_FLAG = 0.99

#: quantities of the capture-recapture layer that are also evaluated over a delta_1 range
DELTA_QUANTITIES = ("recall_1", "recall_2", "total_positives")


class RecallAboveOneWarning(UserWarning):
    """A plug-in recall puts at least :data:`ABOVE_ONE_FLAG` of its draws above 1, or at least
    :data:`INCOHERENT_FLAG` of the precision draws were incoherent (and projected)."""


# ---------------------------------------------------------------------------------------- kernels
def eq1_recall(
    p_joint: ArrayLike, p_other: ArrayLike, size_joint: ArrayLike, size_other: ArrayLike
) -> np.ndarray:
    """Eq. (1): recall of one classifier from the joint and the *other* classifier's precision.

    .. math:: r_1 = p_{12} |A_{12}| / (p_2 |A_2|)

    Works elementwise on arrays (one entry per draw).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(p_joint) * size_joint / (np.asarray(p_other) * size_other)


def eq2_joint_precision(
    p_1: ArrayLike,
    p_2: ArrayLike,
    size_1: ArrayLike,
    size_2: ArrayLike,
    size_12: ArrayLike,
    universe: ArrayLike,
) -> np.ndarray:
    """Joint precision implied by Assumptions 2 and 3 (the bracket of Eq. 2).

    .. math:: p_{12} \\approx 1 - (1 - p_1)(1 - p_2) |A_1| |A_2| / (|U| |A_{12}|)
    """
    p_1 = np.asarray(p_1, dtype=np.float64)
    p_2 = np.asarray(p_2, dtype=np.float64)
    return 1.0 - (1.0 - p_1) * (1.0 - p_2) * (size_1 * size_2) / (universe * size_12)


def pair_quantities(
    p_1: ArrayLike,
    p_2: ArrayLike,
    p_12: ArrayLike,
    size_1: int,
    size_2: int,
    size_12: int,
    universe: int | None = None,
) -> dict[str, np.ndarray]:
    """Every pair quantity from (draws of) the three precisions; numpy in, numpy out.

    ``p_12`` may be ``None`` when ``universe`` is given (Eq. 2 only). Returned keys, in order:
    ``recall_1``, ``recall_2`` (Eq. 1), ``recall_1_eq2``, ``recall_2_eq2`` (Eq. 2),
    ``total_positives`` (:math:`p_1 |A_1| / r_1`, from Eq. 1, or from Eq. 2 when ``p_12`` is None),
    ``total_positives_eq2``, ``precision_1``, ``precision_2``, ``precision_12`` and
    ``precision_12_eq2`` (the joint precision implied by Eq. 2); Eq. 2 keys only with ``universe``.
    """
    p_1 = np.asarray(p_1, dtype=np.float64)
    p_2 = np.asarray(p_2, dtype=np.float64)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        if p_12 is not None:
            p_12 = np.asarray(p_12, dtype=np.float64)
            out["recall_1"] = eq1_recall(p_12, p_2, size_12, size_2)
            out["recall_2"] = eq1_recall(p_12, p_1, size_12, size_1)
        if universe is not None:
            p12e = eq2_joint_precision(p_1, p_2, size_1, size_2, size_12, universe)
            out["recall_1_eq2"] = eq1_recall(p12e, p_2, size_12, size_2)
            out["recall_2_eq2"] = eq1_recall(p12e, p_1, size_12, size_1)
        if p_12 is not None:
            out["total_positives"] = p_1 * size_1 / out["recall_1"]
            if universe is not None:
                out["total_positives_eq2"] = p_1 * size_1 / out["recall_1_eq2"]
        else:
            out["total_positives"] = p_1 * size_1 / out["recall_1_eq2"]
        out["precision_1"] = p_1
        out["precision_2"] = p_2
        if p_12 is not None:
            out["precision_12"] = p_12
        if universe is not None:
            out["precision_12_eq2"] = p12e
    return out


def _delta_1(pos_12: np.ndarray, pos_1: np.ndarray, pos_2: np.ndarray, total: np.ndarray):
    """:math:`\\delta_1 = |T \\cap A_{12}| |T| / (|T \\cap A_1| |T \\cap A_2|)` (Assumption 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return pos_12 * total / (pos_1 * pos_2)


# ------------------------------------------------------------------------------------- validators
def _count(value: Any, name: str) -> int:
    return check_nonnegative_int(value, name)


def _check_sizes(size_1: Any, size_2: Any, size_12: Any) -> tuple[int, int, int]:
    s1, s2, s12 = _count(size_1, "size_1"), _count(size_2, "size_2"), _count(size_12, "size_12")
    if s12 > min(s1, s2):
        raise ValueError(
            f"size_12={s12} exceeds min(size_1, size_2)={min(s1, s2)}; A12 = A1 ∩ A2 cannot be "
            "larger than either set"
        )
    if s12 == 0:
        raise ValueError(
            "size_12=0: the classifiers flag no item in common, so Eq. (1) gives recall 0 and an "
            "infinite total; allowed: size_12 >= 1"
        )
    return s1, s2, s12


def _check_universe(universe: Any, s1: int, s2: int, s12: int) -> int | None:
    if universe is None:
        return None
    u = _count(universe, "universe")
    union = s1 + s2 - s12
    if u < union:
        raise ValueError(
            f"universe={u} is smaller than |A1 ∪ A2| = size_1 + size_2 - size_12 = {union}; "
            "allowed: an integer >= that"
        )
    return u


def _check_labels(value: Any, name: str, size: int) -> tuple[int, int]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise TypeError(
            f"{name}={_short(value)}; allowed: a pair (positives, labelled) of non-negative "
            "integers from a uniform sample of the set"
        )
    h = _count(value[0], f"{name} positives")
    n = _count(value[1], f"{name} labelled")
    if n == 0:
        raise ValueError(f"{name}={tuple(value)!r} has no labelled item; allowed: labelled >= 1")
    if h > n:
        raise ValueError(
            f"{name}={tuple(value)!r}: positives {h} exceed labelled {n}; allowed: 0 <= positives "
            "<= labelled"
        )
    if n > size:
        raise ValueError(
            f"{name}={tuple(value)!r}: labelled {n} exceeds the set size {size}; a uniform sample "
            "without replacement cannot be larger than its set"
        )
    return h, n


def _check_precision(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}={_short(value)} must be a real number in (0, 1]")
    v = float(value)
    if not (0.0 < v <= 1.0):
        raise ValueError(f"{name}={v!r} is outside (0, 1]; allowed: a known precision in (0, 1]")
    return v


def _check_delta(value: Any) -> tuple[float, float]:
    """``delta_1``: a positive number or a range ``(low, high)`` with ``0 < low <= high``."""
    allowed = (
        "allowed: a positive number (1 = Assumption 1) or a range (low, high), 0 < low <= high"
    )
    if isinstance(value, tuple | list):
        if len(value) != 2:
            raise ValueError(f"delta_1={_short(value)}; {allowed}")
        pair = value
    else:
        pair = (value, value)
    out = []
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"delta_1={_short(value)}; {allowed}")
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"delta_1={_short(value)}; {allowed}")
        out.append(float(v))
    if out[0] > out[1]:
        raise ValueError(f"delta_1={_short(value)} has low > high; {allowed}")
    return out[0], out[1]


def _check_capture_prior(value: Any) -> float:
    """``capture_prior``: "jeffreys" (alpha 1/2), "uniform" (alpha 1) or a positive number."""
    allowed = "allowed: 'jeffreys' (1/2), 'uniform' (1) or a positive Dirichlet concentration"
    if isinstance(value, str):
        if value not in NAMED_PRIORS:
            raise ValueError(f"capture_prior={value!r} is not allowed; {allowed}")
        return NAMED_PRIORS[value][0]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"capture_prior={_short(value)}; {allowed}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"capture_prior={value!r}; {allowed}")
    return float(value)


def capture_block(
    x12: np.ndarray,
    x1: np.ndarray,
    x2: np.ndarray,
    *,
    alpha: float,
    delta: tuple[float, float],
    gen: np.random.Generator,
    x0_low: Any = 0.0,
    x0_high: Any = np.inf,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray | None, float, np.ndarray]:
    """The capture-recapture quantities of a pair, at ``delta`` and over its grid.

    With a fixed :math:`\\delta_1` every draw uses it; with a range, each draw takes
    :math:`\\log \\delta_1 \\sim \\mathrm{Uniform}(\\log \\delta_{lo}, \\log \\delta_{hi})` (the
    main quantities then carry the dependence uncertainty as a prior, restricted to the values
    the captures allow: :math:`r_i \\le 1`, :math:`P_0 \\ge 0`) and the grid of
    :func:`delta_grid` is evaluated separately for the worst-case envelope. Returns the main
    values (``recall_1``, ``recall_2``, ``total_positives``, ``missed``, ``capture_1``,
    ``capture_2`` and, for a range, ``delta_1``), the per-grid values (``(draws, grid)``), the
    grid (None for a fixed value), the fraction of Dirichlet draws inside the support and the
    index of the cell-count draw each main draw used (see
    :func:`~bayes_eval.recall._capture.capture_draws`; reorder the labelling-stage quantities
    by it).
    """
    lo, hi = delta
    draws = np.shape(x12)[0]
    d = np.full(draws, lo) if lo == hi else np.exp(gen.uniform(np.log(lo), np.log(hi), draws))
    main, frac = capture_draws(
        x12,
        x1,
        x2,
        alpha=alpha,
        delta=d,
        gen=gen,
        x0_low=x0_low,
        x0_high=x0_high,
        redraw_delta=lo != hi,
    )
    source = main.pop("source")
    d = main.pop("delta_1")
    if lo != hi:
        main["delta_1_assumed"] = d
    if lo == hi:
        return main, {}, None, frac, source
    grid = delta_grid(lo, hi)
    col = (slice(None), None)
    by, fr = capture_draws(
        np.asarray(x12)[col],
        np.asarray(x1)[col],
        np.asarray(x2)[col],
        alpha=alpha,
        delta=grid[None, :],
        gen=gen,
        x0_low=np.asarray(x0_low)[col] if np.ndim(x0_low) else x0_low,
        x0_high=np.asarray(x0_high)[col] if np.ndim(x0_high) else x0_high,
    )
    by.pop("source")
    return main, {q: by[q] for q in DELTA_QUANTITIES}, grid, min(frac, fr), source


def _above_one(draws: np.ndarray) -> float:
    return float(np.mean(draws > 1.0))


# ------------------------------------------------------------------------------------- results
def _recall_names(quantities: Sequence[str]) -> tuple[str, ...]:
    return tuple(q for q in quantities if q.startswith("recall"))


class _RecallResult(DrawSummaries):
    """Shared behaviour: draws above 1 are counted, shown and flagged."""

    __slots__ = ()

    @property
    def n_draws(self) -> int:
        """Number of Monte Carlo draws."""
        post = self.datatree["posterior"]
        return int(post.sizes["chain"] * post.sizes["draw"])

    @property
    def above_one(self) -> dict[str, float]:
        """Fraction of posterior draws above 1 of every recall quantity (kept, not clipped).

        The capture-recapture recalls are coherent by construction (always 0); the plug-in
        ``*_eq1`` and ``*_eq2`` recalls of the paper's formulas can exceed 1.
        """
        return {q: _above_one(self.draws(q)) for q in _recall_names(self.quantities)}

    @property
    def incoherent(self) -> float:
        """Fraction of precision draws that were incoherent (cell counts outside their sizes, or
        more positives in :math:`A_{12}` than in :math:`A_1` or :math:`A_2`) and were projected
        onto the coherent cells (:func:`~bayes_eval.recall.pairs.coherent_precisions`); for
        :func:`~bayes_eval.recall.pairs.recall_from_total`, draws with :math:`y_{new} > |T|`."""
        return float(self.datatree.attrs.get("incoherent_fraction", 0.0))

    @property
    def cell_resolution(self) -> float:
        """Posterior mean / sd of the smaller single-caught cell (:math:`|T \\cap A_1
        \\setminus A_2|` or :math:`|T \\cap A_2 \\setminus A_1|`); NaN if not recorded.

        Below :data:`~bayes_eval.recall._capture.RESOLVED_CELL` (2) the labels do not resolve
        that cell: many draws put it at 0 (the recall near 1), so the interval reaches up to
        about 1 and is wide (its coverage holds, ``benchmarks/bench_pair_recall.py``); labels
        of the cells themselves (:func:`~bayes_eval.recall.flags.pair_recall_from_flags`) or
        more labels of the sets narrow it.
        """
        return float(self.datatree.attrs.get("cell_resolution", np.nan))

    @property
    def flagged(self) -> tuple[str, ...]:
        """Recall quantities with at least :data:`ABOVE_ONE_FLAG` of their draws above 1."""
        return tuple(q for q, f in self.above_one.items() if f >= ABOVE_ONE_FLAG)

    def summary(self, level: float = 0.95, prob: float | None = None) -> pd.DataFrame:
        """:meth:`DrawSummaries.summary` plus ``frac_above_1`` (NaN for non-recall rows)."""
        frame = DrawSummaries.summary(self, level=level, prob=prob)
        above = self.above_one
        frame["frac_above_1"] = [above.get(q, np.nan) for q in frame.index]
        return frame

    def _warn_if_flagged(self) -> None:
        above = self.above_one
        for q in (q for q, f in above.items() if f >= ABOVE_ONE_FLAG):
            warnings.warn(
                f"{q} exceeds 1 in {above[q]:.1%} of the posterior draws (kept, not clipped): "
                "the conditional-independence or sparsity assumptions, or the precision "
                "estimates, are in doubt",
                RecallAboveOneWarning,
                stacklevel=3,
            )
        if self.incoherent >= INCOHERENT_FLAG:
            warnings.warn(
                f"{self.incoherent:.1%} of the precision draws were incoherent (more on-topic "
                "items in A12 than in A1 or A2, or a cell count outside its size) and were "
                "projected onto the coherent cells: the labels and the set sizes, or the "
                "assumptions, are in doubt",
                RecallAboveOneWarning,
                stacklevel=3,
            )

    def _repr_parts(self, names: Sequence[str]) -> str:
        parts = []
        above = self.above_one
        for q in names:
            x = self.draws(q)
            lo, hi = eti(x, 0.95)
            extra = f", {above[q]:.1%} of draws > 1" if above.get(q, 0.0) > 0 else ""
            flag = " FLAGGED" if q in self.flagged else ""
            parts.append(f"{q}={x.mean():.3f} [95% {lo:.3f}, {hi:.3f}{extra}]{flag}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class PairRecall(_RecallResult):
    """Posterior of the recalls of a classifier pair (Bommannavar et al. Eq. 1 and Eq. 2).

    Quantities
    ----------
    ``recall_1``, ``recall_2``, ``total_positives``
        The *realised* recalls :math:`|T \\cap A_i| / |T|` and topic size :math:`|T|` from the
        capture-recapture layer (:mod:`bayes_eval.recall._capture`): labelling noise and capture
        noise, every draw coherent (in :math:`[0, 1]`). ``missed`` is the number of on-topic
        items caught by neither, ``capture_1``, ``capture_2`` the capture probabilities
        :math:`r_i = P[A_i | T]`, ``delta_1_assumed`` the :math:`\\delta_1` draws (range only).
    ``recall_1_eq1``, ``recall_2_eq1``, ``total_positives_eq1``
        The paper's plug-in Eq. (1), draw by draw (Lincoln-Petersen ratios; no capture noise).
    ``recall_1_eq2``, ``recall_2_eq2``, ``total_positives_eq2``, ``precision_12_eq2``
        Eq. (2) (with ``universe``), plug-in.
    ``precision_1``, ``precision_2``, ``precision_12``
        The (projected, coherent) precision draws used.

    Attributes
    ----------
    datatree : xarray.DataTree
        ArviZ groups. ``posterior``: every quantity over ``(chain, draw)``, and with a
        :math:`\\delta_1` range ``<q>_by_delta`` over ``(chain, draw, delta_1)``.
        ``observed_data``: labels and positives per sample (``sample`` = A1, A2, A12) for
        :func:`pair_recall`, or per cell (``cell`` = A12, A1_only, A2_only, neither) for
        :func:`pair_recall_from_flags`. ``constant_data``: set or cell sizes, known precisions,
        priors, universe size, :math:`\\delta_1` range.
    names : tuple of str
        The quantities available (see :attr:`quantities`).
    prior : str
        Beta prior of the precisions.
    sizes : tuple of int
        ``(|A1|, |A2|, |A12|)``.
    universe : int or None
        ``|U|`` (Eq. 2 is computed only when given).
    n_labels : int
        Labels used.
    delta_1 : (float, float)
        The :math:`\\delta_1` range assumed (equal ends for a fixed value).
    capture_prior : float
        Dirichlet concentration of the capture layer.

    Notes
    -----
    ``above_one`` gives the fraction of draws above 1 of every recall quantity (the plug-in ones
    can exceed 1); such draws are kept and shown by ``summary`` (column ``frac_above_1``) and
    ``repr``; ``flagged`` lists recalls with at least :data:`ABOVE_ONE_FLAG` of their draws above
    1; ``incoherent`` is the fraction of precision draws that were incoherent and projected.
    """

    datatree: xr.DataTree
    names: tuple[str, ...]
    prior: str
    sizes: tuple[int, int, int]
    universe: int | None
    n_labels: int
    delta_1: tuple[float, float] = (1.0, 1.0)
    capture_prior: float = 0.5

    @property
    def quantities(self) -> tuple[str, ...]:  # type: ignore[override]
        """Names accepted by ``mean``, ``lower_bound``, ``interval``, ``summary``..."""
        return self.names

    def _by_delta(self, quantity: str) -> np.ndarray:
        check_option(quantity, "quantity", DELTA_QUANTITIES)
        name = f"{quantity}_by_delta"
        post = self.datatree["posterior"]
        if name not in post:
            if quantity not in self.names:
                raise ValueError(f"quantity={quantity!r} is not in this result (no joint sample)")
            return self.draws(quantity)[:, None]
        return np.asarray(post[name].values).reshape(-1, post.sizes["delta_1"])

    def delta_values(self) -> np.ndarray:
        """The :math:`\\delta_1` grid of the sensitivity analysis (one value if fixed)."""
        post = self.datatree["posterior"]
        if "delta_1" in post.coords:
            return np.asarray(post["delta_1"].values, dtype=np.float64)
        return np.array([self.delta_1[0]])

    def sensitivity(
        self, quantity: str = "recall_1", level: float = 0.95, prob: float = 0.9
    ) -> pd.DataFrame:
        """Posterior mean, one-sided lower bound and equal-tailed interval at every
        :math:`\\delta_1` of the grid (rows), holding the labels fixed."""
        level = check_level(level, "level")
        prob = check_level(prob, "prob")
        x = self._by_delta(quantity)
        q = np.quantile(x, [1 - level, (1 - prob) / 2, (1 + prob) / 2], axis=0)
        frame = pd.DataFrame(
            {
                "mean": x.mean(axis=0),
                f"lower_{level:g}": q[0],
                f"eti{prob:g}_lo": q[1],
                f"eti{prob:g}_hi": q[2],
            },
            index=pd.Index(self.delta_values(), name="delta_1"),
        )
        return frame

    def lower_bound_over_delta(self, quantity: str = "recall_1", level: float = 0.95) -> float:
        """Smallest one-sided ``level`` lower bound over the :math:`\\delta_1` range."""
        return float(self.sensitivity(quantity, level=level)[f"lower_{level:g}"].min())

    def interval_over_delta(
        self, quantity: str = "recall_1", prob: float = 0.9
    ) -> tuple[float, float]:
        """Union of the equal-tailed ``prob`` intervals over the :math:`\\delta_1` range."""
        frame = self.sensitivity(quantity, prob=prob)
        return float(frame[f"eti{prob:g}_lo"].min()), float(frame[f"eti{prob:g}_hi"].max())

    def __repr__(self) -> str:
        shown = [
            q
            for q in ("recall_1", "recall_2", "total_positives", "recall_1_eq2", "recall_2_eq2")
            if q in self.names
        ]

        u = "" if self.universe is None else f", |U|={self.universe}"
        lo, hi = self.delta_1
        d = f"delta_1={lo:g}" if lo == hi else f"delta_1 in [{lo:g}, {hi:g}]"
        if self.incoherent > 0:
            d += f", {self.incoherent:.1%} of precision draws incoherent (projected)"
        if self.cell_resolution < RESOLVED_CELL:
            d += (
                f", smallest cell unresolved (mean/sd {self.cell_resolution:.2g}: the labels "
                "cannot tell it from 0)"
            )
        return (
            f"PairRecall({self._repr_parts(dict.fromkeys(shown))}; |A1|={self.sizes[0]}, "
            f"|A2|={self.sizes[1]}, |A12|={self.sizes[2]}{u}, {self.n_labels} labels, "
            f"prior={self.prior}, {d}, {self.n_draws} draws)"
        )


@dataclass(frozen=True, slots=True)
class RecallFromTotal(_RecallResult):
    """Recall of another classifier from its precision and a pair's :math:`|T|` draws.

    Quantities ``recall`` (:math:`|T \\cap A_{new}| / |T|`, draw by draw), ``precision`` and
    ``total_positives`` (the :math:`|T|` draws used).
    """

    datatree: xr.DataTree
    prior: str
    size: int
    n_labels: int

    @property
    def quantities(self) -> tuple[str, ...]:  # type: ignore[override]
        """Names accepted by ``mean``, ``lower_bound``, ``interval``, ``summary``..."""
        return ("recall", "precision", "total_positives")

    def __repr__(self) -> str:
        return (
            f"RecallFromTotal({self._repr_parts(['recall', 'total_positives'])}; "
            f"|A|={self.size}, {self.n_labels} labels, prior={self.prior}, {self.n_draws} draws)"
        )


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _posterior_dataset(
    values: Mapping[str, np.ndarray],
    draws: int,
    by_delta: Mapping[str, np.ndarray] | None = None,
    grid: np.ndarray | None = None,
) -> xr.Dataset:
    cd = ("chain", "draw")
    data = {
        k: (cd, np.broadcast_to(np.asarray(v, dtype=np.float64), (draws,)).reshape(1, draws))
        for k, v in values.items()
    }
    coords: dict[str, Any] = {"chain": [0], "draw": np.arange(draws)}
    if by_delta:
        for k, v in by_delta.items():
            data[f"{k}_by_delta"] = (("chain", "draw", "delta_1"), v.reshape(1, draws, -1))
        coords["delta_1"] = grid
    return xr.Dataset(data, coords=coords)


def _pack_pair(
    values,
    observed,
    constant,
    draws,
    desc,
    sizes,
    u,
    n_labels,
    attrs,
    *,
    by_delta=None,
    grid=None,
    delta=(1.0, 1.0),
    alpha=0.5,
) -> PairRecall:
    constant = constant.assign(
        delta_1_low=((), delta[0]), delta_1_high=((), delta[1]), capture_prior=((), alpha)
    )
    tree = xr.DataTree.from_dict(
        {
            "posterior": _posterior_dataset(values, draws, by_delta, grid),
            "observed_data": observed,
            "constant_data": constant,
        }
    )
    res = PairRecall(
        datatree=tree,
        names=tuple(values),
        prior=desc,
        sizes=sizes,
        universe=u,
        n_labels=n_labels,
        delta_1=delta,
        capture_prior=alpha,
    )
    tree.attrs.update(
        {
            "method": "pair_recall (Bommannavar, Kolcz & Rajaraman 2014, Eq. 1 and Eq. 2, with a "
            "capture-recapture layer)",
            "prior": desc,
            "capture_prior": alpha,
            "delta_1": f"{delta[0]:g}..{delta[1]:g}",
            "created_at": _now(),
            **attrs,
            **{f"above_one_{q}": f for q, f in res.above_one.items()},
        }
    )
    return res
