r"""Compiled (numba) kernel of the pooled model's log hyperposterior: one fused pass per row.

:func:`log_post` computes, for every row ``r`` and hyper-node ``p``, exactly what the numpy
reference path of :func:`bayes_eval.models._hyperposterior.log_post` computes
(:func:`bayes_eval.models._cells.curve_logit` then :func:`bayes_eval.models._cells.cell_integrals`
and :func:`bayes_eval.models._prior.remainder_lean`), with the same formulas in the same order of
operations, but without ``(R, P, Q, K)`` temporaries:

1. the effective curve logit :math:`\bar\eta_k` over the stratum's score histogram (one ``exp``
   per histogram cell gives both :math:`\operatorname{expit}(\pm\eta)`; hyper-nodes of a row
   that share :math:`(\alpha, \beta, \gamma)` and the floor share :math:`\bar\eta` and the
   sceptical lean, computed once: 10 of the 31 points of the finite-difference stencil reuse
   them);
2. per cell, the four Newton steps (plus the one that yields the curvature) of the adaptive
   Gauss--Hermite rule, then the ``Q`` nodes, the residual Betas and the beta-binomial log
   ratios ``log Gamma(x + m) - log Gamma(x)`` (Stirling series for ``x >= 30``, ``lgamma``
   below; a stratum without labels contributes exactly 0 and is skipped);
3. the log-sum-exp over each cell's nodes and the sum over cells (the log likelihood), and the
   sceptical lean :func:`bayes_eval.models._prior.remainder_lean` from the same
   :math:`\bar\eta` (the Gaussian part of the hyperprior is added by the caller);
4. what is kept besides: nothing (the mode search), every node's conditional Betas and node
   weights (``keep``: the fit that draws), or — :func:`log_post_summaries`, the sequential
   calibration's look model — each node's per-stratum mean and second moment and the cumulants
   of a linear form of the positives, formed from the node's Betas while they are in cache
   (:mod:`bayes_eval.models._moment_kernels`' formulas): ~1.2 kB per row kept instead of
   ~0.7 MB at 10 strata; the demo setting's calibration takes 0.93x the CPU (session 20,
   ``bench_calibration_time.txt``).

The kernel runs on one thread (rows in order): a ``prange`` over rows gave only 1.15x on a busy
2-core machine, and numba's threading layers are not fork-safe (``omp``) or not safe under
concurrent calls from user threads (``workqueue``).
``error_model="numpy"``: a division by zero gives ``inf``/``nan`` as in numpy.
Functions are compiled on first use (a few seconds) and cached on disk (``cache=True``), so
later processes only load them.

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
Liu & Pierce (1994), "A note on Gauss–Hermite quadrature", Biometrika 81 (adaptive quadrature).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ._moment_kernels import mix_cells, node_summaries

__all__ = ["log_post", "log_post_summaries"]


_SQRT2 = math.sqrt(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: the constants of :mod:`bayes_eval.models._cells` (kept equal; checked by the tests)
_STIRLING_MIN = 30.0
_MU_MIN = 1e-250
_C_MAX = 1e250
_NEWTON_STEPS = 4
#: ``log Gamma(x + m) - log Gamma(x)`` below ``_STIRLING_MIN`` is the log of a product of ``m``
#: factors for integer ``m`` up to this (cheaper than two ``lgamma``; the same number to rounding)
_PRODUCT_MAX = 8.0
#: what a kernel pass writes besides the lean and the log likelihood: nothing, every node's
#: conditional Betas and node weights (draws), or per-node summaries (the look model)
_LIKELIHOOD, _KEEP, _SUMMARIES = 0, 1, 2


@njit(cache=True, error_model="numpy")
def _stirling(y: float) -> float:  # pragma: no cover - compiled
    r = 1.0 / y
    r2 = r * r
    return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0))


@njit(cache=True, error_model="numpy")
def _log_rising(x: float, m: float) -> float:  # pragma: no cover - compiled
    """``log Gamma(x + m) - log Gamma(x)`` (``_cells.log_rising`` for one pair)."""
    if m == 0.0:
        return 0.0
    if x >= _STIRLING_MIN:
        xm = x + m
        return (x - 0.5) * math.log1p(m / x) + m * math.log(xm) - m + _stirling(xm) - _stirling(x)
    if m <= _PRODUCT_MAX and m == math.floor(m):
        # a small count: Gamma(x + m) / Gamma(x) = x (x + 1) ... (x + m - 1), one log
        prod = x
        for i in range(1, int(m)):
            prod *= x + i
        return math.log(prod)
    return math.lgamma(x + m) - math.lgamma(x)


@njit(cache=True, error_model="numpy")
def _expit(v: float) -> float:  # pragma: no cover - compiled
    return 1.0 / (1.0 + math.exp(-v))


@njit(cache=True, error_model="numpy")
def _curve(
    al: float,
    be: float,
    ga: float,
    fl: float,
    x: np.ndarray,
    w: np.ndarray,
    side: np.ndarray,
    center: float,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``_cells.curve_logit`` of one hyper-node into ``out`` (K,); ``fl`` is the logit of the
    predicted negatives' floor."""
    kk, bb = x.shape
    eps = _expit(fl)
    keep = 1.0 - eps
    for k in range(kk):
        off = ga * side[k]
        sp = 0.0
        sq = 0.0
        for j in range(bb):
            wj = w[k, j]
            if wj == 0.0:  # padding cells of the histogram
                continue
            eta = (al + be * (x[k, j] - center)) + off
            e = math.exp(-abs(eta))
            t = 1.0 / (1.0 + e)
            et = e * t
            p = t if eta >= 0.0 else et
            q = et if eta >= 0.0 else t
            sp += wj * p
            sq += wj * q
        if side[k] == 0.0:  # the floor: p' = eps + (1 - eps) p, q' = (1 - eps) q
            sp = eps + keep * sp
            sq = keep * sq
        out[k] = math.log(max(sp, _MU_MIN)) - math.log(max(sq, _MU_MIN))


