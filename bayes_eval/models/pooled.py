r"""Score-informed, K-invariant pooled model of the stratum positive rates (no MCMC).

**Model.** Item ``i`` with covariate :math:`x_i` (the logit of a probability score, or a
standardised margin; :mod:`bayes_eval.models._profile`) on predicted side :math:`\hat y_i` has the
calibration curve

.. math::

    \eta(x, \hat y) = \alpha + \beta\,(x - x_0) + \gamma\,\hat y, \qquad
    \mu_k = \sum_b w_{kb}\,\operatorname{expit}\eta(x_{kb}, \hat y_k),

where :math:`x_0` is the population median of :math:`x` and :math:`(x_{kb}, w_{kb})` is the
histogram of stratum k's own items, so :math:`\mu_k` is the mean of the curve over the stratum's
items (not the curve at a mean score). A calibrated probability score is
:math:`\alpha = x_0, \beta = 1, \gamma = 0`; a shift moves :math:`\alpha`, a compression
:math:`\beta`, a score flat within each side (or uninformative) gives :math:`\beta = 0` with the
side offset :math:`\gamma` (pooling within each predicted side). Around the curve the stratum
rate deviates by a Beta with exactly the curve's mean and a *cell-level white-noise* variance

.. math::

    \theta_k \mid \phi \sim \mathrm{Beta}\bigl(c_k \mu_k,\; c_k (1 - \mu_k)\bigr), \qquad
    \frac{\mu_k (1 - \mu_k)}{c_k + 1} = v_k
    = \min\Bigl(\tau^2 \frac{N_{\mathrm{side}(k)}}{N_k} \sum_b w_{kb}\,[p_{kb}(1 - p_{kb})]^2,\;
      [\mu_k (1 - \mu_k)]^2\Bigr),

with :math:`p_{kb} = \operatorname{expit}\eta(x_{kb})`, and
:math:`h_k \mid \theta_k \sim \mathrm{Binomial}(n_k, \theta_k)`,
``P_k = h_k + Binomial(N_k - n_k, theta_k)`` (Webber et al.'s finite-population completion).

**Why these choices (K-invariance).** (i) The curve is defined on items, not strata, so its prior
is the same whatever the strata. (ii) The deviation is a logit-scale white noise of sd
:math:`\tau / \sqrt{m}` on every score cell of side-share :math:`m` (delta method:
:math:`\mathrm{Var}\,\theta \approx \rho^2 [p(1-p)]^2`); a stratum's variance is the sum over its
cells, so the variance of the positives of any region,
:math:`\tau^2 N_{side} \sum_{cells} N_{cell} [p(1-p)]^2`, is the same whatever strata partition
it. (iii) The Beta has mean exactly :math:`\mu_k`: no logit-normal pull towards 1/2 (a stratum
whose curve says 1e-5 has prior mean 1e-5). (iv) The cap ``v_k <= [mu_k (1 - mu_k)]^2`` (relative
logit-scale sd <= 1) keeps ``a_k, b_k >~ 1``: without it a low-rate stratum's Beta has a spike at
0 that a run of zero labels selects, and needle strata collapse to 0 (measured: recall coverage
0.75 on a 0.05 % population). The cap is where exact K-invariance is given up: very small strata
get less variance than the white noise asks (measured: the prior sd of FN falls 1.4x from 1 to 50
strata per side; its mean moves < 2 %).

Hyperpriors (:class:`Hyperpriors`, defaults shown): :math:`\alpha \sim N(x_0, 2^2)` for
probabilities (:math:`N(0, 5^2)` for margins), :math:`\beta \sim N(1, 1.5^2)` (unconstrained: a
decreasing or flat curve is learned, and the prior bounds the slope under quasi-separation),
:math:`\gamma \sim N(0, 2^2)`, :math:`\log\tau \sim N(\log 0.5, 1)`.

**Inference (deterministic).** Given :math:`\phi = (\alpha, \beta, \gamma, \log\tau)` the strata
are conditionally independent and conjugate: the marginal likelihood is the beta-binomial
:math:`\prod_k B(a_k + h_k, b_k + n_k - h_k)/B(a_k, b_k)` and the posterior of
:math:`\theta_k` is :math:`\mathrm{Beta}(a_k + h_k, b_k + n_k - h_k)` exactly. The 4-D
hyperposterior is found by damped Newton (finite-difference derivatives, vectorised over any
leading batch axes) and integrated by self-normalised importance sampling on a fixed design of
128 antithetic Student-t(5) nodes around the Laplace approximation (weights truncated at
:math:`\sqrt S` times their mean, Ionides 2008). Joint draws pick a node by its weight and then
every :math:`\theta_k` from its exact conditional Beta, so the strata stay dependent through the
shared curve; :func:`prob_linear_ge` mixes the Pearson type III approximation of
:math:`\Pr(\sum_k w_k P_k \ge c)` over the same nodes.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata; smoothing sparse
strata towards the scores). Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Monte
Carlo beta-binomial bounds, finite population). Ionides (2008), "Truncated importance sampling",
JCGS 17.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import xarray as xr
from scipy import special

from .._cumulants import prob_sum_at_least
from ._profile import ScoreProfile, score_profile_of

__all__ = [
    "Hyperpriors",
    "PooledFit",
    "UninformativeScoresWarning",
    "beta_approximation",
    "draw_theta",
    "fit_pooled",
    "pooled_model",
    "prob_linear_ge",
]


class UninformativeScoresWarning(UserWarning):
    """The scores carry no usable information: the model pools within each predicted side."""


@dataclass(frozen=True, slots=True)
class Hyperpriors:
    """Hyperpriors of the pooled model (see the module docstring).

    Attributes
    ----------
    alpha_sd : float > 0
        Sd of the calibration shift at the median covariate (probability scores; margins use
        ``margin_alpha_sd`` around 0).
    beta_mean, beta_sd : float, float > 0
        Normal prior of the slope on the covariate.
    gamma_sd : float > 0
        Sd of the offset of the predicted-positive side.
    tau_median : float > 0
        Prior median of ``tau``, the relative (logit-scale) sd of a whole side's rate around
        the curve.
    log_tau_sd : float > 0
        Sd of ``log tau``.
    margin_alpha_sd : float > 0
        Sd of the intercept for margin scores (no calibration anchor).
    """

    alpha_sd: float = 2.0
    beta_mean: float = 1.0
    beta_sd: float = 1.5
    gamma_sd: float = 2.0
    tau_median: float = 0.5
    log_tau_sd: float = 1.0
    margin_alpha_sd: float = 5.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
                raise ValueError(f"Hyperpriors.{f.name}={v!r} is not allowed; allowed: a real")
            if f.name != "beta_mean" and not v > 0:
                raise ValueError(f"Hyperpriors.{f.name}={v!r} is not allowed; allowed: a real > 0")

    def describe(self, kind: str = "probability", center: float = 0.0) -> str:
        """Readable text of the model and its hyperpriors."""
        a = (
            f"alpha ~ N({center:.4g}, {self.alpha_sd:g}^2)"
            if kind == "probability"
            else f"alpha ~ N(0, {self.margin_alpha_sd:g}^2)"
        )
        return (
            f"{a}, beta ~ N({self.beta_mean:g}, {self.beta_sd:g}^2), gamma ~ N(0, "
            f"{self.gamma_sd:g}^2), log tau ~ N(log {self.tau_median:g}, {self.log_tau_sd:g}^2); "
            "theta_k ~ Beta(c_k mu_k, c_k (1 - mu_k)), 1 / (c_k + 1) = tau^2 mu_k (1 - mu_k) "
            "N_side / N_k, mu_k = mean over the stratum's items of "
            f"expit(alpha + beta (x - {center:.4g}) + gamma yhat)"
        )


#: importance-sampling design: S = 128 antithetic Student-t(5) vectors in 4-D (a fixed numerical
#: design, like quadrature nodes; not a random choice of the fit)
_DF = 5.0
_D = 4
_Z = np.random.default_rng(20_261_123).standard_normal((64, _D))
_CHI = np.random.default_rng(20_261_124).chisquare(_DF, 64)
_EPS = _Z / np.sqrt(_CHI / _DF)[:, None]
_EPS = np.concatenate([_EPS, -_EPS])
_LOG_Q = -0.5 * (_DF + _D) * np.log1p((_EPS**2).sum(axis=1) / _DF)
_SCALE = 1.3  # widening of the Laplace covariance for the proposal
_H = 1e-3  # finite-difference step
_NEWTON_ITERS = 30
_MU_MIN = 1e-200  # curve rates below this are treated as 1e-200 (keeps c finite)
_C_MIN = 1e-3
_REL_SD_MAX = 1.0
_C_MAX = 1e250


@dataclass(frozen=True, slots=True)
class PooledFit:
    """A fit of the pooled model (batch shape ``(...)``, S hyper-nodes, K strata).

    Attributes
    ----------
    phi : ndarray, (..., S, 4)
        Hyper-nodes ``(alpha, beta, gamma, log tau)``.
    weight : ndarray, (..., S)
        Normalised importance weights of the nodes.
    a, b : ndarray, (..., S, K)
        Conditional prior ``Beta(a, b)`` of each stratum's rate at each node.
    a_post, b_post : ndarray, (..., S, K)
        Conditional posterior ``Beta(a + h, b + n - h)``.
    mode, cov : ndarray, (..., 4) and (..., 4, 4)
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
    a: np.ndarray
    b: np.ndarray
    a_post: np.ndarray
    b_post: np.ndarray
    mode: np.ndarray
    cov: np.ndarray
    ess: np.ndarray
    informative: np.ndarray
    kind: str
    center: float
    hyperpriors: Hyperpriors


