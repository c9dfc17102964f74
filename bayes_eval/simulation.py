"""Replicated audits against known labels: the simulation harness behind every benchmark.

:func:`simulate` runs ``n_reps`` independent audits per design on a population whose labels are all
known, and reports how many labels each used, what it estimated and whether its interval covered
the truth.

What one replication does is exactly what :class:`bayes_eval.Audit` does, in distribution:

1. the design splits the next batch over the strata (``design.allocate(state, m, rng)`` on the same
   :class:`~bayes_eval.designs.DesignState` the audit builds). A design with a batch form
   ``allocate_many`` is called once per look for all replications (``n``, ``h``, ``available``
   of shape ``(R, K)``) from one generator; other designs are called once per replication, each
   replication with its own copy of the design (as each audit owns its design) and its own
   generator. The batch size ``m`` is ``batch_size``, or ``design.batch_schedule(round, K)``
   when the design has a schedule (as in :meth:`bayes_eval.Audit.run`);
2. within stratum ``k``, ``c_k`` items are drawn uniformly without replacement from the items not
   yet labelled. The audit does this with hash-keyed bottom-k sampling; here only the number of
   positives among them matters, which is hypergeometric,

   .. math:: \\Delta h_k \\sim \\mathrm{Hypergeometric}(P_k - h_k,\\;
             (N_k - P_k) - (n_k - h_k),\\; c_k),

   where ``P_k`` is the stratum's true number of positives; so no item ids are drawn at all;
3. the posterior of the metric is the stratified beta-binomial posterior of
   :func:`bayes_eval.posterior.estimate_from_stratum_counts` (``theta_k ~ Beta(a_k + h_k,
   b_k + n_k - h_k)``, the unlabelled remainder ``Binomial(N_k - n_k, theta_k)`` with
   ``finite_population=True``), computed for all replications at once as one
   ``(reps, draws, K)`` array;
4. the stop rule looks after every batch (vectorised ``check_many`` when the rule has it, else
   one replication at a time through ``check``).

Replications run in lock-step (all take their b-th batch together) and the same per-replication
seeds are used for every design (common random numbers), which sharpens comparisons of designs.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Table 1: labels needed for ±δ,
InConf = coverage). Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (variance ratio
against random sampling).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from ._loop import BatchPlan, LockStep, LockStepAllocator, design_state
from ._protocols import PopulationLike, StrataLike, check_strata
from ._protocols import score_mean as strata_score_mean
from ._sampling import NORMAL_MIN_VARIANCE
from ._validation import (
    RNGLike,
    as_generator,
    check_bool,
    check_level,
    check_option,
    check_positive_int,
)
from .designs import DESIGNS, Design, make_design
from .metrics import METRICS, metric_of_positives, metric_values, relevant_sides
from .models import DEFAULT_MODEL, design_prior, prior_label
from .posterior import MODELS, estimate_from_stratum_counts
from .priors import BetaSpec, Prior, resolve_prior
from .stop import (
    BUDGET,
    AnyOf,
    Look,
    Procedure,
    StopRule,
    find_certifier,
    stopped_by,
    supports_many,
)
from .stop._rules import rule_name

if TYPE_CHECKING:
    from .datasets import LabelledPopulation

__all__ = ["simulate", "truth_counts"]

#: one entry of ``simulate(designs={label: ...})``: a registered design's name, a name with
#: its options, or a design object
type DesignChoice = str | tuple[str, Mapping[str, Any]] | Design

#: max elements of one (reps, draws, K) block of posterior draws (small blocks stay in cache:
#: measured 2x faster than one big block)
_BLOCK_ELEMENTS = 300_000


def _split_data(data: Any, truth: Any) -> tuple[Any, np.ndarray]:
    if truth is None and hasattr(data, "population") and hasattr(data, "truth"):
        pop, truth = data.population, data.truth
    elif truth is None and isinstance(data, tuple) and len(data) == 2:
        pop, truth = data
    elif truth is not None:
        pop = data
    else:
        raise TypeError(
            f"data has type {type(data).__name__}; allowed: a LabelledPopulation (with "
            ".population and .truth), a (population, truth) pair, or a population with truth="
        )
    arr = np.asarray(truth)
    if arr.shape != (pop.size,):
        raise ValueError(
            f"truth has shape {arr.shape}; allowed: one 0/1 label per item, shape ({pop.size},)"
        )
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise ValueError("truth must hold only 0/1 or True/False labels")
        arr = arr.astype(bool)
    return pop, arr


def truth_counts(strata: StrataLike, truth: np.ndarray) -> np.ndarray:
    """True positives per stratum, ``P_k = sum_{i in k} y_i`` (one pass over the population)."""
    assignment = np.asarray(strata.assignment, dtype=np.int64)
    return (
        np.bincount(
            assignment, weights=np.asarray(truth, dtype=np.float64), minlength=strata.n_strata
        )
        .round()
        .astype(np.int64)
    )


def _parse_designs(
    designs: Any, design_options: Mapping[str, Any] | None
) -> list[tuple[str, Any, dict[str, Any]]]:
    """-> list of (label, design name or object, options)."""
    opts_by_name = dict(design_options or {})
    out: list[tuple[str, Any, dict[str, Any]]] = []
    if isinstance(designs, str):
        designs = [designs]
    if isinstance(designs, Mapping):
        items = list(designs.items())
    elif isinstance(designs, Sequence):
        items = []
        for d in designs:
            label = d if isinstance(d, str) else getattr(d, "name", type(d).__name__)
            items.append((label, d))
    else:
        raise TypeError(
            f"designs has type {type(designs).__name__}; allowed: a design name, a list of names,"
            " or a mapping label -> name or (name, options)"
        )
    if not items:
        raise ValueError("designs is empty; give at least one design")
    for label, spec in items:
        options: dict[str, Any] = {}
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], Mapping):
            spec, options = spec[0], dict(spec[1])
        if isinstance(spec, str):
            check_option(spec, "designs", tuple(DESIGNS))
            options = {**opts_by_name.get(spec, {}), **options}
            if label != spec:
                options = {**opts_by_name.get(label, {}), **options}
        elif not hasattr(spec, "allocate"):
            raise TypeError(f"design {spec!r} has no .allocate; allowed: a design name or object")
        out.append((str(label), spec, options))
    labels = [o[0] for o in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"designs has duplicate labels {labels}; give a mapping label -> design")
    return out


def _build_design(spec: Any, options: dict[str, Any], true_rates: np.ndarray) -> Any:
    """Make the design; oracle designs whose factory names a ``rates`` parameter get the true
    per-stratum positive rates unless ``rates`` is given."""
    if not isinstance(spec, str):
        return spec
    factory = DESIGNS[spec]
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        params = {}
    if "rates" in params and "rates" not in options:
        options = {**options, "rates": true_rates}
    return make_design(spec, **options)


def _metric_draws(
    theta: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    sizes: np.ndarray,
    predicted: np.ndarray,
    metric: str,
    finite_population: bool,
    gen: np.random.Generator,
) -> np.ndarray:
    """Metric draws (R, D) from theta draws (R, D, K) and counts (R, K).

    The metric depends on the strata only through the positives of each predicted side,
    ``TP = sum_{k: yhat_k = 1} P_k`` and ``FN = sum_{k: yhat_k = 0} P_k``. With
    ``finite_population`` the unlabelled positives of stratum ``k`` are ``Binomial(N_k - n_k,
    theta_k)``, which the package's "fast" sampler (:mod:`bayes_eval._sampling`) draws from its
    normal approximation wherever the variance ``v_k = (N_k - n_k) theta_k (1 - theta_k)`` is at
    least 30 and exactly elsewhere. Here those normal parts are summed per side before sampling
    (a sum of independent normals is normal with the summed mean and variance), which draws one
    normal per side instead of one per stratum; the exact binomial parts are added as they are.
    Rounding happens once per side instead of once per stratum (a difference of at most K/2
    items, far below the posterior spread). Strata of a side the metric ignores carry placeholder
    theta (see :func:`relevant_sides`); their contribution cancels in the metric.
    """
    sides = np.stack([predicted, ~predicted], axis=1).astype(np.float64)  # (K, 2)
    sizes_side = sizes @ sides
    if finite_population:
        remaining = (sizes[None, :] - n).astype(np.float64)[:, None, :]  # (R, 1, K)
        mean = theta * remaining
        var = mean * (1.0 - theta)
        small = var < NORMAL_MIN_VARIANCE
        extra = None
        if small.any():
            exact = np.zeros(theta.shape)
            exact[small] = gen.binomial(
                np.broadcast_to(remaining, theta.shape)[small].astype(np.int64), theta[small]
            )
            mean[small] = 0.0
            var[small] = 0.0
            extra = exact @ sides
        m_side = mean @ sides  # (R, D, 2)
        v_side = var @ sides
        pos = m_side + np.sqrt(v_side) * gen.standard_normal(m_side.shape)
        np.rint(pos, out=pos)
        if extra is None:
            rem_side = remaining @ sides  # (R, 1, 2)
        else:
            rem_side = np.where(small, 0.0, np.broadcast_to(remaining, theta.shape)) @ sides
        np.clip(pos, 0.0, rem_side, out=pos)
        if extra is not None:
            pos += extra
        pos += (h @ sides)[:, None, :]
    else:
        pos = (theta * sizes[None, None, :]) @ sides
    # pos[..., 0] is the predicted-positive side, pos[..., 1] the predicted-negative side
    return metric_values(metric, pos, sizes_side, np.array([True, False]))[metric]


def _check_many(
    rule: StopRule, x: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised check with the repr of the (first) rule that fired as the reason (the names of
    :func:`bayes_eval.stop.stopped_by`, which the per-audit path uses)."""
    why = np.array([""] * rows.size, dtype=object)
    if isinstance(rule, AnyOf):
        hit = np.zeros(rows.size, dtype=bool)
        for r, st in zip(rule.rules, state["rules"], strict=True):
            h, w = _check_many(r, x, n_labels, st, rows)
            why[h & ~hit] = w[h & ~hit]
            hit |= h
        return hit, why
    hit = rule.check_many(x, n_labels, state, rows)
    why[hit] = rule_name(rule)
    return hit, why


