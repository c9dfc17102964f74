r"""Compiled (numba) moments of the pooled posterior from its per-node conditional Betas.

Given a hyper-node s and the quadrature node q of each score cell's deviation, every stratum's
rate has the conditional posterior :math:`\mathrm{Beta}(a_{sqk} + h_k, b_{sqk} + n_k - h_k)`
(:mod:`bayes_eval.models.pooled`). Two summaries are built from them, each one formula used by
every caller:

* the marginal mean and variance of each stratum's rate — the mixture over hyper-nodes and
  quadrature nodes (:func:`marginal_moments`; the moment-matched Betas of
  :func:`bayes_eval.models.pooled.beta_approximation`, :func:`beta_from_moments`);
* the first three cumulants of a linear form :math:`L = \sum_k w_k P_k` of the strata's
  positives at each hyper-node (:func:`node_linear_moments`; exact per stratum given the node,
  mixed over each cell's quadrature nodes by the law of total cumulance, added over cells;
  :mod:`bayes_eval.models._linear_form`).

One per-node pass forms both from a hyper-node's Betas (:func:`node_summaries`, with
:func:`beta_cumulants`, :func:`form_cumulants` and :func:`mix_cells`): :func:`node_linear_moments`
calls it on a fit's stored Betas, and the log-hyperposterior kernel's summary mode
(:func:`bayes_eval.models._kernels.log_post_summaries`) while each node's Betas are in cache,
without storing them (the sequential calibration's look model).

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "beta_cumulants",
    "beta_from_moments",
    "conjugate_prior",
    "form_cumulants",
    "marginal_moments",
    "mix_cells",
    "node_linear_moments",
    "node_summaries",
]


@njit(cache=True, error_model="numpy")
def beta_cumulants(ap: float, bp: float) -> tuple[float, float, float]:  # pragma: no cover
    """Mean, variance and third cumulant of ``Beta(ap, bp)``."""
    t = ap + bp
    mu = ap / t
    mub = bp / t
    var = mu * mub / (t + 1.0)
    k3 = 2.0 * var * (mub - mu) / (t + 2.0)
    return mu, var, k3


@njit(cache=True, error_model="numpy")
def form_cumulants(
    mu: float, var: float, k3: float, nk: float, hk: float, size: float, finite: bool
) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """First three cumulants of a stratum's positives ``P_k = h_k + Binomial(N_k - n_k, theta)``
    (``finite``; else ``N_k theta``) for ``theta`` with cumulants ``mu, var, k3``."""
    if finite:
        rr = size - nk
        o = 1.0 - 2.0 * mu
        m1 = hk + rr * mu
        m2 = rr * (mu * (1.0 - mu) - var) + rr * rr * var
        m3 = (
            rr * (mu * (1.0 - mu) * o - 3.0 * var * o + 2.0 * k3)
            + 3.0 * rr * rr * (var * o - k3)
            + rr * rr * rr * k3
        )
        return m1, m2, m3
    return size * mu, size**2 * var, size**3 * k3


@njit(cache=True, error_model="numpy")
def mix_cells(
    node_weight: np.ndarray, c1: np.ndarray, c2: np.ndarray, c3: np.ndarray
) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """Cumulants of a sum over cells, each cell's (``c1, c2, c3`` (Q, G)) mixed over its
    quadrature nodes with ``node_weight`` (Q, G) (law of total cumulance)."""
    q_n, g_n = c1.shape
    e1 = 0.0
    e2 = 0.0
    e3 = 0.0
    for g in range(g_n):
        f1 = 0.0
        for q in range(q_n):
            f1 += node_weight[q, g] * c1[q, g]
        f2 = 0.0
        f3 = 0.0
        for q in range(q_n):
            p = node_weight[q, g]
            d = c1[q, g] - f1
            f2 += p * (c2[q, g] + d * d)
            f3 += p * (c3[q, g] + 3.0 * c2[q, g] * d + d * d * d)
        e1 += f1
        e2 += f2
        e3 += f3
    return e1, e2, e3


@njit(cache=True, error_model="numpy")
def node_summaries(
    nw: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
    sizes: np.ndarray,
    wk: np.ndarray,
    finite: bool,
    c1: np.ndarray,
    c2: np.ndarray,
    c3: np.ndarray,
    mom: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """One hyper-node's summaries from its cells' node weights ``nw`` (Q, G) and conditional
    prior Betas ``a, b`` (Q, K): each stratum's mixed mean and second moment of its posterior
    rate into ``mom`` (K, 2), and each (quadrature node, cell)'s cumulants of the linear form
    into ``c1, c2, c3`` (Q, G), to be mixed by :func:`mix_cells` (the formulas of
    :func:`marginal_moments`; the one per-node pass of :func:`node_linear_moments` and of the
    log-hyperposterior kernel's summary mode)."""
    qq, kk = a.shape
    c1[:] = 0.0
    c2[:] = 0.0
    c3[:] = 0.0
    mom[:] = 0.0
    for q in range(qq):
        for k in range(kk):
            g = cell[k]
            mu, var, k3 = beta_cumulants(a[q, k] + h[k], b[q, k] + (n[k] - h[k]))
            p = nw[q, g]
            mom[k, 0] += p * mu
            mom[k, 1] += p * (var + mu * mu)
            m1, m2, m3 = form_cumulants(mu, var, k3, n[k], h[k], sizes[k], finite)
            w = wk[k]
            c1[q, g] += w * m1
            c2[q, g] += w * w * m2
            c3[q, g] += w * w * w * m3


@njit(cache=True, error_model="numpy")
def _moments(
    weight: np.ndarray,
    node_weight: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
    m_out: np.ndarray,
    v_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    rows, s_n, q_n, k_n = a.shape
    for r in range(rows):
        for k in range(k_n):
            g = cell[k]
            m = 0.0
            s2 = 0.0
            for s in range(s_n):
                ws = weight[r, s]
                if ws == 0.0:
                    continue
                for q in range(q_n):
                    w = ws * node_weight[r, s, q, g]
                    mu, var, _ = beta_cumulants(
                        a[r, s, q, k] + h[r, k], b[r, s, q, k] + (n[r, k] - h[r, k])
                    )
                    m += w * mu
                    s2 += w * (var + mu * mu)
            m_out[r, k] = m
            v_out[r, k] = s2 - m * m


def _fit_rows(
    weight: np.ndarray,
    node_weight: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
) -> tuple[tuple[int, ...], tuple[np.ndarray, ...]]:
    """A fit's arrays with the batch axes broadcast and flattened to one row axis, contiguous,
    in the kernels' argument order (``weight, node_weight, a, b, n, h, cell``), and the batch
    shape."""
    batch = weight.shape[:-1]
    s, q, k = a.shape[-3:]
    g = node_weight.shape[-1]
    rows = int(np.prod(batch, dtype=np.int64))
    return batch, (
        np.ascontiguousarray(np.broadcast_to(weight, (*batch, s)).reshape(rows, s)),
        np.ascontiguousarray(
            np.broadcast_to(node_weight, (*batch, s, q, g)).reshape(rows, s, q, g)
        ),
        np.ascontiguousarray(np.broadcast_to(a, (*batch, s, q, k)).reshape(rows, s, q, k)),
        np.ascontiguousarray(np.broadcast_to(b, (*batch, s, q, k)).reshape(rows, s, q, k)),
        np.ascontiguousarray(np.broadcast_to(n, (*batch, k)).reshape(rows, k), dtype=np.float64),
        np.ascontiguousarray(np.broadcast_to(h, (*batch, k)).reshape(rows, k), dtype=np.float64),
        np.ascontiguousarray(cell, dtype=np.int64),
    )


def marginal_moments(
    weight: np.ndarray,
    node_weight: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of every stratum's marginal posterior rate, each ``(..., K)``: the
    mixture over hyper-nodes (``weight`` ``(..., S)``) and quadrature nodes of the stratum's
    cell (``node_weight`` ``(..., S, Q, G)``) of the posterior Betas ``Beta(a + h, b + n - h)``
    (``a, b`` ``(..., S, Q, K)``), without ``(..., S, Q, K)`` temporaries (the numpy formulas of
    :func:`bayes_eval.models.pooled.beta_approximation`, summed in another order)."""
    batch, arrays = _fit_rows(weight, node_weight, a, b, n, h, cell)
    rows, k = arrays[0].shape[0], arrays[2].shape[-1]
    m = np.empty((rows, k))
    v = np.empty((rows, k))
    _moments(*arrays, m, v)
    return m.reshape(*batch, k), v.reshape(*batch, k)


def beta_from_moments(m: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The moment-matched ``Beta(A, B)`` of a rate with mean ``m`` and variance ``v``:
    ``A + B = m (1 - m) / v - 1`` (clipped to [1e-6, 1e12]; ``m, v`` floored at 1e-300)."""
    m = np.clip(m, 1e-300, 1.0)
    v = np.maximum(v, 1e-300)
    conc = np.clip(m * (1.0 - m) / v - 1.0, 1e-6, 1e12)
    return m * conc, np.maximum((1.0 - m) * conc, 1e-300)


def conjugate_prior(
    big_a: np.ndarray, big_b: np.ndarray, n: np.ndarray, h: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Beta priors whose conjugate update by ``n, h`` is ``Beta(A, B)``: ``A - h`` and
    ``B - (n - h)``, floored at 1e-3."""
    return np.maximum(big_a - h, 1e-3), np.maximum(big_b - (n - h), 1e-3)


@njit(cache=True, error_model="numpy")
def _node_linear(
    weight: np.ndarray,
    node_weight: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
    sizes: np.ndarray,
    wk: np.ndarray,
    finite: bool,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    rows, s_n, q_n, k_n = a.shape
    g_n = node_weight.shape[-1]
    c1 = np.empty((q_n, g_n))
    c2 = np.empty((q_n, g_n))
    c3 = np.empty((q_n, g_n))
    mom = np.empty((k_n, 2))
    for r in range(rows):
        for s in range(s_n):
            if weight[r, s] == 0.0:
                out[r, s, 0] = 0.0
                out[r, s, 1] = 0.0
                out[r, s, 2] = 0.0
                continue
            node_summaries(
                node_weight[r, s],
                a[r, s],
                b[r, s],
                n[r],
                h[r],
                cell,
                sizes,
                wk,
                finite,
                c1,
                c2,
                c3,
                mom,
            )
            # mix each cell over its quadrature nodes, add the cells
            e1, e2, e3 = mix_cells(node_weight[r, s], c1, c2, c3)
            out[r, s, 0] = e1
            out[r, s, 1] = e2
            out[r, s, 2] = e3


def node_linear_moments(
    weight: np.ndarray,
    node_weight: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cell: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    finite_population: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First three cumulants of ``sum_k w_k P_k`` at every hyper-node, each ``(..., S)``: the
    numpy formulas of ``bayes_eval.models._linear_form._node_linear_cumulants_reference`` (exact
    stratum cumulants given a node, mixed over each cell's quadrature nodes, added over cells)
    without ``(..., S, Q, K)`` temporaries. Hyper-nodes of weight 0 get zeros (they are
    skipped, as in :func:`marginal_moments`)."""
    batch, arrays = _fit_rows(weight, node_weight, a, b, n, h, cell)
    rows, s, k = arrays[0].shape[0], arrays[0].shape[1], arrays[2].shape[-1]
    out = np.empty((rows, s, 3))
    _node_linear(
        *arrays,
        np.ascontiguousarray(np.broadcast_to(sizes, (k,)), dtype=np.float64),
        np.ascontiguousarray(np.broadcast_to(w, (k,)), dtype=np.float64),
        bool(finite_population),
        out,
    )
    out = out.reshape(*batch, s, 3)
    return out[..., 0], out[..., 1], out[..., 2]
