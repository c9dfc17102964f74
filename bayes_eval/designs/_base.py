"""Design state, registry and the shared allocation kernels of the sampling designs.

The baseline designs (``"random"``, ``"proportional"``, ``"equal"``) live here too; see
:mod:`bayes_eval.designs` for the list of designs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .._validation import check_nonnegative_int, check_option
from ..metrics import METRICS


@dataclass(frozen=True, slots=True)
class DesignState:
    """What a design may look at when allocating a batch.

    Attributes
    ----------
    sizes : ndarray of int64, (K,)
        Stratum sizes ``N_k``.
    predicted : ndarray of bool, (K,)
        Predicted class per stratum.
    n, h : ndarray of int64, (K,)
        Labels recorded and positives among them, per stratum.
    available : ndarray of int64, (K,)
        Items not yet proposed, per stratum.
    prior_a, prior_b : ndarray of float64, (K,)
        Beta prior of each stratum's positive rate: the design allocates by
        ``Beta(prior_a + h, prior_b + n - h)`` (:func:`bayes_eval.models.design_prior`; for the
        pooled model pseudo-counts that may be negative, the Beta they form is proper).
    metric : str
        Target metric name (a key of :data:`bayes_eval.metrics.METRICS`).
    round : int
        Number of batches proposed before this one.
    score_mean : ndarray of float64, (K,) or None
        Mean score per stratum (for score-informed designs).
    finite_population : bool
    memory : dict of str to ndarray, or None
        What a design remembers between the batches of one audit (e.g. OPT-A1's frozen eq.-3
        estimates), owned by the engine: one dict per audit, made empty when the audit starts
        (in lock-step, one dict for the ``R`` audits whose entries are ``(R, ...)`` arrays). A
        design reads and writes it and keeps nothing on itself, so one design object may serve
        many audits. ``None``: nothing is remembered (each call starts afresh).
    """

    sizes: np.ndarray
    predicted: np.ndarray
    n: np.ndarray
    h: np.ndarray
    available: np.ndarray
    prior_a: np.ndarray
    prior_b: np.ndarray
    metric: str = "f1"
    round: int = 0
    score_mean: np.ndarray | None = None
    finite_population: bool = True
    memory: dict[str, np.ndarray] | None = field(default=None, compare=False)


class Design(Protocol):
    """A sequential design."""

    name: str

    def allocate(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray: ...


#: name -> factory(**options) -> Design
DESIGNS: dict[str, Callable[..., Design]] = {}


def register_design(name: str) -> Callable[[Callable[..., Design]], Callable[..., Design]]:
    """Decorator registering a design factory under ``name``."""

    def deco(factory: Callable[..., Design]) -> Callable[..., Design]:
        DESIGNS[name] = factory
        return factory

    return deco


def make_design(name: str | Design, **options: Any) -> Design:
    """Build a registered design by name (or pass a design object through)."""
    if not isinstance(name, str):
        if hasattr(name, "allocate"):
            return name
        raise TypeError(f"design={name!r} must be a design name or an object with .allocate")
    check_option(name, "design", tuple(DESIGNS))
    return DESIGNS[name](**options)


def largest_remainder(weights: np.ndarray, total: int, cap: np.ndarray) -> np.ndarray:
    """Integers proportional to ``weights`` summing to ``total`` and not exceeding ``cap``.

    Hamilton's largest-remainder rounding, repeated on the strata below their cap when a cap
    binds (so the result is as close to proportional as the caps allow).
    """
    total = check_nonnegative_int(total, "n")
    cap = np.asarray(cap, dtype=np.int64)
    if total > int(cap.sum()):
        raise ValueError(
            f"n={total} is more than the {int(cap.sum())} items available in the strata"
        )
    w = np.where(cap > 0, np.clip(np.asarray(weights, dtype=np.float64), 0.0, None), 0.0)
    out = np.zeros(cap.shape[0], dtype=np.int64)
    left = total
    while left > 0:
        free = out < cap
        wf = np.where(free, w, 0.0)
        if wf.sum() <= 0:  # no weight left on strata with room: spread evenly
            wf = free.astype(np.float64)
        quota = left * wf / wf.sum()
        base = np.minimum(np.floor(quota).astype(np.int64), cap - out)
        rem = left - int(base.sum())
        frac = np.where(free & (out + base < cap), quota - np.floor(quota), -1.0)
        order = np.argsort(-frac, kind="stable")
        extra = np.zeros_like(out)
        for i in order[:rem]:
            if frac[i] < 0:
                break
            extra[i] = 1
        step = base + extra
        if step.sum() == 0:  # all quotas rounded to zero: give one to the largest weights
            i = int(np.argmax(np.where(free, wf, -1.0)))
            step[i] = 1
        out += step
        left -= int(step.sum())
    return out


class _Random:
    """Simple random sampling over the whole population: multivariate hypergeometric split of
    the batch over the strata's unproposed items."""

    name = "random"

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        avail = np.asarray(state.available, dtype=np.int64)
        if batch_size > avail.sum():
            raise ValueError(
                f"batch_size={batch_size} is more than the {int(avail.sum())} items left"
            )
        return rng.multivariate_hypergeometric(avail, batch_size).astype(np.int64)


