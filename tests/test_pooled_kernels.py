"""The compiled kernel of the pooled model against its numpy reference (same mathematics)."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_eval.models import _cells, _hyperposterior, _kernels, _linear_form, pooled
from bayes_eval.models._profile import score_profile
from bayes_eval.models.pooled import Hyperpriors, beta_approximation, fit_pooled

#: agreement of the compiled kernel with the numpy reference (both compute the same formulas;
#: only the order of the additions and libm's last bits differ)
RTOL = 1e-9


def _profile(rng, k, n_pos, scores="beta"):
    m = 4_000 * k
    s = rng.beta(0.3, 8, m) if scores == "beta" else rng.normal(size=m)
    st = np.minimum((np.argsort(np.argsort(s)) * k) // m, k - 1)
    pred = np.arange(k) >= k - n_pos
    return score_profile(s, st, predicted=pred, sizes=np.bincount(st, minlength=k))


def _counts(rng, rows, k):
    """Counts with the needle cases: n up to 2000, h = 0, h = n, strata without labels."""
    n = rng.integers(0, 2001, (rows, k)).astype(np.float64)
    n[:, rng.random(k) < 0.3] = 0.0  # strata without labels
    n[0] = 0.0  # a row without any label
    h = np.floor(rng.random((rows, k)) * (n + 1))
    h[1] = 0.0  # all negative
    h[2] = n[2]  # all positive
    h[3, ::2] = 0.0
    h[3, 1::2] = n[3, 1::2]
    return n, h


def _phi(rng, pm, psd, rows, nodes):
    phi = pm + rng.standard_normal((rows, nodes, pm.size)) * psd
    # needles: rates near 1e-12 and 1 - 1e-12, tiny and huge tau, flat and steep curves
    phi[:, 0, 0] = pm[0] - 25.0
    phi[:, 1, 0] = pm[0] + 25.0
    phi[:, 2, 3] = -6.0
    phi[:, 3, 3] = 3.0
    phi[:, 4, 1] = 0.0
    phi[:, 5, 1] = 8.0
    return phi


def _rel(u, v):
    return np.abs(u - v) / np.maximum(np.abs(v), 1e-300)


@pytest.mark.parametrize(
    ("k", "n_pos", "cells", "scores"),
    [
        (12, 3, 8, "beta"),  # one cell per stratum on the positive side, shared cells below
        (30, 6, 2, "beta"),  # many strata per cell
        (5, 2, 1000, "normal"),  # one cell per stratum (margin scores)
        (40, 10, 1, "beta"),  # one cell per side
    ],
)
@pytest.mark.parametrize(("keep", "nodes"), [(False, _cells.SEARCH_NODES), (True, 5), (True, 7)])
def test_kernel_matches_numpy_reference(k, n_pos, cells, scores, keep, nodes):
    rng = np.random.default_rng(k * 1000 + cells + nodes)
    prof = _profile(rng, k, n_pos, scores)
    hp = Hyperpriors(cells=cells)
    lay = _hyperposterior.layout_of(prof, hp)
    prior = _hyperposterior.prior_of(prof, hp)
    n, h = _counts(rng, 9, k)
    n[4, : k // 2] = prof.sizes[: k // 2]  # censused strata drop out of the lean
    n[5, prof.predicted] = prof.sizes[prof.predicted]  # a side without unlabelled items
    phi = _phi(rng, prior.start(), prior.sd, 9, 24)
    args = (phi, prof, lay, n[:, None, :], h[:, None, :], prior, hp.nugget_sd)
    lp_c, ci_c, lean_c = _hyperposterior.log_post(*args, keep=keep, nodes=nodes, engine="numba")
    lp_r, ci_r, lean_r = _hyperposterior.log_post(*args, keep=keep, nodes=nodes, engine="numpy")
    assert lp_c.shape == lp_r.shape == lean_c.shape == (9, 24)
    assert np.isfinite(lp_r).all()
    assert _rel(lp_c, lp_r).max() < RTOL
    assert _rel(lean_c, lean_r).max() < RTOL
    assert _rel(ci_c.log_lik, ci_r.log_lik).max() < RTOL
    if not keep:
        assert ci_c.node_weight is None and ci_c.a is None and ci_c.b is None
        return
    assert ci_c.node_weight.shape == ci_r.node_weight.shape == (9, 24, nodes, lay.n_cells)
    assert ci_c.a.shape == ci_r.a.shape == (9, 24, nodes, k)
    np.testing.assert_allclose(ci_c.node_weight, ci_r.node_weight, rtol=RTOL, atol=1e-12)
    assert _rel(ci_c.a, ci_r.a).max() < RTOL
    assert _rel(ci_c.b, ci_r.b).max() < RTOL
    # the needle nodes really are needles (the test covers rates near 0 and 1)
    mu = ci_r.a / (ci_r.a + ci_r.b)
    assert mu.min() < 1e-10 and mu.max() > 1 - 1e-10


def test_kernel_broadcasts_batch_axes_like_the_reference():
    rng = np.random.default_rng(3)
    prof = _profile(rng, 6, 2)
    hp = Hyperpriors()
    lay = _hyperposterior.layout_of(prof, hp)
    prior = _hyperposterior.prior_of(prof, hp)
    n, h = _counts(rng, 6, 6)
    nn, hh = n.reshape(2, 3, 1, 6), h.reshape(2, 3, 1, 6)
    phi = _phi(rng, prior.start(), prior.sd, 1, 10)[0]  # (P, 5) shared by every row
    for args in ((phi, nn, hh), (phi[None, None], nn, hh), (phi, n[0, None], h[0, None])):
        full = (args[0], prof, lay, args[1], args[2], prior, hp.nugget_sd)
        lp_c, ci_c, _ = _hyperposterior.log_post(*full, keep=True, engine="numba")
        lp_r, ci_r, _ = _hyperposterior.log_post(*full, keep=True, engine="numpy")
        assert lp_c.shape == lp_r.shape
        assert ci_c.a.shape == ci_r.a.shape
        assert _rel(lp_c, lp_r).max() < RTOL
        np.testing.assert_allclose(ci_c.node_weight, ci_r.node_weight, rtol=RTOL, atol=1e-12)


def test_log_rising_and_curve_match_the_reference():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(1e-3, 30, 500), np.exp(rng.uniform(3, 570, 500))])
    m = rng.integers(0, 2001, x.size).astype(np.float64)
    m[::7] = 0.0
    m[1::3] = rng.integers(1, 10, m[1::3].size)  # small counts: the kernel's product branch
    x[2::11] = 10.0 ** rng.uniform(-250, -3, x[2::11].size)  # needle rates' tiny Beta shapes
    ref = _cells.log_rising(x, m)
    got = np.array([_kernels._log_rising(a, b) for a, b in zip(x, m, strict=True)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    prof = _profile(rng, 8, 3)
    side = prof.predicted.astype(np.float64)
    nodes = (
        [0.0, 1.0, 0.0, 0.0, -700.0],
        [-30.0, 0.5, 2.0, 0.0, -8.0],
        [30.0, 3.0, -1.0, 0.0, -3.0],
        [-40.0, 1.0, 45.0, 0.0, 2.0],
    )
    for phi in nodes:
        ref = _cells.curve_logit(np.array(phi), prof.x, prof.weight, side, prof.center)
        got = np.empty(8)
        _kernels._curve(*phi[:3], phi[4], prof.x, prof.weight, side, prof.center, got)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
        # the floor: every predicted negative's rate is at least eps, the positives' untouched
        bare = _cells.curve_logit(np.array(phi[:4]), prof.x, prof.weight, side, prof.center)
        eps = 1.0 / (1.0 + np.exp(-phi[4]))
        neg = side == 0
        np.testing.assert_array_equal(ref[~neg], bare[~neg])
        rate = 1.0 / (1.0 + np.exp(-ref[neg]))
        want = eps + (1.0 - eps) / (1.0 + np.exp(-bare[neg]))
        np.testing.assert_allclose(rate, want, rtol=1e-12)
        assert (rate >= eps * (1.0 - 1e-12)).all()


def test_kernel_constants_are_the_reference_constants():
    assert _kernels._STIRLING_MIN == _cells._STIRLING_MIN
    assert _kernels._MU_MIN == _cells._MU_MIN
    assert _kernels._C_MAX == _cells._C_MAX
    assert _kernels._NEWTON_STEPS == _cells._NEWTON_STEPS


def test_fit_agrees_with_the_numpy_engine(monkeypatch):
    """Whole fits agree to the accuracy of the search: the finite-difference Hessian amplifies
    the kernels' ~1e-13 differences by 1 / h^2 = 1e6, and a row may take one more tiny Newton
    step on one engine (the search stops on a step below TOL or a Newton decrement below
    GAIN_TOL, and chord steps carry a Hessian's ~1e-7 difference along), so the modes agree to
    ~1e-7 (median) and the downstream quantities accordingly."""
    rng = np.random.default_rng(5)
    prof = _profile(rng, 10, 3)
    n, h = _counts(rng, 40, 10)
    n = np.minimum(n, prof.sizes)
    h = np.minimum(h, n)
    fits = {}
    for engine in _hyperposterior.ENGINES:
        monkeypatch.setattr(_hyperposterior, "_ENGINE", engine)
        fits[engine] = fit_pooled(prof, n, h, warn=False)
    c, r = fits["numba"], fits["numpy"]
    gap = np.abs(c.mode - r.mode).max(axis=-1)
    assert np.median(gap) < 1e-6
    # random counts make a few hyperposteriors multimodal (slope near 0 or near 1) or flat along
    # a direction, where the ~1e-7 differences can send the two searches to different points
    same = gap < 1e-3
    assert same.sum() >= 37
    for name in ("weight", "node_weight", "a", "b", "cov", "ess"):
        assert getattr(c, name).shape == getattr(r, name).shape
    ba_c, ba_r = beta_approximation(c), beta_approximation(r)
    # rows whose importance sampling is poor (random counts, ESS < 32 of 128: the proposal's
    # finite-difference covariance differs in the 2nd digit) agree to the sampling's accuracy
    good = (c.ess > 32) & (gap < 1e-5)
    assert good.sum() >= 20
    for u, v in zip(ba_c, ba_r, strict=True):
        np.testing.assert_allclose(u[good], v[good], rtol=1e-3)
        np.testing.assert_allclose(u[same], v[same], rtol=0.05)
    np.testing.assert_array_equal(c.informative[same], r.informative[same])


def test_bad_engine():
    rng = np.random.default_rng(6)
    prof = _profile(rng, 4, 1)
    hp = Hyperpriors()
    lay = _hyperposterior.layout_of(prof, hp)
    prior = _hyperposterior.prior_of(prof, hp)
    z = np.zeros((1, 4))
    with pytest.raises(ValueError, match="engine='fortran' is not allowed; allowed: numba"):
        _hyperposterior.log_post(prior.start()[None], prof, lay, z, z, prior, 0.3, engine="fortran")


@pytest.mark.parametrize("finite", [True, False])
@pytest.mark.parametrize(("k", "n_pos", "cells"), [(12, 3, 8), (30, 6, 2), (40, 10, 1)])
def test_linear_form_kernel_matches_numpy_reference(k, n_pos, cells, finite):
    """The compiled per-hyper-node cumulants of a linear form (F1's weights) equal the numpy
    reference on needle counts (h = 0, h = n, strata without labels), with shared cells; the
    mixture over nodes and the tail probability follow from them."""
    rng = np.random.default_rng(11)
    prof = _profile(rng, k, n_pos)
    n, h = _counts(rng, 6, k)
    n = np.minimum(n, prof.sizes)
    h = np.minimum(h, n)
    fit = fit_pooled(prof, n, h, hyperpriors=Hyperpriors(cells=cells), warn=False)
    w = np.where(prof.predicted, 1.3, -0.7)
    nodes = pooled.linear_form_nodes(fit, n, h, prof.sizes, w, finite_population=finite)
    ref = _linear_form._node_linear_cumulants_reference(fit, n, h, prof.sizes, w, finite)
    on = fit.weight > 0
    for got, want in zip((nodes.k1, nodes.k2, nodes.k3), ref, strict=True):
        scale = np.abs(want).max(axis=-1, keepdims=True)  # k1 and k3 cancel between sides
        assert (np.abs(got - want)[on] <= 1e-9 * np.broadcast_to(scale, want.shape)[on]).all()
    m1, m2, m3 = nodes.mixture()
    assert m1.shape == m2.shape == m3.shape == (6,) and (m2 >= 0).all()
    p = nodes.prob(m1 + np.sqrt(m2))
    assert ((p >= 0) & (p <= 1)).all() and np.isfinite(p).all()


@pytest.mark.parametrize("finite", [True, False])
@pytest.mark.parametrize(("k", "n_pos", "cells"), [(12, 3, 8), (30, 6, 2), (10, 5, 8)])
def test_look_refit_is_the_full_fit_without_its_betas(k, n_pos, cells, finite):
    """The look model's refit (per-node summaries formed in the kernel) gives the full fit's
    hyper-mode exactly, its linear-form cumulants to 1e-9 and its marginal-prior Betas to 1e-6
    (the same formulas summed in another order), on needle counts with shared cells and a warm
    start."""
    from bayes_eval.models import marginal_prior
    from bayes_eval.models._look import look_refit

    rng = np.random.default_rng(13)
    prof = _profile(rng, k, n_pos)
    n, h = _counts(rng, 6, k)
    n = np.minimum(n, prof.sizes)
    h = np.minimum(h, n)
    hp = Hyperpriors(cells=cells)
    w = np.where(prof.predicted, 1.3, -0.7)
    init = np.tile([-3.0, 1.0, 2.0, -0.7, -8.0], (6, 1))
    fit = fit_pooled(prof, n, h, hyperpriors=hp, warn=False, init=init)
    look = look_refit(prof, n, h, w, finite_population=finite, hyperpriors=hp, init=init)
    np.testing.assert_array_equal(look.mode, fit.mode)
    want_a, want_b = marginal_prior(fit)
    # a Beta matched to a variance found as E[theta^2] - m^2: near h = n = 2,000 the variance is
    # ~1e-7 of m^2, so both sums carry relative errors of ~1e-8 there, and A - h (the prior)
    # up to ~4e-7 (measured; 1.05e-6 once the floor made the nodes five-dimensional)
    np.testing.assert_allclose(look.prior_a, want_a, rtol=3e-6)
    np.testing.assert_allclose(look.prior_b, want_b, rtol=3e-6)
    ref = pooled.linear_form_nodes(fit, n, h, prof.sizes, w, finite_population=finite)
    np.testing.assert_array_equal(look.nodes.weight, ref.weight)
    for got, want in zip(look.nodes.mixture(), ref.mixture(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    for got, want in ((look.nodes.k1, ref.k1), (look.nodes.k2, ref.k2), (look.nodes.k3, ref.k3)):
        scale = np.abs(want).max(axis=-1, keepdims=True)
        assert (np.abs(got - want) <= 1e-9 * scale).all()


def test_linear_form_mixture_is_the_joint_posterior_law():
    """The mixture cumulants of a linear form keep the strata's dependence: its mean and
    variance are those of the joint posterior draws (within 4 Monte Carlo s.e.), and its
    variance exceeds the sum of the marginal variances (independent Betas) where the shared
    curve ties the strata."""
    from bayes_eval._cumulants import stratum_cumulants
    from bayes_eval.models.pooled import draw_theta

    rng = np.random.default_rng(12)
    prof = _profile(rng, 10, 3)
    n = np.full(10, 15.0)
    h = np.array([0, 0, 0, 1, 0, 1, 2, 6, 9, 12], dtype=float)
    fit = fit_pooled(prof, n, h, warn=False)
    w = np.where(prof.predicted, 1.3, -0.7)
    m1, m2, _ = pooled.linear_form_nodes(fit, n, h, prof.sizes, w).mixture()
    th = draw_theta(fit, 40_000, rng)
    draws = ((rng.binomial((prof.sizes - n).astype(np.int64), th) + h) * w).sum(axis=-1)
    mean, var = draws.mean(), draws.var()
    se_mean = np.sqrt(var / draws.size)
    se_var = var * np.sqrt(2.0 / draws.size) * 2.0  # heavy tails: twice the normal-theory s.e.
    assert abs(m1 - mean) < 4 * se_mean, (m1, mean, se_mean)
    assert abs(m2 - var) < 4 * se_var, (m2, var, se_var)
    a, b = beta_approximation(fit)
    mu = a / (a + b)
    v = mu * (1 - mu) / (a + b + 1)
    k3 = np.zeros_like(v)
    ind = stratum_cumulants(mu, v, k3, n=n, h=h, sizes=prof.sizes.astype(float))
    assert m2 > 1.2 * (w * w * ind.var).sum(), (m2, (w * w * ind.var).sum())


def test_newton_stencil_gives_gradient_and_hessian_to_second_order():
    # a quartic with every mixed term: the stencil's derivatives at x0 against the exact ones
    from bayes_eval.models import _laplace

    rng = np.random.default_rng(5)
    d = 4
    a = rng.standard_normal((d, d))
    hess = -(a @ a.T) - np.eye(d)
    grad = rng.standard_normal(d)
    cube = rng.standard_normal(d)

    def f(x):
        quad = 0.5 * np.einsum("...i,ij,...j->...", x, hess, x)
        return x @ grad + quad + (cube * x**3).sum(-1) + 0.2 * (x.prod(-1) ** 2)

    st = _laplace.stencil(d)
    assert st.shape == (1 + 2 * d + d * (d - 1), d)
    x0 = 0.3 * rng.standard_normal((2, d))
    g, h = _laplace.grad_hess(f(x0[:, None, :] + st), d)
    for r in range(2):
        x = x0[r]
        p = x.prod()
        want_g = grad + hess @ x + 3 * cube * x**2 + 0.4 * p * (p / x)
        want_h = hess + np.diag(6 * cube * x) + 0.4 * np.outer(p / x, p / x)
        off = 0.8 * p * p / np.outer(x, x)  # d/dx_i d/dx_j of 0.2 p^2, i != j: 0.8 p^2/(x_i x_j)
        want_h = want_h + np.where(np.eye(d, dtype=bool), 0.0, off - 0.4 * np.outer(p / x, p / x))
        np.testing.assert_allclose(g[r], want_g, atol=1e-5)
        np.testing.assert_allclose(h[r], want_h, atol=1e-4)
        np.testing.assert_allclose(
            _laplace.gradient(f(x0[r] + st[: 1 + 2 * d]), d), want_g, atol=1e-5
        )
