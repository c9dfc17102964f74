"""Recall of rare topics from a pair of conditionally independent classifiers.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``) turn recall into a
capture-recapture problem. Two classifiers :math:`C_1, C_2` flag the sets :math:`A_1, A_2` of a
universe :math:`U` (:math:`A_{12} = A_1 \\cap A_2`); :math:`T` is the set of on-topic documents and
:math:`p_1, p_2, p_{12}` the precisions of :math:`A_1, A_2, A_{12}`. If the classifiers fire
independently on on-topic documents (Assumption 1,
:math:`\\delta_1 = P[A_{12}|T] / (P[A_1|T] P[A_2|T]) = 1`), then (their Eq. 1)

.. math::

    r_1 = \\frac{p_{12} |A_{12}|}{p_2 |A_2|}, \\qquad r_2 = \\frac{p_{12} |A_{12}|}{p_1 |A_1|},

    \\hat n = |T| = \\frac{p_1 |A_1|}{r_1} = \\frac{p_1 |A_1|\\, p_2 |A_2|}{p_{12} |A_{12}|},

and, if also off-topic independence (Assumption 2) and sparsity (Assumption 3) hold, the joint
precision need not be measured (their Eq. 2):

.. math::

    p_{12} \\approx 1 - \\frac{(1 - p_1)(1 - p_2) |A_1| |A_2|}{|U| |A_{12}|}, \\qquad
    r_1 \\approx \\frac{|A_{12}|}{p_2 |A_2|}
    \\left[1 - \\frac{(1 - p_1)(1 - p_2) |A_1| |A_2|}{|U| |A_{12}|}\\right].

Only precision labels are needed, and precision is cheap to label even for rare topics. Here the
precisions get Beta posteriors and every quantity is computed draw by draw, so that bounds and
intervals carry the labelling uncertainty. Two input forms:

* :func:`pair_recall` takes the counts ``|A_1|, |A_2|, |A_12|`` and the labels of uniform samples
  of :math:`A_1`, :math:`A_2`, :math:`A_{12}` as ``(positives, labelled)``. The three precisions
  get independent ``Beta(a + h, b + n - h)`` posteriors (the superpopulation view; the precisions
  are not forced to be coherent, exactly as in the paper's plug-in estimate).
* :func:`pair_recall_from_flags` takes both classifiers' flags over the universe and the labelled
  items. It partitions the universe into the disjoint cells :math:`A_{12}`,
  :math:`A_1 \\setminus A_2`, :math:`A_2 \\setminus A_1` and "neither", gives each cell its own
  positive rate (Beta posterior), and draws each cell's unlabelled remainder (finite population).
  The three precisions are then coherent by construction, and labels from a uniform sample of the
  universe (or of :math:`T`) also estimate :math:`\\delta_1`.

Draws of a recall above 1 (a sign that the assumptions or the precision estimates are off) are
kept, never clipped: their fraction is reported (:attr:`PairRecall.above_one`, ``summary``,
``repr``) and, at :data:`ABOVE_ONE_FLAG` or more, flagged with a :class:`RecallAboveOneWarning`.

With three or more classifiers, :func:`pairwise_totals` estimates :math:`\\hat n` from every pair
with shared draws and tables the disagreements beyond posterior uncertainty: pairs that violate
Assumption 1 give different totals (Eq. 1 estimates :math:`\\delta_1 r_1`, so
:math:`\\hat n = |T| / \\delta_1`).

References
----------
Bommannavar, Kolcz & Rajaraman, "Recall Estimation for Rare Topic Retrieval from Large Corpuses",
``../shared/seeds/004_bbc0a8a725a042a8.txt`` (Eq. 1, Eq. 2, Assumptions 1-3, section 6 for
:math:`\\hat n` and :math:`\\hat r_{new}`, Tables 3-5).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ._draws import DrawSummaries, eti
from ._sampling import draw_beta, draw_remainder
from ._validation import (
    RNGLike,
    _short,
    as_generator,
    check_level,
    check_nonnegative_int,
    check_option,
    check_positive_int,
)
from .labels import as_label_values
from .priors import resolve_prior

__all__ = [
    "ABOVE_ONE_FLAG",
    "PairRecall",
    "PairwiseTotals",
    "RecallAboveOneWarning",
    "RecallFromTotal",
    "compare_totals",
    "eq1_recall",
    "eq2_joint_precision",
    "pair_quantities",
    "pair_recall",
    "pair_recall_from_flags",
    "pairwise_totals",
    "recall_from_total",
]

#: fraction of draws above 1 from which a recall is flagged (its 95% upper bound exceeds 1)
ABOVE_ONE_FLAG = 0.05

#: selection kinds accepted by :func:`pair_recall_from_flags`
SELECTIONS = ("flags", "topic")

_SAMPLES = ("A1", "A2", "A12")


class RecallAboveOneWarning(UserWarning):
    """A recall posterior puts at least :data:`ABOVE_ONE_FLAG` of its draws above 1."""


# ---------------------------------------------------------------------------------------- kernels
def eq1_recall(p_joint: Any, p_other: Any, size_joint: Any, size_other: Any) -> np.ndarray:
    """Eq. (1): recall of one classifier from the joint and the *other* classifier's precision.

    .. math:: r_1 = p_{12} |A_{12}| / (p_2 |A_2|)

    Works elementwise on arrays (one entry per draw).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(p_joint) * size_joint / (np.asarray(p_other) * size_other)


