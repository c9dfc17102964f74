r"""Exact Beta draws with per-draw parameters (numba kernels), used by the pooled model.

:func:`bayes_eval.models.pooled.draw_theta` needs joint draws in which every draw has its own
``Beta(a, b)`` per stratum (the parameters depend on the hyper-node and on the quadrature node
of the stratum's cell that the draw picked), so the tabulated inverse CDF of
:mod:`bayes_eval._sampling` (one table per stratum column) does not apply. These kernels draw
the same distributions as :meth:`numpy.random.Generator.beta`, by algorithms that are exact in
distribution (not numpy's algorithms, so the streams differ):

* **Random bits.** SFC64 (O'Neill's small fast chaotic generator, the algorithm of
  :class:`numpy.random.SFC64`) implemented inside the kernel, its state filled by SplitMix64
  from ONE 63-bit integer drawn from the caller's :class:`numpy.random.Generator` (so every draw
  is reproducible from ``rng``; numpy seeds its SFC64 through a ``SeedSequence`` instead, so the
  streams are not numpy's) and advanced 12 steps before use. Uniforms are
  ``(j + 1/2) 2^{-53}`` with ``j`` the top 53 bits (never 0 or 1). The state is local to each
  call (no global state, ``nogil``: thread-safe).
* **Standard normal** by the 256-layer ziggurat with 52-bit mantissas (Marsaglia & Tsang 2000,
  the layout numpy uses), with Marsaglia's exact tail beyond ``r = 3.6541528853610088``.
* **Gamma(alpha), alpha >= 1** by Marsaglia & Tsang (2000):
  :math:`d = \alpha - 1/3`, :math:`c = 1/\sqrt{9d}`, :math:`v = (1 + c z)^3`, accept
  :math:`d v` if :math:`u < 1 - 0.0331 z^4` (squeeze) or
  :math:`\log u < z^2/2 + d (1 - v + \log v)`; with :math:`t = c z` the last term is
  :math:`3 \operatorname{log1p}(t) - t (3 + t (3 + t))`, or its series
  :math:`-\tfrac92 t^2 - \tfrac34 t^4 + \tfrac35 t^5 - \dots` when :math:`|t| < 0.01`, so it
  keeps its relative accuracy for any shape (the pooled model's extreme hyper-nodes reach
  :math:`10^{70}`).
* **Gamma(alpha), alpha < 1** as :math:`G_{\alpha+1} U^{1/\alpha}` in log space:
  :math:`\log X = \log G_{\alpha+1} + \log(U) / \alpha`.
* **Beta(a, b)** :math:`= X / (X + Y)` with independent ``X ~ Gamma(a)``, ``Y ~ Gamma(b)``;
  when a shape is below 1 the ratio is taken in log space,
  :math:`\theta = \operatorname{expit}(\log X - \log Y)`, so that needle strata
  (``a ~ 1e-3``) give draws in ``[0, 1]`` (possibly exactly 0 or 1 after rounding), never
  ``0/0`` or NaN (for shapes below ~1e-306 both logs overflow and the boosts decide the 0 or
  1, exactly in the limit).
* **Joint draws** (:func:`draw_joint`): per draw a node ``s`` by binary search of the
  cumulative weights, a node of every cell by a linear scan of its cumulative conditional
  weights, then every stratum's Beta, all in one pass; the Marsaglia-Tsang constants of every
  ``(s, q, k)`` are computed on first use and reused (about 8 % of the time at 200 strata).

``tests/test_beta_draws.py`` compares the draws with :meth:`numpy.random.Generator.beta` (two-
sample KS and CDFs at quantiles within 4.5 Monte Carlo standard errors) for shapes from
``1e-3`` to ``1e6``, with the exact CDF deep in the tails of small shapes and with the normal
and Gamma limits up to ``1e12``, and checks the normal and the node picking of
:func:`draw_joint`. About 33 ns per Beta draw at 200 strata (one core; numpy's
``Generator.beta`` about 90 ns with per-draw parameters).

References
----------
Marsaglia & Tsang (2000), "A simple method for generating gamma variables", ACM TOMS 26(3).
Marsaglia & Tsang (2000), "The ziggurat method for generating random variables", JSS 5(8).
O'Neill, "PCG: A family of simple fast space-efficient statistically good algorithms for
random number generation" (SFC64 as shipped with numpy). Webber et al.,
``../shared/seeds/002_bcc5f0faf615c660.txt`` (Monte Carlo beta-binomial posterior draws).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["beta", "draw_joint", "seed_from"]

_M64 = 0xFFFFFFFFFFFFFFFF


# --------------------------------------------------------------------------- ziggurat tables
def _ziggurat_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ki, wi, fi`` of the 256-layer normal ziggurat with 52-bit mantissas.

    Layer 0 is the base strip (rectangle plus tail, pseudo-width ``v / f(r)``); layer ``i`` spans
    ``[0, x_i]`` with ``x_255 = r`` and ``x_i`` falling towards the top; ``ki[i] = x_{i-1} / x_i``
    (scaled by ``2^52``) is the fraction of the layer inside the curve, ``wi = x_i / 2^52``,
    ``fi = exp(-x_i^2 / 2)`` (Marsaglia & Tsang 2000, ``zigset``).
    """
    m1 = 2.0**52
    dn = 3.6541528853610088
    tn = dn
    vn = 0.00492867323399
    ki = np.zeros(256, dtype=np.uint64)
    wi = np.zeros(256)
    fi = np.zeros(256)
    q = vn / math.exp(-0.5 * dn * dn)
    ki[0] = np.uint64(int((dn / q) * m1))
    ki[1] = np.uint64(0)
    wi[0] = q / m1
    wi[255] = dn / m1
    fi[0] = 1.0
    fi[255] = math.exp(-0.5 * dn * dn)
    for i in range(254, 0, -1):
        dn = math.sqrt(-2.0 * math.log(vn / dn + math.exp(-0.5 * dn * dn)))
        ki[i + 1] = np.uint64(int((dn / tn) * m1))
        tn = dn
        fi[i] = math.exp(-0.5 * dn * dn)
        wi[i] = dn / m1
    return ki, wi, fi


