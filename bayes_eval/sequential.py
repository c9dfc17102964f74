"""Sequential correction: acceptance tests that stay valid when people peek.

Webber, Bagdouri, Lewis & Oard (``../shared/seeds/002_bcc5f0faf615c660.txt``) showed that
checking a nominal 95% lower bound on F1 after every 20 labels, and accepting as soon as it clears
the target, accepted an inadequate classifier 31.55% of the time (actual confidence about 68%);
they needed a nominal 99.5% to reach an actual 95% (97% with a growing training set, 98% with both
growing). This module measures that curve for *your* design and corrects for it.

:func:`calibrate_sequential` simulates the repeated-testing procedure of an audit (strata, design,
look schedule, budget, metric, target, prior) under the *least-favourable truth*: a finite
population whose true metric is exactly the target. Accepting such a classifier is a false accept,
so the actual level of the procedure at nominal level :math:`\\gamma` is

.. math::

    \\mathrm{actual}(\\gamma) = 1 - \\Pr\\Big(\\max_{j \\le J} \\Pr(M \\ge t \\mid D_j) \\ge
    \\gamma\\Big),

where :math:`D_j` are the labels at look :math:`j`. One simulation gives the whole curve: every
simulated audit contributes its maximum over looks of the posterior probability. The corrected
nominal level for an actual level :math:`1 - \\alpha` is the smallest :math:`\\gamma` whose
simulated false-accept rate is at most :math:`\\alpha` (the :math:`1-\\alpha` quantile of the
path maxima).

**Least-favourable truth.** Plausible stratum rates :math:`r_k` come from a pilot sample
(posterior means :math:`(a_k + h_k)/(a_k + b_k + n_k)`), the prior means, or the user. They are
moved by one logit shift, up on predicted-positive strata and down on predicted-negative strata,

.. math::

    \\theta_k(s) = \\operatorname{expit}(\\operatorname{logit} r_k + s\\,d_k), \\qquad
    d_k = +1 \\text{ if } \\hat y_k = 1, \\; -1 \\text{ otherwise}

(``d_k = +1`` everywhere for prevalence), which makes every supported metric non-decreasing in
:math:`s`; :math:`s` is solved so that the metric equals the target, the positives
:math:`P_k = \\operatorname{round}(N_k \\theta_k)` are rounded and then nudged until the metric of
the integer population is at most the target (it is reported as ``truth_metric``).

**Fast posterior probability.** For every supported metric, :math:`M \\ge t` is a *linear*
inequality in the per-stratum positives, :math:`L = \\sum_k w_k P_k \\ge c` (F1:
:math:`(2-t)\\,TP - t\\,FN \\ge t\\,N_{\\hat +}`; precision: :math:`TP \\ge t N_{\\hat +}`; recall:
:math:`(1-t)TP - tFN \\ge 0`; accuracy: :math:`TP - FN \\ge tN - N_{\\hat -}`; ...). Under the
stratified beta-binomial posterior of :mod:`bayes_eval.posterior` the :math:`P_k` are independent
(:math:`P_k = h_k + X_k`, :math:`X_k` beta-binomial, or :math:`N_k\\theta_k` without the finite
population correction), so the first three cumulants of :math:`L` are exact sums, and
:math:`\\Pr(L \\ge c)` is computed from a Pearson type III (shifted gamma) distribution with those
cumulants. Against 400,000 exact Monte Carlo draws (``sampler="exact"``) its error in
probability is at most 0.009 for probabilities in [0.7, 0.95] and at most 0.0013 for
probabilities of 0.98 and above, where corrected levels lie, even with 5-10 labels per stratum
and no positives in a large stratum (``tests/test_sequential.py``,
``benchmarks/bench_sequential.py``); the Monte Carlo error of the 40,000 draws an audit uses is
0.0004 at 0.995. It costs a few
microseconds per simulated look, so 10,000 audits of 100 looks take seconds.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt`` (sequential
testing bias; Figure 4; nominal 99.5% / 97% / 98% for actual 95%).
Waudby-Smith & Ramdas (2020), *Confidence sequences for sampling without replacement*
(the anytime-valid comparison, :mod:`bayes_eval._confseq`).
"""

from __future__ import annotations

import hashlib
import json
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from scipy import optimize, special

from ._loop import BatchPlan, LockStep, LockStepAllocator, design_state
from ._validation import (
    RNGLike,
    as_generator,
    check_level,
    check_option,
    check_positive_int,
)
from .designs import make_design
from .metrics import METRICS, metric_of_positives
from .priors import resolve_prior

__all__ = [
    "SUPPORTED_METRICS",
    "SequentialCalibration",
    "approx_prob_at_least",
    "calibrate_sequential",
    "compare_anytime",
    "geometric_looks",
    "least_favourable_truth",
    "webber_scenarios",
]

#: metrics for which ``metric >= target`` is linear in the stratum positives
SUPPORTED_METRICS = ("f1", "precision", "recall", "accuracy", "specificity", "npv", "prevalence")

#: default grid of nominal levels for the coverage curve
DEFAULT_NOMINAL = np.unique(
    np.round(
        np.concatenate(
            [
                np.arange(0.50, 0.95, 0.01),
                np.arange(0.95, 0.99, 0.0025),
                np.arange(0.99, 0.9995, 0.0005),
            ]
        ),
        6,
    )
)

#: below this |skewness| the normal approximation is used (the gamma tends to it)
_NORMAL_SKEW = 1e-4


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


