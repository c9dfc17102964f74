"""Registry of classifier-effectiveness metrics computed from confusion counts.

Every metric is a function of the confusion counts ``(tp, fp, fn, tn)`` given as equally shaped
float arrays (one entry per Monte Carlo draw) and returns an array of the same shape. Adding a
metric is one decorated function.

Conventions (documented, tested):

* ``f1`` is 1.0 when there are no positives and no positive predictions (tp = fp = fn = 0),
  following Lewis (1995) as used by Webber et al. (``../shared/seeds/002_bcc5f0faf615c660.txt``).
* ``recall`` is 1.0 when the population holds no positives (tp + fn = 0): nothing was missed.
* ``precision`` needs predicted positives: asking for it on a population without any is a
  ``ValueError`` (it is undefined, not 0 or 1). Likewise ``npv`` needs predicted negatives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "METRICS",
    "Metric",
    "confusion_from_positives",
    "metric_of_positives",
    "metric_values",
    "metrics_for_sides",
    "register_metric",
    "relevant_sides",
]


@dataclass(frozen=True, slots=True)
class Metric:
    """A registered metric.

    Attributes
    ----------
    name : str
    func : callable ``(tp, fp, fn, tn) -> array``
    needs_predicted_positive, needs_predicted_negative : bool
        Whether the metric is undefined without predicted positives / negatives.
    linear_in_rates : bool
        Whether the metric is a fixed linear function of the per-stratum positive rates (so that
        an anytime-valid bound for a mean applies).
    description : str
    """

    name: str
    func: Callable[..., np.ndarray]
    needs_predicted_positive: bool = False
    needs_predicted_negative: bool = False
    linear_in_rates: bool = False
    description: str = ""


#: name -> Metric
METRICS: dict[str, Metric] = {}


def register_metric(
    name: str,
    *,
    needs_predicted_positive: bool = False,
    needs_predicted_negative: bool = False,
    linear_in_rates: bool = False,
) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Decorator registering ``func(tp, fp, fn, tn)`` as metric ``name``."""

    def deco(func: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        METRICS[name] = Metric(
            name,
            func,
            needs_predicted_positive,
            needs_predicted_negative,
            linear_in_rates,
            (func.__doc__ or "").strip().splitlines()[0] if func.__doc__ else "",
        )
        return func

    return deco


def _safe_ratio(num: np.ndarray, den: np.ndarray, empty: float) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, empty, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


@register_metric("precision", needs_predicted_positive=True, linear_in_rates=True)
def precision(tp, fp, fn, tn):
    """Precision TP / (TP + FP): share of predicted positives that are positive."""
    return _safe_ratio(tp, tp + fp, np.nan)


@register_metric("recall")
def recall(tp, fp, fn, tn):
    """Recall TP / (TP + FN); 1.0 when there are no positives."""
    return _safe_ratio(tp, tp + fn, 1.0)


@register_metric("f1")
def f1(tp, fp, fn, tn):
    """F1 = 2 TP / (2 TP + FP + FN); 1.0 when TP = FP = FN = 0 (Lewis 1995)."""
    return _safe_ratio(2 * tp, 2 * tp + fp + fn, 1.0)


@register_metric("accuracy", linear_in_rates=True)
def accuracy(tp, fp, fn, tn):
    """Accuracy (TP + TN) / N."""
    return _safe_ratio(tp + tn, tp + fp + fn + tn, np.nan)


@register_metric("prevalence", linear_in_rates=True)
def prevalence(tp, fp, fn, tn):
    """Prevalence (TP + FN) / N: share of items that are positive."""
    return _safe_ratio(tp + fn, tp + fp + fn + tn, np.nan)


@register_metric("specificity")
def specificity(tp, fp, fn, tn):
    """Specificity TN / (TN + FP); 1.0 when there are no negatives."""
    return _safe_ratio(tn, tn + fp, 1.0)


@register_metric("npv", needs_predicted_negative=True, linear_in_rates=True)
def npv(tp, fp, fn, tn):
    """Negative predictive value TN / (TN + FN)."""
    return _safe_ratio(tn, tn + fn, np.nan)


@register_metric("balanced_accuracy")
def balanced_accuracy(tp, fp, fn, tn):
    """Balanced accuracy (recall + specificity) / 2."""
    return 0.5 * (recall(tp, fp, fn, tn) + specificity(tp, fp, fn, tn))


def resolve_metrics(
    metrics: str | tuple[str, ...] | list[str] | None,
    *,
    has_predicted_positive: bool,
    has_predicted_negative: bool,
) -> tuple[str, ...]:
    """Validate a metric selection; ``None`` means every metric defined for this population."""
    if metrics is None:
        return tuple(
            m.name
            for m in METRICS.values()
            if (has_predicted_positive or not m.needs_predicted_positive)
            and (has_predicted_negative or not m.needs_predicted_negative)
        )
    if isinstance(metrics, str):
        metrics = (metrics,)
    out = []
    for name in metrics:
        if not isinstance(name, str) or name not in METRICS:
            raise ValueError(
                f"metrics contains {name!r}; allowed: " + ", ".join(repr(m) for m in METRICS)
            )
        m = METRICS[name]
        for needs, has, side in (
            (m.needs_predicted_positive, has_predicted_positive, "positives"),
            (m.needs_predicted_negative, has_predicted_negative, "negatives"),
        ):
            if needs and not has:
                defined = resolve_metrics(
                    None,
                    has_predicted_positive=has_predicted_positive,
                    has_predicted_negative=has_predicted_negative,
                )
                raise ValueError(
                    f"metric {name!r} is undefined: the population has no predicted {side}; "
                    f"allowed here: {', '.join(defined)}"
                )
        if name not in out:
            out.append(name)
    return tuple(out)


def metrics_for_sides(
    metrics: str | tuple[str, ...] | list[str] | None, sizes: Any, predicted: Any
) -> tuple[str, ...]:
    """:func:`resolve_metrics` for strata of ``sizes`` items on predicted sides ``predicted``
    (bool per stratum): a metric needs items on the side(s) it divides by."""
    sizes = np.asarray(sizes)
    predicted = np.asarray(predicted, dtype=bool)
    return resolve_metrics(
        metrics,
        has_predicted_positive=bool(sizes[predicted].sum() > 0),
        has_predicted_negative=bool(sizes[~predicted].sum() > 0),
    )


# ------------------------------------------------------------------ the one counts -> metric kernel
def confusion_from_positives(
    positives: np.ndarray, sizes: np.ndarray, predicted: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Confusion counts from the positives of each stratum, for any batch of draws.

    .. math::

        TP = \\sum_{k: \\hat y_k = 1} P_k,\\; FP = \\sum_{k: \\hat y_k = 1} N_k - TP,\\;
        FN = \\sum_{k: \\hat y_k = 0} P_k,\\; TN = \\sum_{k: \\hat y_k = 0} N_k - FN.

    Parameters
    ----------
    positives : ndarray (..., K)
        Positives per stratum (draws, replications... in the leading axes); or, with ``K = 2``
        and ``predicted = [True, False]``, positives already summed per predicted side.
    sizes : ndarray (K,)
    predicted : ndarray of bool (K,)

    Returns
    -------
    tp, fp, fn, tn : ndarray (...)
    """
    side = np.asarray(predicted, dtype=bool)
    sizes = np.asarray(sizes, dtype=np.float64)
    pos = np.asarray(positives, dtype=np.float64)
    tp = pos @ side.astype(np.float64)
    fn = pos @ (~side).astype(np.float64)
    fp = float(sizes[side].sum()) - tp
    tn = float(sizes[~side].sum()) - fn
    return tp, fp, fn, tn


def metric_values(
    metrics: str | tuple[str, ...], positives: np.ndarray, sizes: np.ndarray, predicted: np.ndarray
) -> dict[str, np.ndarray]:
    """Every metric in ``metrics`` from positives per stratum ``(..., K)`` (one kernel for the
    posterior, the simulations and the calibration truths)."""
    names = (metrics,) if isinstance(metrics, str) else tuple(metrics)
    tp, fp, fn, tn = confusion_from_positives(positives, sizes, predicted)
    return {name: METRICS[name].func(tp, fp, fn, tn) for name in names}


def metric_of_positives(
    metric: str, positives: np.ndarray, sizes: np.ndarray, predicted: np.ndarray
) -> float:
    """The metric of one population whose positives per stratum are ``positives`` (K,)."""
    return float(metric_values(metric, np.asarray(positives)[None, :], sizes, predicted)[metric][0])


@functools.cache
def relevant_sides(metric: str) -> tuple[bool, bool]:
    """Whether ``metric`` depends on the predicted-negative and on the predicted-positive side.

    Checked numerically: the metric is evaluated at random confusion counts and again with
    positives moved between the cells of one side (``fn <-> tn`` or ``tp <-> fp``); a side whose
    split never changes the value is irrelevant (precision ignores the negative side, npv the
    positive one): its strata need no posterior draws, and its labels do not inform the metric.
    """
    gen = np.random.default_rng(20240601)
    tp, fp, fn, tn = gen.uniform(1.0, 100.0, size=(4, 64))
    d = gen.uniform(0.1, 0.9, size=64)
    f = METRICS[metric].func
    with np.errstate(divide="ignore", invalid="ignore"):
        base = f(tp, fp, fn, tn)
        neg = not np.allclose(f(tp, fp, fn + d, tn - d), base, rtol=1e-12, atol=0.0)
        pos = not np.allclose(f(tp + d, fp - d, fn, tn), base, rtol=1e-12, atol=0.0)
    return bool(neg), bool(pos)
