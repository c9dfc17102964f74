r"""The pooled model's log hyperposterior and the stage every fit shares: mode, Laplace
approximation and importance nodes.

:func:`log_post` evaluates the log hyperposterior (up to a constant) at hyper-nodes
:math:`\phi = (\alpha, \beta, \gamma, \log\tau, \operatorname{logit}\epsilon)`: the cells'
integrated likelihood (adaptive Gauss--Hermite over each cell's deviation), the sceptical lean
and the Gaussian part of the hyperprior, by the compiled kernel
(:mod:`bayes_eval.models._kernels`) or its numpy reference (:mod:`bayes_eval.models._cells`,
:func:`bayes_eval.models._prior.remainder_lean`).
:func:`hyper_stage` validates the counts, finds each row's mode by damped Newton
(:func:`bayes_eval.models._laplace.newton`) and places the importance nodes around the Laplace
approximation. What is then kept at the nodes differs by caller:
:func:`bayes_eval.models.pooled.fit_pooled` keeps every node's conditional Betas (joint draws),
the sequential calibration's look model (:func:`bayes_eval.models._look.look_refit`) only the
per-node summaries it needs (:func:`log_post_summaries`).

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
Liu & Pierce (1994), "A note on Gauss-Hermite quadrature", Biometrika 81.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cells import (
    QUAD_NODES,
    SEARCH_NODES,
    CellIntegrals,
    CellLayout,
    cell_integrals,
    cell_layout,
    curve_logit,
    gauss_hermite_rule,
)
from ._laplace import importance_nodes, neg_inverse, newton
from ._prior import LEAN_POWER, Prior, prior_of, remainder_lean
from ._profile import ScoreProfile

__all__ = [
    "ENGINES",
    "HyperStage",
    "hyper_stage",
    "layout_of",
    "log_post",
    "log_post_summaries",
]

#: dimension of the hyperparameter vector (alpha, beta, gamma, log tau, logit of the floor)
D = 5

#: engine of :func:`log_post`: ``"numba"`` (the compiled kernel of :mod:`._kernels`) or
#: ``"numpy"`` (the reference implementation, :func:`._cells.curve_logit` and
#: :func:`._cells.cell_integrals`; same mathematics, kept for the tests)
ENGINES = ("numba", "numpy")
_ENGINE = "numba"


def layout_of(profile: ScoreProfile, hp: Any) -> CellLayout:
    """The score cells of ``profile`` under hyperpriors ``hp`` (``hp.cells`` per side)."""
    order = (profile.x * profile.weight).sum(axis=-1)
    return cell_layout(profile.side_share, profile.predicted, order, hp.cells)


def _geometry(
    phi: np.ndarray,
    profile: ScoreProfile,
    layout: CellLayout,
    n: np.ndarray,
    h: np.ndarray,
    nugget: float,
    nodes: int,
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """The kernel's rows (``phi`` (R, P, 5), ``n, h`` (R, K); batch shape) and keywords."""
    batch = np.broadcast_shapes(phi.shape[:-2], n.shape[:-2], h.shape[:-2])
    npt, k = phi.shape[-2], n.shape[-1]
    ph = np.broadcast_to(phi, (*batch, npt, D)).reshape(-1, npt, D)
    nr = np.broadcast_to(n, (*batch, 1, k)).reshape(-1, k)
    hr = np.broadcast_to(h, (*batch, 1, k)).reshape(-1, k)
    gh_x, gh_logw = gauss_hermite_rule(nodes)
    geometry = {
        "x": profile.x,
        "weight": profile.weight,
        "side": profile.predicted.astype(np.float64),
        "center": profile.center,
        "cell": layout.cell,
        "share": layout.share,
        "sizes": profile.sizes,
        "nugget": nugget,
        "gh_x": gh_x,
        "gh_logw": gh_logw,
    }
    return batch, ph, nr, hr, geometry


def _assemble(
    phi: np.ndarray, log_lik: np.ndarray, lean: np.ndarray, prior: Prior
) -> tuple[np.ndarray, np.ndarray]:
    """The log hyperposterior from the log likelihood and the lean (``LEAN_POWER`` times it,
    0 for margin priors), and that lean."""
    lean = LEAN_POWER * lean if prior.anchored else np.zeros_like(log_lik)
    lp = log_lik + prior.log_density(phi) + lean
    return np.where(np.isfinite(lp), lp, -np.inf), lean


