"""Equal-size and equal-width score strata in O(N) from one histogram of the scores.

The fast path of :func:`bayes_eval.strata.stratify` for ``method="equal_size"`` /
``"equal_width"`` on the score: one pass bins every score into :data:`FAST_BINS` equal-width
bins, only the items of the bins holding an edge are gathered, and the edges are exact order
statistics, so the strata equal those of the kernels in :mod:`bayes_eval._stratifiers` (measured
in ``benchmarks/bench_stratify.py``: 0.67-0.84x ``np.sort`` of the same 10^7 scores).
:func:`histogram_strata` returns None wherever ties or empty strata need the general path.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata); Kumar & Raj,
``../shared/seeds/003_d8c568d527ba610a.txt`` (equal-size and equal-width stratifiers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._protocols import PopulationLike

__all__ = ["FAST_BINS", "HistogramStrata", "bin_keys", "histogram_strata", "index_dtype"]


def index_dtype(k: int) -> type:
    """The smallest signed integer type holding stratum indices ``0..k-1`` (int16 or int32)."""
    return np.int16 if k < np.iinfo(np.int16).max else np.int32


@dataclass(frozen=True)
class HistogramStrata:
    """Strata found by :func:`histogram_strata` (negative side first, each side by score).

    Attributes
    ----------
    assignment : numpy.ndarray of int, (N,)
        Stratum of every item.
    predicted : numpy.ndarray of bool, (K,)
        Predicted side of every stratum.
    sizes : numpy.ndarray of int64, (K,)
    lo, hi : numpy.ndarray of float64, (K,)
        Smallest and largest score of every stratum.
    """

    assignment: np.ndarray
    predicted: np.ndarray
    sizes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


#: equal-width histogram bins (per predicted side when the sides interleave in score) of the
#: fast path of :func:`stratify`
FAST_BINS = 1 << 16


#: adding 2^52 to a float in [0, 2^51) rounds it to an integer held in the low mantissa bits
_ROUND = 2.0**52
_ROUND_BITS = int(np.float64(_ROUND).view(np.int64))


def bin_keys(values: np.ndarray, lo: float, scale: float) -> np.ndarray:
    """Histogram bin ``round((x - lo) * scale)`` of every value, as ``intp`` (one temporary).

    With ``lo <= x <= lo + span`` and ``scale = (B - 1) / span`` the product lies in
    ``[0, B - 1]`` up to rounding, so adding :math:`2^{52}` rounds it to an integer in
    ``0..B-1`` kept in the low mantissa bits (read through an integer view, no second array).
    Every step (subtraction, product, addition) is monotone non-decreasing under
    round-to-nearest, and so is reading the bits of a positive float, so ``bin(x) < bin(y)``
    implies ``x < y``: the items of a lower bin are strictly smaller. Edges go through this
    same function (then clipped to ``0..B-1``).
    """
    t = np.subtract(values, lo)
    t *= scale
    t += _ROUND
    keys = t.view(np.intp)
    keys -= _ROUND_BITS
    return keys


def _neighbours(nonzero: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """Nearest non-empty bins strictly below and above each of ``bins`` (where they exist)."""
    below = np.searchsorted(nonzero, bins, side="left") - 1
    above = np.searchsorted(nonzero, bins, side="right")
    return np.concatenate([nonzero[below[below >= 0]], nonzero[above[above < nonzero.shape[0]]]])


def histogram_strata(
    population: PopulationLike, by_size: bool, kernel: Any, n_strata_for: Callable[[int, int], int]
) -> HistogramStrata | None:
    """``equal_size`` (``by_size``) or ``kernel`` (``equal_width``) strata of the score in O(N),
    or None for the general path; ``n_strata_for(side_size)`` is the strata asked of a side.

    One pass bins every score into ``FAST_BINS`` equal-width bins between the population's
    minimum and maximum (with side-major keys when the sides interleave in score) and
    ``np.bincount`` counts them. Only the items of a few bins are gathered: the bins holding an
    edge (for ``equal_size`` the bins holding the order statistics ``floor(j N_side / n)``,
    found from the cumulative counts), the bin of the threshold, their nearest non-empty
    neighbours and the first and last non-empty bins of each side. The order statistics are
    exact (``np.partition`` within their bins), so the edges equal those of the kernels in
    :mod:`bayes_eval._stratifiers`. Every item then takes its stratum from a bin -> stratum
    table; only the gathered items (the only ones sharing a bin with an edge) are compared with
    the edges. Stratum sizes come from the histogram, score ranges from the gathered items,
    which hold the extremes of every stratum. Returns None where ties or empty strata need the
    general treatment (fewer strata than asked), or the score range does not fit a float grid.
    """
    scores = population.scores
    preds = population.predictions
    size = scores.shape[0]
    threshold = population.threshold
    n_pos = int(np.count_nonzero(preds))
    side_n = (size - n_pos, n_pos)
    gmin, gmax = float(scores.min()), float(scores.max())
    span = gmax - gmin
    nb = FAST_BINS
    if not (np.isfinite(span) and span > 0):
        return None
    scale = (nb - 1) / span
    if not (np.isfinite(scale) and scale > 0):
        return None
    keys = bin_keys(scores, gmin, scale)
    if threshold is None:  # sides interleave in score: keys side-major, positives nb..2nb-1
        keys += nb * preds
        n_keys = 2 * nb
        side_bins = ((0, nb - 1), (nb, 2 * nb - 1))
        t_bin = None
    else:  # negatives are x < t <= positives: one grid, the threshold's bin is shared
        n_keys = nb
        t = float(threshold)
        t_bin = (
            0
            if t <= gmin
            else nb - 1
            if t >= gmax
            else int(bin_keys(np.asarray([t]), gmin, scale)[0])
        )
        side_bins = ((0, t_bin), (t_bin, nb - 1))
    hist = np.bincount(keys, minlength=n_keys)
    if hist.shape[0] != n_keys:  # pragma: no cover - keys are in range by construction
        return None
    nonzero = np.flatnonzero(hist)
    cum = np.cumsum(hist)

    def edge_keys(edges: np.ndarray, side: int) -> np.ndarray:
        k = np.clip(bin_keys(edges, gmin, scale), 0, nb - 1)
        return k + nb if (side and threshold is None) else k

    # bins always gathered: first/last non-empty bin of each side, the threshold's bin
    base = []
    for side in (0, 1):
        if side_n[side]:
            lo_b, hi_b = side_bins[side]
            sel = nonzero[(nonzero >= lo_b) & (nonzero <= hi_b)]
            base += [sel[0], sel[-1]]
    if t_bin is not None:
        base.append(t_bin)
    n_side = [n_strata_for(s, side_n[s]) if side_n[s] else 0 for s in (0, 1)]
    if by_size:
        ranks = []  # per side: ranks of the order statistics among all items by (side, score)
        for side in (0, 1):
            n, cnt = n_side[side], side_n[side]
            kth = np.unique((np.arange(1, n) * cnt) // n)
            kth = kth[(kth > 0) & (kth < cnt)]
            offset = side_n[0] if side else 0
            ranks.append(kth + offset)
        rank_all = np.concatenate(ranks).astype(np.intp)
        target = np.searchsorted(cum, rank_all, side="right")
        edge_bins = np.concatenate([target, np.asarray(base, dtype=np.intp)])
    else:
        edge_bins = np.asarray(base, dtype=np.intp)
    gather_bins = np.unique(np.concatenate([edge_bins, _neighbours(nonzero, edge_bins)]))

    def gather(bins_: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        table = np.zeros(n_keys, dtype=bool)
        table[bins_] = True
        pos = np.flatnonzero(table.take(keys))
        return pos, scores[pos], keys[pos]

    pos, vals, gkeys = gather(gather_bins)
    if pos.shape[0] > max(size // 2, 1 << 14):  # crowded bins: no gain over the general path
        return None
    gside = preds[pos]
    side_min = [vals[gside == s].min() if side_n[s] else None for s in (0, 1)]
    side_max = [vals[gside == s].max() if side_n[s] else None for s in (0, 1)]

    edges = []
    if by_size:
        stats = np.empty(rank_all.shape[0])
        for b in np.unique(target):
            hit = target == b
            in_bin = vals[gkeys == b]
            local = rank_all[hit] - (cum[b] - hist[b])
            stats[hit] = np.partition(in_bin, local)[local]
        split = ranks[0].shape[0]
        for side, part in ((0, stats[:split]), (1, stats[split:])):
            e = np.unique(part)
            edges.append(e[e > side_min[side]] if side_n[side] else e)
    else:
        for side in (0, 1):
            if not side_n[side]:
                edges.append(np.empty(0))
                continue
            ends = np.asarray([side_min[side], side_max[side]], dtype=np.float64)
            e = np.unique(np.asarray(kernel(ends, n_side[side]), dtype=np.float64))
            edges.append(e[e > side_min[side]])
    for side in (0, 1):
        if side_n[side] and edges[side].size + 1 < n_side[side]:
            return None  # ties or empty ranges: the general path repairs or raises
    eb = [edge_keys(edges[s], s) for s in (0, 1)]
    if not by_size:  # gather the bins of the edges now that they are known
        more = np.concatenate([*eb, np.asarray(base, dtype=np.intp)])
        more = np.unique(np.concatenate([more, _neighbours(nonzero, more)]))
        pos, vals, gkeys = gather(more)
        gside = preds[pos]
    elif not np.isin(np.concatenate(eb), gather_bins).all():  # pragma: no cover - safety net
        return None

    k_side = [edges[s].size + 1 if side_n[s] else 0 for s in (0, 1)]
    k_total = k_side[0] + k_side[1]
    dtype = index_dtype(k_total)
    # bin -> stratum for bins without an edge: number of edges in lower bins
    table = np.empty(n_keys, dtype=np.int64)
    if threshold is None:
        b = np.arange(nb)
        table[:nb] = np.searchsorted(eb[0], b, side="left")
        table[nb:] = k_side[0] + np.searchsorted(eb[1] - nb, b, side="left")
    else:
        b = np.arange(nb)
        table[:] = np.where(
            b < t_bin,
            np.searchsorted(eb[0], b, side="left"),
            k_side[0] + np.searchsorted(eb[1], b, side="left"),
        )
    exact = np.where(
        gside,
        k_side[0] + np.searchsorted(edges[1], vals, side="right"),
        np.searchsorted(edges[0], vals, side="right"),
    )
    gathered = np.zeros(n_keys, dtype=bool)
    gathered[np.unique(gkeys)] = True
    rest = ~gathered & (hist > 0)
    sizes = np.bincount(table[rest], weights=hist[rest], minlength=k_total).astype(np.int64)
    sizes += np.bincount(exact, minlength=k_total)
    if (sizes == 0).any():
        return None  # empty strata are merged by the general path
    assignment = table.astype(dtype).take(keys)
    assignment[pos] = exact
    lo = np.full(k_total, np.inf)
    hi = np.full(k_total, -np.inf)
    np.minimum.at(lo, exact, vals)
    np.maximum.at(hi, exact, vals)
    return HistogramStrata(assignment, np.repeat([False, True], k_side), sizes, lo, hi)
