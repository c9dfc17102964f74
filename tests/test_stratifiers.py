"""Stratification kernels: each rule against its analytic boundaries, and the dispatch."""

from __future__ import annotations

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import _stratifiers as ks
from bayes_eval.strata import _auto_n_strata


def _triangular(n: int, seed: int = 0) -> np.ndarray:
    # density f(z) = 2 z on [0, 1] by inversion: z = sqrt(u)
    return np.sqrt(np.random.default_rng(seed).random(n))


def test_cum_sqrt_f_matches_dalenius_hodges_on_triangular_density():
    # f = 2z: G(z) = int sqrt(2t) dt ∝ z^{3/2}, so G(z_j) = j G(1) / n gives z_j = (j/n)^{2/3}
    z = _triangular(400_000)
    edges = ks.cum_sqrt_f(z, 4)
    expected = (np.arange(1, 4) / 4) ** (2 / 3)
    np.testing.assert_allclose(edges, expected, atol=0.01)


def test_cum_cbrt_f_on_triangular_density():
    # G(z) ∝ int t^{1/3} dt ∝ z^{4/3}: z_j = (j/n)^{3/4}
    z = _triangular(400_000, seed=1)
    edges = ks.cum_cbrt_f(z, 4)
    np.testing.assert_allclose(edges, (np.arange(1, 4) / 4) ** 0.75, atol=0.01)


def test_weighted_mean_equalises_stratum_totals():
    # uniform z on [0, 1]: sum of z below b ∝ b^2, so W_h * mean_h constant gives b_j = sqrt(j/n)
    z = np.random.default_rng(2).random(400_000)
    edges = ks.weighted_mean(z, 4)
    np.testing.assert_allclose(edges, np.sqrt(np.arange(1, 4) / 4), atol=0.01)
    cut = np.searchsorted(edges, z, side="right")
    totals = np.bincount(cut, weights=z)
    assert totals.max() / totals.min() < 1.02


def test_weighted_mean_shifts_negative_scores():
    z = np.random.default_rng(3).random(100_000)
    np.testing.assert_allclose(
        ks.weighted_mean(z - 5.0, 3) + 5.0, ks.weighted_mean(z, 3), atol=1e-3
    )


def _exact_kmeans_sse(x: np.ndarray, k: int) -> float:
    """Optimal 1-D k-means SSE by dynamic programming over sorted points (Wang & Song 2011)."""
    x = np.sort(x)
    n = x.size
    c1 = np.concatenate([[0.0], np.cumsum(x)])
    c2 = np.concatenate([[0.0], np.cumsum(x * x)])

    def cost(i, j):  # points i..j-1
        m = j - i
        return c2[j] - c2[i] - (c1[j] - c1[i]) ** 2 / m

    best = np.array([cost(0, j) if j > 0 else np.inf for j in range(n + 1)])
    for _ in range(1, k):
        new = np.full(n + 1, np.inf)
        for j in range(2, n + 1):
            i = np.arange(1, j)
            new[j] = np.min(best[i] + cost(i, j))
        best = new
    return float(best[n])


def test_kmeans_reaches_exact_optimum():
    # provenance: the exact 1-D optimum by dynamic programming (above)
    rng = np.random.default_rng(4)
    z = np.concatenate([rng.normal(0, 1, 150), rng.normal(6, 0.5, 50), rng.beta(2, 5, 100)])

    def sse(edges):
        lab = np.searchsorted(edges, z, side="right")
        return sum(((z[lab == j] - z[lab == j].mean()) ** 2).sum() for j in np.unique(lab))

    ours = sse(ks.kmeans(z, 4, rng=np.random.default_rng(0)))
    assert ours == pytest.approx(_exact_kmeans_sse(z, 4), rel=1e-9)


