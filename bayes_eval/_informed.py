"""Which metrics of a posterior the labels actually inform.

A stratified posterior gives every metric a distribution, but a metric that depends on a stratum
without a single label takes that stratum's rate from the prior alone: with the Jeffreys prior the
rate of an unlabelled stratum is centred on 1/2 whatever the population holds. An audit that
labels only the predicted-positive side (as a precision audit should) thus prints recall, F1,
accuracy and prevalence values that no label supports. This module decides, per metric, whether
that happens, so that every table, figure and report can say **prior only** instead of presenting
an interval as an estimate.

Rule: a metric depends on a predicted side if moving positives between that side's two cells
(``tp <-> fp`` or ``fn <-> tn``) changes it (checked numerically, as
:func:`bayes_eval.metrics.relevant_sides`). The metric is *informed* iff every non-empty
stratum on every side it depends on has at least one label. One unlabelled stratum suffices to
make it prior-only: its contribution is set by the prior, and nothing in the data bounds how far
that is from the truth (the issue's example: recall 0.0065 with a tight interval, truth 0.126).
The share of the relevant items that sit in unlabelled strata is reported alongside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .metrics import relevant_sides

__all__ = ["MetricInformation", "informed_metrics", "metric_information"]


@dataclass(frozen=True, slots=True)
class MetricInformation:
    """How far the labels inform one metric.

    Attributes
    ----------
    metric : str
    informed : bool
        Every non-empty stratum the metric depends on has a label.
    unlabelled_strata : tuple of int
        Strata the metric depends on that have no label.
    unlabelled_share : float
        Share of the items of the relevant sides that lie in unlabelled strata.
    reason : str
        Empty when informed, else a sentence saying why the metric is prior only.
    """

    metric: str
    informed: bool
    unlabelled_strata: tuple[int, ...]
    unlabelled_share: float
    reason: str


def _arrays(post: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tree = post.datatree
    sizes = np.asarray(tree["constant_data"]["N"].values, dtype=np.int64)
    predicted = np.asarray(tree["constant_data"]["predicted"].values).astype(bool)
    n = np.asarray(tree["observed_data"]["n"].values, dtype=np.int64)
    return sizes, predicted, n


def information_from_counts(
    metric: str, sizes: np.ndarray, predicted: np.ndarray, n: np.ndarray
) -> MetricInformation:
    """:class:`MetricInformation` of ``metric`` from stratum sizes, sides and label counts."""
    neg, pos = relevant_sides(metric)
    relevant = ((predicted & pos) | (~predicted & neg)) & (sizes > 0)
    missing = relevant & (n == 0)
    total = int(sizes[relevant].sum())
    share = float(sizes[missing].sum() / total) if total else 0.0
    ids = tuple(int(i) for i in np.flatnonzero(missing))
    if not ids:
        return MetricInformation(metric, True, (), 0.0, "")
    sides = [s for s, flag in (("predicted-negative", neg), ("predicted-positive", pos)) if flag]
    reason = (
        f"{metric} depends on the {' and '.join(sides)} side{'s' if len(sides) > 1 else ''}, "
        f"where {len(ids)} strata ({share:.1%} of those items) have no label"
    )
    return MetricInformation(metric, False, ids, share, reason)


def metric_information(post: Any) -> dict[str, MetricInformation]:
    """:class:`MetricInformation` for every metric of a posterior."""
    sizes, predicted, n = _arrays(post)
    return {m: information_from_counts(m, sizes, predicted, n) for m in post.metrics}


def informed_metrics(post: Any) -> dict[str, bool]:
    """Whether the labels inform each metric of ``post`` (False: the prior alone decides it).

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> from bayes_eval._informed import informed_metrics
    >>> rng = np.random.default_rng(0)
    >>> pop = be.Population(rng.random(10_000), threshold=0.8)
    >>> strata = be.stratify(pop, n_strata=4)
    >>> pos_ids = np.flatnonzero(pop.predictions)[:200]  # labels on the positive side only
    >>> post = be.estimate(strata, (pos_ids, rng.random(200) < 0.9), draws=2000, rng=0)
    >>> info = informed_metrics(post)
    >>> info["precision"], info["recall"], info["f1"], info["accuracy"]
    (True, False, False, False)
    """
    return {m: i.informed for m, i in metric_information(post).items()}