def _beta_cumulants(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = a + b
    mu = a / s
    var = a * b / (s * s * (s + 1.0))
    k3 = 2.0 * (b - a) * a * b / (s**3 * (s + 1.0) * (s + 2.0))
    return mu, var, k3


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
    approximation from the exact first three cumulants (see the module docstring).
    """
    n = np.asarray(n, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    mu, var, k3 = _beta_cumulants(prior_a + h, prior_b + n - h)
    if finite_population:
        r = sizes - n
        m1 = h + r * mu
        one_m2mu = 1.0 - 2.0 * mu
        k2x = r * (mu * (1.0 - mu) - var) + r * r * var
        k3x = (
            r * (mu * (1.0 - mu) * one_m2mu - 3.0 * var * one_m2mu + 2.0 * k3)
            + 3.0 * r * r * (var * one_m2mu - k3)
            + r**3 * k3
        )
    else:
        m1 = sizes * mu
        k2x = sizes**2 * var
        k3x = sizes**3 * k3
    big1 = (w * m1).sum(axis=-1)
    big2 = np.maximum((w * w * k2x).sum(axis=-1), 0.0)
    big3 = (w**3 * k3x).sum(axis=-1)
    sd = np.sqrt(big2)
    scale = np.maximum(np.abs(big1), 1.0)
    degenerate = sd <= 1e-12 * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (c - big1) / sd
        g = big3 / (big2 * sd)
    z = np.where(degenerate, 0.0, z)
    g = np.where(degenerate | ~np.isfinite(g), 0.0, g)
    normal = np.abs(g) < _NORMAL_SKEW
    gs = np.where(normal, 1.0, g)
    k = 4.0 / (gs * gs)
    rk = np.sqrt(k)
    # L = K1 + sd * sign(g) * (G - k) / sqrt(k), G ~ Gamma(k, 1)
    p_gamma = np.where(
        gs > 0,
        special.gammaincc(k, np.maximum(k + z * rk, 0.0)),
        special.gammainc(k, np.maximum(k - z * rk, 0.0)),
    )
    p = np.where(normal, special.ndtr(-z), p_gamma)
    return np.where(degenerate, (big1 >= c - 1e-9 * scale).astype(np.float64), p)


def approx_prob_at_least(post: Any, metric: str, target: float) -> float:
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
    sizes: Any,
    predicted: Any,
    rates: Any,
    *,
    metric: str = "f1",
    value: float = 0.8,
) -> np.ndarray:
    """Integer positives per stratum whose metric is ``value`` (at most ``value``, as close as the
    integers allow), obtained from plausible ``rates`` by a logit shift (module docstring).

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
    # nudge down until the integer population is at most `value`
    for _ in range(4 * int(sizes.shape[0]) + 8):
        if metric_of_positives(metric, positives, sizes, pos) <= value + 1e-12:
            break
        up = d > 0
        cand = np.flatnonzero((up & (positives > 0)) | (~up & (positives < sizes)))
        k = int(cand[np.argmax(sizes[cand])])
        positives[k] += -1 if up[k] else 1
    return positives


# ------------------------------------------------------------------------------ the simulator
def _as_schedule(batch_size: Any, budget: Any, looks: Any, total: int) -> np.ndarray:
    """Label counts at the looks of an audit without a design schedule (one batch engine)."""
    return _batch_plan(None, batch_size, budget, looks, total, 1)[1]


def geometric_looks(batch_size: int, budget: int, factor: float = 2.0) -> np.ndarray:
    """Look schedule ``batch_size * factor**j`` (rounded to whole batches) ending at the budget.

    Fewer looks need a smaller correction. For 10 strata, F1 target 0.7 and a budget of 2,000
    (``benchmarks/results/bench_sequential.txt``), looks at 20, 40, ..., 1280, 2000 labels need a
    corrected nominal level of 97.7% instead of 98.9% for a look every 20 labels, and accepting
    a classifier 0.05 above the target takes 28% more labels than the naive rule on the same
    schedule (64% more with a look every batch). The naive rule itself, though invalid, stops
    earlier with a look every batch.
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    budget = check_positive_int(budget, "budget")
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or factor <= 1:
        raise ValueError(f"factor={factor!r}; allowed: a number > 1")
    out: list[int] = []
    x = float(batch_size)
    while x < budget:
        v = round(x / batch_size) * batch_size
        if not out or v > out[-1]:
            out.append(v)
        x *= float(factor)
    if not out or out[-1] < budget:
        out.append(budget)
    return np.asarray(out, dtype=np.int64)


def _batch_plan(
    design: Any, batch_size: Any, budget: Any, looks: Any, total: int, k: int
) -> tuple[list[int], np.ndarray]:
    """Batch sizes of one simulated audit and the label counts at which it looks
    (:meth:`bayes_eval._loop.BatchPlan.build`; a budget above the population is an error)."""
    plan = BatchPlan.build(
        design,
        batch_size=batch_size,
        budget=budget,
        total=total,
        n_strata=k,
        looks=looks,
        strict_budget=True,
    )
    return list(plan.batches), plan.looks


def _simulate_paths(
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    positives: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    metric: str,
    target: float,
    design: Any,
    design_name: str,
    batch_size: int,
    schedule: np.ndarray,
    finite_population: bool,
    n_sims: int,
    rng: np.random.Generator,
    batches: list[int] | None = None,
) -> np.ndarray:
    """Posterior probability ``P(metric >= target)`` at each look of ``n_sims`` audits: (S, J).

    The audits run in lock-step on the batch engine (:mod:`bayes_eval._loop`): the split of a
    batch over the strata is one vectorised draw for ``"random"``, one ``design.allocate_many``
    call on the ``(S, K)`` state when the design has it, and otherwise one ``allocate`` call per
    audit on its own copy of the design. ``batches`` are the batch sizes (default
    ``batch_size`` each, up to the last look).
    """
    w, c = linear_form(metric, target, predicted, sizes)
    out = np.empty((n_sims, schedule.shape[0]), dtype=np.float64)
    look_set = {int(v): j for j, v in enumerate(schedule)}
    if batches is None:
        last = int(schedule[-1])
        batches = [batch_size] * (last // batch_size) + (
            [last % batch_size] * (last % batch_size > 0)
        )
    prior_a = np.asarray(prior_a, dtype=np.float64)
    prior_b = np.asarray(prior_b, dtype=np.float64)
    audits = LockStep(sizes, positives, n_sims)
    allocator = LockStepAllocator(design, n_sims)
    labelled = 0
    for rnd, b in enumerate(batches):
        state = design_state(
            sizes=sizes,
            predicted=predicted,
            n=audits.n,
            h=audits.h,
            available=audits.available,
            prior_a=prior_a,
            prior_b=prior_b,
            metric=metric,
            round=rnd,
            finite_population=finite_population,
        )
        audits.label(allocator(state, b, rng), rng)
        labelled += b
        j = look_set.get(labelled)
        if j is not None:
            out[:, j] = prob_linear_ge(
                audits.n, audits.h, prior_a, prior_b, sizes, w, c, finite_population
            )
    return out


def _first_crossing(prob: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Index of the first look with ``prob >= level`` for every path and level (J if none)."""
    running = np.maximum.accumulate(prob, axis=1)  # (S, J), non-decreasing
    jj = prob.shape[1]
    out = np.empty((prob.shape[0], levels.shape[0]), dtype=np.int64)
    for i in range(prob.shape[0]):
        out[i] = np.searchsorted(running[i], levels, side="left")
    out[out > jj] = jj
    return out


# ------------------------------------------------------------------------------- the result
@dataclass(frozen=True, slots=True)
class SequentialCalibration:
    """Nominal → actual level of a repeated acceptance test, from simulated audits.

    Attributes
    ----------
    curve : xarray.Dataset
        Over ``nominal``: ``accept_rate`` (share of simulated audits that accept),
        ``actual`` (= 1 - ``accept_rate``: the actual level when the truth is at the target),
        ``mcse`` (Monte Carlo standard error of both), ``mean_labels`` (labels used, the budget
        for audits that never accept).
    prob : ndarray, (n_sims, n_looks)
        ``P(metric >= target)`` at every look of every simulated audit.
    looks : ndarray of int
        Labels at each look.
    truth : xarray.Dataset
        Per stratum: ``N``, ``predicted``, ``rate`` (plausible rate before the shift),
        ``positives`` (the simulated population).
    truth_metric : float
        Metric of the simulated population (at most the target when calibrating).
    metric, target, design, prior : str, float, str, str
    rates_source : str
        Where the plausible stratum rates came from (``"pilot"``, ``"prior"``, ``"user"``...).
    finite_population : bool
    n_sims : int
    max_mcse : float
        Largest Monte Carlo standard error accepted for the actual level at a corrected level.
    approximation : str
    """

    curve: xr.Dataset
    prob: np.ndarray = field(repr=False)
    looks: np.ndarray
    truth: xr.Dataset = field(repr=False)
    truth_metric: float
    metric: str
    target: float
    design: str
    prior: str
    rates_source: str
    finite_population: bool
    n_sims: int
    max_mcse: float
    approximation: str = "pearson3 (exact cumulants of the linear form)"

    @property
    def max_prob(self) -> np.ndarray:
        """Per simulated audit, the largest ``P(metric >= target)`` over the looks."""
        return self.prob.max(axis=1)

    @property
    def at_target(self) -> bool:
        """Whether the simulated truth is at the target (so the curve is a false-accept curve)."""
        return bool(self.truth_metric <= self.target + 1e-12)

    def accept_rate(self, nominal: float) -> tuple[float, float]:
        """Share of simulated audits accepting at ``nominal`` and its Monte Carlo error."""
        nominal = check_level(nominal, "nominal")
        p = float(np.mean(self.max_prob >= nominal))
        return p, float(np.sqrt(max(p * (1 - p), 1.0 / self.n_sims) / self.n_sims))

    def actual_level(self, nominal: float) -> float:
        """Actual level at a nominal level: ``1 - accept_rate(nominal)`` (truth at target)."""
        self._need_target("actual_level")
        return 1.0 - self.accept_rate(nominal)[0]

    def labels_to_accept(self, nominal: float) -> tuple[float, float]:
        """Mean labels used at ``nominal`` (budget when never accepting) and its MC error."""
        nominal = check_level(nominal, "nominal")
        first = _first_crossing(self.prob, np.array([nominal]))[:, 0]
        used = np.where(
            first < self.looks.shape[0],
            self.looks[np.minimum(first, self.looks.shape[0] - 1)],
            self.looks[-1],
        ).astype(np.float64)
        return float(used.mean()), float(used.std(ddof=1) / np.sqrt(used.size))

    def corrected_level(self, actual: float = 0.95) -> float:
        """Nominal level whose actual level is ``actual``.

        The smallest nominal :math:`\\gamma` with simulated false-accept rate
        :math:`\\le 1 - \\text{actual}`: just above the :math:`\\lceil S(1-\\text{actual})\\rceil
        + 1`-th largest path maximum.

        Raises
        ------
        ValueError
            When the simulation is too small for this level (Monte Carlo standard error
            :math:`\\sqrt{\\alpha(1-\\alpha)/S}` above ``max_mcse``), when the truth is not at the
            target, or when no nominal level below 1 reaches it.
        """
        self._need_target("corrected_level")
        actual = check_level(actual, "actual")
        alpha = 1.0 - actual
        need = required_sims(actual, self.max_mcse)
        if self.n_sims < need:
            raise ValueError(
                f"n_sims={self.n_sims} is too few for actual={actual}: its Monte Carlo error "
                f"{np.sqrt(alpha * actual / self.n_sims):.4f} exceeds max_mcse={self.max_mcse}; "
                f"allowed: n_sims >= {need}"
            )
        v = np.sort(self.max_prob)[::-1]
        m = int(np.floor(self.n_sims * alpha + 1e-9))
        if m >= v.size:
            return float(np.nextafter(0.0, 1.0))
        level = float(np.nextafter(v[m], 1.0))
        if level >= 1.0:
            raise ValueError(
                f"no nominal level below 1 gives actual={actual}: more than {alpha:.3g} of the "
                "simulated audits reach P(metric >= target) = 1 (too few labels per stratum or "
                "a degenerate design)"
            )
        return level

    def corrected_level_mcse(self, actual: float = 0.95) -> float:
        """Monte Carlo standard error of :meth:`corrected_level` (order-statistic interval)."""
        actual = check_level(actual, "actual")
        alpha = 1.0 - actual
        v = np.sort(self.max_prob)[::-1]
        s = v.size
        half = np.sqrt(s * alpha * actual)
        lo = int(np.clip(np.floor(s * alpha - half), 0, s - 1))
        hi = int(np.clip(np.ceil(s * alpha + half), 0, s - 1))
        return float((v[lo] - v[hi]) / 2.0)

    def describe(self, actual: float = 0.95) -> str:
        """One line: what was simulated and the corrected level with its Monte Carlo error."""
        lvl = self.corrected_level(actual)
        return (
            f"sequential correction: nominal {lvl:.4f} for actual {actual:g} "
            f"(MC s.e. of actual {np.sqrt(actual * (1 - actual) / self.n_sims):.4f}, of nominal "
            f"{self.corrected_level_mcse(actual):.4f}); {self.n_sims} simulated audits, "
            f"{self.looks.shape[0]} looks up to {int(self.looks[-1])} labels, design "
            f"{self.design}, truth {self.metric}={self.truth_metric:.4f} from {self.rates_source} "
            f"rates, prior {self.prior}"
        )

    def _need_target(self, what: str) -> None:
        if not self.at_target:
            raise ValueError(
                f"{what} needs a calibration simulated at the target; this one has the truth "
                f"at {self.metric}={self.truth_metric:.4f} > target={self.target}"
            )

    def __repr__(self) -> str:
        try:
            extra = f", corrected_level(0.95)={self.corrected_level(0.95):.4f}"
        except ValueError:
            extra = ""
        return (
            f"SequentialCalibration(metric={self.metric!r}, target={self.target}, "
            f"truth={self.truth_metric:.4f}, design={self.design!r}, looks={self.looks.shape[0]}"
            f" up to {int(self.looks[-1])} labels, n_sims={self.n_sims}{extra})"
        )


def required_sims(actual: float, max_mcse: float) -> int:
    """Simulated audits needed for Monte Carlo error ``max_mcse`` on the actual level."""
    alpha = 1.0 - actual
    return int(np.ceil(alpha * actual / max_mcse**2 - 1e-9))


def _check_target(metric: str, target: Any) -> float:
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        raise TypeError(
            f"target={target!r} must be a real number in [0, 1] (the range of metric {metric!r})"
        )
    t = float(target)
    if not (0.0 <= t <= 1.0) or not np.isfinite(t):
        raise ValueError(f"target={target!r} is outside the range [0, 1] of metric {metric!r}")
    return t


def _resolve_rates(
    rates: Any, pilot: Any, a: np.ndarray, b: np.ndarray, k: int
) -> tuple[np.ndarray, str]:
    if rates is None:
        rates = "pilot" if pilot is not None else "prior"
    if isinstance(rates, str):
        check_option(rates, "rates", ("pilot", "prior"))
        if rates == "prior":
            return a / (a + b), "prior"
        if pilot is None:
            raise ValueError(
                "rates='pilot' needs pilot=(n, h), the pilot labels and positives per stratum"
            )
        try:
            pn, ph = (np.asarray(v, dtype=np.float64) for v in pilot)
        except (TypeError, ValueError):
            raise ValueError(
                f"pilot={pilot!r}; allowed: a pair (n, h) of per-stratum counts"
            ) from None
        if pn.shape != (k,) or ph.shape != (k,) or (ph < 0).any() or (ph > pn).any():
            raise ValueError(f"pilot counts must have shape ({k},) with 0 <= h <= n")
        return (a + ph) / (a + b + pn), "pilot"
    arr = np.asarray(rates, dtype=np.float64)
    if arr.shape != (k,) or not np.all((arr >= 0) & (arr <= 1)):
        raise ValueError(
            f"rates has shape {arr.shape}; allowed: 'pilot', 'prior' or {k} "
            "per-stratum rates in [0, 1]"
        )
    return arr, "user"


def _planning(strata: Any, sizes: Any, predicted: Any) -> tuple[np.ndarray, np.ndarray]:
    if strata is not None:
        if sizes is not None or predicted is not None:
            raise ValueError("give either strata or (sizes, predicted), not both")
        return np.asarray(strata.sizes, dtype=np.int64), np.asarray(strata.predicted, dtype=bool)
    if sizes is None or predicted is None:
        raise ValueError(
            "give strata, or a planning population as sizes= and predicted= "
            "(items and predicted class per stratum)"
        )
    s = np.asarray(sizes)
    p = np.asarray(predicted)
    if s.ndim != 1 or s.size == 0 or not np.issubdtype(s.dtype, np.integer) or (s < 1).any():
        raise ValueError(f"sizes={sizes!r}; allowed: positive integer stratum sizes (1-D)")
    if p.shape != s.shape:
        raise ValueError(
            f"predicted has shape {p.shape}; allowed: one bool per stratum (shape {s.shape})"
        )
    return s.astype(np.int64), p.astype(bool)


def calibrate_sequential(
    strata: Any = None,
    *,
    sizes: Any = None,
    predicted: Any = None,
    metric: str = "f1",
    target: float = 0.8,
    design: Any = "random",
    design_options: dict[str, Any] | None = None,
    batch_size: int = 20,
    budget: int = 2000,
    looks: Any = None,
    prior: Any = "jeffreys",
    rates: Any = None,
    pilot: Any = None,
    truth_metric: float | None = None,
    positives: Any = None,
    rates_label: str | None = None,
    finite_population: bool = True,
    n_sims: int = 10_000,
    max_mcse: float = 0.005,
    nominal: Any = None,
    rng: RNGLike = None,
) -> SequentialCalibration:
    """Simulate repeated acceptance testing under the least-favourable truth.

    Parameters
    ----------
    strata : Strata, optional
        The audit's strata; or give a planning population as ``sizes`` and ``predicted``.
    metric : str
        One of :data:`SUPPORTED_METRICS`.
    target : float
        The acceptance target, in the metric's range [0, 1].
    design : str or design object
        Sampling design (:func:`bayes_eval.designs.make_design`). ``"random"``,
        ``"proportional"`` and ``"equal"`` are vectorised; a design with
        ``allocate_many`` (every other registered design) is called once per batch for all
        simulated audits at once; any other design object is called once per simulated audit
        and batch, each audit with its own copy of the design (slower, same statistics).
    batch_size, budget : int
        Labels per batch and the most labels the audit may use. A design with a
        ``batch_schedule(round, K)`` (``"online_optimal"``, ``"opt_a1"``, ``"opt_a2"``) sets
        its own batch sizes, as :meth:`bayes_eval.Audit.run` does, and ``batch_size`` is not
        used; the last batch is cut to the budget.
    looks : array of int, optional
        Label counts at which the rule looks (multiples of ``batch_size`` or the budget, at
        most ``budget``); default after every batch. With a ``batch_schedule`` any increasing
        counts up to the budget are allowed, each taken at the end of the batch that reaches
        it (``looks`` of the result are those batch ends).
    prior : prior spec
        The audit's Beta prior (:func:`bayes_eval.priors.resolve_prior`).
    rates : "pilot", "prior" or array, optional
        Plausible stratum rates for the least-favourable truth; default the pilot's posterior
        means when ``pilot`` is given, else the prior means.
    pilot : (n, h), optional
        Pilot labels and positives per stratum.
    truth_metric : float, optional
        Metric of the simulated population; default the target (the least favourable case).
        Set it above the target to measure labels-to-accept instead of false accepts.
    rates_label : str, optional
        How user-given ``rates`` were obtained (recorded as ``rates_source``; e.g. ``"scores"``).
    positives : array of int, optional
        Simulate this population instead (positives per stratum, e.g. the known truth of a
        benchmark population); ``rates`` and ``truth_metric`` are then not used.
    finite_population : bool
        As in :func:`bayes_eval.estimate`.
    n_sims : int
        Simulated audits.
    max_mcse : float
        Largest Monte Carlo standard error allowed for an actual level derived from this
        calibration (:meth:`SequentialCalibration.corrected_level` refuses otherwise).
    nominal : array, optional
        Grid of nominal levels for ``curve``.
    rng : int, Generator or None

    Returns
    -------
    SequentialCalibration

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Section 3.1, Figure 4).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.sequential import calibrate_sequential
    >>> cal = calibrate_sequential(sizes=np.array([5000, 1000]), predicted=np.array([0, 1]),
    ...                            metric="f1", target=0.7, rates=[0.05, 0.7], budget=400,
    ...                            n_sims=2000, rng=0)
    >>> round(cal.actual_level(0.95), 2) < 0.9       # naive peeking every 20 labels
    True
    """
    sizes_, pred_ = _planning(strata, sizes, predicted)
    k = sizes_.shape[0]
    check_option(metric, "metric", SUPPORTED_METRICS)
    target = _check_target(metric, target)
    truth_value = target if truth_metric is None else _check_target(metric, truth_metric)
    n_sims = check_positive_int(n_sims, "n_sims")
    if n_sims < 100:
        raise ValueError(
            f"n_sims={n_sims} is too few to estimate a coverage curve; allowed: >= 100"
        )
    if (
        isinstance(max_mcse, bool)
        or not isinstance(max_mcse, numbers.Real)
        or not (0 < max_mcse < 0.5)
    ):
        raise ValueError(f"max_mcse={max_mcse!r}; allowed: a number in (0, 0.5)")
    if not isinstance(finite_population, bool | np.bool_):
        raise TypeError(f"finite_population={finite_population!r} must be True or False")
    dsg = make_design(design, **(design_options or {}))
    design_name = design if isinstance(design, str) else getattr(dsg, "name", "custom")
    batches, schedule = _batch_plan(dsg, batch_size, budget, looks, int(sizes_.sum()), k)
    a, b, prior_desc = resolve_prior(prior, k)
    r, source = _resolve_rates(rates, pilot, a, b, k)
    if rates_label is not None and source == "user":
        source = str(rates_label)
    grid = DEFAULT_NOMINAL if nominal is None else np.asarray(nominal, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid > 0) & (grid < 1)):
        raise ValueError("nominal must be a 1-D array of levels in the open interval (0, 1)")
    if positives is None:
        positives = least_favourable_truth(sizes_, pred_, r, metric=metric, value=truth_value)
    else:
        positives = np.asarray(positives)
        if (
            positives.shape != (k,)
            or not np.issubdtype(positives.dtype, np.integer)
            or ((positives < 0) | (positives > sizes_)).any()
        ):
            raise ValueError(f"positives must be {k} integers with 0 <= positives_k <= N_k")
        positives = positives.astype(np.int64)
        source = "given population"
    gen = as_generator(rng)
    prob = _simulate_paths(
        sizes=sizes_,
        predicted=pred_,
        positives=positives,
        prior_a=a,
        prior_b=b,
        metric=metric,
        target=target,
        design=dsg,
        design_name=design_name,
        batch_size=int(batch_size),
        schedule=schedule,
        finite_population=bool(finite_population),
        n_sims=n_sims,
        rng=gen,
        batches=batches,
    )
    curve = _curve(prob, schedule, grid)
    truth = xr.Dataset(
        {
            "N": ("stratum", sizes_),
            "predicted": ("stratum", pred_.astype(np.int8)),
            "rate": ("stratum", r),
            "positives": ("stratum", positives),
        },
        coords={"stratum": np.arange(k)},
    )
    tm = metric_of_positives(metric, positives, sizes_, pred_)
    curve.attrs.update(
        {
            "metric": metric,
            "target": target,
            "truth_metric": tm,
            "design": design_name,
            "prior": prior_desc,
            "n_sims": n_sims,
        }
    )
    return SequentialCalibration(
        curve=curve,
        prob=prob.astype(np.float32),
        looks=schedule,
        truth=truth,
        truth_metric=tm,
        metric=metric,
        target=target,
        design=design_name,
        prior=prior_desc,
        rates_source=source,
        finite_population=bool(finite_population),
        n_sims=n_sims,
        max_mcse=float(max_mcse),
    )


