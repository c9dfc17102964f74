"""Stopping rules: single looks, streaks, combinations, and the vectorised form used by simulate."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval.priors import Prior
from bayes_eval.stop import (
    BUDGET,
    AllOf,
    AnyOf,
    Budget,
    HalfWidth,
    Look,
    LowerBoundAbove,
    Procedure,
    StopDecision,
    StopRule,
    find_certifier,
    stopped_by,
    supports_many,
)


class _Post:
    """Minimal posterior: fixed draws of the metric."""

    def __init__(self, x):
        self.x = np.asarray(x, dtype=float)

    def draws(self, name):
        return self.x


_PROCEDURE = Procedure(
    strata=None,
    metric="precision",
    design="random",
    design_options={},
    model="independent",
    prior=Prior.resolve("jeffreys", 1),
)


def _Audit(n_labels=0):
    return Look(_PROCEDURE, n_labels)


def _normal_draws(sd, rng, mean=0.7, d=20_000):
    return mean + sd * rng.standard_normal(d)


def test_budget():
    rule = Budget(100)
    assert not rule.check(_Audit(99), None).stop
    d = rule.check(_Audit(100), None)
    assert d.stop and "100" in d.reason


def test_halfwidth_needs_consecutive_rounds():
    rng = np.random.default_rng(0)
    rule = HalfWidth(0.02, level=0.95, rounds=2)
    rule.prepare(_Audit())
    narrow = _Post(_normal_draws(0.005, rng))  # half-width ~ 1.96 * 0.005 = 0.0098
    wide = _Post(_normal_draws(0.05, rng))  # ~ 0.098
    seq = [narrow, wide, narrow, narrow]
    stops = [rule.check(_Audit(), p).stop for p in seq]
    assert stops == [False, False, False, True]
    # half-width of a normal posterior: z_{0.975} sd (scipy.stats.norm.ppf(0.975) = 1.95996)
    w = rule.check(_Audit(), narrow).state["half_width"]
    assert w == pytest.approx(1.95996 * 0.005, rel=0.03)
    rule.prepare(_Audit())  # resets the streak
    assert not rule.check(_Audit(), narrow).stop


def test_lower_bound_above():
    rng = np.random.default_rng(1)
    post = _Post(_normal_draws(0.01, rng, mean=0.8))
    # 5% quantile of N(0.8, 0.01): 0.8 - 1.645 * 0.01 = 0.7836
    assert LowerBoundAbove(0.78, level=0.95).check(_Audit(), post).stop
    assert not LowerBoundAbove(0.79, level=0.95).check(_Audit(), post).stop


def test_combinations():
    rng = np.random.default_rng(2)
    post = _Post(_normal_draws(0.001, rng))
    either = Budget(10) | LowerBoundAbove(0.99)
    assert isinstance(either, AnyOf) and len(either.rules) == 2
    d = either.check(_Audit(10), post)
    assert d.stop and "budget" in d.reason
    both = Budget(10) & LowerBoundAbove(0.99)
    assert isinstance(both, AllOf)
    assert not both.check(_Audit(10), post).stop
    assert (Budget(10) & LowerBoundAbove(0.5)).check(_Audit(10), post).stop
    flat = Budget(1) | Budget(2) | Budget(3)
    assert len(flat.rules) == 3
    assert repr(flat) == "Budget(1) | Budget(2) | Budget(3)"


class _Spent(StopRule):
    """Stops only because the budget is spent, as an ``Accept`` that never accepted does."""

    def check(self, look, posterior):
        return StopDecision(True, "budget exhausted without acceptance", {}, BUDGET)


def test_stopped_by_names_the_rule_that_stopped():
    rng = np.random.default_rng(2)
    post = _Post(_normal_draws(0.001, rng))
    lb, cap = LowerBoundAbove(0.5), Budget(10)
    # a plain rule: its repr; inside `|`: the first that stopped, whatever its place
    assert stopped_by(lb, lb.check(_Audit(10), post)) == repr(lb)
    either = LowerBoundAbove(0.99) | cap
    assert stopped_by(either, either.check(_Audit(10), post)) == repr(cap)
    # a rule spent by the budget yields to one that stopped for a reason, else names the budget
    spent = _Spent()
    for rule in (spent | lb, lb | spent):
        assert stopped_by(rule, rule.check(_Audit(10), post)) == repr(lb)
    alone = _Spent() | LowerBoundAbove(0.99)
    assert stopped_by(alone, alone.check(_Audit(10), post)) == BUDGET
    both = _Spent() & cap
    assert stopped_by(both, both.check(_Audit(10), post)) == BUDGET
    both = lb & cap
    assert stopped_by(both, both.check(_Audit(10), post)) == repr(both)


def test_check_many_agrees_with_check():
    rng = np.random.default_rng(3)
    sds = np.array([0.001, 0.004, 0.006, 0.02, 0.05])
    draws = 0.7 + sds[:, None] * rng.standard_normal((5, 4000))
    n_labels = np.array([10, 20, 30, 40, 50])
    for make in (
        lambda: HalfWidth(0.01),
        lambda: LowerBoundAbove(0.69),
        lambda: Budget(30),
        lambda: HalfWidth(0.01) | Budget(45),
        lambda: HalfWidth(0.05) & Budget(25),
    ):
        rule = make()
        assert supports_many(rule)
        state = rule.start_many(5)
        many = rule.check_many(draws, n_labels, state, np.arange(5))
        one = []
        for i in range(5):
            r = make()
            r.prepare(_Audit())
            one.append(r.check(_Audit(int(n_labels[i])), _Post(draws[i])).stop)
        assert many.tolist() == one


def test_halfwidth_many_streak_per_row():
    rule = HalfWidth(0.01, rounds=2)
    state = rule.start_many(3)
    rng = np.random.default_rng(4)
    narrow = 0.5 + 0.001 * rng.standard_normal((3, 1000))
    assert not rule.check_many(narrow, np.zeros(3), state, np.arange(3)).any()
    hit = rule.check_many(narrow[:2], np.zeros(2), state, np.array([0, 2]))
    assert hit.tolist() == [True, True]
    assert state["streak"].tolist() == [2, 1, 2]


def test_custom_rule_without_many_and_certifier_lookup():
    class Never(StopRule):
        def check(self, audit, posterior):
            return be.stop.StopDecision(False)

    class Certifying(Never):
        def certification(self, audit, posterior):
            return "verdict"

    assert not supports_many(Never())
    assert not supports_many(Never() | Budget(3))
    assert find_certifier(Budget(3)) is None
    c = Certifying()
    assert find_certifier(Budget(3) | (Budget(4) & c)) is c
    assert find_certifier(None) is None


def test_accept_resolves_lazily():
    from bayes_eval.stop import Accept

    assert be.stop.Accept is Accept
    assert isinstance(be.stop.Accept(0.8, corrected=False), StopRule)
    with pytest.raises(AttributeError, match="no attribute"):
        be.stop.NoSuchRule  # noqa: B018


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: Budget(0), ValueError, "n=0"),
        (lambda: Budget(2.5), TypeError, "n=2.5"),
        (lambda: HalfWidth(0.0), ValueError, "delta=0.0"),
        (lambda: HalfWidth(1.5), ValueError, "delta=1.5"),
        (lambda: HalfWidth("a"), TypeError, "delta='a'"),
        (lambda: HalfWidth(0.01, level=1.0), ValueError, "level"),
        (lambda: HalfWidth(0.01, rounds=0), ValueError, "rounds=0"),
        (lambda: LowerBoundAbove(float("nan")), ValueError, "target"),
        (lambda: LowerBoundAbove(1.5), ValueError, "target=1.5"),
        (lambda: LowerBoundAbove(0.5, level=0), ValueError, "level"),
        (lambda: Budget(3) | 4, TypeError, "StopRule"),
        (lambda: AllOf(Budget(3), "x"), TypeError, "StopRule"),
    ],
)
def test_bad_input(make, exc, match):
    with pytest.raises(exc, match=match):
        make()
