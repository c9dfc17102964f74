"""One-shot allocations: exact numbers, caps, errors and a registry-driven invariance suite."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bayes_eval as be
from bayes_eval.allocation import ALLOCATIONS


def test_neyman_textbook_example():
    # provenance: issue 3 (Neyman allocation textbook example). By hand: N_k S_k = 4004, 2310,
    # 1270.5 (sum 7584.5); quotas 261 N_k S_k / 7584.5 = 137.79, 79.49, 43.72; floors 137, 79,
    # 43 leave 2 labels for the largest remainders (.79 and .72): (138, 79, 44).
    out = be.allocate([1540, 770, 385], 261, method="neyman", sd=[2.6, 3.0, 3.3])
    assert out.tolist() == [138, 79, 44]
    assert out.dtype == np.int64


def test_neyman_from_rates_uses_bernoulli_sd():
    sizes = np.array([1000, 1000, 2000])
    rates = np.array([0.5, 0.2, 0.0])
    out = be.allocate(sizes, 100, method="neyman", rates=rates)
    # S = sqrt(N/(N-1) p(1-p)): 0.50025, 0.40020, 0 -> quotas 55.56, 44.44, 0
    assert out.tolist() == [56, 44, 0]


def test_proportional_and_equal():
    assert be.allocate([10, 20, 70], 10, method="proportional").tolist() == [1, 2, 7]
    assert be.allocate([10, 20, 70], 10, method="equal").tolist() == [4, 3, 3]


def test_caps_bind_and_rest_is_redistributed():
    # stratum 0 has only 5 unlabelled items left; Neyman would give it far more
    out = be.allocate(
        [10, 1000, 1000], 100, method="neyman", sd=[100.0, 1.0, 1.0], labelled=[5, 0, 0]
    )
    assert out.tolist() == [5, 48, 47]


def test_accepts_strata(small_pop):
    pop, _ = small_pop
    strata = be.stratify(pop, n_strata=3)
    out = be.allocate(strata, 60, method="proportional")
    assert out.sum() == 60 and out.shape == (6,)


def test_posterior_variance_targets_metric():
    sizes = np.array([5000, 5000, 1000, 1000])
    strata_pred = np.array([False, False, True, True])

    class S:  # minimal Strata stand-in
        pass

    s = S()
    s.sizes, s.predicted = sizes, strata_pred
    out = be.allocate(
        s,
        200,
        method="posterior_variance",
        metric="precision",
        labelled=[0, 0, 50, 50],
        positives=[0, 0, 25, 49],
    )
    # precision ignores predicted negatives; the 25/50 stratum is the uncertain one
    assert out[:2].sum() == 0 and out[2] > out[3]
    acc = be.allocate(s, 200, method="posterior_variance", metric="accuracy")
    assert acc.sum() == 200 and acc[0] > acc[2]  # larger strata first when all is unknown


def test_posterior_variance_tends_to_neyman():
    # with many labels at known rates the greedy allocation of the *total* approaches
    # n_k ∝ N_k sqrt(p_k (1 - p_k)) (see the PosteriorVariance docstring)
    sizes = np.array([100_000, 100_000, 100_000])
    rates = np.array([0.5, 0.1, 0.02])
    n0 = np.array([500, 500, 500])
    h0 = np.round(n0 * rates).astype(np.int64)
    extra = be.allocate(
        sizes, 11_500, method="posterior_variance", metric="prevalence", labelled=n0, positives=h0
    )
    total = n0 + extra
    ney = 13_000 * np.sqrt(rates * (1 - rates)) / np.sqrt(rates * (1 - rates)).sum()
    np.testing.assert_allclose(total, ney, rtol=0.03)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "optimal"}, "method='optimal'"),
        ({"method": "neyman"}, "exactly one of sd= and rates="),
        ({"method": "neyman", "sd": [1, 1], "rates": [0.1, 0.2]}, "exactly one"),
        ({"method": "neyman", "sd": [1, -1]}, r"sd\[1\]=-1.0"),
        ({"method": "neyman", "rates": [0.1, 1.5]}, r"rates\[1\]=1.5"),
        ({"method": "neyman", "sd": [1, 1, 1]}, "shape"),
        ({"method": "proportional", "sd": [1, 1]}, "only used by method='neyman'"),
        ({"method": "equal", "labelled": [11, 0]}, r"labelled\[0\]=11"),
        ({"method": "equal", "n": 31}, "n=31 is more than the 30 unlabelled"),
        ({"method": "equal", "n": -1}, "n=-1"),
    ],
)
def test_bad_input(kwargs, match):
    kw = {"n": 5, **kwargs}
    n = kw.pop("n")
    with pytest.raises((ValueError, TypeError), match=match):
        be.allocate([10, 20], n, **kw)


def test_bad_strata():
    with pytest.raises(TypeError, match="strata"):
        be.allocate([10, 0], 3, method="equal")
    with pytest.raises(TypeError, match="strata"):
        be.allocate("abc", 3, method="equal")


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=6),
    frac=st.floats(0, 1),
    seed=st.integers(0, 2**16),
    method=st.sampled_from(ALLOCATIONS),
)
def test_invariants_every_allocation(sizes, frac, seed, method):
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes)
    labelled = rng.integers(0, sizes + 1)
    positives = rng.integers(0, labelled + 1)
    left = int((sizes - labelled).sum())
    n = round(frac * left)
    kw: dict = {}
    if method == "neyman":
        kw["rates"] = rng.random(sizes.size)
    if method == "posterior_variance":
        kw.update(positives=positives, metric="accuracy")
    out = be.allocate(sizes, n, method=method, labelled=labelled, **kw)
    assert out.sum() == n
    assert (out >= 0).all() and (out <= sizes - labelled).all()
    # deterministic
    again = be.allocate(sizes, n, method=method, labelled=labelled, **kw)
    assert np.array_equal(out, again)
