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

import numpy as np
from scipy import special

__all__ = ["prob_sum_at_least"]

#: below this |skewness| the normal approximation is used (the gamma tends to it)
_NORMAL_SKEW = 1e-4


def prob_sum_at_least(
    mu: np.ndarray,
    var: np.ndarray,
    k3: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    c: np.ndarray | float,
    finite_population: bool = True,
) -> np.ndarray:
    """``Pr(sum_k w_k P_k >= c)``; every argument broadcasts over ``(..., K)``, the sum is over
    the last axis (see the module docstring)."""
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
