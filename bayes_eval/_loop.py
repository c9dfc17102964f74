"""The one batch engine: batch plans, checked allocations, label draws, lock-step audits.

Every labelling loop of the package — :meth:`bayes_eval.Audit.run` (one real audit),
:func:`bayes_eval.simulate` (many simulated audits against known labels) and
:func:`bayes_eval.sequential.calibrate_sequential` (many simulated audits under a truth at the
target) — is the same loop:

1. the *batch plan* says how many labels the next batch has (``batch_size``, or the design's own
   ``batch_schedule(round, K)``: Bennett & Carvalho's :math:`D_0` then :math:`D`, Kumar & Raj's
   initial sample then ``n_step``) and after which batches the audit looks;
2. the design splits the batch over the strata (:func:`allocate`, checked once here for one
   audit, shape ``(K,)``, and for ``R`` audits in lock-step, shape ``(R, K)``);
3. the items are labelled. A real audit draws items (hash-keyed, :mod:`bayes_eval._sampler`); a
   simulated one needs only the number of positives among the ``c_k`` items drawn without
   replacement from stratum ``k``, which is hypergeometric,

   .. math:: \\Delta h_k \\sim \\mathrm{Hypergeometric}(P_k - h_k,\\;
             (N_k - P_k) - (n_k - h_k),\\; c_k)

   (:meth:`LockStep.label`);
4. the caller looks (posterior, stop rule, acceptance probability).

This module owns steps 1–3 so that a change to the loop (a new schedule, a new kind of design)
is made once. Designs see the audit only through :func:`design_state`.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1, batch schedule);
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (Algorithms 1 and 2).
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ._validation import check_positive_int
from .designs import Design, DesignState

__all__ = [
    "BatchPlan",
    "LockStep",
    "LockStepAllocator",
    "allocate",
    "design_name",
    "design_state",
    "scheduled_batch",
]


def design_name(design: Design) -> str:
    """The name a design is reported under."""
    return str(getattr(design, "name", type(design).__name__))


def scheduled_batch(design: Design, round: int, n_strata: int, batch_size: int | None) -> int:
    """Size of batch ``round``: ``design.batch_schedule(round, K)`` when the design has one (a
    schedule is part of the design as published, so it overrides ``batch_size``), else
    ``batch_size``.

    Raises
    ------
    TypeError
        ``batch_size`` is None and the design has no schedule.
    RuntimeError
        The schedule returned something other than a positive int.
    """
    schedule = getattr(design, "batch_schedule", None)
    if schedule is None:
        if batch_size is None:
            raise TypeError(
                f"batch_size=None is not allowed: design {design_name(design)!r} has no "
                "batch_schedule, so a positive int batch_size is needed"
            )
        return int(batch_size)
    m = schedule(round, n_strata)
    if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1:
        raise RuntimeError(
            f"design {design_name(design)!r} returned batch size {m!r} for round {round}; a "
            "batch_schedule must return a positive int"
        )
    return int(m)


def steady_batch_size(design: Design, n_strata: int, batch_size: int | None) -> int | None:
    """The batch size stop rules read: the schedule's size after the first round, if any."""
    if getattr(design, "batch_schedule", None) is None:
        return batch_size
    return scheduled_batch(design, 1, n_strata, batch_size)


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Batch sizes of one audit and the label counts at which it looks.

    Attributes
    ----------
    batches : tuple of int
        Labels in each batch, in order (the last one cut to the budget).
    looks : ndarray of int64
        Labels at each look, increasing; every look is the end of a batch.
    steady : int
        The batch size stop rules read (a schedule's size after its first round).
    """

    batches: tuple[int, ...]
    looks: np.ndarray
    steady: int

    @classmethod
    def build(
        cls,
        design: Design,
        *,
        batch_size: Any,
        budget: Any,
        total: int,
        n_strata: int,
        looks: Any = None,
        strict_budget: bool = False,
    ) -> BatchPlan:
        """The plan of an audit that spends ``budget`` labels (at most the ``total`` items).

        Without ``looks`` the audit looks after every batch. Given ``looks`` (increasing label
        counts, at most the budget), each one is taken at the end of the batch that reaches it
        (looks inside one batch coincide); without a design schedule they must be multiples of
        ``batch_size`` or the budget, since a look follows a batch. With ``strict_budget`` a
        budget above ``total`` is an error instead of being capped at ``total``.
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        budget = check_positive_int(budget, "budget")
        if strict_budget and budget > total:
            raise ValueError(
                f"budget={budget} is more than the {total} items of the population; allowed: "
                f"at most {total}"
            )
        cap = min(budget, total)
        has_schedule = getattr(design, "batch_schedule", None) is not None
        if not has_schedule and looks is None and cap < batch_size and strict_budget:
            raise ValueError(f"budget={budget} is smaller than batch_size={batch_size}")
        batches: list[int] = []
        used = 0
        while used < cap:
            m = min(scheduled_batch(design, len(batches), n_strata, batch_size), cap - used)
            batches.append(m)
            used += m
        ends = np.cumsum(batches, dtype=np.int64)
        steady = steady_batch_size(design, n_strata, batch_size) or batch_size
        if looks is None:
            return cls(tuple(batches), ends, int(steady))
        arr = np.asarray(looks)
        if (
            arr.ndim != 1
            or arr.size == 0
            or not np.issubdtype(arr.dtype, np.integer)
            or (np.diff(arr) <= 0).any()
            or arr[0] < 1
        ):
            raise ValueError(
                f"looks={looks!r}; allowed: a non-empty strictly increasing 1-D array of "
                "positive label counts (integers)"
            )
        arr = arr.astype(np.int64)
        if arr[-1] > cap:
            raise ValueError(
                f"looks={looks!r} goes past the budget: its last look is at {int(arr[-1])} "
                f"labels, the budget is {cap}; allowed: looks at most the budget"
            )
        if not has_schedule and ((arr % batch_size != 0) & (arr != cap)).any():
            raise ValueError(
                f"looks={looks!r} must be multiples of batch_size={batch_size} or the budget "
                "(labels arrive in batches and a look follows a batch)"
            )
        sched = np.unique(ends[np.searchsorted(ends, arr, side="left")])
        last = int(np.searchsorted(ends, sched[-1])) + 1
        return cls(tuple(batches[:last]), sched, int(steady))

    @property
    def n_batches(self) -> int:
        return len(self.batches)

    def look_after(self) -> np.ndarray:
        """Boolean per batch: whether the audit looks after it."""
        ends = np.cumsum(self.batches, dtype=np.int64)
        return np.isin(ends, self.looks)


def design_state(
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    available: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    metric: str,
    round: int,
    score_mean: np.ndarray | None = None,
    finite_population: bool = True,
    memory: dict[str, np.ndarray] | None = None,
) -> DesignState:
    """The :class:`~bayes_eval.designs.DesignState` of one audit (``n`` of shape ``(K,)``) or of
    ``R`` audits in lock-step (``(R, K)``); counts are copied, so a design cannot change them.
    ``memory`` is the audit's design memory (one dict per audit, kept by the caller across its
    batches; :class:`LockStepAllocator` supplies its own)."""
    return DesignState(
        sizes=np.asarray(sizes, dtype=np.int64),
        predicted=np.asarray(predicted, dtype=bool),
        n=np.array(n, dtype=np.int64),
        h=np.array(h, dtype=np.int64),
        available=np.asarray(available, dtype=np.int64),
        prior_a=np.asarray(prior_a, dtype=np.float64),
        prior_b=np.asarray(prior_b, dtype=np.float64),
        metric=metric,
        round=int(round),
        score_mean=score_mean,
        finite_population=bool(finite_population),
        memory=memory,
    )


def check_allocation(counts: Any, m: int, available: np.ndarray, label: str) -> np.ndarray:
    """Counts of one audit ``(K,)`` or of ``R`` audits ``(R, K)``: non-negative integers
    summing to ``m`` (per audit) and within ``available``; else a RuntimeError naming the
    design and the first audit at fault."""
    c = np.asarray(counts)
    avail = np.asarray(available)
    many = avail.ndim == 2
    if c.shape == avail.shape and np.issubdtype(c.dtype, np.integer):
        c2, a2 = np.atleast_2d(c), np.atleast_2d(avail)
        wrong = (c2.sum(axis=1) != m) | (c2 < 0).any(axis=1) | (c2 > a2).any(axis=1)
        if not wrong.any():
            return c.astype(np.int64, copy=False)
        r = int(np.flatnonzero(wrong)[0])
        got: Any = c2[r].tolist()
    else:
        r, got = 0, f"an array of shape {c.shape} and dtype {c.dtype}"
    where = f" for simulated audit {r}" if many else ""
    raise RuntimeError(
        f"design {label!r} returned an invalid allocation{where}: {got} for a batch of {m} "
        f"(available {np.atleast_2d(avail)[r].tolist()}); allowed: {avail.shape[-1]} "
        "non-negative integers summing to the batch, each at most what is available"
    )


def allocate(design: Design, state: DesignState, m: int, rng: np.random.Generator) -> np.ndarray:
    """``design.allocate(state, m, rng)`` for one audit, checked (:func:`check_allocation`)."""
    counts = design.allocate(state, m, rng)
    return check_allocation(counts, m, state.available, design_name(design))


def _hypergeometric(
    rng: np.random.Generator, good: np.ndarray, bad: np.ndarray, nsample: np.ndarray
) -> np.ndarray:
    out = np.zeros(np.shape(nsample), dtype=np.int64)
    mask = nsample > 0
    if mask.any():
        out[mask] = rng.hypergeometric(good[mask], bad[mask], nsample[mask])
    return out


def random_allocation(rng: np.random.Generator, available: np.ndarray, m: int) -> np.ndarray:
    """Simple random sampling for ``R`` audits at once: a multivariate hypergeometric split of
    ``m`` over the strata's available items, one row per audit (sequential conditionals)."""
    s, k = available.shape
    out = np.zeros((s, k), dtype=np.int64)
    left = np.full(s, m, dtype=np.int64)
    rest = available.sum(axis=1)
    for j in range(k - 1):
        rest = rest - available[:, j]
        out[:, j] = _hypergeometric(rng, available[:, j], rest, left)
        left -= out[:, j]
    out[:, k - 1] = left
    return out


class LockStepAllocator:
    """The design of ``R`` audits that take their batches in lock-step.

    One ``allocate_many`` call on the ``(R, K)`` state when the design has it (and every audit
    shares one prior), one vectorised multivariate hypergeometric draw for ``"random"``, and
    otherwise one ``allocate`` call per audit on its own copy of the design (a user's design
    might still keep state on itself), each with its own generator when ``rngs`` are given.

    The allocator owns the design memory (:attr:`DesignState.memory
    <bayes_eval.designs.DesignState>`) of its audits: one dict for the ``allocate_many`` call
    (entries of shape ``(R, ...)``), else one dict per audit; the memory of the states it is
    given is replaced by it.

    Parameters
    ----------
    design : design object
    n_audits : int
    per_audit : bool
        Force one design copy per audit (e.g. when priors differ between audits).
    vector_random : bool
        Use the vectorised draw for the ``"random"`` design.
    """

    def __init__(
        self, design: Design, n_audits: int, *, per_audit: bool = False, vector_random: bool = True
    ) -> None:
        self.label = design_name(design)
        self.random = vector_random and self.label == "random" and not per_audit
        self.many = None
        self.copies: list[Any] = []
        self.memory: dict[str, np.ndarray] = {}  # of the allocate_many call, (R, ...) entries
        self.memories: list[dict[str, np.ndarray]] = []  # one per audit, with the copies
        if self.random:
            return
        if not per_audit and callable(getattr(design, "allocate_many", None)):
            self.many = copy.deepcopy(design)
        else:
            self.copies = [copy.deepcopy(design) for _ in range(n_audits)]
            self.memories = [{} for _ in range(n_audits)]

    def __call__(
        self,
        state: DesignState,
        m: int,
        rng: np.random.Generator,
        *,
        rows: np.ndarray | None = None,
        rngs: Sequence[np.random.Generator] | None = None,
        states: Sequence[DesignState] | None = None,
    ) -> np.ndarray:
        """Counts ``(len(rows), K)`` for the audits ``rows`` (default all) of ``state``.

        ``state`` holds every audit (``(R, K)``); ``states`` optionally gives the per-audit
        states of ``rows`` (e.g. with their own priors) for designs called one audit at a time.
        """
        avail = np.asarray(state.available)
        rows = np.arange(avail.shape[0]) if rows is None else np.asarray(rows)
        if self.random:
            c = random_allocation(rng, avail[rows], m)
            return check_allocation(c, m, avail[rows], self.label)
        if self.many is not None:
            c = self.many.allocate_many(replace(state, memory=self.memory), m, rng)
            return check_allocation(c, m, avail, self.label)[rows]
        out = np.empty((rows.size, avail.shape[1]), dtype=np.int64)
        for i, r in enumerate(rows.tolist()):
            one = replace(
                states[i]
                if states is not None
                else design_state(
                    sizes=state.sizes,
                    predicted=state.predicted,
                    n=state.n[r],
                    h=state.h[r],
                    available=avail[r],
                    # per-audit priors (R, K) (a model's effective priors) or one shared (K,)
                    prior_a=state.prior_a[r] if np.ndim(state.prior_a) == 2 else state.prior_a,
                    prior_b=state.prior_b[r] if np.ndim(state.prior_b) == 2 else state.prior_b,
                    metric=state.metric,
                    round=state.round,
                    score_mean=state.score_mean,
                    finite_population=state.finite_population,
                ),
                memory=self.memories[r],
            )
            gen = rng if rngs is None else rngs[r]
            out[i] = allocate(self.copies[r], one, m, gen)
        return out


class LockStep:
    """Labels of ``R`` simulated audits of populations whose positives per stratum are known
    (``positives`` of shape ``(K,)`` for one population, ``(R, K)`` for one per audit).

    Attributes
    ----------
    n, h : ndarray of int64, (R, K)
        Labels and positives so far.
    """

    def __init__(self, sizes: np.ndarray, positives: np.ndarray, n_audits: int) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        k = self.sizes.shape[0]
        # one population for every audit (K,), or one per audit (R, K)
        self.positives = np.broadcast_to(np.asarray(positives, dtype=np.int64), (n_audits, k))
        self.n = np.zeros((n_audits, k), dtype=np.int64)
        self.h = np.zeros((n_audits, k), dtype=np.int64)

    @property
    def available(self) -> np.ndarray:
        """Unlabelled items per audit and stratum."""
        return self.sizes[None, :] - self.n

    def label(self, counts: np.ndarray, rng: np.random.Generator, rows: Any = None) -> None:
        """Label ``counts`` (``(len(rows), K)``) items without replacement in every stratum of
        the audits ``rows`` (default all): hypergeometric positives (module docstring)."""
        rows = slice(None) if rows is None else rows
        good = self.positives[rows] - self.h[rows]
        bad = (self.sizes[None, :] - self.positives[rows]) - (self.n[rows] - self.h[rows])
        self.h[rows] += _hypergeometric(rng, good, bad, counts)
        self.n[rows] += counts