def eq2_joint_precision(
    p_1: Any, p_2: Any, size_1: Any, size_2: Any, size_12: Any, universe: Any
) -> np.ndarray:
    """Joint precision implied by Assumptions 2 and 3 (the bracket of Eq. 2).

    .. math:: p_{12} \\approx 1 - (1 - p_1)(1 - p_2) |A_1| |A_2| / (|U| |A_{12}|)
    """
    p_1 = np.asarray(p_1, dtype=np.float64)
    p_2 = np.asarray(p_2, dtype=np.float64)
    return 1.0 - (1.0 - p_1) * (1.0 - p_2) * (size_1 * size_2) / (universe * size_12)


def pair_quantities(
    p_1: Any,
    p_2: Any,
    p_12: Any,
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
        """Fraction of posterior draws above 1 of every recall quantity (kept, not clipped)."""
        return {q: _above_one(self.draws(q)) for q in _recall_names(self.quantities)}

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

    Attributes
    ----------
    datatree : xarray.DataTree
        ArviZ groups. ``posterior``: every quantity over ``(chain, draw)``. ``observed_data``:
        labels and positives per sample (``sample`` = A1, A2, A12) for :func:`pair_recall`, or per
        cell (``cell`` = A12, A1_only, A2_only, neither) for :func:`pair_recall_from_flags`.
        ``constant_data``: set or cell sizes, known precisions, prior, universe size.
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

    Notes
    -----
    ``above_one`` gives the fraction of draws above 1 of every recall quantity; such draws are kept
    (a recall above 1 is evidence against the assumptions, and clipping would hide it) and shown by
    ``summary`` (column ``frac_above_1``) and ``repr``; ``flagged`` lists recalls with at least
    :data:`ABOVE_ONE_FLAG` of their draws above 1.
    """

    datatree: xr.DataTree
    names: tuple[str, ...]
    prior: str
    sizes: tuple[int, int, int]
    universe: int | None
    n_labels: int

    @property
    def quantities(self) -> tuple[str, ...]:  # type: ignore[override]
        """Names accepted by ``mean``, ``lower_bound``, ``interval``, ``summary``..."""
        return self.names

    def __repr__(self) -> str:
        shown = [q for q in self.names if q.startswith(("recall", "total_positives"))]
        u = "" if self.universe is None else f", |U|={self.universe}"
        return (
            f"PairRecall({self._repr_parts(shown)}; |A1|={self.sizes[0]}, |A2|={self.sizes[1]}, "
            f"|A12|={self.sizes[2]}{u}, {self.n_labels} labels, prior={self.prior}, "
            f"{self.n_draws} draws)"
        )


@dataclass(frozen=True, slots=True)
class RecallFromTotal(_RecallResult):
    """Recall of another classifier from its precision and a pair's :math:`\\hat n`.

    Quantities ``recall`` (:math:`\\hat r_{new} = p_{new} |A_{new}| / \\hat n`), ``precision`` and
    ``total_positives`` (the :math:`\\hat n` draws used).
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


def _posterior_dataset(values: Mapping[str, np.ndarray], draws: int) -> xr.Dataset:
    cd = ("chain", "draw")
    data = {
        k: (cd, np.broadcast_to(np.asarray(v, dtype=np.float64), (draws,)).reshape(1, draws))
        for k, v in values.items()
    }
    return xr.Dataset(data, coords={"chain": [0], "draw": np.arange(draws)})


# ----------------------------------------------------------------------------------- from counts
def pair_recall(
    size_1: int,
    size_2: int,
    size_12: int,
    labels_1: tuple[int, int] | None = None,
    labels_2: tuple[int, int] | None = None,
    labels_12: tuple[int, int] | None = None,
    universe: int | None = None,
    prior: Any = "jeffreys",
    draws: int = 40_000,
    rng: RNGLike = None,
    *,
    precision_1: float | None = None,
    precision_2: float | None = None,
    precision_12: float | None = None,
) -> PairRecall:
    """Posterior of both classifiers' recall from set sizes and precision labels.

    Each precision :math:`p_s` (:math:`s \\in \\{1, 2, 12\\}`) comes either from the labels of a
    uniform sample of its set, ``labels_s = (h_s, n_s)`` (positives, labelled), giving
    :math:`p_s \\sim \\mathrm{Beta}(a + h_s, b + n_s - h_s)` independently, or from a known number
    ``precision_s``. Then, draw by draw,

    .. math::

        r_1 = \\frac{p_{12}|A_{12}|}{p_2|A_2|},\\quad r_2 = \\frac{p_{12}|A_{12}|}{p_1|A_1|},\\quad
        \\hat n = \\frac{p_1|A_1|}{r_1}

    (Eq. 1) and, with ``universe``, Eq. (2), where :math:`p_{12}` is replaced by
    :math:`1 - (1-p_1)(1-p_2)|A_1||A_2| / (|U||A_{12}|)`. Without a joint precision (neither
    ``labels_12`` nor ``precision_12``) ``universe`` is required and only Eq. (2) quantities exist.

    Parameters
    ----------
    size_1, size_2, size_12 : int
        :math:`|A_1|, |A_2|, |A_{12}|`: items flagged by classifier 1, 2 and both in the universe.
    labels_1, labels_2, labels_12 : (int, int), optional
        ``(positives, labelled)`` of a uniform sample of :math:`A_1`, :math:`A_2`, :math:`A_{12}`.
    universe : int, optional
        :math:`|U|`, at least :math:`|A_1 \\cup A_2|`; enables Eq. (2).
    prior : "jeffreys", "uniform" or (a, b)
        Beta prior of every estimated precision.
    draws : int
        Monte Carlo draws.
    rng : int, Generator or None
    precision_1, precision_2, precision_12 : float, optional
        Known precisions in (0, 1], instead of the corresponding ``labels_*``.

    Returns
    -------
    PairRecall
        Quantities ``recall_1``, ``recall_2`` (Eq. 1), ``recall_1_eq2``, ``recall_2_eq2`` (Eq. 2),
        ``total_positives``, ``total_positives_eq2``, ``precision_1``, ``precision_2``,
        ``precision_12``, ``precision_12_eq2`` (those that the inputs define). Draws above 1 are
        kept; a :class:`RecallAboveOneWarning` is issued for every flagged recall.

    Raises
    ------
    ValueError
        Negative sizes, ``size_12 > min(size_1, size_2)``, ``size_12 == 0``, positives above
        labelled, more labels than set items, ``universe < |A1 ∪ A2|``, both or neither of
        ``labels_s`` and ``precision_s`` (``s`` = 1, 2).

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. (1), Eq. (2)
    and section 6 (:math:`\\hat n`).

    Examples
    --------
    Table 3 of the paper, topic Apple, with the printed precisions taken as known:

    >>> import bayes_eval as be
    >>> res = be.pair_recall(676, 10217, 420, universe=800_000, precision_1=0.655,
    ...                      precision_2=0.247, precision_12=0.774, draws=10)
    >>> round(res.mean("recall_1"), 3), round(res.mean("recall_1_eq2"), 3)
    (0.129, 0.166)
    """
    s1, s2, s12 = _check_sizes(size_1, size_2, size_12)
    u = _check_universe(universe, s1, s2, s12)
    draws = check_positive_int(draws, "draws")
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    a, b = float(a_arr[0]), float(b_arr[0])
    specs = []
    for tag, size, labels, precision in (
        ("1", s1, labels_1, precision_1),
        ("2", s2, labels_2, precision_2),
        ("12", s12, labels_12, precision_12),
    ):
        if labels is not None and precision is not None:
            raise ValueError(
                f"labels_{tag} and precision_{tag} are both given; allowed: exactly one of them"
            )
        if labels is None and precision is None:
            if tag != "12":
                raise ValueError(
                    f"neither labels_{tag} nor precision_{tag} is given; allowed: exactly one"
                )
            if u is None:
                raise ValueError(
                    "neither labels_12 nor precision_12 is given and universe is None: Eq. (1) "
                    "needs the joint precision and Eq. (2) needs |U|; give one of them"
                )
            specs.append(None)
            continue
        if labels is not None:
            h, n = _check_labels(labels, f"labels_{tag}", size)
            specs.append(("labels", h, n))
        else:
            specs.append(("known", _check_precision(precision, f"precision_{tag}")))
    gen = as_generator(rng)

    est = [i for i, s in enumerate(specs) if s is not None and s[0] == "labels"]
    p = [None, None, None]
    if est:
        alpha = np.array([a + specs[i][1] for i in est])
        beta = np.array([b + specs[i][2] - specs[i][1] for i in est])
        theta = draw_beta(alpha, beta, draws, gen)
        for col, i in enumerate(est):
            p[i] = theta[:, col]
    for i, s in enumerate(specs):
        if s is not None and s[0] == "known":
            p[i] = np.full(draws, s[1])
    values = pair_quantities(p[0], p[1], p[2], s1, s2, s12, u)

    h_obs = [s[1] if s is not None and s[0] == "labels" else 0 for s in specs]
    n_obs = [s[2] if s is not None and s[0] == "labels" else 0 for s in specs]
    known = [s[1] if s is not None and s[0] == "known" else np.nan for s in specs]
    coords = {"sample": list(_SAMPLES)}
    observed = xr.Dataset(
        {
            "n": ("sample", np.array(n_obs, dtype=np.int64)),
            "h": ("sample", np.array(h_obs, dtype=np.int64)),
        },
        coords=coords,
    )
    constant = xr.Dataset(
        {
            "size": ("sample", np.array([s1, s2, s12], dtype=np.int64)),
            "known_precision": ("sample", np.array(known, dtype=np.float64)),
            "prior_a": ((), a),
            "prior_b": ((), b),
            "universe": ((), np.nan if u is None else float(u)),
        },
        coords=coords,
    )
    result = _pack_pair(
        values,
        observed,
        constant,
        draws,
        desc,
        (s1, s2, s12),
        u,
        int(sum(n_obs)),
        {"input": "counts", "view": "superpopulation"},
    )
    result._warn_if_flagged()
    return result


def _pack_pair(values, observed, constant, draws, desc, sizes, u, n_labels, attrs) -> PairRecall:
    tree = xr.DataTree.from_dict(
        {
            "posterior": _posterior_dataset(values, draws),
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
    )
    tree.attrs.update(
        {
            "method": "pair_recall (Bommannavar, Kolcz & Rajaraman 2014, Eq. 1 and Eq. 2)",
            "prior": desc,
            "created_at": _now(),
            **attrs,
            **{f"above_one_{q}": f for q, f in res.above_one.items()},
        }
    )
    return res


# ---------------------------------------------------------------------------- recall_from_total
def recall_from_total(
    size: int,
    labels: tuple[int, int] | None = None,
    *,
    precision: float | None = None,
    total: PairRecall,
    total_quantity: str = "total_positives",
    prior: Any = "jeffreys",
    rng: RNGLike = None,
) -> RecallFromTotal:
    """Recall of any other classifier from its size, its precision and a pair's :math:`\\hat n`.

    .. math:: \\hat r_{new} = \\frac{p_{new} |A_{new}|}{\\hat n}

    draw by draw, with :math:`p_{new} \\sim \\mathrm{Beta}(a + h, b + n - h)` from a uniform sample
    of :math:`A_{new}` (independent of the pair's labels) or a known ``precision``, and the
    :math:`\\hat n` draws of ``total`` (as many draws as ``total`` has).

    Parameters
    ----------
    size : int
        :math:`|A_{new}|`, items the classifier flags in the same universe.
    labels : (int, int), optional
        ``(positives, labelled)`` of a uniform sample of :math:`A_{new}`.
    precision : float, optional
        Known precision instead of ``labels``.
    total : PairRecall
        A pair's posterior; its ``total_quantity`` draws are used.
    total_quantity : str
        ``"total_positives"`` (default) or another total of ``total`` such as
        ``"total_positives_eq2"`` or ``"total_positives_sampled"``.

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 6.

    Examples
    --------
    >>> import bayes_eval as be
    >>> pair = be.pair_recall(1000, 2000, 300, labels_1=(180, 200), labels_2=(100, 200),
    ...                       labels_12=(190, 200), draws=4000, rng=0)
    >>> new = be.recall_from_total(1500, (150, 200), total=pair, rng=1)
    >>> 0.3 < new.mean("recall") < 0.5
    True
    """
    if not isinstance(total, PairRecall):
        raise TypeError(
            f"total has type {type(total).__name__}; allowed: a PairRecall from pair_recall or "
            "pair_recall_from_flags"
        )
    totals = tuple(q for q in total.quantities if q.startswith("total_positives"))
    check_option(total_quantity, "total_quantity", totals)
    s = _count(size, "size")
    if s == 0:
        raise ValueError("size=0: a classifier that flags nothing has recall 0; allowed: >= 1")
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    if (labels is None) == (precision is None):
        raise ValueError("give exactly one of labels=(positives, labelled) and precision=")
    n_hat = total.draws(total_quantity)
    draws = n_hat.size
    if labels is not None:
        h, n = _check_labels(labels, "labels", s)
        gen = as_generator(rng)
        p = draw_beta(np.array([a_arr[0] + h]), np.array([b_arr[0] + n - h]), draws, gen)[:, 0]
    else:
        h, n = 0, 0
        p = np.full(draws, _check_precision(precision, "precision"))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = p * s / n_hat
    tree = xr.DataTree.from_dict(
        {
            "posterior": _posterior_dataset(
                {"recall": r, "precision": p, "total_positives": n_hat}, draws
            ),
            "observed_data": xr.Dataset({"n": ((), n), "h": ((), h)}),
            "constant_data": xr.Dataset(
                {
                    "size": ((), s),
                    "known_precision": ((), np.nan if precision is None else float(precision)),
                    "prior_a": ((), float(a_arr[0])),
                    "prior_b": ((), float(b_arr[0])),
                }
            ),
        }
    )
    res = RecallFromTotal(datatree=tree, prior=desc, size=s, n_labels=n)
    tree.attrs.update(
        {
            "method": "recall_from_total (Bommannavar et al. 2014, section 6)",
            "total_quantity": total_quantity,
            "prior": desc,
            "created_at": _now(),
            "above_one_recall": res.above_one["recall"],
        }
    )
    res._warn_if_flagged()
    return res


# ------------------------------------------------------------------------------ from raw flags
def _as_flags(values: Any, name: str, length: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D array of booleans")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise TypeError(
                f"{name} has dtype {arr.dtype} or values other than 0/1; allowed: "
                "booleans (or 0/1) over the universe"
            )
        arr = arr.astype(bool)
    if length is not None and arr.shape[0] != length:
        raise ValueError(
            f"{name} has length {arr.shape[0]}; allowed: length {length} (one flag per item of "
            "the universe, like the other flags)"
        )
    return arr


def _as_flag_matrix(flags: Any, name: str = "flags") -> np.ndarray:
    if isinstance(flags, np.ndarray) and flags.ndim == 2:
        cols = [flags[:, j] for j in range(flags.shape[1])]
    elif isinstance(flags, Sequence | np.ndarray):
        cols = list(flags)
    else:
        raise TypeError(
            f"{name} has type {type(flags).__name__}; allowed: a (items, classifiers) boolean "
            "array or a sequence of 1-D boolean arrays"
        )
    if not cols:
        raise ValueError(f"{name} holds no classifier")
    first = _as_flags(cols[0], f"{name}[0]")
    out = [first] + [
        _as_flags(c, f"{name}[{j}]", first.shape[0]) for j, c in enumerate(cols[1:], 1)
    ]
    return np.stack(out, axis=1)


def _labelled_positions(labelled: Any, n_items: int, ids: Any) -> np.ndarray:
    arr = np.asarray(labelled)
    if arr.ndim != 1:
        raise ValueError(f"labelled has shape {arr.shape}; allowed: a 1-D sequence")
    if ids is not None:
        index = pd.Index(np.asarray(ids))
        if index.size != n_items:
            raise ValueError(f"ids has length {index.size}; allowed: {n_items} (one per item)")
        if not index.is_unique:
            raise ValueError("ids contains duplicates; allowed: unique ids")
        pos = index.get_indexer(arr)
        if (pos < 0).any():
            bad = arr[int(np.flatnonzero(pos < 0)[0])]
            raise ValueError(f"labelled contains id {bad!r}, which is not in ids")
        return pos.astype(np.int64)
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(
            f"labelled has dtype {arr.dtype}; allowed: integer positions into the flags (or "
            "pass ids= to label by id)"
        )
    pos = arr.astype(np.int64)
    if pos.size and (pos.min() < 0 or pos.max() >= n_items):
        bad = pos[(pos < 0) | (pos >= n_items)][0]
        raise ValueError(f"labelled contains position {bad}; allowed: 0 .. {n_items - 1}")
    return pos


def _labelled_cells(flags, labelled, labels, ids, selection):
    """Validate the raw inputs; return (codes of all items, codes/values of label-blind labels,
    codes of topic-sample items)."""
    n_items, k = flags.shape
    pos = _labelled_positions(labelled, n_items, ids)
    values = as_label_values(labels, "labels")
    if values.shape[0] != pos.shape[0]:
        raise ValueError(
            f"labels has length {values.shape[0]} but labelled has {pos.shape[0]}; allowed: one "
            "label per labelled item"
        )
    if selection is None:
        sel = np.full(pos.shape[0], "flags", dtype=object)
    else:
        sel = np.asarray(selection, dtype=object)
        if sel.shape != pos.shape:
            raise ValueError(
                f"selection has shape {sel.shape}; allowed: one entry per labelled item "
                f"({pos.shape[0]})"
            )
        bad = ~np.isin(sel, SELECTIONS)
        if bad.any():
            raise ValueError(
                f"selection contains {sel[bad][0]!r}; allowed: " + ", ".join(map(repr, SELECTIONS))
            )
    uniq, counts = np.unique(pos, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            f"labelled contains item {uniq[counts > 1][0]} more than once; allowed: each item once "
            "(an item drawn by two samples is labelled once and counts once for its cell)"
        )
    topic = sel == "topic"
    if (values[topic] == 0).any():
        raise ValueError(
            "an item with selection='topic' is labelled 0; allowed: only on-topic items (label "
            "1) can come from a uniform sample of the on-topic set T"
        )
    weights = 1 << np.arange(k)
    codes = flags.astype(np.int64) @ weights
    blind = ~topic
    return codes, codes[pos[blind]], values[blind], codes[pos[topic]]


def _cell_positives(sizes, n, h, a, b, draws, gen, finite_population):
    theta = draw_beta(a + h, b + n - h, draws, gen)
    if finite_population:
        pos = draw_remainder(theta, sizes - n, gen)
        pos += h[None, :]
    else:
        pos = theta * sizes[None, :]
    return theta, pos


def pair_recall_from_flags(
    flags_1: Any,
    flags_2: Any,
    labelled: Any,
    labels: Any,
    *,
    ids: Any = None,
    selection: Any = None,
    prior: Any = "jeffreys",
    finite_population: bool = True,
    draws: int = 40_000,
    rng: RNGLike = None,
) -> PairRecall:
    """Pair recall from both classifiers' flags over the universe and labelled items.

    The universe is split into the disjoint cells :math:`A_{12}`, :math:`A_1 \\setminus A_2`,
    :math:`A_2 \\setminus A_1` and *neither*; each cell :math:`c` has its own positive rate
    :math:`q_c \\sim \\mathrm{Beta}(a + h_c, b + n_c - h_c)` from the labels that fall in it, and
    (``finite_population=True``) its on-topic count
    :math:`P_c = h_c + \\mathrm{Binomial}(N_c - n_c, q_c)`. Then :math:`|T \\cap A_1| = P_{12} +
    P_{1 \\setminus 2}`, the precisions are :math:`p_1 = |T \\cap A_1| / |A_1|`, ... and every
    quantity of :func:`pair_recall` follows draw by draw (Eq. 2 with :math:`|U|` = the number of
    flags). Because the cells are disjoint, the three precisions are coherent.

    Which labelled item counts for what
        Every item with ``selection="flags"`` (the default) counts once, for the cell of its flags,
        whichever sample drew it. This is valid whenever the items were chosen at random *given
        their flags*, without looking at the label: uniform samples of :math:`A_1`,
        :math:`A_2`, :math:`A_{12}`, of the universe, or any mixture of these (a uniform sample of
        :math:`A_1` is, within :math:`A_{12}`, a uniform sample of :math:`A_{12}`). Items chosen
        by score or by judgement must not be passed. An item drawn by two samples is labelled
        once and passed once (duplicates are refused).
        Items with ``selection="topic"`` come from a uniform sample of the on-topic set
        :math:`T` (e.g. the positives found by an earlier uniform sample of the universe, or a
        complete list of positives' random subset); they must be labelled 1, they are *not* used
        for any precision (they were chosen for being positive), and only their flag pattern is
        used, to estimate :math:`\\delta_1` (``delta_1_topic``).

    Extra quantities
        When label-blind labels fall in the *neither* cell (e.g. a uniform sample of the
        universe), :math:`|T|` is estimated directly: ``total_positives_sampled``,
        ``recall_1_sampled``, ``recall_2_sampled`` (no independence assumption) and
        ``delta_1`` :math:`= |T \\cap A_{12}| |T| / (|T \\cap A_1| |T \\cap A_2|)` (Assumption 1).
        With topic-sample items, ``delta_1_topic`` from the cell shares
        :math:`\\pi \\sim \\mathrm{Dirichlet}(m + a)` of those items: :math:`\\delta_1 = \\pi_{12} /
        ((\\pi_{12} + \\pi_{1 \\setminus 2})(\\pi_{12} + \\pi_{2 \\setminus 1}))`.

    What the finite-population quantities target
        With ``finite_population=True`` Eq. (1) targets the realised
        :math:`|T \\cap A_{12}| / |T \\cap A_2| = \\hat\\delta_1 r_1`, where
        :math:`\\hat\\delta_1` is the universe's realised dependence: even classifiers that are
        independent given the topic realise :math:`\\delta_1` only up to noise of order
        :math:`1/\\sqrt{|T|}`, which the posterior does not include (negligible for large
        :math:`|T|`, about 0.02 at :math:`|T| = 1000`).

    Parameters
    ----------
    flags_1, flags_2 : array of bool
        Flags of both classifiers over the universe (same length, :math:`|U|`).
    labelled : array
        Positions (0 .. |U|-1) of the labelled items, or their ids when ``ids`` is given.
    labels : array of 0/1 or bool
        Their labels (1 = on topic).
    ids : array, optional
        Ids of the universe's items, aligned with the flags.
    selection : array of str, optional
        Per labelled item, ``"flags"`` (default) or ``"topic"``; see above.
    prior : "jeffreys", "uniform" or (a, b)
        Beta prior of every cell's positive rate (the Dirichlet of ``delta_1_topic`` uses
        concentration ``a``).
    finite_population : bool
        Draw each cell's unlabelled remainder (quantities of the actual universe) or use
        :math:`N_c q_c` (superpopulation).
    draws : int
    rng : int, Generator or None

    Returns
    -------
    PairRecall
        ``observed_data`` holds labels and positives per cell and the topic-sample counts.

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. (1),
    Eq. (2), Assumption 1.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.recall_pairs import pair_recall_from_flags
    >>> rng = np.random.default_rng(0)
    >>> topic = rng.random(100_000) < 0.01
    >>> f1 = np.where(topic, rng.random(100_000) < 0.5, rng.random(100_000) < 0.002)
    >>> f2 = np.where(topic, rng.random(100_000) < 0.6, rng.random(100_000) < 0.004)
    >>> pick = np.concatenate([rng.choice(np.flatnonzero(f), 300, replace=False)
    ...                        for f in (f1, f2)])
    >>> pick = np.unique(pick)
    >>> res = pair_recall_from_flags(f1, f2, pick, topic[pick], draws=4000, rng=0)
    >>> abs(res.mean("recall_1") - 0.5) < 0.06
    True
    """
    f1 = _as_flags(flags_1, "flags_1")
    f2 = _as_flags(flags_2, "flags_2", f1.shape[0])
    if not isinstance(finite_population, bool | np.bool_):
        raise TypeError(f"finite_population={finite_population!r} must be True or False")
    draws = check_positive_int(draws, "draws")
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    a, b = float(a_arr[0]), float(b_arr[0])
    flags = np.stack([f1, f2], axis=1)
    codes, lab_codes, lab_values, topic_codes = _labelled_cells(
        flags, labelled, labels, ids, selection
    )
    # cell code: bit 0 = classifier 1, bit 1 = classifier 2 -> 0 neither, 1 A1 only, 2 A2 only,
    # 3 both. Reported order: A12, A1_only, A2_only, neither.
    order = np.array([3, 1, 2, 0])
    sizes = np.bincount(codes, minlength=4)[order].astype(np.int64)
    n = np.bincount(lab_codes, minlength=4)[order].astype(np.int64)
    h = np.bincount(lab_codes, weights=lab_values, minlength=4)[order].astype(np.int64)
    s12 = int(sizes[0])
    s1, s2 = int(sizes[0] + sizes[1]), int(sizes[0] + sizes[2])
    _check_sizes(s1, s2, s12)
    u = int(codes.size)
    pair_n = n[:3]
    if (pair_n[sizes[:3] > 0] == 0).all():
        raise ValueError(
            "no label-blind labelled item falls in A1 ∪ A2; allowed: labels of uniform samples "
            "of A1, A2, A12 (or of the universe)"
        )
    gen = as_generator(rng)
    _, pos = _cell_positives(sizes, n, h, a, b, draws, gen, finite_population)
    t12, t1o, t2o, t0 = pos.T
    t1, t2 = t12 + t1o, t12 + t2o
    values = pair_quantities(t1 / s1, t2 / s2, t12 / s12, s1, s2, s12, u)
    if n[3] > 0:
        total = t1 + t2o + t0
        with np.errstate(divide="ignore", invalid="ignore"):
            values["total_positives_sampled"] = total
            values["recall_1_sampled"] = t1 / total
            values["recall_2_sampled"] = t2 / total
        values["delta_1"] = _delta_1(t12, t1, t2, total)
    m = np.bincount(topic_codes, minlength=4)[order].astype(np.int64)
    if m.sum() > 0:
        pi = gen.dirichlet(m + a, size=draws)
        values["delta_1_topic"] = _delta_1(
            pi[:, 0], pi[:, 0] + pi[:, 1], pi[:, 0] + pi[:, 2], np.ones(draws)
        )
    cells = ["A12", "A1_only", "A2_only", "neither"]
    observed = xr.Dataset(
        {"n": ("cell", n), "h": ("cell", h), "topic_sample": ("cell", m)},
        coords={"cell": cells},
    )
    constant = xr.Dataset(
        {
            "size": ("cell", sizes),
            "prior_a": ((), a),
            "prior_b": ((), b),
            "universe": ((), float(u)),
        },
        coords={"cell": cells},
    )
    view = "finite population" if finite_population else "superpopulation"
    result = _pack_pair(
        values,
        observed,
        constant,
        draws,
        desc,
        (s1, s2, s12),
        u,
        int(n.sum() + m.sum()),
        {"input": "flags", "view": view},
    )
    result._warn_if_flagged()
    return result


# --------------------------------------------------------------------------- three or more
@dataclass(frozen=True, slots=True)
class PairwiseTotals:
    """:math:`\\hat n` from every classifier pair and their disagreements.

    Attributes
    ----------
    totals : pandas.DataFrame
        One row per pair: posterior mean, sd and equal-tailed ``prob`` interval of
        :math:`\\hat n`, and the Eq. (1) recalls of both members.
    disagreement : pandas.DataFrame
        One row per two pairs: means, the posterior median and interval of the ratio
        :math:`\\hat n_a / \\hat n_b`, ``prob_a_greater`` :math:`= P(\\hat n_a > \\hat n_b)`,
        whether the two intervals overlap, and ``disagree`` (the ratio's interval excludes 1):
        a warning sign that at least one of the pairs is conditionally dependent.
    datatree : xarray.DataTree
        ``posterior``: the :math:`\\hat n` draws per pair.
    prob : float
    joint : bool
        Whether the draws are joint (shared labels, from flags) or independent per pair.
    """

    totals: pd.DataFrame
    disagreement: pd.DataFrame
    datatree: xr.DataTree
    prob: float
    joint: bool

    @property
    def any_disagreement(self) -> bool:
        """Whether some two pairs disagree beyond posterior uncertainty."""
        return bool(self.disagreement["disagree"].any())

    def __repr__(self) -> str:
        n_dis = int(self.disagreement["disagree"].sum())
        return (
            f"PairwiseTotals({len(self.totals)} pairs, {n_dis} of {len(self.disagreement)} "
            f"comparisons disagree at {self.prob:g})"
        )


def _disagreement_tables(
    n_hat: Mapping[str, np.ndarray],
    recalls: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
    prob: float,
    joint: bool,
) -> PairwiseTotals:
    rows = {}
    tag = f"{prob:g}"
    for name, x in n_hat.items():
        lo, hi = eti(x, prob)
        row = {"mean": float(x.mean()), "sd": float(x.std(ddof=1)), f"lo{tag}": lo, f"hi{tag}": hi}
        if recalls is not None:
            row["recall_first"] = float(np.mean(recalls[name][0]))
            row["recall_second"] = float(np.mean(recalls[name][1]))
        rows[name] = row
    totals = pd.DataFrame.from_dict(rows, orient="index")
    totals.index.name = "pair"
    comp = []
    for (na, xa), (nb, xb) in itertools.combinations(n_hat.items(), 2):
        m = min(xa.size, xb.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = xa[:m] / xb[:m]
        rlo, rhi = eti(ratio, prob)
        alo, ahi = totals.loc[na, f"lo{tag}"], totals.loc[na, f"hi{tag}"]
        blo, bhi = totals.loc[nb, f"lo{tag}"], totals.loc[nb, f"hi{tag}"]
        comp.append(
            {
                "pair_a": na,
                "pair_b": nb,
                "mean_a": totals.loc[na, "mean"],
                "mean_b": totals.loc[nb, "mean"],
                "ratio_median": float(np.median(ratio)),
                f"ratio_lo{tag}": rlo,
                f"ratio_hi{tag}": rhi,
                "prob_a_greater": float(np.mean(xa[:m] > xb[:m])),
                "intervals_overlap": bool(alo <= bhi and blo <= ahi),
                "disagree": bool(rlo > 1.0 or rhi < 1.0),
            }
        )
    disagreement = pd.DataFrame(comp)
    draws = min(x.size for x in n_hat.values())
    tree = xr.DataTree.from_dict(
        {"posterior": _posterior_dataset({k: v[:draws] for k, v in n_hat.items()}, draws)}
    )
    tree.attrs.update({"prob": prob, "joint": int(joint), "created_at": _now()})
    return PairwiseTotals(totals, disagreement, tree, prob, joint)


def pairwise_totals(
    flags: Any,
    labelled: Any,
    labels: Any,
    *,
    names: Sequence[str] | None = None,
    ids: Any = None,
    prob: float = 0.95,
    prior: Any = "jeffreys",
    finite_population: bool = True,
    draws: int = 40_000,
    rng: RNGLike = None,
) -> PairwiseTotals:
    """:math:`\\hat n` from every pair of three or more classifiers, with shared draws.

    The universe is split into the :math:`2^k` cells of the classifiers' flag patterns, each with
    a Beta posterior of its positive rate (as in :func:`pair_recall_from_flags`, whose rule on
    which labels count applies: label-blind labels count for the cell of their flags). For each
    pair :math:`(i, j)`, draw by draw,
    :math:`\\hat n_{ij} = |T \\cap A_i| |T \\cap A_j| / |T \\cap A_{ij}|`. If every pair
    satisfied Assumption 1, all :math:`\\hat n_{ij}` would estimate :math:`|T|`; pair
    :math:`(i,j)` actually estimates :math:`|T| / \\delta_1^{(ij)}`. Two pairs
    whose ratio :math:`\\hat n_a / \\hat n_b` has a ``prob`` interval excluding 1 *disagree*: a
    warning sign of conditional dependence in at least one of them (agreement does not prove
    independence: all pairs may share the same dependence).

    Parameters
    ----------
    flags : (items, k) bool array or sequence of k 1-D bool arrays, k >= 3
    labelled, labels, ids, prior, finite_population, draws, rng
        As in :func:`pair_recall_from_flags` (all labels here are label-blind).
    names : sequence of str, optional
        Classifier names (default ``C1``, ``C2``...).
    prob : float
        Interval probability.

    Returns
    -------
    PairwiseTotals

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, sections 5.1, 6
    and 8 (a third classifier to check the assumptions).
    """
    mat = _as_flag_matrix(flags)
    k = mat.shape[1]
    if k < 3:
        raise ValueError(
            f"flags holds {k} classifier(s); allowed: 3 or more (use "
            "pair_recall_from_flags for two)"
        )
    if k > 12:
        raise ValueError(f"flags holds {k} classifiers; allowed: at most 12 (2^k cells)")
    if names is None:
        names = [f"C{j + 1}" for j in range(k)]
    names = [str(x) for x in names]
    if len(names) != k or len(set(names)) != k:
        raise ValueError(f"names={names!r}; allowed: {k} distinct names")
    prob = check_level(prob, "prob")
    draws = check_positive_int(draws, "draws")
    if not isinstance(finite_population, bool | np.bool_):
        raise TypeError(f"finite_population={finite_population!r} must be True or False")
    a_arr, b_arr, _ = resolve_prior(prior, 1)
    codes, lab_codes, lab_values, _ = _labelled_cells(mat, labelled, labels, ids, None)
    n_cells = 1 << k
    sizes = np.bincount(codes, minlength=n_cells).astype(np.int64)
    n = np.bincount(lab_codes, minlength=n_cells).astype(np.int64)
    h = np.bincount(lab_codes, weights=lab_values, minlength=n_cells).astype(np.int64)
    cell_ids = np.arange(n_cells)
    member = ((cell_ids[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)  # (cells, k)
    for i, j in itertools.combinations(range(k), 2):
        s12 = int(sizes[member[:, i] & member[:, j]].sum())
        if s12 == 0:
            raise ValueError(
                f"classifiers {names[i]!r} and {names[j]!r} flag no item in common; every pair "
                "needs |A_ij| >= 1"
            )
    gen = as_generator(rng)
    _, pos = _cell_positives(
        sizes, n, h, float(a_arr[0]), float(b_arr[0]), draws, gen, finite_population
    )
    t = pos @ member.astype(np.float64)  # (draws, k): on-topic items flagged by each
    n_hat, recalls = {}, {}
    for i, j in itertools.combinations(range(k), 2):
        tij = pos[:, member[:, i] & member[:, j]].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            n_hat[f"{names[i]}&{names[j]}"] = t[:, i] * t[:, j] / tij
            recalls[f"{names[i]}&{names[j]}"] = (tij / t[:, j], tij / t[:, i])
    return _disagreement_tables(n_hat, recalls, prob, joint=True)


def compare_totals(
    results: Mapping[str, PairRecall],
    *,
    prob: float = 0.95,
    total_quantity: str = "total_positives",
) -> PairwiseTotals:
    """The disagreement table of :func:`pairwise_totals` from separately computed pairs.

    ``results`` maps a pair name to its :class:`PairRecall` (e.g. from :func:`pair_recall` with
    counts). Draws of different results are independent, so shared precision labels are not
    linked: the table is conservative (it overstates the uncertainty of a ratio whose pairs share
    a classifier); prefer :func:`pairwise_totals` when the flags are at hand.
    """
    if not isinstance(results, Mapping) or len(results) < 2:
        raise ValueError("results must map at least two pair names to PairRecall results")
    prob = check_level(prob, "prob")
    n_hat = {}
    for name, res in results.items():
        if not isinstance(res, PairRecall):
            raise TypeError(f"results[{name!r}] has type {type(res).__name__}; allowed: PairRecall")
        check_option(total_quantity, "total_quantity", res.quantities)
        n_hat[str(name)] = res.draws(total_quantity)
    return _disagreement_tables(n_hat, None, prob, joint=False)
