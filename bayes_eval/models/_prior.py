r"""The hyperprior of the pooled model: mean-anchored side intercepts, sceptical of the classifier.

For probability scores the intercept of each predicted side s is centred on :math:`a_s(\beta)`,
the intercept at which the calibration curve's mean over the side's items equals the side's mean
score (so the prior of each side's positives does not depend on the slope, the strata or the
other side; :meth:`Prior.log_density`), and the prior is multiplied by the **sceptical lean**
:math:`\operatorname{expit}(\ell_0)\,\operatorname{expit}(-\ell_1)` (:func:`side_lean`), where
:math:`\ell_s` is the logit of the mean curve rate over side s's **unlabelled** items
(:func:`remainder_lean`): towards more missed positives on the predicted-negative side and more
false positives on the predicted-positive side, at any rate, so lower bounds stay conservative
where the labels cannot measure a side.

Why the unlabelled items (session 10): the lean is about the positives still unknown, which sit
in the unlabelled remainder. Evaluated on the mean rate over *all* of a side's items (sessions
8-9), it was satisfied by lowering the curve on strata labelled to census (whose deviations pull
their rates back to their labels) and raising it where nothing was labelled: on a 0.05 % needle
with 100 strata (64 predicted positives in 50 strata of 1-2 items) at 200 labels, the 95 %
precision bound covered 0.662 +- 0.015. On the unlabelled items it covers 1.000 there, and the
real ``default`` population's precision bound at 1,000 labels 0.929 instead of 0.834; measured on
the whole battery in ``benchmarks/results/bench_pooled.txt``, session 10. Tried there too and not
adopted: the lean on each side's *realised* rate (labelled items counted as labelled, the
unlabelled at the curve's rate), which weakens as positives are found: ``default`` 0.838 at 1,000
labels and 0.927 at 300, two battery cells at 0.926-0.927, with the same F1 RMSE on synthetic
needles (2.96 / 2.27 / 1.68x OASIS at K = 10 / 20 / 50 against 2.81 / 2.15 / 1.79x).
(Until session 9 it was :math:`m_s (1 - m_s)` on both sides, a uniform prior on each mean rate,
which leans towards 1/2: towards *fewer* false positives whenever precision is below 1/2; the 95 %
precision bound covered 0.821 on a real needle with precision 0.007.)
The lean depends on which items are labelled (the design, not the labels' values), so it is
computed with the log likelihood from the same curve (:mod:`bayes_eval.models._kernels`).
The anchors are computed once per profile on a grid of slopes (:data:`ANCHOR_GRID`) and
interpolated (Catmull-Rom, C1). Measurements and the reasoning: :mod:`bayes_eval.models.pooled`.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (scores as the prior guide to
each stratum's rate). Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (the uniform
prior of a rate in beta-binomial bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._profile import ScoreProfile

__all__ = [
    "ANCHOR_GRID",
    "LEAN_POWER",
    "Prior",
    "floor_reference",
    "intercept_log_density",
    "labels_weight",
    "prior_of",
    "remainder_lean",
    "side_lean",
]

#: slope grid of the mean-anchored intercepts (Catmull-Rom interpolation between its points,
#: linear extrapolation beyond it)
ANCHOR_GRID = np.linspace(-8.0, 8.0, 321)
_ZERO_SLOPE = 160  # ANCHOR_GRID[160] == 0.0
_ANCHOR_BINS = 512
#: power of the sceptical lean :func:`remainder_lean` (1: the model's; 0 switches it off)
LEAN_POWER = 1.0
_ANCHOR_CACHE: dict[tuple[Any, ...], Prior] = {}


@dataclass(frozen=True, slots=True)
class Prior:
    """The hyperprior of a profile as a log density on
    ``phi = (alpha, beta, gamma, log tau, logit eps)``.

    For probability scores (``anchored``) the two side intercepts ``alpha`` and ``alpha + gamma``
    are centred on ``anchor[s](beta)``: the intercept at which the curve's mean over side s's
    items equals the side's mean score (so the prior of each side's positives is the same
    whatever the slope and the strata); margins keep independent normals on ``phi``. The
    predicted negatives' floor ``logit eps`` is normal, ``N(mean[4], sd[4]^2)``, for both
    (:func:`floor_reference`).
    """

    mean: np.ndarray
    sd: np.ndarray
    anchored: bool
    anchor: np.ndarray  # (2, len(ANCHOR_GRID)) intercept of side 0 / side 1 on the slope grid
    df: float = 1.0  # Student-t degrees of freedom of each side's intercept around its anchor

    def intercepts(self, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Anchor intercepts of side 0 and side 1 at slopes ``beta`` (any shape)."""
        return _catmull_rom(self.anchor[0], beta), _catmull_rom(self.anchor[1], beta)

    def start(self) -> np.ndarray:
        """The prior's centre (Newton's default starting point), ``(5,)``."""
        if not self.anchored:
            return self.mean.copy()
        a0, a1 = self.intercepts(np.array(self.mean[1]))
        return np.array([float(a0), self.mean[1], float(a1 - a0), self.mean[3], self.mean[4]])

    def side_logits(self, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits of each side's mean curve rate ``m_0, m_1`` (to first order in the
        intercepts: ``alpha_s - a_s(beta)`` plus the logit of the side's mean score), each
        ``(...)`` for ``phi`` ``(..., 5)`` (anchored priors only)."""
        a0, a1 = self.intercepts(phi[..., 1])
        z0, z1 = self.anchor[:, _ZERO_SLOPE]  # a_s(0): the logits of the sides' mean scores
        return phi[..., 0] - a0 + z0, phi[..., 0] + phi[..., 2] - a1 + z1

    def side_gap(self, phi: np.ndarray) -> np.ndarray:
        """Logit of the predicted-positive side's mean curve rate minus the predicted-negative
        side's, ``(...)`` for ``phi`` ``(..., 5)`` (``gamma`` for margins)."""
        if not self.anchored:
            return phi[..., 2]
        m0, m1 = self.side_logits(phi)
        return m1 - m0

    def log_density(self, phi: np.ndarray) -> np.ndarray:
        """Log prior density (up to a constant) at ``phi`` ``(..., 5)``."""
        if not self.anchored:
            return -0.5 * (((phi - self.mean) / self.sd) ** 2).sum(axis=-1)
        be, lt, fl = phi[..., 1], phi[..., 3], phi[..., 4]
        m0, m1 = self.side_logits(phi)
        z0, z1 = self.anchor[:, _ZERO_SLOPE]
        sa, sb, st = self.sd[0], self.sd[1], self.sd[3]
        # alpha_s - a_s(beta) = m_s - a_s(0)
        out = intercept_log_density(m0 - z0, sa, self.df, upper=False)
        out = out + intercept_log_density(m1 - z1, sa, self.df)
        sf = self.sd[4]
        return out - 0.5 * (
            ((be - self.mean[1]) / sb) ** 2
            + ((lt - self.mean[3]) / st) ** 2
            + ((fl - self.mean[4]) / sf) ** 2
        )


def _log_expit(x: np.ndarray) -> np.ndarray:
    """``log(1 / (1 + exp(-x)))`` without overflow."""
    return -np.logaddexp(0.0, -x)


def labels_weight(weight: np.ndarray, lean: np.ndarray) -> np.ndarray:
    """Importance weights ``weight`` (..., S) of hyper-nodes whose sceptical lean (the log
    density :func:`remainder_lean` times :data:`LEAN_POWER`, 0 for margin priors) is ``lean``
    (..., S), reweighted to the posterior without the lean (normalised): what the labels and
    the anchored normal prior say, for diagnostics that should not read the lean as evidence."""
    with np.errstate(divide="ignore"):
        lw = np.log(weight) - lean
    lw = lw - lw.max(axis=-1, keepdims=True)
    out = np.exp(lw)
    return out / out.sum(axis=-1, keepdims=True)


def remainder_lean(ebar: np.ndarray, remainder: np.ndarray, side: np.ndarray) -> np.ndarray:
    """The sceptical lean's log density :func:`side_lean` ``(m_0, m_1)`` where ``m_s`` is the
    logit of the mean curve rate over side s's unlabelled items:
    ``m_s = log sum_k r_k expit(ebar_k) - log sum_k r_k expit(-ebar_k)`` over the strata of the
    side, ``r_k = N_k - n_k``. A side without unlabelled items adds 0.

    Parameters
    ----------
    ebar : ndarray, (..., K)
        Effective curve logit of every stratum (:func:`bayes_eval.models._cells.curve_logit`).
    remainder : ndarray, (..., K)
        Unlabelled items per stratum (broadcast against ``ebar``).
    side : ndarray of bool, (K,)
        Predicted side of every stratum.

    Examples
    --------
    >>> import numpy as np
    >>> side = np.array([False, False, True])
    >>> lean = remainder_lean(np.array([-3.0, 0.0, 1.0]), np.array([10.0, 0.0, 5.0]), side)
    >>> bool(np.isclose(lean, side_lean(-3.0, 1.0)))   # the censused stratum drops out
    True
    """
    lp = -np.logaddexp(0.0, -ebar)
    lq = -np.logaddexp(0.0, ebar)
    with np.errstate(divide="ignore"):
        lr = np.log(np.maximum(remainder, 0.0))
    lr = np.broadcast_to(lr, np.broadcast_shapes(lr.shape, ebar.shape))
    out = np.zeros(lr.shape[:-1])
    for s, sign in ((False, 1.0), (True, -1.0)):
        on = side == s
        if not on.any():
            continue
        la = np.logaddexp.reduce(lr[..., on] + lp[..., on], axis=-1)
        lb = np.logaddexp.reduce(lr[..., on] + lq[..., on], axis=-1)
        empty = ~np.isfinite(la) & ~np.isfinite(lb)
        with np.errstate(invalid="ignore"):
            term = _log_expit(sign * (la - lb))
        out = out + np.where(empty, 0.0, term)
    return out


def intercept_log_density(
    dev: Any, sd: float, df: float, log1p: Any = np.log1p, upper: bool = True, where: Any = np.where
) -> Any:
    """Log density (up to a constant) of a side intercept's deviation ``dev`` from its anchor:
    Student-t with ``df`` degrees of freedom whose curvature at the anchor is that of a normal
    of sd ``sd`` (scale ``sd sqrt((df + 1) / df)``),
    ``-(df + 1) / 2 log(1 + dev^2 / ((df + 1) sd^2))``; ``df -> inf`` is the normal.

    Why heavy tails (session 12): the anchor says the side's rate is near its mean score, which
    is wrong by orders of magnitude for a classifier trained on enriched data and run on a needle
    (scores far too high). With a normal prior of sd 2 the prior's pull grows with the
    deviation and beats the labels while they have found no positive: on held-out real needles
    whose predicted-positive side holds 17,000 items and 20 positives (precision 0.001, scores
    ~100x too high) the 95 % precision bound covered 0.70-0.83 at 300 labels
    (``benchmarks/results/bench_heldout.txt``). The t's pull is bounded (at most
    ``sqrt(df + 1) / (2 sd)`` per logit), so labels overrule a badly miscalibrated anchor, while
    near the anchor it is as informative as the normal (a t of scale ``sd`` would be *more*
    informative there: with df 1 like a normal of sd ``sd / sqrt 2``, and it lowered the real
    populations' precision coverage to 0.91-0.92).

    ``upper=False`` keeps the normal above the anchor (the predicted negatives' side): there the
    sceptical lean pushes the rate up with a pull of about 1 per logit while the rate is small,
    more than the t's bounded pull, so with heavy upper tails the lean, not the labels, set the
    false negatives of a haystack's sparsely labelled strata (synthetic 0.05 % needles with a
    strong classifier: mean F1 error -0.117 against -0.088, ``tests/test_strata.py``). Below the
    anchor the t stays: scores that overstate the missed positives are overruled by the labels.
    ``log1p`` and ``where`` let another array library evaluate the same formula (the NUTS
    check's pytensor).
    """
    t = -0.5 * (df + 1.0) * log1p(dev**2 / ((df + 1.0) * sd**2))
    if upper:
        return t
    return where(dev > 0, -0.5 * dev**2 / sd**2, t)


def side_lean(m0: Any, m1: Any, log_expit: Any = _log_expit) -> Any:
    """The sceptical lean's log density ``log expit(m0) + log expit(-m1)`` at the logits of the
    predicted-negative (``m0``) and predicted-positive (``m1``) sides' mean rates: it rises
    with the missed positives and with the false positives (module docstring). ``log_expit``
    lets another array library evaluate the same formula (the NUTS check's pytensor)."""
    return log_expit(m0) + log_expit(-m1)


def _catmull_rom(values: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """C1 cubic interpolation of ``values`` on :data:`ANCHOR_GRID` at ``beta``."""
    g = ANCHOR_GRID
    step = g[1] - g[0]
    beta = np.asarray(beta, dtype=np.float64)
    t = (beta - g[0]) / step
    i = np.clip(np.floor(t).astype(np.int64), 1, g.size - 3)
    u = np.clip(t - i, 0.0, 1.0)
    p0, p1, p2, p3 = values[i - 1], values[i], values[i + 1], values[i + 2]
    inner = p1 + 0.5 * u * (
        p2 - p0 + u * (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3 + u * (3.0 * (p1 - p2) + p3 - p0))
    )
    lo = values[0] + (values[1] - values[0]) / step * (beta - g[0])
    hi = values[-1] + (values[-1] - values[-2]) / step * (beta - g[-1])
    return np.where(beta < g[0], lo, np.where(beta > g[-1], hi, inner))


def _side_anchor(profile: ScoreProfile, side: bool, center: float) -> np.ndarray:
    """Intercepts ``a(beta)`` on the slope grid with ``mean over the side's items of
    expit(a + beta (x - center)) = the side's mean score`` (Newton, vectorised over the grid)."""
    on = profile.predicted == side
    if not on.any():
        on = ~on  # an empty side: anchor it like the other (only its prior is used)
    v = (profile.side_share[on, None] * profile.weight[on]).ravel()
    x = profile.x[on].ravel()
    keep = v > 0
    v, x = v[keep] / v[keep].sum(), x[keep]
    if x.max() > x.min():  # merge onto a fine grid (the profile's bins are per stratum)
        cell = np.minimum(
            ((x - x.min()) / (x.max() - x.min()) * _ANCHOR_BINS).astype(np.int64),
            _ANCHOR_BINS - 1,
        )
        vv = np.bincount(cell, weights=v, minlength=_ANCHOR_BINS)
        xx = np.bincount(cell, weights=v * x, minlength=_ANCHOR_BINS)
        ok = vv > 0
        v, x = vv[ok], xx[ok] / vv[ok]
    xc = x - center
    target = float(np.clip((v / (1.0 + np.exp(-x))).sum(), 1e-12, 1.0 - 1e-12))
    lt = math.log(target / (1.0 - target))
    a = lt - ANCHOR_GRID * float((v * xc).sum())
    for _ in range(60):
        eta = np.clip(a[:, None] + ANCHOR_GRID[:, None] * xc[None, :], -700.0, 700.0)
        p = 1.0 / (1.0 + np.exp(-eta))
        m = np.clip((p * v).sum(axis=1), 1e-300, 1.0)
        d = (p * (1.0 - p) * v).sum(axis=1)
        # Newton on log m(a) = log target (concave in a: monotone convergence from either side)
        step = np.clip((math.log(target) - np.log(m)) * m / np.maximum(d, 1e-300), -5.0, 5.0)
        a = a + step
        if np.abs(step).max() < 1e-10:
            break
    return a


def floor_reference(profile: ScoreProfile, beta: float = 1.0) -> float:
    """Logit of the predicted negatives' mean rate under the prior's centre curve: the side's
    mean score for probability scores (its anchor at any slope), the mean of
    ``expit(beta (x - center))`` for margins (intercept 0, slope ``beta``). The floor's prior
    is centred ``Hyperpriors.floor_mean`` logits below it. A profile without predicted
    negatives uses all its items (the floor then has no item to act on)."""
    on = ~profile.predicted
    if not on.any():
        on = ~on
    v = profile.side_share[on, None] * profile.weight[on]
    x = profile.x[on]
    if profile.kind == "margin":
        x = beta * (x - profile.center)
    m = float((v * (1.0 / (1.0 + np.exp(-x)))).sum() / max(float(v.sum()), 1e-300))
    m = min(max(m, 1e-12), 1.0 - 1e-12)
    return math.log(m / (1.0 - m))


def prior_of(profile: ScoreProfile, hp: Any) -> Prior:
    """The hyperprior of ``profile`` under ``hp`` (a :class:`~bayes_eval.models.pooled.Hyperpriors`;
    cached per profile and hyperpriors: the anchors cost a few milliseconds)."""
    floor = floor_reference(profile, hp.beta_mean) + hp.floor_mean
    if profile.kind == "margin":
        mean = np.array([0.0, hp.beta_mean, 0.0, math.log(hp.tau_median), floor])
        sd = np.array([hp.margin_alpha_sd, hp.beta_sd, hp.gamma_sd, hp.log_tau_sd, hp.floor_sd])
        return Prior(mean, sd, False, np.zeros((2, ANCHOR_GRID.size)))
    key = (
        hp,
        profile.kind,
        profile.center,
        profile.x.tobytes(),
        profile.weight.tobytes(),
        profile.sizes.tobytes(),
        profile.predicted.tobytes(),
    )
    hit = _ANCHOR_CACHE.get(key)
    if hit is not None:
        return hit
    mean = np.array([profile.center, hp.beta_mean, 0.0, math.log(hp.tau_median), floor])
    sd = np.array([hp.alpha_sd, hp.beta_sd, hp.alpha_sd, hp.log_tau_sd, hp.floor_sd])
    anchor = np.stack([_side_anchor(profile, s, profile.center) for s in (False, True)])
    out = Prior(mean, sd, True, anchor, float(hp.alpha_df))
    if len(_ANCHOR_CACHE) > 64:
        _ANCHOR_CACHE.clear()
    _ANCHOR_CACHE[key] = out
    return out
