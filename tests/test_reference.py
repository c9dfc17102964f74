"""Posteriors against external reference numbers (scipy, statsmodels, direct computation).

Tolerances come from the Monte Carlo error: a posterior quantile from ``D`` independent draws has
standard error ``mcse_quantile`` (order-statistic interval), and every check allows 4 of them.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval._draws import mcse_quantile

QS = (0.005, 0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975, 0.995)


def _one_stratum(n_items: int, labels_pos: int, labels_n: int):
    """A population whose items are all predicted positive (one stratum), with ``labels_n``
    labelled items of which ``labels_pos`` are positive."""
    scores = np.linspace(0.6, 0.99, n_items)
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=1)
    assert strata.n_strata == 1
    ids = np.arange(labels_n)
    values = np.zeros(labels_n, dtype=bool)
    values[:labels_pos] = True
    return strata, (ids, values)


@pytest.mark.parametrize("sampler", ["fast", "exact"])
@pytest.mark.parametrize(("h", "n"), [(17, 50), (0, 30), (29, 30), (3, 400)])
def test_one_stratum_infinite_precision_matches_beta_ppf(sampler, h, n):
    # infinite population, one stratum of predicted positives: precision = theta, whose
    # posterior under the Jeffreys prior is Beta(h + 1/2, n - h + 1/2)
    strata, labels = _one_stratum(5000, h, n)
    post = be.estimate(
        strata,
        labels,
        prior="jeffreys",
        finite_population=False,
        draws=40_000,
        rng=123,
        sampler=sampler,
        model="independent",
    )
    x = post.draws("precision")
    ref = stats.beta(h + 0.5, n - h + 0.5)
    for q in QS:
        tol = 4 * mcse_quantile(x, q)
        assert abs(np.quantile(x, q) - ref.ppf(q)) <= tol, q
        # the public lower bound is the same quantile
    assert post.lower_bound("precision", level=0.95) == pytest.approx(np.quantile(x, 0.05))


@pytest.mark.parametrize(("h", "n"), [(17, 50), (0, 30), (45, 50), (120, 1000)])
def test_jeffreys_interval_matches_statsmodels(h, n):
    # statsmodels.stats.proportion.proportion_confint(h, n, alpha, method="jeffreys") is the
    # equal-tailed interval of Beta(h + 1/2, n - h + 1/2) (checked with statsmodels 0.15)
    strata, labels = _one_stratum(8000, h, n)
    post = be.estimate(
        strata,
        labels,
        prior="jeffreys",
        finite_population=False,
        draws=40_000,
        rng=7,
        model="independent",
    )
    x = post.draws("precision")
    for prob in (0.9, 0.95):
        lo_ref, hi_ref = proportion_confint(h, n, alpha=1 - prob, method="jeffreys")
        lo, hi = post.interval("precision", prob=prob, kind="eti")
        assert abs(lo - lo_ref) <= 4 * mcse_quantile(x, (1 - prob) / 2)
        assert abs(hi - hi_ref) <= 4 * mcse_quantile(x, (1 + prob) / 2)


@pytest.mark.parametrize("sampler", ["fast", "exact"])
@pytest.mark.parametrize("prior", ["jeffreys", "uniform", (2.0, 5.0)])
def test_fully_labelled_population_is_a_point_mass(sampler, prior):
    lp = datasets.synthetic(3000, prevalence=0.25, rng=9)
    strata = be.stratify(lp.population, method="equal_size", n_strata=4)
    post = be.estimate(
        strata,
        lp.labels_for(lp.population.ids),
        prior=prior,
        finite_population=True,
        draws=5000,
        rng=0,
        sampler=sampler,
        model="independent",
    )
    truth = lp.true_metrics()
    assert set(post.metrics) == set(truth)
    for name in post.metrics:
        x = post.draws(name)
        np.testing.assert_allclose(x, truth[name], rtol=0, atol=1e-12, err_msg=name)
        lo, hi = post.interval(name, prob=0.9, kind="eti")
        assert lo == pytest.approx(truth[name]) and hi == pytest.approx(truth[name])


def test_fully_labelled_positive_side_only():
    # a precision audit may hold only predicted positives
    lp = datasets.synthetic(2000, prevalence=0.5, threshold=0.0, rng=1)  # all predicted positive
    strata = be.stratify(lp.population, n_strata=3)
    post = be.estimate(
        strata, lp.labels_for(lp.population.ids), draws=3000, rng=0, model="independent"
    )
    np.testing.assert_allclose(post.draws("precision"), lp.true_metrics()["precision"], atol=1e-12)


@pytest.mark.parametrize(("tp", "fp", "fn", "tn"), [(80, 20, 10, 890), (5, 0, 3, 40)])
def test_estimate_counts_dirichlet_matches_direct(tp, fp, fn, tn):
    # Goutte & Gaussier (2005): cells ~ Dirichlet(tp + 1/2, fp + 1/2, fn + 1/2, tn + 1/2) under
    # the Jeffreys prior, so precision = p_tp / (p_tp + p_fp) ~ Beta(tp + 1/2, fp + 1/2) and
    # recall ~ Beta(tp + 1/2, fn + 1/2) exactly; F1 and accuracy are compared with a direct
    # Dirichlet computation drawn from an independent generator
    draws = 40_000
    post = be.estimate_counts(tp, fp, fn, tn, prior="jeffreys", draws=draws, rng=5)
    for name, ref in (
        ("precision", stats.beta(tp + 0.5, fp + 0.5)),
        ("recall", stats.beta(tp + 0.5, fn + 0.5)),
    ):
        x = post.draws(name)
        for q in QS:
            assert abs(np.quantile(x, q) - ref.ppf(q)) <= 4 * mcse_quantile(x, q), (name, q)
    cells = np.random.default_rng(99).dirichlet(np.array([tp, fp, fn, tn]) + 0.5, size=draws)
    direct = {
        "f1": 2 * cells[:, 0] / (2 * cells[:, 0] + cells[:, 1] + cells[:, 2]),
        "accuracy": cells[:, 0] + cells[:, 3],
        "prevalence": cells[:, 0] + cells[:, 2],
    }
    for name, y in direct.items():
        x = post.draws(name)
        assert stats.ks_2samp(x, y).pvalue > 1e-3, name
        for q in QS:
            tol = 4 * np.hypot(mcse_quantile(x, q), mcse_quantile(y, q))
            assert abs(np.quantile(x, q) - np.quantile(y, q)) <= tol, (name, q)