def _curve(prob: np.ndarray, schedule: np.ndarray, grid: np.ndarray) -> xr.Dataset:
    mx = prob.max(axis=1)
    s = prob.shape[0]
    accept = (mx[:, None] >= grid[None, :]).mean(axis=0)
    mcse = np.sqrt(np.maximum(accept * (1 - accept), 1.0 / s) / s)
    first = _first_crossing(prob, grid)
    used = np.where(
        first < schedule.shape[0], schedule[np.minimum(first, schedule.shape[0] - 1)], schedule[-1]
    )
    return xr.Dataset(
        {
            "accept_rate": ("nominal", accept),
            "actual": ("nominal", 1.0 - accept),
            "mcse": ("nominal", mcse),
            "mean_labels": ("nominal", used.mean(axis=0)),
        },
        coords={"nominal": grid},
    )


#: bumped whenever the simulated procedure changes, so that cached calibrations are not reused
CALIBRATION_VERSION = 2


def calibration_key(**parts: Any) -> str:
    """A stable hash of the things a calibration depends on (for caching), including
    :data:`CALIBRATION_VERSION`."""

    def norm(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in sorted(v.items())}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v if isinstance(v, str | int | float | bool | type(None)) else repr(v)

    parts = {**parts, "calibration_version": CALIBRATION_VERSION}
    text = json.dumps({k: norm(v) for k, v in sorted(parts.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


# -------------------------------------------------------------------- anytime-valid comparison
def compare_anytime(
    sizes: Any,
    predicted: Any,
    *,
    metric: str = "accuracy",
    target: float = 0.8,
    delta: float = 0.05,
    rates: Any = None,
    prior: Any = "jeffreys",
    batch_size: int = 20,
    budget: int = 2000,
    level: float = 0.95,
    n_sims: int = 2000,
    calibration_sims: int | None = None,
    grid_size: int = 400,
    rng: RNGLike = None,
) -> xr.Dataset:
    """Calibrated Bayesian acceptance against an anytime-valid confidence sequence.

    For a metric that is the mean of a 0/1 value over a fixed sampling frame (``"accuracy"`` and
    ``"prevalence"`` over the whole population, ``"precision"`` over the predicted positives,
    ``"npv"`` over the predicted negatives) three rules watch the same simple random samples
    without replacement, looking after every batch:

    * ``bayes_naive``: accept when ``P(metric >= target) >= level`` (Webber's rule);
    * ``bayes_calibrated``: the same at the corrected nominal level of
      :func:`calibrate_sequential` (design ``"random"``);
    * ``confidence_sequence``: accept when the betting confidence-sequence lower bound
      (:mod:`bayes_eval._confseq`, Waudby-Smith & Ramdas 2020) at ``1 - level`` exceeds the target;
      valid under continuous monitoring without any calibration.

    They are run with the truth at the target (``truth="at_target"``: every acceptance is false)
    and at ``target + delta`` (``"above_target"``: labels-to-accept).

    Returns
    -------
    xarray.Dataset
        Over ``(procedure, truth)``: ``accept_rate``, ``accept_mcse``, ``mean_labels`` (budget
        when never accepting), ``labels_mcse``; attrs: ``level_used`` of the calibrated rule.
    """
    check_option(metric, "metric", ("accuracy", "precision", "prevalence", "npv"))
    sizes_, pred_ = _planning(None, sizes, predicted)
    target = _check_target(metric, target)
    if (
        isinstance(delta, bool)
        or not isinstance(delta, numbers.Real)
        or not (0 < target + float(delta) <= 1)
    ):
        raise ValueError(f"delta={delta!r}; allowed: target + delta in (target, 1]")
    level = check_level(level, "level")
    n_sims = check_positive_int(n_sims, "n_sims")
    gen = as_generator(rng)
    a, b, _ = resolve_prior(prior, sizes_.shape[0])
    r, _ = _resolve_rates(rates, None, a, b, sizes_.shape[0])
    keep = {"precision": pred_, "npv": ~pred_}.get(metric, np.ones(pred_.shape, dtype=bool))
    if not keep.any():
        raise ValueError(f"metric {metric!r} needs strata on its side of the threshold")
    sizes_, pred_, r, a, b = sizes_[keep], pred_[keep], r[keep], a[keep], b[keep]
    schedule = _as_schedule(batch_size, budget, None, int(sizes_.sum()))
    cal = calibrate_sequential(
        sizes=sizes_,
        predicted=pred_,
        metric=metric,
        target=target,
        design="random",
        batch_size=batch_size,
        budget=budget,
        prior=(a, b),
        rates=r,
        n_sims=calibration_sims or max(n_sims, required_sims(level, 0.005)),
        rng=gen,
    )
    gamma = cal.corrected_level(level)
    w, c = linear_form(metric, target, pred_, sizes_)
    n_pop = int(sizes_.sum())
    stratum_of = np.repeat(np.arange(sizes_.shape[0]), sizes_)
    procs = ("bayes_naive", "bayes_calibrated", "confidence_sequence")
    truths = ("at_target", "above_target")
    acc = np.zeros((3, 2))
    acc_se = np.zeros((3, 2))
    lab = np.zeros((3, 2))
    lab_se = np.zeros((3, 2))
    for ti, value in enumerate((target, target + float(delta))):
        positives = least_favourable_truth(sizes_, pred_, r, metric=metric, value=value)
        labels = np.zeros(n_pop, dtype=np.int8)
        start = np.concatenate([[0], np.cumsum(sizes_)[:-1]])
        for k in range(sizes_.shape[0]):
            labels[start[k] : start[k] + positives[k]] = 1
        value_of = labels.astype(np.float64)
        if metric == "accuracy":
            value_of = (labels == pred_[stratum_of]).astype(np.float64)
        elif metric == "npv":
            value_of = 1.0 - value_of
        idx = np.empty((n_sims, budget), dtype=np.int64)
        for i in range(n_sims):
            idx[i] = gen.choice(n_pop, budget, replace=False)
        st = stratum_of[idx]
        lb = labels[idx]
        kk = sizes_.shape[0]
        n = np.zeros((n_sims, kk), dtype=np.int64)
        h = np.zeros((n_sims, kk), dtype=np.int64)
        prob = np.empty((n_sims, schedule.size))
        rows = np.repeat(np.arange(n_sims), batch_size)
        for j, upto in enumerate(schedule):
            sl = slice(upto - batch_size, upto)
            np.add.at(n, (rows, st[:, sl].ravel()), 1)
            np.add.at(h, (rows, st[:, sl].ravel()), lb[:, sl].ravel())
            prob[:, j] = prob_linear_ge(n, h, a, b, sizes_, w, c, True)
        # only "bound > target" matters: a coarse grid far below the target, a fine one
        # (step 1 / grid_size) near it, ending two steps above it
        step = 1.0 / grid_size
        near = max(target - 0.1, 0.0)
        grid = np.unique(
            np.concatenate([np.linspace(0.0, near, 21), np.arange(near, target + 2.5 * step, step)])
        )
        lower = betting_lower(value_of[idx], n_pop, 1.0 - level, grid=grid, at=schedule)
        running = np.maximum.accumulate(prob, axis=1)
        hits = (running >= level, running >= gamma, np.maximum.accumulate(lower, axis=1) > target)
        for pi, hit in enumerate(hits):
            ever = hit.any(axis=1)
            first = np.where(ever, hit.argmax(axis=1), schedule.size - 1)
            used = schedule[first].astype(np.float64)
            acc[pi, ti] = ever.mean()
            acc_se[pi, ti] = np.sqrt(max(acc[pi, ti] * (1 - acc[pi, ti]), 1 / n_sims) / n_sims)
            lab[pi, ti] = used.mean()
            lab_se[pi, ti] = used.std(ddof=1) / np.sqrt(n_sims)
    dims = ("procedure", "truth")
    return xr.Dataset(
        {
            "accept_rate": (dims, acc),
            "accept_mcse": (dims, acc_se),
            "mean_labels": (dims, lab),
            "labels_mcse": (dims, lab_se),
        },
        coords={"procedure": list(procs), "truth": list(truths)},
        attrs={
            "metric": metric,
            "target": target,
            "delta": float(delta),
            "level": level,
            "level_used": gamma,
            "budget": int(budget),
            "batch_size": int(batch_size),
            "n_sims": n_sims,
        },
    )


def betting_lower(x: np.ndarray, population_size: int, alpha: float, **kw: Any) -> np.ndarray:
    """Anytime-valid lower bounds (see :func:`bayes_eval._confseq.betting_lower_bound`)."""
    from ._confseq import betting_lower_bound

    return betting_lower_bound(x, population_size, alpha, **kw)


# -------------------------------------------------------------------- Webber's three scenarios
SCENARIOS = ("variable_test", "variable_training", "variable_both")


def _fit_predict(
    estimator: Any, X: np.ndarray, y: np.ndarray, train: np.ndarray, target_rows: np.ndarray
) -> np.ndarray | None:
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    yt = y[train]
    if yt.min() == yt.max():
        return None  # one class only: no classifier yet
    with threadpool_limits(1):  # many small fits: BLAS threads only add overhead
        model = clone(estimator).fit(X[train], yt)
        return np.asarray(model.predict(X[target_rows])).astype(bool)


def _side_counts(pred: np.ndarray, y: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sizes, positives (truth set) or labels/positives (test set) by predicted side."""
    p = pred[rows]
    yy = y[rows]
    n = np.array([np.sum(~p), np.sum(p)], dtype=np.int64)
    h = np.array([np.sum(yy[~p]), np.sum(yy[p])], dtype=np.int64)
    return n, h


def webber_scenarios(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    metric: str = "f1",
    scenarios: tuple[str, ...] = SCENARIOS,
    n_runs: int = 20,
    paths_per_run: int = 50,
    step: int = 20,
    train_size: int = 1000,
    test_size: int = 1067,
    budget: int = 3000,
    truth_fraction: float = 0.5,
    target_fraction: float = 0.9,
    prior: Any = "jeffreys",
    nominal: Any = None,
    rng: RNGLike = None,
) -> xr.Dataset:
    """Actual vs nominal confidence of the naive repeated test in Webber et al.'s three scenarios.

    The data are split at random in every run into a *truth set* (``truth_fraction`` of the rows:
    test items are drawn from it and the true metric of a classifier is its metric on it, as
    Webber et al. drew test sets from their 700,000-document truth set) and a training pool.
    Every ``step`` labels the posterior ``P(metric >= target)`` of the current classifier is
    computed from its test set, post-stratified by predicted side over the truth set (the
    beta-binomial model of :mod:`bayes_eval.posterior`, finite population), and the developer
    stops at the first look where it reaches the nominal level.

    ``"variable_test"`` (Section 3.1)
        Classifier trained once on ``train_size`` items; the test set grows by ``step`` up to
        ``budget``; the target is the classifier's true metric (Webber: "infinitesimally above"),
        so any acceptance is false. ``paths_per_run`` test sequences per trained classifier.
    ``"variable_training"`` (Section 3.2)
        Fixed test set of ``test_size``; the training set grows by ``step`` (classifier refitted)
        until ``budget`` labels in all; target ``target_fraction`` × the best true metric of the
        run; a stop is premature (false) when the true metric at the stop is below the target.
    ``"variable_both"`` (Section 3.3)
        ``step / 2`` labels to training and ``step / 2`` to test per look, up to ``budget``.

    Parameters
    ----------
    estimator : scikit-learn classifier
        Cloned and refitted (``sklearn.base.clone``); scikit-learn is needed for this function
        only (optional dependency).
    X : array (n, p)
    y : array (n,) of 0/1
    metric : str
        One of :data:`SUPPORTED_METRICS`.

    Returns
    -------
    xarray.Dataset
        Over ``(scenario, nominal)``: ``false_accept`` (premature or false acceptance rate),
        ``actual`` (= 1 - ``false_accept``) and ``mcse``; over ``scenario``: ``corrected`` (the
        smallest grid level from which on ``false_accept <= 0.05``) and ``runs`` (independent
        runs behind each scenario).

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Sections 3.1-3.4, Figure 4).
    """
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
        raise ImportError(
            "webber_scenarios needs scikit-learn (the optional extra 'bayes-eval[sklearn]'): "
            "pip install scikit-learn"
        ) from exc
    check_option(metric, "metric", SUPPORTED_METRICS)
    if isinstance(scenarios, str):
        scenarios = (scenarios,)
    for s_name in scenarios:
        check_option(s_name, "scenarios", SCENARIOS)
    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y)
    if Xa.ndim != 2 or ya.ndim != 1 or Xa.shape[0] != ya.shape[0]:
        raise ValueError(f"X has shape {Xa.shape} and y {ya.shape}; allowed: X (n, p), y (n,)")
    if not np.isin(ya, (0, 1)).all():
        raise ValueError("y must hold 0/1 labels")
    ya = ya.astype(np.int64)
    for name, v in (
        ("n_runs", n_runs),
        ("paths_per_run", paths_per_run),
        ("step", step),
        ("train_size", train_size),
        ("test_size", test_size),
        ("budget", budget),
    ):
        check_positive_int(v, name)
    truth_fraction = check_level(truth_fraction, "truth_fraction")
    target_fraction = check_level(target_fraction, "target_fraction")
    n_all = Xa.shape[0]
    n_truth = int(n_all * truth_fraction)
    pool_size = n_all - n_truth
    if budget > n_truth or budget > pool_size:
        raise ValueError(
            f"budget={budget} is more than the truth set ({n_truth}) or the "
            f"training pool ({pool_size}); allowed: at most {min(n_truth, pool_size)}"
        )
    if test_size >= budget or train_size > pool_size:
        raise ValueError(
            f"test_size={test_size} must be below budget={budget} and "
            f"train_size={train_size} at most the pool ({pool_size})"
        )
    grid = DEFAULT_NOMINAL if nominal is None else np.asarray(nominal, dtype=np.float64)
    gen = as_generator(rng)
    a, b, _ = resolve_prior(prior, 2)
    predicted = np.array([False, True])
    false_acc = np.full((len(scenarios), grid.size), np.nan)
    runs_n = np.zeros(len(scenarios), dtype=np.int64)
    for si, scen in enumerate(scenarios):
        events = []  # per run/path: boolean over grid, premature/false acceptance
        for _ in range(n_runs):
            perm = gen.permutation(n_all)
            truth_rows, pool = perm[:n_truth], perm[n_truth:]
            if scen == "variable_test":
                pred = _fit_predict(estimator, Xa, ya, pool[:train_size], np.arange(n_all))
                if pred is None:
                    continue
                sizes, pos = _side_counts(pred, ya, truth_rows)
                keep = sizes > 0
                tm = metric_of_positives(metric, pos[keep], sizes[keep], predicted[keep])
                prob = _simulate_paths(
                    sizes=sizes[keep],
                    predicted=predicted[keep],
                    positives=pos[keep],
                    prior_a=a[keep],
                    prior_b=b[keep],
                    metric=metric,
                    target=tm,
                    design=make_design("random"),
                    design_name="random",
                    batch_size=step,
                    schedule=np.arange(step, budget + 1, step),
                    finite_population=True,
                    n_sims=paths_per_run,
                    rng=gen,
                )
                events.extend(prob.max(axis=1)[:, None] >= grid[None, :])
                continue
            test_rows = truth_rows[:budget]
            if scen == "variable_training":
                looks = np.arange(step, budget - test_size + 1, step)
                n_test = np.full(looks.size, test_size)
                n_train = looks
            else:
                half = step // 2
                looks = np.arange(1, budget // step + 1)
                n_test = looks * (step - half)
                n_train = looks * half
            truth_j = np.full(looks.size, np.nan)
            counts = []
            for j in range(looks.size):
                pred = _fit_predict(estimator, Xa, ya, pool[: n_train[j]], np.arange(n_all))
                if pred is None:
                    counts.append(None)
                    continue
                sizes, pos = _side_counts(pred, ya, truth_rows)
                n_k, h_k = _side_counts(pred, ya, test_rows[: n_test[j]])
                truth_j[j] = metric_of_positives(metric, pos, sizes, predicted)
                counts.append((sizes, n_k, h_k))
            if np.all(np.isnan(truth_j)):
                continue
            target = target_fraction * np.nanmax(truth_j)
            prob = np.zeros(looks.size)
            for j, cnt in enumerate(counts):
                if cnt is None:
                    continue
                sizes, n_k, h_k = cnt
                keep = sizes > 0
                w, c = linear_form(metric, target, predicted[keep], sizes[keep])
                prob[j] = prob_linear_ge(
                    n_k[keep], h_k[keep], a[keep], b[keep], sizes[keep], w, c, True
                )
            first = _first_crossing(prob[None, :], grid)[0]
            stopped = first < looks.size
            early = stopped & (
                np.nan_to_num(truth_j, nan=-1.0)[np.minimum(first, looks.size - 1)] < target
            )
            events.append(early)
        if events:
            ev = np.asarray(events, dtype=np.float64)
            false_acc[si] = ev.mean(axis=0)
            runs_n[si] = ev.shape[0]
    mcse = np.sqrt(
        np.maximum(false_acc * (1 - false_acc), 1.0 / np.maximum(runs_n, 1)[:, None])
        / np.maximum(runs_n, 1)[:, None]
    )

    def _corrected(fa: np.ndarray) -> float:
        # smallest grid level from which on every level keeps false_accept <= 0.05
        ok = np.logical_and.accumulate((fa <= 0.05)[::-1])[::-1]
        return float(grid[np.argmax(ok)]) if ok.any() else float("nan")

    corrected = np.array([_corrected(fa) for fa in false_acc])
    return xr.Dataset(
        {
            "false_accept": (("scenario", "nominal"), false_acc),
            "actual": (("scenario", "nominal"), 1.0 - false_acc),
            "mcse": (("scenario", "nominal"), mcse),
            "corrected": ("scenario", corrected),
            "runs": ("scenario", runs_n),
        },
        coords={"scenario": list(scenarios), "nominal": grid},
        attrs={
            "metric": metric,
            "step": step,
            "budget": budget,
            "train_size": train_size,
            "test_size": test_size,
            "n_runs": n_runs,
            "paths_per_run": paths_per_run,
            "target_fraction": target_fraction,
            "estimator": repr(estimator),
        },
    )
