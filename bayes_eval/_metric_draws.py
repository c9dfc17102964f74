"""Posterior draws of the metrics as plain numpy arrays: the Monte Carlo kernel of every posterior.

From draws of the per-stratum positive rates ``theta`` (shape ``(draws, K)``),
:func:`metric_draws_from_theta` draws the positives among the unlabelled items (finite
population) or scales the rates (infinite population), forms the confusion counts and evaluates
every metric of :data:`bayes_eval.metrics.METRICS` draw by draw: the Monte Carlo beta-binomial
method of Webber et al. (``../shared/seeds/002_bcc5f0faf615c660.txt``), stratified as in Bennett &
Carvalho (``../shared/seeds/000_51972d8d13fae9c1.txt``). :class:`MetricDraws` holds the result
with the per-stratum counts and offers the summaries of :class:`~bayes_eval._draws.DrawSummaries`.

:class:`bayes_eval.MetricPosterior` packs the same arrays into an ``xarray.DataTree`` with the
prior group and metadata. This module needs numpy (and scipy.special through the sampler) only:
importing xarray and pandas and building the tree costs more than a second, which ``bayes-eval
status`` (issue 18: start-up) does not pay. :func:`independent_metric_draws` is the independent
Beta model's conjugate update followed by the kernel; with the same generator it returns exactly
the draws of :func:`bayes_eval.posterior.estimate_from_stratum_counts` (tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._draws import DrawSummaries, audit_generator
from ._informed import MetricInformation, information_from_counts
from ._sampling import draw_beta, draw_remainder
from ._validation import check_option
from .metrics import METRICS, confusion_from_positives, metrics_for_sides

__all__ = [
    "MetricDraws",
    "StratumRow",
    "audit_generator",
    "independent_metric_draws",
    "metric_draws_from_theta",
]

#: the confusion counts kept next to the metrics
COUNTS: tuple[str, ...] = ("tp", "fp", "fn", "tn")


@dataclass(frozen=True, slots=True)
class StratumRow:
    """One stratum of a posterior: what ``bayes-eval status`` lists per stratum.

    Attributes
    ----------
    stratum : int
    predicted : bool
        The classifier's prediction for the stratum's items.
    score_min, score_max : float
        Score range (NaN when unknown).
    size : int
        Items in the stratum (``N_k``).
    labelled, positives : int
        Labels ``n_k`` and positive labels ``h_k``.
    rate_mean : float
        Posterior mean of the positive rate ``theta_k``.
    """

    stratum: int
    predicted: bool
    score_min: float
    score_max: float
    size: int
    labelled: int
    positives: int
    rate_mean: float


@dataclass(frozen=True, slots=True)
class MetricDraws(DrawSummaries):
    """Monte Carlo draws of the metrics with the per-stratum counts, numpy only.

    Attributes
    ----------
    metrics : tuple of str
        Metrics available.
    values : mapping of str to ndarray
        Draws (shape ``(draws,)``) of every metric and of ``tp``, ``fp``, ``fn``, ``tn``.
    theta, positives : ndarray
        Draws of the stratum rates and of the stratum positives, shape ``(draws, K)``.
    sizes, predicted, n, h : ndarray
        Per stratum: ``N_k``, predicted class, labels ``n_k`` and positives ``h_k``.
    score_min, score_max : ndarray
        Per-stratum score range (NaN when unknown).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval._metric_draws import independent_metric_draws
    >>> post = independent_metric_draws(
    ...     sizes=[900, 100], predicted=[False, True], n=[50, 50], h=[2, 40],
    ...     prior_a=0.5, prior_b=0.5, draws=4000, rng=np.random.default_rng(0),
    ... )
    >>> round(post.mean("precision"), 2), post.prior_only
    (0.8, ())
    """

    metrics: tuple[str, ...]
    values: Mapping[str, np.ndarray]
    theta: np.ndarray
    positives: np.ndarray
    sizes: np.ndarray
    predicted: np.ndarray
    n: np.ndarray
    h: np.ndarray
    score_min: np.ndarray
    score_max: np.ndarray

    @property
    def quantities(self) -> tuple[str, ...]:  # type: ignore[override]
        """Names accepted by ``mean``, ``lower_bound``, ``bounds``..."""
        return self.metrics

    @property
    def datatree(self) -> Any:  # type: ignore[override]
        """Not kept: use :class:`bayes_eval.MetricPosterior` for the ArviZ tree."""
        raise AttributeError("MetricDraws keeps numpy arrays only; it has no datatree")

    @property
    def n_draws(self) -> int:
        """Number of Monte Carlo draws."""
        return int(self.theta.shape[0])

    @property
    def n_strata(self) -> int:
        """Number of strata."""
        return int(self.sizes.shape[0])

    @property
    def n_labels(self) -> int:
        """Labels used."""
        return int(self.n.sum())

    def draws(self, quantity: str) -> np.ndarray:
        """Draws of a metric (or of ``tp``/``fp``/``fn``/``tn``), shape ``(draws,)``."""
        check_option(quantity, "metric", (*self.metrics, *COUNTS))
        return self.values[quantity]

    def information(self) -> dict[str, MetricInformation]:
        """Per metric: whether the labels inform it (see :mod:`bayes_eval._informed`)."""
        return {
            m: information_from_counts(m, self.sizes, self.predicted, self.n) for m in self.metrics
        }

    def informed(self) -> dict[str, bool]:
        """Per metric: True if every stratum it depends on has labels, False if prior only."""
        return {m: i.informed for m, i in self.information().items()}

    @property
    def prior_only(self) -> tuple[str, ...]:
        """Metrics that depend on a stratum without labels: the prior decides them."""
        return tuple(m for m, ok in self.informed().items() if not ok)

    def strata_rows(self) -> tuple[StratumRow, ...]:
        """One :class:`StratumRow` per stratum (size, side, score range, labels, positives and
        posterior mean rate; the columns of ``MetricPosterior.strata_table`` that ``status``
        prints)."""
        rate = self.theta.mean(axis=0)
        return tuple(
            StratumRow(
                k,
                bool(self.predicted[k]),
                float(self.score_min[k]),
                float(self.score_max[k]),
                int(self.sizes[k]),
                int(self.n[k]),
                int(self.h[k]),
                float(rate[k]),
            )
            for k in range(self.n_strata)
        )

    @classmethod
    def of_posterior(cls, post: Any) -> MetricDraws:
        """The arrays of a :class:`bayes_eval.MetricPosterior` (any model) as
        :class:`MetricDraws`."""
        tree = post.datatree
        p, const, obs = tree["posterior"], tree["constant_data"], tree["observed_data"]
        k = int(const.sizes["stratum"])
        names = (*post.metrics, *COUNTS)
        return cls(
            metrics=tuple(post.metrics),
            values={m: np.asarray(p[m].values, dtype=np.float64).reshape(-1) for m in names},
            theta=np.asarray(p["theta"].values).reshape(-1, k),
            positives=np.asarray(p["positives"].values).reshape(-1, k),
            sizes=np.asarray(const["N"].values, dtype=np.int64),
            predicted=np.asarray(const["predicted"].values).astype(bool),
            n=np.asarray(obs["n"].values, dtype=np.int64),
            h=np.asarray(obs["h"].values, dtype=np.int64),
            score_min=np.asarray(const["score_min"].values, dtype=np.float64),
            score_max=np.asarray(const["score_max"].values, dtype=np.float64),
        )


def metric_draws_from_theta(
    theta: np.ndarray,
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    finite_population: bool,
    metrics: str | tuple[str, ...] | None,
    rng: np.random.Generator,
    sampler: str = "fast",
    score_min: np.ndarray | None = None,
    score_max: np.ndarray | None = None,
) -> MetricDraws:
    """Metric draws from draws of the stratum rates ``theta`` (shape ``(draws, K)``).

    Parameters
    ----------
    theta : ndarray
        Draws of the per-stratum positive rates.
    sizes, predicted, n, h : array_like
        Per stratum: items ``N_k``, predicted class, labels ``n_k``, positive labels ``h_k``.
    finite_population : bool
        True: the positives among the ``N_k - n_k`` unlabelled items are drawn
        ``Binomial(N_k - n_k, theta_k)`` (with ``sampler``) and added to ``h_k``; False:
        ``N_k theta_k``.
    metrics : str or tuple of str or None
        Metrics to compute (None: every metric defined for the population).
    rng : numpy.random.Generator
        Generator of the remainder draws (the only random step here).
    sampler : {"fast", "exact"}
        See :mod:`bayes_eval._sampling`.
    score_min, score_max : ndarray, optional
        Per-stratum score range (NaN when not given).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    predicted = np.asarray(predicted, dtype=bool)
    n = np.asarray(n, dtype=np.int64)
    h = np.asarray(h, dtype=np.int64)
    k = sizes.shape[0]
    metrics = metrics_for_sides(metrics, sizes, predicted)
    if finite_population:
        positives = draw_remainder(theta, sizes - n, rng, method=sampler)
        positives += h[None, :]
    else:
        positives = theta * sizes[None, :]
    tp, fp, fn, tn = confusion_from_positives(positives, sizes, predicted)
    values = {name: METRICS[name].func(tp, fp, fn, tn) for name in metrics}
    values.update(tp=tp, fp=fp, fn=fn, tn=tn)
    nan = np.full(k, np.nan)
    return MetricDraws(
        metrics=metrics,
        values=values,
        theta=theta,
        positives=positives,
        sizes=sizes,
        predicted=predicted,
        n=n,
        h=h,
        score_min=nan if score_min is None else np.asarray(score_min, dtype=np.float64),
        score_max=nan if score_max is None else np.asarray(score_max, dtype=np.float64),
    )