# ----------------------------------------------------------------------------- kernel
def _prior_center(profile: ScoreProfile, hp: Hyperpriors) -> tuple[np.ndarray, np.ndarray]:
    if profile.kind == "margin":
        mean = np.array([0.0, hp.beta_mean, 0.0, math.log(hp.tau_median)])
        sd = np.array([hp.margin_alpha_sd, hp.beta_sd, hp.gamma_sd, hp.log_tau_sd])
    else:
        mean = np.array([profile.center, hp.beta_mean, 0.0, math.log(hp.tau_median)])
        sd = np.array([hp.alpha_sd, hp.beta_sd, hp.gamma_sd, hp.log_tau_sd])
    return mean, sd


def _conditional_prior(phi: np.ndarray, profile: ScoreProfile) -> tuple[np.ndarray, np.ndarray]:
    """``a, b`` of shape ``(..., K)`` for hyper-nodes ``phi`` of shape ``(..., 4)``."""
    side = profile.predicted.astype(np.float64)
    dx = profile.x - profile.center
    al, be, ga, lnu = (phi[..., j, None, None] for j in range(4))
    eta = al + be * dx + ga * side[:, None]
    w = profile.weight
    p = special.expit(eta)
    q = special.expit(-eta)
    mu = np.maximum((w * p).sum(axis=-1), _MU_MIN)
    mubar = np.maximum((w * q).sum(axis=-1), _MU_MIN)
    # cell-level white noise: v_k = tau^2 (N_side / N_k) sum_b w_kb [p_kb (1 - p_kb)]^2
    pq2 = (w * (p * q) ** 2).sum(axis=-1)
    v = np.exp(2.0 * lnu[..., 0]) / profile.side_share * pq2
    # at most a relative (logit-scale) sd of REL_SD_MAX: keeps a_k, b_k >~ 1 / REL_SD_MAX^2, so
    # the Beta has no spike at 0 or 1 that a run of zeros could select (module docstring)
    v = np.maximum(np.minimum(v, (_REL_SD_MAX * mu * mubar) ** 2), 1e-300)
    c = np.clip(mu * mubar / v - 1.0, _C_MIN, _C_MAX)
    return c * mu, c * mubar


