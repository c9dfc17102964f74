"""Which metrics the labels inform (bayes_eval._informed), the prior group, summary naming."""

from __future__ import annotations

import json

import arviz_base
import numpy as np
import pytest

import bayes_eval as be
from bayes_eval._informed import informed_metrics, metric_information
from bayes_eval.metrics import METRICS, relevant_sides


@pytest.fixture(scope="module")
def precision_audit():
    """Issue 18's case in small: 2.4% predicted positive, every label on that side."""
    rng = np.random.default_rng(18)
    n_items = 40_000
    scores = rng.beta(0.3, 8.0, n_items)
    truth = rng.random(n_items) < np.clip(3 * scores, 0, 1)
    pop = be.Population(scores, threshold=float(np.quantile(scores, 0.976)))
    strata = be.stratify(pop, n_strata=5)
    ids = rng.choice(np.flatnonzero(pop.predictions), 300, replace=False)
    return (
        strata,
        truth,
        be.estimate(strata, (ids, truth[ids]), draws=4000, rng=0, model="independent"),
    )


def test_relevant_sides_of_the_registered_metrics():
    # precision = tp/(tp+fp) ignores the negative side; npv = tn/(tn+fn) the positive one
    assert relevant_sides("precision") == (False, True)
    assert relevant_sides("npv") == (True, False)
    for m in ("recall", "f1", "accuracy", "prevalence"):
        assert relevant_sides(m) == (True, True), m


def test_precision_only_audit_marks_everything_but_precision_prior_only(precision_audit):
    _, _, post = precision_audit
    flags = informed_metrics(post)
    assert flags["precision"] is True
    assert not any(flags[m] for m in ("recall", "f1", "accuracy", "prevalence", "npv"))
    assert post.informed() == flags
    assert set(post.prior_only) == {m for m, ok in flags.items() if not ok}
    info = metric_information(post)["recall"]
    assert info.unlabelled_strata == (0, 1, 2, 3, 4)
    assert info.unlabelled_share == pytest.approx(0.976, abs=0.002)
    assert "no label" in info.reason
    # carried in the tree (netCDF-safe string attribute), the repr and summary()
    assert post.datatree.attrs["prior_only"].split(",") == list(post.prior_only)
    assert "recall=prior only" in repr(post) and "precision=0." in repr(post)
    assert post.summary()["informed"].to_dict() == flags


def test_one_unlabelled_stratum_on_a_side_makes_its_metrics_prior_only(precision_audit):
    strata, truth, _ = precision_audit
    pop = strata.population
    ids = []
    for k in range(strata.n_strata):
        members = np.flatnonzero(strata.assignment == k)
        if k != 2:  # one predicted-negative stratum left unlabelled
            ids.extend(members[:30])
    ids = np.asarray(ids)
    post = be.estimate(strata, (ids, truth[ids]), draws=2000, rng=0, model="independent")
    flags = post.informed()
    assert flags["precision"] and not flags["recall"] and not flags["npv"]
    assert pop.size == truth.size
    every = np.concatenate([np.flatnonzero(strata.assignment == k)[:30] for k in range(10)])
    full = be.estimate(strata, (every, truth[every]), draws=2000, rng=0, model="independent")
    assert all(full.informed().values()) and full.prior_only == ()


def test_every_registered_metric_is_informed_by_a_random_test_set():
    post = be.estimate_counts(80, 20, 10, 890, predicted_sizes=(9000, 1000), draws=1000, rng=0)
    assert all(post.informed().values())
    assert set(post.informed()) == set(post.metrics) <= set(METRICS)


def test_prior_group_is_the_prior_predictive_and_arviz_draws_it(precision_audit):
    _, _, post = precision_audit
    prior = post.datatree["prior"]
    assert set(post.metrics) <= set(prior.data_vars)
    # Jeffreys Beta(1/2, 1/2) rates: mean 1/2, variance 1/8
    theta = prior["theta"].values.reshape(-1)
    assert theta.mean() == pytest.approx(0.5, abs=4 * np.sqrt(0.125 / theta.size))
    # the posterior of a prior-only metric stays close to its prior predictive
    assert post.mean("accuracy") == pytest.approx(float(prior["accuracy"].mean()), abs=0.05)
    import arviz_plots as azp

    pc = azp.plot_prior_posterior(post.datatree, var_names=["precision"], backend="none")
    assert pc is not None


def test_prior_group_does_not_change_the_posterior_draws():
    rng = np.random.default_rng(3)
    pop = be.Population(rng.random(5000), threshold=0.5)
    strata = be.stratify(pop, n_strata=4)
    ids = rng.choice(5000, 200, replace=False)
    labels = rng.random(200) < 0.5
    a = be.estimate(strata, (ids, labels), draws=2000, rng=5, model="independent")
    b = be.estimate(strata, (ids, labels), draws=2000, rng=5, model="independent")
    np.testing.assert_array_equal(a.draws("f1"), b.draws("f1"))
    np.testing.assert_array_equal(
        a.datatree["prior"]["f1"].values, b.datatree["prior"]["f1"].values
    )


def test_summary_names_intervals_as_arviz_and_follows_rcparams(precision_audit):
    _, _, post = precision_audit
    table = post.summary()
    assert {"eti89_lb", "eti89_ub"} <= set(table.columns)  # ArviZ: eti89_lb, not eti0.89_lo
    with arviz_base.rc_context({"stats.ci_kind": "hdi", "stats.ci_prob": 0.9}):
        table = post.summary()
        assert {"hdi90_lb", "hdi90_ub"} <= set(table.columns)
        lo, hi = post.interval("precision")
    assert table.loc["precision", "hdi90_lb"] == lo and table.loc["precision", "hdi90_ub"] == hi


def test_version_is_exported():
    assert isinstance(be.__version__, str) and be.__version__[0].isdigit()
    assert "__version__" in be.__all__
    json.dumps({"v": be.__version__})


def test_datatree_round_trips_through_netcdf_with_prior_group(precision_audit, tmp_path):
    import xarray as xr

    _, _, post = precision_audit
    path = tmp_path / "post.nc"
    post.datatree.to_netcdf(path)  # needs h5netcdf + h5py: the "netcdf" extra
    back = xr.open_datatree(path)
    assert {"posterior", "prior", "observed_data", "constant_data"} <= set(back.children)
    assert back.attrs["prior_only"] == post.datatree.attrs["prior_only"]
