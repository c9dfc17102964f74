"""The linear form of ``metric >= target`` in the stratum positives, its fast acceptance
probability, and the least-favourable truth (see :mod:`bayes_eval.sequential`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from .._cumulants import beta_rate_cumulants, form_cumulants, stratum_cumulants
from .._lattice import lattice_prob_at_least
from ..metrics import METRICS, metric_of_positives

if TYPE_CHECKING:
    from ..posterior import MetricPosterior

__all__ = [
    "SUPPORTED_METRICS",
    "approx_prob_at_least",
    "beta_form_cumulants",
    "least_favourable_truth",
    "linear_form",
    "prob_linear_ge",
]


#: metrics for which ``metric >= target`` is linear in the stratum positives
SUPPORTED_METRICS = ("f1", "precision", "recall", "accuracy", "specificity", "npv", "prevalence")


# ------------------------------------------------------------------------------------ kernels
def linear_form(
    metric: str, target: float, predicted: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, float]:
    """Weights ``w_k`` and bound ``c`` with ``metric >= target  <=>  sum_k w_k P_k >= c``.

    ``P_k`` is the number of positives in stratum ``k``; ``predicted`` the predicted class per
    stratum, ``sizes`` the stratum sizes.
    """
    t = float(target)
    pos = np.asarray(predicted, dtype=bool)
    sizes = np.asarray(sizes, dtype=np.float64)
    npp = float(sizes[pos].sum())
    npn = float(sizes[~pos].sum())
    one = np.ones(pos.shape[0])
    if metric == "precision":
        return np.where(pos, 1.0, 0.0), t * npp
    if metric == "recall":
        return np.where(pos, 1.0 - t, -t), 0.0
    if metric == "f1":
        return np.where(pos, 2.0 - t, -t), t * npp
    if metric == "accuracy":
        return np.where(pos, 1.0, -1.0), t * (npp + npn) - npn
    if metric == "prevalence":
        return one, t * (npp + npn)
    if metric == "specificity":
        return np.where(pos, t, -(1.0 - t)), t * npp - (1.0 - t) * npn
    if metric == "npv":
        return np.where(pos, 0.0, -1.0), (t - 1.0) * npn
    raise ValueError(
        f"metric={metric!r} is not supported by the sequential calibration; allowed: "
        + ", ".join(repr(m) for m in SUPPORTED_METRICS)
    )


def prob_linear_ge(
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    c: float,
    finite_population: bool = True,
) -> np.ndarray:
    """``Pr(sum_k w_k P_k >= c)`` under the stratified beta-binomial posterior (numpy kernel).

    ``n``, ``h`` have shape ``(..., K)``; the rest broadcast against them. Pearson type III
    approximation from the exact first three cumulants (see the module docstring), except that
    the strata with few unlabelled items are summed exactly on the integer lattice
    (:func:`bayes_eval._lattice.lattice_prob_at_least`, calibration version 17), and with them
    the strata whose remaining positives are concentrated near 0 (version 18).
    """
    k1, k2, k3 = beta_form_cumulants(n, h, prior_a, prior_b, sizes, w, finite_population)
    return lattice_prob_at_least(
        k1, k2, k3, c, n=n, h=h, prior_a=prior_a, prior_b=prior_b, sizes=sizes, w=w,
        finite_population=finite_population, concentrated=True,
    )  # fmt: skip


def beta_form_cumulants(
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    finite_population: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact first three cumulants, each ``(...)``, of ``sum_k w_k P_k`` with independent
    ``Beta(prior_a + h, prior_b + n - h)`` rates (what :func:`prob_linear_ge` evaluates)."""
    n = np.asarray(n, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    mu, var, k3 = beta_rate_cumulants(prior_a + h, prior_b + n - h)
    cum = stratum_cumulants(mu, var, k3, n=n, h=h, sizes=sizes, finite_population=finite_population)
    return form_cumulants(cum, w)


def approx_prob_at_least(post: MetricPosterior, metric: str, target: float) -> float:
    """The fast approximation of ``post.prob_at_least(metric, target)`` used by the calibration.

    Reads the counts, sizes and prior of a :class:`~bayes_eval.MetricPosterior` built by the
    independent beta-binomial model, so that the approximation can be checked against its draws.
    """
    const = post.datatree["constant_data"]
    obs = post.datatree["observed_data"]
    sizes = const["N"].values.astype(np.float64)
    predicted = const["predicted"].values.astype(bool)
    w, c = linear_form(metric, target, predicted, sizes)
    return float(
        prob_linear_ge(
            obs["n"].values,
            obs["h"].values,
            const["prior_a"].values,
            const["prior_b"].values,
            sizes,
            w,
            c,
            post.finite_population,
        )
    )


def least_favourable_truth(
    sizes: ArrayLike,
    predicted: ArrayLike,
    rates: ArrayLike,
    *,
    metric: str = "f1",
    value: float = 0.8,
    strict: bool = False,
) -> np.ndarray:
    """Integer positives per stratum whose metric is ``value`` (at most ``value``, as close as the
    integers allow), obtained from plausible ``rates`` by a logit shift (module docstring).

    With ``strict=True`` the metric is strictly *below* ``value`` (a population whose claim
    ``metric >= value`` is false; metrics within 1e-12 of ``value`` count as equal to it):
    the family of truths of the worst-case calibration (calibration version 16), so that an audit
    that labels a whole side (a census) and finds the metric exactly at the target is not
    counted as a false accept.

    Raises ``ValueError`` when no shift reaches ``value`` (e.g. precision 0.9 from strata that
    have no predicted positives).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    pos = np.asarray(predicted, dtype=bool)
    m = METRICS[metric]
    if (m.needs_predicted_positive and not pos.any()) or (m.needs_predicted_negative and pos.all()):
        raise ValueError(
            f"metric {metric!r} is undefined for these strata (no predicted "
            f"{'positives' if m.needs_predicted_positive else 'negatives'}); the "
            "target is not attainable"
        )
    r = np.clip(np.asarray(rates, dtype=np.float64), 1e-6, 1 - 1e-6)
    d = np.ones(pos.shape[0]) if metric == "prevalence" else np.where(pos, 1.0, -1.0)
    logit = np.log(r) - np.log1p(-r)

    def cont(s: float) -> float:
        theta = special.expit(logit + s * d)
        return metric_of_positives(metric, sizes * theta, sizes, pos) - value

    lo, hi = cont(-40.0), cont(40.0)
    if not (lo <= 0.0 <= hi):
        raise ValueError(
            f"target={value!r} is not attainable for metric {metric!r} with these strata: "
            f"the metric ranges over [{lo + value:.4g}, {hi + value:.4g}]"
        )
    s = (
        optimize.brentq(cont, -40.0, 40.0, xtol=1e-12)
        if lo < 0.0 < hi
        else (-40.0 if lo == 0.0 else 40.0)
    )
    positives = np.rint(sizes * special.expit(logit + s * d)).astype(np.int64)
    # nudge down (only strata the metric depends on) until the integer population is at most
    # `value` (strictly below it with `strict`)
    weight, _ = linear_form(metric, value, pos, sizes)
    up = d > 0

    def done(m: float) -> bool:
        return m < value - 1e-12 if strict else m <= value + 1e-12

    # every step lowers the metric (a positive fewer where it counts for it, one more where it
    # counts against it), so this ends; from the rounded continuous solution it takes at most
    # about half the number of strata
    while not done(metric_of_positives(metric, positives, sizes, pos)):
        cand = np.flatnonzero(
            (weight != 0) & ((up & (positives > 0)) | (~up & (positives < sizes)))
        )
        if cand.size == 0:  # pragma: no cover - the shift already reached the range's end
            raise ValueError(
                f"target={value!r} is not attainable for metric {metric!r} with these strata: "
                f"no integer population has the metric {'below' if strict else 'at most'} it"
            )
        k = int(cand[np.argmax(sizes[cand])])
        positives[k] += -1 if up[k] else 1
    return positives
