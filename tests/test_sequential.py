"""Sequential correction (bayes_eval.sequential): the peeking problem of Webber et al. and its fix.

Statistical claims are checked by seeded simulation with tolerances from the Monte Carlo error.
Provenance of the reference numbers: Webber, Bagdouri, Lewis & Oard (2013),
``../shared/seeds/002_bcc5f0faf615c660.txt`` — naive false accept 31.55% with a look every 20 labels
up to 10,000 (Section 3.1); nominal 99.5% / 97% / 98% for actual 95% (Sections 3.1-3.3).
"""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import sequential as seq
from bayes_eval.metrics import METRICS, metric_of_positives
from bayes_eval.population import Population
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.sequential._confseq import betting_lower_bound
from bayes_eval.strata import Strata

SIZES = np.array([6000, 2000, 1200, 800])
PRED = np.array([False, False, True, True])
RATES = [0.02, 0.15, 0.6, 0.9]


def _strata(sizes, predicted):
    k = len(sizes)
    pop = Population(
        np.arange(int(np.sum(sizes)), dtype=float), predictions=np.repeat(predicted, sizes)
    )
    return Strata(
        pop,
        np.repeat(np.arange(k), sizes),
        predicted,
        sizes,
        np.zeros(k),
        np.zeros(k),
        method="custom",
    )


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("metric", seq.SUPPORTED_METRICS)
def test_linear_form_is_the_metric_inequality(metric):
    """metric >= t  <=>  sum w_k P_k >= c, on random populations (registry-driven)."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(2, 6))
        predicted = np.r_[False, True, rng.random(k - 2) < 0.5]
        sizes = rng.integers(1, 500, k)
        pos = rng.integers(0, sizes + 1)
        t = float(rng.uniform(0.05, 0.95))
        w, c = seq.linear_form(metric, t, predicted, sizes)
        m = metric_of_positives(metric, pos, sizes, predicted)
        lhs = float(np.dot(w, pos))
        if abs(lhs - c) > 1e-9 * max(1.0, abs(c)):  # skip exact ties (float rounding)
            assert (m >= t) == (lhs >= c)


def test_unsupported_metric_is_refused():
    with pytest.raises(ValueError, match="balanced_accuracy"):
        seq.linear_form("balanced_accuracy", 0.8, PRED, SIZES)
    with pytest.raises(ValueError, match="metric='balanced_accuracy'"):
        seq.calibrate_sequential(
            sizes=SIZES, predicted=PRED, metric="balanced_accuracy", target=0.8, n_sims=200, rng=0
        )


@pytest.mark.parametrize(
    ("metric", "n", "h"),
    [
        ("f1", [10, 20, 30, 15], [0, 1, 20, 14]),
        ("f1", [60, 40, 80, 50], [1, 5, 47, 44]),
        ("precision", [5, 5, 12, 9], [0, 1, 8, 8]),
        ("recall", [40, 30, 25, 20], [1, 4, 15, 18]),
        ("accuracy", [15, 15, 15, 15], [0, 2, 9, 13]),
    ],
)
def test_pearson3_matches_exact_monte_carlo(metric, n, h):
    """The fast P(metric >= t) against 200,000 exact Monte Carlo draws of the same posterior, at
    targets placed at the posterior 10%, 1% and 0.5% quantiles. Tolerance: the documented
    approximation error (0.010 near P = 0.9; 0.002 at P >= 0.99, where corrected levels lie)
    + 4 MC standard errors."""
    st = _strata(SIZES, PRED)
    post = estimate_from_stratum_counts(
        st,
        np.array(n),
        np.array(h),
        draws=200_000,
        rng=3,
        metrics=(metric,),
        sampler="exact",
        model="independent",
    )
    x = post.draws(metric)
    for q, budget in ((0.10, 0.010), (0.01, 0.002), (0.005, 0.002)):
        t = float(np.quantile(x, q))
        mc = post.prob_at_least(metric, t)
        approx = seq.approx_prob_at_least(post, metric, t)
        se = np.sqrt(mc * (1 - mc) / x.size)
        assert abs(approx - mc) <= budget + 4 * se, (q, approx, mc)


def test_least_favourable_truth_sits_at_the_target():
    for metric, value in (("f1", 0.7), ("precision", 0.75), ("accuracy", 0.9), ("recall", 0.6)):
        pos = seq.least_favourable_truth(SIZES, PRED, RATES, metric=metric, value=value)
        m = metric_of_positives(metric, pos, SIZES, PRED)
        assert m <= value + 1e-12
        assert value - m < 5.0 / SIZES.sum()  # integer rounding only
    with pytest.raises(ValueError, match="not attainable"):
        seq.least_favourable_truth(
            SIZES, np.zeros(4, dtype=bool), RATES, metric="precision", value=0.8
        )
    with pytest.raises(ValueError, match="not attainable"):
        seq.least_favourable_truth(SIZES, PRED, RATES, metric="f1", value=0.0)


def test_strict_least_favourable_truth_is_strictly_below_the_target():
    """Where the integers allow the target exactly (precision 13/20 with 20 predicted positives in
    one stratum), the default sits at it and ``strict=True`` one item below: a false claim."""
    sizes, pred = np.array([500, 20]), np.array([False, True])
    at = seq.least_favourable_truth(sizes, pred, [0.1, 0.5], metric="precision", value=0.65)
    below = seq.least_favourable_truth(
        sizes, pred, [0.1, 0.5], metric="precision", value=0.65, strict=True
    )
    assert metric_of_positives("precision", at, sizes, pred) == 0.65
    assert metric_of_positives("precision", below, sizes, pred) == 0.6
    for metric, value in (("f1", 0.7), ("precision", 0.75), ("recall", 0.6)):
        pos = seq.least_favourable_truth(
            SIZES, PRED, RATES, metric=metric, value=value, strict=True
        )
        m = metric_of_positives(metric, pos, SIZES, PRED)
        assert value - 10.0 / SIZES.sum() < m < value


# ------------------------------------------------------------------ Webber's phenomenon and fix
def test_naive_peeking_over_accepts_and_the_correction_fixes_it():
    """Synthetic population, F1 target 0.7, a look every 20 labels up to 600.

    Naive nominal 95%: false-accept far above 5% (Webber et al.: 31.55% with 500 looks; fewer
    looks here, so less). Corrected level from one simulation, checked on an independent one:
    false-accept <= 5% + 3 MC s.e."""
    kw = dict(
        sizes=SIZES, predicted=PRED, metric="f1", target=0.7, rates=RATES, budget=600, batch_size=20
    )
    cal = seq.calibrate_sequential(**kw, n_sims=3000, rng=11)
    naive, se = cal.accept_rate(0.95)
    assert naive > 0.05 + 6 * se
    assert naive > 0.12
    level = cal.corrected_level(0.95)
    assert 0.97 < level < 0.999
    check = seq.calibrate_sequential(**kw, n_sims=3000, rng=12)
    fa, se2 = check.accept_rate(level)
    assert fa <= 0.05 + 3 * se2
    # curve: actual level is below nominal, non-decreasing in nominal
    actual = cal.curve["actual"].values
    assert np.all(np.diff(actual) >= 0)
    assert np.all(actual <= cal.curve["nominal"].values + 3 * cal.curve["mcse"].values)


def test_labels_to_accept_when_the_truth_is_above_target():
    """Truth at target + 0.05: both rules accept; the corrected one needs more labels, and the
    ratio is reported (benchmarks/results/bench_sequential.txt)."""
    kw = dict(
        sizes=SIZES, predicted=PRED, metric="f1", target=0.7, rates=RATES, budget=600, batch_size=20
    )
    level = seq.calibrate_sequential(**kw, n_sims=2000, rng=5).corrected_level(0.95)
    good = seq.calibrate_sequential(**kw, truth_metric=0.75, n_sims=1000, rng=6)
    assert not good.at_target
    naive, _ = good.labels_to_accept(0.95)
    corr, _ = good.labels_to_accept(level)
    assert naive < corr < 2.0 * naive
    assert good.accept_rate(0.95)[0] > good.accept_rate(level)[0] > 0.3
    with pytest.raises(ValueError, match="at the target"):
        good.corrected_level(0.95)


def test_real_population_naive_false_accept():
    """Real data (DAAG nassCDS via bayes_eval.datasets): the audit's strata, the true positives of
    every stratum, target = the true F1. Naive peeking every 20 labels over-accepts."""
    lp = be.datasets.load("nasscds")
    strata = be.stratify(lp.population, method="equal_size", n_strata=4)
    pos = np.bincount(strata.assignment, weights=lp.truth, minlength=strata.n_strata)
    pos = pos.astype(np.int64)
    f1 = lp.true_metrics()["f1"]
    cal = seq.calibrate_sequential(
        strata,
        metric="f1",
        target=f1,
        positives=pos,
        design="proportional",
        budget=1000,
        n_sims=1500,
        rng=2,
    )
    assert abs(cal.truth_metric - f1) < 1e-12
    fa, se = cal.accept_rate(0.95)
    assert fa > 0.05 + 5 * se


def test_generic_design_path_matches_vectorised_random():
    """A design object (per-path allocate calls) gives the statistics of the vectorised path."""
    rnd = be.make_design("random")

    class Wrapped:
        name = "wrapped-random"

        def allocate(self, state, batch_size, rng):
            return rnd.allocate(state, batch_size, rng)

    kw = dict(
        sizes=SIZES,
        predicted=PRED,
        metric="precision",
        target=0.75,
        rates=RATES,
        budget=200,
        batch_size=20,
        n_sims=600,
    )
    a = seq.calibrate_sequential(**kw, design="random", rng=1).accept_rate(0.9)
    b = seq.calibrate_sequential(**kw, design=Wrapped(), rng=2).accept_rate(0.9)
    assert abs(a[0] - b[0]) < 4 * np.hypot(a[1], b[1])


class _AllocateOnly:
    """A registered design seen through ``allocate`` only (no ``allocate_many``), which forces
    the per-audit path of the calibration; keeps the design's ``batch_schedule``."""

    def __init__(self, name, **options):
        self.inner = be.make_design(name, **options)
        self.name = f"per-audit {name}"
        if hasattr(self.inner, "batch_schedule"):
            self.batch_schedule = self.inner.batch_schedule

    def allocate(self, state, batch_size, rng):
        return self.inner.allocate(state, batch_size, rng)


