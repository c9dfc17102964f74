"""The exact lattice part of the calibration's acceptance probability (``bayes_eval._lattice``).

Near a census a stratum's remaining positives take a handful of integer values and the
continuous Pearson III law of ``_cumulants`` is far off; the strata with at most
``LATTICE_REMAINDER`` unlabelled items are summed exactly (calibration version 17). Checked
against the exact beta-binomial, against Monte Carlo draws of the posterior the audit samples,
and for leaving every other row as it was bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayes_eval import _lattice
from bayes_eval import sequential as seq
from bayes_eval._cumulants import prob_at_least
from bayes_eval.population import Population
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.sequential._linear import beta_form_cumulants, linear_form
from bayes_eval.strata import Strata

JEFFREYS = np.array([0.5])


def _strata(sizes, predicted):
    k = len(sizes)
    pop = Population(
        np.arange(int(np.sum(sizes)), dtype=float), predictions=np.repeat(predicted, sizes)
    )
    return Strata(
        pop, np.repeat(np.arange(k), sizes), predicted, sizes, np.zeros(k), np.zeros(k),
        method="custom",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("size", "n", "h", "need"),
    [
        (868, 865, 320, 1),  # session 46's nafld_death stratum: Pearson 0.916, exact 0.750
        (40, 30, 20, 6),  # Pearson 0.657, exact 0.749 (the other direction)
        (40, 30, 19, 7),
        (40, 36, 26, 0),  # the claim holds whatever the last 4 are
        (868, 860, 320, 1),
        (868, 700, 262, 60),
        (300, 44, 40, 250),  # 256 unlabelled: the largest exact remainder
    ],
)
def test_one_stratum_is_the_exact_beta_binomial(size, n, h, need):
    """P(precision >= t) of one predicted-positive stratum is the beta-binomial tail to 1e-12."""
    sizes = np.array([size])
    t = (h + need) / size - 1e-9  # the claim needs `need` more positives
    w, c = linear_form("precision", t, np.array([True]), sizes)
    got = float(seq.prob_linear_ge(np.array([n]), np.array([h]), JEFFREYS, JEFFREYS, sizes, w, c))
    exact = float(stats.betabinom(size - n, 0.5 + h, 0.5 + n - h).sf(need - 1)) if need else 1.0
    assert got == pytest.approx(exact, abs=1e-12)


def test_the_continuous_law_alone_is_off_near_a_census():
    """What version 17 fixes (so the test above can fail): the Pearson law of the same
    cumulants misses the nafld_death stratum's exact 0.750 by more than 0.15."""
    sizes, n, h = np.array([868]), np.array([865]), np.array([320])
    w, c = linear_form("precision", 321 / 868 - 1e-9, np.array([True]), sizes)
    k = beta_form_cumulants(n, h, JEFFREYS, JEFFREYS, sizes, w)
    exact = float(stats.betabinom(3, 320.5, 545.5).sf(0))
    assert abs(float(prob_at_least(*k, c)) - exact) > 0.15


@pytest.mark.parametrize("metric", ["precision", "recall", "f1", "accuracy"])
@pytest.mark.parametrize(
    ("n", "h"),
    [
        ([300, 200, 52, 38], [2, 9, 30, 33]),  # both predicted-positive strata nearly censused
        ([300, 1750, 30, 39], [1, 80, 18, 35]),  # and one predicted-negative stratum too
    ],
)
def test_mixed_strata_match_the_posterior_draws(metric, n, h):
    """With exact and continuous strata together, P(metric >= t) against 400,000 exact Monte
    Carlo draws of the posterior the audit samples, at targets at its 50 %, 10 % and 2 %
    quantiles (just above them: the draws sit on a lattice). Tolerance: the continuous part's
    Pearson error (as in ``test_sequential.py``: 0.015 at the median -- 0.008 measured for
    accuracy here, where a skewed 5,700-item remainder is continuous --, 0.010 near P = 0.9,
    0.004 near 0.98) + 4 MC standard errors; precision, whose continuous part is empty here,
    4 MC standard errors only."""
    sizes, pred = np.array([6000, 2000, 60, 40]), np.array([False, False, True, True])
    n, h = np.array(n), np.array(h)
    post = estimate_from_stratum_counts(
        _strata(sizes, pred), n, h, draws=400_000, rng=5, metrics=(metric,), sampler="exact",
        model="independent",
    )  # fmt: skip
    x = post.draws(metric)
    for q, budget in ((0.5, 0.015), (0.1, 0.010), (0.02, 0.004)):
        budget = 0.0 if metric == "precision" else budget
        t = float(np.quantile(x, q)) + 1e-9
        mc = float(np.mean(x >= t))
        w, c = linear_form(metric, t, pred, sizes)
        got = float(seq.prob_linear_ge(n, h, JEFFREYS, JEFFREYS, sizes, w, c))
        se = np.sqrt(mc * (1 - mc) / x.size)
        assert abs(got - mc) <= budget + 4 * se, (q, got, mc)


