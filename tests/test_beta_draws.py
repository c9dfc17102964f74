"""The compiled Beta sampler of the pooled model (bayes_eval.models._beta_draws).

Statistical checks, all at fixed seeds:

* ``Beta(a, b)`` draws against :meth:`numpy.random.Generator.beta` over the grid
  ``a, b in {1e-3, 0.05, 0.5, 1, 3, 50, 1e6}``: a two-sample Kolmogorov-Smirnov test
  (``p > 1e-3``) and the empirical CDFs of both samples at numpy's 0.1 %, 1 %, 10 %, 50 %, 90 %,
  99 % and 99.9 % quantiles, whose difference must stay within 4.5 Monte Carlo standard errors
  (``sqrt(2 p (1 - p) / N)``; a CDF comparison also handles the atoms at 0 and 1 that tiny
  shapes produce in double precision). With ``N = 100,000`` draws a side this detects a CDF
  discrepancy of about 0.008; ``test_checks_reject_a_wrong_sampler`` shows the same checks
  reject Beta draws whose shape is off by 3 %.
* The same CDF check against the exact CDF (``scipy.special.betainc``) at ``t = 2^-j`` and
  ``1 - 2^-j`` for small shapes, and against the normal / Gamma limits for shapes up to 1e12.
* The ziggurat normal against ``N(0, 1)`` (KS, and the frequencies beyond the ziggurat's base
  ``r = 3.654`` and beyond 5 within 4.5 binomial standard errors).
* The joint draws of :func:`bayes_eval.models.pooled.draw_theta` against the plain numpy
  implementation it replaced (marginals and a sum over strata), and the node picking on a
  synthetic fit whose nodes are told apart by their draws.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval.models import _beta_draws
from bayes_eval.models._cells import CellLayout
from bayes_eval.models._profile import profile_of_strata
from bayes_eval.models.pooled import PooledFit, draw_theta, fit_pooled

GRID = (1e-3, 0.05, 0.5, 1.0, 3.0, 50.0, 1e6)
PS = (0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999)
N = 100_000
TOL = 4.5


def _disagreement(x: np.ndarray, y: np.ndarray) -> list[str]:
    """Reasons why two samples of equal size look different (empty: they agree)."""
    why = []
    p = stats.ks_2samp(x, y).pvalue
    if p < 1e-3:
        why.append(f"KS p={p:.2e}")
    n = x.size
    for q in PS:
        t = np.quantile(y, q)
        fx, fy = (x <= t).mean(), (y <= t).mean()
        f = 0.5 * (fx + fy)
        se = np.sqrt(2.0 * max(f * (1.0 - f), 1.0 / n) / n)
        if abs(fx - fy) > TOL * se:
            why.append(f"F({t:.3g}) at q={q}: {fx:.5f} vs {fy:.5f} (se {se:.2g})")
    return why


def _cdf_misfit(x: np.ndarray, t: np.ndarray, cdf: np.ndarray) -> list[str]:
    """Points where the empirical CDF of ``x`` is more than TOL binomial s.e. from ``cdf``."""
    n = x.size
    emp = (x[:, None] <= t[None, :]).mean(axis=0)
    se = np.sqrt(np.maximum(cdf * (1.0 - cdf), 1.0 / n) / n)
    bad = np.abs(emp - cdf) > TOL * se
    return [
        f"F({ti:.6g}) = {e:.5f}, exact {c:.5f}"
        for ti, e, c in zip(t[bad], emp[bad], cdf[bad], strict=True)
    ]


# ----------------------------------------------------------------------------- Beta draws
@pytest.mark.parametrize("a", GRID)
@pytest.mark.parametrize("b", GRID)
def test_beta_matches_numpy(a, b):
    rng = np.random.default_rng(int(1e6 * a + 7 * b) % 2**32)
    x = _beta_draws.beta(a, b, rng, size=N)
    y = rng.beta(a, b, size=N)
    assert np.isfinite(x).all() and ((x >= 0) & (x <= 1)).all()
    assert _disagreement(x, y) == []


def test_checks_reject_a_wrong_sampler():
    # the checks above see a 3 % error in a shape parameter (and, below, a tiny shape boosted
    # by 1 without the U^(1/a) factor): they can fail
    rng = np.random.default_rng(5)
    assert _disagreement(_beta_draws.beta(3.09, 50.0, rng, size=N), rng.beta(3.0, 50.0, N))
    assert _disagreement(_beta_draws.beta(1.05, 2.0, rng, size=N), rng.beta(0.05, 2.0, N))


@pytest.mark.parametrize(("a", "b"), [(1e-3, 2.0), (0.05, 0.05), (3.0, 0.05), (0.5, 0.5)])
def test_small_shapes_match_the_exact_cdf(a, b):
    # exact Beta CDF at 2^-j and 1 - 2^-j (both exactly representable), deep into the tails
    x = _beta_draws.beta(a, b, np.random.default_rng(17), size=4 * N)
    e = 2.0 ** -np.array([1, 3, 7, 14, 20, 30, 40])
    t = np.concatenate([e, 1.0 - e])
    cdf = np.concatenate([special.betainc(a, b, e), special.betaincc(b, a, e)])
    assert _cdf_misfit(x, t, cdf) == []


def test_huge_shapes():
    rng = np.random.default_rng(3)
    # a + b = 1e12: standardised draws are N(0, 1) to within skewness ~1e-6
    a = b = 5e11
    x = _beta_draws.beta(a, b, rng, size=N)
    z = (x - 0.5) / np.sqrt(0.25 / (a + b + 1))
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # Beta(1e12, 3): (1 - theta) (a + b) is Gamma(3) to within 3e-12 relative
    x = _beta_draws.beta(1e12, 3.0, rng, size=N)
    assert stats.kstest((1.0 - x) * (1e12 + 3.0), stats.gamma(3.0).cdf).pvalue > 1e-3
    # shapes of the pooled model's extreme hyper-nodes (up to 1e70): finite, at the mean
    x = _beta_draws.beta(1e17, 9e70, rng, size=1000)
    np.testing.assert_allclose(x, 1e17 / (1e17 + 9e70), rtol=1e-6)
    x = _beta_draws.beta(np.array([1e40, 2e-3, 1e-300]), np.array([1e-300, 1e40, 2e-3]), rng)
    assert np.isfinite(x).all() and ((x >= 0) & (x <= 1)).all()
    # subnormal shapes: both logs overflow, the draw is 0 or 1 with P(1) = a / (a + b)
    x = _beta_draws.beta(1e-310, 3e-310, rng, size=N)
    assert np.isin(x, [0.0, 1.0]).all()
    assert abs(x.mean() - 0.25) < TOL * np.sqrt(0.25 * 0.75 / N)


def test_bad_shapes_are_rejected():
    rng = np.random.default_rng(0)
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="allowed: finite shape parameters > 0"):
            _beta_draws.beta(bad, 1.0, rng, size=3)


def test_normal_ziggurat():
    z = _beta_draws.standard_normal(np.random.default_rng(11), 2_000_000)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    n = z.size
    for c in (1.0, 3.6541528853610088, 5.0):
        p = 2.0 * stats.norm.sf(c)
        assert abs((np.abs(z) > c).mean() - p) < TOL * np.sqrt(p * (1 - p) / n), c
    assert abs(z.mean()) < TOL / np.sqrt(n)
    assert abs(z.var() - 1.0) < TOL * np.sqrt(2.0 / n)


def test_reproducible_from_rng():
    a, b = np.array([0.5, 3.0, 1e-3]), np.array([2.0, 40.0, 1e-3])
    x1 = _beta_draws.beta(a, b, np.random.default_rng(1), size=(1000, 3))
    x2 = _beta_draws.beta(a, b, np.random.default_rng(1), size=(1000, 3))
    x3 = _beta_draws.beta(a, b, np.random.default_rng(2), size=(1000, 3))
    np.testing.assert_array_equal(x1, x2)
    assert (x1 != x3).mean() > 0.5
    # the caller's generator advances by exactly one integer draw
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    _beta_draws.beta(a, b, g1, size=(10, 3))
    g2.integers(0, 2**63)
    assert g1.random() == g2.random()


# ----------------------------------------------------------------------------- joint draws
def _reference_draw_theta(fit: PooledFit, draws: int, gen: np.random.Generator) -> np.ndarray:
    """The numpy implementation draw_theta had before the compiled kernel (one batch row)."""
    s = fit.weight.shape[-1]
    cum = np.cumsum(fit.weight)
    cum[-1] = 1.0
    idx = np.minimum(np.searchsorted(cum, gen.random(draws), side="right"), s - 1)
    q = fit.a.shape[-2]
    cwq = np.cumsum(fit.node_weight, axis=-2)  # (S, Q, G)
    v = gen.random((draws, fit.node_weight.shape[-1]))
    qi = np.zeros(v.shape, dtype=np.int64)
    for j in range(q - 1):
        qi += cwq[idx, j, :] < v
    k = np.arange(fit.a.shape[-1])
    qk = qi[:, fit.layout.cell]
    return gen.beta(fit.a_post[idx[:, None], qk, k], fit.b_post[idx[:, None], qk, k])


@pytest.fixture(scope="module")
def real_fit():
    lp = datasets.synthetic(60_000, prevalence=0.02, separation=2.5, rng=0)
    strata = be.stratify(lp.population, method="equal_size", n_strata=6)
    k = strata.n_strata
    pos = np.bincount(strata.assignment, weights=lp.truth, minlength=k).astype(np.int64)
    n = np.minimum(np.full(k, 25), strata.sizes)
    h = np.random.default_rng(3).hypergeometric(pos, strata.sizes - pos, n)
    return fit_pooled(profile_of_strata(strata), n, h), strata


def test_joint_draws_match_the_numpy_reference(real_fit):
    fit, strata = real_fit
    d = 40_000
    th = draw_theta(fit, d, np.random.default_rng(21))
    ref = _reference_draw_theta(fit, d, np.random.default_rng(22))
    assert th.shape == (d, strata.n_strata)
    for k in range(strata.n_strata):
        assert _disagreement(th[:, k], ref[:, k]) == [], k
    # the dependence: a total over strata (false negatives and true positives)
    w = strata.sizes * np.where(strata.predicted, 1.0, -1.0)
    assert _disagreement(th @ w, ref @ w) == []
    fn = th[:, ~strata.predicted] @ strata.sizes[~strata.predicted]
    fn_ref = ref[:, ~strata.predicted] @ strata.sizes[~strata.predicted]
    assert _disagreement(fn, fn_ref) == []


def _labelled_fit() -> PooledFit:
    """S = 3 hyper-nodes, Q = 2 nodes, G = 2 cells (strata 0, 1 in cell 0; stratum 2 in cell 1);
    ``Beta(mu c, (1 - mu) c)`` with c = 1e9 and mu coding (s, q), so a draw names its nodes."""
    s_n, q_n, k_n = 3, 2, 3
    cell = np.array([0, 0, 1])
    mu = np.empty((s_n, q_n, k_n))
    for s in range(s_n):
        for q in range(q_n):
            mu[s, q, :] = 0.1 + 0.2 * s + 0.1 * q + np.array([0.0, 0.01, 0.02])
    conc = 1e9
    node_w = np.empty((s_n, q_n, 2))
    node_w[:, 0, 0] = [0.3, 0.6, 0.9]  # P(q = 0) in cell 0 at each s
    node_w[:, 0, 1] = [0.8, 0.5, 0.2]
    node_w[:, 1, :] = 1.0 - node_w[:, 0, :]
    z = np.zeros((s_n, 4))
    layout = CellLayout(cell, np.ones(2), np.eye(2)[cell])
    return PooledFit(
        phi=z,
        weight=np.array([0.2, 0.5, 0.3]),
        node_weight=node_w,
        a=mu * conc,
        b=(1.0 - mu) * conc,
        n=np.zeros(k_n),
        h=np.zeros(k_n),
        layout=layout,
        mode=z[0],
        cov=np.eye(4),
        ess=np.array(3.0),
        informative=np.array(True),
        kind="probability",
        center=0.0,
        hyperpriors=None,
    )


def test_node_picking_frequencies():
    fit = _labelled_fit()
    d = 200_000
    th = draw_theta(fit, d, np.random.default_rng(4))
    # decode (s, q) of each stratum from the draw: mu = 0.1 + 0.2 s + 0.1 q (+ 0.01 k)
    code = np.rint((th - np.array([0.0, 0.01, 0.02]) - 0.1) / 0.1).astype(int)  # 2 s + q
    s, q = code // 2, code % 2
    assert (s[:, 0] == s[:, 1]).all() and (s[:, 0] == s[:, 2]).all()  # one hyper-node a draw
    assert (q[:, 0] == q[:, 1]).all()  # strata of a cell share its node
    p_s = np.bincount(s[:, 0], minlength=3) / d
    assert (np.abs(p_s - fit.weight) < TOL * np.sqrt(fit.weight * (1 - fit.weight) / d)).all()
    for si in range(3):
        sel = s[:, 0] == si
        m = sel.sum()
        for g, col in ((0, 0), (1, 2)):
            p0 = fit.node_weight[si, 0, g]
            assert abs((q[sel, col] == 0).mean() - p0) < TOL * np.sqrt(p0 * (1 - p0) / m)
        # given s, the cells' nodes are independent
        p00 = fit.node_weight[si, 0, 0] * fit.node_weight[si, 0, 1]
        both = ((q[sel, 0] == 0) & (q[sel, 2] == 0)).mean()
        assert abs(both - p00) < TOL * np.sqrt(p00 * (1 - p00) / m)


def test_batch_shapes_and_reproducibility(real_fit):
    fit, strata = real_fit
    prof_fit = fit_pooled(
        profile_of_strata(strata),
        np.stack([[fit.n, fit.n, np.zeros_like(fit.n)]] * 2),
        np.stack([[fit.h, fit.h, np.zeros_like(fit.h)]] * 2),
    )
    th = draw_theta(prof_fit, 300, 5)
    assert th.shape == (2, 3, 300, strata.n_strata)
    assert np.isfinite(th).all() and ((th >= 0) & (th <= 1)).all()
    np.testing.assert_array_equal(th, draw_theta(prof_fit, 300, 5))
    np.testing.assert_array_equal(
        draw_theta(fit, 100, np.random.default_rng(8)), draw_theta(fit, 100, 8)
    )
    assert (draw_theta(fit, 100, 6) != draw_theta(fit, 100, 7)).mean() > 0.5
