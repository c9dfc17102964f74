"""The "fast" sampler agrees with the exact one (bayes_eval._sampling).

Each comparison draws the same distribution with both samplers at a fixed seed and checks
(1) a two-sample Kolmogorov-Smirnov test (p > 0.001) and (2) that the 0.5%, 5%, 50%, 95% and
99.5% quantiles differ by less than 4 Monte Carlo standard errors of their difference
(``sqrt(mcse_fast^2 + mcse_exact^2)``, order-statistic MCSE from ``_draws.mcse_quantile``).
With 200,000 draws a side the KS test detects a CDF discrepancy of about 0.006, and the
quantile check a shift of about 0.03 posterior standard deviations at the median; the last tests
show that the same checks reject a sampler whose table has too few cells or whose normal
approximation is used where it is not accurate.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayes_eval import _sampling
from bayes_eval._draws import mcse_quantile
from bayes_eval.posterior import posterior_from_theta

QS = (0.005, 0.05, 0.5, 0.95, 0.995)
N_DRAWS = 200_000


def _disagreement(fast: np.ndarray, exact: np.ndarray, tol: float = 4.0) -> list[str]:
    """Reasons why two samples look different (empty list: they agree)."""
    why = []
    p = stats.ks_2samp(fast, exact).pvalue
    if p < 1e-3:
        why.append(f"KS p={p:.2e}")
    for q in QS:
        se = np.hypot(mcse_quantile(fast, q), mcse_quantile(exact, q))
        d = np.quantile(fast, q) - np.quantile(exact, q)
        # discrete counts: allow one unit of rounding when the MCSE is below it
        if abs(d) > tol * se and not (np.all(exact == np.round(exact)) and abs(d) <= 1):
            why.append(f"q={q}: diff {d:.3g} > {tol} x {se:.3g}")
    return why


BETA_CASES = [
    (0.5, 0.5),  # Jeffreys prior, no labels
    (0.5, 20.5),  # 20 labels, no positive
    (0.5, 300.5),  # rare-positive stratum
    (1.5, 5000.5),  # one positive in 5000
    (0.6, 1.7),  # a < 1 with user prior
    (3.5, 17.5),
    (15.5, 15.5),
    (20.5, 0.5),  # all positive
    (250.5, 60.5),
    (2000.5, 18000.5),
]


@pytest.mark.parametrize(("a", "b"), BETA_CASES)
def test_beta_fast_matches_exact(a, b):
    rng = np.random.default_rng(20240)
    fast = _sampling.draw_beta(np.array([a]), np.array([b]), N_DRAWS, rng)[:, 0]
    exact = _sampling.draw_beta(np.array([a]), np.array([b]), N_DRAWS, rng, method="exact")[:, 0]
    assert fast.shape == (N_DRAWS,)
    assert np.all((fast >= 0) & (fast <= 1))
    assert _disagreement(fast, exact) == []
    # and against the Beta distribution itself (one-sample KS)
    assert stats.kstest(fast, stats.beta(a, b).cdf).pvalue > 1e-3


def test_beta_fast_several_strata_and_determinism():
    a = np.array([0.5, 3.5, 40.5, 0.5])
    b = np.array([30.5, 7.5, 2.5, 0.5])
    x = _sampling.draw_beta(a, b, 50_000, np.random.default_rng(1))
    y = _sampling.draw_beta(a, b, 50_000, np.random.default_rng(1))
    np.testing.assert_array_equal(x, y)
    assert x.shape == (50_000, 4) and x.flags.c_contiguous
    ex = _sampling.draw_beta(a, b, 50_000, np.random.default_rng(2), method="exact")
    for k in range(4):
        assert _disagreement(x[:, k], ex[:, k]) == []
    # strata are independent: correlations within Monte Carlo error (4 / sqrt(n))
    c = np.corrcoef(x.T)
    assert np.all(np.abs(c[np.triu_indices(4, 1)]) < 4 / np.sqrt(50_000))


def test_beta_tiny_parameters_fall_back_to_exact():
    # quantiles of Beta(0.005, 0.005) underflow: the table is invalid and exact draws are used
    x = _sampling.draw_beta(
        np.array([0.005, 2.0]), np.array([0.005, 3.0]), 10_000, np.random.default_rng(0)
    )
    assert np.all(np.isfinite(x)) and np.all((x >= 0) & (x <= 1))
    assert abs(np.mean(x[:, 0]) - 0.5) < 4 * 0.5 / np.sqrt(10_000)


REMAINDER_CASES = [
    (632, 0.05),  # binomial variance 30, skewness 0.16: the normal approximation's edge
    (3000, 0.01),
    (200, 0.5),
    (1000, 0.97),
    (10**7, 3e-6),  # rare positives, huge remainder (variance 30)
    (10**7, 0.02),
    (40, 0.3),  # small: exact binomial
]


@pytest.mark.parametrize(("remaining", "theta"), REMAINDER_CASES)
def test_remainder_fast_matches_binomial_at_fixed_theta(remaining, theta):
    # the hardest case for the normal approximation: theta fixed, all spread from the binomial
    rng = np.random.default_rng(7)
    th = np.full((N_DRAWS, 1), theta)
    r = np.array([remaining])
    fast = _sampling.draw_remainder(th, r, rng)[:, 0]
    exact = _sampling.draw_remainder(th, r, rng, method="exact")[:, 0]
    assert np.all(fast == np.round(fast)) and fast.min() >= 0 and fast.max() <= remaining
    assert _disagreement(fast, exact) == []


def test_remainder_mixed_regimes_and_empty_strata():
    rng = np.random.default_rng(3)
    # rare-positive stratum: theta ~ Beta(0.5, 300.5) puts some draws below and some above the
    # normal-approximation threshold; a fully labelled stratum (remaining 0) gives zeros
    th = _sampling.draw_beta(
        np.array([0.5, 2.5, 1.0]), np.array([300.5, 10.5, 1.0]), N_DRAWS, rng, method="exact"
    )
    r = np.array([5 * 10**6, 10**5, 0])
    fast = _sampling.draw_remainder(th, r, rng)
    exact = _sampling.draw_remainder(th, r, rng, method="exact")
    assert np.all(fast[:, 2] == 0)
    for k in range(2):
        assert _disagreement(fast[:, k], exact[:, k]) == []


def _metric_posterior(sampler: str, scenario: dict, draws: int, seed: int):
    rng = np.random.default_rng(seed)
    a = 0.5 + scenario["h"]
    b = 0.5 + scenario["n"] - scenario["h"]
    theta = _sampling.draw_beta(a, b, draws, rng, method=sampler)
    return posterior_from_theta(
        theta,
        sizes=scenario["N"],
        predicted=scenario["pred"],
        n=scenario["n"],
        h=scenario["h"],
        prior_a=np.full(a.size, 0.5),
        prior_b=np.full(a.size, 0.5),
        prior_desc="jeffreys",
        finite_population=True,
        metrics=None,
        rng=rng,
        sampler=sampler,
    )


SCENARIOS = {
    # rare positives: huge predicted-negative strata with (almost) no positives among the labels
    "rare_huge": {
        "N": np.array([10**7, 10**6, 10**5, 10**4, 5000, 2000]),
        "pred": np.array([False, False, False, True, True, True]),
        "n": np.array([50, 50, 40, 30, 30, 30]),
        "h": np.array([0, 1, 3, 5, 15, 28]),
    },
    # nearly fully labelled strata: the binomial remainder dominates the spread
    "nearly_full": {
        "N": np.array([2000, 1500, 1200, 900]),
        "pred": np.array([False, False, True, True]),
        "n": np.array([1900, 1400, 1100, 850]),
        "h": np.array([40, 150, 700, 800]),
    },
    "typical": {
        "N": np.full(10, 100_000),
        "pred": np.arange(10) >= 5,
        "n": np.full(10, 30),
        "h": np.array([0, 0, 1, 2, 5, 10, 15, 20, 26, 29]),
    },
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_metrics_fast_match_exact(name):
    fast = _metric_posterior("fast", SCENARIOS[name], 100_000, 11)
    exact = _metric_posterior("exact", SCENARIOS[name], 100_000, 12)
    for metric in ("precision", "recall", "f1", "accuracy", "prevalence"):
        why = _disagreement(fast.draws(metric), exact.draws(metric))
        assert why == [], f"{name}/{metric}: {why}"


def test_checks_reject_a_table_with_too_few_cells(monkeypatch):
    # the same checks must fail when the inverse-CDF table is too coarse (8 cells instead of
    # 512; with 16 or 32 cells some cases are caught too)
    monkeypatch.setattr(_sampling, "TABLE_CELLS", 8)
    rng = np.random.default_rng(20240)
    failures = 0
    for a, b in [(0.5, 20.5), (3.5, 17.5), (1.5, 5000.5)]:
        fast = _sampling.draw_beta(np.array([a]), np.array([b]), N_DRAWS, rng)[:, 0]
        exact = _sampling.draw_beta(np.array([a]), np.array([b]), N_DRAWS, rng, method="exact")[
            :, 0
        ]
        failures += bool(_disagreement(fast, exact))
    assert failures == 3


def test_checks_reject_normal_approximation_where_inaccurate(monkeypatch):
    # Binomial(40, 0.05) (variance 1.9) is far from normal: forcing the approximation must fail
    monkeypatch.setattr(_sampling, "NORMAL_MIN_VARIANCE", 0.5)
    rng = np.random.default_rng(7)
    th = np.full((N_DRAWS, 1), 0.05)
    fast = _sampling.draw_remainder(th, np.array([40]), rng)[:, 0]
    exact = _sampling.draw_remainder(th, np.array([40]), rng, method="exact")[:, 0]
    assert _disagreement(fast, exact) != []
