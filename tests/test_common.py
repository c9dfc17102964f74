"""One common suite: the same invariants over every entry of every registry.

Like scikit-learn's ``metrics/tests/test_common.py``: each test is parametrised by a registry
(:data:`~bayes_eval.METRICS`, :data:`~bayes_eval._stratifiers.STRATIFIERS`,
:data:`~bayes_eval.allocation.ALLOCATIONS`, :data:`~bayes_eval.designs.DESIGNS`,
:data:`~bayes_eval.models.MODELS` and the stop rules of :mod:`bayes_eval.stop`), so a newly
registered entry is checked without writing a test for it; entries that need options get them
from the small tables below, and a test fails when an entry has none (so the table stays
complete).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import stop
from bayes_eval._loop import LockStepAllocator
from bayes_eval._stratifiers import STRATIFIERS
from bayes_eval.allocation import ALLOCATIONS, allocate
from bayes_eval.designs import DESIGNS, DesignState, make_design
from bayes_eval.metrics import METRICS
from bayes_eval.models import DEFAULT_MODEL, MODELS
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.priors import Prior

RNG = np.random.default_rng(20251123)


# ============================================================================ metrics
def _counts(shape):
    return tuple(RNG.integers(0, 50, size=shape).astype(np.float64) for _ in range(4))


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_range_dtype_and_broadcasting(name):
    """Values lie in [0, 1] wherever the population has items; float64; the result has the
    broadcast shape of the counts (scalars, draws (D,), replications x draws (R, D))."""
    f = METRICS[name].func
    tp, fp, fn, tn = _counts((7, 300))
    tn = tn + 1  # at least one item everywhere (N > 0); predicted sides may still be empty
    before = [a.copy() for a in (tp, fp, fn, tn)]
    with np.errstate(all="raise"):
        v = np.asarray(f(tp, fp, fn, tn))
    assert v.shape == (7, 300) and v.dtype == np.float64
    for a, b in zip((tp, fp, fn, tn), before, strict=True):
        np.testing.assert_array_equal(a, b)  # inputs untouched
    defined = np.isfinite(v)
    assert np.all((v[defined] >= 0) & (v[defined] <= 1))
    # broadcasting: a scalar count against draws gives the draws' shape, same values
    row = np.asarray(f(tp[0], fp[0, 0], fn[0], tn[0]))
    assert row.shape == (300,)
    ref = np.asarray(f(tp[0], np.full(300, fp[0, 0]), fn[0], tn[0]))
    np.testing.assert_array_equal(row, ref)
    # scalars in, a 0-d value out
    assert np.asarray(f(3.0, 1.0, 2.0, 4.0)).shape == ()


DEGENERATE = {
    # which predicted side / class is empty: (tp, fp, fn, tn)
    "no predicted positives": (0.0, 0.0, 5.0, 20.0),
    "no predicted negatives": (5.0, 20.0, 0.0, 0.0),
    "no positives": (0.0, 7.0, 0.0, 20.0),
    "no negatives": (9.0, 0.0, 4.0, 0.0),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_zero_division_is_documented(name, case):
    """An empty denominator never warns; the value is NaN exactly when the metric declares the
    missing predicted side necessary (``needs_predicted_positive`` / ``_negative``), otherwise a
    number in [0, 1] (the metric's documented convention, e.g. recall 1.0 without positives)."""
    m = METRICS[name]
    tp, fp, fn, tn = DEGENERATE[case]
    with np.errstate(all="raise"):
        v = float(m.func(np.array(tp), np.array(fp), np.array(fn), np.array(tn)))
    undefined = (m.needs_predicted_positive and tp + fp == 0) or (
        m.needs_predicted_negative and tn + fn == 0
    )
    if undefined:
        assert np.isnan(v), f"{name} on {case}: {v}"
    else:
        assert 0.0 <= v <= 1.0, f"{name} on {case}: {v}"


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_has_a_description(name):
    assert METRICS[name].description, f"metric {name!r} has no docstring"


# ============================================================================ stratifiers
@pytest.mark.parametrize("name", sorted(STRATIFIERS))
@pytest.mark.parametrize("n", [1, 2, 5])
def test_stratifier_kernel_edges(name, n):
    """Kernels return at most n - 1 increasing lower edges inside (min, max], reproducibly from
    ``rng``, without touching the values."""
    values = np.concatenate([RNG.beta(2, 5, 3000), np.full(200, 0.25)])  # with a tie block
    keep = values.copy()
    edges = np.asarray(STRATIFIERS[name](values, n, rng=np.random.default_rng(1)), dtype=float)
    again = np.asarray(STRATIFIERS[name](values, n, rng=np.random.default_rng(1)), dtype=float)
    np.testing.assert_array_equal(values, keep)
    np.testing.assert_array_equal(edges, again)
    assert edges.ndim == 1 and edges.size <= n - 1
    assert np.all(np.diff(edges) > 0)
    if edges.size:
        assert values.min() < edges.min() and edges.max() <= values.max()


@pytest.mark.parametrize("name", sorted(STRATIFIERS))
@pytest.mark.parametrize("variable", ["score", "confidence"])
def test_stratify_contract(name, variable):
    """Through :func:`bayes_eval.stratify`: strata partition the population, none is empty,
    each lies on one predicted side (the threshold is a boundary), score ranges are ordered
    within a side, and a tie is never split."""
    scores = np.round(RNG.beta(2, 3, 4000), 3)  # many ties
    pop = be.Population(scores, threshold=0.4)
    s = be.stratify(pop, method=name, n_strata=4, variable=variable, rng=0)
    assert s.sizes.sum() == pop.size and np.all(s.sizes > 0)
    a = np.asarray(s.assignment)
    np.testing.assert_array_equal(np.bincount(a, minlength=s.n_strata), s.sizes)
    np.testing.assert_array_equal(s.predicted[a], pop.predictions)
    for side in (False, True):
        ks = np.flatnonzero(s.predicted == side)
        assert np.all(s.score_max[ks[:-1]] < s.score_min[ks[1:]]) or variable == "confidence"
    # a tie is never split: every distinct score lies in one stratum
    per_value = {}
    for v, k in zip(scores, a, strict=True):
        assert per_value.setdefault(v, k) == k
    again = be.stratify(pop, method=name, n_strata=4, variable=variable, rng=0)
    np.testing.assert_array_equal(np.asarray(again.assignment), a)


# ============================================================================ allocations
ALLOCATION_OPTIONS = {
    "proportional": {},
    "equal": {},
    "neyman": {"rates": [0.05, 0.3, 0.5, 0.9]},
    "posterior_variance": {"metric": "f1", "positives": [1, 2, 3, 4]},
}


def test_allocation_options_cover_the_registry():
    assert set(ALLOCATION_OPTIONS) == set(ALLOCATIONS)


@pytest.mark.parametrize("method", ALLOCATIONS)
@pytest.mark.parametrize("n", [0, 1, 37, 400])
def test_allocation_sums_to_n_within_capacity(method, n):
    """Allocations are non-negative integers summing to n that never exceed the unlabelled
    items of a stratum; deterministic; the inputs are not modified."""
    sizes = np.array([60, 150, 40, 300])
    labelled = np.array([10, 2, 35, 5])
    opts = dict(ALLOCATION_OPTIONS[method])
    keep = sizes.copy(), labelled.copy()
    out = allocate(sizes, n, method=method, labelled=labelled, **opts)
    assert out.dtype == np.int64 and out.shape == (4,)
    assert out.sum() == n and np.all(out >= 0) and np.all(out <= sizes - labelled)
    np.testing.assert_array_equal(out, allocate(sizes, n, method=method, labelled=labelled, **opts))
    np.testing.assert_array_equal(sizes, keep[0])
    np.testing.assert_array_equal(labelled, keep[1])


@pytest.mark.parametrize("method", ALLOCATIONS)
def test_allocation_refuses_more_than_the_unlabelled(method):
    opts = dict(ALLOCATION_OPTIONS[method])
    with pytest.raises(ValueError, match="n=551 is more than the 550 unlabelled"):
        allocate(np.array([60, 150, 40, 300]), 551, method=method, **opts)


@pytest.mark.parametrize("method", ALLOCATIONS)
def test_allocation_single_stratum_takes_everything(method):
    """One stratum: every label goes to it, whatever the method (the unstratified answer)."""
    opts = {"neyman": {"rates": [0.3]}, "posterior_variance": {"metric": "f1"}}.get(method, {})
    np.testing.assert_array_equal(allocate(np.array([500]), 37, method=method, **opts), [37])


# ============================================================================ designs
DESIGN_OPTIONS = {"neyman_oracle": {"rates": [0.02, 0.1, 0.3, 0.6, 0.8, 0.95]}}


def _design_state(shape=(6,), seed=0, metric="f1"):
    gen = np.random.default_rng(seed)
    sizes = np.array([900, 700, 500, 300, 200, 100])
    n = gen.integers(0, 40, size=shape)
    h = gen.binomial(n, 0.4)
    available = sizes - n - gen.integers(0, 5, size=shape)
    return DesignState(
        sizes=sizes,
        predicted=np.array([False, False, False, True, True, True]),
        n=n,
        h=h,
        available=available,
        prior_a=np.full(6, 0.5),
        prior_b=np.full(6, 0.5),
        metric=metric,
        round=int(gen.integers(0, 5)),
        score_mean=np.array([0.05, 0.15, 0.3, 0.6, 0.8, 0.95]),
    )


def _state_arrays(state):
    return {k: np.array(getattr(state, k), copy=True) for k in ("sizes", "n", "h", "available")}


@pytest.mark.parametrize("name", sorted(DESIGNS))
@pytest.mark.parametrize("metric", ["f1", "precision", "accuracy"])
@pytest.mark.parametrize("batch", [0, 1, 30, 250])
def test_design_proposals(name, metric, batch):
    """A batch is split into non-negative integers that sum to the batch and never exceed the
    items left in a stratum; the state is not modified; the same rng seed gives the same
    split, also from a design object that has already allocated for another state (a design
    keeps no memory of its own: its memory is the ``DesignState``)."""
    state = _design_state(metric=metric)
    before = _state_arrays(state)
    design = make_design(name, **DESIGN_OPTIONS.get(name, {}))
    out = np.asarray(design.allocate(state, batch, np.random.default_rng(5)))
    assert out.shape == (6,) and np.issubdtype(out.dtype, np.integer)
    assert out.sum() == batch and np.all(out >= 0) and np.all(out <= state.available)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(state, k), v, err_msg=f"{name} modified {k}")
    fresh = make_design(name, **DESIGN_OPTIONS.get(name, {}))
    np.testing.assert_array_equal(fresh.allocate(state, batch, np.random.default_rng(5)), out)
    design.allocate(_design_state(seed=9, metric=metric), 40, np.random.default_rng(6))
    np.testing.assert_array_equal(design.allocate(state, batch, np.random.default_rng(5)), out)


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_design_refuses_more_than_left(name):
    state = _design_state()
    design = make_design(name, **DESIGN_OPTIONS.get(name, {}))
    with pytest.raises(ValueError, match="batch_size="):
        design.allocate(state, int(np.sum(state.available)) + 1, np.random.default_rng(0))


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_design_many_in_lock_step(name):
    """Every design in the lock-step engine (its ``allocate_many``, the vectorised random draw, or
    one copy per audit): every row of an (R, K) state sums to the batch within its capacity."""
    design = make_design(name, **DESIGN_OPTIONS.get(name, {}))
    state = _design_state(shape=(5, 6), seed=3)
    out = np.asarray(LockStepAllocator(design, 5)(state, 25, np.random.default_rng(2)))
    assert out.shape == (5, 6)
    np.testing.assert_array_equal(out.sum(axis=1), 25)
    assert np.all(out >= 0) and np.all(out <= state.available)
    if hasattr(design, "allocate_many"):  # the engine's call is the design's own lock-step form
        direct = design.allocate_many(state, 25, np.random.default_rng(2))
        np.testing.assert_array_equal(out, direct)