def _certifiers(rule: StopRule | None) -> set[str]:
    """The names (:func:`bayes_eval.stop.stopped_by`) under which ``rule`` stops an audit by
    accepting a claim: its certifying rules (``Accept``, or a combination that needs one)."""
    if rule is None:
        return set()
    if isinstance(rule, AnyOf):
        return set().union(*(_certifiers(r) for r in rule.rules))
    return {rule_name(rule)} if find_certifier(rule) is not None else set()


def simulate(
    data: LabelledPopulation | tuple[PopulationLike, ArrayLike] | PopulationLike,
    *,
    strata: StrataLike,
    designs: str | Sequence[str] | Mapping[str, DesignChoice],
    metric: str = "f1",
    budget: int,
    batch_size: int,
    n_reps: int,
    stop: StopRule | None = None,
    level: float = 0.95,
    prior: BetaSpec = "jeffreys",
    draws: int = 2000,
    rng: RNGLike = 0,
    design_options: Mapping[str, Mapping[str, Any]] | None = None,
    finite_population: bool = True,
    model: str = DEFAULT_MODEL,
    trajectory: bool = True,
    truth: ArrayLike | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, xr.Dataset]:
    """Run many independent simulated audits per design against known labels.

    Parameters
    ----------
    data : LabelledPopulation or (Population, truth)
        Population with every item's true label (``truth``: bool array in population order).
        A bare population with ``truth=`` is accepted too.
    strata : Strata
        Strata of that population (in-memory).
    designs : str, list of str, or mapping label -> name | (name, options) | design object
        Designs to compare (names of :data:`bayes_eval.designs.DESIGNS`).
    metric : str
        Target metric (stop rules and the reported estimate use it).
    budget : int
        Maximum labels per replication.
    batch_size : int
        Labels per batch (the stop rule looks after each batch). A design with a
        ``batch_schedule(round, n_strata)`` (``"online_optimal"``: ``D0`` then ``D``;
        ``"opt_a1"``/``"opt_a2"``: ``K n_ini`` then ``n_step``) sets its own batch sizes instead,
        as in :meth:`bayes_eval.Audit.run`; the last batch is cut to the budget.
    n_reps : int
        Replications per design.
    stop : StopRule, optional
        Stopping rule (``be.stop.HalfWidth(...)``, ...). Without one every replication uses the
        whole budget.
    level : float
        Credible level of the reported equal-tailed interval (``lower``, ``upper``, ``covered``).
    prior : "jeffreys", "uniform", (a, b) or per-stratum arrays
        Beta prior on each stratum's positive rate, as in :class:`bayes_eval.Audit`.
    draws : int
        Monte Carlo draws per posterior.
    rng : int, Generator or None
        Seeds everything; replication ``r`` gets the same seed under every design.
    design_options : mapping design name -> options, optional
        Keyword options for :func:`bayes_eval.make_design`. A registered design whose factory has
        an explicit ``rates`` parameter (an oracle design) receives the true per-stratum positive
        rates unless ``rates`` is given.
    finite_population : bool
        As in :func:`bayes_eval.estimate`.
    model : str
        ``"independent"`` (vectorised) or another entry of :data:`bayes_eval.posterior.MODELS`
        (e.g. ``"hierarchical"``; one replication at a time, slower).
    trajectory : bool
        Record the posterior after every batch (dimension ``look``). With ``False`` and no stop
        rule, the posterior is computed only at the end (much faster).
    truth : array_like of bool, optional
        True labels when ``data`` is a bare population.
    progress : callable ``(done, total)``, optional
        Called as replications advance, in replication-batches (a replication that stopped
        counts its remaining batches as done): after every batch, and after every replication
        when replications run one at a time.

    Returns
    -------
    dict of str -> xarray.Dataset
        One dataset per design label, over dimension ``rep`` (and ``look``, ``stratum``), with
        ``n_labels`` (labels used), ``estimate`` (posterior mean of the metric), ``error``
        (estimate - truth), ``lower``/``upper`` (equal-tailed ``level`` interval),
        ``half_width``, ``covered`` (truth inside the interval), ``stopped_by`` (``"budget"``,
        ``"exhausted"`` or the repr of the rule that stopped the audit — inside ``a | b`` the
        one that fired first; an ``Accept`` that never accepted leaves the audit to the budget —
        the same names for every model, see :func:`bayes_eval.stop.stopped_by`), ``accepted``
        (the audit was stopped by a certifying rule, i.e. ``Accept`` accepted its claim),
        ``n``/``h`` (final labels and positives per stratum) and, with ``trajectory=True``,
        ``trajectory_n_labels``, ``trajectory_mean``, ``trajectory_lower``, ``trajectory_upper``
        over ``(rep, look)`` (NaN after a replication stopped). ``attrs`` hold the truth,
        design, metric, level, prior, model and stop rule.

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.random(20_000); truth = rng.random(20_000) < scores
    >>> pop = be.Population(scores, threshold=0.5)
    >>> strata = be.stratify(pop, n_strata=4)
    >>> out = be.simulate((pop, truth), strata=strata, designs=["random", "proportional"],
    ...                   metric="precision", budget=400, batch_size=100, n_reps=50, rng=0)
    >>> float(out["proportional"]["covered"].mean()) > 0.8
    True
    """
    pop, truth_arr = _split_data(data, truth)
    check_strata(strata, pop, "data")
    check_option(metric, "metric", tuple(METRICS))
    budget = check_positive_int(budget, "budget")
    batch_size = check_positive_int(batch_size, "batch_size")
    n_reps = check_positive_int(n_reps, "n_reps")
    draws = check_positive_int(draws, "draws")
    level = check_level(level, "level")
    check_option(model, "model", ("independent", *MODELS))
    if stop is not None and not isinstance(stop, StopRule):
        raise TypeError(f"stop={stop!r} has type {type(stop).__name__}; allowed: a StopRule")
    check_bool(finite_population, "finite_population")
    check_bool(trajectory, "trajectory")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress={progress!r}; allowed: a callable (done, total) or None")
    specs = _parse_designs(designs, design_options)
    k = strata.n_strata
    a, b, prior_desc = resolve_prior(prior, k)
    sizes = np.asarray(strata.sizes, dtype=np.int64)
    predicted = np.asarray(strata.predicted, dtype=bool)
    positives = truth_counts(strata, truth_arr)
    true_value = metric_of_positives(metric, positives, sizes, predicted)
    true_rates = positives / sizes
    score_mean = strata_score_mean(strata)
    gen = as_generator(rng)
    root = np.random.SeedSequence(int(gen.integers(0, 2**63)))
    rep_seqs = root.spawn(n_reps)
    bulk_seq = root.spawn(1)[0]
    alloc_seq = root.spawn(1)[0]  # allocate_many's generator (after the others: they stay)

    built = [
        (label, _build_design(spec, options, true_rates), options) for label, spec, options in specs
    ]
    total_units = sum(
        n_reps
        * BatchPlan.build(
            d, batch_size=batch_size, budget=budget, total=int(sizes.sum()), n_strata=k
        ).n_batches
        for _, d, _ in built
    )
    done = [0]

    def tick(units: int) -> None:
        done[0] += int(units)
        if progress is not None:
            progress(min(done[0], total_units), total_units)

    out: dict[str, xr.Dataset] = {}
    for label, design, options in built:
        out[label] = _simulate_design(
            tick=tick,
            label=label,
            design=design,
            design_options=options,
            strata=strata,
            sizes=sizes,
            predicted=predicted,
            positives=positives,
            score_mean=score_mean,
            a=a,
            b=b,
            prior_desc=prior_desc,
            metric=metric,
            budget=budget,
            batch_size=batch_size,
            rep_seqs=rep_seqs,
            bulk_seq=bulk_seq,
            alloc_seq=alloc_seq,
            stop=stop,
            level=level,
            draws=draws,
            finite_population=bool(finite_population),
            model=model,
            trajectory=bool(trajectory),
            true_value=true_value,
        )
    return out