_MANY_KW = dict(
    sizes=SIZES, predicted=PRED, metric="f1", target=0.7, rates=RATES, budget=200, n_sims=300
)


@pytest.mark.parametrize(
    ("name", "options"), [("posterior_variance", {}), ("opt_a1", {"n_ini": 10}), ("opt_a2", {})]
)
def test_allocate_many_path_is_the_per_audit_path(name, options):
    """These designs are deterministic functions of each audit's own state (they draw nothing
    from the generator), so the batched ``allocate_many`` path and one ``allocate`` call per
    audit (each audit with its own copy of the design, e.g. OPT-A1's frozen weights) must give
    identical simulations from the same seed."""
    many = seq.calibrate_sequential(**_MANY_KW, design=name, design_options=options, rng=5)
    one = seq.calibrate_sequential(**_MANY_KW, design=_AllocateOnly(name, **options), rng=5)
    np.testing.assert_array_equal(many.looks, one.looks)
    np.testing.assert_array_equal(many.prob, one.prob)
    # and the simulation is not degenerate: some audits accept, not all
    assert 0.0 < many.accept_rate(0.9)[0] < 1.0


def test_allocate_many_path_matches_per_audit_statistics_online_optimal():
    """online_optimal draws its batches from the generator, so the two paths differ draw by
    draw; their accept rates must agree within Monte Carlo error (4 combined s.e.)."""
    kw = {**_MANY_KW, "n_sims": 600}
    a = seq.calibrate_sequential(**kw, design="online_optimal", rng=1).accept_rate(0.9)
    b = seq.calibrate_sequential(**kw, design=_AllocateOnly("online_optimal"), rng=2)
    b = b.accept_rate(0.9)
    assert abs(a[0] - b[0]) < 4 * np.hypot(a[1], b[1])