# ============================================================================ models
MODEL_OPTIONS = {"hierarchical": {"method": "laplace"}}  # NUTS is tested in test_hierarchical


@pytest.fixture(scope="module")
def stratified():
    gen = np.random.default_rng(11)
    scores = gen.random(6000)
    truth = gen.random(6000) < scores
    strata = be.stratify(be.Population(scores, threshold=0.5), n_strata=3)
    ids = gen.choice(6000, 240, replace=False)
    n, h = be.posterior.stratum_counts(strata, ids, truth[ids])
    return strata, n, h


def _theta(post, shape):
    return post.datatree["posterior"]["theta"].values.reshape(shape)


@pytest.mark.parametrize("name", sorted({DEFAULT_MODEL, *MODELS}))
def test_model_draws(name, stratified):
    """Every model gives ``theta`` of shape (draws, K) in [0, 1], reproducible from ``rng``
    (another seed, other draws), and names itself in the posterior it produces."""
    strata, n, h = stratified
    prior = Prior(np.full(6, 0.5), np.full(6, 0.5), "jeffreys")
    opts = MODEL_OPTIONS.get(name, {})

    def post(seed):
        return estimate_from_stratum_counts(
            strata, n, h, prior=prior, draws=1500, rng=seed, model=name, **opts
        )

    a, b, c = post(4), post(4), post(5)
    theta = _theta(a, (-1, strata.n_strata))
    assert theta.shape == (1500, strata.n_strata)
    assert np.all((theta >= 0) & (theta <= 1))
    np.testing.assert_array_equal(
        theta, b.datatree["posterior"]["theta"].values.reshape(theta.shape)
    )
    assert not np.array_equal(theta, c.datatree["posterior"]["theta"].values.reshape(theta.shape))
    assert a.model == name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_registered_model_call_contract(name, stratified):
    """The registry entry itself: ``(theta, extra_groups, attrs)`` with ``theta`` (draws, K)."""
    strata, n, h = stratified
    theta, groups, attrs = MODELS[name](
        strata=strata,
        n=n,
        h=h,
        prior_a=np.full(3 * 2, 0.5),
        prior_b=np.full(3 * 2, 0.5),
        draws=800,
        rng=1,
        **MODEL_OPTIONS.get(name, {}),
    )
    assert np.shape(theta) == (800, strata.n_strata)
    assert isinstance(groups, dict) and isinstance(attrs, dict)


