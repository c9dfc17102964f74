"""Capture-recapture kernels: the on-topic items that neither classifier caught (numpy only).

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. 1) estimate
recall by the Lincoln-Petersen ratio :math:`|T \\cap A_{12}| / |T \\cap A_2|`. Under their
Assumption 1 that ratio equals the recall :math:`r_1 = P[A_1 | T]` *in expectation only*: in a
realised topic set :math:`T` it differs from the realised recall :math:`|T \\cap A_1| / |T|` by
about :math:`\\sqrt{r_1 (1 - r_1) / |T \\cap A_2|}`, because the number :math:`x_0` of on-topic
items caught by neither classifier is unobserved. This module draws :math:`x_0` and hence the
realised recall from a Bayesian capture-recapture model, draw by draw, given draws of the three
observed cell counts.

The model
    With :math:`x_{12} = |T \\cap A_{12}|`, :math:`x_1 = |T \\cap A_1 \\setminus A_2|`,
    :math:`x_2 = |T \\cap A_2 \\setminus A_1|` and :math:`n = |T|`, each on-topic item is caught
    independently with the cell probabilities

    .. math::

        P_{12} = \\delta_1 r_1 r_2,\\quad P_1 = r_1 - \\delta_1 r_1 r_2,\\quad
        P_2 = r_2 - \\delta_1 r_1 r_2,\\quad P_0 = 1 - r_1 - r_2 + \\delta_1 r_1 r_2,

    so :math:`(x_{12}, x_1, x_2, x_0) \\sim \\mathrm{Multinomial}(n; P)`, with :math:`\\delta_1`
    the paper's dependence ratio (1 under Assumption 1, fixed or given a range by the user).
    Write :math:`m = x_{12} + x_1 + x_2` and :math:`\\pi = (P_{12}, P_1, P_2) / (1 - P_0)` for
    the cell probabilities of a caught item. The map :math:`(r_1, r_2) \\mapsto \\pi` is one to
    one, with inverse

    .. math::

        r_1 = \\frac{\\pi_{12}}{\\delta_1 (\\pi_{12} + \\pi_2)}, \\qquad
        r_2 = \\frac{\\pi_{12}}{\\delta_1 (\\pi_{12} + \\pi_1)}.

    Priors: the scale prior :math:`p(n) \\propto 1/n` on the topic size, and on the recalls the
    prior that makes :math:`\\pi \\sim \\mathrm{Dirichlet}(\\alpha, \\alpha, \\alpha)`
    (``alpha = 1/2``, Jeffreys, by default), restricted to :math:`r_1, r_2 \\le 1,\\ P_0 \\ge 0`.
    Summing the likelihood over :math:`n` with the :math:`1/n` prior,

    .. math::

        \\sum_{x_0 \\ge 0} \\frac{(m + x_0 - 1)!}{x_0!} P_0^{x_0} (1 - P_0)^m = (m - 1)!,

    so the posterior factorises exactly into

    .. math::

        \\pi \\mid x \\sim \\mathrm{Dirichlet}(x_{12} + \\alpha, x_1 + \\alpha, x_2 + \\alpha),
        \\qquad x_0 \\mid \\pi, x \\sim \\mathrm{NegativeBinomial}(m, 1 - P_0)

    (failures before the :math:`m`-th success), truncated to the cell bounds of :math:`x_0` when
    these are known (at most the size of the *neither* cell). Then :math:`|T| = m + x_0` and the
    realised recalls :math:`(x_{12} + x_1) / |T|`, :math:`(x_{12} + x_2) / |T|` lie in
    :math:`[0, 1]` in every draw. Marginally :math:`\\delta_1 r_1 \\sim \\mathrm{Beta}(x_{12} +
    \\alpha, x_2 + \\alpha)`: the Bayesian Lincoln-Petersen ratio of Eq. (1).

Labelling noise enters through the cell counts: the callers pass draws of :math:`x_{12}, x_1,
x_2` from the precision posteriors (a two-stage, "cut" posterior: the capture model's marginal
law of the three observed counts is flat relative to the labels' likelihood, three free
parameters :math:`n, r_1, r_2` for three counts, and is not fed back).

References
----------
Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. (1),
Assumption 1 and :math:`\\delta_1` (section 5.1).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "DELTA_GRID_POINTS",
    "MAX_ROUNDS",
    "RESOLVED_CELL",
    "capture_draws",
    "cell_resolution",
    "delta_grid",
    "project_cells",
    "truncated_negative_binomial",
]

#: values of delta_1 at which a sensitivity range is evaluated (geometrically spaced, both ends)
DELTA_GRID_POINTS = 9
#: rounds of redrawing for the rejection steps before giving up
MAX_ROUNDS = 400
#: posterior mean / sd of the smallest single-caught cell below which the labels do not resolve it
RESOLVED_CELL = 2.0
#: relative sd below which a cell's draws count as one exact value (float rounding)
_EXACT = 1e-9
#: smallest probability of being caught (keeps the negative binomial defined)
_MIN_CAUGHT = 1e-12


def delta_grid(low: float, high: float, points: int = DELTA_GRID_POINTS) -> np.ndarray:
    """``points`` values from ``low`` to ``high``, geometrically spaced (one if equal)."""
    if low == high:
        return np.array([float(low)])
    return np.geomspace(low, high, points)


def truncated_negative_binomial(
    size: np.ndarray,
    p: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    gen: np.random.Generator,
) -> np.ndarray:
    """``NegativeBinomial(size, p)`` (failures before ``size`` successes) truncated to [low, high].

    Plain draws first; the draws outside the bounds are replaced by inverse-CDF draws of the
    truncated law, which is rejection sampling with its repeats done in one step. 1-D arrays.
    """
    x = gen.negative_binomial(size, p).astype(np.float64)
    bad = np.flatnonzero((x < low) | (x > high))
    if bad.size:
        dist = stats.nbinom(size[bad], p[bad])
        lo, hi = low[bad], high[bad]
        v = gen.random(bad.size)
        # lower truncation in the upper tail: invert the survival function (accurate there)
        s_lo = np.where(lo > 0, dist.sf(lo - 1), 1.0)
        s_hi = dist.sf(hi)
        upper = s_lo < 0.5
        out = np.empty(bad.size)
        with np.errstate(invalid="ignore"):
            out[upper] = dist.isf(s_hi + v * (s_lo - s_hi))[upper]
            c_lo = np.where(lo > 0, dist.cdf(lo - 1), 0.0)
            c_hi = dist.cdf(hi)
            out[~upper] = dist.ppf(c_lo + v * (c_hi - c_lo))[~upper]
        # beyond double precision (s_lo == 0) the truncated law sits at its lower end
        out = np.where(np.isfinite(out), out, lo)
        out[upper & (s_lo <= 0)] = lo[upper & (s_lo <= 0)]
        x[bad] = np.clip(out, lo, hi)
    return x


def _recalls(g12, g1, g2, delta):
    s = g12 + g1 + g2
    with np.errstate(divide="ignore", invalid="ignore"):
        pi12, pi1, pi2 = g12 / s, g1 / s, g2 / s
        r1 = pi12 / (delta * (pi12 + pi2))
        r2 = pi12 / (delta * (pi12 + pi1))
    p0 = 1.0 - r1 - r2 + delta * r1 * r2
    return r1, r2, p0


def capture_draws(
    x12,
    x1,
    x2,
    *,
    alpha: float,
    delta,
    gen: np.random.Generator,
    x0_low=0.0,
    x0_high=np.inf,
    redraw_delta: bool = False,
) -> tuple[dict[str, np.ndarray], float]:
    """Posterior draws of the capture-recapture layer, elementwise over broadcast arrays.

    Parameters
    ----------
    x12, x1, x2 : array
        Draws of the on-topic counts of :math:`A_{12}`, :math:`A_1 \\setminus A_2`,
        :math:`A_2 \\setminus A_1` (non-negative; need not be integers).
    alpha : float
        Dirichlet concentration of the caught-cell probabilities.
    delta : float or array
        :math:`\\delta_1` per draw.
    x0_low, x0_high : float or array
        Bounds of :math:`x_0` (labelled positives / size less labelled negatives of the neither
        cell when known).
    redraw_delta : bool
        Whether ``delta`` is a draw from a prior (then an out-of-support draw also takes the
        :math:`\\delta_1` of the random entry, so the support updates that prior) or fixed per
        entry (a sensitivity grid).

    Returns
    -------
    dict
        ``total_positives`` (:math:`m + x_0`), ``missed`` (:math:`x_0`), ``recall_1``,
        ``recall_2`` (realised), ``capture_1``, ``capture_2`` (:math:`r_1, r_2`), with the
        broadcast shape of the inputs, and ``source``: the flat index (into the broadcast inputs)
        of the cell counts each draw used (its own unless redrawn, see below).
    float
        Fraction of Dirichlet draws inside the support set by ``delta`` (1 for ``delta >= 1``).

    Notes
    -----
    With :math:`\\delta_1 < 1` some Dirichlet draws fall outside the support
    (:math:`r_i > 1` or :math:`P_0 < 0`). The support restriction applies to the joint posterior
    of the cell counts and :math:`\\pi`, so such a draw is replaced by a fresh pair: cell counts
    of a random entry of the inputs (an empirical draw from the labelling stage) and a new
    :math:`\\pi` (and with ``redraw_delta`` that entry's :math:`\\delta_1`), until it is inside
    (rejection sampling).

    Raises
    ------
    ValueError
        If after :data:`MAX_ROUNDS` redraws some draws still violate the support (a
        :math:`\\delta_1` far below what the captures allow).
    """
    arrays = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (x12, x1, x2, delta, x0_low, x0_high))
    )
    shape = arrays[0].shape
    c12, c1, c2, d, lo, hi = (np.ascontiguousarray(a).reshape(-1) for a in arrays)
    n = c12.size
    g12 = gen.gamma(c12 + alpha)
    g1 = gen.gamma(c1 + alpha)
    g2 = gen.gamma(c2 + alpha)
    r1, r2, p0 = _recalls(g12, g1, g2, d)
    bad = np.flatnonzero(~((r1 <= 1.0) & (r2 <= 1.0) & (p0 >= 0.0)))
    proposed = n + 0
    rounds = 0
    source = np.arange(n)
    pool = (c12.copy(), c1.copy(), c2.copy(), d.copy())
    while bad.size:
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise ValueError(
                f"delta_1 as low as {float(d[bad].min()):g} is incompatible with the captures: "
                f"{bad.size} of {n} draws still give a recall above 1 after {MAX_ROUNDS} redraws "
                "(the Lincoln-Petersen ratio x12 / (x12 + x2) divided by delta_1 must stay <= 1); "
                "allowed: a larger delta_1"
            )
        # joint rejection: an out-of-support draw is replaced by a fresh (cells, pi) pair, the
        # cells taken from a random entry of the pool (the caller's draws of the cell counts)
        j = gen.integers(0, n, bad.size)
        source[bad] = j
        c12[bad], c1[bad], c2[bad] = pool[0][j], pool[1][j], pool[2][j]
        if redraw_delta:
            d[bad] = pool[3][j]
        proposed += bad.size
        a12 = gen.gamma(c12[bad] + alpha)
        a1 = gen.gamma(c1[bad] + alpha)
        a2 = gen.gamma(c2[bad] + alpha)
        s1, s2, s0 = _recalls(a12, a1, a2, d[bad])
        ok = (s1 <= 1.0) & (s2 <= 1.0) & (s0 >= 0.0)
        good = bad[ok]
        r1[good], r2[good], p0[good] = s1[ok], s2[ok], s0[ok]
        bad = bad[~ok]
    m = c12 + c1 + c2
    caught = np.clip(1.0 - p0, _MIN_CAUGHT, 1.0)
    x0 = np.zeros(n)
    live = m > 0
    if live.any():
        x0[live] = truncated_negative_binomial(m[live], caught[live], lo[live], hi[live], gen)
    total = m + x0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {
            "recall_1": (c12 + c1) / total,
            "recall_2": (c12 + c2) / total,
            "total_positives": total,
            "missed": x0,
            "capture_1": r1,
            "capture_2": r2,
        }
    out = {k: v.reshape(shape) for k, v in out.items()}
    out["source"] = source.reshape(shape)
    out["delta_1"] = d.reshape(shape)
    return out, n / proposed


def project_cells(
    y1: np.ndarray,
    y2: np.ndarray,
    y12: np.ndarray,
    size_1: float,
    size_2: float,
    size_12: float,
    tol: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Project draws of the on-topic set counts onto the coherent cells (elementwise).

    The on-topic counts :math:`y_1, y_2, y_{12}` of :math:`A_1, A_2, A_{12}` are coherent when
    the disjoint cells lie within their sizes:

    .. math::

        0 \\le x_{12} = y_{12} \\le |A_{12}|,\\quad
        0 \\le x_1 = y_1 - y_{12} \\le |A_1| - |A_{12}|,\\quad
        0 \\le x_2 = y_2 - y_{12} \\le |A_2| - |A_{12}|,

    a box in the cell coordinates, so the nearest coherent point (in any metric that is
    diagonal in the cells) clips each cell to its range. Returns the projected ``x12, x1, x2`` and
    a boolean array, True where the draw was coherent already (within ``tol``).

    Clipping is monotone, so a quantile of a cell that lies inside its range is the quantile of
    the unprojected posterior, and a bound clipped to the end of the range still holds every
    value inside it: each one-sided bound of a cell covers a true cell count exactly when the
    unprojected bound does. Conditioning on the box instead (rejection) moves the quantiles on
    the far side of the boundary outwards, which makes those bounds conservative when the labels
    cannot tell a cell from 0 (posterior projection, Sen, Patra & Dunson, arXiv:1812.05741).
    """
    y1, y2, y12 = (np.asarray(v, dtype=np.float64) for v in (y1, y2, y12))
    x12 = np.clip(y12, 0.0, size_12)
    x1 = np.clip(y1 - x12, 0.0, size_1 - size_12)
    x2 = np.clip(y2 - x12, 0.0, size_2 - size_12)
    inside = (
        (y12 >= -tol)
        & (y12 <= size_12 + tol)
        & (np.abs(x1 - (y1 - y12)) <= tol)
        & (np.abs(x2 - (y2 - y12)) <= tol)
    )
    return x12, x1, x2, inside


def cell_resolution(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """Posterior mean / sd of the smaller of the single-caught cells, over axis 0 (the draws).

    The cells :math:`x_1 = |T \\cap A_1 \\setminus A_2|`, :math:`x_2 = |T \\cap A_2 \\setminus
    A_1|` are counts, so their posterior stops at 0. When the labels measure the smaller one
    with an sd comparable to its size (a ratio below :data:`RESOLVED_CELL`, e.g. a classifier
    with recall 0.9 and 50 labels per set), the labels cannot tell it from 0: many draws are
    projected to 0 (:func:`project_cells`) and the recall's interval reaches up to about 1. A
    cell whose draws all agree gives ``inf``.
    """
    out = []
    for x in (np.asarray(x1, dtype=np.float64), np.asarray(x2, dtype=np.float64)):
        mean, sd = x.mean(axis=0), x.std(axis=0)
        # counts that agree up to rounding (e.g. y_s - y_12 of fully labelled sets) are exact
        spread = sd > _EXACT * np.maximum(np.abs(mean), 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(spread, mean / np.where(spread, sd, 1.0), np.inf))
    return np.minimum(out[0], out[1])
