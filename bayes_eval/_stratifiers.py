"""Stratification kernels: candidate stratum boundaries for one predicted side.

Each kernel takes the 1-D stratification variable ``values`` of the items on one predicted side
(float64, finite, at least one item) and the number of strata ``n`` wanted, and returns candidate
*lower edges* of strata 1..n-1 (increasing, at most ``n - 1`` of them). A stratum is the half-open
range ``[edge_j, edge_{j+1})``, so tied values never split. :func:`bayes_eval.stratify` then drops
edges that would leave a stratum empty. Kernels know nothing of populations or xarray.

Register a new method with :func:`register_stratifier`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["STRATIFIERS", "register_stratifier"]

StratifierKernel = Callable[..., np.ndarray]

#: name -> kernel(values, n, *, rng) -> candidate lower edges
STRATIFIERS: dict[str, StratifierKernel] = {}


def register_stratifier(name: str) -> Callable[[StratifierKernel], StratifierKernel]:
    """Decorator adding a kernel to :data:`STRATIFIERS` under ``name``."""

    def deco(fn: StratifierKernel) -> StratifierKernel:
        STRATIFIERS[name] = fn
        return fn

    return deco


@register_stratifier("equal_size")
def equal_size(values: np.ndarray, n: int, **_: object) -> np.ndarray:
    """Percentile strata: edges at the order statistics ``floor(j N / n)``, j = 1..n-1.

    ``np.partition`` with n - 1 pivots costs O(N log n), not a full sort. Heavy ties can collapse
    edges; :func:`bayes_eval.strata.stratify` repairs that from the distinct values.
    """
    size = values.shape[0]
    kth = np.unique((np.arange(1, n) * size) // n)
    kth = kth[(kth > 0) & (kth < size)]
    if kth.size == 0:
        return np.empty(0)
    part = np.partition(values, kth)
    return np.unique(part[kth])


@register_stratifier("equal_width")
def equal_width(values: np.ndarray, n: int, **_: object) -> np.ndarray:
    """Equal score ranges: edges at ``min + j (max - min) / n``."""
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return np.empty(0)
    return lo + (hi - lo) * np.arange(1, n) / n


def equal_size_from_counts(uniq: np.ndarray, counts: np.ndarray, n: int) -> np.ndarray:
    """Exact equal-size edges on sorted distinct values with multiplicities.

    Used when ties collapse the percentile edges although at least ``n`` distinct values exist:
    chooses n - 1 distinct values as edges, each as close as possible to the cumulative target
    ``j N / n`` while leaving at least one distinct value for every stratum.
    """
    m = uniq.shape[0]
    cum_before = np.concatenate([[0], np.cumsum(counts)[:-1]])  # items strictly below uniq[i]
    total = counts.sum()
    edges_idx = []
    prev = 0
    for j in range(1, n):
        target = j * total / n
        i = int(np.searchsorted(cum_before, target))
        if i < m and i > 0 and abs(cum_before[i - 1] - target) < abs(cum_before[i] - target):
            i -= 1
        lo_allowed = prev + 1
        hi_allowed = m - (n - j)
        i = int(np.clip(i, lo_allowed, hi_allowed))
        edges_idx.append(i)
        prev = i
    return uniq[np.asarray(edges_idx, dtype=np.int64)]


# ---------------------------------------------------------------------- density-based rules
#: most histogram bins used for the density rules
MAX_BINS = 1 << 14


def histogram_bins(values: np.ndarray, n: int) -> int:
    """Number of equal-width histogram bins for the density-based rules.

    The Freedman–Diaconis rule ``B = (max - min) / (2 IQR N^{-1/3})`` (the L2-optimal rate for a
    histogram density estimate), clipped to ``[20 n, 2^14]``: at least twenty classes per stratum,
    as Cochran (1977, section 5A.7) advises for the cumulative rules, and few enough that
    building the histogram of 10^7 values stays a single fast pass. A zero IQR (heavy point
    masses) gets the maximum.
    """
    size = values.shape[0]
    lo, hi = float(values.min()), float(values.max())
    floor = max(20 * n, 20)
    if hi == lo:
        return floor
    # IQR from a bounded subsample keeps this O(1) in N (only a bin count depends on it)
    sub = values if size <= 200_000 else values[:: size // 100_000]
    q1, q3 = np.percentile(sub, [25.0, 75.0])
    if q3 <= q1:
        return MAX_BINS
    bins = (hi - lo) / (2.0 * (q3 - q1) * size ** (-1.0 / 3.0))
    return int(np.clip(np.ceil(bins), floor, MAX_BINS))


def _hist(values: np.ndarray, bins: int, weights: np.ndarray | None = None):
    lo, hi = float(values.min()), float(values.max())
    counts, edges = np.histogram(values, bins=bins, range=(lo, hi), weights=weights)
    return counts.astype(np.float64), edges


def _cumulative_edges(cum_mass: np.ndarray, bin_edges: np.ndarray, n: int) -> np.ndarray:
    """Points where a cumulative function over histogram bins crosses ``j G / n``.

    ``cum_mass`` holds the cumulative at the upper bin edges; it is linearly interpolated inside
    bins, so edges fall between bin edges where the mass changes.
    """
    total = float(cum_mass[-1])
    if total <= 0 or n < 2:
        return np.empty(0)
    g = np.concatenate([[0.0], cum_mass])
    targets = total * np.arange(1, n) / n
    # strictly increasing abscissa for interp: drop flat steps (empty bins)
    keep = np.concatenate([[True], np.diff(g) > 0])
    return np.interp(targets, g[keep], bin_edges[keep])


def _cum_root_rule(values: np.ndarray, n: int, power: float) -> np.ndarray:
    if values.min() == values.max():
        return np.empty(0)
    counts, edges = _hist(values, histogram_bins(values, n))
    return _cumulative_edges(np.cumsum(counts**power), edges, n)


@register_stratifier("cum_sqrt_f")
def cum_sqrt_f(values: np.ndarray, n: int, **_: object) -> np.ndarray:
    r"""Dalenius–Hodges cumulative :math:`\sqrt{f}` rule.

    With the density :math:`f` estimated by an equal-width histogram (bins from
    :func:`histogram_bins`), boundaries split :math:`G(z) = \int_{z_{min}}^{z} \sqrt{f(t)}\,dt`
    into ``n`` equal parts: :math:`G(z_j) = j\,G(z_{max}) / n`. Designed for Neyman allocation
    when the stratification variable and the target are strongly related.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.5 (SQRT);
    Dalenius & Hodges (1959), JASA 54, 88-101.
    """
    return _cum_root_rule(values, n, 0.5)


@register_stratifier("cum_cbrt_f")
def cum_cbrt_f(values: np.ndarray, n: int, **_: object) -> np.ndarray:
    r"""Cumulative :math:`f^{1/3}` rule (Singh 1971): as :func:`cum_sqrt_f` with the cube root.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.5 (CBRT).
    """
    return _cum_root_rule(values, n, 1.0 / 3.0)


@register_stratifier("weighted_mean")
def weighted_mean(values: np.ndarray, n: int, **_: object) -> np.ndarray:
    r"""Hansen–Hurwitz–Madow rule: the weighted mean :math:`W_h \bar z_h` equal in every stratum.

    :math:`W_h \bar z_h = \frac{1}{N}\sum_{i \in h} z_i`, so the strata cut the cumulative total
    :math:`\sum_{z_i < z} z_i` into ``n`` equal parts (accumulated over a fine histogram, bins
    from :func:`histogram_bins`, each bin weighted by its total). The rule needs
    :math:`z \ge 0`; the confidence variable is, and a score that is not is measured from its
    minimum (:math:`z - z_{min}`) first.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.5 (WTMN, their ref.
    [12]: Hansen, Hurwitz & Madow 1953).
    """
    lo = float(values.min())
    if lo == float(values.max()):
        return np.empty(0)
    shift = lo if lo < 0 else 0.0
    bins = histogram_bins(values, n)
    counts, edges = _hist(values, bins)
    centres = 0.5 * (edges[:-1] + edges[1:]) - shift
    totals = counts * centres
    return _cumulative_edges(np.cumsum(totals), edges, n)


# ---------------------------------------------------------------------- clustering rules
def _lloyd_sorted(
    x: np.ndarray,
    cw: np.ndarray,
    cwx: np.ndarray,
    cwx2: np.ndarray,
    centres: np.ndarray,
    max_iter: int = 300,
) -> tuple[np.ndarray, float]:
    """Weighted 1-D Lloyd iterations on sorted points ``x`` with prefix sums of the weights.

    ``cw``, ``cwx``, ``cwx2`` are prefix sums (with a leading 0) of ``w``, ``w x``, ``w x^2``.
    Clusters of sorted 1-D points are contiguous, so each iteration costs O(k log m): the
    boundaries are the midpoints between sorted centres, and cluster sums are differences of
    prefix sums. Returns the sorted centres of the non-empty clusters and the within-cluster
    sum of squares.
    """
    c = np.sort(centres)
    prev = None
    for _ in range(max_iter):
        mids = 0.5 * (c[:-1] + c[1:])
        cut = np.concatenate([[0], np.searchsorted(x, mids, side="left"), [x.shape[0]]])
        if prev is not None and np.array_equal(cut, prev):
            break
        prev = cut
        w = cw[cut[1:]] - cw[cut[:-1]]
        s = cwx[cut[1:]] - cwx[cut[:-1]]
        nonempty = w > 0
        c = np.where(nonempty, s / np.where(nonempty, w, 1.0), c)
        c = np.sort(c)
    mids = 0.5 * (c[:-1] + c[1:])
    cut = np.concatenate([[0], np.searchsorted(x, mids, side="left"), [x.shape[0]]])
    w = cw[cut[1:]] - cw[cut[:-1]]
    s = cwx[cut[1:]] - cwx[cut[:-1]]
    s2 = cwx2[cut[1:]] - cwx2[cut[:-1]]
    keep = w > 0
    sse = float(np.sum(s2[keep] - s[keep] ** 2 / w[keep]))
    return c[keep], sse


def _kmeans_pp(x: np.ndarray, w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (D^2 weighting) on weighted points."""
    p = w / w.sum()
    centres = [x[rng.choice(x.shape[0], p=p)]]
    d2 = (x - centres[0]) ** 2
    for _ in range(1, n):
        q = w * d2
        tot = q.sum()
        if tot <= 0:
            break
        centres.append(x[rng.choice(x.shape[0], p=q / tot)])
        d2 = np.minimum(d2, (x - centres[-1]) ** 2)
    return np.asarray(centres)