def log_post(
    phi: np.ndarray,
    profile: ScoreProfile,
    layout: CellLayout,
    n: np.ndarray,
    h: np.ndarray,
    prior: Prior,
    nugget: float,
    keep: bool = False,
    nodes: int = QUAD_NODES,
    engine: str | None = None,
) -> tuple[np.ndarray, CellIntegrals, np.ndarray]:
    """Log hyperposterior (up to a constant) at ``phi`` (..., P, 5); ``n, h`` (..., 1, K).

    Returns it with the cell integrals and the sceptical lean it contains (``LEAN_POWER`` times
    :func:`~bayes_eval.models._prior.remainder_lean`, 0 for margin priors), each ``(..., P)``.
    ``engine`` (default ``_ENGINE``) picks the compiled kernel or the numpy reference
    (:data:`ENGINES`).
    """
    engine = _ENGINE if engine is None else engine
    if engine == "numba":
        from . import _kernels

        batch, ph, nr, hr, geometry = _geometry(phi, profile, layout, n, h, nugget, nodes)
        lean, ll, nw, a, b = _kernels.log_post(ph, nr, hr, keep=keep, **geometry)
        npt, k, q, g = phi.shape[-2], n.shape[-1], geometry["gh_x"].shape[0], layout.n_cells
        ci = CellIntegrals(
            ll.reshape(*batch, npt),
            None if nw is None else nw.reshape(*batch, npt, q, g),
            None if a is None else a.reshape(*batch, npt, q, k),
            None if b is None else b.reshape(*batch, npt, q, k),
        )
        lean = lean.reshape(*batch, npt)
    elif engine == "numpy":
        side = profile.predicted.astype(np.float64)
        ebar = curve_logit(phi, profile.x, profile.weight, side, profile.center)
        sigma = np.exp(phi[..., 3])[..., None] / np.sqrt(layout.share)
        ci = cell_integrals(ebar, sigma, n, h, layout, nugget, keep=keep, nodes=nodes)
        lean = remainder_lean(ebar, profile.sizes - n, profile.predicted)
    else:
        raise ValueError(f"engine={engine!r} is not allowed; allowed: {', '.join(ENGINES)}")
    lp, lean = _assemble(phi, ci.log_lik, lean, prior)
    return lp, ci, lean


def log_post_summaries(
    phi: np.ndarray,
    profile: ScoreProfile,
    layout: CellLayout,
    n: np.ndarray,
    h: np.ndarray,
    prior: Prior,
    nugget: float,
    w: np.ndarray,
    finite: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`log_post` (compiled, ``QUAD_NODES``) with, instead of every node's Betas, each
    node's summaries (:func:`bayes_eval.models._kernels.log_post_summaries`): returns the log
    hyperposterior ``(..., P)``, ``mom`` ``(..., P, K, 2)`` (each stratum's mean and second
    moment of its rate given the node) and ``lin`` ``(..., P, 3)`` (the cumulants of
    ``sum_k w_k P_k`` given the node)."""
    from . import _kernels

    batch, ph, nr, hr, geometry = _geometry(phi, profile, layout, n, h, nugget, QUAD_NODES)
    lean, ll, mom, lin = _kernels.log_post_summaries(ph, nr, hr, w=w, finite=finite, **geometry)
    npt, k = phi.shape[-2], n.shape[-1]
    lp, _ = _assemble(phi, ll.reshape(*batch, npt), lean.reshape(*batch, npt), prior)
    return lp, mom.reshape(*batch, npt, k, 2), lin.reshape(*batch, npt, 3)


def check_counts(profile: ScoreProfile, n: Any, h: Any) -> tuple[np.ndarray, np.ndarray]:
    """``n, h`` as float arrays ``(..., K)`` with ``0 <= h <= n <= N`` (else a ValueError)."""
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


@dataclass(frozen=True, slots=True)
class HyperStage:
    """What every fit of counts ``n, h`` shares (batch shape ``(...)``, S importance nodes).

    Attributes
    ----------
    n, h : ndarray, (..., K)
        The validated counts.
    mode, cov : ndarray, (..., 5) and (..., 5, 5)
        Laplace approximation of the hyperposterior.
    phi, log_q : ndarray, (..., S, 5) and (..., S)
        Importance nodes and their log proposal density.
    layout : CellLayout
    prior : Prior
    lam_min : float
        Smallest curvature allowed in the Laplace approximation.
    """

    n: np.ndarray
    h: np.ndarray
    mode: np.ndarray
    cov: np.ndarray
    phi: np.ndarray
    log_q: np.ndarray
    layout: CellLayout
    prior: Prior
    lam_min: float

    @property
    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``n, h`` with a node axis, ``(..., 1, K)``, as :func:`log_post` takes them."""
        return self.n[..., None, :], self.h[..., None, :]


def hyper_stage(profile: ScoreProfile, n: Any, h: Any, hp: Any, init: Any = None) -> HyperStage:
    """Validate the counts, find every row's hyper-mode (Newton from ``init`` or the prior
    mean) and place the importance nodes (:func:`bayes_eval.models._laplace.importance_nodes`)."""
    n, h = check_counts(profile, n, h)
    batch = n.shape[:-1]
    prior = prior_of(profile, hp)
    lam_min = 0.5 / float(prior.sd.max()) ** 2
    layout = layout_of(profile, hp)
    if init is None:
        x = np.broadcast_to(prior.start(), (*batch, D)).copy()
    else:
        init = np.asarray(init, dtype=np.float64)
        try:
            x = np.array(np.broadcast_to(init, (*batch, D)))
        except ValueError:
            raise ValueError(
                f"init has shape {init.shape}; allowed: (..., {D}), a hyper-node "
                "(alpha, beta, gamma, log tau, logit eps) per row"
            ) from None
        if not np.isfinite(x).all():
            raise ValueError("init contains non-finite values; allowed: finite numbers")
    k = n.shape[-1]
    nn, hh = n.reshape(-1, 1, k), h.reshape(-1, 1, k)

    def search_post(p: np.ndarray, rows: np.ndarray) -> np.ndarray:
        lp, _, _ = log_post(
            p, profile, layout, nn[rows], hh[rows], prior, hp.nugget_sd, nodes=SEARCH_NODES
        )
        return lp

    x, hs = newton(x.reshape(-1, D), search_post, lam_min)
    x = x.reshape(*batch, D)
    cov = neg_inverse(hs.reshape(*batch, D, D), lam_min)
    phi, log_q = importance_nodes(x, cov)
    return HyperStage(n, h, x, cov, phi, log_q, layout, prior, lam_min)
