"""MetricPosterior API, ArviZ interoperability and bad input of estimate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval as be


@pytest.fixture
def post(small_pop):
    pop, truth = small_pop
    strata = be.stratify(pop, n_strata=5)
    rng = np.random.default_rng(0)
    ids = rng.choice(pop.size, 500, replace=False)
    return be.estimate(strata, (ids, truth[ids]), draws=8000, rng=1, model="independent")


def test_datatree_groups_and_dims(post):
    dt = post.datatree
    assert {"posterior", "observed_data", "constant_data"} <= set(dt.children)
    assert dt["posterior"]["f1"].dims == ("chain", "draw")
    assert dt["posterior"]["theta"].dims == ("chain", "draw", "stratum")
    assert dt["observed_data"]["n"].values.sum() == 500 == post.n_labels
    assert dt["constant_data"]["N"].values.sum() == 10_000
    assert dt.attrs["prior"] == "jeffreys"
    assert post.n_draws == 8000


def test_summaries_are_consistent(post):
    x = post.draws("f1")
    assert post.mean("f1") == pytest.approx(x.mean())
    assert post.lower_bound("f1", level=0.95) == pytest.approx(np.quantile(x, 0.05))
    assert post.upper_bound("f1", level=0.9) == pytest.approx(np.quantile(x, 0.9))
    lo, hi = post.interval("recall", prob=0.9)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(post.draws("recall"), [0.05, 0.95])))
    hlo, hhi = post.interval("recall", prob=0.9, kind="hdi")
    assert hhi - hlo <= hi - lo + 1e-12
    p = post.prob_at_least("precision", 0.7)
    assert p == pytest.approx(np.mean(post.draws("precision") >= 0.7))
    table = post.summary()
    assert isinstance(table, pd.DataFrame)
    assert set(post.metrics) == set(table.index)
    assert table.loc["f1", "lower_0.95"] == pytest.approx(post.lower_bound("f1"))
    st = post.strata_table()
    assert st["labelled"].sum() == 500 and len(st) == 10
    assert "f1=" in repr(post) and "jeffreys" in repr(post)


def test_interval_defaults_come_from_arviz_rcparams(post):
    from arviz_base import rc_context

    with rc_context({"stats.ci_prob": 0.5, "stats.ci_kind": "eti"}):
        lo, hi = post.interval("f1")
    assert (lo, hi) == pytest.approx(tuple(np.quantile(post.draws("f1"), [0.25, 0.75])))


def test_arviz_summary_and_plot(post):
    import arviz_plots as azp
    import arviz_stats as azs

    table = azs.summary(post.datatree, var_names=["f1", "precision", "theta"])
    assert "f1" in table.index
    assert table.loc["f1", "mean"] == pytest.approx(post.mean("f1"), abs=1e-3)
    pc = azp.plot_dist(post.datatree, var_names=["f1"], backend="matplotlib")
    assert pc is not None
    pc = azp.plot_forest(post.datatree, var_names=["theta"], backend="matplotlib")
    assert pc is not None


def test_prob_greater_between_classifiers():
    good = be.estimate_counts(90, 10, 10, 890, draws=4000, rng=0)
    bad = be.estimate_counts(60, 40, 40, 860, draws=4000, rng=1)
    assert good.prob_greater(bad, "f1") > 0.99
    assert bad.prob_greater(good, "f1") < 0.01
    with pytest.raises(TypeError, match="other"):
        good.prob_greater(3, "f1")


def test_posterior_mean_between_prior_mean_and_sample_proportion(post):
    theta = post.datatree["posterior"]["theta"].values.reshape(post.n_draws, -1).mean(axis=0)
    n = post.datatree["observed_data"]["n"].values
    h = post.datatree["observed_data"]["h"].values
    prop = h / n
    lo, hi = np.minimum(0.5, prop), np.maximum(0.5, prop)
    assert np.all((theta >= lo - 0.01) & (theta <= hi + 0.01))


def test_single_stratum_per_side_reproduces_unstratified_counts():
    # 2 strata (one per predicted side), fully described by confusion counts: estimate() and
    # estimate_counts(predicted_sizes=...) are the same model
    rng = np.random.default_rng(5)
    scores = rng.random(5000)
    truth = rng.random(5000) < scores
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=1)
    ids = rng.choice(5000, 400, replace=False)
    pred, t = pop.predictions[ids], truth[ids]
    a = be.estimate(strata, (ids, t), draws=20000, rng=0, model="independent")
    b = be.estimate_counts(
        int(np.sum(t & pred)),
        int(np.sum(~t & pred)),
        int(np.sum(t & ~pred)),
        int(np.sum(~t & ~pred)),
        predicted_sizes=(int((~pop.predictions).sum()), int(pop.predictions.sum())),
        draws=20000,
        rng=1,
    )
    for m in ("precision", "recall", "f1"):
        ks = stats.ks_2samp(a.draws(m), b.draws(m))
        assert ks.pvalue > 1e-3


def test_infinite_population_is_wider(small_pop):
    pop, truth = small_pop
    strata = be.stratify(pop, n_strata=2)
    ids = np.arange(0, 10_000, 2)  # half the population labelled
    fin = be.estimate(strata, (ids, truth[ids]), draws=8000, rng=0, model="independent")
    inf = be.estimate(
        strata, (ids, truth[ids]), draws=8000, rng=0, finite_population=False, model="independent"
    )
    assert fin.std("f1") < inf.std("f1")
    assert fin.datatree.attrs["finite_population"] == 1


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"prior": "flat"}, ValueError, "prior='flat'"),
        ({"prior": (0, 1)}, ValueError, "> 0"),
        ({"prior": (-1, 1)}, ValueError, "> 0"),
        ({"prior": (np.ones(3), np.ones(3))}, ValueError, "shape"),
        ({"prior": (1, 2, 3)}, ValueError, "prior"),
        ({"prior": (np.inf, 1)}, ValueError, "finite"),
        ({"draws": 0}, ValueError, "draws"),
        ({"draws": -5}, ValueError, "draws"),
        ({"draws": 2.5}, TypeError, "draws"),
        ({"sampler": "slow"}, ValueError, "sampler"),
        ({"model": "deep"}, ValueError, "model"),
        ({"metrics": ["f1", "auc"]}, ValueError, "'auc'"),
        ({"rng": "seed"}, TypeError, "rng"),
        ({"finite_population": "yes"}, TypeError, "finite_population"),
    ],
)
def test_bad_estimate_input(small_pop, kwargs, exc, match):
    pop, truth = small_pop
    strata = be.stratify(pop, n_strata=2)
    with pytest.raises(exc, match=match):
        be.estimate(strata, ([0, 1], truth[:2]), **{"model": "independent", **kwargs})


def test_bad_levels(post):
    for level in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="level"):
            post.lower_bound("f1", level=level)
    with pytest.raises(ValueError, match="prob"):
        post.interval("f1", prob=1.0)
    with pytest.raises(ValueError, match="kind"):
        post.interval("f1", prob=0.9, kind="hpd")
    with pytest.raises(ValueError, match="metric"):
        post.mean("auc")
    with pytest.raises(TypeError, match="strata"):
        be.estimate(object(), None, model="independent")


def test_bad_counts():
    with pytest.raises(ValueError, match="tp"):
        be.estimate_counts(-1, 0, 0, 0)
    with pytest.raises(ValueError, match="at least one"):
        be.estimate_counts(0, 0, 0, 0)
    with pytest.raises(ValueError, match="smaller"):
        be.estimate_counts(10, 10, 10, 10, predicted_sizes=(5, 100))


def test_reproducible_from_seed(small_pop):
    pop, truth = small_pop
    strata = be.stratify(pop, n_strata=3)
    ids = np.arange(100)
    a = be.estimate(strata, (ids, truth[ids]), draws=2000, rng=42, model="independent")
    b = be.estimate(strata, (ids, truth[ids]), draws=2000, rng=42, model="independent")
    assert np.array_equal(a.draws("f1"), b.draws("f1"))