# ============================================================================ stop rules
def _rules():
    return [
        stop.Budget(120),
        stop.HalfWidth(0.08, level=0.9, rounds=2),
        stop.LowerBoundAbove(0.55, level=0.9),
        stop.Accept(0.55, level=0.9, corrected=False),
        stop.Budget(150) | stop.HalfWidth(0.05, level=0.9),
        stop.LowerBoundAbove(0.5, level=0.8) & stop.HalfWidth(0.1, level=0.9, rounds=2),
    ]


def test_every_exported_rule_is_in_the_suite():
    concrete = {
        cls
        for name in stop.__all__
        if inspect.isclass(cls := getattr(stop, name))
        and issubclass(cls, stop.StopRule)
        and not inspect.isabstract(cls)
    }
    assert concrete == {type(r) for r in _rules()}


@pytest.fixture(scope="module")
def looks(stratified):
    """Three replications, four looks each: (n_labels, posterior) from growing counts."""
    strata, _, _ = stratified
    gen = np.random.default_rng(21)
    prior = Prior(np.full(6, 0.5), np.full(6, 0.5), "jeffreys")
    rates = np.array([0.05, 0.25, 0.45, 0.55, 0.75, 0.95])
    out = []
    for _ in range(3):
        n = np.zeros(6, dtype=np.int64)
        h = np.zeros(6, dtype=np.int64)
        seq = []
        for _ in range(4):
            add = gen.multinomial(40, np.full(6, 1 / 6))
            n += add
            h += gen.binomial(add, rates)
            post = estimate_from_stratum_counts(strata, n, h, prior=prior, draws=2000, rng=gen)
            seq.append((int(n.sum()), post))
        out.append(seq)
    return strata, prior, out