def _simulate_design(
    *,
    tick: Callable[[int], None],
    label: str,
    design: Design,
    design_options: dict,
    strata: StrataLike,
    sizes: np.ndarray,
    predicted: np.ndarray,
    positives: np.ndarray,
    score_mean: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    prior_desc: str,
    metric: str,
    budget: int,
    batch_size: int,
    rep_seqs: list[np.random.SeedSequence],
    bulk_seq: np.random.SeedSequence,
    alloc_seq: np.random.SeedSequence,
    stop: StopRule | None,
    level: float,
    draws: int,
    finite_population: bool,
    model: str,
    trajectory: bool,
    true_value: float,
) -> xr.Dataset:
    k = sizes.shape[0]
    reps = len(rep_seqs)
    rep_gens = [np.random.default_rng(s) for s in rep_seqs]
    bulk = np.random.default_rng(bulk_seq)
    total = int(sizes.sum())
    plan = BatchPlan.build(design, batch_size=batch_size, budget=budget, total=total, n_strata=k)
    batches = list(plan.batches)
    n_looks = len(batches)
    batch_size = plan.steady  # stop rules read the (steady-state) batch size
    audits = LockStep(sizes, positives, reps)
    n, h = audits.n, audits.h  # views updated in place by audits.label
    active = np.ones(reps, dtype=bool)
    stop_names = np.array([""] * reps, dtype=object)
    last_mean = np.full(reps, np.nan)
    last_lo = np.full(reps, np.nan)
    last_hi = np.full(reps, np.nan)
    looks_done = np.zeros(reps, dtype=np.int64)
    t_n = np.full((reps, n_looks), -1, dtype=np.int64)
    t_mean = np.full((reps, n_looks), np.nan)
    t_lo = np.full((reps, n_looks), np.nan)
    t_hi = np.full((reps, n_looks), np.nan)
    design_name = getattr(design, "name", type(design).__name__)

    vectorised = model == "independent" and (stop is None or supports_many(stop))
    rule_state: dict[str, Any] = {}
    per_rep_rules: list[Any] = []
    procedure = Procedure(
        strata=strata,
        metric=metric,
        design=design_name,
        design_options=dict(design_options),
        model=model,
        prior=Prior(a, b, prior_desc),
        finite_population=finite_population,
        draws=draws,
        batch_size=batch_size,
        budget=budget,
        seed=int(rep_seqs[0].entropy or 0),
    )
    if stop is not None:
        stop = copy.deepcopy(stop)
        stop.prepare(procedure)
        if vectorised:
            rule_state = stop.start_many(reps)
        else:
            per_rep_rules = [copy.deepcopy(stop) for _ in range(reps)]
    per_audit_prior = model != "independent"  # the design follows each audit's posterior
    # one call for all replications when the design has a batch form (and the priors are the
    # same for every replication); otherwise one design object per replication, as each audit
    # owns its design (designs may keep state between batches), with its own generator
    allocator = LockStepAllocator(design, reps, per_audit=per_audit_prior, vector_random=False)
    alloc_gen = np.random.default_rng(alloc_seq)
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    need_neg, need_pos = relevant_sides(metric)
    live = np.where(predicted, need_pos, need_neg)
    if finite_population and not live.any():  # pragma: no cover - constant metric
        live = np.ones(k, dtype=bool)
    evaluate_every = trajectory or stop is not None

    for look in range(n_looks):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            tick((n_looks - look) * reps)
            break
        m = batches[look]  # replications run in lock-step: all active ones have used the same
        state = design_state(
            sizes=sizes,
            predicted=predicted,
            n=n,
            h=h,
            available=audits.available,
            prior_a=a,
            prior_b=b,
            metric=metric,
            round=look,
            score_mean=score_mean,
            finite_population=finite_population,
        )
        states = None
        if per_audit_prior:
            states = []
            for r in rows.tolist():
                pa, pb = design_prior(model, strata, n[r], h[r], a, b, score_mean)
                states.append(
                    design_state(
                        sizes=sizes,
                        predicted=predicted,
                        n=n[r],
                        h=h[r],
                        available=sizes - n[r],
                        prior_a=pa,
                        prior_b=pb,
                        metric=metric,
                        round=look,
                        score_mean=score_mean,
                        finite_population=finite_population,
                    )
                )
        counts = allocator(state, m, alloc_gen, rows=rows, rngs=rep_gens, states=states)
        audits.label(counts, bulk, rows)
        looks_done[rows] += 1
        t_n[rows, look] = n[rows].sum(axis=1)
        final_look = look == n_looks - 1
        if not (evaluate_every or final_look):
            tick(reps)
            continue
        stop_now = np.zeros(rows.size, dtype=bool)
        reasons = np.array([""] * rows.size, dtype=object)
        if vectorised:
            block = max(1, _BLOCK_ELEMENTS // (draws * k))
            for s in range(0, rows.size, block):
                sub = rows[s : s + block]
                aa, bb = (a + h[sub])[:, live], (b + n[sub] - h[sub])[:, live]
                shape = (sub.size, draws, int(live.sum()))
                if live.all():  # no scatter copy
                    theta = bulk.beta(aa[:, None, :], bb[:, None, :], size=shape)
                else:
                    theta = np.empty((sub.size, draws, k))
                    theta[:, :, ~live] = 0.5  # strata of a side the metric ignores
                    theta[:, :, live] = bulk.beta(aa[:, None, :], bb[:, None, :], size=shape)
                x = _metric_draws(
                    theta, n[sub], h[sub], sizes, predicted, metric, finite_population, bulk
                )
                q = np.quantile(x, [lo_q, hi_q], axis=1)
                last_mean[sub] = x.mean(axis=1)
                last_lo[sub], last_hi[sub] = q[0], q[1]
                if stop is not None:
                    hit, why = _check_many(stop, x, n[sub].sum(axis=1), rule_state, sub)
                    stop_now[s : s + sub.size] = hit
                    reasons[s : s + sub.size] = why
        else:
            for i, r in enumerate(rows):
                post = estimate_from_stratum_counts(
                    strata,
                    n[r],
                    h[r],
                    prior=Prior(a, b, prior_desc),
                    finite_population=finite_population,
                    draws=draws,
                    rng=bulk,
                    metrics=(metric,),
                    model=model,
                )
                x = post.draws(metric)
                last_mean[r] = x.mean()
                last_lo[r], last_hi[r] = np.quantile(x, [lo_q, hi_q])
                if stop is not None:
                    one = Look(procedure, int(n[r].sum()), int(looks_done[r]))
                    d = per_rep_rules[r].check(one, post)
                    why = stopped_by(per_rep_rules[r], d) if d.stop else ""
                    # a rule that stops only because the budget is spent leaves the audit to the
                    # budget, as the vectorised path does (named after the loop)
                    stop_now[i], reasons[i] = bool(d.stop) and why != BUDGET, why
                tick(1)
        t_mean[rows, look] = last_mean[rows]
        t_lo[rows, look] = last_lo[rows]
        t_hi[rows, look] = last_hi[rows]
        stopped_rows = rows[stop_now]
        stop_names[stopped_rows] = reasons[stop_now]
        active[stopped_rows] = False
        tick(reps - (0 if vectorised else rows.size))
    # replications that never stopped by the rule
    left = active & (n.sum(axis=1) >= total)
    stop_names[left] = "exhausted"
    stop_names[active & ~left] = BUDGET
    names = stop_names.astype(str)

    coords = {"rep": np.arange(reps), "look": np.arange(n_looks), "stratum": np.arange(k)}
    data_vars: dict[str, Any] = {
        "n_labels": ("rep", n.sum(axis=1)),
        "estimate": ("rep", last_mean),
        "error": ("rep", last_mean - true_value),
        "lower": ("rep", last_lo),
        "upper": ("rep", last_hi),
        "half_width": ("rep", (last_hi - last_lo) / 2),
        "covered": ("rep", (last_lo <= true_value) & (true_value <= last_hi)),
        "stopped_by": ("rep", names),
        "accepted": ("rep", np.isin(names, sorted(_certifiers(stop)))),
        "n_looks": ("rep", looks_done),
        "n": (("rep", "stratum"), n),
        "h": (("rep", "stratum"), h),
        "truth": ((), true_value),
    }
    if trajectory:
        data_vars.update(
            {
                "trajectory_n_labels": (("rep", "look"), t_n),
                "trajectory_mean": (("rep", "look"), t_mean),
                "trajectory_lower": (("rep", "look"), t_lo),
                "trajectory_upper": (("rep", "look"), t_hi),
            }
        )
    attrs = {
        "design": label,
        "design_name": design_name,
        "design_options": repr({kk: v for kk, v in design_options.items()}),
        "metric": metric,
        "truth": true_value,
        "level": level,
        "interval": "equal-tailed",
        "prior": prior_label(model, prior_desc),
        "model": model,
        "finite_population": int(finite_population),
        "budget": budget,
        "batch_size": batch_size,
        "batch_sizes": np.asarray(batches, dtype=np.int64),
        "draws": draws,
        "n_reps": reps,
        "stop": repr(stop) if stop is not None else "none",
        "strata_method": getattr(strata, "method", ""),
        "n_strata": k,
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
