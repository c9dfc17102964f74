r"""The exact lattice part of :math:`\Pr(L \ge c)` where strata have few unlabelled items left.

:mod:`bayes_eval._cumulants` gives :math:`\Pr(L \ge c)` for a linear form
:math:`L = \sum_k w_k P_k` of the stratum positives from a continuous law (Pearson type III)
with the exact first three cumulants. The positives are integers, and an audit computes its
probability from integer posterior draws; where a stratum is nearly labelled to a census its
remaining positives :math:`X_k = P_k - h_k` take a handful of values, and the continuous law is
off by up to ~0.17 in either direction (session 46: one predicted-positive stratum of 868 items,
865 labelled, 320 positives seen, one more needed among the last 3: Pearson 0.916, exact
0.750; 40 items, 30 labelled, 20 positives, 6 needed among the last 10: 0.657 vs 0.749). That
is the needle regime's predicted positives, which an audit labels to a census within its budget.

Here every stratum with :math:`0 < r_k = N_k - n_k \le` :data:`LATTICE_REMAINDER` (and
:math:`w_k \ne 0`) is *exact*: :math:`X_k \sim \mathrm{BetaBinomial}(r_k, a_k + h_k,
b_k + n_k - h_k)`, summed exactly within each weight class (every supported metric's form has at
most two distinct weights: the predicted-positive and the predicted-negative side) by
convolution, and only the rest :math:`L_G` of the form keeps the continuous law:

.. math::

    \Pr(L \ge c) = \sum_{y} p_S(y)\, \Pr\nolimits_G\Big(L_G \ge c - \sum_j w_j y_j\Big),

with :math:`L_G`'s cumulants those of :math:`L` minus those of the exact part (for the
independent model exactly the other strata's; for the pooled look model the dependence-corrected
totals minus the small strata's effective Betas). Rows without such a stratum get
:func:`~bayes_eval._cumulants.prob_at_least` bit for bit, so a calibration whose strata always
keep more than :data:`LATTICE_REMAINDER` unlabelled items is unchanged (calibration version 17).
The superpopulation (``finite_population=False``) has continuous positives and no lattice.

Where both sides have exact strata and the grid of their sums exceeds :data:`_GRID_MAX` cells,
the side with the larger variance goes back to the continuous part. And where the continuous
part alone smooths the lattice out -- the modulus of the normal characteristic function of its
variance at the lattice's frequency :math:`2\pi / d` (:math:`d` the largest exact
:math:`|w_k|`) is at most :data:`_SMOOTH` (a standard deviation above ~0.64 d; see
:func:`lattice_damping`) -- the row keeps the continuous law of the whole form (bit for bit as
before): the exact sum is needed, and paid for, only where the near-census strata carry the
form's spread.

**Concentrated strata (calibration version 18, the independent model:
``concentrated=True``).** A row with a near-census stratum is one whose form's spread is
small; a large stratum whose rate is near 0 (a predicted-positive stratum of false positives,
the needle regime's predicted negatives) then skews the whole form, and the Pearson type III
law, whose support ends at :math:`k_1 - 2k_2/k_3` on the side opposite its skew, can have no
left tail where the audit's risk is: on loans_grade_a (four predicted-positive strata near a
census, a fifth of 476 items with none positive among 118 labelled) it said
:math:`\Pr = 1` exactly where the posterior says 0.99991 (and 0.9999 where it is 0.9986), so
the calibration found a truth below the target accepted at every level and refused every
precision claim, true ones too (session 48). In such rows every stratum whose remaining
positives lie below :data:`_WINDOW` but for :data:`_LEFTOVER` of their mass
(:func:`concentrated_strata`) is summed exactly too, over that window; where that leaves no
continuous part (all of the form's spread exact) the number is the posterior's exactly. Also
keeping the exact sum wherever the whole form's law put the probability at or above 0.99 (a
continuous part that smooths the lattice out but leaves the skew to the exact strata) cost 5×
more CPU on loans_grade_a F1 and changed no boundary there, so it was not kept. Rows without a
near-census stratum are version 17's bit for bit (the certification benchmark's cells and the
demo). **Version 19**: the pooled look model's hyper-nodes (:mod:`bayes_eval.models._node_sample`)
do the same for the strata whose per-node Betas they keep (``concentrated`` a mask of them):
they had the same truncation (a risk :math:`1 - P` 3-7× too small against the pooled audit's
own draws at loans_grade_a-like counts; within Monte Carlo error of them after, with the nodes'
Betas no longer floored).

Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (the finite-population
beta-binomial posterior that the audit's draws sample).
"""

from __future__ import annotations

import numpy as np
from scipy import fft, special

from ._cumulants import beta_rate_cumulants, prob_at_least, stratum_cumulants