@pytest.mark.parametrize("index", range(len(_rules())))
def test_rule_check_and_check_many_agree(index, looks):
    """``check`` one look at a time and the vectorised ``check_many`` over replications stop at
    the same looks (same draws)."""
    strata, prior, reps = looks
    procedure = stop.Procedure(
        strata=strata,
        metric="f1",
        design="proportional",
        design_options={},
        model=DEFAULT_MODEL,
        prior=prior,
        batch_size=40,
        budget=400,
    )
    one_at_a_time = np.zeros((len(reps), 4), dtype=bool)
    for r, seq in enumerate(reps):
        rule = _rules()[index]
        rule.prepare(procedure)
        for j, (n_labels, post) in enumerate(seq):
            look = stop.Look(procedure, n_labels, looks=j + 1)
            one_at_a_time[r, j] = rule.check(look, post).stop
    rule = _rules()[index]
    rule.prepare(procedure)
    assert stop.supports_many(rule)
    state = rule.start_many(len(reps))
    rows = np.arange(len(reps))
    many = np.zeros_like(one_at_a_time)
    for j in range(4):
        draws = np.stack([seq[j][1].draws("f1") for seq in reps])
        n_labels = np.array([seq[j][0] for seq in reps])
        many[:, j] = rule.check_many(draws, n_labels, state, rows)
    np.testing.assert_array_equal(many, one_at_a_time)
    assert one_at_a_time.any()  # the suite exercises stopping, not only going on


@pytest.mark.parametrize("index", range(len(_rules())))
def test_rule_repr_rebuilds_the_rule(index):
    """``repr`` names the rule and its parameters: evaluated in :mod:`bayes_eval.stop` it
    builds a rule with the same ``repr``."""
    rule = _rules()[index]
    text = repr(rule)
    namespace = {name: getattr(stop, name) for name in stop.__all__}
    assert repr(eval(text, namespace)) == text