def test_a_two_sided_grid_too_wide_puts_the_wider_side_back_in_the_continuous_part(monkeypatch):
    """Above ``_GRID_MAX`` cells the wider side is continuous again: still the posterior's P
    within the Pearson error."""
    sizes, pred = np.array([200, 150, 60, 40]), np.array([False, False, True, True])
    n, h = np.array([60, 40, 30, 20]), np.array([3, 8, 15, 15])
    w, c = linear_form("f1", 0.6, pred, sizes)
    args = (n, h, JEFFREYS, JEFFREYS, sizes, w, c)
    full = float(seq.prob_linear_ge(*args))
    monkeypatch.setattr(_lattice, "_GRID_MAX", 100)
    narrow = float(seq.prob_linear_ge(*args))
    post = estimate_from_stratum_counts(
        _strata(sizes, pred), n, h, draws=400_000, rng=2, metrics=("f1",), sampler="exact",
        model="independent",
    )  # fmt: skip
    mc = post.prob_at_least("f1", 0.6)
    se = np.sqrt(mc * (1 - mc) / 400_000)
    assert abs(full - mc) <= 4 * se + 0.002 and abs(narrow - mc) <= 4 * se + 0.01, (full, mc)
    assert narrow != full


def test_rows_without_an_exact_stratum_are_the_continuous_law_bit_for_bit():
    """Every row whose strata keep more than LATTICE_REMAINDER unlabelled items (or none) gets
    prob_at_least's number exactly, and so does a row whose exact strata are smoothed out by the
    others' spread (recall, F1, accuracy of row 7: the predicted negatives are continuous and not
    concentrated); a row whose form is all exact strata (precision of row 7) does not."""
    rng = np.random.default_rng(0)
    sizes, pred = np.array([5000, 3000, 900, 700]), np.array([False, False, True, True])
    n = rng.integers(0, 440, (500, 4))
    n[:, 3] = np.where(np.arange(500) % 5 == 0, 700, n[:, 3])  # a census: no exact stratum
    n[7, 2:] = [900 - 12, 700 - 5]  # one row whose predicted positives are near a census
    h = rng.binomial(n, [0.02, 0.1, 0.6, 0.8])
    for metric in ("precision", "recall", "f1", "accuracy"):
        w, c = linear_form(metric, 0.7, pred, sizes)
        k = beta_form_cumulants(n, h, JEFFREYS, JEFFREYS, sizes, w)
        got = seq.prob_linear_ge(n, h, JEFFREYS, JEFFREYS, sizes, w, c)
        plain = prob_at_least(*k, c)
        other = np.arange(500) != (7 if metric == "precision" else -1)
        np.testing.assert_array_equal(got[other], plain[other])
    # at row 7's own posterior mean precision its exact stratum changes the number
    w, _ = linear_form("precision", 0.7, pred, sizes)
    k = beta_form_cumulants(n[7], h[7], JEFFREYS, JEFFREYS, sizes, w)
    t = float(k[0]) / 1600
    w, c = linear_form("precision", t, pred, sizes)
    assert seq.prob_linear_ge(n[7], h[7], JEFFREYS, JEFFREYS, sizes, w, c) != prob_at_least(*k, c)


