"""The simulation harness: shapes, statistical agreement with the audit, stop rules, errors."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval.simulation import relevant_sides, truth_counts
from bayes_eval.stop import StopDecision, StopRule


@pytest.fixture(scope="module")
def lp():
    rng = np.random.default_rng(7)
    scores = rng.random(20_000)
    truth = rng.random(20_000) < scores**2
    pop = be.Population(scores, threshold=0.5)
    return pop, truth, be.stratify(pop, n_strata=3)


def test_shapes_and_fields(lp):
    pop, truth, strata = lp
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs=["random", "proportional"],
        metric="f1",
        budget=90,
        batch_size=40,
        n_reps=6,
        draws=500,
        rng=0,
    )
    assert set(out) == {"random", "proportional"}
    ds = out["random"]
    assert ds.sizes["rep"] == 6 and ds.sizes["look"] == 3 and ds.sizes["stratum"] == 6
    assert ds["n_labels"].values.tolist() == [90] * 6
    assert ds["trajectory_n_labels"].values[0].tolist() == [40, 80, 90]
    assert (ds["stopped_by"].values == "budget").all()
    np.testing.assert_allclose(ds["error"], ds["estimate"] - ds.attrs["truth"])
    np.testing.assert_allclose(ds["half_width"], (ds["upper"] - ds["lower"]) / 2)
    assert ds.attrs["prior"] == "jeffreys" and ds.attrs["metric"] == "f1"
    n = ds["n"].values
    assert (n.sum(axis=1) == 90).all() and (ds["h"].values <= n).all()
    # the truth is the population's actual F1
    tp = np.sum(truth & pop.predictions)
    f1 = 2 * tp / (truth.sum() + pop.predictions.sum())
    assert ds.attrs["truth"] == pytest.approx(f1)


def test_labels_are_hypergeometric_within_strata(lp):
    # proportional allocation is deterministic: h_k ~ Hypergeometric(P_k, N_k - P_k, n_k)
    pop, truth, strata = lp
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs="proportional",
        metric="accuracy",
        budget=300,
        batch_size=300,
        n_reps=400,
        draws=200,
        rng=1,
        trajectory=False,
    )
    ds = out["proportional"]
    n = ds["n"].values[0]
    assert (ds["n"].values == n).all()
    P = truth_counts(strata, truth)
    N = strata.sizes
    mean = n * P / N
    var = n * (P / N) * (1 - P / N) * (N - n) / (N - 1)
    got = ds["h"].values.mean(axis=0)
    assert np.all(np.abs(got - mean) <= 4 * np.sqrt(var / 400) + 1e-9)


def test_coverage_and_unbiasedness(lp):
    pop, truth, strata = lp
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs="random",
        metric="precision",
        budget=400,
        batch_size=400,
        n_reps=400,
        draws=1000,
        rng=2,
        trajectory=False,
        level=0.9,
    )
    ds = out["random"]
    cover = float(ds["covered"].mean())
    # nominal 0.9; binomial MC sd over 400 reps is 0.015
    assert abs(cover - 0.9) < 4 * 0.015
    err = ds["error"].values
    assert abs(err.mean()) < 4 * err.std() / np.sqrt(err.size) + 0.003


def test_matches_audit_in_distribution(lp):
    # the harness and real Audit objects agree on the spread of the estimate
    pop, truth, strata = lp
    sim = be.simulate(
        (pop, truth),
        strata=strata,
        designs="equal",
        metric="precision",
        budget=120,
        batch_size=60,
        n_reps=300,
        draws=400,
        rng=3,
    )["equal"]
    est = []
    for seed in range(40):
        audit = be.Audit(
            pop, strata=strata, metric="precision", design="equal", rng=seed, draws=400
        )
        res = audit.run(lambda ids: truth[ids], budget=120, batch_size=60)
        est.append(res.posterior.mean("precision"))
    est = np.asarray(est)
    s_sim, s_aud = float(sim["estimate"].std()), float(est.std(ddof=1))
    # ratio of sds from 40 reps: log(sd) has sd ~ 1/sqrt(2*39) = 0.11; allow 3.5 of those
    assert abs(np.log(s_aud / s_sim)) < 0.4
    assert abs(est.mean() - float(sim["estimate"].mean())) < 4 * s_sim / np.sqrt(40)


def test_stop_rules_vectorised_and_fallback(lp):
    pop, truth, strata = lp

    class AtLeast(StopRule):  # no vectorised form: run one replication at a time
        def check(self, audit, posterior):
            return StopDecision(audit.n_labels >= 60, "enough")

    kw = {
        "strata": strata,
        "metric": "precision",
        "budget": 500,
        "batch_size": 20,
        "n_reps": 5,
        "draws": 300,
        "rng": 4,
    }
    out = be.simulate((pop, truth), designs="random", stop=AtLeast(), **kw)["random"]
    assert out["n_labels"].values.tolist() == [60] * 5
    assert (out["stopped_by"].values == "enough").all()
    assert np.isnan(out["trajectory_mean"].values[:, 3:]).all()
    rule = be.stop.HalfWidth(0.08, rounds=2) | be.stop.Budget(200)
    out = be.simulate((pop, truth), designs="random", stop=rule, **kw)["random"]
    used = out["n_labels"].values
    assert (used <= 200).all() and (used >= 40).all()
    why = set(out["stopped_by"].values.tolist())
    assert why <= {"HalfWidth(0.08, level=0.95, rounds=2)", "Budget(200)"}
    stopped_hw = out["stopped_by"].values == "HalfWidth(0.08, level=0.95, rounds=2)"
    assert (out["half_width"].values[stopped_hw] <= 0.08).all()


def test_oracle_design_gets_true_rates(lp):
    pop, truth, strata = lp
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs=["neyman_oracle"],
        metric="precision",
        budget=100,
        batch_size=50,
        n_reps=3,
        draws=200,
        rng=5,
    )
    assert out["neyman_oracle"]["n_labels"].values.tolist() == [100] * 3


def test_labelled_population_and_design_mapping():
    data = be.datasets.synthetic(5000, prevalence=0.3, rng=0)
    strata = be.stratify(data.population, n_strata=2)
    out = be.simulate(
        data,
        strata=strata,
        metric="recall",
        budget=60,
        batch_size=30,
        n_reps=4,
        draws=200,
        rng=0,
        designs={"eq": "equal", "prop": ("proportional", {})},
    )
    assert set(out) == {"eq", "prop"}
    assert out["eq"].attrs["truth"] == pytest.approx(data.true_metrics()["recall"])


def test_relevant_sides():
    assert relevant_sides("precision") == (False, True)
    assert relevant_sides("npv") == (True, False)
    assert relevant_sides("f1") == (True, True)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"designs": ["nope"]}, ValueError, "designs='nope'"),
        ({"designs": []}, ValueError, "empty"),
        ({"designs": 3}, TypeError, "designs"),
        ({"metric": "f2"}, ValueError, "metric='f2'"),
        ({"budget": 0}, ValueError, "budget=0"),
        ({"n_reps": 1.5}, TypeError, "n_reps"),
        ({"level": 1.2}, ValueError, "level"),
        ({"stop": "x"}, TypeError, "StopRule"),
    ],
)
def test_bad_input(lp, kwargs, exc, match):
    pop, truth, strata = lp
    args = {
        "strata": strata,
        "designs": "random",
        "budget": 20,
        "batch_size": 10,
        "n_reps": 2,
        "draws": 100,
        "rng": 0,
        **kwargs,
    }
    with pytest.raises(exc, match=match):
        be.simulate((pop, truth), **args)


def test_bad_data(lp):
    pop, truth, strata = lp
    with pytest.raises(ValueError, match="truth has shape"):
        be.simulate(
            (pop, truth[:5]), strata=strata, designs="random", budget=5, batch_size=5, n_reps=1
        )
    with pytest.raises(TypeError, match="LabelledPopulation"):
        be.simulate(pop, strata=strata, designs="random", budget=5, batch_size=5, n_reps=1)
    other = be.Population(np.random.default_rng(0).random(100), threshold=0.5)
    with pytest.raises(ValueError, match="different population"):
        be.simulate(
            (other, np.zeros(100, bool)),
            strata=strata,
            designs="random",
            budget=5,
            batch_size=5,
            n_reps=1,
        )
