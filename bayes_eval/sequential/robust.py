"""Worst-case calibration of the repeated-look acceptance rule over a family of truths at the
target.

:func:`calibrate_worst_case` simulates the audit's exact procedure — strata, design and options,
prior, model (:mod:`bayes_eval.sequential._paths`), metric, batch schedule, budget and look
schedule — at every truth of :func:`~bayes_eval.sequential.truths.truth_family` and at one truth
``margin`` above the target, stores ``P(metric >= target)`` at every look of every simulated audit,
and fits the look-dependent boundary (:func:`~bayes_eval.sequential.boundary.fit_boundary`) whose
largest false-accept rate over the family is at most :math:`\\alpha`, with the fewest expected
labels at the truth above the target.

Three stages keep the cost down without trusting a small sample where the boundary binds:
(1) every truth is screened with ``n_sims / 4`` audits; (2) the :data:`KEEP_TRUTHS` truths with
the highest screening rates get ``n_sims`` more and the boundary is fitted; (3) any other truth
that boundary brings within one Monte Carlo s.e. of its allowance
(:func:`~bayes_eval.sequential.boundary.near_allowance`) gets ``n_sims`` more too, and the
boundary is refitted, until no such truth is left. Without stage 3 a boundary could bind at a
truth's 500 lucky screening paths: in-sample 3.00 %, 5.78 % on fresh audits
(``benchmarks/results/bench_certification_pooled.txt``, session 21).

**Random streams.** The members of the family of calibration version 13 and the truth above the
target are simulated together from ``rng``, in the family's order. A member added since
(:data:`~bayes_eval.sequential.truths.ADDED_PROFILES`) is simulated from a stream of its own, a
child of ``rng``'s seed sequence keyed by its name (:func:`own_stream`), is not among stage 2's
kept truths, and enters a fit only with its full paths: its screening paths decide only whether
stage 3 gives it them (the boundary comes near it; in the first version-14 calibrations, fits that
read a member's 500 screening paths moved a boundary where its 2,500 paths were far from binding).
So adding a member changes nothing it does not bind: the other members' audits are the same bit
for bit, and :attr:`WorstCaseCalibration.same_as_version` names the earliest calibration version
whose family gives this calibration bit for bit (the members added after it changed no fitted
boundary): a certification of that version stands, with the later members' own fresh-audit rates
to add (``tests/test_worst_case.py``).

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import numbers
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._protocols import StrataLike, score_mean
from .._validation import (
    RNGLike,
    as_generator,
    check_level,
    check_n_jobs,
    check_option,
    check_positive_int,
)
from ..designs import Design
from ..metrics import metric_of_positives
from ..models import DEFAULT_MODEL, prior_label
from ..models._look_pool import RefitPool
from ..priors import Prior, PriorSpec
from ._linear import SUPPORTED_METRICS, least_favourable_truth
from ._paths import PathSetup, check_calibration_args, look_model_of, named_design, strict_plan
from .boundary import (
    DEFAULT_SHAPES,
    Boundary,
    accept_counts,
    at_truths,
    fit_boundary,
    labels_used,
    near_allowance,
)
from .calibration import check_pilot, check_rate_array
from .truths import ADDED_PROFILES, BASE_VERSION, Truth, posterior_rate_draws, truth_family

__all__ = ["DEFAULT_MARGIN", "WorstCaseCalibration", "calibrate_worst_case"]

#: how far above the target the truth is at which expected labels are minimised
DEFAULT_MARGIN = 0.05

#: posterior draws added to the family
DEFAULT_POSTERIOR_TRUTHS = 2

#: stage 1 simulates every truth with ``n_sims // SCREEN_FRACTION`` audits ...
SCREEN_FRACTION = 4

#: ... stage 2 adds ``n_sims`` audits at this many truths with the highest stage-1 rates
KEEP_TRUTHS = 3

#: first element of an own-stream member's spawn key (:func:`own_stream`; ``SeedSequence.spawn``
#: keys count up from 0, so this one cannot meet them)
_OWN_STREAM = 0x5EED_F14E


@dataclass(frozen=True, slots=True)
class WorstCaseCalibration:
    """Result of :func:`calibrate_worst_case`.

    Attributes
    ----------
    boundary : Boundary
        Nominal level per look and the false-accept rate at every truth.
    truths : tuple of Truth
    prob : tuple of ndarray, each (S_t, J)
        ``P(metric >= target)`` at every look of every simulated audit of each truth
        (``n_sims / 4`` audits for the truths screened out, ``n_sims * 5 / 4`` for the
        :data:`KEEP_TRUTHS` with the highest screening rates and for every other truth the
        boundary comes within one MC s.e. of its allowance, :func:`~.boundary.near_allowance`).
    margin_prob : ndarray (S, J) or None
        The same at the truth ``margin`` above the target.
    margin_value : float
        Metric of that truth (NaN when the target + margin is not attainable).
    margin_positives : ndarray of int64 (K,) or None
        Its positives per stratum.
    metric, target, level, design, model, prior : str, float, float, str, str, str
    look_model : str
        How the model's acceptance probability was simulated.
    n_sims : int
    seconds : float
        Wall time of the simulation and fit.
    rates_source : str
        Where the score-shaped rates of the family came from.
    draws : int or None
        Posterior draws per look whose binomial noise was simulated (``None``: exact
        probabilities).
    same_as_version : int
        The earliest calibration version (:data:`~.truths.BASE_VERSION` or a version of
        :data:`~.truths.ADDED_PROFILES`) whose family gives this calibration: the members added
        after it (each simulated from its own stream) changed no boundary the calibration
        fitted, so the boundary, and every simulated audit of the earlier members, are bit for
        bit those of that version's family (a certification of it stands; the later members'
        rates are in ``boundary``).
    """

    boundary: Boundary
    truths: tuple[Truth, ...]
    prob: tuple[np.ndarray, ...] = field(repr=False)
    margin_prob: np.ndarray | None = field(repr=False)
    margin_value: float
    margin_positives: np.ndarray | None = field(repr=False)
    metric: str
    target: float
    level: float
    design: str
    model: str
    prior: str
    look_model: str
    n_sims: int
    seconds: float
    rates_source: str = "scores"
    draws: int | None = None
    same_as_version: int = BASE_VERSION

    @property
    def added_bind(self) -> bool:
        """Whether a member added after calibration version 13 changed a fitted boundary."""
        return self.same_as_version > BASE_VERSION

    @property
    def looks(self) -> np.ndarray:
        return self.boundary.looks

    @property
    def worst_truth(self) -> Truth:
        """The truth with the highest false-accept rate."""
        return self.truths[self.boundary.worst]

    def rates_at(self, nominal: np.ndarray | float) -> np.ndarray:
        """False-accept rate at every truth for another boundary (a level or one per look)."""
        gamma = np.broadcast_to(np.asarray(nominal, dtype=np.float64), self.looks.shape)
        return accept_counts(list(self.prob), gamma) / np.array([p.shape[0] for p in self.prob])

    def labels_at_margin(self, nominal: np.ndarray | float) -> tuple[float, float]:
        """Mean labels to accept at the truth above the target for a boundary, with MC s.e."""
        if self.margin_prob is None:
            return float("nan"), float("nan")
        gamma = np.broadcast_to(np.asarray(nominal, dtype=np.float64), self.looks.shape)
        used = labels_used(self.margin_prob, self.looks, gamma).astype(np.float64)
        return float(used.mean()), float(used.std(ddof=1) / np.sqrt(used.size))

    def describe(self) -> str:
        """One line: the boundary, the worst truth and its rate with Monte Carlo error."""
        b = self.boundary
        t = self.worst_truth
        lo = min(p.shape[0] for p in self.prob)
        hi = max(p.shape[0] for p in self.prob)
        noise = (
            "exact P at each look"
            if self.draws is None
            else f"P from {self.draws:,} posterior draws at each look (their noise simulated)"
        )
        if not b.attainable:
            return (
                f"sequential correction: NO nominal level holds {1 - self.level:.3g} false "
                f"accepts at every truth (worst: {t.name}, {b.rates[b.worst]:.3f} even at level "
                "1); use the anytime-valid confidence sequence (compare_anytime)"
            )
        return (
            f"sequential correction (worst case over {len(self.truths)} truths at the target): "
            f"nominal {b.nominal[0]:.4f} at the first look to {b.nominal[-1]:.4f} at the last "
            f"(shape {b.shape:g}); worst truth {t.name}: false-accept rate "
            f"{b.rates[b.worst]:.4f} ± {b.mcse[b.worst]:.4f} (MC s.e.); {lo:,}-{hi:,} simulated "
            f"audits per truth, {self.looks.shape[0]} looks up to {int(self.looks[-1])} labels, "
            f"design {self.design}, model {self.model} ({self.look_model}), prior {self.prior}, "
            f"{noise}, family around {self.rates_source} rates"
        )


def _score_rates(
    strata: StrataLike, rates: ArrayLike | None, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    if rates is not None:
        return check_rate_array(rates, a.shape[0], "None (the score midpoints or prior means)")
    lo = np.asarray(getattr(strata, "score_min", np.full(a.shape, np.nan)), dtype=np.float64)
    hi = np.asarray(getattr(strata, "score_max", np.full(a.shape, np.nan)), dtype=np.float64)
    if np.all(np.isfinite(lo)) and lo.min() >= 0.0 and hi.max() <= 1.0:
        return np.clip((lo + hi) / 2.0, 0.0, 1.0)
    return a / (a + b)


def screening_keep(
    prob: list[np.ndarray],
    looks: np.ndarray,
    *,
    level: float,
    margin_prob: np.ndarray | None,
    shapes: tuple[float, ...] = DEFAULT_SHAPES,
) -> np.ndarray:
    """Stage 2's truths: the :data:`KEEP_TRUTHS` with the highest false-accept rates under the
    boundary fitted to the screening paths ``prob``."""
    screen = fit_boundary(prob, looks, level=level, margin_prob=margin_prob, shapes=shapes)
    return np.argsort(-screen.rates, kind="stable")[: min(KEEP_TRUTHS, len(prob))]


def own_stream(gen: np.random.Generator, name: str, stage: int) -> np.random.Generator:
    """The random stream of family member ``name`` at calibration ``stage`` (0: screening,
    1: full paths) for the members added after version 13 (:data:`~.truths.ADDED_PROFILES`): a
    child of ``gen``'s seed sequence keyed by the name, so neither drawing from ``gen`` nor
    spawning from it moves it, and it moves neither. A generator without a seed sequence (one
    built from a legacy bit generator) gives the key from one draw of ``gen`` instead."""
    ss = gen.bit_generator.seed_seq
    key = (_OWN_STREAM, zlib.crc32(name.encode()), int(stage))
    if isinstance(ss, np.random.SeedSequence):
        child = np.random.SeedSequence(
            ss.entropy, spawn_key=(*ss.spawn_key, *key), pool_size=ss.pool_size
        )
    else:
        child = np.random.SeedSequence(int(gen.integers(2**63)), spawn_key=key)
    return np.random.default_rng(child)


def check_count(value: Any, name: str) -> int:
    """A non-negative int (bool rejected), else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name}={value!r}; allowed: a non-negative integer")
    return int(value)


