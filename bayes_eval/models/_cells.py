r"""Score cells and the exact-given-the-curve cell integrals of the pooled model.

The pooled model (:mod:`bayes_eval.models.pooled`) lets the true positive rate deviate from its
calibration curve by a logit shift :math:`\delta_g` shared by the strata of a *score cell*, plus a
small independent stratum residual. This module holds the two pieces that do not depend on the
hyperprior:

* :func:`cell_layout`: the cells. Within each predicted side the strata are ordered by their mean
  covariate and cut into ``cells`` groups of adjacent strata by cumulative side share (a stratum
  goes to the cell holding the midpoint of its share). The cells are fixed fractions of a side
  whatever the strata, which is what makes the prior of any region's positives the same for 4 or
  200 strata. A side with at most ``cells`` strata has one cell per stratum.
* :func:`cell_integrals`: given hyper-nodes (the curve's effective logit :math:`\bar\eta_k` of
  every stratum and the cell sds :math:`\sigma_g`), the marginal likelihood of each cell

  .. math::

      L_g = \int \mathcal N(\delta; 0, \sigma_g^2) \prod_{k \in g}
      \frac{B(a_k(\delta) + h_k,\, b_k(\delta) + n_k - h_k)}{B(a_k(\delta), b_k(\delta))}
      \, d\delta,

  with :math:`\mu_k(\delta) = \operatorname{expit}(\bar\eta_k + \delta)` and the stratum residual
  :math:`\theta_k \mid \delta \sim \mathrm{Beta}(c_k\mu_k, c_k(1-\mu_k))` of relative (logit-scale)
  sd :math:`\rho`: :math:`c_k + 1 = 1 / (\rho^2 \mu_k (1 - \mu_k))`. The integral is computed by
  *adaptive* Gauss–Hermite quadrature: four Newton steps on the binomial approximation of the
  integrand find its mode and curvature per cell, and ``Q`` Gauss–Hermite nodes are placed there
  (``Q`` = 5; 3 while searching for the hyper-mode)
  (so a cell with 700 labels, whose posterior sd of :math:`\delta` is 0.05, is integrated as well
  as an empty one). The normalised node weights are the cell's discrete conditional posterior of
  :math:`\delta` used by the joint draws.

The fits evaluate these with the compiled kernel :mod:`bayes_eval.models._kernels` (the same
formulas, fused per hyper-node, no temporaries); :func:`curve_logit` and :func:`cell_integrals`
here are the vectorised numpy reference it is tested against
(``_hyperposterior.log_post(..., engine="numpy")``).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata).
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
Liu & Pierce (1994), "A note on Gauss–Hermite quadrature", Biometrika 81 (adaptive quadrature).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CellIntegrals",
    "CellLayout",
    "cell_integrals",
    "cell_layout",
    "curve_logit",
    "gauss_hermite_rule",
    "log_rising",
    "residual_beta",
]

#: adaptive Gauss-Hermite nodes per cell (the fit's importance nodes and the draws); the
#: hyper-mode search uses SEARCH_NODES (the importance weights correct for the difference)
QUAD_NODES = 5
SEARCH_NODES = 3


def _gauss_hermite(q: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and log weights of ``q``-point Gauss-Hermite quadrature of a density in
    ``delta = mode + sqrt(2) s x``: ``int f = sqrt(2) s sum_q w_q exp(x_q^2) f(delta_q)``."""
    x, w = np.polynomial.hermite.hermgauss(q)
    return x, np.log(w) + x**2 - 0.5 * math.log(math.pi) + 0.5 * math.log(2.0)


_GH = {q: _gauss_hermite(q) for q in (QUAD_NODES, SEARCH_NODES)}


