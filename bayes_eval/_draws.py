"""Summaries of Monte Carlo draws shared by every posterior result.

:class:`DrawSummaries` is a mixin for frozen result dataclasses that carry an
``xarray.DataTree`` whose ``posterior`` group holds scalar quantities over ``(chain, draw)``.
It provides ``mean``, ``lower_bound``, ``upper_bound``, ``interval``, ``prob_at_least``,
``prob_greater`` and ``summary``. Kernels here are plain numpy (axis-last); the mixin only picks
the right variable out of the tree.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from ._validation import check_level, check_option

__all__ = ["DrawSummaries", "eti", "hdi", "mcse_quantile"]


def eti(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """Equal-tailed interval of 1-D draws."""
    lo, hi = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2])
    return float(lo), float(hi)


def hdi(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """Narrowest interval holding a fraction ``prob`` of the 1-D draws (unimodal posteriors)."""
    x = np.sort(draws)
    n = x.size
    k = max(int(np.ceil(prob * n)), 1)
    if k >= n:
        return float(x[0]), float(x[-1])
    widths = x[k - 1 :] - x[: n - k + 1]
    i = int(np.argmin(widths))
    return float(x[i]), float(x[i + k - 1])


def mcse_quantile(draws: np.ndarray, q: float) -> float:
    """Monte Carlo standard error of the ``q`` quantile of independent draws.

    Uses the binomial order-statistic interval: the draws ranked ``n q ± sqrt(n q (1-q))``
    bracket the quantile with about one standard error on each side.
    """
    x = np.sort(draws)
    n = x.size
    half = np.sqrt(n * q * (1 - q))
    lo = int(np.clip(np.floor(n * q - half), 0, n - 1))
    hi = int(np.clip(np.ceil(n * q + half), 0, n - 1))
    return float((x[hi] - x[lo]) / 2)


def _default_ci() -> tuple[float, str]:
    from arviz_base import rcParams

    return float(rcParams["stats.ci_prob"]), str(rcParams["stats.ci_kind"])


class DrawSummaries:
    """Mixin: derived quantities of a posterior represented by Monte Carlo draws."""

    __slots__ = ()

    #: names of the scalar quantities that the methods accept
    quantities: tuple[str, ...]
    datatree: Any

    # -------------------------------------------------------------------- helpers
    def draws(self, quantity: str) -> np.ndarray:
        """Flattened 1-D draws (over chain and draw) of ``quantity``."""
        check_option(quantity, "metric", self.quantities)
        da = self.datatree["posterior"][quantity]
        return np.asarray(da.values, dtype=np.float64).reshape(-1)

    # -------------------------------------------------------------------- summaries
    def mean(self, quantity: str) -> float:
        """Posterior mean of ``quantity``."""
        return float(np.mean(self.draws(quantity)))

    def std(self, quantity: str) -> float:
        """Posterior standard deviation of ``quantity``."""
        return float(np.std(self.draws(quantity), ddof=1))

    def quantile(self, quantity: str, q: float) -> float:
        """Posterior ``q`` quantile of ``quantity``."""
        q = check_level(q, "q")
        return float(np.quantile(self.draws(quantity), q))

    def lower_bound(self, quantity: str, level: float = 0.95) -> float:
        """One-sided lower credible bound: the ``1 - level`` posterior quantile.

        ``P(quantity >= lower_bound) = level`` under the posterior.
        """
        level = check_level(level, "level")
        return float(np.quantile(self.draws(quantity), 1.0 - level))

    def upper_bound(self, quantity: str, level: float = 0.95) -> float:
        """One-sided upper credible bound: the ``level`` posterior quantile."""
        level = check_level(level, "level")
        return float(np.quantile(self.draws(quantity), level))

    def interval(
        self, quantity: str, prob: float | None = None, kind: str | None = None
    ) -> tuple[float, float]:
        """Two-sided credible interval.

        Parameters
        ----------
        prob : float, optional
            Probability mass; default ``arviz_base.rcParams["stats.ci_prob"]``.
        kind : {"eti", "hdi"}, optional
            Equal-tailed or highest-density; default ``arviz_base.rcParams["stats.ci_kind"]``.
        """
        default_prob, default_kind = _default_ci()
        prob = check_level(default_prob if prob is None else prob, "prob")
        kind = check_option(default_kind if kind is None else kind, "kind", ("eti", "hdi"))
        x = self.draws(quantity)
        return eti(x, prob) if kind == "eti" else hdi(x, prob)

    def prob_at_least(self, quantity: str, value: float) -> float:
        """Posterior probability that ``quantity >= value``."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ValueError(f"value={value!r} must be a finite real number")
        return float(np.mean(self.draws(quantity) >= value))

    def prob_greater(self, other: DrawSummaries, quantity: str) -> float:
        """Posterior probability that this ``quantity`` exceeds ``other``'s.

        The two posteriors are taken as independent (e.g. two classifiers audited on independent
        samples); draws are paired by index.
        """
        if not isinstance(other, DrawSummaries):
            raise TypeError(
                f"other has type {type(other).__name__}; allowed: another posterior result"
            )
        a = self.draws(quantity)
        b = other.draws(quantity)
        n = min(a.size, b.size)
        return float(np.mean(a[:n] > b[:n]))

    def summary(self, level: float = 0.95, prob: float | None = None) -> pd.DataFrame:
        """One row per quantity: mean, sd, median, one-sided bounds, interval and MC error.

        Columns: ``mean``, ``sd``, ``median``, ``lower_<level>``, ``upper_<level>``,
        ``eti_lo``/``eti_hi`` (``prob``, default from arviz rcParams), ``mcse_lower``
        (Monte Carlo standard error of the lower bound).
        """
        level = check_level(level, "level")
        default_prob, _ = _default_ci()
        prob = check_level(default_prob if prob is None else prob, "prob")
        rows = {}
        tag = f"{level:g}"
        for name in self.quantities:
            x = self.draws(name)
            lo, hi = eti(x, prob)
            rows[name] = {
                "mean": float(x.mean()),
                "sd": float(x.std(ddof=1)),
                "median": float(np.median(x)),
                f"lower_{tag}": float(np.quantile(x, 1 - level)),
                f"upper_{tag}": float(np.quantile(x, level)),
                f"eti{prob:g}_lo": lo,
                f"eti{prob:g}_hi": hi,
                "mcse_lower": mcse_quantile(x, 1 - level),
            }
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "quantity"
        return frame