def independent_metric_draws(
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray | float,
    prior_b: np.ndarray | float,
    draws: int,
    rng: np.random.Generator,
    finite_population: bool = True,
    metrics: str | tuple[str, ...] | None = None,
    sampler: str = "fast",
    score_min: np.ndarray | None = None,
    score_max: np.ndarray | None = None,
) -> MetricDraws:
    """The independent Beta model: ``theta_k ~ Beta(a_k + h_k, b_k + n_k - h_k)``, then
    :func:`metric_draws_from_theta`.

    The counts are taken as valid (``0 <= h_k <= n_k <= N_k``; the callers check them). With the
    same generator the draws equal those of
    :func:`bayes_eval.posterior.estimate_from_stratum_counts` with ``model="independent"``.
    """
    n = np.asarray(n, dtype=np.int64)
    h = np.asarray(h, dtype=np.int64)
    a = np.broadcast_to(np.asarray(prior_a, dtype=np.float64), n.shape)
    b = np.broadcast_to(np.asarray(prior_b, dtype=np.float64), n.shape)
    theta = draw_beta(a + h, b + n - h, draws, rng, method=sampler)
    return metric_draws_from_theta(
        theta,
        sizes=sizes,
        predicted=predicted,
        n=n,
        h=h,
        finite_population=finite_population,
        metrics=metrics,
        rng=rng,
        sampler=sampler,
        score_min=score_min,
        score_max=score_max,
    )
