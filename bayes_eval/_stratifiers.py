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