class _Proportional:
    """Each batch split proportionally to ``N_k`` (largest remainder, capped)."""

    name = "proportional"

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        """:meth:`allocate` for ``R`` audits at once (``state.n`` of shape (R, K))."""
        n, _, avail, _ = _as_many(state)
        sizes = np.asarray(state.sizes, dtype=np.float64)
        target = (n.sum(axis=1, keepdims=True) + batch_size) * sizes / sizes.sum()
        return _lr_many(np.clip(target - n, 0, None), batch_size, avail)

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        batch_size = _check_batch(state, batch_size)
        # aim at proportional *cumulative* allocation so that rounding does not drift
        target = (state.n.sum() + batch_size) * state.sizes / state.sizes.sum()
        need = np.clip(target - state.n, 0, None)
        return largest_remainder(need, batch_size, state.available)


class _Equal:
    """Each batch split equally over strata (cumulatively balanced, capped)."""

    name = "equal"

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        """:meth:`allocate` for ``R`` audits at once (``state.n`` of shape (R, K))."""
        n, _, avail, _ = _as_many(state)
        k = n.shape[1]
        target = (n.sum(axis=1, keepdims=True) + batch_size) / k
        return _lr_many(np.clip(target - n, 0, None), batch_size, avail)

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        batch_size = _check_batch(state, batch_size)
        k = state.sizes.shape[0]
        target = np.full(k, (state.n.sum() + batch_size) / k)
        need = np.clip(target - state.n, 0, None)
        return largest_remainder(need, batch_size, state.available)