__all__ = [
    "LATTICE_REMAINDER",
    "concentrated_strata",
    "lattice_damping",
    "lattice_prob_at_least",
    "lattice_rows",
]

#: strata with at most this many unlabelled items (and at least one) are summed exactly
LATTICE_REMAINDER = 256
#: at most this many cells of the two-side grid per row
_GRID_MAX = 1 << 16
#: rows per block (the side pmfs are at most K * LATTICE_REMAINDER + 1 wide)
_ROWS = 4096
#: the continuous part smooths the lattice out where the normal characteristic function's
#: modulus of its variance at the lattice's frequency is at most this
_SMOOTH = 3e-4
#: at most this many grid cells per evaluation of the continuous part
_BLOCK = 1 << 22
#: pmf columns below this everywhere in a block are dropped at the ends
_NEGLIGIBLE = 1e-17
#: a concentrated stratum leaves at most this much of its mass beyond the exact window
_LEFTOVER = 1e-12
#: the exact window of a concentrated stratum: its remaining positives ``0 .. _WINDOW - 1``
_WINDOW = 128


def lattice_rows(
    n: np.ndarray, sizes: np.ndarray, w: np.ndarray, finite_population: bool
) -> np.ndarray:
    """Which strata are exact, ``(..., K)`` bool: ``0 < N_k - n_k <= LATTICE_REMAINDER``,
    ``w_k != 0`` and a finite population."""
    n = np.asarray(n, dtype=np.float64)
    r = np.asarray(sizes, dtype=np.float64) - n
    if not finite_population:
        return np.zeros(r.shape, dtype=bool)
    return (r > 0.5) & (r <= LATTICE_REMAINDER) & (np.asarray(w) != 0)