def test_a_calibration_whose_strata_stay_large_is_version_16s_bit_for_bit(monkeypatch):
    """Where every stratum holds more than the budget plus LATTICE_REMAINDER items (the
    certification benchmark's setting: 3,161 items or more, 2,000 labels) no row has an exact
    stratum, so the simulated paths are those without the lattice bit for bit; with a stratum
    that can be labelled to near a census they differ."""
    sizes, pred = np.array([3000, 1500, 700, 600]), np.array([False, False, True, True])
    kw = dict(sizes=sizes, predicted=pred, metric="precision", target=0.7, budget=300,
              batch_size=30, n_sims=100, rng=3, design="proportional")  # fmt: skip
    with_lattice = seq.calibrate_sequential(**kw)
    monkeypatch.setattr(_lattice, "LATTICE_REMAINDER", 0)
    without = seq.calibrate_sequential(**kw)
    np.testing.assert_array_equal(with_lattice.prob, without.prob)
    small = {**kw, "sizes": np.array([3000, 1500, 120, 90]), "budget": 600}
    monkeypatch.setattr(_lattice, "LATTICE_REMAINDER", 256)
    a = seq.calibrate_sequential(**small)
    monkeypatch.setattr(_lattice, "LATTICE_REMAINDER", 0)
    b = seq.calibrate_sequential(**small)
    assert not np.array_equal(a.prob, b.prob)


# ------------------------------------------------------------------ the pooled look model
def _needle_paths(monkeypatch, remainder, target_offset=0.05, n_sims=200, n_batches=12):
    """Simulated pooled audits of a needle population (60,000 items, 0.4 % positives; 12
    strata, the six predicted-positive ones of 20 items), precision at its truth minus
    ``target_offset``; the counts after every batch of 10 (``n_batches`` of them) are
    recorded."""
    import bayes_eval as be
    from bayes_eval._loop import LockStep
    from bayes_eval.designs import make_design
    from bayes_eval.metrics import metric_of_positives
    from bayes_eval.priors import Prior
    from bayes_eval.sequential._paths import simulate_paths

    lp = be.datasets.synthetic(60_000, prevalence=0.004, separation=3.0, rng=7)
    st = be.stratify(lp.population, n_strata=6)
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    truth = np.bincount(st.assignment, weights=lp.truth, minlength=sizes.size).astype(np.int64)
    target = float(metric_of_positives("precision", truth, sizes, pred)) - target_offset
    seen = []
    real = LockStep.label

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen.append((self.n.copy(), self.h.copy()))

    monkeypatch.setattr(LockStep, "label", spy)
    monkeypatch.setattr(_lattice, "LATTICE_REMAINDER", remainder)
    prior = Prior.resolve("jeffreys", sizes.size)
    p = simulate_paths(
        sizes=sizes, predicted=pred, positives=truth, prior_a=prior.a, prior_b=prior.b,
        metric="precision", target=target, design=make_design("posterior_variance"),
        batches=[10] * n_batches, schedule=np.cumsum([10] * n_batches),
        finite_population=True, n_sims=n_sims, rng=4, model="pooled", strata=st,
    )[0]  # fmt: skip
    return st, target, p, seen


def test_pooled_look_model_near_a_census_follows_the_audits_draws(monkeypatch):
    """Six predicted-positive strata of 20 items, labelled towards their census: the pooled
    look model's simulated P(precision >= t) at refit and between-refit looks against the pooled
    audit's own draw-based P at the same counts (40,000 draws; 3 audits at each of 6 looks).
    Measured with 8 audits at each of the 12 looks (session 47):
    mean |difference| per look 0.0006-0.0085 with the near-census strata summed exactly at 64
    resampled hyper-nodes, except 0.026 (max 0.070, all above the audit's: conservative) at
    70 labels, 20 after a refit, where the nodes' Betas are stalest; the continuous nodes alone
    (version 16) 0.0085-0.029 (max 0.15), mostly *below* the audit's (anti-conservative).
    Version 19 (the nodes' Betas not floored): 0.0004-0.008, 0.023 (max 0.055) at 70 labels."""
    st, target, p_new, counts = _needle_paths(monkeypatch, 256)
    _, _, p_old, _ = _needle_paths(monkeypatch, 0)
    rng = np.random.default_rng(1)
    d_new, d_old = [], []
    for j in (1, 2, 3, 4, 6, 9):  # 20, 30, 50 labels: refits; 40, 70, 100: between refits
        for i in rng.choice(200, 3, replace=False):
            n, h = counts[j]
            post = estimate_from_stratum_counts(
                st, n[i], h[i], draws=40_000, rng=int(i), metrics=("precision",), model="pooled"
            )
            mc = post.prob_at_least("precision", target)
            d_new.append(abs(p_new[i, j] - mc))
            d_old.append(abs(p_old[i, j] - mc))
    assert np.mean(d_new) < 0.012 and np.max(d_new) < 0.08, (np.mean(d_new), np.max(d_new))
    assert np.mean(d_old) > 1.5 * np.mean(d_new), (np.mean(d_old), np.mean(d_new))