@njit(cache=True, error_model="numpy")
def _log_expit(v: float) -> float:  # pragma: no cover - compiled
    """``log expit(v)`` without overflow (``-logaddexp(0, -v)``)."""
    if v >= 0.0:
        return -math.log1p(math.exp(-v))
    return v - math.log1p(math.exp(v))


@njit(cache=True, error_model="numpy")
def _remainder_lean(
    ebar: np.ndarray, log_rest: np.ndarray, side: np.ndarray, lp: np.ndarray, lq: np.ndarray
) -> float:  # pragma: no cover - compiled
    """``_prior.remainder_lean`` of one hyper-node: ``log expit(m_0) + log expit(-m_1)`` with
    ``m_s`` the logit of the mean curve rate over side s's unlabelled items (log-sum-exp of
    ``log r_k + log expit(+-ebar_k)`` per side; a side without unlabelled items adds 0).
    ``log_rest`` is ``log r_k`` of the row (``-inf`` where no item is unlabelled); ``lp, lq``
    (K,) are scratch. ``log expit(-e) = log expit(e) - e``: one ``log1p`` per stratum."""
    kk = ebar.shape[0]
    for k in range(kk):
        if log_rest[k] == -math.inf:
            continue
        le = _log_expit(ebar[k])
        lp[k] = log_rest[k] + le
        lq[k] = lp[k] - ebar[k]
    out = 0.0
    for s in range(2):
        top_p = -math.inf
        top_q = -math.inf
        for k in range(kk):
            if side[k] != s or log_rest[k] == -math.inf:
                continue
            top_p = max(top_p, lp[k])
            top_q = max(top_q, lq[k])
        if top_p == -math.inf and top_q == -math.inf:
            continue
        sp = 0.0
        sq = 0.0
        for k in range(kk):
            if side[k] != s or log_rest[k] == -math.inf:
                continue
            sp += math.exp(lp[k] - top_p)
            sq += math.exp(lq[k] - top_q)
        la = math.log(sp) + top_p
        lb = math.log(sq) + top_q
        out += _log_expit(la - lb) if s == 0 else _log_expit(lb - la)
    return out