# ====================================================================== helpers
def stratum_sd(rates: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    r"""Population standard deviation of a 0/1 variable in each stratum.

    :math:`S_k = \sqrt{\frac{N_k}{N_k - 1} p_k (1 - p_k)}` (Kumar & Raj, Lemma 1), 0 when
    :math:`N_k = 1`.
    """
    rates = np.asarray(rates, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    factor = np.divide(sizes, sizes - 1.0, out=np.zeros_like(sizes), where=sizes > 1)
    return np.sqrt(factor * rates * (1.0 - rates))


def metric_gradient(
    metric: str, sizes: np.ndarray, predicted: np.ndarray, positives: np.ndarray
) -> np.ndarray:
    r"""Derivative of a metric with respect to each stratum's count of positives.

    With :math:`P_k` positives in stratum k, :math:`TP = \sum_{\hat y_k = 1} P_k`,
    :math:`FP = N_+ - TP`, :math:`FN = \sum_{\hat y_k = 0} P_k`, :math:`TN = N_- - FN`, so
    :math:`\partial g / \partial P_k = g_{TP} - g_{FP}` on predicted-positive strata and
    :math:`g_{FN} - g_{TN}` on predicted-negative ones. Both are central differences of the
    registered metric function (any entry of :data:`~bayes_eval.metrics.METRICS`) at the given
    ``positives`` (shape ``(..., K)``); undefined values count as 0.
    """
    func = METRICS[metric].func
    sizes = np.asarray(sizes, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=bool)
    pos = np.asarray(positives, dtype=np.float64)
    tp = pos[..., predicted].sum(axis=-1)
    fn = pos[..., ~predicted].sum(axis=-1)
    fp = sizes[predicted].sum() - tp
    tn = sizes[~predicted].sum() - fn
    eps = 1e-6 * max(float(sizes.sum()), 1.0)
    with np.errstate(all="ignore"):
        d_pos = (func(tp + eps, fp - eps, fn, tn) - func(tp - eps, fp + eps, fn, tn)) / (2 * eps)
        d_neg = (func(tp, fp, fn + eps, tn - eps) - func(tp, fp, fn - eps, tn + eps)) / (2 * eps)
    d_pos = np.nan_to_num(np.asarray(d_pos, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    d_neg = np.nan_to_num(np.asarray(d_neg, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    return np.where(predicted, d_pos[..., None], d_neg[..., None])


def _check_batch(state: DesignState, batch_size: int) -> int:
    batch_size = check_nonnegative_int(batch_size, "batch_size")
    avail = np.asarray(state.available, dtype=np.int64)
    left = avail.sum(axis=-1)
    if np.any(batch_size > left):
        raise ValueError(
            f"batch_size={batch_size} is more than the {int(np.min(left))} unproposed items "
            f"left; allowed: 0..{int(np.min(left))}"
        )
    return batch_size


def _as_many(state: DesignState) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    n = np.asarray(state.n, dtype=np.int64)
    h = np.asarray(state.h, dtype=np.int64)
    avail = np.asarray(state.available, dtype=np.int64)
    single = n.ndim == 1
    return np.atleast_2d(n), np.atleast_2d(h), np.atleast_2d(avail), single


def _lr_many(weights: np.ndarray, total: Any, cap: np.ndarray) -> np.ndarray:
    """:func:`largest_remainder` applied to every row of ``weights`` and ``cap`` (R, K) at once.

    Same rounds as the one-row version: quotas of the labels left over the strata with room,
    floors, then one extra label to the largest remainders (ties to the lower index), until
    every row has its ``total``.
    """
    cap = np.asarray(cap, dtype=np.int64)
    w = np.where(cap > 0, np.clip(np.asarray(weights, dtype=np.float64), 0.0, None), 0.0)
    r, k = cap.shape
    out = np.zeros((r, k), dtype=np.int64)
    left = np.broadcast_to(np.asarray(total, dtype=np.int64), (r,)).copy()
    if np.any(cap.sum(axis=1) < left):
        raise ValueError(f"n={total} is more than the items available in the strata")
    idx = np.arange(k)
    while np.any(left > 0):
        free = out < cap
        wf = np.where(free, w, 0.0)
        tot = wf.sum(axis=1, keepdims=True)
        wf = np.where(tot > 0, wf, free.astype(np.float64))
        den = wf.sum(axis=1, keepdims=True)
        quota = np.clip(left, 0, None)[:, None] * wf / np.where(den > 0, den, 1.0)
        fl = np.floor(quota)
        base = np.minimum(fl.astype(np.int64), cap - out)
        rem = left - base.sum(axis=1)
        frac = np.where(free & (out + base < cap), quota - fl, -1.0)
        order = np.lexsort((np.broadcast_to(idx, (r, k)), -frac), axis=-1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.broadcast_to(idx, (r, k)), axis=-1)
        extra = ((rank < rem[:, None]) & (frac >= 0)).astype(np.int64)
        step = base + extra
        stuck = step.sum(axis=1) == 0
        if np.any(stuck & (left > 0)):
            j = np.argmax(np.where(free, wf, -1.0), axis=1)
            rows = np.flatnonzero(stuck & (left > 0))
            step[rows, j[rows]] = 1
        step[left <= 0] = 0
        out += step
        left -= step.sum(axis=1)
    return out


def _multinomial_capped(
    weights: np.ndarray, total: int, cap: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Multinomial split of ``total`` with probabilities ∝ ``weights`` (rows), never above ``cap``.

    Draws beyond a stratum's cap are drawn again among the strata with room (same weights,
    renormalised; uniform over them when those weights are all 0).
    """
    out = np.zeros(cap.shape, dtype=np.int64)
    left = np.full(cap.shape[0], total, dtype=np.int64)
    while np.any(left > 0):
        room = out < cap
        w = np.where(room, np.clip(weights, 0.0, None), 0.0)
        tot = w.sum(axis=1, keepdims=True)
        w = np.where(tot > 0, w, room.astype(np.float64))
        p = w / w.sum(axis=1, keepdims=True)
        draw = rng.multinomial(left, p)
        new = np.minimum(out + draw, cap)
        left = left - (new - out).sum(axis=1)
        out = new
    return out


class _ManyDesign(ABC):
    """Base class: ``allocate`` is ``allocate_many`` on one audit."""

    name = "base"

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        batch_size = _check_batch(state, batch_size)
        out = self.allocate_many(state, batch_size, rng)
        return out[0] if np.asarray(state.n).ndim == 1 else out

    @abstractmethod
    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        """The design's rule for ``R`` audits at once (state arrays of shape ``(R, K)``)."""

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"make_design({self.name!r}{', ' if opts else ''}{opts})"

    def options(self) -> dict[str, Any]:
        """The options this design was made with."""
        return {}


def _relevant(state: DesignState, positives: np.ndarray) -> np.ndarray:
    """Strata whose positives move the target metric (gradient != 0), shape (R, K)."""
    g = metric_gradient(state.metric, state.sizes, state.predicted, positives)
    rel = g != 0
    # a metric flat everywhere (degenerate population): every stratum counts
    return np.where(rel.any(axis=-1, keepdims=True), rel, True)