def test_version_20_a_counted_precision_is_its_count(monkeypatch):
    """Once every predicted-positive stratum is labelled to a census, precision is counted:
    the pooled look model's ``P(precision >= truth + 1e-9)`` is 0 at every such look, the
    between-refit looks too, whatever the dependence correction fixed at the last refit
    (version 19 added that correction's stale mean shift to the count and said ``P = 1`` at
    the first between-refit census look in 11 % of the simulated audits of covid_positive's
    ``fp_top`` truth, so no level could hold the false claim: 'unattainable'); before a census
    the paths are version 19's (the correction applies where the Betas keep any variance)."""
    from bayes_eval.sequential import _paths

    st, _, p, counts = _needle_paths(monkeypatch, 256, target_offset=-1e-9, n_sims=60, n_batches=15)
    pred = np.asarray(st.predicted)
    sizes = np.asarray(st.sizes)
    counted = []
    for j, (n, _) in enumerate(counts):
        done = (n[:, pred] == sizes[pred]).all(axis=1)
        counted.append(done)
        assert np.all(p[done, j] == 0.0), (j, p[done, j])
    counted = np.array(counted).T  # (audits, looks)
    # the between-refit looks (130, 140 labels: the refits are at 120 and 150) are reached
    assert counted[:, 12].any() and counted[:, 13].any()
    # the version-19 rule would have moved the count: its shift is nonzero there
    dep = _paths._Dependence(np.full(2, 0.3), np.ones(2), np.zeros(2))
    betas = (np.full(2, 5.0), np.zeros(2), np.zeros(2))
    assert np.array_equal(dep.prob(betas, 5.1), [0.0, 0.0])
    assert np.array_equal(prob_at_least(*dep.corrected(betas), 5.1), [1.0, 1.0])
    live = (np.full(2, 5.0), np.full(2, 0.04), np.full(2, 0.001))
    np.testing.assert_array_equal(dep.prob(live, 5.1), prob_at_least(*dep.corrected(live), 5.1))


def test_pooled_paths_whose_strata_stay_large_are_version_16s_bit_for_bit(monkeypatch):
    """No stratum can come within LATTICE_REMAINDER of a census (every one holds more than the
    budget plus 256 items): the pooled paths are those without the lattice, bit for bit."""
    import bayes_eval as be
    from bayes_eval.designs import make_design
    from bayes_eval.priors import Prior
    from bayes_eval.sequential._paths import simulate_paths

    lp = be.datasets.synthetic(20_000, prevalence=0.2, separation=2.5, miscalibration="flat", rng=5)
    st = be.stratify(lp.population, n_strata=4)
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    assert sizes.min() > 160 + 256
    truth = np.bincount(st.assignment, weights=lp.truth, minlength=sizes.size).astype(np.int64)
    prior = Prior.resolve("jeffreys", sizes.size)

    def paths():
        return simulate_paths(
            sizes=sizes, predicted=pred, positives=truth, prior_a=prior.a, prior_b=prior.b,
            metric="precision", target=0.7, design=make_design("posterior_variance"),
            batches=[20] * 8, schedule=np.cumsum([20] * 8), finite_population=True,
            n_sims=40, rng=2, model="pooled", strata=st,
        )  # fmt: skip

    with_lattice = paths()
    monkeypatch.setattr(_lattice, "LATTICE_REMAINDER", 0)
    np.testing.assert_array_equal(paths(), with_lattice)