def _weighted_quantile_centres(x: np.ndarray, cw: np.ndarray, n: int) -> np.ndarray:
    targets = cw[-1] * (np.arange(n) + 0.5) / n
    idx = np.clip(np.searchsorted(cw[1:], targets, side="left"), 0, x.shape[0] - 1)
    return x[idx]


def kmeans_1d(
    x: np.ndarray, w: np.ndarray | None, n: int, rng: np.random.Generator, n_init: int = 4
) -> np.ndarray:
    """Sorted centres of a weighted 1-D k-means fit (best of ``n_init`` Lloyd runs).

    ``x`` must be sorted; ``w`` are the weights (``None``: all 1). The first start is the
    weighted quantile midpoints (deterministic); the others are k-means++ seeds from ``rng`` on
    a subsample of at most 4096 points.
    """
    size = x.shape[0]
    if w is None:
        cw = np.arange(size + 1, dtype=np.float64)
        cwx = np.empty(size + 1)
        cwx[0] = 0.0
        np.cumsum(x, out=cwx[1:])
        cwx2 = np.empty(size + 1)
        cwx2[0] = 0.0
        np.cumsum(x * x, out=cwx2[1:])
        w_sub = None
    else:
        cw = np.concatenate([[0.0], np.cumsum(w)])
        cwx = np.concatenate([[0.0], np.cumsum(w * x)])
        cwx2 = np.concatenate([[0.0], np.cumsum(w * x * x)])
    n = int(min(n, size))
    starts = [_weighted_quantile_centres(x, cw, n)]
    if n_init > 1:
        step = max(1, size // 4096)
        xs = x[::step]
        w_sub = np.ones(xs.shape[0]) if w is None else w[::step]
        for _ in range(n_init - 1):
            starts.append(_kmeans_pp(xs, w_sub, n, rng))
    best, best_sse = None, np.inf
    for start in starts:
        c, sse = _lloyd_sorted(x, cw, cwx, cwx2, np.unique(start))
        if sse < best_sse - 1e-12 * abs(best_sse if np.isfinite(best_sse) else 1.0):
            best, best_sse = c, sse
    assert best is not None
    return best


@register_stratifier("kmeans")
def kmeans(
    values: np.ndarray, n: int, *, rng: np.random.Generator | None = None, **_: object
) -> np.ndarray:
    r"""1-D k-means: boundaries at the midpoints between consecutive sorted centroids.

    Exact Lloyd iterations on the sorted values (clusters of 1-D points are contiguous, so an
    iteration is a binary search plus prefix-sum differences, O(n log N)), best within-cluster
    sum of squares of four starts: the quantile midpoints and three k-means++ seeds drawn from
    ``rng``. One sort of the data (O(N log N)) dominates the cost.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.5 (KM).
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(0)
    x = np.sort(values)
    if x[0] == x[-1]:
        return np.empty(0)
    # every item has weight 1; ties share a value, so cuts between values never split them
    c = kmeans_1d(x, None, n, gen)
    return 0.5 * (c[:-1] + c[1:])


#: histogram bins for the Gaussian mixture fit
GMM_BINS = 1 << 12


@register_stratifier("gmm")
def gmm(
    values: np.ndarray, n: int, *, rng: np.random.Generator | None = None, **_: object
) -> np.ndarray:
    r"""1-D Gaussian mixture (EM on a histogram); boundaries where the posterior component
    changes between neighbouring components.

    The values are binned into ``2^12`` equal-width bins; EM runs on bin centres weighted by the
    bin counts (each bin adds Sheppard's :math:`h^2/12` to the component variances, and variances
    are floored at :math:`h^2`, so point masses cannot collapse a component). It starts from the
    :func:`kmeans` fit of the binned data and stops when the log-likelihood gains less than
    :math:`10^{-6}` nats per item (at most 200 iterations). With components sorted by mean, the
    boundary between components j and j+1 is the first grid point in :math:`[\mu_j, \mu_{j+1}]`
    where :math:`\pi_{j+1} \phi_{j+1} \ge \pi_j \phi_j` (the posterior responsibility changes
    hands), which keeps strata contiguous even when a wide component has tails on both sides of
    a narrow one.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.5 (GMM).
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(0)
    lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        return np.empty(0)
    counts, edges = _hist(values, GMM_BINS)
    h = edges[1] - edges[0]
    centres_all = 0.5 * (edges[:-1] + edges[1:])
    nz = counts > 0
    x, w = centres_all[nz], counts[nz]
    if x.shape[0] <= 1:
        return np.empty(0)
    k = min(n, x.shape[0])
    mu = kmeans_1d(x, w, k, gen)
    k = mu.shape[0]
    if k <= 1:
        return np.empty(0)
    mids = 0.5 * (mu[:-1] + mu[1:])
    lab = np.searchsorted(mids, x, side="left")
    wk = np.bincount(lab, weights=w, minlength=k)
    var = np.bincount(lab, weights=w * (x - mu[lab]) ** 2, minlength=k) / np.maximum(wk, 1e-300)
    floor = h * h
    var = np.maximum(var, floor) + h * h / 12.0
    pi = wk / wk.sum()
    total = w.sum()
    old = -np.inf
    for _ in range(200):
        logp = (
            np.log(np.maximum(pi, 1e-300))[None, :]
            - 0.5 * np.log(2 * np.pi * var)[None, :]
            - 0.5 * (x[:, None] - mu[None, :]) ** 2 / var[None, :]
        )
        m = logp.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(logp - m).sum(axis=1))
        ll = float(np.dot(w, lse)) / total
        resp = np.exp(logp - lse[:, None]) * w[:, None]
        nk = resp.sum(axis=0)
        alive = nk > 1e-9 * total
        if not alive.all():
            resp, mu, var, nk = resp[:, alive], mu[alive], var[alive], nk[alive]
        pi = nk / nk.sum()
        mu = (resp * x[:, None]).sum(axis=0) / nk
        var = (resp * (x[:, None] - mu[None, :]) ** 2).sum(axis=0) / nk
        var = np.maximum(var, floor) + h * h / 12.0
        if ll - old < 1e-6:
            break
        old = ll
    order = np.argsort(mu)
    mu, var, pi = mu[order], var[order], pi[order]
    grid = np.linspace(lo, hi, 1 << 14)
    out = []
    for j in range(mu.shape[0] - 1):
        seg = grid[(grid >= mu[j]) & (grid <= mu[j + 1])]
        if seg.size == 0:
            out.append(0.5 * (mu[j] + mu[j + 1]))
            continue
        lj = np.log(pi[j]) - 0.5 * np.log(var[j]) - 0.5 * (seg - mu[j]) ** 2 / var[j]
        lk = (
            np.log(pi[j + 1]) - 0.5 * np.log(var[j + 1]) - 0.5 * (seg - mu[j + 1]) ** 2 / var[j + 1]
        )
        hit = np.flatnonzero(lk >= lj)
        out.append(seg[hit[0]] if hit.size else 0.5 * (mu[j] + mu[j + 1]))
    return np.unique(np.asarray(out, dtype=np.float64))
