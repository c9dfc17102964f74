"""Summaries of Monte Carlo draws shared by every posterior result.

:class:`DrawSummaries` is a mixin for frozen result dataclasses that carry an
``xarray.DataTree`` whose ``posterior`` group holds scalar quantities over ``(chain, draw)``.
It provides ``mean``, ``lower_bound``, ``upper_bound``, ``interval``, ``prob_at_least``,
``prob_greater``, ``bounds`` and ``summary``. Kernels here are plain numpy (axis-last); the mixin
only picks the right variable out of the tree.

Start-up cost: only ``interval`` and ``summary`` (arviz-base for their defaults) and the
:func:`eti` / :func:`hdi` / :func:`mcse_quantile` helpers import ArviZ (arviz-stats takes seconds,
mostly scipy.stats); ``bounds`` (what ``bayes-eval status`` prints) and every other method need
numpy alone.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ._validation import check_level, check_option

if TYPE_CHECKING:
    import pandas as pd

#: posterior draws of every result (``estimate``, ``Audit``, pair recall) unless ``draws=`` is
#: given;
#: simulations use fewer per simulated look (:func:`bayes_eval.simulate`, ``draws=2000``)
DEFAULT_DRAWS: int = 40_000

__all__ = [
    "DEFAULT_DRAWS",
    "Bounds",
    "DrawSummaries",
    "audit_generator",
    "bounds_of",
    "decision_level",
    "eti",
    "hdi",
    "mcse_quantile",
]


#: highest level a decision bound is taken at: a sequential correction may require certainty
#: (nominal level 1.0 at a look, or at every look when no level is attainable), whose bound is
#: the smallest draw
MAX_DECISION_LEVEL = 1.0 - 1e-12


def decision_level(level: float) -> float:
    """The level at which to report the bound of a decision made at nominal ``level`` (which may
    be exactly 1.0 after a sequential correction; user-facing levels stay in (0, 1))."""
    return min(float(level), MAX_DECISION_LEVEL)


@dataclass(frozen=True, slots=True)
class Bounds:
    """Posterior mean, standard deviation and one-sided credible bounds of one quantity.

    Attributes
    ----------
    mean, sd : float
        Posterior mean and standard deviation (``ddof=1``).
    lower, upper : float
        One-sided bounds at ``level``: the ``1 - level`` and ``level`` posterior quantiles
        (linear interpolation, as :func:`numpy.quantile`), so ``P(quantity >= lower) = level``.
    level : float
    """

    mean: float
    sd: float
    lower: float
    upper: float
    level: float


def bounds_of(draws: np.ndarray, level: float) -> Bounds:
    """:class:`Bounds` of 1-D Monte Carlo ``draws`` at ``level`` (numpy only).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval._draws import bounds_of
    >>> b = bounds_of(np.random.default_rng(0).beta(80, 20, 40_000), 0.95)
    >>> round(b.mean, 2), round(b.lower, 2), round(b.upper, 2)
    (0.8, 0.73, 0.86)
    """
    level = check_level(level, "level")
    x = np.asarray(draws, dtype=np.float64).reshape(-1)
    lo, hi = np.quantile(x, [1.0 - level, level])
    return Bounds(float(x.mean()), float(x.std(ddof=1)), float(lo), float(hi), level)


def _array_stats() -> Any:
    """arviz-stats' numpy kernels, imported on first use (importing arviz-stats takes seconds,
    which ``import bayes_eval`` and every CLI command would otherwise pay)."""
    from arviz_stats.base import array_stats

    return array_stats


def eti(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """Equal-tailed interval of 1-D draws (``arviz_stats`` ``eti``, linear quantiles)."""
    lo, hi = _array_stats().eti(np.asarray(draws, dtype=np.float64), prob)
    return float(lo), float(hi)


def hdi(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """Narrowest interval holding a fraction ``prob`` of the 1-D draws (``arviz_stats`` ``hdi``)."""
    lo, hi = _array_stats().hdi(np.asarray(draws, dtype=np.float64), prob)
    return float(lo), float(hi)


def mcse_quantile(draws: np.ndarray, q: float) -> float:
    """Monte Carlo standard error of the ``q`` quantile of the draws (``arviz_stats`` ``mcse``
    with ``method="quantile"``; for independent draws this is the binomial order-statistic
    interval ``n q ± sqrt(n q (1-q))`` halved)."""
    x = np.asarray(draws, dtype=np.float64).reshape(1, -1)
    return float(_array_stats().mcse(x, chain_axis=0, draw_axis=1, method="quantile", prob=q))


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

    def bounds(self, level: float = 0.95) -> dict[str, Bounds]:
        """Per quantity: mean, sd and one-sided ``level`` bounds (:class:`Bounds`), numpy only.

        The columns ``mean``, ``sd``, ``lower_<level>`` and ``upper_<level>`` of :meth:`summary`
        without its two-sided interval and Monte Carlo error, which need arviz-stats (seconds to
        import); ``bayes-eval status`` prints these.
        """
        level = check_level(level, "level")
        return {name: bounds_of(self.draws(name), level) for name in self.quantities}

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

    def summary(
        self, level: float = 0.95, prob: float | None = None, kind: str | None = None
    ) -> pd.DataFrame:
        """One row per quantity: mean, sd, median, one-sided bounds, interval and MC error.

        Columns: ``mean``, ``sd``, ``median``, ``lower_<level>``, ``upper_<level>``, the
        two-sided interval named as ArviZ names it, ``<kind><percent>_lb`` / ``_ub`` (e.g.
        ``eti89_lb``; ``prob`` and ``kind`` default to ``arviz_base.rcParams["stats.ci_prob"]``
        and ``["stats.ci_kind"]``), ``mcse_lower`` (Monte Carlo standard error of the lower
        bound) and, for results that know it, ``informed`` (False: the metric depends on a
        stratum without labels, so the prior alone decides it and its numbers are not an
        estimate).
        """
        level = check_level(level, "level")
        default_prob, default_kind = _default_ci()
        prob = check_level(default_prob if prob is None else prob, "prob")
        kind = check_option(default_kind if kind is None else kind, "kind", ("eti", "hdi"))
        rows = {}
        tag = f"{level:g}"
        ci = f"{kind}{100 * prob:g}"
        for name in self.quantities:
            x = self.draws(name)
            b = bounds_of(x, level)
            lo, hi = eti(x, prob) if kind == "eti" else hdi(x, prob)
            rows[name] = {
                "mean": b.mean,
                "sd": b.sd,
                "median": float(np.median(x)),
                f"lower_{tag}": b.lower,
                f"upper_{tag}": b.upper,
                f"{ci}_lb": lo,
                f"{ci}_ub": hi,
                "mcse_lower": mcse_quantile(x, 1 - level),
            }
        import pandas as pd  # start-up time: only tables need pandas

        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "quantity"
        informed = getattr(self, "informed", None)
        if callable(informed):
            flags = informed()
            frame["informed"] = [bool(flags.get(q, True)) for q in frame.index]
        return frame


def audit_generator(seed: int, n_labels: int) -> np.random.Generator:
    """The generator of an audit's posterior draws: ``default_rng([seed, 0xE5, n_labels])``,
    reproducible and independent of the audit's proposal stream (``Audit.estimate``)."""
    return np.random.default_rng([int(seed), 0xE5, int(n_labels)])