def test_node_sample_keeps_the_continuous_law_where_the_rest_smooths_the_lattice_out():
    """A node whose rest of the form is wide (sd far above the lattice's spacing) gets the
    continuous law of its whole form, not 0 (session 47: the nodes were given 0 there, which
    only the tighter smoothing rule exposed: the simulated P fell 0.04 below the audit's)."""
    from bayes_eval.models._node_sample import NodeSample, _positive_cumulants

    sizes, w = np.array([5000.0, 30.0]), np.array([1.0, 1.0])
    n, h = np.array([[400.0, 26.0]]), np.array([[120.0, 20.0]])
    pa, pb = np.full((1, 2, 1), 0.5), np.full((1, 2, 1), 0.5)
    rest = (np.array([[1500.0, 1560.0]]), np.array([[900.0, 1100.0]]), np.array([[0.0, 0.0]]))
    sample = NodeSample(np.array([1]), *rest, pa, pb, n[:, [1]], h[:, [1]])
    zero = (np.zeros(1), np.zeros(1), np.zeros(1))
    c = 1540.0
    got = sample.prob(n, h, zero, c, sizes=sizes, w=w, prior_a=np.full((1, 2), 0.5),
                      prior_b=np.full((1, 2), 0.5))  # fmt: skip
    cum = _positive_cumulants(pa[0, :, 0], pb[0, :, 0], n[0, 1], h[0, 1], sizes[1])
    plain = prob_at_least(rest[0][0] + cum.mean, rest[1][0] + cum.var, rest[2][0] + cum.k3, c)
    assert got[0] == pytest.approx(plain.mean(), abs=1e-12) and 0.2 < got[0] < 0.8


def _exact_tail(sizes, n, h, w, c, a=0.5, b=0.5):
    """``Pr(sum_k w_k P_k >= c)`` by brute force: each stratum's whole beta-binomial pmf, the
    two weight classes convolved separately and crossed (a reference for small settings)."""
    sides = {}
    for k in range(sizes.size):
        r = int(sizes[k] - n[k])
        if w[k] == 0:
            continue
        pk = stats.betabinom(r, a + h[k], b + n[k] - h[k]).pmf(np.arange(r + 1))
        base, pmf = sides.get(w[k], (0, np.array([1.0])))
        sides[w[k]] = (base + h[k], np.convolve(pmf, pk))
    (w1, (b1, p1)), *more = sides.items()
    v1 = w1 * (b1 + np.arange(p1.size))
    if not more:
        return float(p1[v1 >= c - 1e-9 * max(abs(c), 1.0)].sum())
    ((w2, (b2, p2)),) = more
    v2 = w2 * (b2 + np.arange(p2.size))
    tot = v1[:, None] + v2[None, :]
    return float((p1[:, None] * p2[None, :])[tot >= c - 1e-9 * max(abs(c), 1.0)].sum())


def test_version_18_sums_concentrated_strata_exactly_where_the_continuous_law_truncates():
    """A real case (loans_grade_a, precision 1231/2379, session 48): four predicted-positive
    strata near a census and a fifth of 476 false positives with 118 labelled, none positive.
    The whole form's Pearson law is skewed by that stratum's long right tail and has no left
    tail below k1 - 2 k2 / k3, so version 17 said P = 1 exactly -- a probability no level can
    exclude, so the calibration refused every precision claim on that population (true ones
    too). Version 18 sums the 358-item stratum exactly too (its remaining positives are
    concentrated near 0) and matches the brute-force sum; version 17's rule does not."""
    sizes = np.array([924, 924, 924, 924, 925, 475, 476, 476, 476, 476])
    pred = np.arange(10) >= 5
    w, c = linear_form("precision", 1231 / 2379 + 1e-9, pred, sizes)
    rows = [
        ([0, 0, 0, 0, 0, 458, 476, 452, 476, 118], [0, 0, 0, 0, 0, 298, 308, 302, 308, 0]),
        ([0, 0, 0, 0, 0, 457, 476, 451, 459, 117], [0, 0, 0, 0, 0, 297, 308, 302, 296, 0]),
        ([0, 0, 0, 0, 0, 422, 426, 418, 426, 108], [0, 0, 0, 0, 0, 279, 278, 283, 278, 0]),
    ]
    for n, h in rows:
        n, h = np.array(n), np.array(h)
        exact = _exact_tail(sizes, n, h, w, c)
        got = float(seq.prob_linear_ge(n, h, JEFFREYS, JEFFREYS, sizes, w, c))
        assert abs(got - exact) < 1e-10
        k = beta_form_cumulants(n, h, JEFFREYS, JEFFREYS, sizes, w)
        v17 = _lattice.lattice_prob_at_least(
            *k, c, n=n, h=h, prior_a=JEFFREYS, prior_b=JEFFREYS, sizes=sizes, w=w
        )
        assert (1 - v17) < 0.6 * (1 - exact)  # version 17 understates the risk (1 - P)
    n, h = np.array(rows[0][0]), np.array(rows[0][1])
    k = beta_form_cumulants(n, h, JEFFREYS, JEFFREYS, sizes, w)
    v17 = _lattice.lattice_prob_at_least(
        *k, c, n=n, h=h, prior_a=JEFFREYS, prior_b=JEFFREYS, sizes=sizes, w=w
    )
    assert v17 == 1.0 and 1 - _exact_tail(sizes, n, h, w, c) > 5e-5