def _lrf(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``log Gamma(x + m) - log Gamma(x)`` accurate for huge ``x`` (Stirling differences)."""
    big = x > 10.0
    xs = np.where(big, x, 10.0)
    xm = xs + m
    stirling = (
        (xs - 0.5) * np.log1p(m / xs)
        + m * np.log(xm)
        - m
        + (1.0 / xm - 1.0 / xs) / 12.0
        - ((1.0 / xm) ** 3 - (1.0 / xs) ** 3) / 360.0
    )
    xl = np.where(big, 1.0, x)
    return np.where(big, stirling, special.gammaln(xl + m) - special.gammaln(xl))


def _log_post(
    phi: np.ndarray, profile: ScoreProfile, n: np.ndarray, h: np.ndarray, pm, psd
) -> np.ndarray:
    """Log hyperposterior (up to a constant) at ``phi`` (..., P, 4); ``n, h`` (..., 1, K)."""
    a, b = _conditional_prior(phi, profile)
    # log B(a + h, b + n - h) - log B(a, b); exactly 0 for strata without labels
    ll = _lrf(a, h) + _lrf(b, n - h) - _lrf(a + b, n)
    lp = ll.sum(axis=-1) - 0.5 * (((phi - pm) / psd) ** 2).sum(axis=-1)
    return np.where(np.isfinite(lp), lp, -np.inf)


def _stencil() -> np.ndarray:
    pts = [np.zeros(_D)]
    for i in range(_D):
        for s in (1.0, -1.0):
            e = np.zeros(_D)
            e[i] = s
            pts.append(e)
    for i in range(_D):
        for j in range(i + 1, _D):
            for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                e = np.zeros(_D)
                e[i], e[j] = si, sj
                pts.append(e)
    return np.array(pts) * _H


_STENCIL = _stencil()


def _grad_hess(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and Hessian from the stencil values ``f`` (..., 33)."""
    g = np.empty((*f.shape[:-1], _D))
    hs = np.empty((*f.shape[:-1], _D, _D))
    for i in range(_D):
        fp, fm = f[..., 1 + 2 * i], f[..., 2 + 2 * i]
        g[..., i] = (fp - fm) / (2 * _H)
        hs[..., i, i] = (fp - 2 * f[..., 0] + fm) / _H**2
    idx = 1 + 2 * _D
    for i in range(_D):
        for j in range(i + 1, _D):
            pp, pmi, mp, mm = (f[..., idx + q] for q in range(4))
            hs[..., i, j] = hs[..., j, i] = (pp - pmi - mp + mm) / (4 * _H * _H)
            idx += 4
    return g, hs


def _neg_inverse(hs: np.ndarray, lam_min: float) -> np.ndarray:
    """``(-H)^{-1}`` with eigenvalues of ``-H`` clipped to >= ``lam_min`` (the log posterior is
    the log prior plus a likelihood, so no direction should be flatter than the prior)."""
    hs = np.where(np.isfinite(hs), hs, 0.0)
    lam, vec = np.linalg.eigh(-hs)
    lam = np.clip(lam, lam_min, None)
    return np.einsum("...ij,...j,...kj->...ik", vec, 1.0 / lam, vec)


def _check_counts(profile: ScoreProfile, n: Any, h: Any) -> tuple[np.ndarray, np.ndarray]:
    k = profile.n_strata
    out = []
    for name, v in (("n", n), ("h", h)):
        arr = np.asarray(v)
        if arr.ndim == 0 or arr.shape[-1] != k:
            raise ValueError(f"{name} has shape {arr.shape}; allowed: (..., {k}), one per stratum")
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise ValueError(f"{name} has dtype {arr.dtype}; allowed: integer counts")
        arr = arr.astype(np.float64)
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ValueError(f"{name} contains non-integer values; allowed: integer counts")
        out.append(arr)
    n, h = np.broadcast_arrays(*out)
    if (n < 0).any() or (h < 0).any() or (h > n).any() or (n > profile.sizes).any():
        raise ValueError("counts must satisfy 0 <= h_k <= n_k <= N_k for every stratum")
    return np.ascontiguousarray(n), np.ascontiguousarray(h)


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

    Deterministic: damped Newton on the 4-D log hyperposterior, then importance sampling on a
    fixed design of 128 nodes (module docstring). Strata without labels are allowed (they only
    receive the curve); all-negative or all-positive labels are handled by the proper
    hyperpriors (every output finite).

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
    init : array (..., 4), optional
        Starting point of the Newton search (e.g. the ``mode`` of the previous fit in an audit
        loop); defaults to the prior mean. Only the speed depends on it.

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
    hp = Hyperpriors() if hyperpriors is None else hyperpriors
    if not isinstance(hp, Hyperpriors):
        raise TypeError(f"hyperpriors has type {type(hp).__name__}; allowed: a Hyperpriors")
    n, h = _check_counts(profile, n, h)
    batch = n.shape[:-1]
    pm, psd = _prior_center(profile, hp)
    lam_min = 0.5 / float(psd.max()) ** 2
    constant = profile.kind == "constant"  # beta multiplies 0 and stays at its prior
    nn, hh = n[..., None, :], h[..., None, :]
    if init is None:
        x = np.broadcast_to(pm, (*batch, _D)).copy()
    else:
        x = np.array(np.broadcast_to(np.asarray(init, dtype=np.float64), (*batch, _D)))
        if not np.isfinite(x).all():
            raise ValueError("init contains non-finite values; allowed: finite numbers")
    fx = _log_post(x[..., None, :], profile, nn, hh, pm, psd)[..., 0]
    steps = np.array([1.0, 0.5, 0.25, 0.1])
    for _ in range(_NEWTON_ITERS):
        f = _log_post(x[..., None, :] + _STENCIL, profile, nn, hh, pm, psd)
        g, hs = _grad_hess(f)
        step = np.einsum("...ij,...j->...i", _neg_inverse(hs, lam_min), g)
        norm = np.sqrt((step**2).sum(axis=-1, keepdims=True))
        step = step * np.minimum(1.0, 3.0 / np.maximum(norm, 1e-300))
        cand = x[..., None, :] + steps[:, None] * step[..., None, :]
        fc = _log_post(cand, profile, nn, hh, pm, psd)
        best = fc.argmax(axis=-1)
        fb = np.take_along_axis(fc, best[..., None], axis=-1)[..., 0]
        better = fb > fx
        move = np.where(better[..., None], steps[best][..., None] * step, 0.0)
        x = x + move
        fx = np.where(better, fb, fx)
        if float(np.abs(move).max(initial=0.0)) < 1e-5:
            break
    f = _log_post(x[..., None, :] + _STENCIL, profile, nn, hh, pm, psd)
    _, hs = _grad_hess(f)
    cov = _neg_inverse(hs, lam_min)
    chol = np.linalg.cholesky(cov * _SCALE**2)
    phi = x[..., None, :] + np.einsum("...ij,sj->...si", chol, _EPS)
    lp = _log_post(phi, profile, nn, hh, pm, psd)
    log_w = lp - _LOG_Q
    top = log_w.max(axis=-1, keepdims=True)
    log_w = np.where(np.isfinite(top), log_w, 0.0)  # no finite node: uniform (never happens
    top = np.where(np.isfinite(top), top, 0.0)  # with proper hyperpriors; kept NaN-free)
    w = np.exp(log_w - top)
    w /= w.sum(axis=-1, keepdims=True)
    w = np.minimum(w, w.mean(axis=-1, keepdims=True) * math.sqrt(w.shape[-1]))
    w /= w.sum(axis=-1, keepdims=True)
    ess = 1.0 / (w**2).sum(axis=-1)
    a, b = _conditional_prior(phi, profile)
    m_beta = (w * phi[..., 1]).sum(axis=-1)
    sd_beta = np.sqrt(np.maximum((w * phi[..., 1] ** 2).sum(axis=-1) - m_beta**2, 0.0))
    p_pos = (w * (phi[..., 1] > 0)).sum(axis=-1)
    flat = (sd_beta < 0.5 * hp.beta_sd) & (p_pos < 0.9)
    informative = np.broadcast_to(~flat & (not constant), batch).copy()
    if warn and (constant or flat.any()):
        why = (
            "every score is equal"
            if constant
            else f"the labels give a flat calibration curve in {int(flat.sum())} of "
            f"{int(np.prod(batch, dtype=np.int64))} fit(s) (P(slope > 0) < 0.9)"
        )
        warnings.warn(
            f"pooled model: {why}; the scores carry no usable information, so rates are pooled "
            "within each predicted side only",
            UninformativeScoresWarning,
            stacklevel=2,
        )
    return PooledFit(
        phi=phi,
        weight=w,
        a=a,
        b=b,
        a_post=a + hh,
        b_post=b + (nn - hh),
        mode=x,
        cov=cov,
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


def draw_theta(fit: PooledFit, draws: int, rng: Any = None) -> np.ndarray:
    """Joint posterior draws of every stratum's remainder rate, ``(..., draws, K)``.

    Each draw picks a hyper-node with probability equal to its weight, then
    :math:`\\theta_k \\sim \\mathrm{Beta}(a_{sk} + h_k, b_{sk} + n_k - h_k)` independently given
    the node: the strata are dependent through the shared curve and concentration.
    """
    fit = _check_fit(fit)
    if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or int(draws) < 1:
        raise ValueError(f"draws={draws!r} is not allowed; allowed: a positive integer")
    gen = _as_generator(rng)
    draws = int(draws)
    batch = fit.weight.shape[:-1]
    s = fit.weight.shape[-1]
    cum = np.cumsum(fit.weight.reshape(-1, s), axis=-1)
    cum[:, -1] = 1.0
    rows = cum.shape[0]
    off = np.arange(rows, dtype=np.float64)[:, None]
    u = gen.random((rows, draws))
    idx = np.searchsorted((cum + off).ravel(), (u + off).ravel(), side="right")
    idx = np.minimum(idx.reshape(rows, draws) - (off.astype(np.int64) * s), s - 1)
    k = fit.a_post.shape[-1]
    ap = fit.a_post.reshape(rows, s, k)
    bp = fit.b_post.reshape(rows, s, k)
    a = np.take_along_axis(ap, idx[..., None], axis=1)
    b = np.take_along_axis(bp, idx[..., None], axis=1)
    return _beta(gen, a, b).reshape(*batch, draws, k)


def _beta(gen: np.random.Generator, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return gen.beta(a, b)


def _as_generator(rng: Any) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (
        isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and int(rng) >= 0
    ):
        return np.random.default_rng(None if rng is None else int(rng))
    raise TypeError(f"rng={rng!r} is not allowed; allowed: a non-negative int, a Generator or None")


def _node_moments(fit: PooledFit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = fit.a_post, fit.b_post
    s = a + b
    mu = a / s
    mub = b / s
    var = mu * mub / (s + 1.0)
    k3 = 2.0 * var * (mub - mu) / (s + 2.0)
    return mu, var, k3


def beta_approximation(fit: PooledFit) -> tuple[np.ndarray, np.ndarray]:
    """Moment-matched ``Beta(A, B)`` of each stratum's marginal posterior rate, each ``(..., K)``.

    .. math::

        m_k = \\sum_s w_s \\frac{a'_{sk}}{a'_{sk} + b'_{sk}}, \\quad
        v_k = \\sum_s w_s (\\mathrm{Var}_{sk} + \\mu_{sk}^2) - m_k^2, \\quad
        A_k + B_k = \\frac{m_k (1 - m_k)}{v_k} - 1.
    """
    fit = _check_fit(fit)
    mu, var, _ = _node_moments(fit)
    w = fit.weight[..., None]
    m = (w * mu).sum(axis=-2)
    v = (w * (var + mu * mu)).sum(axis=-2) - m * m
    m = np.clip(m, 1e-300, 1.0)
    v = np.maximum(v, 1e-300)
    conc = np.clip(m * (1.0 - m) / v - 1.0, 1e-6, 1e12)
    return m * conc, np.maximum((1.0 - m) * conc, 1e-300)


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
    with exact first three cumulants (as in ``bayes_eval.sequential.prob_linear_ge``); the sum
    is approximated by a Pearson type III law matching them, and the node probabilities are
    averaged with the importance weights:

    .. math::

        \\Pr\\Bigl(\\sum_k w_k P_k \\ge c\\Bigr) \\approx \\sum_s w_s\\,
        \\bar F_{\\mathrm{III}}\\bigl(c;\\ \\kappa_{1s}, \\kappa_{2s}, \\kappa_{3s}\\bigr).
    """
    fit = _check_fit(fit)
    n = np.asarray(n, dtype=np.float64)[..., None, :]
    h = np.asarray(h, dtype=np.float64)[..., None, :]
    sizes = np.asarray(sizes, dtype=np.float64)
    wk = np.asarray(w, dtype=np.float64)
    if wk.ndim >= 1:
        wk = wk[..., None, :]
    c = np.asarray(c, dtype=np.float64)[..., None]
    mu, var, k3 = _node_moments(fit)
    p = prob_sum_at_least(mu, var, k3, n, h, sizes, wk, c, finite_population)
    return (fit.weight * p).sum(axis=-1)


# ----------------------------------------------------------------------------- registry entry
def pooled_model(
    *,
    strata: Any,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: Any = None,
    prior_b: Any = None,
    draws: int,
    rng: Any = None,
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
