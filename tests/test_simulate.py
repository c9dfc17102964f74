"""The simulation harness: shapes, statistical agreement with the audit, stop rules, errors."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval.metrics import relevant_sides
from bayes_eval.simulation import truth_counts
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
    assert ds.attrs["prior"] == "pooled hyperpriors" and ds.attrs["model"] == "pooled"
    assert ds.attrs["metric"] == "f1"
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
    out = be.simulate((pop, truth), designs="random", stop=AtLeast(), **kw, model="independent")[
        "random"
    ]
    assert out["n_labels"].values.tolist() == [60] * 5
    # named as every stop is named (its class: it has no repr of its own), not by its reason
    assert (out["stopped_by"].values == "AtLeast").all()
    assert np.isnan(out["trajectory_mean"].values[:, 3:]).all()
    rule = be.stop.HalfWidth(0.08, rounds=2) | be.stop.Budget(200)
    out = be.simulate((pop, truth), designs="random", stop=rule, **kw, model="independent")[
        "random"
    ]
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
        model="independent",
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
    with pytest.raises(TypeError, match="strata has type list"):
        be.simulate((pop, truth), strata=[1, 2], designs="random", budget=5, batch_size=5, n_reps=1)

    class NoPopulation:  # strata-like, but without the protocol's population
        sizes, predicted, n_strata = strata.sizes, strata.predicted, strata.n_strata

    with pytest.raises(TypeError, match="strata has type NoPopulation; allowed: a Strata"):
        be.simulate(
            (pop, truth), strata=NoPopulation(), designs="random", budget=5, batch_size=5, n_reps=1
        )
    other = be.Population(np.random.default_rng(0).random(100), threshold=0.5)
    with pytest.raises(ValueError, match="different population than the data given"):
        be.simulate(
            (other, np.zeros(100, bool)),
            strata=strata,
            designs="random",
            budget=5,
            batch_size=5,
            n_reps=1,
        )


# ---------------------------------------------------------------------- batch forms and schedules
class _PerReplication:
    """A design without its batch form: simulate() calls ``allocate`` once per replication."""

    def __init__(self, design):
        self.inner = design
        self.name = design.name
        if hasattr(design, "batch_schedule"):
            self.batch_schedule = design.batch_schedule

    def allocate(self, state, batch_size, rng):
        return self.inner.allocate(state, batch_size, rng)


@pytest.mark.parametrize(
    ("design", "metric"),
    [
        ("proportional", "f1"),
        ("equal", "recall"),
        ("opt_a1", "accuracy"),
        ("opt_a2", "f1"),
        ("neyman_oracle", "precision"),
    ],
)
def test_batched_designs_match_per_replication(lp, design, metric):
    # these designs are deterministic given the labels: allocate_many over all replications and
    # allocate per replication (each with its own copy of the design: OPT-A1 keeps state) give
    # identical allocations, hence identical labels and estimates from the same seed.
    # (posterior_variance is deterministic too, but its finite-difference metric gradient
    # rounds differently for one row and for R rows, which can flip exact ties between strata:
    # it is compared in distribution below.)
    pop, truth, strata = lp
    kw = {
        "strata": strata,
        "metric": metric,
        "budget": 150,
        "batch_size": 25,
        "n_reps": 12,
        "draws": 300,
        "rng": 11,
        "stop": be.stop.HalfWidth(0.1, rounds=1),
    }
    got = be.simulate((pop, truth), designs=design, **kw, model="independent")[design]
    rates = truth_counts(strata, truth) / strata.sizes
    inner = be.make_design(design, **({"rates": rates} if design == "neyman_oracle" else {}))
    ref = be.simulate(
        (pop, truth), designs={design: _PerReplication(inner)}, **kw, model="independent"
    )[design]
    np.testing.assert_array_equal(got["n"].values, ref["n"].values)
    np.testing.assert_array_equal(got["h"].values, ref["h"].values)
    np.testing.assert_array_equal(got["estimate"].values, ref["estimate"].values)
    assert (got["stopped_by"].values == ref["stopped_by"].values).all()
    # and reproducible from the seed
    again = be.simulate((pop, truth), designs=design, **kw, model="independent")[design]
    np.testing.assert_array_equal(again["estimate"].values, got["estimate"].values)


@pytest.mark.parametrize(
    ("design", "options"), [("online_optimal", {"d0": 30, "d": 30}), ("posterior_variance", {})]
)
def test_batched_designs_same_distribution(lp, design, options):
    # online_optimal draws its batch sizes (multinomial) from another generator in the batched
    # path; posterior_variance may break exact ties differently (see above). Both paths must
    # allocate alike in distribution: mean final labels per stratum over 300 replications agree
    # within 4 standard errors of the difference.
    pop, truth, strata = lp
    kw = {
        "strata": strata,
        "metric": "f1",
        "budget": 60,
        "batch_size": 30,
        "n_reps": 300,
        "draws": 100,
        "rng": 12,
        "trajectory": False,
    }
    got = be.simulate((pop, truth), designs={"d": (design, options)}, **kw, model="independent")[
        "d"
    ]
    per = _PerReplication(be.make_design(design, **options))
    ref = be.simulate((pop, truth), designs={"d": per}, **kw, model="independent")["d"]
    a, b = got["n"].values, ref["n"].values
    assert (a.sum(axis=1) == 60).all() and (b.sum(axis=1) == 60).all()
    se = np.sqrt(a.var(axis=0, ddof=1) / a.shape[0] + b.var(axis=0, ddof=1) / b.shape[0])
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= 4 * se + 1e-9)
    e_a, e_b = got["estimate"].values, ref["estimate"].values
    se_e = np.sqrt(e_a.var(ddof=1) / e_a.size + e_b.var(ddof=1) / e_b.size)
    assert abs(e_a.mean() - e_b.mean()) <= 4 * se_e


def test_simulate_follows_batch_schedule(lp):
    pop, truth, strata = lp
    k = strata.n_strata
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs={
            "oo": ("online_optimal", {"d0": 30, "d": 12}),
            "a2": ("opt_a2", {"n_ini": 3, "n_step": 10}),
            "oo_default": "online_optimal",
        },
        metric="f1",
        budget=70,
        batch_size=50,  # ignored by designs with a schedule
        n_reps=3,
        draws=200,
        rng=13,
    )
    assert out["oo"]["trajectory_n_labels"].values[0].tolist() == [30, 42, 54, 66, 70]
    assert out["oo"].attrs["batch_sizes"].tolist() == [30, 12, 12, 12, 4]
    assert out["a2"]["trajectory_n_labels"].values[0].tolist() == [3 * k, 28, 38, 48, 58, 68, 70]
    # the paper's default: two labels per stratum per round, D0 = D = 2K
    assert out["oo_default"].attrs["batch_sizes"].tolist() == [12] * 5 + [10]
    # the initial sample of OPT-A2 has n_ini labels in every stratum
    first = out["a2"]["n"].values
    assert (first >= 3).all()


class _NoVector(StopRule):
    """A rule without the vectorised form (never stops): forces the per-audit path."""

    def check(self, look, posterior):
        return StopDecision(False)


@pytest.mark.parametrize(
    ("model", "extra"),
    [("independent", None), ("independent", _NoVector()), ("pooled", None)],
    ids=["independent-vectorised", "independent-per-audit", "pooled-per-audit"],
)
def test_stopped_by_names_alike_on_every_path(lp, model, extra):
    # the vectorised path names the rule's repr; the per-audit path used to give the rule's reason
    # ("accepted: P(...) = ...", "budget exhausted without acceptance"), so `stopped_by != "budget"`
    # counted every unaccepted audit of the default model as an acceptance
    pop, truth, strata = lp
    f1 = 2 * (truth & pop.predictions).sum() / (truth.sum() + pop.predictions.sum())
    accept = be.stop.Accept(f1 - 0.03, level=0.9, corrected=False)
    rule = accept if extra is None else accept | extra
    out = be.simulate(
        (pop, truth),
        strata=strata,
        designs="proportional",
        metric="f1",
        budget=200,
        batch_size=50,
        n_reps=12,
        draws=400,
        rng=3,
        stop=rule,
        model=model,
        trajectory=False,
    )["proportional"]
    names = out["stopped_by"].values.astype(str)
    assert set(names) <= {repr(accept), "budget"}
    accepted = out["accepted"].values
    np.testing.assert_array_equal(accepted, names == repr(accept))
    assert accepted.any() and not accepted.all()
    assert (out["n_labels"].values[~accepted] == 200).all()