@njit(cache=True, error_model="numpy")
def _row(
    phi: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    side: np.ndarray,
    center: float,
    cell: np.ndarray,
    sqrt_share: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    sizes: np.ndarray,
    nugget: float,
    gh_x: np.ndarray,
    gh_logw: np.ndarray,
    mode: int,
    wk: np.ndarray,
    finite: bool,
    lean_out: np.ndarray,
    ll_out: np.ndarray,
    nw_out: np.ndarray,
    a_out: np.ndarray,
    b_out: np.ndarray,
    mom_out: np.ndarray,
    lin_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """One row: ``phi`` (P, 5), ``n, h`` (K,); writes ``lean_out, ll_out`` (P,); with
    ``mode`` :data:`_KEEP` also ``nw_out`` (P, Q, G) and ``a_out, b_out`` (P, Q, K), with
    :data:`_SUMMARIES` ``mom_out`` (P, K, 2) and ``lin_out`` (P, 3) (``node_summaries`` with
    the linear form's weights ``wk`` (K,) and ``finite``)."""
    keep = mode == _KEEP
    betas = mode != _LIKELIHOOD  # every stratum's Betas, labelled or not
    npt = phi.shape[0]
    kk = x.shape[0]
    gg = sqrt_share.shape[0]
    qq = gh_x.shape[0]
    nug2 = nugget * nugget
    ebar = np.empty((npt, kk))
    inv_var = np.empty(gg)
    log_sig = np.empty(gg)
    d = np.empty(gg)
    info = np.empty(gg)
    grad = np.empty(gg)
    dq = np.empty((qq, gg))
    terms = np.empty((qq, gg))
    nm1 = np.empty(kk)
    log_rest = np.empty(kk)  # log of the unlabelled items per stratum (-inf: none)
    lean_p = np.empty(kk)
    lean_q = np.empty(kk)
    a_s = np.empty((qq, kk))
    b_s = np.empty((qq, kk))
    c1 = np.empty((qq, gg))
    c2 = np.empty((qq, gg))
    c3 = np.empty((qq, gg))
    for k in range(kk):
        nm1[k] = max(n[k] - 1.0, 0.0)
        rest = sizes[k] - n[k]
        log_rest[k] = math.log(rest) if rest > 0.0 else -math.inf
    for p in range(npt):
        al = phi[p, 0]
        be = phi[p, 1]
        ga = phi[p, 2]
        fl = phi[p, 4]
        src = -1
        for p2 in range(p):
            if phi[p2, 0] == al and phi[p2, 1] == be and phi[p2, 2] == ga and phi[p2, 4] == fl:
                src = p2
                break
        if src >= 0:  # the same curve, hence the same lean
            for k in range(kk):
                ebar[p, k] = ebar[src, k]
            lean_out[p] = lean_out[src]
        else:
            _curve(al, be, ga, fl, x, w, side, center, ebar[p])
            lean_out[p] = _remainder_lean(ebar[p], log_rest, side, lean_p, lean_q)
        tau = math.exp(phi[p, 3])
        for g in range(gg):
            sig = tau / sqrt_share[g]
            inv_var[g] = 1.0 / (sig * sig)
            log_sig[g] = math.log(sig)
            d[g] = 0.0
        # Newton on the overdispersed binomial approximation (``_cells.cell_integrals``)
        for _ in range(_NEWTON_STEPS + 1):
            for g in range(gg):
                info[g] = 0.0
                grad[g] = 0.0
            for k in range(kk):
                nk = n[k]
                if nk == 0.0:
                    continue
                g = cell[k]
                mu = _expit(ebar[p, k] + d[g])
                pq = mu * (1.0 - mu)
                inv_over = 1.0 / (1.0 + nm1[k] * nug2 * pq / (1.0 + nug2 * pq))
                info[g] += nk * pq * inv_over
                grad[g] += (h[k] - nk * mu) * inv_over
            for g in range(gg):
                info[g] += inv_var[g]
                r = (grad[g] - d[g] * inv_var[g]) / info[g]
                if r > 3.0:
                    r = 3.0
                elif r < -3.0:
                    r = -3.0
                d[g] = d[g] + r
        for g in range(gg):
            s = 1.0 / math.sqrt(info[g])
            ls = math.log(s)
            for q in range(qq):
                v = d[g] + (_SQRT2 * gh_x[q]) * s
                dq[q, g] = v
                # the cell's log prior and rule weight; the strata's log ratios are added below
                terms[q, g] = ((-0.5 * v) * v * inv_var[g] - log_sig[g]) - _HALF_LOG_2PI
                terms[q, g] += gh_logw[q] + ls
        for q in range(qq):
            for k in range(kk):
                nk = n[k]
                if nk == 0.0 and not betas:
                    continue
                g = cell[k]
                mu = _expit(ebar[p, k] + dq[q, g])
                mu = min(max(mu, _MU_MIN), 1.0 - 1e-16)
                mub = 1.0 - mu
                c = min(max(1.0 / (nug2 * mu * mub) - 1.0, 1e-3), _C_MAX)
                a = c * mu
                b = c * mub
                if keep:
                    a_out[p, q, k] = a
                    b_out[p, q, k] = b
                elif betas:
                    a_s[q, k] = a
                    b_s[q, k] = b
                if nk == 0.0:
                    continue
                hk = h[k]
                ll = _log_rising(a, hk) + _log_rising(b, nk - hk) - _log_rising(a + b, nk)
                terms[q, g] += ll
        log_lik = 0.0
        for g in range(gg):
            top = terms[0, g]
            nan = top != top
            for q in range(1, qq):
                v = terms[q, g]
                if v != v:
                    nan = True
                elif v > top:
                    top = v
            if nan or not math.isfinite(top):
                top = 0.0
            tot = 0.0
            for q in range(qq):
                e = math.exp(terms[q, g] - top)
                terms[q, g] = e
                tot += e
            log_lik += math.log(tot) + top
            if betas:  # the cell's conditional node weights, in place
                for q in range(qq):
                    terms[q, g] = terms[q, g] / tot
                    if keep:
                        nw_out[p, q, g] = terms[q, g]
        if not math.isfinite(log_lik):
            log_lik = -math.inf
        ll_out[p] = log_lik
        if mode == _SUMMARIES:
            node_summaries(terms, a_s, b_s, n, h, cell, sizes, wk, finite, c1, c2, c3, mom_out[p])
            lin_out[p, 0], lin_out[p, 1], lin_out[p, 2] = mix_cells(terms, c1, c2, c3)


@njit(cache=True, error_model="numpy")
def _rows(
    phi: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    side: np.ndarray,
    center: float,
    cell: np.ndarray,
    sqrt_share: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    sizes: np.ndarray,
    nugget: float,
    gh_x: np.ndarray,
    gh_logw: np.ndarray,
    mode: int,
    wk: np.ndarray,
    finite: bool,
    lean_out: np.ndarray,
    ll_out: np.ndarray,
    nw_out: np.ndarray,
    a_out: np.ndarray,
    b_out: np.ndarray,
    mom_out: np.ndarray,
    lin_out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    # outputs a mode does not write are placeholders with one row
    last_keep = nw_out.shape[0] - 1
    last_sum = mom_out.shape[0] - 1
    for r in range(phi.shape[0]):
        kr = min(r, last_keep)
        sr = min(r, last_sum)
        _row(
            phi[r],
            x,
            w,
            side,
            center,
            cell,
            sqrt_share,
            n[r],
            h[r],
            sizes,
            nugget,
            gh_x,
            gh_logw,
            mode,
            wk,
            finite,
            lean_out[r],
            ll_out[r],
            nw_out[kr],
            a_out[kr],
            b_out[kr],
            mom_out[sr],
            lin_out[sr],
        )


def _run(
    mode: int,
    phi: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    side: np.ndarray,
    center: float,
    cell: np.ndarray,
    share: np.ndarray,
    sizes: np.ndarray,
    nugget: float,
    gh_x: np.ndarray,
    gh_logw: np.ndarray,
    w: np.ndarray | None = None,
    finite: bool = True,
) -> tuple[np.ndarray, ...]:
    """One kernel pass in ``mode``; returns ``lean, ll, nw, a, b, mom, lin`` (placeholders of one
    row for what the mode does not write)."""
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    n = np.ascontiguousarray(n, dtype=np.float64)
    h = np.ascontiguousarray(h, dtype=np.float64)
    rr, npt, _ = phi.shape
    kk = n.shape[-1]
    gg = share.shape[0]
    qq = gh_x.shape[0]
    lean = np.empty((rr, npt))
    ll = np.empty((rr, npt))
    nr = rr if mode == _KEEP else 1
    nw = np.empty((nr, npt, qq, gg))
    a = np.empty((nr, npt, qq, kk))
    b = np.empty((nr, npt, qq, kk))
    sr = rr if mode == _SUMMARIES else 1
    mom = np.empty((sr, npt, kk, 2))
    lin = np.empty((sr, npt, 3))
    wk = np.zeros(kk) if w is None else np.ascontiguousarray(np.broadcast_to(w, (kk,)), np.float64)
    _rows(
        phi,
        np.ascontiguousarray(x, dtype=np.float64),
        np.ascontiguousarray(weight, dtype=np.float64),
        np.ascontiguousarray(side, dtype=np.float64),
        float(center),
        np.ascontiguousarray(cell, dtype=np.int64),
        np.sqrt(np.asarray(share, dtype=np.float64)),
        n,
        h,
        np.ascontiguousarray(sizes, dtype=np.float64),
        float(nugget),
        np.ascontiguousarray(gh_x, dtype=np.float64),
        np.ascontiguousarray(gh_logw, dtype=np.float64),
        int(mode),
        wk,
        bool(finite),
        lean,
        ll,
        nw,
        a,
        b,
        mom,
        lin,
    )
    return lean, ll, nw, a, b, mom, lin


def log_post(
    phi: np.ndarray, n: np.ndarray, h: np.ndarray, *, keep: bool = False, **geometry: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Sceptical lean and cell integrals of rows ``phi`` (R, P, 5) with counts ``n, h`` (R, K).

    ``geometry``: the profile's ``x, weight`` (K, B), ``side`` (K,), ``center``, the layout's
    ``cell`` (K,) and ``share`` (G,), ``sizes`` (K,), ``nugget`` and the Gauss--Hermite rule
    ``gh_x, gh_logw`` (Q,). Returns the lean (:func:`bayes_eval.models._prior.remainder_lean`)
    and ``log_lik`` (R, P) and, with ``keep``, the node weights (R, P, Q, G) and the conditional
    prior Betas ``a, b`` (R, P, Q, K) (else three ``None``).
    """
    lean, ll, nw, a, b, _, _ = _run(_KEEP if keep else _LIKELIHOOD, phi, n, h, **geometry)
    if not keep:
        return lean, ll, None, None, None
    return lean, ll, nw, a, b


def log_post_summaries(
    phi: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    *,
    w: np.ndarray,
    finite: bool,
    **geometry: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`log_post` that keeps, instead of every node's Betas, what the look model needs
    from them, node by node: returns the lean and ``log_lik`` (R, P), ``mom`` (R, P, K, 2) —
    each stratum's mean and second moment of its posterior rate given the hyper-node (mixed
    over its cell's quadrature nodes) — and ``lin`` (R, P, 3), the first three cumulants of the
    linear form ``sum_k w_k P_k`` (finite-population completion if ``finite``) given the node.
    Mixed with the importance weights they are :func:`~bayes_eval.models._moment_kernels.
    marginal_moments` and ``node_linear_moments`` of the fit that keeps the Betas (the same
    formulas, summed in another order)."""
    lean, ll, _, _, _, mom, lin = _run(_SUMMARIES, phi, n, h, w=w, finite=finite, **geometry)
    return lean, ll, mom, lin