_KI, _WI, _FI = _ziggurat_tables()
_ZIG_R = 3.6541528853610088
_ZIG_INV_R = 1.0 / _ZIG_R

_U7 = np.uint64(7)
_U8 = np.uint64(8)
_U1 = np.uint64(1)
_U3 = np.uint64(3)
_U11 = np.uint64(11)
_U24 = np.uint64(24)
_U40 = np.uint64(40)
_U27 = np.uint64(27)
_U30 = np.uint64(30)
_U31 = np.uint64(31)
_UFF = np.uint64(0xFF)
_MANT52 = np.uint64(0x000FFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 2.0**-53


# --------------------------------------------------------------------------- bits
# The generator state is a tuple of four uint64 scalars passed by value and returned updated
# (``value, state = f(state, ...)``): array state inside the rejection loops would cost numba
# reference-count updates on every call.


@njit(cache=True, nogil=True)
def _seed_state(seed: np.uint64) -> tuple:
    """SFC64 state ``(a, b, c, counter)`` from one integer (SplitMix64), warmed up 12 steps."""
    z = seed
    z = z + _GOLDEN
    x = (z ^ (z >> _U30)) * _MIX1
    x = (x ^ (x >> _U27)) * _MIX2
    s0 = x ^ (x >> _U31)
    z = z + _GOLDEN
    x = (z ^ (z >> _U30)) * _MIX1
    x = (x ^ (x >> _U27)) * _MIX2
    s1 = x ^ (x >> _U31)
    z = z + _GOLDEN
    x = (z ^ (z >> _U30)) * _MIX1
    x = (x ^ (x >> _U27)) * _MIX2
    s2 = x ^ (x >> _U31)
    st = (s0, s1, s2, _U1)
    for _ in range(12):
        _, st = _next(st)
    return st


@njit(cache=True, nogil=True)
def _next(st: tuple) -> tuple:
    """One 64-bit output of SFC64 and the next state."""
    a, b, c, cnt = st
    tmp = a + b + cnt
    return tmp, (b ^ (b >> _U11), c + (c << _U3), ((c << _U24) | (c >> _U40)) + tmp, cnt + _U1)


@njit(cache=True, nogil=True)
def _uniform(st: tuple) -> tuple:
    """Uniform on ``(0, 1)``: ``(j + 1/2) 2^-53``, ``j`` the top 53 bits; and the next state."""
    r, st = _next(st)
    return (np.float64(np.int64(r >> _U11)) + 0.5) * _TWO_M53, st  # int64: one cvtsi2sd


@njit(cache=True, nogil=True)
def _normal(st: tuple) -> tuple:
    """Standard normal by the 256-layer ziggurat (module docstring); and the next state."""
    while True:
        r, st = _next(st)
        idx = np.int64(r & _UFF)
        r = r >> _U8
        neg = (r & _U1) == _U1
        rabs = (r >> _U1) & _MANT52
        x = np.float64(np.int64(rabs)) * _WI[idx]
        if neg:
            x = -x
        if rabs < _KI[idx]:
            return x, st
        if idx == 0:
            # Marsaglia's tail beyond r: x = r + E1 / r accepted when 2 E2 > (E1 / r)^2
            while True:
                u1, st = _uniform(st)
                u2, st = _uniform(st)
                xx = -_ZIG_INV_R * math.log(u1)
                yy = -math.log(u2)
                if yy + yy > xx * xx:
                    return (-(_ZIG_R + xx) if neg else _ZIG_R + xx), st
        else:
            u, st = _uniform(st)
            if (_FI[idx - 1] - _FI[idx]) * u + _FI[idx] < math.exp(-0.5 * x * x):
                return x, st


@njit(cache=True, nogil=True)
def _log_term(t: float) -> float:
    """``1 - v + log v`` for ``v = (1 + t)^3``, accurate also for tiny ``|t|`` (huge shapes):
    ``-9/2 t^2 + sum_{j >= 4} 3 (-1)^{j+1} t^j / j``."""
    if abs(t) < 0.01:
        t2 = t * t
        return t2 * (-4.5 + t2 * (-0.75 + t * (0.6 + t * (-0.5 + t * (3.0 / 7.0)))))
    return 3.0 * math.log1p(t) - t * (3.0 + t * (3.0 + t))


@njit(cache=True, nogil=True)
def _mt_constants(alpha: float) -> tuple:
    """Marsaglia-Tsang ``d = s - 1/3``, ``c = 1 / sqrt(9 d)`` of the shape ``s`` drawn for
    ``Gamma(alpha)``: ``s = alpha`` if ``alpha >= 1``, else ``s = alpha + 1`` and ``c`` is
    returned negated (the draw is then boosted by ``U^{1/alpha}``)."""
    if alpha >= 1.0:
        d = alpha - 1.0 / 3.0
        return d, 1.0 / math.sqrt(9.0 * d)
    d = (alpha + 1.0) - 1.0 / 3.0
    return d, -1.0 / math.sqrt(9.0 * d)


@njit(cache=True, nogil=True)
def _mt_gamma(st: tuple, d: float, c: float) -> tuple:
    """Marsaglia & Tsang draw ``v`` of ``Gamma(d + 1/3) = d v`` (``c = 1/sqrt(9 d)``); and the
    next state."""
    while True:
        z, st = _normal(st)
        t = c * z
        if t <= -1.0:
            continue
        v = 1.0 + t
        v = v * v * v
        u, st = _uniform(st)
        zz = z * z
        if u < 1.0 - 0.0331 * zz * zz:
            return v, st
        if math.log(u) < 0.5 * zz + d * _log_term(t):
            return v, st


@njit(cache=True, nogil=True)
def _log_gamma(st: tuple, d: float, c: float) -> tuple:
    """``(log G, E)`` with ``log G - E / alpha`` the log of a ``Gamma(alpha)`` draw: ``G`` a
    Marsaglia-Tsang draw (constants of :func:`_mt_constants`) and ``E = -log U`` the boost
    (0 when ``alpha >= 1``); and the next state."""
    v, st = _mt_gamma(st, d, abs(c))
    e = 0.0
    if c < 0.0:
        u, st = _uniform(st)
        e = -math.log(u)
    return math.log(d) + math.log(v), e, st


@njit(cache=True, nogil=True)
def _beta_pre(st: tuple, a: float, da: float, ca: float, b: float, db: float, cb: float):
    """One ``Beta(a, b)`` draw given the constants of :func:`_mt_constants`: ``X / (X + Y)``,
    in log space when a shape is below 1; and the next state."""
    if ca > 0.0 and cb > 0.0:
        vx, st = _mt_gamma(st, da, ca)
        vy, st = _mt_gamma(st, db, cb)
        x = da * vx
        return x / (x + db * vy), st
    gx, ex, st = _log_gamma(st, da, ca)
    gy, ey, st = _log_gamma(st, db, cb)
    z = (gx - ex / a) - (gy - ey / b)
    if z != z:  # both logs -inf (shapes below ~1e-306): the boosts decide, exactly in the limit
        return (1.0 if ex * b < ey * a else 0.0), st
    if z >= 0.0:  # 1 - e / (1 + e) rounds once near 1 (1 / (1 + e) twice)
        e = math.exp(-z)
        return 1.0 - e / (1.0 + e), st
    e = math.exp(z)
    return e / (1.0 + e), st


@njit(cache=True, nogil=True)
def _beta_draw(st: tuple, a: float, b: float) -> tuple:
    """One ``Beta(a, b)`` draw; and the next state."""
    da, ca = _mt_constants(a)
    db, cb = _mt_constants(b)
    return _beta_pre(st, a, da, ca, b, db, cb)


# --------------------------------------------------------------------------- kernels
@njit(cache=True, nogil=True)
def _beta_fill(seed: np.uint64, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    st = _seed_state(seed)
    for i in range(out.shape[0]):
        out[i], st = _beta_draw(st, a[i], b[i])


@njit(cache=True, nogil=True)
def _normal_fill(seed: np.uint64, out: np.ndarray) -> None:
    st = _seed_state(seed)
    for i in range(out.shape[0]):
        out[i], st = _normal(st)


@njit(cache=True, nogil=True)
def _joint_fill(
    seed: np.uint64,
    cum: np.ndarray,
    cwq: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    cell: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[r, d, k]``: pick s by ``cum[r]``, q of every cell by ``cwq[r, s, :, g]``, draw
    ``Beta(a[r, s, q_g(k), k], b[...])``."""
    st = _seed_state(seed)
    rows, s_n = cum.shape
    q_n = cwq.shape[2]
    g_n = cwq.shape[3]
    k_n = cell.shape[0]
    draws = out.shape[1]
    qsel = np.empty(g_n, dtype=np.int64)
    pre = np.empty((s_n, q_n, k_n, 4))
    for r in range(rows):
        pre[:, :, :, 1] = 0.0
        for d in range(draws):
            u, st = _uniform(st)
            lo = 0
            hi = s_n - 1
            while lo < hi:  # first s with cum[r, s] > u (searchsorted side="right")
                mid = (lo + hi) >> 1
                if cum[r, mid] <= u:
                    lo = mid + 1
                else:
                    hi = mid
            s = lo
            for g in range(g_n):
                v, st = _uniform(st)
                q = 0
                while q < q_n - 1 and cwq[r, s, q, g] < v:
                    q += 1
                qsel[g] = q
            for k in range(k_n):
                q = qsel[cell[k]]
                if pre[s, q, k, 1] == 0.0:  # Marsaglia-Tsang constants on first use
                    pre[s, q, k, 0], pre[s, q, k, 1] = _mt_constants(a[r, s, q, k])
                    pre[s, q, k, 2], pre[s, q, k, 3] = _mt_constants(b[r, s, q, k])
                out[r, d, k], st = _beta_pre(
                    st,
                    a[r, s, q, k],
                    pre[s, q, k, 0],
                    pre[s, q, k, 1],
                    b[r, s, q, k],
                    pre[s, q, k, 2],
                    pre[s, q, k, 3],
                )


# --------------------------------------------------------------------------- public helpers
def seed_from(rng: np.random.Generator) -> np.uint64:
    """One 63-bit integer drawn from ``rng`` (the whole state of a kernel call)."""
    return np.uint64(int(rng.integers(0, 2**63)))


def _check_shapes(name: str, arr: np.ndarray) -> None:
    if not (np.isfinite(arr).all() and (arr > 0).all()):
        bad = arr[~(np.isfinite(arr) & (arr > 0))].ravel()[0]
        raise ValueError(f"{name} contains {bad!r}; allowed: finite shape parameters > 0")


def beta(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, size=None) -> np.ndarray:
    """``Beta(a, b)`` draws of shape ``size`` (default: the broadcast shape of ``a, b``).

    Same distribution as ``rng.beta(a, b, size)``; one integer is drawn from ``rng`` to seed
    the kernel's SFC64 generator (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.models._beta_draws import beta
    >>> x = beta(2.0, 3.0, np.random.default_rng(0), size=100_000)
    >>> bool(abs(x.mean() - 0.4) < 0.005)
    True
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape) if size is None else tuple(np.atleast_1d(size))
    _check_shapes("a", a)
    _check_shapes("b", b)
    af = np.ascontiguousarray(np.broadcast_to(a, shape)).ravel()
    bf = np.ascontiguousarray(np.broadcast_to(b, shape)).ravel()
    out = np.empty(af.shape[0])
    _beta_fill(seed_from(rng), af, bf, out)
    return out.reshape(shape)


def standard_normal(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` standard normal draws of the kernels' ziggurat (for tests)."""
    out = np.empty(int(size))
    _normal_fill(seed_from(rng), out)
    return out


def draw_joint(
    cum: np.ndarray,
    cwq: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    cell: np.ndarray,
    draws: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Joint draws ``(R, draws, K)`` of a two-level mixture of independent Betas.

    For every row r and draw: a node ``s`` with ``P(s) = cum[r, s] - cum[r, s - 1]``
    (``cum`` (R, S) cumulative, last entry 1), a node ``q_g`` of every group g with
    ``P(q_g <= j) = cwq[r, s, j, g]`` (``cwq`` (R, S, Q, G) cumulative over Q), then
    ``theta_k ~ Beta(a[r, s, q_{cell[k]}, k], b[r, s, q_{cell[k]}, k])`` independently
    (``a, b`` (R, S, Q, K), ``cell`` (K,) the group of every column).
    """
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    _check_shapes("a", a)
    _check_shapes("b", b)
    rows, k = a.shape[0], a.shape[-1]
    out = np.empty((rows, int(draws), k))
    _joint_fill(
        seed_from(rng),
        np.ascontiguousarray(cum, dtype=np.float64),
        np.ascontiguousarray(cwq, dtype=np.float64),
        a,
        b,
        np.ascontiguousarray(cell, dtype=np.int64),
        out,
    )
    return out
