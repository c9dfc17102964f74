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
the integer population is at most the target (it is reported as ``truth_metric``; the
worst-case family of :mod:`~bayes_eval.sequential.truths` keeps it strictly below).

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

**Worst case over a family of truths.** One least-favourable configuration is not enough: with
rates flat within each predicted side the rule calibrated at score-shaped rates accepted 23-27% of
audits at the target. :func:`correction_for` (the one calibration path) therefore simulates the
audit at every truth of :func:`truth_family` (flat, score-shaped, shifted, compressed, sharpened,
non-monotone, reversed, extreme, a bump in one region of the predicted negatives, flat on the
predicted negatives only, posterior draws, a blind spot's floor under the predicted negatives;
:mod:`bayes_eval.sequential.truths`) with the
model the audit runs, and fits a look-dependent boundary (:mod:`bayes_eval.sequential.boundary`)
whose false-accept rate at the worst truth is at most :math:`\\alpha`
(:func:`calibrate_worst_case`). :func:`calibrate_sequential` below remains the single-truth
simulator (coverage curves, Webber et al.'s scenarios).

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt`` (sequential
testing bias; Figure 4; nominal 99.5% / 97% / 98% for actual 95%).
Waudby-Smith & Ramdas (2020), *Confidence sequences for sampling without replacement*
(the anytime-valid comparison, :mod:`bayes_eval.sequential._confseq`).
"""

from ._linear import (
    SUPPORTED_METRICS,
    approx_prob_at_least,
    least_favourable_truth,
    linear_form,
    prob_linear_ge,
)
from .anytime import betting_lower, compare_anytime
from .boundary import Boundary, fit_boundary
from .calibration import (
    CALIBRATION_VERSION,
    DEFAULT_NOMINAL,
    SequentialCalibration,
    _as_schedule,
    calibrate_sequential,
    calibration_key,
    geometric_looks,
    required_sims,
)
from .correction import Correction, TruthRate, correction_for
from .robust import WorstCaseCalibration, calibrate_worst_case
from .truths import PROFILES, Truth, truth_family

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_NOMINAL",
    "PROFILES",
    "SUPPORTED_METRICS",
    "Boundary",
    "Correction",
    "SequentialCalibration",
    "Truth",
    "TruthRate",
    "WorstCaseCalibration",
    "_as_schedule",
    "approx_prob_at_least",
    "betting_lower",
    "calibrate_sequential",
    "calibrate_worst_case",
    "calibration_key",
    "compare_anytime",
    "correction_for",
    "fit_boundary",
    "geometric_looks",
    "least_favourable_truth",
    "linear_form",
    "prob_linear_ge",
    "required_sims",
    "truth_family",
]