def gauss_hermite_rule(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``x_q`` and log weights (``log w_q + x_q^2`` plus the density's constant) of the
    ``nodes``-point rule used by :func:`cell_integrals` (cached for :data:`QUAD_NODES` and
    :data:`SEARCH_NODES`)."""
    return _GH[nodes] if nodes in _GH else _gauss_hermite(nodes)


_NEWTON_STEPS = 4
_MU_MIN = 1e-250
_C_MAX = 1e250


@dataclass(frozen=True, slots=True)
class CellLayout:
    """Score cells of a stratification.

    Attributes
    ----------
    cell : ndarray of int64, (K,)
        Cell of every stratum (cells are numbered over both sides).
    share : ndarray of float64, (G,)
        Share of its predicted side held by each cell (sums to 1 per side).
    onehot : ndarray of float64, (K, G)
        ``onehot[k, g] = 1`` iff stratum ``k`` is in cell ``g``.
    """

    cell: np.ndarray
    share: np.ndarray
    onehot: np.ndarray

    @property
    def n_cells(self) -> int:
        """Number of cells ``G`` over both sides."""
        return int(self.share.shape[0])


def cell_layout(
    side_share: np.ndarray, predicted: np.ndarray, order_key: np.ndarray, cells: int
) -> CellLayout:
    """Group the strata of each side into at most ``cells`` cells of adjacent strata.

    Parameters
    ----------
    side_share : ndarray, (K,)
        ``N_k`` over the size of the stratum's predicted side.
    predicted : ndarray of bool, (K,)
    order_key : ndarray, (K,)
        Mean covariate of every stratum (strata are ordered by it within a side).
    cells : int >= 1
        Cells per side.

    Examples
    --------
    >>> import numpy as np
    >>> lay = cell_layout(np.full(8, 0.25), np.repeat([False, True], 4), np.arange(8.0), 2)
    >>> lay.cell.tolist(), lay.share.tolist()
    ([0, 0, 1, 1, 2, 2, 3, 3], [0.5, 0.5, 0.5, 0.5])
    """
    k = side_share.shape[0]
    cell = np.empty(k, dtype=np.int64)
    base = 0
    for side in (False, True):
        idx = np.flatnonzero(predicted == side)
        if idx.size == 0:
            continue
        idx = idx[np.argsort(order_key[idx], kind="stable")]
        share = side_share[idx]
        mid = np.cumsum(share) - 0.5 * share
        raw = np.minimum((mid * cells).astype(np.int64), cells - 1)
        _, dense = np.unique(raw, return_inverse=True)
        cell[idx] = base + dense
        base += int(dense.max()) + 1
    onehot = np.zeros((k, base))
    onehot[np.arange(k), cell] = 1.0
    return CellLayout(cell, side_share @ onehot, onehot)


#: above this argument log Gamma differences use the Stirling series (error < 1e-10)
_STIRLING_MIN = 30.0


def _stirling(y: np.ndarray) -> np.ndarray:
    """``log Gamma(y) - ((y - 1/2) log y - y)`` by its asymptotic series (``y >= 30``)."""
    r = 1.0 / y
    r2 = r * r
    return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))


def log_rising(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``log Gamma(x + m) - log Gamma(x)`` for ``x > 0, m >= 0``; the Stirling series where
    ``x >= 30`` (accurate for huge ``x``, and cheaper than two ``gammaln``), ``gammaln`` below."""
    x, m = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(m, dtype=np.float64))
    big = x >= _STIRLING_MIN
    xs = np.where(big, x, _STIRLING_MIN)
    xm = xs + m
    stirling = (xs - 0.5) * np.log1p(m / xs) + m * np.log(xm) - m + _stirling(xm) - _stirling(xs)
    if big.all():
        return stirling
    from scipy.special import gammaln  # on first use: the numba engine never calls this

    xl = np.where(big, 1.0, x)
    return np.where(big, stirling, gammaln(xl + m) - gammaln(xl))


def residual_beta(mu: np.ndarray, nugget: float) -> tuple[np.ndarray, np.ndarray]:
    """``Beta(a, b)`` of mean ``mu`` and relative (logit-scale) sd ``nugget``:
    ``a + b + 1 = 1 / (nugget^2 mu (1 - mu))``."""
    mu = np.clip(mu, _MU_MIN, 1.0 - 1e-16)
    mub = 1.0 - mu
    c = np.clip(1.0 / (nugget * nugget * mu * mub) - 1.0, 1e-3, _C_MAX)
    return c * mu, c * mub


@dataclass(frozen=True, slots=True)
class CellIntegrals:
    """Result of :func:`cell_integrals` at hyper-nodes of shape ``(..., P)``.

    Attributes
    ----------
    log_lik : ndarray, (..., P)
        Log marginal likelihood (sum over cells, up to the binomial coefficients).
    node_weight : ndarray, (..., P, Q, G) or None
        Conditional posterior of each cell's deviation over its ``Q`` quadrature nodes.
    a, b : ndarray, (..., P, Q, K) or None
        Conditional prior ``Beta(a, b)`` of each stratum's rate at each quadrature node of its cell.
    """

    log_lik: np.ndarray
    node_weight: np.ndarray | None
    a: np.ndarray | None
    b: np.ndarray | None


def cell_integrals(
    ebar: np.ndarray,
    sigma: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    layout: CellLayout,
    nugget: float,
    *,
    keep: bool = False,
    nodes: int = QUAD_NODES,
) -> CellIntegrals:
    """Adaptive Gauss–Hermite cell integrals (module docstring).

    Parameters
    ----------
    ebar : ndarray, (..., P, K)
        Effective curve logit of every stratum at every hyper-node.
    sigma : ndarray, (..., P, G)
        Prior sd of every cell's deviation.
    n, h : ndarray, (..., 1, K)
        Labels and positives.
    layout : CellLayout
    nugget : float
        Relative sd of a stratum around its cell.
    keep : bool
        Also return the node weights and the Betas (for the draws).
    nodes : int
        Quadrature nodes per cell (:data:`QUAD_NODES` or :data:`SEARCH_NODES`).
    """
    from scipy.special import expit  # on first use (the numpy engine; ``next`` never needs it)

    gh_x, gh_logw = gauss_hermite_rule(nodes)
    oh = layout.onehot
    cell = layout.cell
    inv_var = 1.0 / (sigma * sigma)
    nug2 = nugget * nugget
    d = np.zeros(sigma.shape)
    # Newton on log N(d; 0, s^2) + sum_k [h log mu + (n - h) log(1 - mu)] (overdispersed by the
    # residual), concave in d: finds the mode and curvature the nodes are placed at
    for _ in range(_NEWTON_STEPS + 1):
        mu = expit(ebar + d[..., cell])
        pq = mu * (1.0 - mu)
        over = 1.0 + np.maximum(n - 1.0, 0.0) * nug2 * pq / (1.0 + nug2 * pq)
        info = (n * pq / over) @ oh + inv_var
        grad = ((h - n * mu) / over) @ oh - d * inv_var
        d = d + np.clip(grad / info, -3.0, 3.0)
    s = 1.0 / np.sqrt(info)
    dq = d[..., None, :] + (math.sqrt(2.0) * gh_x)[:, None] * s[..., None, :]  # (..., P, Q, G)
    mu = expit(ebar[..., None, :] + dq[..., cell])  # (..., P, Q, K)
    a, b = residual_beta(mu, nugget)
    nq, hq = n[..., None, :], h[..., None, :]
    ll = log_rising(a, hq) + log_rising(b, nq - hq) - log_rising(a + b, nq)
    log_prior = (
        -0.5 * dq * dq * inv_var[..., None, :]
        - np.log(sigma)[..., None, :]
        - 0.5 * math.log(2.0 * math.pi)
    )
    terms = (ll @ oh) + log_prior + gh_logw[:, None] + np.log(s)[..., None, :]
    top = terms.max(axis=-2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(terms - top)
    tot = e.sum(axis=-2, keepdims=True)
    log_cell = (np.log(tot) + top)[..., 0, :]
    log_lik = log_cell.sum(axis=-1)
    log_lik = np.where(np.isfinite(log_lik), log_lik, -np.inf)
    if not keep:
        return CellIntegrals(log_lik, None, None, None)
    return CellIntegrals(log_lik, e / tot, a, b)


def curve_logit(
    phi: np.ndarray, x: np.ndarray, weight: np.ndarray, side: np.ndarray, center: float
) -> np.ndarray:
    r"""Effective logit :math:`\bar\eta_k = \operatorname{logit} \sum_b w_{kb}
    \operatorname{expit}(\alpha + \beta (x_{kb} - x_0) + \gamma \hat y_k)`, shape ``(..., K)``
    for hyper-nodes ``phi`` of shape ``(..., 5)``; on the predicted negatives (``side == 0``)
    the rate is floored, :math:`\epsilon + (1 - \epsilon)\,\operatorname{expit}(\bar\eta_k)`
    with :math:`\epsilon = \operatorname{expit}(\phi_5)` (:mod:`bayes_eval.models.pooled`,
    "the floor"). Hyper-nodes of shape ``(..., 4)`` have no floor."""
    from scipy.special import expit  # on first use (the numpy engine; ``next`` never needs it)

    al, be, ga = (phi[..., j, None, None] for j in range(3))
    eta = al + be * (x - center) + ga * side[:, None]
    sp = (weight * expit(eta)).sum(axis=-1)
    sq = (weight * expit(-eta)).sum(axis=-1)
    if phi.shape[-1] > 4:
        # p' = eps + (1 - eps) p, q' = (1 - eps) q on the predicted negatives
        eps = expit(phi[..., 4, None])
        floored = side == 0
        sp = np.where(floored, eps + (1.0 - eps) * sp, sp)
        sq = np.where(floored, (1.0 - eps) * sq, sq)
    lp = np.log(np.maximum(sp, _MU_MIN))
    lq = np.log(np.maximum(sq, _MU_MIN))
    return lp - lq
