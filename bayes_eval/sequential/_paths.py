r"""Simulated audit paths: ``P(metric >= target)`` at every look of many audits of many truths.

The audits of every truth run in lock-step on the one batch engine (:mod:`bayes_eval._loop`):
the rows of one :class:`~bayes_eval._loop.LockStep` are ``n_sims`` audits of each truth, so a
design with ``allocate_many`` is called once per batch for all of them.

**The model that is run.** The acceptance probability at a look is the posterior probability of
the model the audit runs:

* ``"independent"`` — exactly the stratified beta-binomial posterior, by the Pearson type III
  approximation of :func:`~bayes_eval.sequential.prob_linear_ge` for the strata with many
  unlabelled items and exactly on the integer lattice for those with at most
  :data:`~bayes_eval._lattice.LATTICE_REMAINDER` (calibration version 17: near a census the
  continuous law was off by up to ~0.17; the audit uses Monte Carlo draws of the same posterior);
* ``"pooled"`` and ``"hierarchical"`` — a *look model*: after the first batch, whenever the
  labels have grown by :data:`REFIT_GROWTH` since the last refit, and at the last look the
  model is refitted and its per-stratum marginal posteriors are matched by Betas
  (pooled: :func:`bayes_eval.models._look.look_refit` — the numbers of
  :func:`bayes_eval.models.marginal_prior`, the design being given the allocation Betas of
  :func:`bayes_eval.models.design_prior` from the same fit, formed without keeping the fit's
  per-node Betas; hierarchical: its empirical-Bayes priors, which the design is given too); between
  refits those effective priors are updated conjugately by the new labels (the pooled fit
  costs milliseconds per audit, so refitting at every look of thousands of simulated audits is
  out of reach).
* ``"pooled"`` also keeps the **dependence** of the strata through the shared curve: at a
  refit the exact first three cumulants of the metric's linear form
  :math:`L = \sum_k w_k P_k` under the fitted posterior
  (:meth:`bayes_eval.models.pooled.LinearFormNodes.mixture`) are compared with those of the
  independent Betas at the same counts, and until the next refit the Betas' cumulants are
  corrected by them: the variance multiplied by :math:`r = V_{exact} / V_{Betas}`, the mean
  shifted and the third cumulant scaled by :math:`r^{3/2}` plus the difference at the refit.
  At a refit look the probability is the posterior's own (the hyper-nodes' Pearson type III
  probabilities averaged, :func:`bayes_eval.models.pooled.prob_linear_ge`). Measured
  (session 6, flat-within-side scores, F1 at the truth, ``posterior_variance``): independent
  Betas over-accept at a look by 3-6 points (e.g. 13.5 % vs 8.5 % of audits with
  ``P >= 0.95`` at 160 labels); the corrected look model matches the posterior at refits and
  within 1-2 points between them (``tests/test_worst_case.py``).
* ``"pooled"``, where the budget can bring a stratum within
  :data:`~bayes_eval._lattice.LATTICE_REMAINDER` items of a census (the needle regime's
  predicted positives): each refit also keeps 64 resampled hyper-nodes with those strata's Betas
  (:mod:`bayes_eval.models._node_sample`), and wherever the other strata do not smooth the
  lattice out the probability sums them exactly at every node (calibration version 17;
  ``tests/test_lattice.py``: within 0.0006-0.0085 of the audit's draws per look on a needle,
  0.026 at the stalest look, where the continuous nodes were 0.0085-0.029 off); since version
  19 also the strata of those whose remaining positives are concentrated near 0 at a node
  (:func:`bayes_eval._lattice.concentrated_strata`), as the independent model does since 18.
``Correction.look_model`` records which was used.

**The audit's Monte Carlo.** An audit decides on ``P`` estimated from its posterior draws
(``Audit(draws=)``, 40,000 by default), so near a boundary of 0.99 the draws' binomial noise
adds crossings; given ``draws`` the simulation adds that noise at every look (the sequential
correction passes the procedure's draws).

The design is given what an audit's design is given (:func:`bayes_eval.models.design_prior`;
for the pooled model the allocation rates of the last refit at the current counts), as in
:func:`bayes_eval.simulate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _lattice
from .._cumulants import prob_at_least
from .._lattice import lattice_damping, lattice_rows
from .._loop import BatchPlan, LockStep, LockStepAllocator, design_state
from .._protocols import StrataLike
from .._validation import RNGLike, as_generator, check_positive_int
from ..designs import make_design
from ..models import allocation_prior, design_prior
from ..models._linear_form import LinearFormNodes
from ..models._look_pool import RefitChunk, RefitPool, concat_fits, concat_samples
from ..models._node_sample import NodeSample
from ..priors import Prior
from ._linear import beta_form_cumulants, linear_form, prob_linear_ge

__all__ = [
    "LOOK_MODELS",
    "PathSetup",
    "check_calibration_args",
    "look_model_of",
    "named_design",
    "simulate_paths",
    "strict_plan",
]

#: fewest simulated audits (per truth) a calibration accepts
MIN_SIMS = 100

#: how each model's acceptance probability is simulated
LOOK_MODELS: dict[str, str] = {
    "independent": (
        "exact (beta-binomial, Pearson III; strata with at most 256 unlabelled items summed on "
        "the integer lattice)"
    ),
    "pooled": (
        "moment-matched marginal Betas refitted when labels grow 1.41x, with the exact cumulants "
        "of the metric's linear form at each refit (strata dependence kept; strata near a census "
        "summed exactly at 64 resampled hyper-nodes)"
    ),
    "hierarchical": "empirical-Bayes Betas refitted when labels grow 1.41x",
}

#: labels growth between refits of a look model. Measured against the real, draw-based procedure
#: (``benchmarks/bench_procedure_check.py``, pooled, 300 audits at each of the calibration's three
#: worst truths): with 2 the dependence-keeping look model predicted 35.6 false accepts where
#: the procedure made 59 (compressed 8.3 % +- 1.6 % against 4.6 %: the Betas go stale between
#: refits, and so do the design's inputs); with sqrt(2) it predicts 38.4 where the procedure
#: made 37 (4.3-5.0 % against 3.7-4.6 %), for 1.5x the calibration time.
REFIT_GROWTH = 2.0**0.5

#: distinct count rows a pooled look-model refit fits at once. A fit keeps every row's
#: conditional Betas at every hyper-node and quadrature node (512 x 5 x K values twice, ~0.7 MB
#: a row at 10 strata), so fitting a calibration's 7,000 simulated audits in one call held
#: ~5 GB (and the certification benchmark's 24,000 ~10 GB); in chunks only their summaries are
#: kept (rows are fitted independently: the same numbers)
REFIT_CHUNK = 256


def strict_plan(
    design: Any, batch_size: Any, budget: Any, looks: Any, total: int, n_strata: int
) -> BatchPlan:
    """Batch sizes of one simulated audit of ``total`` items in ``n_strata`` strata and the
    label counts at which it looks (:meth:`bayes_eval._loop.BatchPlan.build`; a budget above
    the population is an error)."""
    return BatchPlan.build(
        design,
        batch_size=batch_size,
        budget=budget,
        total=total,
        n_strata=n_strata,
        looks=looks,
        strict_budget=True,
    )


def check_calibration_args(n_sims: Any, progress: Any, purpose: str) -> int:
    """``n_sims`` (an int, at least :data:`MIN_SIMS`) of a calibration, checked with its
    ``progress`` callback; errors name the argument and what is allowed."""
    n_sims = check_positive_int(n_sims, "n_sims")
    if n_sims < MIN_SIMS:
        raise ValueError(f"n_sims={n_sims} is too few{purpose}; allowed: >= {MIN_SIMS}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress={progress!r}; allowed: a callable (done, total) or None")
    return n_sims


def named_design(design: Any, design_options: dict[str, Any] | None) -> tuple[Any, str]:
    """The design object (:func:`~bayes_eval.designs.make_design`) and the name it is reported
    by (the registered name, else the object's ``name``, else ``"custom"``)."""
    dsg = make_design(design, **(design_options or {}))
    return dsg, design if isinstance(design, str) else getattr(dsg, "name", "custom")


@dataclass(frozen=True, slots=True)
class PathSetup:
    """The procedure a calibration simulates, fixed before any truth is chosen.

    :meth:`simulate` runs it (:func:`simulate_paths`) at any truths; the calibrations at one
    truth (:func:`~bayes_eval.sequential.calibrate_sequential`) and at a family of truths
    (:func:`~bayes_eval.sequential.calibrate_worst_case`) share it.

    Attributes
    ----------
    sizes : ndarray of int64, (K,)
    predicted : ndarray of bool, (K,)
    metric : str
    target : float
    design : design object
    plan : BatchPlan
        Batch sizes and looks (:func:`strict_plan`).
    prior : Prior
    finite_population : bool
    model : str
    strata : Strata or None
        Needed by a model other than ``"independent"``.
    score_mean : ndarray of float64, (K,) or None
    draws : int or None
        Monte Carlo draws the audit's decision at a look is computed from (the procedure's
        ``draws``): each simulated ``P`` gets the binomial noise of that many draws; ``None``
        simulates the exact probability.
    """

    sizes: np.ndarray
    predicted: np.ndarray
    metric: str
    target: float
    design: Any
    plan: BatchPlan
    prior: Prior
    finite_population: bool = True
    model: str = "independent"
    strata: StrataLike | None = None
    score_mean: np.ndarray | None = None
    draws: int | None = None

    @property
    def looks(self) -> np.ndarray:
        """Label counts at the looks."""
        return self.plan.looks

    def simulate(
        self,
        positives: np.ndarray,
        n_sims: int,
        rng: RNGLike,
        progress: Callable[[int, int], None] | None = None,
        pool: RefitPool | None = None,
    ) -> np.ndarray:
        """``P(metric >= target)`` at each look of ``n_sims`` audits of each truth ``positives``
        (``(T, K)`` or ``(K,)``): ``(T, S, J)`` (:func:`simulate_paths`; ``pool`` fits the
        pooled look model's refits)."""
        return simulate_paths(
            sizes=self.sizes,
            predicted=self.predicted,
            positives=positives,
            prior_a=self.prior.a,
            prior_b=self.prior.b,
            metric=self.metric,
            target=self.target,
            design=self.design,
            batches=list(self.plan.batches),
            schedule=self.plan.looks,
            finite_population=bool(self.finite_population),
            n_sims=n_sims,
            rng=rng,
            model=self.model,
            strata=self.strata,
            score_mean=self.score_mean,
            progress=progress,
            draws=self.draws,
            pool=pool,
        )


def look_model_of(model: str) -> str:
    """Description of how ``model`` is simulated (:data:`LOOK_MODELS`)."""
    return LOOK_MODELS.get(model, "moment-matched marginal Betas refitted when labels grow 1.41x")


@dataclass(frozen=True, slots=True)
class _Refit:
    """One refit of a look model: every row's effective Beta priors ``a, b`` ``(R, K)`` (their
    conjugate update is the look model's marginal posterior; the hierarchical model's design is
    given them too), the pooled model's allocation rates
    (:func:`~bayes_eval.models.allocation_rate`: its design is given
    :func:`~bayes_eval.models.allocation_prior` of them at the current counts, as a refitted audit
    would be, not their conjugate update), its hyper-mode (pooled; the next refit's warm start)
    and the metric's linear form's cumulants at every hyper-node of the model's posterior
    (pooled, a :class:`~bayes_eval.models.pooled.LinearFormNodes`; else ``None``), and for the
    strata that may come near a census the resampled hyper-nodes (pooled, a
    :class:`~bayes_eval.models._node_sample.NodeSample`; else ``None``)."""

    a: np.ndarray
    b: np.ndarray
    design_rate: np.ndarray | None = None  # pooled: the allocation rates (R, K)
    mode: np.ndarray | None = None
    exact: LinearFormNodes | None = None  # pooled: rows (R, S)
    sample: NodeSample | None = None  # pooled, given census strata: rows (R, M)


def _effective_prior(
    model: str,
    strata: StrataLike | None,
    n: np.ndarray,
    h: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    score_mean: np.ndarray | None,
    init: np.ndarray | None = None,
    form: tuple[np.ndarray, np.ndarray, bool] | None = None,
    pool: RefitPool | None = None,
    cols: np.ndarray | None = None,
) -> _Refit:
    """Per-row Beta priors ``(R, K)`` whose conjugate update is the model's marginal posterior
    and the design's Betas; for the pooled model also every row's hyper-mode ``(R, 5)`` and,
    given ``form`` (sizes, weights ``w``, finite population), the cumulants of
    ``sum_k w_k P_k`` at every hyper-node (the chunks of distinct rows fitted by ``pool``:
    :mod:`bayes_eval.models._look_pool`; ``None``: in this process)."""
    k = n.shape[1]
    # audits with the same counts have the same posterior: fit each distinct row once
    rows, first, inverse = np.unique(
        np.concatenate([n, h], axis=1), axis=0, return_index=True, return_inverse=True
    )
    inverse = np.asarray(inverse).reshape(-1)
    un, uh = rows[:, :k], rows[:, k:]
    if model == "pooled":
        from ..models._laplace import integration_settings
        from ..models._profile import score_profile_of

        sizes, w, finite = form if form is not None else (None, None, True)
        profile = score_profile_of(strata)
        if w is None or not np.array_equal(sizes, profile.sizes):
            raise ValueError("the pooled look model needs the metric's linear form on the strata")
        design = integration_settings()
        chunks = [
            RefitChunk(
                profile,
                un[lo : lo + REFIT_CHUNK],
                uh[lo : lo + REFIT_CHUNK],
                None if init is None else init[first[lo : lo + REFIT_CHUNK]],
                w,
                bool(finite),
                design,
                cols,
            )
            for lo in range(0, un.shape[0], REFIT_CHUNK)
        ]
        fits = (RefitPool() if pool is None else pool).map(chunks)
        ma, mb, rate, mode, *cumulants = concat_fits(fits, inverse)
        sample = concat_samples(fits, inverse)
        return _Refit(ma, mb, rate, mode, LinearFormNodes(*cumulants), sample)
    ua, ub = np.empty(un.shape), np.empty(un.shape)
    for r in range(un.shape[0]):
        ua[r], ub[r] = design_prior(model, strata, un[r], uh[r], a, b, score_mean)
    return _Refit(ua[inverse], ub[inverse])


@dataclass(frozen=True, slots=True)
class _Dependence:
    """The correction of the independent Betas' cumulants of the linear form for the strata's
    dependence, fixed at a refit (see the module docstring): ``shift`` of the mean, ``ratio``
    of the variances and ``skew`` added to the scaled third cumulant, each ``(R,)``."""

    shift: np.ndarray
    ratio: np.ndarray
    skew: np.ndarray

    @classmethod
    def at_refit(
        cls,
        exact: tuple[np.ndarray, np.ndarray, np.ndarray],
        betas: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> _Dependence:
        (x1, x2, x3), (b1, b2, b3) = exact, betas
        ratio = np.where(b2 > 0, x2 / np.where(b2 > 0, b2, 1.0), 1.0)
        return cls(x1 - b1, ratio, x3 - b3 * ratio**1.5)

    def corrected(
        self, betas: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Betas' cumulants of ``L`` at a look, corrected."""
        b1, b2, b3 = betas
        return b1 + self.shift, b2 * self.ratio, b3 * self.ratio**1.5 + self.skew

    def prob(self, betas: tuple[np.ndarray, np.ndarray, np.ndarray], c: float) -> np.ndarray:
        """``P(L >= c)`` from the Betas' cumulants at a look, corrected; where their variance
        is 0 -- every stratum of the form labelled to a census, so ``L`` is counted -- the
        count's own point mass, uncorrected (calibration version 20: the shift fixed at an
        earlier refit moved the count, so a false claim a hair above it got ``P = 1``)."""
        p = prob_at_least(*self.corrected(betas), c)
        counted = betas[1] <= 0.0
        if counted.any():
            none = np.zeros(int(counted.sum()))
            p[counted] = prob_at_least(betas[0][counted], none, none, c)
        return p


def _census_strata(
    sizes: np.ndarray, w: np.ndarray, budget: int, finite_population: bool
) -> np.ndarray | None:
    """The strata that the pooled look model keeps hyper-nodes for: those in the form that
    ``budget`` labels can bring within :data:`~bayes_eval._lattice.LATTICE_REMAINDER` items of a
    census (``None`` if there is none: then the paths are calibration version 16's bit for
    bit)."""
    if not finite_population:
        return None
    near = np.asarray(sizes) <= budget + _lattice.LATTICE_REMAINDER
    cols = np.flatnonzero((np.asarray(w) != 0) & near)
    return cols if cols.size else None


def _rest(
    audits: LockStep,
    eff_a: np.ndarray,
    eff_b: np.ndarray,
    form: tuple[np.ndarray, np.ndarray, bool],
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The marginal Betas' cumulants of the form without the strata ``cols``, each ``(R,)``."""
    sizes, w, _ = form
    w_rest = np.asarray(w, dtype=np.float64).copy()
    w_rest[cols] = 0.0
    return beta_form_cumulants(audits.n, audits.h, eff_a, eff_b, sizes, w_rest, True)


def _census_lattice(
    p: np.ndarray,
    sample: NodeSample,
    audits: LockStep,
    rest_at: tuple[np.ndarray, np.ndarray, np.ndarray],
    eff_a: np.ndarray,
    eff_b: np.ndarray,
    form: tuple[np.ndarray, np.ndarray, bool],
    c: float,
) -> None:
    """Overwrite ``p`` (R,) where a stratum is near a census and carries the form's spread:
    those rows' probability from the refit's hyper-nodes with the near-census strata summed
    exactly (:meth:`~bayes_eval.models._node_sample.NodeSample.prob`); the nodes' rest of the
    form moves by the marginal Betas' change of it since the refit (``rest_at``).

    A row qualifies where the strata that are not exact (under the marginal Betas; since
    version 19 the strata of ``sample.cols`` concentrated near 0 count as exact, as they are at
    the nodes) leave the lattice of the exact ones standing
    (:func:`bayes_eval._lattice.lattice_damping` above ``_lattice._SMOOTH``, the rule of
    :func:`~bayes_eval._lattice.lattice_prob_at_least`); elsewhere the lattice is smoothed out
    and the continuous nodes stand.
    """
    sizes, w, _ = form
    exact = lattice_rows(audits.n, sizes, w, True)
    rows = exact.any(axis=1)
    if not rows.any():
        return
    # the strata of `sample.cols` concentrated near 0 are summed exactly at the nodes too
    # (calibration version 19); judged here under the marginal Betas
    own = sample.kept(exact.shape[1])
    r = np.asarray(sizes, dtype=np.float64)[None, :] - audits.n
    a_post, b_post = eff_a + audits.h, eff_b + audits.n - audits.h
    pick = rows[:, None] & ~exact & own[None, :]
    if pick.any():
        exact = exact | _lattice.concentrated_strata(r, a_post, b_post, w, pick)
    w_other = np.where(exact, 0.0, w)
    _, var_other, _ = beta_form_cumulants(audits.n, audits.h, eff_a, eff_b, sizes, w_other, True)
    spacing = np.abs(np.where(exact, w, 0.0)).max(axis=1)
    rows &= lattice_damping(var_other, spacing) > _lattice._SMOOTH
    if not rows.any():
        return
    idx = np.flatnonzero(rows)
    rest_now = _rest(audits, eff_a, eff_b, form, sample.cols)
    shift = tuple(x[idx] - y[idx] for x, y in zip(rest_now, rest_at, strict=True))
    p[idx] = sample.take(idx).prob(
        audits.n[idx], audits.h[idx], shift, c, sizes=sizes, w=w, prior_a=eff_a[idx],
        prior_b=eff_b[idx],
    )  # fmt: skip


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
    strata: StrataLike | None = None,
    score_mean: np.ndarray | None = None,
    progress: Callable[[int, int], None] | None = None,
    draws: int | None = None,
    pool: RefitPool | None = None,
) -> np.ndarray:
    """``P(metric >= target)`` at each look of ``n_sims`` audits of each truth: ``(T, S, J)``.

    ``positives`` has shape ``(T, K)`` (one row per truth) or ``(K,)``; ``batches`` are the
    batch sizes and ``schedule`` the label counts at the looks (ends of batches). ``progress``
    is called with ``(done, total)`` simulated audit-batches after every batch. With ``draws``
    the probability at each look is the share of ``draws`` posterior draws at or above the
    target, as the audit computes it: ``Binomial(draws, P) / draws`` (fresh draws at every look,
    so the noise is independent across looks), from a generator spawned from ``rng``, so the
    simulated labels are the same as without ``draws``. ``pool`` (a
    :class:`~bayes_eval.models._look_pool.RefitPool`) fits the pooled look model's refits,
    possibly in worker processes: the same numbers bit for bit (``None``: in this process).
    """
    rng = as_generator(rng)
    noise = None
    if draws is not None:
        draws = check_positive_int(draws, "draws")
        noise = rng.spawn(1)[0]  # its own stream: the simulated labels are those without noise
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
    eff_a, eff_b = a, b  # the look model's effective priors (set at the first refit)
    if exact:
        des_a, des_b = a, b
    else:  # the model's prior before any label, for the first batch's design
        zero = np.zeros(k, dtype=np.int64)
        a0, b0 = design_prior(model, strata, zero, zero, a, b, score_mean)
        des_a = np.broadcast_to(np.asarray(a0, dtype=np.float64), (rows, k))
        des_b = np.broadcast_to(np.asarray(b0, dtype=np.float64), (rows, k))
    census = None
    if model == "pooled":
        census = _census_strata(sizes, w, sum(batches), finite_population)
    sample: NodeSample | None = None  # pooled: the last refit's hyper-nodes for `census`
    rest_at = None  # pooled: the Betas' cumulants of the rest of the form at the last refit
    refit_at = 0.0  # the first batch always refits
    mode = None  # pooled model: every audit's hyper-mode at its last refit (warm start)
    dep: _Dependence | None = None  # pooled model: the dependence correction of the last refit
    form = (np.asarray(sizes, dtype=np.float64), w, bool(finite_population))
    labelled = 0
    total = len(batches) * rows
    rate = None  # pooled: the allocation rates of the last refit
    for rnd, m in enumerate(batches):
        if rate is not None:
            des_a, des_b = allocation_prior(rate, audits.n, audits.h)
        state = design_state(
            sizes=sizes,
            predicted=predicted,
            n=audits.n,
            h=audits.h,
            available=audits.available,
            prior_a=des_a,
            prior_b=des_b,
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
            refit = _effective_prior(
                model, strata, audits.n, audits.h, a, b, score_mean, mode, form, pool, census
            )
            eff_a, eff_b, mode, rate = refit.a, refit.b, refit.mode, refit.design_rate
            sample = refit.sample
            if rate is None:
                des_a, des_b = eff_a, eff_b
            if refit.exact is not None:
                betas = beta_form_cumulants(audits.n, audits.h, eff_a, eff_b, *form)
                at_refit = refit.exact.mixture()
                dep = _Dependence.at_refit(at_refit, betas)
                if sample is not None:  # the rest of the form under the Betas, at the refit
                    rest_at = _rest(audits, eff_a, eff_b, form, sample.cols)
                if j is not None:  # a look at a refit: the posterior's own probability
                    out[:, j] = refit.exact.prob(c)
                    if sample is not None:
                        _census_lattice(out[:, j], sample, audits, rest_at, eff_a, eff_b,
                                        form, c)  # fmt: skip
                    j = None
            refit_at = float(labelled)
        if j is not None:
            if dep is None:
                out[:, j] = prob_linear_ge(
                    audits.n, audits.h, eff_a, eff_b, sizes, w, c, finite_population
                )
            else:
                betas = beta_form_cumulants(audits.n, audits.h, eff_a, eff_b, *form)
                out[:, j] = dep.prob(betas, c)
                if sample is not None:
                    _census_lattice(out[:, j], sample, audits, rest_at, eff_a, eff_b, form,
                                    c)  # fmt: skip
        if noise is not None and labelled in look_set:
            jj = look_set[labelled]
            out[:, jj] = noise.binomial(draws, np.clip(out[:, jj], 0.0, 1.0)) / draws
        if progress is not None:
            progress((rnd + 1) * rows, total)
    return out.reshape(n_truths, n_sims, schedule.shape[0])


def first_crossing(prob: np.ndarray, boundary: np.ndarray) -> np.ndarray:
    """Index of the first look with ``prob >= boundary`` per path (``J`` if none); ``prob`` is
    ``(..., J)`` and ``boundary`` ``(J,)``."""
    hit = prob >= boundary
    jj = prob.shape[-1]
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1), jj)
