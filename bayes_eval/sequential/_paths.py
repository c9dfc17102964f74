"""Simulated audit paths: ``P(metric >= target)`` at every look of many audits of many truths.

The audits of every truth run in lock-step on the one batch engine (:mod:`bayes_eval._loop`):
the rows of one :class:`~bayes_eval._loop.LockStep` are ``n_sims`` audits of each truth, so a
design with ``allocate_many`` is called once per batch for all of them.

**The model that is run.** The acceptance probability at a look is the posterior probability of
the model the audit runs:

* ``"independent"`` — exactly the stratified beta-binomial posterior, by the Pearson type III
  approximation of :func:`~bayes_eval.sequential.prob_linear_ge` (the audit uses Monte Carlo
  draws of the same posterior);
* ``"pooled"`` and ``"hierarchical"`` — a *look model*: after the first batch, whenever the
  labels have doubled since the last refit (:data:`REFIT_GROWTH`), and at the last look
  the model's per-stratum marginal posterior is matched by Betas
  (:func:`bayes_eval.models.design_prior`, the same mechanism that feeds the designs), and
  between refits those effective priors are updated conjugately by the new labels. This keeps
  the model's borrowing of strength (what makes it accept early) but drops the dependence of
  the strata through the shared hyperparameters in the tail probability; the pooled fit costs
  milliseconds per audit, so refitting at every look of thousands of simulated audits is out of
  reach. ``Correction.look_model`` records which was used.

The design sees the same per-audit Beta priors as the probability (as in
:func:`bayes_eval.simulate`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._loop import LockStep, LockStepAllocator, design_state
from .._validation import RNGLike, as_generator
from ..models import design_prior
from ._linear import linear_form, prob_linear_ge

__all__ = ["LOOK_MODELS", "look_model_of", "simulate_paths"]

#: how each model's acceptance probability is simulated
LOOK_MODELS: dict[str, str] = {
    "independent": "exact (beta-binomial, Pearson III)",
    "pooled": "moment-matched marginal Betas refitted when labels grow 2x",
    "hierarchical": "empirical-Bayes Betas refitted when labels grow 2x",
}

#: labels growth between refits of a look model
REFIT_GROWTH = 2.0


def look_model_of(model: str) -> str:
    """Description of how ``model`` is simulated (:data:`LOOK_MODELS`)."""
    return LOOK_MODELS.get(model, "moment-matched marginal Betas refitted when labels grow 2x")


def _effective_prior(
    model: str,
    strata: Any,
    n: np.ndarray,
    h: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    score_mean: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row Beta priors ``(R, K)`` whose conjugate update is the model's marginal posterior."""
    k = n.shape[1]
    # audits with the same counts have the same posterior: fit each distinct row once
    rows, inverse = np.unique(np.concatenate([n, h], axis=1), axis=0, return_inverse=True)
    un, uh = rows[:, :k], rows[:, k:]
    if model == "pooled":
        ua, ub = design_prior(model, strata, un, uh, a, b, score_mean)
    else:
        ua, ub = np.empty(un.shape), np.empty(un.shape)
        for r in range(un.shape[0]):
            ua[r], ub[r] = design_prior(model, strata, un[r], uh[r], a, b, score_mean)
    inverse = np.asarray(inverse).reshape(-1)
    return np.asarray(ua)[inverse], np.asarray(ub)[inverse]


def simulate_paths(
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    positives: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    metric: str,
    target: float,
    design: Any,
    batches: list[int],
    schedule: np.ndarray,
    finite_population: bool,
    n_sims: int,
    rng: RNGLike,
    model: str = "independent",
    strata: Any = None,
    score_mean: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """``P(metric >= target)`` at each look of ``n_sims`` audits of each truth: ``(T, S, J)``.

    ``positives`` has shape ``(T, K)`` (one row per truth) or ``(K,)``; ``batches`` are the
    batch sizes and ``schedule`` the label counts at the looks (ends of batches). ``progress``
    is called with ``(done, total)`` simulated audit-batches after every batch.
    """
    rng = as_generator(rng)
    pos = np.atleast_2d(np.asarray(positives, dtype=np.int64))
    n_truths = pos.shape[0]
    rows = n_truths * n_sims
    w, c = linear_form(metric, target, predicted, sizes)
    out = np.empty((rows, schedule.shape[0]), dtype=np.float64)
    look_set = {int(v): j for j, v in enumerate(schedule)}
    a = np.asarray(prior_a, dtype=np.float64)
    b = np.asarray(prior_b, dtype=np.float64)
    audits = LockStep(sizes, np.repeat(pos, n_sims, axis=0), rows)
    allocator = LockStepAllocator(design, rows)
    exact = model == "independent"
    k = a.shape[0]
    if exact:
        eff_a, eff_b = a, b
    else:  # the model's prior before any label, for the first batch's design
        zero = np.zeros(k, dtype=np.int64)
        a0, b0 = design_prior(model, strata, zero, zero, a, b, score_mean)
        eff_a = np.broadcast_to(np.asarray(a0, dtype=np.float64), (rows, k))
        eff_b = np.broadcast_to(np.asarray(b0, dtype=np.float64), (rows, k))
    refit_at = 0.0  # the first batch always refits
    labelled = 0
    total = len(batches) * rows
    for rnd, m in enumerate(batches):
        state = design_state(
            sizes=sizes,
            predicted=predicted,
            n=audits.n,
            h=audits.h,
            available=audits.available,
            prior_a=eff_a,
            prior_b=eff_b,
            metric=metric,
            round=rnd,
            score_mean=score_mean,
            finite_population=finite_population,
        )
        audits.label(allocator(state, m, rng), rng)
        labelled += m
        j = look_set.get(labelled)
        last = j is not None and j == schedule.shape[0] - 1
        if not exact and (labelled >= REFIT_GROWTH * refit_at or last):
            eff_a, eff_b = _effective_prior(model, strata, audits.n, audits.h, a, b, score_mean)
            refit_at = float(labelled)
        if j is not None:
            out[:, j] = prob_linear_ge(
                audits.n,
                audits.h,
                eff_a,
                eff_b,
                sizes,
                w,
                c,
                finite_population,
            )
        if progress is not None:
            progress((rnd + 1) * rows, total)
    return out.reshape(n_truths, n_sims, schedule.shape[0])


def first_crossing(prob: np.ndarray, boundary: np.ndarray) -> np.ndarray:
    """Index of the first look with ``prob >= boundary`` per path (``J`` if none); ``prob`` is
    ``(..., J)`` and ``boundary`` ``(J,)``."""
    hit = prob >= boundary
    jj = prob.shape[-1]
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1), jj)
