"""The anytime-valid comparison: the calibrated Bayesian rule against a betting confidence
sequence (Waudby-Smith & Ramdas 2020; see :mod:`bayes_eval.sequential`).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from .._validation import (
    RNGLike,
    as_generator,
    check_level,
    check_option,
    check_positive_int,
)
from ..priors import BetaSpec, resolve_prior
from ._linear import least_favourable_truth, linear_form, prob_linear_ge
from .calibration import (
    _as_schedule,
    _planning,
    _resolve_rates,
    calibrate_sequential,
    check_target,
    required_sims,
)

__all__ = ["betting_lower", "compare_anytime"]


# -------------------------------------------------------------------- anytime-valid comparison
def compare_anytime(
    sizes: ArrayLike,
    predicted: ArrayLike,
    *,
    metric: str = "accuracy",
    target: float = 0.8,
    delta: float = 0.05,
    rates: ArrayLike | None = None,
    prior: BetaSpec = "jeffreys",
    batch_size: int = 20,
    budget: int = 2000,
    level: float = 0.95,
    n_sims: int = 2000,
    calibration_sims: int | None = None,
    grid_size: int = 400,
    rng: RNGLike = None,
) -> xr.Dataset:
    """Calibrated Bayesian acceptance against an anytime-valid confidence sequence.

    For a metric that is the mean of a 0/1 value over a fixed sampling frame (``"accuracy"`` and
    ``"prevalence"`` over the whole population, ``"precision"`` over the predicted positives,
    ``"npv"`` over the predicted negatives) three rules watch the same simple random samples
    without replacement, looking after every batch:

    * ``bayes_naive``: accept when ``P(metric >= target) >= level`` (Webber's rule);
    * ``bayes_calibrated``: the same at the corrected nominal level of
      :func:`calibrate_sequential` (design ``"random"``);
    * ``confidence_sequence``: accept when the betting confidence-sequence lower bound
      (:mod:`~bayes_eval.sequential._confseq`,
      Waudby-Smith & Ramdas 2020) at ``1 - level`` exceeds the target;
      valid under continuous monitoring without any calibration.

    They are run with the truth at the target (``truth="at_target"``: every acceptance is false)
    and at ``target + delta`` (``"above_target"``: labels-to-accept).

    Returns
    -------
    xarray.Dataset
        Over ``(procedure, truth)``: ``accept_rate``, ``accept_mcse``, ``mean_labels`` (budget
        when never accepting), ``labels_mcse``; attrs: ``level_used`` of the calibrated rule.
    """
    check_option(metric, "metric", ("accuracy", "precision", "prevalence", "npv"))
    sizes_, pred_ = _planning(None, sizes, predicted)
    target = check_target(metric, target)
    if (
        isinstance(delta, bool)
        or not isinstance(delta, numbers.Real)
        or not (0 < target + float(delta) <= 1)
    ):
        raise ValueError(f"delta={delta!r}; allowed: target + delta in (target, 1]")
    level = check_level(level, "level")
    n_sims = check_positive_int(n_sims, "n_sims")
    gen = as_generator(rng)
    a, b, _ = resolve_prior(prior, sizes_.shape[0])
    r, _ = _resolve_rates(rates, None, a, b, sizes_.shape[0])
    keep = {"precision": pred_, "npv": ~pred_}.get(metric, np.ones(pred_.shape, dtype=bool))
    if not keep.any():
        raise ValueError(f"metric {metric!r} needs strata on its side of the threshold")
    sizes_, pred_, r, a, b = sizes_[keep], pred_[keep], r[keep], a[keep], b[keep]
    schedule = _as_schedule(batch_size, budget, None, int(sizes_.sum()))
    cal = calibrate_sequential(
        sizes=sizes_,
        predicted=pred_,
        metric=metric,
        target=target,
        design="random",
        batch_size=batch_size,
        budget=budget,
        prior=(a, b),
        rates=r,
        n_sims=calibration_sims or max(n_sims, required_sims(level, 0.005)),
        rng=gen,
    )
    gamma = cal.corrected_level(level)
    w, c = linear_form(metric, target, pred_, sizes_)
    n_pop = int(sizes_.sum())
    stratum_of = np.repeat(np.arange(sizes_.shape[0]), sizes_)
    procs = ("bayes_naive", "bayes_calibrated", "confidence_sequence")
    truths = ("at_target", "above_target")
    acc = np.zeros((3, 2))
    acc_se = np.zeros((3, 2))
    lab = np.zeros((3, 2))
    lab_se = np.zeros((3, 2))
    for ti, value in enumerate((target, target + float(delta))):
        positives = least_favourable_truth(sizes_, pred_, r, metric=metric, value=value)
        labels = np.zeros(n_pop, dtype=np.int8)
        start = np.concatenate([[0], np.cumsum(sizes_)[:-1]])
        for k in range(sizes_.shape[0]):
            labels[start[k] : start[k] + positives[k]] = 1
        value_of = labels.astype(np.float64)
        if metric == "accuracy":
            value_of = (labels == pred_[stratum_of]).astype(np.float64)
        elif metric == "npv":
            value_of = 1.0 - value_of
        idx = np.empty((n_sims, budget), dtype=np.int64)
        for i in range(n_sims):
            idx[i] = gen.choice(n_pop, budget, replace=False)
        st = stratum_of[idx]
        lb = labels[idx]
        kk = sizes_.shape[0]
        n = np.zeros((n_sims, kk), dtype=np.int64)
        h = np.zeros((n_sims, kk), dtype=np.int64)
        prob = np.empty((n_sims, schedule.size))
        rows = np.repeat(np.arange(n_sims), batch_size)
        for j, upto in enumerate(schedule):
            sl = slice(upto - batch_size, upto)
            np.add.at(n, (rows, st[:, sl].ravel()), 1)
            np.add.at(h, (rows, st[:, sl].ravel()), lb[:, sl].ravel())
            prob[:, j] = prob_linear_ge(n, h, a, b, sizes_, w, c, True)
        # only "bound > target" matters: a coarse grid far below the target, a fine one
        # (step 1 / grid_size) near it, ending two steps above it
        step = 1.0 / grid_size
        near = max(target - 0.1, 0.0)
        grid = np.unique(
            np.concatenate([np.linspace(0.0, near, 21), np.arange(near, target + 2.5 * step, step)])
        )
        lower = betting_lower(value_of[idx], n_pop, 1.0 - level, grid=grid, at=schedule)
        running = np.maximum.accumulate(prob, axis=1)
        hits = (running >= level, running >= gamma, np.maximum.accumulate(lower, axis=1) > target)
        for pi, hit in enumerate(hits):
            ever = hit.any(axis=1)
            first = np.where(ever, hit.argmax(axis=1), schedule.size - 1)
            used = schedule[first].astype(np.float64)
            acc[pi, ti] = ever.mean()
            acc_se[pi, ti] = np.sqrt(max(acc[pi, ti] * (1 - acc[pi, ti]), 1 / n_sims) / n_sims)
            lab[pi, ti] = used.mean()
            lab_se[pi, ti] = used.std(ddof=1) / np.sqrt(n_sims)
    dims = ("procedure", "truth")
    return xr.Dataset(
        {
            "accept_rate": (dims, acc),
            "accept_mcse": (dims, acc_se),
            "mean_labels": (dims, lab),
            "labels_mcse": (dims, lab_se),
        },
        coords={"procedure": list(procs), "truth": list(truths)},
        attrs={
            "metric": metric,
            "target": target,
            "delta": float(delta),
            "level": level,
            "level_used": gamma,
            "budget": int(budget),
            "batch_size": int(batch_size),
            "n_sims": n_sims,
        },
    )


def betting_lower(x: np.ndarray, population_size: int, alpha: float, **kw: Any) -> np.ndarray:
    """Anytime-valid lower bounds (:func:`~bayes_eval.sequential._confseq.betting_lower_bound`)."""
    from ._confseq import betting_lower_bound

    return betting_lower_bound(x, population_size, alpha, **kw)