def test_batch_schedule_sets_the_batches_and_looks():
    """As in Audit.run: OPT-A1's initial sample of K n_ini labels, then n_step = 2K per batch
    (batch_size is not used), a look after every batch; given looks are taken at the end of
    the batch that reaches them."""
    kw = {**_MANY_KW, "design": "opt_a1", "design_options": {"n_ini": 10}, "batch_size": 7}
    cal = seq.calibrate_sequential(**kw, rng=0)
    np.testing.assert_array_equal(cal.looks, np.arange(40, 201, 8))
    cal = seq.calibrate_sequential(**kw, looks=[20, 40, 100, 190], rng=0)
    np.testing.assert_array_equal(cal.looks, [40, 104, 192])
    # budget not on a batch end: the last batch is cut to it
    cal = seq.calibrate_sequential(**{**kw, "budget": 203}, rng=0)
    assert cal.looks[-1] == 203 and cal.looks[-2] == 200
    with pytest.raises(ValueError, match="goes past the budget"):
        seq.calibrate_sequential(**kw, looks=[40, 300], rng=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        seq.calibrate_sequential(**kw, looks=[40, 40], rng=0)


def test_invalid_allocation_from_a_design_is_an_error():
    class Greedy:
        name = "greedy"

        def allocate_many(self, state, batch_size, rng):
            out = np.zeros(state.n.shape, dtype=np.int64)
            out[:, 0] = batch_size + 1  # one too many
            return out

        def allocate(self, state, batch_size, rng):  # pragma: no cover - not reached
            raise AssertionError

    with pytest.raises(RuntimeError, match="design 'greedy' returned an invalid allocation"):
        seq.calibrate_sequential(**_MANY_KW, design=Greedy(), rng=0)


# ------------------------------------------------------------------ bad input
def test_bad_inputs_are_clear_errors():
    kw = dict(sizes=SIZES, predicted=PRED, metric="f1", rates=RATES)
    with pytest.raises(ValueError, match=r"target=1.5 is outside the range"):
        seq.calibrate_sequential(**kw, target=1.5, n_sims=200)
    with pytest.raises(ValueError, match="goes past the budget"):
        seq.calibrate_sequential(**kw, target=0.7, budget=100, looks=[20, 60, 120], n_sims=200)
    with pytest.raises(ValueError, match="multiples of batch_size"):
        seq.calibrate_sequential(**kw, target=0.7, budget=100, looks=[20, 50], n_sims=200)
    with pytest.raises(ValueError, match="budget=20000 is more than"):
        seq.calibrate_sequential(**kw, target=0.7, budget=20_000, n_sims=200)
    with pytest.raises(ValueError, match="n_sims=50 is too few"):
        seq.calibrate_sequential(**kw, target=0.7, n_sims=50)
    cal = seq.calibrate_sequential(**kw, target=0.7, budget=100, n_sims=300, rng=0)
    with pytest.raises(ValueError, match=r"n_sims=300 is too few for actual=0.95"):
        cal.corrected_level(0.95)
    with pytest.raises(ValueError, match=r"actual=1.0 is outside the open interval"):
        cal.corrected_level(1.0)
    with pytest.raises(ValueError, match="rates="):
        seq.calibrate_sequential(
            sizes=SIZES, predicted=PRED, target=0.7, rates="scores", n_sims=200
        )
    with pytest.raises(ValueError, match="needs pilot"):
        seq.calibrate_sequential(sizes=SIZES, predicted=PRED, target=0.7, rates="pilot", n_sims=200)


def test_pilot_rates_and_repr():
    cal = seq.calibrate_sequential(
        sizes=SIZES,
        predicted=PRED,
        target=0.7,
        budget=100,
        pilot=([20, 20, 20, 20], [0, 3, 12, 18]),
        n_sims=2000,
        rng=0,
    )
    assert cal.rates_source == "pilot"
    np.testing.assert_allclose(cal.truth["rate"].values, (0.5 + np.array([0, 3, 12, 18])) / 21)
    assert "SequentialCalibration(metric='f1'" in repr(cal)
    assert "nominal" in cal.describe(0.95)


# ------------------------------------------------------------------ anytime-valid comparison
def test_confidence_sequence_is_anytime_valid():
    """At the true mean, the running lower bound exceeds it on at most alpha of the paths
    (Ville's inequality), and it approaches the mean as labels accrue."""
    rng = np.random.default_rng(4)
    n_pop, m_true, t = 5000, 0.7, 400
    values = np.zeros(n_pop)
    values[: int(m_true * n_pop)] = 1.0
    x = np.stack([values[rng.choice(n_pop, t, replace=False)] for _ in range(400)])
    lb = betting_lower_bound(x, n_pop, 0.05, grid_size=200, at=np.arange(20, t + 1, 20))
    lb = np.maximum.accumulate(lb, axis=1)
    crossed = (lb > m_true).any(axis=1).mean()
    assert crossed <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    assert 0.55 < np.median(lb[:, -1]) <= m_true


def test_compare_anytime_small():
    ds = seq.compare_anytime(
        np.array([1500, 1000, 1000, 1500]),
        PRED,
        metric="accuracy",
        target=0.8,
        rates=[0.1, 0.3, 0.7, 0.9],
        budget=300,
        n_sims=200,
        calibration_sims=1900,
        rng=0,
    )
    acc = ds["accept_rate"]
    assert acc.sel(procedure="bayes_naive", truth="at_target") > acc.sel(
        procedure="bayes_calibrated", truth="at_target"
    )
    assert ds.attrs["level_used"] > 0.95
    se = float(ds["accept_mcse"].sel(procedure="confidence_sequence", truth="at_target"))
    assert float(acc.sel(procedure="confidence_sequence", truth="at_target")) <= 0.05 + 3 * se
    with pytest.raises(ValueError, match="metric='f1'"):
        seq.compare_anytime(SIZES, PRED, metric="f1", target=0.8)


def test_metric_registry_covered():
    """Every metric that is linear in the stratum rates is supported by the calibration."""
    linear = {m.name for m in METRICS.values() if m.linear_in_rates}
    assert linear <= set(seq.SUPPORTED_METRICS)


def test_look_schedules():
    np.testing.assert_array_equal(
        seq.geometric_looks(20, 2000), [20, 40, 80, 160, 320, 640, 1280, 2000]
    )
    np.testing.assert_array_equal(
        seq._as_schedule(20, 110, None, 10_000), [20, 40, 60, 80, 100, 110]
    )
    with pytest.raises(ValueError, match="factor=1"):
        seq.geometric_looks(20, 2000, factor=1)
    # fewer looks, smaller correction (same seed, same truth)
    kw = dict(
        sizes=SIZES,
        predicted=PRED,
        metric="f1",
        target=0.7,
        rates=RATES,
        budget=640,
        n_sims=2000,
        rng=3,
    )
    every = seq.calibrate_sequential(**kw).corrected_level(0.95)
    geo = seq.calibrate_sequential(**kw, looks=seq.geometric_looks(20, 640)).corrected_level(0.95)
    assert geo < every
