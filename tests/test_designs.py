"""Sequential designs: the published rules, our preposterior algebra, and one invariance suite
run over every registered design."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bayes_eval._loop import LockStep, LockStepAllocator, design_state
from bayes_eval.designs import (
    DESIGNS,
    DesignState,
    OnlineOptimal,
    make_design,
    metric_gradient,
    preposterior_variance,
)
from bayes_eval.metrics import METRICS


def _state(sizes, predicted=None, n=None, h=None, available=None, metric="accuracy", **kw):
    sizes = np.asarray(sizes, dtype=np.int64)
    k = sizes.size
    n = np.zeros(k, np.int64) if n is None else np.asarray(n, np.int64)
    h = np.zeros(k, np.int64) if h is None else np.asarray(h, np.int64)
    return DesignState(
        sizes=sizes,
        predicted=np.ones(k, bool) if predicted is None else np.asarray(predicted, bool),
        n=n,
        h=h,
        available=sizes - n if available is None else np.asarray(available, np.int64),
        prior_a=np.full(k, 0.5),
        prior_b=np.full(k, 0.5),
        metric=metric,
        **kw,
    )


def _make(name, k):
    return (
        make_design(name, rates=np.linspace(0.1, 0.9, k))
        if name == "neyman_oracle"
        else make_design(name)
    )


# ---------------------------------------------------------------------- invariance suite
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    name=st.sampled_from(sorted(DESIGNS)),
    metric=st.sampled_from(["precision", "recall", "f1", "accuracy", "npv"]),
)
def test_invariants_every_design(data, name, metric):
    k = data.draw(st.integers(2, 6))
    seed = data.draw(st.integers(0, 2**20))
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, k)
    predicted = np.arange(k) >= k // 2
    n = rng.integers(0, sizes + 1)
    h = rng.integers(0, n + 1)
    state = _state(sizes, predicted, n, h, metric=metric)
    left = int(state.available.sum())
    if left == 0:
        return
    batch = data.draw(st.integers(0, left))
    design = _make(name, k)
    out = design.allocate(state, batch, np.random.default_rng(1))
    assert out.shape == (k,) and out.dtype.kind == "i"
    assert out.sum() == batch
    assert (out >= 0).all() and (out <= state.available).all()
    again = _make(name, k).allocate(state, batch, np.random.default_rng(1))
    assert np.array_equal(out, again)  # deterministic from rng
    with pytest.raises(ValueError, match="batch_size"):
        design.allocate(state, left + 1, np.random.default_rng(1))


@pytest.mark.parametrize("name", sorted(set(DESIGNS) - {"random"}))
def test_allocate_many_agrees_with_allocate(name):
    rng = np.random.default_rng(5)
    k, reps = 4, 6
    sizes = np.array([50, 80, 30, 60])
    n = rng.integers(5, 20, (reps, k))
    h = rng.integers(0, n + 1)
    design = _make(name, k)
    many = design.allocate_many(_state(sizes, n=n, h=h), 12, np.random.default_rng(0))
    if name == "online_optimal":  # random: compare in distribution through the sums only
        assert (many.sum(axis=1) == 12).all()
        return
    for r in range(reps):
        one = _make(name, k).allocate(_state(sizes, n=n[r], h=h[r]), 12, np.random.default_rng(0))
        assert np.array_equal(one, many[r])


def test_make_design_errors():
    with pytest.raises(ValueError, match="design='optimal'"):
        make_design("optimal")
    with pytest.raises(ValueError, match="rates="):
        make_design("neyman_oracle")
    with pytest.raises(ValueError, match="n_ini=1"):
        make_design("opt_a2", n_ini=1)
    with pytest.raises(TypeError, match="d0"):
        make_design("online_optimal", d0=2.5)
    with pytest.raises(TypeError, match="only the options 'defensive' and 'complete'"):
        make_design("posterior_variance", metric="f1")
    for bad in (-0.1, 1.0, True, "0.2"):
        with pytest.raises(ValueError, match="defensive="):
            make_design("posterior_variance", defensive=bad)
    for bad in (0.0, -0.5, 1.5, False, "0.5", float("nan")):
        with pytest.raises(ValueError, match=r"complete=.*allowed: a fraction in \(0, 1\]"):
            make_design("posterior_variance", complete=bad)


# ---------------------------------------------------------------------- Bennett & Carvalho
def test_m_estimate_smoothing():
    # Bennett & Carvalho section 5: p0 = 0.5, m = 2 if n = 0 else 1/sqrt(n)
    p = OnlineOptimal.smoothed_rates(np.array([0, 4, 1]), np.array([0, 3, 1]))
    np.testing.assert_allclose(p, [0.5, (3 + 0.25) / 4.5, (1 + 0.5) / 2])


def test_online_optimal_draws_multinomial_n_sigma():
    # mean allocation over 3000 seeded draws ∝ N_k sigma_k; MC s.e. of each share < 0.002,
    # tolerance 0.01 (5 s.e.)
    sizes = np.array([1000, 1000, 2000])
    n = np.array([16, 16, 16])
    h = np.array([8, 0, 16])
    p = OnlineOptimal.smoothed_rates(n, h)
    w = sizes * np.sqrt(p * (1 - p))
    design = make_design("online_optimal")
    reps = 3000
    many_state = _state(sizes, n=np.tile(n, (reps, 1)), h=np.tile(h, (reps, 1)), metric="precision")
    many = design.allocate_many(many_state, 20, np.random.default_rng(7))
    assert (many.sum(axis=1) == 20).all()
    np.testing.assert_allclose(many.mean(axis=0) / 20, w / w.sum(), atol=0.01)
    assert (
        design.batch_schedule(0, 3) == 6
        and make_design("online_optimal", d0=50, d=7).batch_schedule(3, 3) == 7
    )


def test_online_optimal_skips_strata_irrelevant_to_the_metric():
    state = _state([100, 100, 100], predicted=[False, True, True], metric="precision")
    out = make_design("online_optimal").allocate(state, 30, np.random.default_rng(0))
    assert out[0] == 0 and out.sum() == 30


# ---------------------------------------------------------------------- Kumar & Raj
def test_opt_a2_initial_sample_then_equation_9():
    sizes = np.array([100, 100, 200])
    design = make_design("opt_a2", n_ini=5)
    first = design.allocate(_state(sizes), 15, np.random.default_rng(0))
    assert first.tolist() == [5, 5, 5]
    # eq. 3: s^2 = n/(n-1) p(1-p): p = 0.2, 0.6, 0.0 -> s = 0.4472, 0.5477, 0
    n, h = np.array([5, 5, 5]), np.array([1, 3, 0])
    out = design.allocate(_state(sizes, n=n, h=h), 20, np.random.default_rng(0))
    w = sizes * np.sqrt(n / (n - 1) * (h / n) * (1 - h / n))
    assert out.tolist() == [9, 11, 0]
    np.testing.assert_allclose(out / 20, w / w.sum(), atol=0.05)


def test_opt_a1_freezes_initial_estimates():
    sizes = np.array([100, 100])
    design = make_design("opt_a1", n_ini=10)
    memory = {}  # the audit's design memory (DesignState.memory)
    st0 = _state(sizes, n=[10, 10], h=[5, 1], memory=memory)  # s ∝ 0.5, 0.3 (times sqrt(10/9))
    first = design.allocate(st0, 16, np.random.default_rng(0))
    assert first.tolist() == [10, 6]
    assert set(memory) == {"opt_a1_frozen"}
    # later labels change the current rates but A1 keeps the initial estimates
    st1 = _state(sizes, n=[20, 16], h=[10, 16], memory=memory)
    second = design.allocate(st1, 16, np.random.default_rng(0))
    total_post = np.array([10, 6]) + second
    assert total_post.tolist() == [20, 12]
    # without memory the estimates are those of the state seen (stratum 2 is all positive now:
    # s_2 = 0, so every later label goes to stratum 1)
    again = design.allocate(_state(sizes, n=[20, 16], h=[10, 16]), 16, np.random.default_rng(0))
    assert again.tolist() == [16, 0]


def test_opt_a1_keeps_no_state_on_the_design():
    # one design object serving two audits in turn (batches interleaved) proposes what two
    # fresh objects propose: the frozen estimates are each audit's, in its DesignState.memory
    sizes = np.array([100, 100, 100])
    truths = [np.array([50, 10, 90]), np.array([5, 60, 30])]
    shared = make_design("opt_a1", n_ini=4)
    fresh = [make_design("opt_a1", n_ini=4) for _ in truths]

    def run(designs):
        gen = np.random.default_rng(3)
        n = [np.zeros(3, np.int64) for _ in truths]
        h = [np.zeros(3, np.int64) for _ in truths]
        memories = [{} for _ in truths]
        out = []
        for _ in range(6):
            for a, pos in enumerate(truths):
                st = _state(sizes, n=n[a], h=h[a], memory=memories[a])
                c = designs[a].allocate(st, 12, np.random.default_rng(0))
                h[a] += gen.hypergeometric(pos - h[a], sizes - pos - (n[a] - h[a]), c)
                n[a] += c
                out.append(c.tolist())
        return out

    alone = run(fresh)
    assert run([shared, shared]) == alone
    assert alone[-2] != alone[-1]  # the two audits froze different estimates


# ---------------------------------------------------------------------- oracle
def test_neyman_oracle_cumulative_allocation():
    sizes = np.array([1000, 1000, 1000])
    rates = np.array([0.5, 0.1, 0.0])
    design = make_design("neyman_oracle", rates=rates)
    n = np.zeros(3, np.int64)
    for _ in range(10):
        n += design.allocate(_state(sizes, n=n, metric="accuracy"), 16, np.random.default_rng(0))
    # Neyman: 160 * (0.5 : 0.3 : 0) / 0.8 = 100 : 60 : 0
    assert n.tolist() == [100, 60, 0]


# ---------------------------------------------------------------------- posterior variance
@pytest.mark.parametrize(
    ("a", "b", "rem", "m"), [(2.5, 4.5, 30, 7), (0.5, 0.5, 12, 12), (10.5, 1.5, 40, 1)]
)
def test_preposterior_variance_is_exact(a, b, rem, m):
    # provenance: law of total variance evaluated by enumerating the beta-binomial outcomes
    # with scipy.stats.betabinom
    exact = sum(
        stats.betabinom.pmf(y, m, a, b) * stats.betabinom.var(rem - m, a + y, b + m - y)
        for y in range(m + 1)
    )
    assert preposterior_variance(a, b, rem, m) == pytest.approx(exact, rel=1e-10)
    assert preposterior_variance(a, b, rem, 0) == pytest.approx(stats.betabinom.var(rem, a, b))
    # superpopulation: E Var(N theta | y) = N^2 E Var(theta | y)
    exact_inf = sum(
        stats.betabinom.pmf(y, m, a, b) * stats.beta.var(a + y, b + m - y) for y in range(m + 1)
    )
    assert preposterior_variance(a, b, None, m, finite_population=False, size=50) == pytest.approx(
        2500 * exact_inf, rel=1e-10
    )


def test_greedy_batch_is_the_exact_minimiser():
    # brute force over every split of a batch of 6 over 3 strata
    sizes = np.array([40, 25, 10])
    n, h = np.array([4, 6, 2]), np.array([1, 5, 1])
    state = _state(sizes, n=n, h=h, available=[36, 19, 3], metric="prevalence")
    # the greedy rule alone (stratum 2 is 7/10 labelled: the completion would take its 3 first)
    out = make_design("posterior_variance", complete=1.0).allocate(
        state, 6, np.random.default_rng(0)
    )
    a, b = 0.5 + h, 0.5 + n - h
    g = metric_gradient("prevalence", sizes, state.predicted, h + (sizes - n) * a / (a + b))

    def objective(m):
        return float((g**2 * preposterior_variance(a, b, sizes - n, np.asarray(m))).sum())

    best = min(
        (
            m
            for m in itertools.product(range(7), repeat=3)
            if sum(m) == 6 and all(np.asarray(m) <= [36, 19, 3])
        ),
        key=objective,
    )
    assert objective(out) == pytest.approx(objective(best), rel=1e-12)


def test_fully_labelled_stratum_gets_nothing_more():
    state = _state([10, 1000], n=[9, 5], h=[4, 2], available=[1, 995])
    out = make_design("posterior_variance", complete=1.0).allocate(
        state, 1, np.random.default_rng(0)
    )
    assert out.tolist() == [0, 1]
    # the completion (the default) labels the 9/10-labelled stratum's last item instead
    out = make_design("posterior_variance").allocate(state, 1, np.random.default_rng(0))
    assert out.tolist() == [1, 0]


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_metric_gradient_matches_finite_difference_of_counts(metric):
    sizes = np.array([300.0, 200.0, 100.0, 50.0])
    predicted = np.array([False, False, True, True])
    pos = np.array([10.0, 30.0, 60.0, 45.0])
    g = metric_gradient(metric, sizes, predicted, pos)
    func = METRICS[metric].func

    def value(p):
        tp = p[predicted].sum()
        fn = p[~predicted].sum()
        return float(
            func(
                np.array([tp]),
                np.array([sizes[predicted].sum() - tp]),
                np.array([fn]),
                np.array([sizes[~predicted].sum() - fn]),
            )[0]
        )

    for j in range(4):
        e = np.zeros(4)
        e[j] = 1e-3
        fd = (value(pos + e) - value(pos - e)) / 2e-3
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-12)


def test_precision_gradient_is_one_over_predicted_positives():
    g = metric_gradient(
        "precision",
        np.array([500, 100, 300]),
        np.array([False, True, True]),
        np.array([10.0, 80.0, 150.0]),
    )
    np.testing.assert_allclose(g, [0.0, 1 / 400, 1 / 400], rtol=1e-6)


def test_posterior_variance_beats_proportional_in_simulation():
    # seeded simulation: final posterior variance of precision after 400 labels (batches of 20);
    # the design must do better than proportional allocation on strata with very different rates
    rng = np.random.default_rng(11)
    sizes = np.array([5000, 5000, 5000, 5000])
    rates = np.array([0.5, 0.8, 0.95, 0.99])
    positives = np.round(sizes * rates).astype(np.int64)
    reps = 40
    result = {}
    for name in ("proportional", "posterior_variance"):
        design = make_design(name)
        n = np.zeros((reps, 4), np.int64)
        h = np.zeros((reps, 4), np.int64)
        for _ in range(20):
            c = design.allocate_many(_state(sizes, n=n, h=h, metric="precision"), 20, rng)
            h += rng.hypergeometric(positives - h, sizes - positives - (n - h), c)
            n += c
        a, b = 0.5 + h, 0.5 + n - h
        v = (preposterior_variance(a, b, sizes - n, 0) / sizes.sum() ** 2).sum(axis=1)
        result[name] = v.mean()
    # Neyman vs proportional for these rates: (sum W S)^2 / sum W S^2 = 0.79; the design is
    # expected near that ratio, far below 0.95
    assert result["posterior_variance"] < 0.9 * result["proportional"]


def test_posterior_variance_defensive_floor():
    """The defensive floor (issue 13): every stratum the metric depends on is topped up to
    lambda * T * (1/(2K) + N_k/(2N)) labels before the greedy step, even where the model says
    the rate is ~0; strata the metric ignores get none; batches add up exactly."""
    from bayes_eval.designs import defensive_allocation

    sizes = np.array([40_000, 30_000, 20_000, 5_000, 3_000, 2_000])
    pred = np.array([False, False, False, True, True, True])
    k = sizes.size
    n = np.zeros(k, dtype=np.int64)
    h = np.zeros(k, dtype=np.int64)
    # the model is sure strata 0-2 hold (almost) no positives: the greedy rule alone never
    # labels there
    pa = np.array([1e-3, 1e-3, 1e-3, 5.0, 5.0, 5.0])
    pb = np.array([1e4, 1e4, 1e4, 5.0, 5.0, 5.0])
    rng = np.random.default_rng(0)
    for lam, metric in ((0.0, "f1"), (0.3, "f1"), (0.3, "precision")):
        d = make_design("posterior_variance", defensive=lam)
        nn, hh = n.copy(), h.copy()
        for _ in range(10):
            st = DesignState(
                sizes=sizes,
                predicted=pred,
                n=nn,
                h=hh,
                available=sizes - nn,
                prior_a=pa,
                prior_b=pb,
                metric=metric,
            )
            c = d.allocate(st, 100, rng)
            assert c.sum() == 100 and (c >= 0).all()
            nn = nn + c
        total = nn.sum()
        rel = pred if metric == "precision" else np.ones(k, bool)
        floor = np.floor(lam * total * (0.5 / rel.sum() + 0.5 * sizes / sizes[rel].sum()))
        if lam == 0.0:
            assert nn[:3].sum() == 0  # the starvation the floor prevents
        else:
            assert (nn[rel] >= floor[rel]).all()
        if metric == "precision":
            assert nn[~pred].sum() == 0  # precision ignores the predicted negatives
    # the kernel alone: deficits only, never more than the batch
    out = defensive_allocation(
        np.zeros((1, k), dtype=np.int64), sizes, sizes[None, :], np.ones((1, k), bool), 50, 0.3
    )
    want = np.floor(0.3 * 50 * (0.5 / k + 0.5 * sizes / sizes.sum()))
    np.testing.assert_array_equal(out[0], want)  # [4, 3, 2, 1, 1, 1]: 12 of the 50


def test_posterior_variance_completion():
    """The completion (session 31): a relevant stratum at least half labelled or proposed gets
    all its remaining items first, smallest remainders first, only whole and within the batch;
    strata the metric ignores and strata below the share are left to the design; complete=1
    switches it off; with nothing to complete the batch is the design's as before."""
    from bayes_eval.designs import completion_allocation

    sizes = np.array([10_000, 17, 16, 40, 17])
    pred = np.array([False, True, True, True, True])
    n = np.array([50, 13, 6, 30, 9])  # strata 1, 3, 4 at least half labelled; 2 not
    avail = sizes - n
    rel = np.ones((1, 5), bool)
    out = completion_allocation(sizes, avail[None, :], rel, 20, 0.5)
    # remainders 4 (stratum 1), 10 (3), 8 (4): 4 + 8 = 12 fit in 20, the next (10) does not
    np.testing.assert_array_equal(out[0], [0, 4, 0, 0, 8])
    out = completion_allocation(sizes, avail[None, :], rel, 30, 0.5)
    np.testing.assert_array_equal(out[0], [0, 4, 0, 10, 8])
    out = completion_allocation(sizes, avail[None, :], rel, 3, 0.5)
    assert out.sum() == 0  # no remainder fits whole
    rel_p = pred[None, :].copy()
    rel_p[0, 4] = False
    out = completion_allocation(sizes, avail[None, :], rel_p, 30, 0.5)
    np.testing.assert_array_equal(out[0], [0, 4, 0, 10, 0])
    assert completion_allocation(sizes, avail[None, :], rel, 30, 1.0).sum() == 0
    # lock-step rows are independent
    two = completion_allocation(sizes, np.stack([avail, sizes]), np.ones((2, 5), bool), 20, 0.5)
    np.testing.assert_array_equal(two, [[0, 4, 0, 0, 8], [0, 0, 0, 0, 0]])
    # in the design: the completed strata come first, the batch adds up, nothing beyond them
    pa, pb = np.full(5, 0.5), np.full(5, 0.5)
    h = np.array([1, 12, 3, 20, 9])
    st = DesignState(
        sizes=sizes,
        predicted=pred,
        n=n,
        h=h,
        available=avail,
        prior_a=pa,
        prior_b=pb,
        metric="precision",
    )
    rng = np.random.default_rng(0)
    c = make_design("posterior_variance").allocate(st, 20, rng)
    assert c.sum() == 20 and c[1] == 4 and c[4] == 8 and c[0] == 0 and (c <= avail).all()
    off = make_design("posterior_variance", complete=1.0).allocate(st, 20, rng)
    assert off.sum() == 20 and off[1] < 4  # without it the unanimous stratum is left alone
    assert make_design("posterior_variance").options() == {"defensive": 0.3, "complete": 0.5}
    # nothing to complete: the same batch as with complete=1, for every design input
    big = np.array([40_000, 30_000, 5_000, 3_000])
    st = DesignState(
        sizes=big,
        predicted=np.array([False, False, True, True]),
        n=np.array([100, 80, 60, 40]),
        h=np.array([1, 2, 30, 35]),
        available=big - np.array([100, 80, 60, 40]),
        prior_a=np.full(4, 0.5),
        prior_b=np.full(4, 0.5),
        metric="f1",
    )
    for lam in (0.0, 0.3):
        a = make_design("posterior_variance", defensive=lam).allocate(st, 50, rng)
        b = make_design("posterior_variance", defensive=lam, complete=1.0).allocate(st, 50, rng)
        np.testing.assert_array_equal(a, b)