def test_kmeans_is_deterministic_from_rng():
    z = np.random.default_rng(5).gamma(2.0, size=20_000)
    a = ks.kmeans(z, 5, rng=np.random.default_rng(9))
    b = ks.kmeans(z, 5, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (4,) and np.all(np.diff(a) > 0)


def test_gmm_boundary_is_where_weighted_densities_cross():
    # two components N(-2, 1) (weight 0.75) and N(2, 1) (weight 0.25): the posterior changes
    # hands where 0.75 phi(z + 2) = 0.25 phi(z - 2), i.e. z = log(3) / 4
    rng = np.random.default_rng(6)
    z = np.concatenate([rng.normal(-2, 1, 150_000), rng.normal(2, 1, 50_000)])
    edges = ks.gmm(z, 2, rng=np.random.default_rng(0))
    assert edges.shape == (1,)
    assert abs(edges[0] - np.log(3) / 4) < 0.05


def test_histogram_bin_rule():
    z = np.random.default_rng(7).random(1_000_000)
    # Freedman–Diaconis: range / (2 IQR N^{-1/3}) = 1 / (2 * 0.5 * 0.01) = 100, floor 20 n
    assert ks.histogram_bins(z, 2) == pytest.approx(100, abs=3)
    assert ks.histogram_bins(z, 10) == 200
    assert ks.histogram_bins(np.concatenate([np.zeros(1000), [1.0]]), 3) == ks.MAX_BINS


@pytest.mark.parametrize("method", ["cum_sqrt_f", "cum_cbrt_f", "weighted_mean", "kmeans", "gmm"])
def test_new_methods_through_stratify(method):
    rng = np.random.default_rng(8)
    pop = be.Population(rng.beta(0.7, 1.5, 20_000), threshold=0.5)
    strata = be.stratify(pop, method=method, n_strata=4, rng=0)
    assert strata.method == method
    assert (strata.sizes > 0).all() and strata.sizes.sum() == pop.size
    assert np.array_equal(np.bincount(np.asarray(strata.assignment, dtype=np.int64)), strata.sizes)
    assert 4 <= strata.n_strata <= 8
    for side in (False, True):
        idx = np.flatnonzero(strata.predicted == side)
        assert (strata.score_max[idx][:-1] < strata.score_min[idx][1:]).all()


def test_confidence_variable_for_margins():
    # margins around threshold 1.0: confidence |s - 1|; equal-width strata on each side are the
    # same partition as on the score, weighted-mean strata are not (they use the values)
    rng = np.random.default_rng(9)
    s = rng.normal(0.0, 2.0, 30_000)
    pop = be.Population(s, threshold=1.0)
    a = be.stratify(pop, method="equal_width", n_strata=3, variable="score")
    b = be.stratify(pop, method="equal_width", n_strata=3, variable="confidence")
    assert np.array_equal(a.sizes, b.sizes)
    # the confidence of the negative side grows as the score falls: strata still numbered by score
    assert (np.diff(b.score_min[~b.predicted]) > 0).all()
    w = be.stratify(pop, method="weighted_mean", n_strata=3, variable="confidence")
    conf = np.abs(s - 1.0)
    pos = np.asarray(w.assignment)[pop.predictions]
    totals = np.bincount(pos - pos.min(), weights=conf[pop.predictions])
    assert totals.max() / totals.min() < 1.05


def test_confidence_of_probabilities_is_probability_of_predicted_class():
    from bayes_eval.strata import _confidence

    pop = be.Population(np.array([0.1, 0.3, 0.7, 0.95]), threshold=0.6)
    np.testing.assert_allclose(_confidence(pop, "auto"), [0.9, 0.7, 0.7, 0.95])
    np.testing.assert_allclose(_confidence(pop, "margin"), [0.5, 0.3, 0.1, 0.35])


def test_auto_rule():
    # 10 strata per side, one per five items on a side of fewer than 50, at least 2
    assert _auto_n_strata(np.zeros(10**6)) == 10
    assert _auto_n_strata(np.zeros(1000)) == 10
    assert _auto_n_strata(np.zeros(50)) == 10
    assert _auto_n_strata(np.zeros(29)) == 6
    assert _auto_n_strata(np.zeros(7)) == 2
    assert _auto_n_strata(np.zeros(1)) == 2
    rng = np.random.default_rng(10)
    scores = np.concatenate([rng.random(3000) * 0.5, 0.5 + 0.5 * rng.random(29)])
    strata = be.stratify(be.Population(scores, threshold=0.5), n_strata="auto")
    # a needle-like population: 10 strata below the threshold, 6 on its 29 predicted positives
    assert (~strata.predicted).sum() == 10 and strata.predicted.sum() == 6
    assert strata.sizes[strata.predicted].min() >= 4


def test_constant_values_give_one_stratum():
    pop = be.Population(np.full(100, 0.7), threshold=0.5)
    for method in ("cum_sqrt_f", "weighted_mean", "kmeans", "gmm"):
        strata = be.stratify(pop, method=method, n_strata="auto")
        assert strata.n_strata == 1
