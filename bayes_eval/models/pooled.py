r"""Score-informed, K-invariant pooled model of the stratum positive rates (no MCMC).

**Model.** Item ``i`` with covariate :math:`x_i` (the logit of a probability score, or a
standardised margin; :mod:`bayes_eval.models._profile`) on predicted side :math:`\hat y_i` has the
calibration curve :math:`\eta(x, \hat y) = \alpha + \beta\,(x - x_0) + \gamma\,\hat y`, where
:math:`x_0` is the population median of :math:`x`. Stratum k's curve rate is the mean of the
curve over its own items (the histogram :math:`(x_{kb}, w_{kb})`), written as an effective logit

.. math::

    \bar\eta_k = \operatorname{logit} \sum_b w_{kb}\,\operatorname{expit}\eta(x_{kb}, \hat y_k).

A calibrated probability score is :math:`\alpha = x_0, \beta = 1, \gamma = 0`; a shift moves
:math:`\alpha`, a compression :math:`\beta`, a score flat within each side (or uninformative)
gives :math:`\beta = 0` with the side offset :math:`\gamma`. The truth deviates from the curve at
two levels (:mod:`bayes_eval.models._cells`):

.. math::

    \delta_g \sim \mathcal N\bigl(0, \tau^2 / m_g\bigr), \qquad
    \theta_k \mid \delta \sim \mathrm{Beta}\bigl(c_k \mu_k, c_k (1 - \mu_k)\bigr), \quad
    \mu_k = \operatorname{expit}(\bar\eta_k + \delta_{g(k)}), \quad
    c_k + 1 = \frac{1}{\rho^2 \mu_k (1 - \mu_k)},

where :math:`g(k)` is the *score cell* of stratum k (each predicted side is cut into ``cells``
fixed fractions :math:`m_g` of its items, groups of adjacent strata), :math:`\delta_g` is a
logit-scale white noise on the cells and :math:`\rho` (``nugget_sd``) the small relative sd of a
stratum around its cell. :math:`h_k \mid \theta_k \sim \mathrm{Binomial}(n_k, \theta_k)` and
``P_k = h_k + Binomial(N_k - n_k, theta_k)`` (Webber et al.'s finite-population completion).

**Why these choices (K-invariance).** (i) The curve is defined on items, not strata, so its prior
is the same whatever the strata. (ii) The deviation that carries the prior variance of a region's
positives lives on cells whose size does not depend on the stratification (a fixed fraction of a
side): with 4 or 200 strata the same cells get the same logit-scale sd
:math:`\tau/\sqrt{m_g}`, and the variance of a whole side's logit rate is :math:`\tau^2` for any
number of cells. Fine strata share their cell's deviation, so they do not each need a huge
variance (the earlier stratum-level white noise had to be capped there, and 50-100 strata
collapsed: recall coverage 0.17-0.49). (iii) The residual Beta has mean exactly :math:`\mu_k` and
:math:`a_k \ge 1/\rho^2 - 1`, so a needle stratum has no spike at 0 that a run of zero labels
could select.

Hyperpriors (:class:`Hyperpriors`, defaults shown). For probability scores the two side
intercepts are **mean-anchored**: with :math:`a_s(\beta)` the intercept at which the curve's mean
over side s's items equals the side's mean score, :math:`\alpha + \gamma - a_1(\beta)` is
Student-t with 1 degree of freedom whose curvature at 0 is that of :math:`N(0, 2^2)` (scale
:math:`2\sqrt 2`), and :math:`\alpha - a_0(\beta)` the same below 0 and :math:`N(0, 2^2)` above
(:func:`bayes_eval.models._prior.intercept_log_density`: above the predicted negatives' anchor the
sceptical lean below pushes up harder than a t resists). So the prior of each side's positives
(FN, TP) does not depend on the slope, the strata or the other side, and a score that is flat
within each side (:math:`\beta = 0`) is as plausible a priori as a calibrated one with the same
side means (an anchor at the population median put a flat truth 2.7 prior sds away: recall bounds
covered 0.775 on flat scores at 2 %). The tails are heavy because a classifier trained on enriched
data and run on a needle has scores wrong by orders of magnitude (``_prior.intercept_log_density``).
The prior is then made **sceptical of the classifier**: it is multiplied by
:math:`\operatorname{expit}(\ell_0)\operatorname{expit}(-\ell_1)` for the logits
:math:`\ell_s` of the mean curve rates of each side's *unlabelled* items
(:func:`bayes_eval.models._prior.remainder_lean`: the unknown positives are there). On the logit
scale this lean moves the prior of the predicted negatives' (small) rate up (by :math:`2^2` logits
under a normal of sd 2; the t's bounded pull lets it go further, until the labels stop it) and the
predicted positives' rate down: towards more missed positives and more false positives, so lower
bounds stay conservative where the labels cannot measure a side and labels overrule it where they
can.
Without it flat and uninformative scores at 2 % cover only 0.89-0.91 (``bench_pooled.py``); its
price is on needles: F1 on synthetic 0.05 % needles is underestimated by 0.07-0.10 at 1,000
labels (``bench_default_needles.py``). Where the predicted positives' rate is tiny the factor on
that side is negligible (:math:`\operatorname{expit}(-\ell_1) \approx 1`).
:math:`\beta \sim N(1, 1.5^2)` (unconstrained: a decreasing or flat curve is learned, and the
prior bounds the slope under quasi-separation), :math:`\log\tau \sim N(\log 0.5, 1)`, 8 cells
per side, :math:`\rho = 0.3`. Margin scores (no calibration anchor) keep independent normals:
:math:`\alpha \sim N(0, 5^2)`, :math:`\gamma \sim N(0, 2^2)`.

**The floor (session 24).** On the predicted negatives a stratum's curve rate is floored,
:math:`\epsilon + (1 - \epsilon)\operatorname{expit}(\bar\eta_k)`, with
:math:`\operatorname{logit}\epsilon \sim N(m_0 - 3, 2^2)` and :math:`m_0` the logit of the
predicted negatives' mean rate under the prior's centre curve (their mean score for probability
scores; :func:`bayes_eval.models._prior.floor_reference`): positives the scores do not see (a
topic wider than the one the classifier was trained for, a blind subgroup) spread over the
negatives' scores at a rate that does not fall with the score, and the curve alone, fitted where
the labels are, shrinks the lowest-score strata's deviation to the curve. On a real widened topic
(``benchmarks/heldout_populations.py``: 2 % positives, 23 % of them of a kind the boosted
classifier never saw, 19,733 of 28,524 items tied at the lowest score) the 95 % recall bound
covered 0.513 +- 0.029 at 1,000 labels without the floor. The floor is on the predicted negatives
only: on the predicted positives it raised a weak classifier's tiny rates there and broke the
precision bound of real needles (0.900 on held-out flights, prototype of session 23). Its price
is on needles, where nothing bounds a floor of a few in 10,000 on 10^5 negatives but the prior:
the F1 posterior mean of real needles moves down (RMSE +20-60 %; measured in
``benchmarks/results/bench_heldout.txt``, ``bench_default_needles.txt``).

**Inference (deterministic).** Given :math:`\phi = (\alpha, \beta, \gamma, \log\tau,
\operatorname{logit}\epsilon)` the cells
are independent; each cell's marginal likelihood is a 1-D integral over :math:`\delta_g` of a
product of beta-binomials, computed by adaptive Gauss-Hermite quadrature with 5 nodes (3 while
searching for the mode). The 5-D hyperposterior is found by damped Newton (finite differences,
vectorised over batch axes) and integrated by self-normalised importance sampling on a fixed
randomised quasi-Monte Carlo design: 512 Student-t(5) nodes from a scrambled Sobol' sequence
around the Laplace approximation widened 1.5x (weights truncated at :math:`\sqrt S` times their
mean, Ionides 2008; its error: :mod:`~bayes_eval.models._laplace`; 128 plain Monte Carlo nodes
until session 17 made a real needle's precision bound cover 0.923).
Joint draws pick a hyper-node by its weight, a quadrature node of every cell's deviation by its
conditional weight, and then every :math:`\theta_k` from its exact conditional Beta, so the
strata stay dependent through the shared curve and cells; :func:`prob_linear_ge` mixes the
Pearson type III law of :math:`\Pr(\sum_k w_k P_k \ge c)` over the same nodes (exact first
three cumulants).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata; smoothing sparse
strata towards the scores). Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Monte
Carlo beta-binomial bounds, finite population). Ionides (2008), "Truncated importance sampling",
JCGS 17. Liu & Pierce (1994), "A note on Gauss-Hermite quadrature", Biometrika 81.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from .._protocols import StrataLike
from .._validation import RNGLike, as_generator
from . import _linear_form
from ._cells import CellLayout
from ._hyperposterior import hyper_stage, log_post
from ._laplace import importance_weights
from ._linear_form import LinearFormNodes
from ._prior import labels_weight
from ._profile import ScoreProfile, score_profile_of

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "Hyperpriors",
    "LinearFormNodes",
    "PooledFit",
    "UninformativeScoresWarning",
    "beta_approximation",
    "draw_theta",
    "fit_pooled",
    "linear_form_nodes",
    "pooled_model",
    "prob_linear_ge",
]


class UninformativeScoresWarning(UserWarning):
    """The scores are constant, or the labels do not show that they rank the items (a flat
    calibration curve): rates lean on each predicted side's pooled rate. With few positives this
    can be a weak classifier rather than uninformative scores."""


@dataclass(frozen=True, slots=True)
class Hyperpriors:
    """Hyperpriors of the pooled model (see the module docstring).

    Attributes
    ----------
    alpha_sd : float > 0
        Scale of each side's intercept around its mean anchor (probability scores; margins use
        ``margin_alpha_sd`` around 0).
    alpha_df : float > 0
        Degrees of freedom of that Student-t (1: Cauchy; large: nearly normal); heavy tails
        let the labels overrule scores that are wrong by orders of magnitude. The predicted
        negatives' intercept is normal above its anchor
        (:func:`bayes_eval.models._prior.intercept_log_density`).
    beta_mean, beta_sd : float, float > 0
        Normal prior of the slope on the covariate.
    gamma_sd : float > 0
        Sd of the offset of the predicted-positive side (margin scores; probability scores
        anchor each side's intercept on its own).
    tau_median : float > 0
        Prior median of ``tau``, the relative (logit-scale) sd of a whole side's rate around
        the curve.
    log_tau_sd : float > 0
        Sd of ``log tau``.
    margin_alpha_sd : float > 0
        Sd of the intercept for margin scores (no calibration anchor).
    cells : int >= 1
        Score cells per predicted side (fixed fractions of the side's items that share a
        deviation from the curve; :mod:`bayes_eval.models._cells`).
    nugget_sd : float > 0
        Relative (logit-scale) sd of a stratum's rate around its cell's.
    floor_mean, floor_sd : float, float > 0
        Normal prior of the logit of the predicted negatives' floor ``eps`` (every predicted
        negative's rate is at least ``eps``: positives the scores do not see), centred
        ``floor_mean`` logits below the logit of that side's mean rate under the prior's centre
        curve (:func:`bayes_eval.models._prior.floor_reference`; the side's mean score for
        probability scores).
    """

    alpha_sd: float = 2.0
    alpha_df: float = 1.0
    beta_mean: float = 1.0
    beta_sd: float = 1.5
    gamma_sd: float = 2.0
    tau_median: float = 0.5
    log_tau_sd: float = 1.0
    margin_alpha_sd: float = 5.0
    cells: int = 8
    nugget_sd: float = 0.3
    floor_mean: float = -3.0
    floor_sd: float = 2.0

    def __post_init__(self) -> None:
        c = self.cells
        if isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 1 <= c <= 1000:
            raise ValueError(f"Hyperpriors.cells={c!r} is not allowed; allowed: an integer 1..1000")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "cells":
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise ValueError(
                    f"Hyperpriors.{f.name}={v!r} is not allowed; allowed: a finite real number"
                )
            if f.name not in ("beta_mean", "floor_mean") and not v > 0:
                raise ValueError(
                    f"Hyperpriors.{f.name}={v!r} is not allowed; allowed: a finite real number > 0"
                )

    def describe(self, kind: str = "probability", center: float = 0.0) -> str:
        """Readable text of the model and its hyperpriors."""
        if kind == "margin":
            a = f"alpha ~ N(0, {self.margin_alpha_sd:g}^2), gamma ~ N(0, {self.gamma_sd:g}^2)"
        else:
            a = (
                f"side intercepts alpha + gamma ~ t_{self.alpha_df:g}(a_1(beta)) and alpha ~ "
                f"t_{self.alpha_df:g}(a_0(beta)) below a_0, N(a_0(beta), {self.alpha_sd:g}^2) "
                "above (each t with the curvature of N(0, "
                f"{self.alpha_sd:g}^2) at its centre), with "
                "a_s(beta) the intercept at which the curve's mean over side s equals the side's "
                "mean score, times expit(l_0) expit(-l_1) on the logits l_s of the mean curve "
                "rates of each side's unlabelled items (towards more missed positives and more "
                "false positives)"
            )
        return (
            f"{a}, beta ~ N({self.beta_mean:g}, {self.beta_sd:g}^2), "
            f"log tau ~ N(log {self.tau_median:g}, {self.log_tau_sd:g}^2); "
            f"delta_g ~ N(0, tau^2 / m_g) on {self.cells} score cells per side of side share m_g; "
            "theta_k ~ Beta(c_k mu_k, c_k (1 - mu_k)), 1 / (c_k + 1) = "
            f"{self.nugget_sd:g}^2 mu_k (1 - mu_k), mu_k = expit(logit(mean over the stratum's "
            f"items of expit(alpha + beta (x - {center:.4g}) + gamma yhat)) + delta_g(k)); "
            "on the predicted negatives the stratum's mean rate is floored, eps + (1 - eps) "
            f"mean, logit eps ~ N(m_0 {'-' if self.floor_mean < 0 else '+'} "
            f"{abs(self.floor_mean):g}, {self.floor_sd:g}^2) with m_0 the "
            "logit of that side's mean rate under the prior's centre curve"
        )


@dataclass(frozen=True, slots=True)
class PooledFit:
    """A fit of the pooled model (batch shape ``(...)``, S hyper-nodes, K strata).

    Attributes
    ----------
    phi : ndarray, (..., S, 5)
        Hyper-nodes ``(alpha, beta, gamma, log tau, logit eps)``.
    weight : ndarray, (..., S)
        Normalised importance weights of the nodes.
    node_weight : ndarray, (..., S, Q, G)
        Conditional posterior weight of each quadrature node of every cell's deviation.
    a, b : ndarray, (..., S, Q, K)
        Conditional prior ``Beta(a, b)`` of each stratum's rate at each hyper-node and
        quadrature node of its cell (``a_post``, ``b_post``: the posterior ``a + h``,
        ``b + n - h``).
    n, h : ndarray, (..., K)
        The counts the fit conditions on.
    layout : CellLayout
        The score cells.
    mode, cov : ndarray, (..., 5) and (..., 5, 5)
        Laplace approximation of the hyperposterior.
    ess : ndarray, (...)
        Importance-sampling effective sample size.
    informative : ndarray of bool, (...)
        False where the labels say the score carries no information (flat curve).
    kind : str
    center : float
    hyperpriors : Hyperpriors
    """

    phi: np.ndarray
    weight: np.ndarray
    node_weight: np.ndarray
    a: np.ndarray
    b: np.ndarray
    n: np.ndarray
    h: np.ndarray
    layout: CellLayout
    mode: np.ndarray
    cov: np.ndarray
    ess: np.ndarray
    informative: np.ndarray
    kind: str
    center: float
    hyperpriors: Hyperpriors

    @property
    def a_post(self) -> np.ndarray:
        """Conditional posterior ``a + h``, ``(..., S, Q, K)``."""
        return self.a + self.h[..., None, None, :]

    @property
    def b_post(self) -> np.ndarray:
        """Conditional posterior ``b + n - h``, ``(..., S, Q, K)``."""
        return self.b + (self.n - self.h)[..., None, None, :]

    def stratum_weight(self) -> np.ndarray:
        """Weight of every (hyper-node, quadrature node) pair for each stratum,
        ``(..., S, Q, K)`` (sums to 1 over ``S, Q``)."""
        return self.weight[..., None, None] * self.node_weight[..., self.layout.cell]


# ----------------------------------------------------------------------------- fit
def _check_hyperpriors(hyperpriors: Any) -> Hyperpriors:
    hp = Hyperpriors() if hyperpriors is None else hyperpriors
    if not isinstance(hp, Hyperpriors):
        raise TypeError(f"hyperpriors has type {type(hp).__name__}; allowed: a Hyperpriors")
    return hp


def fit_pooled(
    profile: ScoreProfile,
    n: Any,
    h: Any,
    *,
    hyperpriors: Hyperpriors | None = None,
    warn: bool = True,
    init: Any = None,
) -> PooledFit:
    """Fit the pooled model to labels ``n`` and positives ``h`` of shape ``(..., K)``.

    Deterministic: Newton on the 5-D log hyperposterior, then importance sampling on fixed
    nodes (module docstring). Strata without labels only receive the curve; all-negative or
    all-positive labels are handled by the proper hyperpriors (every output finite).

    Parameters
    ----------
    profile : ScoreProfile
    n, h : array of int, (..., K)
        Labels and positives per stratum (any leading batch axes).
    hyperpriors : Hyperpriors, optional
        Defaults to ``Hyperpriors()``.
    warn : bool
        Emit :class:`UninformativeScoresWarning` when the scores are constant or the labels say
        the curve is flat (posterior sd of ``beta`` below half its prior sd and
        ``P(beta > 0) < 0.9``); the flag is in ``fit.informative`` either way.
    init : array (..., 5), optional
        Start of the Newton search (e.g. the previous fit's ``mode``; default the prior mean).

    Returns
    -------
    PooledFit

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.models._profile import score_profile
    >>> from bayes_eval.models.pooled import fit_pooled, beta_approximation
    >>> rng = np.random.default_rng(0)
    >>> s = rng.beta(0.3, 8, 50_000)
    >>> st = np.searchsorted(np.quantile(s, [0.25, 0.5, 0.75, 0.98]), s)
    >>> prof = score_profile(s, st, predicted=[0, 0, 0, 0, 1], sizes=np.bincount(st))
    >>> fit = fit_pooled(prof, [40, 40, 40, 40, 40], [0, 0, 1, 3, 15])
    >>> a, b = beta_approximation(fit)
    >>> bool((a / (a + b))[0] < 0.5 / 41)   # below the Jeffreys mean of 0/40
    True
    """
    if not isinstance(profile, ScoreProfile):
        raise TypeError(f"profile has type {type(profile).__name__}; allowed: a ScoreProfile")
    hp = _check_hyperpriors(hyperpriors)
    stage = hyper_stage(profile, n, h, hp, init)
    phi, prior, batch = stage.phi, stage.prior, stage.n.shape[:-1]
    constant = profile.kind == "constant"  # beta multiplies 0 and stays at its prior
    lp, ci, lean = log_post(phi, profile, stage.layout, *stage.rows, prior, hp.nugget_sd, keep=True)
    w, ess = importance_weights(lp, stage.log_q)
    m_beta = (w * phi[..., 1]).sum(axis=-1)
    sd_beta = np.sqrt(np.maximum((w * phi[..., 1] ** 2).sum(axis=-1) - m_beta**2, 0.0))
    # the evidence of ranking without the sceptical lean, which pulls the sides together
    wl = labels_weight(w, lean)
    p_pos = (wl * (phi[..., 1] > 0)).sum(axis=-1)
    p_side = (wl * (prior.side_gap(phi) > 0)).sum(axis=-1)
    # no evidence of ranking: neither a rate rising with the score within a side nor a higher
    # rate on the predicted-positive side
    flat = (sd_beta < 0.5 * hp.beta_sd) & (p_pos < 0.9) & (p_side < 0.9)
    informative = np.broadcast_to(~flat & (not constant), batch).copy()
    if warn and (constant or flat.any()):
        msg = (
            "every score is equal: the scores carry no information, so rates are pooled within "
            "each predicted side"
            if constant
            else f"in {int(flat.sum())} of {int(np.prod(batch, dtype=np.int64))} fit(s) the "
            "labels do not show that the scores rank the items (P(slope > 0) < 0.9 and "
            "P(predicted positives have the higher rate) < 0.9), so each stratum's rate leans "
            "on its predicted side's pooled rate (with few positives this can be a weak "
            "classifier rather than uninformative scores)"
        )
        warnings.warn(
            f"pooled model: {msg}",
            UninformativeScoresWarning,
            stacklevel=2,
        )
    return PooledFit(
        phi=phi,
        weight=w,
        node_weight=ci.node_weight,
        a=ci.a,
        b=ci.b,
        n=stage.n,
        h=stage.h,
        layout=stage.layout,
        mode=stage.mode,
        cov=stage.cov,
        ess=ess,
        informative=informative,
        kind=profile.kind,
        center=profile.center,
        hyperpriors=hp,
    )


# ----------------------------------------------------------------------------- derived
def _check_fit(fit: Any) -> PooledFit:
    if not isinstance(fit, PooledFit):
        raise TypeError(f"fit has type {type(fit).__name__}; allowed: a PooledFit")
    return fit


def draw_theta(fit: PooledFit, draws: int, rng: RNGLike = None) -> np.ndarray:
    """Joint posterior draws of every stratum's remainder rate, ``(..., draws, K)``.

    Each draw picks a hyper-node s with probability equal to its weight, a quadrature node q of
    every cell's deviation with its conditional weight, then
    :math:`\\theta_k \\sim \\mathrm{Beta}(a_{sqk} + h_k, b_{sqk} + n_k - h_k)` independently
    given them: the strata are dependent through the shared curve and cells. The picking and
    the Beta draws run in one compiled kernel (:mod:`bayes_eval.models._beta_draws`: exact
    Marsaglia-Tsang Beta draws from a SFC64 generator seeded by one integer drawn from
    ``rng``, so the draws are reproducible from ``rng`` and ``rng`` advances by one integer;
    the first call in a fresh environment compiles it, about 1.5 s, cached on disk afterwards).
    """
    fit = _check_fit(fit)
    if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or int(draws) < 1:
        raise ValueError(f"draws={draws!r} is not allowed; allowed: a positive integer")
    gen = as_generator(rng)
    draws = int(draws)
    batch = fit.weight.shape[:-1]
    s, q, k = fit.a.shape[-3:]
    g = fit.node_weight.shape[-1]
    cum = np.cumsum(fit.weight.reshape(-1, s), axis=-1)
    cum[:, -1] = 1.0
    rows = cum.shape[0]
    cwq = np.broadcast_to(np.cumsum(fit.node_weight, axis=-2), (*batch, s, q, g))
    cwq = cwq.reshape(rows, s, q, g)
    a = np.broadcast_to(fit.a_post, (*batch, s, q, k)).reshape(rows, s, q, k)
    b = np.broadcast_to(fit.b_post, (*batch, s, q, k)).reshape(rows, s, q, k)
    # one compiled kernel, imported here so that numba loads only when drawing
    from ._beta_draws import draw_joint

    return draw_joint(cum, cwq, a, b, fit.layout.cell, draws, gen).reshape(*batch, draws, k)


def beta_approximation(fit: PooledFit) -> tuple[np.ndarray, np.ndarray]:
    r"""Moment-matched ``Beta(A, B)`` of each stratum's marginal posterior rate, each ``(..., K)``.

    With :math:`\omega_{sqk}` the weight of hyper-node s and quadrature node q of stratum k's
    cell (:meth:`PooledFit.stratum_weight`):

    .. math::

        m_k = \sum_{s,q} \omega_{sqk} \mu_{sqk}, \quad
        v_k = \sum_{s,q} \omega_{sqk} (\mathrm{Var}_{sqk} + \mu_{sqk}^2) - m_k^2, \quad
        A_k + B_k = \frac{m_k (1 - m_k)}{v_k} - 1.
    """
    fit = _check_fit(fit)
    from ._moment_kernels import beta_from_moments, marginal_moments

    m, v = marginal_moments(
        fit.weight, fit.node_weight, fit.a, fit.b, fit.n, fit.h, fit.layout.cell
    )
    return beta_from_moments(m, v)


def prob_linear_ge(
    fit: PooledFit,
    n: Any,
    h: Any,
    sizes: Any,
    w: Any,
    c: Any,
    *,
    finite_population: bool = True,
) -> np.ndarray:
    """``P(sum_k w_k P_k >= c)`` under the pooled posterior, shape ``(...)``.

    ``P_k = h_k + Binomial(N_k - n_k, theta_k)`` (or ``N_k theta_k`` with
    ``finite_population=False``). At each hyper-node the strata are independent beta-binomials
    with exact first three cumulants (as in ``bayes_eval.sequential.prob_linear_ge``) given
    the cell deviations; a cell's sum mixes them over its quadrature nodes (law of total
    cumulance) and the cells add. The sum is approximated by a Pearson type III law matching the
    node's cumulants, and the node probabilities are averaged with the importance weights:

    .. math::

        \\Pr\\Bigl(\\sum_k w_k P_k \\ge c\\Bigr) \\approx \\sum_s w_s\\,
        \\bar F_{\\mathrm{III}}\\bigl(c;\\ \\kappa_{1s}, \\kappa_{2s}, \\kappa_{3s}\\bigr).
    """
    return linear_form_nodes(fit, n, h, sizes, w, finite_population=finite_population).prob(c)


def linear_form_nodes(
    fit: PooledFit,
    n: Any,
    h: Any,
    sizes: Any,
    w: Any,
    *,
    finite_population: bool = True,
) -> LinearFormNodes:
    """Cumulants of ``sum_k w_k P_k`` at every hyper-node of ``fit`` and the nodes' weights
    (:mod:`bayes_eval.models._linear_form`); the sequential calibration's look model uses them
    (:mod:`bayes_eval.sequential._paths`)."""
    fit = _check_fit(fit)
    e1, e2, e3 = _linear_form.node_cumulants(fit, n, h, sizes, w, finite_population)
    return LinearFormNodes(np.broadcast_to(fit.weight, e1.shape), e1, e2, e3)


# ----------------------------------------------------------------------------- registry entry
def pooled_model(
    *,
    strata: StrataLike,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: Any = None,
    prior_b: Any = None,
    draws: int,
    rng: RNGLike = None,
    hyperpriors: Hyperpriors | None = None,
    profile: ScoreProfile | None = None,
    warn: bool = True,
) -> tuple[np.ndarray, dict[str, xr.Dataset], dict[str, Any]]:
    """The ``MODELS["pooled"]`` entry: ``draws`` joint draws of ``theta`` ``(draws, K)``.

    ``prior_a``/``prior_b`` (the independent model's Beta prior) are not used: the pooled model's
    prior is :class:`Hyperpriors` (recorded in the ``hyperpriors`` attribute). ``profile`` may be
    passed to skip the O(N) :func:`~bayes_eval.models._profile.score_profile` pass. Returns the
    extra group ``hyperposterior`` (``alpha``, ``beta``, ``gamma``, ``tau`` and ``weight`` per
    ``node``) and attributes (``hyperpriors``, ``pooled_importance_ess``, ``score_kind``,
    ``scores_informative``).
    """
    prof = score_profile_of(strata) if profile is None else profile
    if not isinstance(prof, ScoreProfile):
        raise TypeError(f"profile has type {type(prof).__name__}; allowed: a ScoreProfile")
    if prof.n_strata != int(np.asarray(strata.sizes).shape[0]):
        raise ValueError(
            f"profile has {prof.n_strata} strata but strata has {np.asarray(strata.sizes).shape[0]}"
        )
    n = np.asarray(n)
    h = np.asarray(h)
    if n.ndim != 1 or h.ndim != 1:
        raise ValueError(f"n and h must have shape (K,); got {n.shape} and {h.shape}")
    fit = fit_pooled(prof, n, h, hyperpriors=hyperpriors, warn=warn)
    theta = draw_theta(fit, draws, rng)
    import xarray as xr  # on first use: proposing (design_prior) never needs xarray

    hyper = xr.Dataset(
        {
            "alpha": ("node", fit.phi[:, 0]),
            "beta": ("node", fit.phi[:, 1]),
            "gamma": ("node", fit.phi[:, 2]),
            "tau": ("node", np.exp(fit.phi[:, 3])),
            "weight": ("node", fit.weight),
        },
        coords={"node": np.arange(fit.weight.shape[0])},
    )
    attrs = {
        "hyperpriors": fit.hyperpriors.describe(prof.kind, prof.center),
        "pooled_importance_ess": round(float(fit.ess), 1),
        "score_kind": prof.kind,
        "scores_informative": int(bool(fit.informative)),
    }
    return theta, {"hyperposterior": hyper}, attrs