def test_concentrated_strata_on_both_sides_of_an_f1_form():
    """Predicted negatives of 1,500 and 800 items with 0 and 1 positives among 600 and 400 labels
    (remaining positives concentrated near 0: exact in version 18), predicted positives of 30
    and 20 items near a census; F1's form has two weight classes. The exact sum matches brute
    force at three targets. A stratum whose positives are not concentrated (rate ~0.3 among 900
    unlabelled) is not exact, nor is one with a long tail beyond the window (no positive in 300
    labels, 5,700 unlabelled: 2e-7 of its mass above 256)."""
    sizes = np.array([1500, 800, 30, 20])
    pred = np.array([False, False, True, True])
    n, h = np.array([600, 400, 26, 17]), np.array([0, 1, 20, 15])
    for t in (0.8, 0.85, 0.88, 0.9):
        w, c = linear_form("f1", t, pred, sizes)
        exact = _exact_tail(sizes, n, h, w, c)
        got = float(seq.prob_linear_ge(n, h, JEFFREYS, JEFFREYS, sizes, w, c))
        assert 0.05 < exact < 0.99
        assert abs(got - exact) < 1e-10, (t, got, exact)
    r = (sizes - n).astype(float)[None, :]
    a, b = (0.5 + h)[None, :].astype(float), (0.5 + n - h)[None, :].astype(float)
    every = np.ones((1, 4), dtype=bool)
    conc = _lattice.concentrated_strata(r, a, b, np.ones(4), every)
    assert conc.tolist() == [[True, True, False, False]]  # 4 and 3 left: near a census instead
    wide = _lattice.concentrated_strata(
        np.array([[900.0, 5700.0]]), np.array([[30.5, 0.5]]), np.array([[70.5, 300.5]]),
        np.ones(2), np.ones((1, 2), dtype=bool),
    )  # fmt: skip
    assert not wide.any()


def test_a_stratum_near_a_census_in_one_row_and_concentrated_in_another():
    """Rows are summed in blocks: a stratum with 200 unlabelled items in one row (its whole range
    exact) and concentrated in the next (700 unlabelled, none positive among 500: a window)
    gives each row its own number, the same as alone and as brute force."""
    sizes = np.array([1200, 60, 40])
    pred = np.array([True, True, False])
    n = np.array([[1000, 55, 10], [500, 55, 10]])
    h = np.array([[600, 30, 2], [0, 30, 2]])
    r = (sizes - n).astype(float)
    conc = _lattice.concentrated_strata(r, 0.5 + h, 0.5 + n - h, np.ones(3), r > 256)
    assert conc.tolist() == [[False, False, False], [True, False, False]]
    w, _ = linear_form("precision", 0.5, pred, sizes)
    # around each row's posterior mean of the predicted positives' positives (~753 and ~33)
    for i, cs in ((0, (745.5, 752.5, 760.5)), (1, (32.5, 34.5, 37.5))):
        for c in cs:
            both = seq.prob_linear_ge(n, h, JEFFREYS, JEFFREYS, sizes, w, c)
            alone = float(seq.prob_linear_ge(n[i], h[i], JEFFREYS, JEFFREYS, sizes, w, c))
            exact = _exact_tail(sizes, n[i], h[i], w, c)
            assert 0.02 < exact < 0.98
            assert both[i] == pytest.approx(alone, abs=1e-12)
            assert alone == pytest.approx(exact, abs=1e-10)


