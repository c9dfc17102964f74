"""The O(N) histogram path of ``stratify`` (equal_size / equal_width on the score) against a
sort-based reference and against the general path, on data built to stress it: ties, tiny and
all-equal sides, huge value ranges, negative margins, and many values inside one histogram bin.
"""

from __future__ import annotations

import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import bayes_eval as be
from bayes_eval import strata as strata_mod
from bayes_eval._score_histogram import FAST_BINS, bin_keys

KINDS = ("uniform", "ties", "huge", "margins", "concentrated", "all_equal_side", "overflow")


def _scores(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.random(size)
    if kind == "ties":
        k = int(rng.integers(1, 12))
        return rng.integers(0, k, size) / max(k - 1, 1)
    if kind == "huge":  # 1e-300 .. 1e300, both signs
        return rng.choice([-1.0, 1.0], size) * 10.0 ** rng.uniform(-300, 300, size)
    if kind == "margins":  # negative margins around 0, some ties
        return np.round(rng.normal(-2.0, 3.0, size), int(rng.integers(0, 4)))
    if kind == "concentrated":  # most values inside one bin of 2^16 between min and max
        x = 0.5 + rng.random(size) * 10.0 ** -rng.uniform(6, 14)
        x[rng.random(size) < 0.05] = rng.choice([0.0, 1.0])
        x[0], x[-1] = 0.0, 1.0
        return x
    if kind == "all_equal_side":  # every negative tied at one value
        x = rng.random(size)
        x[x < 0.5] = 0.25
        return x
    if kind == "overflow":  # max - min overflows: the general path must take over
        x = rng.random(size)
        x[0], x[-1] = -1.5e308, 1.5e308
        return x
    raise AssertionError(kind)


def _reference(scores, preds, method, wanted):
    """Sort-based strata (order statistics of the sorted side, searchsorted for the
    assignment), or None where ties or empty ranges leave fewer strata than asked."""
    k_off, assignment = 0, np.empty(scores.shape[0], dtype=np.int64)
    sizes, lo, hi, predicted = [], [], [], []
    for side, want in ((False, wanted[0]), (True, wanted[1])):
        idx = np.flatnonzero(preds == side)
        if idx.size == 0:
            continue
        v = scores[idx]
        sv = np.sort(v)
        n = strata_mod.side_n_strata(want, v.size)
        if method == "equal_size":
            kth = np.unique((np.arange(1, n) * sv.size) // n)
            kth = kth[(kth > 0) & (kth < sv.size)]
            edges = np.unique(sv[kth])
        else:
            edges = sv[0] + (sv[-1] - sv[0]) * np.arange(1, n) / n if sv[-1] > sv[0] else []
            edges = np.unique(np.asarray(edges, dtype=float))
        edges = edges[edges > sv[0]]
        local = np.searchsorted(edges, v, side="right")
        counts = np.bincount(local, minlength=edges.size + 1)
        if (counts == 0).any() or edges.size + 1 < n:
            return None
        assignment[idx] = k_off + local
        for j in range(edges.size + 1):
            sizes.append(counts[j])
            lo.append(v[local == j].min())
            hi.append(v[local == j].max())
            predicted.append(side)
        k_off += edges.size + 1
    return assignment, np.asarray(sizes), np.asarray(lo), np.asarray(hi), np.asarray(predicted)


def _general(pop, method, n_strata):
    with mock.patch.object(strata_mod, "_FAST_KERNELS", ()):
        return be.stratify(pop, method=method, n_strata=n_strata)


def _same(a, b):
    assert a.n_strata == b.n_strata
    assert a.assignment.dtype == b.assignment.dtype
    np.testing.assert_array_equal(a.assignment, b.assignment)
    np.testing.assert_array_equal(a.sizes, b.sizes)
    np.testing.assert_array_equal(a.predicted, b.predicted)
    np.testing.assert_array_equal(a.score_min, b.score_min)
    np.testing.assert_array_equal(a.score_max, b.score_max)


def _population(scores, rng, how):
    if how == "threshold":
        t = float(rng.choice(scores)) if rng.random() < 0.7 else float(rng.normal(0.5, 2.0))
        return be.Population(scores, threshold=t)
    if how == "edge_threshold":  # a side of one or a few items, or an empty side
        s = np.sort(scores)
        i = int(rng.choice([0, 1, 2, -1, -2]))
        t = float(s[int(np.clip(i, -s.size, s.size - 1))])
        return be.Population(scores, threshold=t + (1.0 if rng.random() < 0.2 else 0.0))
    return be.Population(scores, predictions=rng.random(scores.shape[0]) < rng.random())


n_side = st.one_of(st.integers(1, 12), st.just("auto"))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(KINDS),
    size=st.one_of(st.integers(1, 40), st.integers(41, 3000)),
    how=st.sampled_from(["threshold", "edge_threshold", "predictions"]),
    method=st.sampled_from(["equal_size", "equal_width"]),
    wanted=st.tuples(n_side, n_side),
)
def test_fast_path_equals_reference_and_general_path(seed, kind, size, how, method, wanted):
    # equal_width itself overflows on (max - min) > 1.8e308, in either path
    assume(not (kind == "overflow" and method == "equal_width"))
    rng = np.random.default_rng(seed)
    scores = _scores(kind, size, rng)
    pop = _population(scores, rng, how)
    fast = strata_mod._fast_score_strata(pop, method, wanted)
    ref = _reference(pop.scores, pop.predictions, method, wanted)
    if fast is not None:
        assert ref is not None
        assignment, sizes, lo, hi, predicted = ref
        np.testing.assert_array_equal(fast.assignment, assignment)
        np.testing.assert_array_equal(fast.sizes, sizes)
        np.testing.assert_array_equal(fast.score_min, lo)
        np.testing.assert_array_equal(fast.score_max, hi)
        np.testing.assert_array_equal(fast.predicted, predicted)
    if kind == "overflow":
        assert fast is None
    # the public function (fast path or its fallback) agrees with the general path exactly,
    # including the errors it raises
    # (and the FewerStrataWarning it gives where ties force fewer strata)
    try:
        with warnings.catch_warnings(record=True) as warned_general:
            warnings.simplefilter("always", strata_mod.FewerStrataWarning)
            expected = _general(pop, method, wanted)
    except ValueError as err:
        with pytest.raises(ValueError) as info:
            be.stratify(pop, method=method, n_strata=wanted)
        assert str(info.value) == str(err)
    else:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", strata_mod.FewerStrataWarning)
            _same(be.stratify(pop, method=method, n_strata=wanted), expected)
        assert [str(w.message) for w in warned] == [str(w.message) for w in warned_general]


@pytest.mark.parametrize("method", ["equal_size", "equal_width"])
@pytest.mark.parametrize(
    "case", ["uniform", "beta", "crowded_bin", "huge", "margins", "predictions", "ties"]
)
def test_fast_path_answers_large_cases(case, method):
    """On 2 * 10^5 items (hundreds of items per histogram bin, crowded bins) the fast path
    answers (no fallback) and equals the reference and the general path."""
    rng = np.random.default_rng(11)
    size = 200_000
    if case == "uniform":
        pop = be.Population(rng.random(size), threshold=0.5)
    elif case == "beta":
        pop = be.Population(rng.beta(0.5, 5.0, size), threshold=0.5)
    elif case == "crowded_bin":  # 40% of the items inside one of the 2^16 bins
        x = rng.random(size)
        x[: int(0.4 * size)] = 0.3 + 1e-9 * rng.random(int(0.4 * size))
        pop = be.Population(x, threshold=0.5)
    elif case == "huge":  # a linear range of 2e300 (log-uniform data crowd the lowest bin
        # and take the general path: see test_crowded_log_scale_falls_back)
        pop = be.Population(rng.uniform(-1e300, 1e300, size), threshold=1e299)
    elif case == "margins":
        pop = be.Population(rng.normal(-1.0, 2.0, size), threshold=0.0)
    elif case == "predictions":
        x = rng.random(size)
        pop = be.Population(x, predictions=rng.random(size) < x)
    else:
        pop = be.Population(np.round(rng.random(size), 3), threshold=0.37)
    fast = strata_mod._fast_score_strata(pop, method, (10, 10))
    assert fast is not None
    assignment, sizes, lo, hi, predicted = _reference(pop.scores, pop.predictions, method, (10, 10))
    np.testing.assert_array_equal(fast.assignment, assignment)
    np.testing.assert_array_equal(fast.sizes, sizes)
    np.testing.assert_array_equal(fast.score_min, lo)
    np.testing.assert_array_equal(fast.score_max, hi)
    np.testing.assert_array_equal(fast.predicted, predicted)
    _same(be.stratify(pop, method=method, n_strata=10), _general(pop, method, 10))


def test_crowded_log_scale_falls_back():
    """Scores spread over 600 decades put almost every item in the lowest of the equal-width
    bins: the fast path declines (no gain over the general path), and stratify still gives the
    general path's strata."""
    rng = np.random.default_rng(2)
    pop = be.Population(10.0 ** rng.uniform(-300, 300, 20_000), threshold=1.0)
    assert strata_mod._fast_score_strata(pop, "equal_size", (10, 10)) is None
    _same(be.stratify(pop, n_strata=10), _general(pop, "equal_size", 10))


def test_bin_keys_monotone_and_in_range():
    """Bin keys never decrease with the value and stay within 0..B-1, at the ends of the range
    and across values a few ulps apart."""
    rng = np.random.default_rng(5)
    for lo, hi in ((0.0, 1.0), (-1e300, 1e300), (1e-300, 2e-300), (-3.0, -2.9999999999)):
        x = np.sort(
            np.concatenate(
                [
                    rng.uniform(lo, hi, 5000),
                    [lo, hi, np.nextafter(hi, lo), np.nextafter(lo, hi)],
                    np.linspace(lo, hi, 1000),
                ]
            )
        )
        x = x[(x >= lo) & (x <= hi)]
        span = float(x[-1]) - float(x[0])
        keys = bin_keys(x, float(x[0]), (FAST_BINS - 1) / span)
        assert (np.diff(keys) >= 0).all()
        assert keys[0] == 0 and keys[-1] == FAST_BINS - 1
