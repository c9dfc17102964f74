"""Sequential sampling designs: how many of the next batch of labels go to each stratum.

A design is an object with ``name`` and ``allocate(state, batch_size, rng) -> counts``: integer
labels per stratum for the next batch, summing to ``batch_size`` exactly and never exceeding
``state.available`` (items of the stratum not yet proposed). The audit then draws that many items
uniformly without replacement inside each stratum. Designs are pure functions of the state and the
generator, which makes audits reproducible from their seed.

Designs are registered in :data:`DESIGNS` and built by :func:`make_design`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ._validation import check_nonnegative_int, check_option

__all__ = ["DESIGNS", "Design", "DesignState", "make_design", "register_design"]


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
        Beta prior of each stratum's positive rate.
    metric : str
        Target metric name (a key of :data:`bayes_eval.metrics.METRICS`).
    round : int
        Number of batches proposed before this one.
    score_mean : ndarray of float64, (K,) or None
        Mean score per stratum (for score-informed designs).
    finite_population : bool
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

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        # aim at proportional *cumulative* allocation so that rounding does not drift
        target = (state.n.sum() + batch_size) * state.sizes / state.sizes.sum()
        need = np.clip(target - state.n, 0, None)
        return largest_remainder(need, batch_size, state.available)


class _Equal:
    """Each batch split equally over strata (cumulatively balanced, capped)."""

    name = "equal"

    def allocate(self, state: DesignState, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        k = state.sizes.shape[0]
        target = np.full(k, (state.n.sum() + batch_size) / k)
        need = np.clip(target - state.n, 0, None)
        return largest_remainder(need, batch_size, state.available)


register_design("random")(lambda **kw: _Random())
register_design("proportional")(lambda **kw: _Proportional())
register_design("equal")(lambda **kw: _Equal())
