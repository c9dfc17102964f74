"""P(sum of linear stratum positives >= c) from the cumulants of each stratum's rate.

One kernel for every model (the independent Beta model in
:func:`bayes_eval.sequential.prob_linear_ge` and each hyper-node of the pooled model): given the
first three cumulants :math:`\\mu_k, v_k, \\kappa_{3k}` of the posterior rate of stratum
:math:`k`, the positives :math:`P_k = h_k + X_k` with
:math:`X_k \\mid \\theta_k \\sim \\mathrm{Binomial}(N_k - n_k, \\theta_k)` (finite population) or
:math:`P_k = N_k \\theta_k` have exact first three cumulants, independent strata add them, and
:math:`\\Pr(L \\ge c)` for :math:`L = \\sum_k w_k P_k` comes from the Pearson type III (shifted
gamma) distribution with those cumulants (the normal where the skewness vanishes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = [
    "PositiveCumulants",
    "beta_rate_cumulants",
    "form_cumulants",
    "prob_at_least",
    "stratum_cumulants",
]

#: below this |skewness| the normal approximation is used (the gamma tends to it)
_NORMAL_SKEW = 1e-4


@dataclass(frozen=True, slots=True)
class PositiveCumulants:
    """First three cumulants of the positives :math:`P_k` of every stratum.

    Attributes
    ----------
    mean, var, k3 : ndarray of float64, (..., K)
    """

    mean: np.ndarray
    var: np.ndarray
    k3: np.ndarray


def beta_rate_cumulants(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and third cumulant of ``Beta(a, b)`` (a stratum's posterior rate)."""
    s = a + b
    mu = a / s
    var = a * b / (s * s * (s + 1.0))
    k3 = 2.0 * (b - a) * a * b / (s**3 * (s + 1.0) * (s + 2.0))
    return mu, var, k3


def stratum_cumulants(
    mu: np.ndarray,
    var: np.ndarray,
    k3: np.ndarray,
    *,
    n: np.ndarray,
    h: np.ndarray,
    sizes: np.ndarray,
    finite_population: bool = True,
) -> PositiveCumulants:
    """Exact cumulants of each stratum's positives from the cumulants ``mu, var, k3`` of its
    posterior rate (arguments broadcast over ``(..., K)``).

    Finite population: :math:`P_k = h_k + X_k`, :math:`X_k \\mid \\theta_k \\sim
    \\mathrm{Binomial}(r_k, \\theta_k)` with :math:`r_k = N_k - n_k`, whose cumulants follow
    from the law of total cumulance; superpopulation: :math:`P_k = N_k \\theta_k`.
    """
    if not finite_population:
        return PositiveCumulants(sizes * mu, sizes**2 * var, sizes**3 * k3)
    r = sizes - n
    one_m2mu = 1.0 - 2.0 * mu
    return PositiveCumulants(
        h + r * mu,
        r * (mu * (1.0 - mu) - var) + r * r * var,
        r * (mu * (1.0 - mu) * one_m2mu - 3.0 * var * one_m2mu + 2.0 * k3)
        + 3.0 * r * r * (var * one_m2mu - k3)
        + r**3 * k3,
    )


def form_cumulants(
    cum: PositiveCumulants, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cumulants of ``sum_k w_k P_k`` for independent strata whose positives have the
    cumulants ``cum`` (:func:`stratum_cumulants`); ``w`` broadcasts over ``(..., K)``, the sum
    is over the last axis. :func:`prob_at_least` turns them into ``Pr(sum >= c)``."""
    return (
        (w * cum.mean).sum(axis=-1),
        (w * w * cum.var).sum(axis=-1),
        (w**3 * cum.k3).sum(axis=-1),
    )


def prob_at_least(
    k1: np.ndarray, k2: np.ndarray, k3: np.ndarray, c: np.ndarray | float
) -> np.ndarray:
    """``Pr(L >= c)`` for the Pearson type III law with cumulants ``k1, k2, k3`` (the normal
    where the skewness vanishes; a point mass at ``k1`` where the variance does)."""
    big1 = k1
    big2 = np.maximum(k2, 0.0)
    big3 = k3
    sd = np.sqrt(big2)
    scale = np.maximum(np.abs(big1), 1.0)
    degenerate = sd <= 1e-12 * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (c - big1) / sd
        g = big3 / (big2 * sd)
    z = np.where(degenerate, 0.0, z)
    g = np.where(degenerate | ~np.isfinite(g), 0.0, g)
    z, g = np.broadcast_arrays(z, g)
    normal = np.abs(g) < _NORMAL_SKEW
    right = ~normal & (g > 0)
    left = ~normal & ~right
    # each element evaluates only its own branch (the gamma functions are most of the cost)
    p = np.empty(z.shape)
    p[normal] = special.ndtr(-z[normal])
    for side, tail, sign in ((right, special.gammaincc, 1.0), (left, special.gammainc, -1.0)):
        gs = g[side]
        k = 4.0 / (gs * gs)
        # L = K1 + sd * sign(g) * (G - k) / sqrt(k), G ~ Gamma(k, 1)
        p[side] = tail(k, np.maximum(k + sign * z[side] * np.sqrt(k), 0.0))
    return np.where(degenerate, (big1 >= c - 1e-9 * scale).astype(np.float64), p)
