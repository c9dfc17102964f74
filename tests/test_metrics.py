"""One invariance suite run over every metric of the registry."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval.metrics import METRICS, register_metric, resolve_metrics

RNG = np.random.default_rng(7)
COUNTS = RNG.integers(0, 50, size=(4, 500)).astype(float)
COUNTS[:, 0] = [0, 0, 0, 10]  # no positives, no predicted positives
COUNTS[:, 1] = [0, 5, 0, 10]  # no positives
COUNTS[:, 2] = [3, 0, 0, 0]  # all true positives


@pytest.fixture(params=sorted(METRICS))
def metric(request):
    return METRICS[request.param]


def _defined(metric, tp, fp, fn, tn):
    ok = np.ones_like(tp, dtype=bool)
    if metric.needs_predicted_positive:
        ok &= (tp + fp) > 0
    if metric.needs_predicted_negative:
        ok &= (fn + tn) > 0
    return ok


def test_range_shape_and_finiteness(metric):
    tp, fp, fn, tn = COUNTS
    out = metric.func(tp, fp, fn, tn)
    assert out.shape == tp.shape
    ok = _defined(metric, tp, fp, fn, tn)
    assert np.all(np.isfinite(out[ok]))
    assert np.all((out[ok] >= 0) & (out[ok] <= 1))


def test_scale_invariance(metric):
    tp, fp, fn, tn = COUNTS
    a = metric.func(tp, fp, fn, tn)
    b = metric.func(7 * tp, 7 * fp, 7 * fn, 7 * tn)
    ok = _defined(metric, tp, fp, fn, tn)
    np.testing.assert_allclose(a[ok], b[ok], rtol=1e-12)


def test_perfect_classifier_scores_one_where_it_should(metric):
    tp, tn = np.array([5.0, 40.0]), np.array([7.0, 2.0])
    zero = np.zeros(2)
    out = metric.func(tp, zero, zero, tn)
    if metric.name == "prevalence":
        np.testing.assert_allclose(out, tp / (tp + tn))
    else:
        np.testing.assert_allclose(out, 1.0)


def test_fully_labelled_posterior_is_point_mass_at_truth(metric):
    rng = np.random.default_rng(1)
    scores = rng.random(600)
    truth = rng.random(600) < scores
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=3)
    post = be.estimate(strata, (np.arange(600), truth), draws=500, rng=0)
    pred = pop.predictions
    tp = float(np.sum(truth & pred))
    fp = float(np.sum(~truth & pred))
    fn = float(np.sum(truth & ~pred))
    tn = float(np.sum(~truth & ~pred))
    expected = float(metric.func(np.array([tp]), np.array([fp]), np.array([fn]), np.array([tn]))[0])
    draws = post.draws(metric.name)
    assert np.all(draws == expected)


def test_conventions_documented():
    zero = np.zeros(1)
    # F1 = 1 with no positives and no positive predictions (Lewis 1995, Webber et al. 002_...)
    assert METRICS["f1"].func(zero, zero, zero, np.ones(1))[0] == 1.0
    # recall = 1 with no positives
    assert METRICS["recall"].func(zero, np.ones(1), zero, np.ones(1))[0] == 1.0
    # F1 = 0 with false positives only
    assert METRICS["f1"].func(zero, np.ones(1), zero, np.ones(1))[0] == 0.0


def test_precision_undefined_without_predicted_positives():
    pop = be.Population(np.array([0.1, 0.2, 0.3, 0.4]), threshold=0.5)
    strata = be.stratify(pop, n_strata=1)
    with pytest.raises(ValueError, match="no predicted positives"):
        be.estimate(strata, ([0], [1]), metrics="precision", draws=100, rng=0)
    post = be.estimate(strata, ([0], [1]), draws=100, rng=0)
    assert "precision" not in post.metrics and "recall" in post.metrics


def test_registering_a_metric_is_one_function():
    @register_metric("fowlkes_mallows_test")
    def fm(tp, fp, fn, tn):
        """Fowlkes-Mallows index sqrt(precision * recall)."""
        return np.sqrt(
            METRICS["precision"].func(tp, fp, fn, tn) * METRICS["recall"].func(tp, fp, fn, tn)
        )

    try:
        post = be.estimate_counts(40, 10, 10, 40, draws=1000, rng=0)
        assert "fowlkes_mallows_test" in post.metrics
        assert 0.6 < post.mean("fowlkes_mallows_test") < 0.9
    finally:
        del METRICS["fowlkes_mallows_test"]


def test_resolve_metrics_errors():
    with pytest.raises(ValueError, match="'f2'"):
        resolve_metrics("f2", has_predicted_positive=True, has_predicted_negative=True)
    with pytest.raises(ValueError, match="npv"):
        resolve_metrics(["npv"], has_predicted_positive=True, has_predicted_negative=False)
