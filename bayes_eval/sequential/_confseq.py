"""Anytime-valid lower confidence sequence for a mean under sampling without replacement.

Betting ("hedged capital") confidence sequence of Waudby-Smith & Ramdas (2020, *Confidence
sequences for sampling without replacement*, NeurIPS; predictable plug-in bets from Waudby-Smith &
Ramdas 2023, *Estimating means of bounded random variables by betting*, JRSS-B), one-sided.

A finite population of ``N`` values in [0, 1] with mean :math:`m^*` is sampled without replacement,
:math:`X_1, X_2, \\ldots`. If the mean were :math:`m`, the mean of the items not yet drawn before
draw :math:`t` would be

.. math::

    \\mu_t(m) = \\frac{N m - \\sum_{i<t} X_i}{N - t + 1},

and the capital of a gambler betting a predictable fraction :math:`\\lambda_t(m) \\ge 0` on
:math:`X_t > \\mu_t(m)`,

.. math::

    K_t(m) = \\prod_{i \\le t} \\bigl(1 + \\lambda_i(m)\\,(X_i - \\mu_i(m))\\bigr),

is a non-negative martingale at :math:`m = m^*`. By Ville's inequality
:math:`\\Pr(\\exists t: K_t(m^*) \\ge 1/\\alpha) \\le \\alpha`, so
:math:`\\{m : K_s(m) < 1/\\alpha \\;\\forall s \\le t\\}` covers :math:`m^*` at every :math:`t` at
once with probability at least :math:`1-\\alpha`: its lower end is a lower bound that stays valid
under continuous monitoring and optional stopping. Bets:
:math:`\\lambda_t(m) = \\min(\\tilde\\lambda_t, c / \\mu_t(m))` with :math:`c = 1/2` and
:math:`\\tilde\\lambda_t = \\sqrt{2\\log(1/\\alpha) / (\\hat\\sigma^2_{t-1}\\, t \\log(1+t))}`,
:math:`\\hat\\mu_t = (1/2 + \\sum_{i\\le t} X_i)/(t+1)`,
:math:`\\hat\\sigma^2_t = (1/4 + \\sum_{i \\le t}(X_i - \\hat\\mu_i)^2)/(t+1)`.

The bound is computed on a grid of :math:`m`; the reported bound is one grid step below the
smallest never-rejected grid value, so the grid can only make it more conservative.
"""

from __future__ import annotations

import numpy as np

__all__ = ["betting_lower_bound"]


def betting_lower_bound(
    x: np.ndarray,
    population_size: int,
    alpha: float,
    *,
    grid_size: int = 500,
    grid: np.ndarray | None = None,
    at: np.ndarray | None = None,
    c: float = 0.5,
) -> np.ndarray:
    """Anytime-valid lower bounds of the population mean (numpy kernel).

    Parameters
    ----------
    x : ndarray, (S, T)
        ``S`` independent sequences of ``T`` draws without replacement, values in [0, 1].
    population_size : int
        ``N >= T``.
    alpha : float
        Error probability (one-sided).
    grid_size : int
        Grid points for the mean on [0, 1] (when ``grid`` is not given).
    grid : array, optional
        Increasing candidate means; a bound above ``grid[-1]`` is reported as ``grid[-1]``
        (pass a grid ending just above a target when only "bound > target" matters).
    at : array of int, optional
        Numbers of draws at which to report the bound (default every draw).
    c : float
        Bet truncation in (0, 1).

    Returns
    -------
    ndarray, (S, len(at))
        Running-intersection lower bounds after ``at[j]`` draws.
    """
    x = np.asarray(x, dtype=np.float64)
    s, t_max = x.shape
    n_pop = int(population_size)
    if t_max > n_pop:
        raise ValueError(f"{t_max} draws from a population of {n_pop} without replacement")
    at = np.arange(1, t_max + 1) if at is None else np.asarray(at, dtype=np.int64)
    grid = np.linspace(0.0, 1.0, grid_size + 1) if grid is None else np.asarray(grid, float)
    threshold = np.log(1.0 / alpha)
    log_k = np.zeros((s, grid.size))
    dead = np.zeros((s, grid.size), dtype=bool)
    csum = np.zeros(s)
    mu_hat = np.full(s, 0.5)
    ss = np.full(s, 0.25)  # 1/4 + sum (X_i - mu_hat_i)^2
    out = np.empty((s, at.size))
    want = {int(v): j for j, v in enumerate(at)}
    for t in range(1, t_max + 1):
        sigma2 = ss / t  # sigma^2_{t-1} = (1/4 + sum_{i<t}) / t
        lam_t = np.sqrt(2.0 * threshold / (sigma2 * t * np.log1p(t)))
        mu = (n_pop * grid[None, :] - csum[:, None]) / (n_pop - t + 1)
        impossible = mu <= 0.0  # the remaining items would need a negative mean
        with np.errstate(divide="ignore"):
            lam = np.minimum(lam_t[:, None], c / np.where(impossible, 1.0, mu))
        xt = x[:, t - 1]
        log_k += np.log1p(lam * (xt[:, None] - mu))
        dead |= impossible | (log_k >= threshold)
        csum += xt
        ss += (xt - mu_hat) ** 2
        mu_hat = (0.5 + csum) / (t + 1)
        j = want.get(t)
        if j is not None:
            alive = ~dead
            first = np.where(alive.any(axis=1), alive.argmax(axis=1), grid.size - 1)
            out[:, j] = grid[np.maximum(first - 1, 0)]
    return out
