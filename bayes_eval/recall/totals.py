"""Three or more classifiers: the topic size from every pair and their disagreements.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``, sections 5.1, 6
and 8): a pair that violates Assumption 1 estimates :math:`|T| / \\delta_1` by Eq. (1), so pairs
whose :math:`\\hat n` disagree beyond their posterior uncertainty point at conditional
dependence. This is the diagnostic that goes with the :math:`\\delta_1` sensitivity range of
:func:`bayes_eval.pair_recall`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from .._draws import DEFAULT_DRAWS, eti
from .._validation import (
    RNGLike,
    as_generator,
    check_bool,
    check_level,
    check_option,
    check_positive_int,
)
from ..priors import BetaSpec, resolve_prior
from ._common import PairRecall, _now, _posterior_dataset
from .flags import _as_flag_matrix, _cell_positives, _labelled_cells

__all__ = ["PairwiseTotals", "compare_totals", "pairwise_totals"]


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
    flags: ArrayLike | Sequence[ArrayLike],
    labelled: ArrayLike,
    labels: ArrayLike,
    *,
    names: Sequence[str] | None = None,
    ids: ArrayLike | None = None,
    prob: float = 0.95,
    prior: BetaSpec = "jeffreys",
    finite_population: bool = True,
    draws: int = DEFAULT_DRAWS,
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
    check_bool(finite_population, "finite_population")
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
