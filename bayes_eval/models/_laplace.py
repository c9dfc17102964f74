r"""Deterministic integration over a few hyperparameters: damped Newton, Laplace, importance nodes.

The pooled model (:mod:`bayes_eval.models.pooled`) integrates its low-dimensional hyperposterior
:math:`p(\phi \mid \text{labels})` without MCMC, for many replicated audits at once:

1. :func:`newton`: damped Newton on :math:`\log p` with finite-difference derivatives on a fixed
   stencil (vectorised over rows; chord steps reuse a row's Hessian after a full step; each row
   stops on its own once its step is below ``TOL`` or its Newton decrement below ``GAIN_TOL``);
2. the Laplace approximation :math:`N(\hat\phi, (-H)^{-1})` (:func:`neg_inverse` clips the
   eigenvalues of :math:`-H` from below, since no direction should be flatter than the prior);
3. :func:`importance_nodes` and :func:`importance_weights`: self-normalised importance sampling on
   a fixed design of ``NODES`` Student-t(5) vectors around the Laplace approximation (widened by
   ``SCALE``), the weights truncated at :math:`\sqrt S` times their mean (Ionides 2008). The
   design is randomised quasi-Monte Carlo: a scrambled Sobol' sequence (fixed seed
   ``DESIGN_SEED``) mapped to the t by the inverse normal and chi-square CDFs, in antithetic
   pairs. It is a fixed numerical rule, like quadrature nodes, not a random choice of a fit:
   every fit of the same data gives the same nodes.

References
----------
Ionides (2008), "Truncated importance sampling", JCGS 17. Owen (1997), "Scrambled net variance for
integrals of smooth functions", Annals of Statistics 25. Rue, Martino & Chopin (2009), "Approximate
Bayesian inference for latent Gaussian models" (nested Laplace / numerical integration over the
hyperparameters), JRSS B 71.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator

import numpy as np
from scipy import special
from scipy.stats import qmc

__all__ = [
    "DESIGN_SEED",
    "GAIN_TOL",
    "NODES",
    "SCALE",
    "TOL",
    "grad_hess",
    "gradient",
    "importance_nodes",
    "importance_weights",
    "integration",
    "integration_settings",
    "neg_inverse",
    "newton",
    "stencil",
]

#: importance nodes (antithetic pairs of a scrambled Sobol' design; half of them a power of 2)
#: and their widening of the Laplace covariance. Measured against 131,072 Sobol' nodes widened
#: 3x with another scrambling on 20 default audits of each of 14 held-out real populations
#: (``benchmarks/bench_heldout.py --integration``, session 18): mean |error| of the model's
#: ``P(metric >= truth)`` 0.0009-0.0033 at natural prevalence (the 128 plain Monte Carlo
#: t-nodes widened 1.3 of sessions 5-17: 0.006-0.020) and 0.002-0.008 on needles, except the
#: diamonds needle's recall, 0.025 (up to 0.10, always below the reference: conservative; the
#: raw effective sample size is 10-20 of 512 there) and, where no positive has been found on a
#: needle's predicted positives, its precision, ~0.02 (heavy-tailed weights, Pareto k ~0.6,
#: at P ~0.08, far from a bound). 1,024 nodes roughly halve the error at natural prevalence;
#: not taken: the calibration's refits (which use these nodes too) and the suite's time.
#: Session 25, five hyperparameters (the floor): 3-5x less accurate, mean |error| 0.0018-0.0164
#: at natural prevalence (max 0.043) and 0.003-0.034 in the needles' recall; on needles the
#: t(5) nodes cut the heavy upper tail of the side gap (``benchmarks/results/bench_heldout.txt``).
#: The best variant measured, 1,024 t(3) nodes widened 1.25, was not adopted (session 26): it
#: costs 1.9x the sequential calibration's CPU (``bench_calibration_time.py --integration``)
#: and would change every pooled posterior (a new calibration version, every certification row
#: re-run), for a change in the bounds' coverage in 1 of 42 held-out cells.
NODES = 512
_DF = 5.0
SCALE = 1.5
#: seed of the Sobol' scrambling (a fixed rule; a benchmark's reference uses another)
DESIGN_SEED = 20_261_126
#: finite-difference step
_H = 1e-3
_NEWTON_ITERS = 30
#: longest Newton step (trust region; shrunk after a failed step)
_MAX_STEP = 3.0
#: a row's Newton search stops once its step is below this (the importance sampling around the
#: Laplace approximation corrects any remaining error)
TOL = 1e-4
#: ... or once the log density its next step would gain (the Newton decrement) is below this: a
#: mode that far off moves the Laplace proposal by ~sqrt(2e-5) = 0.005 posterior sds, which the
#: importance stage corrects. Measured on the demo calibration's refits (session 7): with the
#: step rule alone ~40 % of the rows ran all 30 iterations along an almost flat direction,
#: gaining < 1e-5 each; with 1e-4 instead of 1e-5 a warm-started refit's P(F1 >= target) differed
#: from a cold fit's by > 1e-3 in 10 % of the rows (1e-5: 6e-4 at the 90 % quantile)
GAIN_TOL = 1e-5


def stencil(d: int) -> np.ndarray:
    """Finite-difference stencil in ``d`` dimensions: the centre, ``+-h`` on every axis and the
    two corners ``(h, h)`` and ``(-h, -h)`` of every pair of axes; shape ``(1 + 2d + d(d-1), d)``
    (21 points in 4-D, 31 in the pooled model's 5-D). The two corners give the mixed
    derivative to the same second order as all four:
    :math:`f_{++} + f_{--} - f_{+0} - f_{-0} - f_{0+} - f_{0-} + 2f = 2h^2 H_{ij} + O(h^4)`."""
    pts = [np.zeros(d)]
    for i in range(d):
        for s in (1.0, -1.0):
            e = np.zeros(d)
            e[i] = s
            pts.append(e)
    for i in range(d):
        for j in range(i + 1, d):
            for s in (1.0, -1.0):
                e = np.zeros(d)
                e[i] = e[j] = s
                pts.append(e)
    return np.array(pts) * _H


def grad_hess(f: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and Hessian from the values ``f`` (..., P) of a function on :func:`stencil`."""
    g = np.empty((*f.shape[:-1], d))
    hs = np.empty((*f.shape[:-1], d, d))
    for i in range(d):
        fp, fm = f[..., 1 + 2 * i], f[..., 2 + 2 * i]
        g[..., i] = (fp - fm) / (2 * _H)
        hs[..., i, i] = (fp - 2 * f[..., 0] + fm) / _H**2
    idx = 1 + 2 * d
    for i in range(d):
        for j in range(i + 1, d):
            pp, mm = f[..., idx], f[..., idx + 1]
            axes = f[..., 1 + 2 * i] + f[..., 2 + 2 * i] + f[..., 1 + 2 * j] + f[..., 2 + 2 * j]
            hs[..., i, j] = hs[..., j, i] = (pp + mm - axes + 2 * f[..., 0]) / (2 * _H * _H)
            idx += 2
    return g, hs


def gradient(f: np.ndarray, d: int) -> np.ndarray:
    """Gradient from the values ``f`` (..., 1 + 2d) of a function on the first ``1 + 2d`` points
    of :func:`stencil` (the centre and ``+-h`` on every axis)."""
    return (f[..., 1 : 1 + 2 * d : 2] - f[..., 2 : 2 + 2 * d : 2]) / (2 * _H)


def neg_inverse(hs: np.ndarray, lam_min: float) -> np.ndarray:
    """``(-H)^{-1}`` with eigenvalues of ``-H`` clipped to >= ``lam_min`` (the log posterior is
    the log prior plus a likelihood, so no direction should be flatter than the prior)."""
    hs = np.where(np.isfinite(hs), hs, 0.0)
    lam, vec = np.linalg.eigh(-hs)
    lam = np.clip(lam, lam_min, None)
    return np.einsum("...ij,...j,...kj->...ik", vec, 1.0 / lam, vec)


def newton(
    x: np.ndarray, log_post: Callable[[np.ndarray, np.ndarray], np.ndarray], lam_min: float
) -> tuple[np.ndarray, np.ndarray]:
    """Damped Newton on ``log_post`` from every row of ``x`` (R, d).

    ``log_post(points, rows)`` evaluates rows ``rows`` of the target at ``points`` of shape
    ``(len(rows), P, d)`` and returns ``(len(rows), P)``. Steps are capped at length 3 and the
    best of four step lengths (1, 1/2, 1/4, 1/10) is taken if it improves; if none improves,
    the row tries again with the cap at a tenth of the shortest length tried. After a full
    step the next iteration reuses the row's Hessian and evaluates only the gradient's stencil
    (a chord step, 11 instead of 31 points in 5-D); after a shortened or failed step the Hessian
    is evaluated again. A row stops once its step is below :data:`TOL` or its Newton decrement
    :math:`\\tfrac12 g^\\top (-H)^{-1} g` (the gain in log density the quadratic model
    predicts) is below :data:`GAIN_TOL`. Returns the modes and the Hessians at them (a row
    whose last full stencil is more than the stencil's step away from its mode gets one more).
    """
    d = x.shape[-1]
    st = stencil(d)
    n_grad = 1 + 2 * d
    x = x.copy()
    hess = np.zeros((x.shape[0], d, d))
    inv = np.zeros((x.shape[0], d, d))
    h_at = np.full(x.shape, np.nan)  # where each row's Hessian was evaluated
    full = np.ones(x.shape[0], dtype=bool)
    cap = np.full(x.shape[0], _MAX_STEP)
    active = np.arange(x.shape[0])
    fx = log_post(x[:, None, :], active)[:, 0]
    steps = np.array([1.0, 0.5, 0.25, 0.1])
    for _ in range(_NEWTON_ITERS):
        xa = x[active]
        g = np.empty((active.size, d))
        redo = full[active]
        if redo.any():
            rows = active[redo]
            g[redo], hs = grad_hess(log_post(xa[redo][:, None, :] + st, rows), d)
            hess[rows] = hs
            inv[rows] = neg_inverse(hs, lam_min)
            h_at[rows] = xa[redo]
        if not redo.all():
            rows = active[~redo]
            g[~redo] = gradient(log_post(xa[~redo][:, None, :] + st[:n_grad], rows), d)
        step = np.einsum("...ij,...j->...i", inv[active], g)
        gain = 0.5 * (g * step).sum(axis=-1)
        norm = np.sqrt((step**2).sum(axis=-1))
        ca = cap[active]
        step = step * np.minimum(1.0, ca / np.maximum(norm, 1e-300))[:, None]
        fc = log_post(xa[:, None, :] + steps[:, None] * step[:, None, :], active)
        best = fc.argmax(axis=-1)
        fb = fc[np.arange(active.size), best]
        better = fb > fx[active]
        move = np.where(better[:, None], steps[best][:, None] * step, 0.0)
        x[active] = xa + move
        fx[active] = np.where(better, fb, fx[active])
        # a failed chord step is retried with a fresh Hessian; a failed full step with a step
        # ten times shorter than the shortest one tried (a trust region)
        shrink = ~better & redo
        cap[active] = np.where(shrink, 0.01 * np.minimum(ca, norm), np.where(better, _MAX_STEP, ca))
        full[active] = (better & ((best > 0) | (norm > ca))) | (~better & ~redo)
        retry = ~better & (cap[active] >= TOL)
        moving = (np.abs(move).max(axis=-1) >= TOL) | retry
        active = active[moving & (gain >= GAIN_TOL)]
        if active.size == 0:
            break
    # the Laplace covariance is taken at the mode: rows that ended on chord steps get a fresh
    # Hessian there (so the result does not depend on the path, e.g. on a warm start)
    stale = np.flatnonzero(np.abs(x - h_at).max(axis=-1) > _H)
    if stale.size:
        _, hess[stale] = grad_hess(log_post(x[stale][:, None, :] + st, stale), d)
    return x, hess


def _check_nodes(nodes: float, name: str) -> int:
    """Half of ``nodes`` (the antithetic pairs), which must be a power of 2 (else a ValueError)."""
    ok = isinstance(nodes, numbers.Real) and not isinstance(nodes, bool) and math.isfinite(nodes)
    half = int(nodes) // 2 if ok else 0
    if not ok or nodes != int(nodes) or half < 1 or half & (half - 1):
        raise ValueError(f"{name}={nodes!r} is not allowed; allowed: twice a power of 2")
    return half


def _design(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``NODES`` antithetic Student-t(5) vectors in ``d`` dimensions from a scrambled Sobol'
    sequence in ``d + 1`` dimensions (``d`` normal coordinates and one chi-square), and the
    t's log density at them up to a constant."""
    half = _check_nodes(NODES, "NODES")
    u = qmc.Sobol(d + 1, scramble=True, seed=DESIGN_SEED).random_base2(half.bit_length() - 1)
    u = np.clip(u, 1e-12, 1.0 - 1e-12)
    z = special.ndtri(u[:, :d])
    chi = special.chdtri(_DF, 1.0 - u[:, d])  # the chi-square quantile at u
    eps = z / np.sqrt(chi / _DF)[:, None]
    eps = np.concatenate([eps, -eps])
    return eps, -0.5 * (_DF + d) * np.log1p((eps**2).sum(axis=1) / _DF)


_DESIGNS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def importance_nodes(mode: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fixed design's nodes around ``N(mode, SCALE^2 cov)``: ``phi`` (..., S, d) and the
    proposal's log density at them up to a constant, ``(S,)``."""
    d = mode.shape[-1]
    if d not in _DESIGNS:
        _DESIGNS[d] = _design(d)
    eps, log_q = _DESIGNS[d]
    chol = np.linalg.cholesky(cov * SCALE**2)
    return mode[..., None, :] + np.einsum("...ij,sj->...si", chol, eps), log_q


@contextlib.contextmanager
def integration(
    nodes: int, scale: float, seed: int | None = None, df: float | None = None
) -> Iterator[None]:
    """Fit with ``nodes`` importance nodes widened by ``scale``, the design scrambled with
    ``seed`` (default :data:`DESIGN_SEED`) and drawn from a Student-t with ``df`` degrees of
    freedom (default 5), within the block: for measuring the integration against a finer one
    (benchmarks, tests). Sets the module constants and restores them; a bad value is a
    ValueError naming it and what is allowed, raised before anything is set."""
    global NODES, SCALE, DESIGN_SEED, _DF
    _check_nodes(nodes, "nodes")
    for name, value in (("scale", scale), ("df", df)):
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if value is not None and not (real and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}={value!r} is not allowed; allowed: a finite number > 0")
    old = NODES, SCALE, DESIGN_SEED, _DF
    NODES, SCALE = int(nodes), float(scale)
    DESIGN_SEED = old[2] if seed is None else int(seed)
    _DF = old[3] if df is None else float(df)
    _DESIGNS.clear()
    try:
        yield
    finally:
        NODES, SCALE, DESIGN_SEED, _DF = old
        _DESIGNS.clear()


def integration_settings() -> tuple[int, float, int, float]:
    """The integration in force: ``(nodes, scale, seed, df)``, the arguments of
    :func:`integration` that reproduce it (worker processes of a calibration fit with the
    settings of the process that asked, :mod:`bayes_eval.models._look_pool`)."""
    return NODES, SCALE, DESIGN_SEED, _DF


def importance_weights(log_p: np.ndarray, log_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Self-normalised, truncated importance weights (..., S) and their effective sample size.

    The proposal's normalising constant (the Cholesky determinant) is the same for every node
    of a row and cancels in the normalisation.
    """
    log_w = log_p - log_q
    top = log_w.max(axis=-1, keepdims=True)
    log_w = np.where(np.isfinite(top), log_w, 0.0)  # no finite node: uniform (never happens
    top = np.where(np.isfinite(top), top, 0.0)  # with proper hyperpriors; kept NaN-free)
    w = np.exp(log_w - top)
    w /= w.sum(axis=-1, keepdims=True)
    w = np.minimum(w, w.mean(axis=-1, keepdims=True) * math.sqrt(w.shape[-1]))
    w /= w.sum(axis=-1, keepdims=True)
    return w, 1.0 / (w**2).sum(axis=-1)
