r"""A linear form of the strata's positives under the pooled posterior.

For :math:`L = \sum_k w_k P_k` (every metric's acceptance event ``metric >= target`` is one:
:func:`bayes_eval.sequential.linear_form`), the first three cumulants at each hyper-node of a
:class:`~bayes_eval.models.pooled.PooledFit` are exact: given the node and its cell deviations
the strata are independent beta-binomials (:mod:`bayes_eval._cumulants`); a cell's sum mixes
them over its quadrature nodes (law of total cumulance) and the cells add. From them:

* :meth:`LinearFormNodes.prob` — ``P(L >= c)``, the nodes' Pearson type III probabilities
  averaged with the importance weights (:func:`bayes_eval.models.pooled.prob_linear_ge`);
* :meth:`LinearFormNodes.mixture` — the cumulants of L under the whole posterior, which keep
  the strata's dependence through the shared curve (the sequential calibration's look model,
  :mod:`bayes_eval.sequential._paths`).

The per-node pass is compiled (:func:`bayes_eval.models._moment_kernels.node_linear_moments`); the
numpy reference :func:`_node_linear_cumulants_reference` is what the tests hold it to.
Callers check the fit (a ``PooledFit``; not imported here, which keeps the modules acyclic):
:func:`bayes_eval.models.pooled.prob_linear_ge` and
:func:`bayes_eval.models.pooled.linear_form_nodes` are the public entry points.

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LinearFormNodes", "node_cumulants"]


def _node_moments(fit: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and third cumulant of each conditional posterior Beta, ``(..., S, Q, K)``."""
    a, b = fit.a_post, fit.b_post
    s = a + b
    mu = a / s
    mub = b / s
    var = mu * mub / (s + 1.0)
    k3 = 2.0 * var * (mub - mu) / (s + 2.0)
    return mu, var, k3


@dataclass(frozen=True, slots=True)
class LinearFormNodes:
    r"""The first three cumulants of a linear form :math:`L = \sum_k w_k P_k` at every
    hyper-node of a pooled fit, and the nodes' importance weights (:func:`linear_form_nodes`).

    Attributes
    ----------
    weight, k1, k2, k3 : ndarray of float64, (..., S)
    """

    weight: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    k3: np.ndarray

    def prob(self, c: Any) -> np.ndarray:
        """``P(L >= c)``, ``(...)``: the nodes' Pearson type III probabilities averaged with the
        importance weights (:func:`bayes_eval.models.pooled.prob_linear_ge`)."""
        from .._cumulants import prob_at_least  # scipy.special, on first use

        c = np.asarray(c, dtype=np.float64)
        p = prob_at_least(self.k1, self.k2, self.k3, c[..., None])
        return (self.weight * p).sum(axis=-1)

    def mixture(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cumulants of L under the whole posterior, each ``(...)``: the nodes' mixed
        with the importance weights (law of total cumulance). Unlike a sum over independent
        strata they keep the strata's dependence through the shared curve."""
        return _mix_cumulants(self.weight, self.k1, self.k2, self.k3, axis=-1)


def _mix_cumulants(
    p: np.ndarray, c1: np.ndarray, c2: np.ndarray, c3: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulants of a mixture with weights ``p`` of laws with cumulants ``c1, c2, c3`` along
    ``axis`` (law of total cumulance)."""
    e1 = (p * c1).sum(axis=axis)
    d = c1 - np.expand_dims(e1, axis)
    e2 = (p * (c2 + d * d)).sum(axis=axis)
    e3 = (p * (c3 + 3.0 * c2 * d + d**3)).sum(axis=axis)
    return e1, e2, e3


def node_cumulants(
    fit: Any, n: Any, h: Any, sizes: Any, w: Any, finite_population: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulants of ``sum_k w_k P_k`` at each hyper-node, each ``(..., S)`` (compiled:
    :func:`bayes_eval.models._moment_kernels.node_linear_moments`; the tests hold it to
    :func:`_node_linear_cumulants_reference`)."""
    from ._moment_kernels import node_linear_moments

    return node_linear_moments(
        fit.weight,
        fit.node_weight,
        fit.a,
        fit.b,
        np.asarray(n, dtype=np.float64),
        np.asarray(h, dtype=np.float64),
        fit.layout.cell,
        np.asarray(sizes, dtype=np.float64),
        np.asarray(w, dtype=np.float64),
        finite_population,
    )


def _node_linear_cumulants_reference(
    fit: Any, n: Any, h: Any, sizes: Any, w: Any, finite_population: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numpy reference of :func:`node_cumulants`: exact per stratum given the cell
    deviation, mixed over each cell's quadrature nodes, added over cells."""
    from .._cumulants import stratum_cumulants

    n = np.asarray(n, dtype=np.float64)[..., None, None, :]
    h = np.asarray(h, dtype=np.float64)[..., None, None, :]
    sizes = np.asarray(sizes, dtype=np.float64)
    wk = np.asarray(w, dtype=np.float64)
    mu, var, k3 = _node_moments(fit)
    cum = stratum_cumulants(mu, var, k3, n=n, h=h, sizes=sizes, finite_population=finite_population)
    m1, k2x, k3x = cum.mean, cum.var, cum.k3
    oh = fit.layout.onehot
    c1, c2, c3 = (wk * m1) @ oh, (wk * wk * k2x) @ oh, (wk**3 * k3x) @ oh  # (..., S, Q, G)
    e1, e2, e3 = _mix_cumulants(fit.node_weight, c1, c2, c3, axis=-2)
    return e1.sum(axis=-1), e2.sum(axis=-1), e3.sum(axis=-1)