def calibrate_worst_case(
    strata: StrataLike,
    *,
    metric: str = "f1",
    target: float = 0.8,
    level: float = 0.95,
    design: str | Design = "random",
    design_options: dict[str, Any] | None = None,
    batch_size: int = 20,
    budget: int = 2000,
    looks: ArrayLike | None = None,
    prior: PriorSpec = "jeffreys",
    model: str = DEFAULT_MODEL,
    rates: str | ArrayLike | None = None,
    pilot: tuple[ArrayLike, ArrayLike] | None = None,
    finite_population: bool = True,
    n_sims: int = 2000,
    margin: float = DEFAULT_MARGIN,
    posterior_truths: int = DEFAULT_POSTERIOR_TRUTHS,
    profiles: tuple[str, ...] | None = None,
    shapes: tuple[float, ...] = DEFAULT_SHAPES,
    rng: RNGLike = None,
    progress: Callable[[int, int], None] | None = None,
    rates_label: str | None = None,
    draws: int | None = None,
    n_jobs: int | None = None,
) -> WorstCaseCalibration:
    """Calibrate the repeated-look rule at every truth of the family (module docstring).

    Parameters
    ----------
    strata : Strata
        The audit's strata (their scores shape the family; the pooled model reads them).
    metric, target, level : str, float, float
        The claim ``metric >= target`` at actual ``level``.
    design, design_options : design name or object, dict
    batch_size, budget, looks :
        As in :func:`~bayes_eval.sequential.calibrate_sequential`.
    prior : prior spec
    model : str
        The posterior model the audit runs (``"independent"``, ``"pooled"``,
        ``"hierarchical"``).
    rates : array (K,), optional
        Rates the scores stand for (default the stratum score midpoints when scores are
        probabilities, else the prior means).
    pilot : (n, h), optional
        Labels already in the audit: the posterior draws of the family condition on them.
    finite_population : bool
    n_sims : int
        Simulated audits per truth (at least 100).
    margin : float
        The boundary's shape minimises expected labels at a truth ``margin`` above the target.
    posterior_truths : int
        Posterior draws added to the family.
    profiles : tuple of str, optional
        Deterministic profiles of the family (default all of
        :data:`~bayes_eval.sequential.truths.PROFILES`).
    shapes : tuple of float
        Boundary shapes tried.
    rng : int, Generator or None
    progress : callable ``(done, total)``, optional
        Called after every simulated batch (at most 2% of the work apart when there are at
        least 50 batches); ``total`` grows when stage 3 adds truths.
    rates_label : str, optional
        Where ``rates`` came from (reported; default ``"scores"`` or ``"prior"``).
    draws : int, optional
        Monte Carlo draws the audit decides on at each look (``Audit(draws=)``; the sequential
        correction passes the procedure's): the simulated probabilities get that binomial
        noise, which adds crossings near the boundary. ``None`` simulates exact probabilities.
    n_jobs : int or None
        Processes that fit the pooled look model's refits (:mod:`bayes_eval.models._look_pool`):
        ``None`` or 1 this one, ``-1`` one per CPU. The result is the same bit for bit.

    Returns
    -------
    WorstCaseCalibration

    Examples
    --------
    >>> import bayes_eval as be
    >>> lp = be.datasets.synthetic(20_000, prevalence=0.2, rng=0)
    >>> st = be.stratify(lp.population, n_strata=3)
    >>> cal = be.sequential.calibrate_worst_case(st, metric="f1", target=0.6, budget=300,
    ...     batch_size=30, n_sims=400, model="independent", rng=0)
    >>> bool(cal.boundary.rates.max() <= 0.05)
    True
    """
    t0 = time.perf_counter()
    check_option(metric, "metric", SUPPORTED_METRICS)
    target = check_level(target, "target")  # a family at the target needs 0 < target < 1
    level = check_level(level, "level")
    n_sims = check_calibration_args(n_sims, progress, "")
    n_jobs = check_n_jobs(n_jobs)
    if not isinstance(model, str):
        raise TypeError(f"model={model!r} must be a model name (str)")
    if model != "independent" and not hasattr(strata, "population"):
        raise ValueError(
            f"model={model!r} reads the strata's scores: pass the audit's Strata (in memory)"
        )
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1:
        raise ValueError(f"margin={margin!r}; allowed: a number in [0, 1)")
    posterior_truths = check_count(posterior_truths, "posterior_truths")
    if draws is not None:
        draws = check_positive_int(draws, "draws")
    sizes = np.asarray(strata.sizes, dtype=np.int64)
    pred = np.asarray(strata.predicted, dtype=bool)
    k = sizes.shape[0]
    dsg, design_name = named_design(design, design_options)
    plan = strict_plan(dsg, batch_size, budget, looks, int(sizes.sum()), k)
    schedule = plan.looks
    resolved = Prior.resolve(prior, k)
    a, b = resolved.a, resolved.b
    gen = as_generator(rng)
    base = _score_rates(strata, rates, a, b)
    if rates_label is not None:
        label = str(rates_label)
    elif rates is not None:
        label = "given"
    else:
        label = "prior" if np.allclose(base, a / (a + b)) else "scores"
    zero = np.zeros(k, dtype=np.int64)
    pn, ph = (zero, zero) if pilot is None else check_pilot(pilot, k)
    post_draws = (
        posterior_rate_draws(model, strata, pn, ph, a, b, posterior_truths, gen)
        if posterior_truths > 0
        else None
    )
    truths = truth_family(
        sizes,
        pred,
        metric=metric,
        target=target,
        score_rates=base,
        posterior_draws=post_draws,
        profiles=profiles,
    )
    pos = np.stack([t.positives for t in truths])
    margin_value = float("nan")
    up = None
    if margin > 0:
        try:
            up = least_favourable_truth(sizes, pred, base, metric=metric, value=target + margin)
        except ValueError:
            up = None
        if up is not None and target + margin > 1.0:
            up = None
        if up is not None:
            pos = np.concatenate([pos, up[None, :]])
            margin_value = metric_of_positives(metric, up, sizes, pred)
    setup = PathSetup(
        sizes=sizes,
        predicted=pred,
        metric=metric,
        target=target,
        design=dsg,
        plan=plan,
        prior=resolved,
        finite_population=bool(finite_population),
        model=model,
        strata=strata,
        score_mean=score_mean(strata) if model == "hierarchical" else None,
        draws=draws,
    )
    n_fam = len(truths)
    n_first = max(100, n_sims // SCREEN_FRACTION)
    n_keep = min(KEEP_TRUTHS, n_fam)
    n_batches = plan.n_batches
    total = n_batches * (pos.shape[0] * n_first + n_keep * n_sims)

    def run(
        positives: np.ndarray, sims: int, before: int, stream: np.random.Generator | None = None
    ) -> np.ndarray:
        def tick(d: int, _t: int) -> None:
            if progress is not None:
                progress(before + d, total)

        return setup.simulate(positives, sims, gen if stream is None else stream, tick, pool)

    # the members added after version 13 (truths.ADDED_PROFILES) each have a stream of their
    # own; the others share ``gen`` in the family's order, as they did before they were added
    own = np.array([t.name in ADDED_PROFILES for t in truths], dtype=bool)
    shared = np.flatnonzero(~own)
    fam: list[np.ndarray] = [np.empty((0, schedule.size))] * n_fam
    full = np.zeros(n_fam, dtype=bool)
    done = 0

    def promote(idx: np.ndarray) -> None:
        """Give the truths ``idx`` ``n_sims`` more paths (after their screening ones): the
        shared-stream truths together, then each own-stream truth from its own stream."""
        nonlocal done
        joint = idx[~own[idx]]
        if joint.size:
            extra = run(pos[joint], n_sims, done)
            done += n_batches * joint.size * n_sims
            for i, t in enumerate(joint.tolist()):
                fam[t] = np.concatenate([fam[t], extra[i]])
        for t in idx[own[idx]].tolist():
            extra = run(pos[t], n_sims, done, own_stream(gen, truths[t].name, 1))
            done += n_batches * n_sims
            fam[t] = np.concatenate([fam[t], extra[0]])
        full[idx] = True

    # the version that added each member (BASE_VERSION: shared-stream members)
    added_in = np.array([ADDED_PROFILES.get(t.name, BASE_VERSION) for t in truths])
    changed = {int(v): False for v in np.unique(added_in[own])}

    def refit() -> Boundary:
        """The boundary fitted to the paths of every truth but the own-stream members that
        have only their screening paths (those decide only whether a member gets the full
        paths), with its rates at every truth; for each version ``v`` whose members have not
        changed a fit yet, also the fit without the members added in ``v`` or later
        (``changed``: once they do, the earlier members' later promotions, and so their paths,
        may differ from the family without them)."""
        use = [t for t in range(n_fam) if full[t] or not own[t]]
        fit = fit_boundary(
            [fam[t] for t in use], schedule, level=level, margin_prob=mprob, shapes=shapes
        )
        for v in [v for v, c in changed.items() if not c]:
            old = fit_boundary(
                [fam[t] for t in use if added_in[t] < v],
                schedule,
                level=level,
                margin_prob=mprob,
                shapes=shapes,
            )
            changed[v] = not (
                fit.attainable == old.attainable
                and fit.shape == old.shape
                and np.array_equal(fit.nominal, old.nominal)
            )
        return at_truths(fit, fam)

    with RefitPool(n_jobs) as pool:  # the look model's refits, in n_jobs processes
        # stage 1: every truth (and the one above the target) at n_sims / 4; the shared-stream
        # truths and the one above the target together, then each own-stream truth
        rows = np.concatenate([shared, np.arange(n_fam, pos.shape[0])])
        first = run(pos[rows], n_first, 0)
        done = n_batches * rows.size * n_first
        mprob = first[shared.size] if first.shape[0] > shared.size else None
        for i, t in enumerate(shared.tolist()):
            fam[t] = first[i]
        for t in np.flatnonzero(own).tolist():
            fam[t] = run(pos[t], n_first, done, own_stream(gen, truths[t].name, 0))[0]
            done += n_batches * n_first
        # stage 2: the truths that bind (highest stage-1 rates among the shared-stream ones)
        # again at the full n_sims; the others keep their stage-1 paths, so the boundary still
        # holds at them (an own-stream truth near its allowance gets them in stage 3)
        keep = screening_keep(
            [fam[t] for t in shared], schedule, level=level, margin_prob=mprob, shapes=shapes
        )
        promote(shared[keep])
        boundary = refit()
        # stage 3: a truth simulated only at the screening size that the final boundary brings
        # within one MC s.e. of its allowance gets the full n_sims too, and the boundary is refit,
        # until every truth near its allowance has n_sims * 5 / 4 paths (a boundary fitted to 500
        # lucky paths can miss by 3 points there, bench_certification_pooled.txt, session 21)
        while boundary.attainable:
            near = np.flatnonzero(~full & near_allowance(fam, boundary.nominal, level))
            if near.size == 0:
                break
            total += n_batches * near.size * n_sims
            promote(near)
            boundary = refit()
    return WorstCaseCalibration(
        boundary=boundary,
        truths=truths,
        prob=tuple(fam),
        margin_prob=mprob,
        margin_value=margin_value,
        margin_positives=up,
        metric=metric,
        target=target,
        level=level,
        design=str(design_name),
        model=model,
        prior=prior_label(model, resolved.description),
        look_model=look_model_of(model),
        n_sims=n_sims,
        seconds=time.perf_counter() - t0,
        rates_source=label,
        draws=draws,
        same_as_version=_same_as_version(changed),
    )


def _same_as_version(changed: dict[int, bool]) -> int:
    """The earliest version whose family gives the calibration: the one before the first
    version whose members (with every later one's) changed no fit; the last version when each
    changed one."""
    versions = sorted(changed)
    for before, v in zip([BASE_VERSION, *versions], versions, strict=False):
        if not changed[v]:
            return before
    return versions[-1] if versions else BASE_VERSION