def test_version_19_pooled_nodes_sum_concentrated_strata_exactly():
    """The pooled look model had version 17's truncation: at loans_grade_a-like counts (four
    predicted-positive strata near a census, a fifth of 476 items with none positive among 117
    labelled) its hyper-nodes' Pearson law of the rest understated the risk ``1 - P`` 3-7-fold
    against the pooled audit's own draws (and said P = 1 - 7e-8 where they say 1 - 1.2e-5).
    Version 19 sums the concentrated stratum exactly at each node under the node's Beta (it is
    among the strata whose nodes are kept), and keeps each node's Beta as it is (version 18
    floored the priors backed out of it, which left a continuous remainder of variance ~1 that
    smeared the lattice: 1.25x and 0.66x the risk at the two targets): within 25 % of the
    draws' risk (measured 1.07x and 1.01x with 1,000,000 draws), through
    :meth:`NodeSample.prob` and the paths' row rule (``_census_lattice``) alike; without the
    concentrated stratum's exact sum it is below half of it (version 18's whole rule:
    ``benchmarks/bench_node_tail.py``)."""
    from types import SimpleNamespace

    import bayes_eval as be
    from bayes_eval.models._look import look_refit
    from bayes_eval.models._profile import score_profile_of
    from bayes_eval.sequential._paths import _census_lattice, _rest

    rng = np.random.default_rng(3)
    scores = np.concatenate([rng.uniform(0.0, 0.5, 4621), rng.uniform(0.5, 1.0, 2379)])
    st = be.stratify(Population(scores, predictions=scores >= 0.5), method="equal_size",
                     n_strata=5, rng=0)  # fmt: skip
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    assert sizes.tolist() == [924, 924, 924, 924, 925, 475, 476, 476, 476, 476]
    n = np.array([[0] * 5 + [118, 458, 476, 452, 476], [0] * 5 + [117, 457, 476, 451, 459]])
    h = np.array([[0] * 5 + [0, 298, 308, 302, 308], [0] * 5 + [0, 297, 308, 302, 296]])
    post = estimate_from_stratum_counts(
        st, n[1], h[1], draws=400_000, rng=1, metrics=("precision",), model="pooled"
    )
    zero = (np.zeros(2),) * 3
    audits = SimpleNamespace(n=n, h=h)
    for t in (1231 / 2379, 1231 / 2379 + 1e-9):  # at least 1,231 and 1,232 true positives
        w, c = linear_form("precision", t, pred, sizes)
        ref = look_refit(score_profile_of(st), n, h, w, cols=np.flatnonzero(pred))
        args = dict(sizes=sizes, w=w, prior_a=ref.prior_a, prior_b=ref.prior_b)
        got = ref.sample.prob(n, h, zero, c, **args)
        form = (sizes.astype(float), w, True)
        paths = np.full(2, -1.0)
        rest = _rest(audits, ref.prior_a, ref.prior_b, form, ref.sample.cols)
        _census_lattice(paths, ref.sample, audits, rest, ref.prior_a, ref.prior_b, form, c)
        np.testing.assert_array_equal(paths, got)  # the row rule sends both rows to the nodes
        risk = 1.0 - post.prob_at_least("precision", t)
        assert 1.5e-4 < risk < 2e-3
        assert 0.75 < (1.0 - got[1]) / risk < 1.25, (t, got, risk)
        assert 1.0 - got[0] > 2e-6  # the posterior's draws: ~1e-5 and ~4e-5
        with pytest.MonkeyPatch.context() as m:  # no concentrated stratum at the nodes
            m.setattr(_lattice, "concentrated_strata", lambda r, *a, **k: np.zeros(r.shape, bool))
            plain = ref.sample.prob(n, h, zero, c, **args)
        assert (1.0 - plain[1]) / risk < 0.5 and 1.0 - plain[0] < 2e-6, (t, plain, risk)
