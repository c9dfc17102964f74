"""Certification (bayes_eval.certify, Certification) and the Accept stopping rule.

Reference: Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval.certification import Certification, certify
from bayes_eval.population import Population
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.priors import Prior
from bayes_eval.sequential import calibrate_sequential
from bayes_eval.sequential import correction as certmod
from bayes_eval.stop import Accept, Look, Procedure, StopRule
from bayes_eval.strata import Strata

SIZES = np.array([6000, 2000, 1200, 800])
PRED = np.array([False, False, True, True])


def _strata(sizes=SIZES, predicted=PRED, score_min=None, score_max=None):
    k = len(sizes)
    pop = Population(np.linspace(0, 1, int(np.sum(sizes))), predictions=np.repeat(predicted, sizes))
    lo = np.zeros(k) if score_min is None else score_min
    hi = np.zeros(k) if score_max is None else score_max
    return Strata(pop, np.repeat(np.arange(k), sizes), predicted, sizes, lo, hi, method="custom")


@pytest.fixture(scope="module")
def post():
    st = _strata()
    return estimate_from_stratum_counts(
        st,
        np.array([40, 30, 60, 40]),
        np.array([0, 2, 48, 39]),
        draws=40_000,
        rng=0,
        model="independent",
    )


def test_certify_single_look(post):
    p = post.prob_at_least("f1", 0.75)
    cert = certify(post, metric="f1", target=0.75, level=0.95)
    assert isinstance(cert, Certification)
    assert cert.accepted == (p >= 0.95)
    assert cert.prob_at_least == p
    assert cert.level_used == cert.level_requested == 0.95
    assert cert.lower_bound == post.lower_bound("f1", 0.95)
    assert cert.labels == 170 and cert.looks == 1 and cert.correction == "none"
    assert np.isnan(cert.correction_mcse)
    assert cert.prior == "jeffreys" and cert.model == "independent" and cert.finite_population
    # accept iff the lower bound at the level clears the target (same draws; ties aside)
    assert cert.accepted == (cert.lower_bound >= 0.75)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cert.accepted = True  # type: ignore[misc]
    assert "P(f1 >= 0.75)" in str(cert)
    assert cert.to_dict()["metric"] == "f1"
    # strict JSON: the NaN correction_mcse of an uncorrected certification becomes null
    text = json.dumps(cert.to_dict(), allow_nan=False)
    assert json.loads(text)["correction_mcse"] is None
    assert cert.prob_mcse == pytest.approx(np.sqrt(p * (1 - p) / post.n_draws))
    assert cert.informed and not cert.uncorrected
    # one lower bound in the headline: the one the decision used
    assert cert.headline().count("lower bound") == 1
    assert f"{cert.lower_bound:.4f}" in cert.headline()


def test_certification_requires_keywords_and_has_no_default_claim(post):
    with pytest.raises(TypeError):
        certify(post, "f1", 0.75, 0.95)  # type: ignore[misc]
    with pytest.raises(TypeError):
        certify(post, metric="f1", target=0.75)  # type: ignore[call-arg]


def test_borderline_verdict_is_flagged(post):
    # a target at which P(f1 >= target) sits within one MC s.e. of the level
    x = np.sort(post.draws("f1"))
    t = float(x[int(0.05 * x.size)])
    cert = certify(post, metric="f1", target=t, level=0.95)
    assert abs(cert.prob_at_least - 0.95) < cert.prob_mcse
    assert cert.borderline and "BORDERLINE" in cert.headline()
    far = certify(post, metric="f1", target=0.3, level=0.95)
    assert not far.borderline and "BORDERLINE" not in far.headline()
    assert cert.to_dict()["borderline"] is True


def test_certify_is_one_sided_and_monotone(post):
    """Raising the target or the level can only turn an acceptance into a refusal."""
    targets = np.linspace(0.5, 0.95, 10)
    acc = [certify(post, metric="f1", target=float(t), level=0.9).accepted for t in targets]
    assert acc == sorted(acc, reverse=True)
    levels = [0.6, 0.8, 0.9, 0.95, 0.99, 0.999]
    acc = [certify(post, metric="f1", target=0.78, level=lv).accepted for lv in levels]
    assert acc == sorted(acc, reverse=True)


def test_many_looks_without_correction_are_flagged(post):
    cert = certify(post, metric="f1", target=0.75, level=0.95, looks=12, design="random")
    assert cert.level_used == 0.95
    assert "12 looks without sequential correction" in cert.correction
    assert cert.uncorrected and "UNCORRECTED for 12 looks" in cert.headline()
    assert cert.design == "random"


def test_certify_with_calibration(post):
    cal = calibrate_sequential(
        _strata(),
        metric="f1",
        target=0.75,
        budget=200,
        rates=[0.01, 0.1, 0.8, 0.95],
        n_sims=2000,
        rng=1,
    )
    cert = certify(post, metric="f1", target=0.75, level=0.95, calibration=cal, looks=9)
    assert cert.level_used == max(0.95, cal.corrected_level(0.95)) > 0.95
    assert cert.accepted == (cert.prob_at_least >= cert.level_used)
    assert cert.lower_bound == post.lower_bound("f1", cert.level_used)
    assert "sequential correction" in cert.correction
    assert cert.correction_mcse == pytest.approx(np.sqrt(0.05 * 0.95 / 2000))
    with pytest.raises(ValueError, match=r"calibration is for f1 >= 0.75"):
        certify(post, metric="f1", target=0.8, level=0.95, calibration=cal)
    with pytest.raises(TypeError, match="calibration has type float"):
        certify(post, metric="f1", target=0.75, level=0.95, calibration=0.99)


def test_certify_bad_input(post):
    with pytest.raises(ValueError, match=r"target=1.2 is outside the range \[0, 1\]"):
        certify(post, metric="f1", target=1.2, level=0.95)
    with pytest.raises(ValueError, match=r"target=-0.1"):
        certify(post, metric="f1", target=-0.1, level=0.95)
    with pytest.raises(TypeError, match=r"target='0.8'"):
        certify(post, metric="f1", target="0.8", level=0.95)
    with pytest.raises(ValueError, match=r"level=1.0 is outside the open interval"):
        certify(post, metric="f1", target=0.8, level=1.0)
    with pytest.raises(ValueError, match=r"level=0.0"):
        certify(post, metric="f1", target=0.8, level=0.0)
    with pytest.raises(ValueError, match="metric='auc'"):
        certify(post, metric="auc", target=0.8, level=0.95)
    with pytest.raises(TypeError, match="post has type dict"):
        certify({}, metric="f1", target=0.8, level=0.95)
    with pytest.raises(ValueError, match="looks=0"):
        certify(post, metric="f1", target=0.8, level=0.95, looks=0)


# ------------------------------------------------------------------ the Accept stop rule
def _procedure(strata, path=None, **changes):
    """The procedure of an audit as bayes_eval.Audit.run hands it to its stop rule."""
    proc = Procedure(
        strata=strata,
        metric="f1",
        design="proportional",
        design_options={},
        model="independent",
        prior=Prior.resolve("jeffreys", strata.n_strata),
        finite_population=True,
        draws=10_000,
        batch_size=20,
        budget=200,
        seed=7,
        path=path,
    )
    return dataclasses.replace(proc, **changes)


def test_accept_rule_calibrates_caches_and_stops(tmp_path):
    certmod.clear_cache()
    st = _strata(score_min=np.array([0.0, 0.2, 0.5, 0.8]), score_max=np.array([0.2, 0.5, 0.8, 1.0]))
    rule = be.stop.Accept(0.75, level=0.95, n_sims=2000)
    assert isinstance(rule, StopRule)
    proc = _procedure(st, path=tmp_path)
    rule.prepare(proc)
    used = rule.level_used
    assert 0.95 < used < 1.0
    (saved,) = json.loads((tmp_path / "sequential_calibration.json").read_text()).values()
    assert saved["level_used"] == used and "scores rates" in saved["describe"]
    # in-process cache: a new rule with the same settings reuses the calibration
    again = Accept(0.75, level=0.95, n_sims=2000)
    again.prepare(_procedure(st))
    assert again.level_used == used
    # file cache: a resumed audit (fresh process cache) reads the JSON
    certmod.clear_cache()
    resumed = Accept(0.75, level=0.95, n_sims=2000)
    resumed.prepare(_procedure(st, path=tmp_path))
    assert resumed.level_used == used
    # looks: a strong posterior stops with acceptance, a weak one continues
    strong = estimate_from_stratum_counts(
        st,
        np.array([60, 40, 60, 40]),
        np.array([0, 0, 58, 40]),
        draws=20_000,
        rng=1,
        model="independent",
    )
    weak = estimate_from_stratum_counts(
        st, np.array([5, 5, 5, 5]), np.array([0, 1, 3, 4]), draws=20_000, rng=1, model="independent"
    )
    look = Look(proc, 0, 10)
    d = rule.check(look, strong)
    assert d.stop and d.reason.startswith("accepted") and d.state["level_used"] == used
    cert = rule.certification(look, strong)
    assert cert.accepted and cert.level_used == used and cert.level_requested == 0.95
    assert cert.looks == 10 and cert.design == "proportional"
    assert cert.lower_bound == strong.lower_bound("f1", used)
    d = rule.check(look, weak)
    assert not d.stop
    d = rule.check(Look(proc, 200, 11), weak)  # budget of 200 spent
    assert d.stop and "budget" in d.reason


def test_accept_rule_uncorrected_and_bad_input():
    st = _strata()
    rule = Accept(0.75, corrected=False)
    rule.prepare(_procedure(st))
    assert rule.level_used == 0.95
    with pytest.raises(ValueError, match=r"n_sims=500 is too few for level=0.95"):
        Accept(0.75, n_sims=500)
    with pytest.raises(ValueError, match="target=2"):
        Accept(2)
    with pytest.raises(ValueError, match=r"level=1.5"):
        Accept(0.8, level=1.5)
    with pytest.raises(ValueError, match="rates='oracle'"):
        Accept(0.8, rates="oracle")
    with pytest.raises(RuntimeError, match="prepare"):
        _ = Accept(0.8).level_used
    with pytest.raises(ValueError, match="budget"):
        Accept(0.8, n_sims=2000).prepare(_procedure(st, budget=None))


@pytest.mark.slow
def test_accept_rule_false_accept_is_controlled_end_to_end():
    """Simulated audits with the real posterior (Monte Carlo, as the audit computes it) under the
    least-favourable truth: with the corrected level the rule accepts at most 5% + 3 s.e.; with
    the naive level it accepts more often (Webber et al.'s phenomenon)."""
    st = _strata()
    rule = Accept(0.75, level=0.95, n_sims=2000, rates="prior")
    rule.prepare(_procedure(st, design="random", budget=120))
    from bayes_eval.sequential import least_favourable_truth

    truth = least_favourable_truth(SIZES, PRED, [0.5] * 4, metric="f1", value=0.75)
    rng = np.random.default_rng(3)
    runs = 80
    acc_corr = acc_naive = 0
    for _ in range(runs):
        good, bad = truth.copy(), SIZES - truth
        n = np.zeros(4, dtype=np.int64)
        h = np.zeros(4, dtype=np.int64)
        best = 0.0
        for _ in range(6):
            m = rng.multivariate_hypergeometric(good + bad, 20)
            new = (
                rng.hypergeometric(np.maximum(good, 0), np.maximum(bad, 0), np.maximum(m, 0))
                if m.any()
                else np.zeros(4, int)
            )
            new = np.where(m > 0, new, 0)
            n += m
            h += new
            good -= new
            bad -= m - new
            post = estimate_from_stratum_counts(
                st, n, h, draws=2000, rng=rng, metrics=("f1",), model="independent"
            )
            best = max(best, post.prob_at_least("f1", 0.75))
        acc_corr += best >= rule.level_used
        acc_naive += best >= 0.95
    se = np.sqrt(0.05 * 0.95 / runs)
    assert acc_corr / runs <= 0.05 + 3 * se
    assert rule.level_used >= 0.95  # conservative: never below the requested level
    assert acc_naive >= acc_corr


def test_accept_rule_vectorised_form_matches_check():
    """check_many (used by bayes_eval.simulate) accepts exactly where check does."""
    st = _strata()
    rule = Accept(0.75, level=0.95, n_sims=2000, rates="prior")
    proc = _procedure(st)
    rule.prepare(proc)
    rng = np.random.default_rng(0)
    posts = [
        estimate_from_stratum_counts(
            st,
            n,
            rng.binomial(n, [0.01, 0.1, 0.85, 0.95]),
            draws=4000,
            rng=i,
            metrics=("f1",),
            model="independent",
        )
        for i, n in enumerate(
            [np.array([20, 20, 20, 20]), np.array([60, 50, 60, 40]), np.array([5, 5, 5, 5])]
        )
    ]
    draws = np.stack([p.draws("f1") for p in posts])
    many = rule.check_many(draws, np.zeros(3), rule.start_many(3), np.arange(3))
    one = [rule.check(Look(proc, 0), p).stop for p in posts]
    assert many.tolist() == one


def test_accept_rule_geometric_looks():
    """Looks at 20, 40, 80, 160, 200 labels: a smaller correction than a look every batch, and no
    acceptance between looks."""
    certmod.clear_cache()
    st = _strata()
    every = Accept(0.75, level=0.95, n_sims=2000, rates="prior")
    geo = Accept(0.75, level=0.95, n_sims=2000, rates="prior", looks="geometric")
    proc = _procedure(st, design="random")
    every.prepare(proc)
    geo.prepare(proc)
    np.testing.assert_array_equal(geo._schedule, [20, 40, 80, 160, 200])
    # the boundaries are look-dependent: the fewer looks may start stricter (a steeper shape)
    # but the correction over the looks they share, and at the last look, is smaller
    looks = geo._schedule
    geo_lv = np.asarray(geo.correction.level_at(looks), dtype=float)
    every_lv = np.asarray(every.correction.level_at(looks), dtype=float)
    assert geo_lv.mean() <= every_lv.mean()
    assert geo_lv[-1] <= every_lv[-1]
    # P(F1 >= 0.75) = 0.997: above the boundary at every look, so only the schedule decides
    strong = estimate_from_stratum_counts(
        st,
        np.array([20, 20, 20, 20]),
        np.array([0, 0, 20, 20]),
        draws=20_000,
        rng=1,
        model="independent",
    )
    assert (strong.draws("f1") >= 0.75).mean() > geo.correction.boundary.max()
    d = geo.check(Look(proc, 60), strong)  # 60 labels: not a look
    assert not d.stop and d.state["look"] is False
    assert not geo.certification(Look(proc, 60), strong).accepted
    assert geo.check(Look(proc, 80), strong).stop  # 80 labels: a look
    with pytest.raises(ValueError, match="looks='often'"):
        Accept(0.8, looks="often")


def test_audit_run_returns_the_certification(tmp_path):
    """be.Audit.run with be.stop.Accept: calibrated before the first look, stops on acceptance,
    and the result carries the Certification (binding API of issue 4)."""
    lp = be.datasets.synthetic(20_000, prevalence=0.2, rng=0)
    strata = be.stratify(lp.population, method="equal_size", n_strata=4)
    audit = be.Audit(
        lp.population,
        strata=strata,
        metric="f1",
        design="proportional",
        prior="jeffreys",
        model="independent",
        rng=0,
        path=tmp_path / "audit",
    )
    rule = be.stop.Accept(0.6, level=0.95, n_sims=2000)
    res = audit.run(lp.oracle, budget=1000, batch_size=50, stop=rule)
    cert = res.certification
    assert isinstance(cert, Certification)
    assert cert.accepted and res.stopped_by.startswith("accepted")
    # the level of the accepting look; the rule's level_used is the strictest (its first look)
    assert cert.level_used == rule.correction.level_at(cert.labels)
    assert rule.level_used >= cert.level_used >= 0.95
    assert cert.labels == res.n_labels < 1000
    assert cert.prob_at_least >= cert.level_used and cert.lower_bound >= 0.6
    assert (tmp_path / "audit" / "sequential_calibration.json").exists()


def test_unattainable_correction_never_accepts_even_at_certainty():
    """A correction with no nominal level that holds alpha at every truth never accepts: not even
    when every posterior draw is above the target (P = 1 >= the nominal level 1.0)."""
    st = _strata()
    rule = Accept(0.5, level=0.95, n_sims=2000, rates="prior")
    proc = _procedure(st)
    rule.prepare(proc)
    certain = estimate_from_stratum_counts(
        st,
        np.array([60, 40, 60, 40]),
        np.array([0, 0, 60, 40]),
        draws=20_000,
        rng=1,
        model="independent",
    )
    look = Look(proc, 200, looks=10)
    assert certain.prob_at_least("f1", 0.5) == 1.0
    assert rule.certification(look, certain).accepted  # attainable: accepted
    rule._stored = dataclasses.replace(rule._stored, attainable=False, boundary=np.ones(10))
    assert not rule.certification(look, certain).accepted
    draws = certain.draws("f1")[None, :]
    assert not rule.check_many(draws, np.array([200]), {}, np.arange(1)).any()
    cert = be.certify(
        certain, metric="f1", target=0.5, level=0.95, looks=10, calibration=rule._stored
    )
    assert not cert.accepted and cert.prob_at_least == 1.0