def lattice_damping(var: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """How much of a lattice of ``spacing`` survives adding a continuous part of variance
    ``var``: the modulus of the normal characteristic function at ``2 pi / spacing`` (1: all).

    The normal's, not the Pearson type III's: a strongly skewed continuous part (a large
    stratum with few positives) has a Pearson law with a small shape whose characteristic
    function decays slowly, which would call for the exact sum in rows where its own lattice,
    far wider than the near-census strata's, is what the continuous law misses (measured: an
    independent calibration of vietnam_injury F1 went from 30 s to 1,055 s with the Pearson
    modulus, the exact sums evaluated on 65,536-cell grids)."""
    var = np.maximum(np.asarray(var, dtype=np.float64), 0.0)
    t = 2.0 * np.pi / np.maximum(np.asarray(spacing, dtype=np.float64), 1e-300)
    with np.errstate(over="ignore", invalid="ignore"):  # spacing 0 (no lattice): none survives
        return np.exp(-0.5 * t * t * var)


def _betabinom_pmf(r: np.ndarray, a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """``(m, width)`` pmf of ``BetaBinomial(r, a, b)`` at ``0 .. width - 1`` (0 above ``r``; a
    point mass at 0 where ``r == 0``), by the ratio of successive terms."""
    r = r[:, None]
    a = a[:, None]
    b = b[:, None]
    x = np.arange(width - 1, dtype=np.float64)[None, :]
    inside = x < r
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(
            inside,
            np.log(np.where(inside, r - x, 1.0))
            + np.log(x + a)
            - np.log1p(x)
            - np.log(np.where(inside, r - x - 1.0 + b, 1.0)),
            -np.inf,
        )
    first = special.betaln(a, r + b) - special.betaln(a, b)
    logp = np.concatenate([first, first + np.cumsum(step, axis=1)], axis=1)
    return np.exp(logp)


def concentrated_strata(
    r: np.ndarray, a: np.ndarray, b: np.ndarray, w: np.ndarray, candidates: np.ndarray
) -> np.ndarray:
    """Which strata, ``(m, K)`` bool among ``candidates``, have more than
    :data:`LATTICE_REMAINDER` unlabelled items but remaining positives ``BetaBinomial(r, a, b)``
    within ``0 .. _WINDOW - 1`` but for at most :data:`_LEFTOVER` of their mass (a large
    stratum whose rate is near 0: the needle regime's predicted negatives, a predicted-positive
    stratum of false positives): calibration version 18 sums them exactly too, in rows that
    already have a near-census stratum (module docstring)."""
    out = np.zeros(r.shape, dtype=bool)
    ab = a + b
    mean = r * a / ab
    var = r * a * b * (ab + r) / (ab * ab * (ab + 1.0))
    # a stratum whose mean plus seven sd passes the window is not tried (its tail beyond it is
    # far above _LEFTOVER for any beta-binomial met here; the pmf decides the others)
    pick = candidates & (r > LATTICE_REMAINDER) & (np.asarray(w)[None, :] != 0)
    pick &= mean + 7.0 * np.sqrt(var) <= _WINDOW
    if not pick.any():
        return out
    i, k = np.nonzero(pick)
    mass = _betabinom_pmf(r[i, k], a[i, k], b[i, k], _WINDOW).sum(axis=1)
    out[i, k] = mass >= 1.0 - _LEFTOVER
    return out


def _trim(p: np.ndarray) -> tuple[np.ndarray, int]:
    """Drop leading and trailing columns negligible in every row: ``(pmf, offset)``."""
    keep = np.flatnonzero((p > _NEGLIGIBLE).any(axis=0))
    if keep.size == 0:
        return p[:, :1], 0
    return p[:, keep[0] : keep[-1] + 1], int(keep[0])


def _side_pmf(
    cols: np.ndarray, r: np.ndarray, a: np.ndarray, b: np.ndarray, small: np.ndarray
) -> tuple[np.ndarray, int]:
    """pmf of the summed remaining positives of the exact strata among ``cols`` (one weight
    class; per row ``small``), ``(m, M)``, with the value of column 0 (``offset``): the strata's
    pmfs multiplied in one real FFT of the sum's length. A concentrated stratum
    (:func:`concentrated_strata`) is summed over its first :data:`_WINDOW` values, which hold
    all but :data:`_LEFTOVER` of its mass."""
    parts, offset = [], 0
    for k in cols:
        rk = np.where(small[:, k], r[:, k], 0.0)
        near = rk <= LATTICE_REMAINDER  # a near-census stratum's whole range (or r = 0)
        width = int(rk[near].max(initial=0.0)) + 1
        if not near.all():  # a concentrated stratum: its window
            width = max(width, _WINDOW)
        pk, off = _trim(_betabinom_pmf(rk, a[:, k], b[:, k], width))
        parts.append(pk)
        offset += off
    if len(parts) == 1:
        pmf = parts[0]
    else:
        length = sum(p.shape[1] for p in parts) - len(parts) + 1
        size = fft.next_fast_len(length, real=True)
        spec = np.ones((r.shape[0], size // 2 + 1), dtype=np.complex128)
        for pk in parts:
            spec *= fft.rfft(pk, size, axis=1)
        pmf = np.maximum(fft.irfft(spec, size, axis=1)[:, :length], 0.0)
    pmf, off = _trim(pmf)
    return pmf / pmf.sum(axis=1, keepdims=True), offset + off


def lattice_prob_at_least(
    k1: np.ndarray,
    k2: np.ndarray,
    k3: np.ndarray,
    c: float,
    *,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    finite_population: bool = True,
    p: np.ndarray | None = None,
    concentrated: bool | np.ndarray = False,
) -> np.ndarray:
    """``Pr(L >= c)``, ``(...)``, with the strata that have few unlabelled items summed exactly
    (module docstring).

    ``concentrated=True`` (calibration version 18, the independent model): rows with a
    near-census stratum also sum every concentrated stratum exactly (:func:`concentrated_strata`);
    a ``(K,)`` bool mask (version 19, the pooled look model's hyper-nodes) only the strata it
    marks.

    ``k1, k2, k3`` (``(...)``) are the cumulants of the whole form :math:`L = \\sum_k w_k P_k`
    under the model; ``n, h`` (``(..., K)``) the counts; ``prior_a, prior_b`` (broadcast against
    them) the Beta prior of each stratum's rate, so that its posterior is
    ``Beta(prior_a + h, prior_b + n - h)``; ``sizes`` and ``w`` are ``(K,)``. Rows without an
    exact stratum, or whose continuous part smooths the lattice out, get ``p`` if given, else
    :func:`~bayes_eval._cumulants.prob_at_least` of the cumulants (bit for bit).
    """
    k1 = np.asarray(k1, dtype=np.float64)
    k2 = np.asarray(k2, dtype=np.float64)
    k3 = np.asarray(k3, dtype=np.float64)
    out = prob_at_least(k1, k2, k3, c) if p is None else np.asarray(p, dtype=np.float64)
    if not finite_population:
        return out
    sizes = np.asarray(sizes, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    small = lattice_rows(n, sizes, w, True)
    rows = small.any(axis=-1)
    if not rows.any():
        return out
    shape = rows.shape
    kk = sizes.shape[0]
    h = np.asarray(h, dtype=np.float64)
    a = np.broadcast_to(np.asarray(prior_a, dtype=np.float64) + h, n.shape).reshape(-1, kk)
    b = np.broadcast_to(np.asarray(prior_b, dtype=np.float64) + n - h, n.shape).reshape(-1, kk)
    flat_rows = np.flatnonzero(rows.reshape(-1))
    res = np.broadcast_to(out, shape).reshape(-1).copy()
    kf = [np.broadcast_to(x, shape).reshape(-1) for x in (k1, k2, k3)]
    nf, hf = n.reshape(-1, kk), h.reshape(-1, kk)
    sf = small.reshape(-1, kk)
    may = np.broadcast_to(np.asarray(concentrated, dtype=bool), (kk,))
    for lo in range(0, flat_rows.size, _ROWS):
        idx = flat_rows[lo : lo + _ROWS]
        exact = sf[idx].copy()
        if may.any():
            rest = sizes[None, :] - nf[idx]
            exact |= concentrated_strata(rest, a[idx], b[idx], w, ~exact & may[None, :])
        res[idx] = _exact_rows(
            kf[0][idx], kf[1][idx], kf[2][idx], float(c),
            nf[idx], hf[idx], a[idx], b[idx], exact, sizes, w, res[idx],
        )  # fmt: skip
    return np.clip(res, 0.0, 1.0).reshape(shape)


def _exact_rows(
    k1: np.ndarray,
    k2: np.ndarray,
    k3: np.ndarray,
    c: float,
    n: np.ndarray,
    h: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    small: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    plain: np.ndarray,
) -> np.ndarray:
    """:func:`lattice_prob_at_least` for a block of rows that each have an exact stratum
    (``plain``: their continuous-law probabilities, kept where the lattice is smoothed out)."""
    r = sizes[None, :] - n
    cum = stratum_cumulants(*beta_rate_cumulants(a, b), n=n, h=h, sizes=sizes[None, :])
    classes = [float(v) for v in np.unique(w[small.any(axis=0)])]
    if len(classes) > 2:
        raise ValueError(f"the exact lattice sums at most two weight classes, got {classes}")
    if len(classes) == 2:  # rows whose grid is too wide: their wider side back to the continuum
        on = [small & (w[None, :] == v) for v in classes]
        cells = [np.where(o, r, 0.0).sum(axis=1) + 1.0 for o in on]
        spread = [
            np.where(o, cum.var, 0.0).sum(axis=1) * v * v for o, v in zip(on, classes, strict=True)
        ]
        wide = cells[0] * cells[1] > _GRID_MAX
        drop = np.where(spread[0] >= spread[1], 0, 1)
        for i, o in enumerate(on):
            small &= ~(o & (wide & (drop == i))[:, None])
    ws = np.where(small, w[None, :], 0.0)
    g1 = k1 - (ws * (cum.mean - h)).sum(axis=1)
    g2 = k2 - (ws * ws * cum.var).sum(axis=1)
    g3 = k3 - (ws**3 * cum.k3).sum(axis=1)
    # what is left of the variance after removing the exact part is rounding where the exact
    # strata carry all of it: a point mass then
    gone = g2 <= 1e-9 * np.maximum(k2, 0.0)
    g2 = np.where(gone, 0.0, g2)
    g3 = np.where(gone, 0.0, g3)
    spacing = np.abs(ws).max(axis=1)
    keep = (spacing > 0) & (lattice_damping(g2, spacing) > _SMOOTH)
    out = plain.copy()
    if not keep.any():
        return out
    sel = np.flatnonzero(keep)
    small, r, a, b = small[sel], r[sel], a[sel], b[sel]
    g1, g2, g3 = g1[sel], g2[sel], g3[sel]
    classes = [float(v) for v in np.unique(w[small.any(axis=0)])]
    pmfs = []
    for v in classes:
        cols = np.flatnonzero((small & (w[None, :] == v)).any(axis=0))
        pmfs.append((v, *_side_pmf(cols, r, a, b, small & (w[None, :] == v))))
    cells = int(np.prod([pmf.shape[1] for _, pmf, _ in pmfs]))
    step = max(1, _BLOCK // cells)
    got = np.empty(sel.size)
    for lo in range(0, sel.size, step):
        sl = slice(lo, lo + step)
        shift = np.zeros((got[sl].shape[0], 1))
        weight = np.ones_like(shift)
        for v, pmf, off in pmfs:  # the joint pmf of the sides' weighted sums, flattened
            vals = v * (off + np.arange(pmf.shape[1], dtype=np.float64))
            shift = (shift[:, :, None] + vals[None, None, :]).reshape(shift.shape[0], -1)
            weight = (weight[:, :, None] * pmf[sl, None, :]).reshape(shift.shape[0], -1)
        if np.all(g2[sl] == 0.0):  # a point mass: prob_at_least's degenerate branch, directly
            scale = np.maximum(np.abs(g1[sl, None]), 1.0)
            tail = g1[sl, None] + shift >= c - 1e-9 * scale
        else:
            tail = prob_at_least(g1[sl, None], g2[sl, None], g3[sl, None], c - shift)
        got[sl] = (weight * tail).sum(axis=1)
    out[sel] = got
    return out