def test_opt_a1_memory_in_lock_step():
    # the lock-step engine keeps one memory for the (R, K) call and one per audit for the
    # per-audit copies: both give every audit the proposals it gets on its own
    sizes = np.array([100, 100, 100])
    pos = np.array([[50, 10, 90], [5, 60, 30], [20, 20, 80]])
    counts = {}
    for per_audit in (False, True):
        alloc = LockStepAllocator(make_design("opt_a1", n_ini=4), 3, per_audit=per_audit)
        audits = LockStep(sizes, pos, 3)
        gen = np.random.default_rng(8)
        out = []
        for rnd in range(6):
            st = design_state(
                sizes=sizes,
                predicted=np.ones(3, bool),
                n=audits.n,
                h=audits.h,
                available=audits.available,
                prior_a=np.full(3, 0.5),
                prior_b=np.full(3, 0.5),
                metric="accuracy",
                round=rnd,
            )
            c = alloc(st, 12, np.random.default_rng(0))
            audits.label(c, gen)
            out.append(c)
        counts[per_audit] = np.stack(out)
        assert set(alloc.memory if not per_audit else alloc.memories[2]) == {"opt_a1_frozen"}
    np.testing.assert_array_equal(counts[False], counts[True])
    assert len({tuple(row) for row in counts[False][-1]}) > 1  # the audits froze differently
