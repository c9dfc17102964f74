"""The audit: keyed sampling, propose/record/estimate, run, persistence and crash safety."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

import bayes_eval as be
from bayes_eval._sampler import KeyedStratumSampler, item_keys, make_sampler, mix64
from bayes_eval.designs import make_design
from bayes_eval.ledger import LedgerError


def _pop(n=4000, seed=0, ids=None):
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    truth = rng.random(n) < scores
    pop = be.Population(scores, threshold=0.5, ids=ids)
    return pop, truth


# ---------------------------------------------------------------------- keyed sampler
def test_mix64_reference_value():
    # splitmix64 (Vigna, prng.di.unimi.it/splitmix64.c) seeded with state 0: first output
    assert mix64(0) == 0xE220A8397B1DCDAF


def test_item_keys_deterministic_and_partition_free():
    ids = np.arange(-5, 1000, dtype=np.int64)
    k = item_keys(ids, 7)
    assert k.dtype == np.uint64 and np.unique(k).size == ids.size  # bijective for int ids
    np.testing.assert_array_equal(item_keys(ids[100:200], 7), k[100:200])
    assert not np.array_equal(item_keys(ids, 8), k)
    s = np.array([f"url-{i}" for i in range(500)])
    ks = item_keys(s, 7)
    np.testing.assert_array_equal(item_keys(s[::7], 7), ks[::7])
    np.testing.assert_array_equal(item_keys(s.astype(object), 7), ks)
    assert np.unique(ks).size == 500
    with pytest.raises(TypeError, match="dtype"):
        item_keys(np.array([1.5]), 0)
    with pytest.raises(ValueError, match="seed=-1"):
        item_keys([1], -1)


def test_sampler_is_key_order_across_refills():
    pop, _ = _pop(20_000)
    strata = be.stratify(pop, n_strata=2)
    smp = KeyedStratumSampler(strata, seed=11)
    got = np.concatenate([smp.draw(1, m) for m in (3, 1500, 1, 2000, 700)])
    members = strata.members(1)
    ref = members[np.argsort(item_keys(pop.ids_at(members), 11))][: got.size]
    np.testing.assert_array_equal(got, ref)
    assert smp.available()[1] == strata.sizes[1] - got.size
    with pytest.raises(ValueError, match="not yet drawn"):
        smp.draw(0, int(strata.sizes[0]) + 1)
    # skip == draw and discard
    a, b = KeyedStratumSampler(strata, 11), KeyedStratumSampler(strata, 11)
    a.skip(2, 1234)
    b.draw(2, 1234)
    np.testing.assert_array_equal(a.draw(2, 50), b.draw(2, 50))
    assert isinstance(make_sampler(strata, 3), KeyedStratumSampler)


def test_sampler_is_uniform_without_replacement():
    # inclusion probability of each of 20 items in a sample of 5 is 1/4 over seeds
    pop = be.Population(np.linspace(0.6, 0.9, 20), threshold=0.5)
    strata = be.stratify(pop, n_strata=1)
    reps = 2000
    hits = np.zeros(20)
    for seed in range(reps):
        hits[KeyedStratumSampler(strata, seed).draw(0, 5)] += 1
    # chi-square goodness of fit of the inclusion counts (each Binomial(2000, 1/4))
    chi2 = ((hits - reps / 4) ** 2 / (reps / 4 * 3 / 4)).sum()
    assert chi2 < stats.chi2.ppf(0.999, 20)


# ---------------------------------------------------------------------- propose / record
@pytest.fixture
def audit_setup():
    pop, truth = _pop()
    strata = be.stratify(pop, n_strata=3)
    return pop, truth, strata


def test_propose_never_repeats_and_tracks_pending(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(pop, strata=strata, metric="f1", design="proportional", rng=0)
    first = audit.propose(30)
    second = audit.propose(30)
    assert len(set(first) | set(second)) == 60
    np.testing.assert_array_equal(audit.pending, np.concatenate([first, second]))
    assert audit.record(first, truth[first]) == 30
    np.testing.assert_array_equal(audit.pending, second)
    assert audit.record(first[:5], truth[first[:5]]) == 0  # identical re-record: no-op
    n, h = audit.counts()
    assert n.sum() == 30 and h.sum() == truth[first].sum()
    assert audit.n_proposed == 60 and audit.rounds == 2
    # the proposal follows the design: cumulative proportional allocation
    s = strata.stratum_of(pop.positions_of(np.concatenate([first, second])))
    expect = 60 * strata.sizes / strata.sizes.sum()
    assert np.all(np.abs(np.bincount(s, minlength=strata.n_strata) - expect) <= 1)


def test_everything_proposed_then_exhausted():
    pop, truth = _pop(60)
    strata = be.stratify(pop, n_strata=2)
    audit = be.Audit(pop, strata=strata, metric="accuracy", design="equal", rng=1)
    ids = audit.propose(60)
    assert sorted(ids.tolist()) == list(range(60))
    with pytest.raises(ValueError, match="n=1 is more than the 0 items"):
        audit.propose(1)
    res = audit.run(lambda i: truth[i], budget=100, batch_size=7)
    assert res.stopped_by == "exhausted" and res.n_labels == 60
    # a fully labelled population has no uncertainty left
    post = res.posterior
    assert post.std("accuracy") < 1e-12
    assert post.mean("accuracy") == pytest.approx(np.mean(truth == pop.predictions))


@pytest.mark.parametrize(
    ("ids", "labels", "exc", "match"),
    [
        ([10**9], [1], ValueError, "unknown id"),
        ("never", [1], ValueError, "never proposed"),
        ("first", [2], ValueError, "allowed: 0, 1"),
        ("first2", [1], ValueError, "must match"),
        ("conflict", None, ValueError, "conflicts"),
        ("dup", None, ValueError, "two different labels"),
        ([1.5], [1], TypeError, "integer ids"),
        ([[1, 2]], [1, 1], ValueError, "1-D"),
    ],
)
def test_record_rejects_and_writes_nothing(tmp_path, audit_setup, ids, labels, exc, match):
    pop, truth, strata = audit_setup
    audit = be.Audit(pop, strata=strata, metric="f1", design="random", rng=0, path=tmp_path / "a")
    prop = audit.propose(10)
    audit.record(prop[:3], truth[prop[:3]])
    size = (tmp_path / "a" / "ledger.jsonl").stat().st_size
    before = (audit.counts(), audit.pending.tolist(), audit.labels().to_dict())
    if ids == "never":
        ids = [int(np.setdiff1d(np.arange(pop.size), prop)[0])]
    elif ids == "first":
        ids = prop[3:4]
    elif ids == "first2":
        ids = prop[3:5]
    elif ids == "conflict":
        ids, labels = prop[:1], [1 - int(truth[prop[0]])]
    elif ids == "dup":
        ids, labels = [prop[4], prop[4]], [0, 1]
    with pytest.raises(exc, match=match):
        audit.record(ids, labels)
    after = (audit.counts(), audit.pending.tolist(), audit.labels().to_dict())
    assert (tmp_path / "a" / "ledger.jsonl").stat().st_size == size
    np.testing.assert_array_equal(before[0][0], after[0][0])
    assert before[1:] == after[1:]


@pytest.mark.parametrize(
    ("n", "exc"),
    [(0, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError), (10**6, ValueError)],
)
def test_propose_validation(audit_setup, n, exc):
    pop, _, strata = audit_setup
    audit = be.Audit(pop, strata=strata, design="random", rng=0)
    with pytest.raises(exc, match="n="):
        audit.propose(n)
    assert audit.n_proposed == 0


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"metric": "f2"}, ValueError, "metric='f2'"),
        ({"design": "nope"}, ValueError, "design='nope'"),
        ({"model": "deep"}, ValueError, "model='deep'"),
        ({"prior": "flat"}, ValueError, "prior='flat'"),
        ({"draws": 0}, ValueError, "draws=0"),
        ({"rng": -3}, ValueError, "rng=-3"),
        ({"finite_population": "yes"}, TypeError, "finite_population"),
        ({"strata": "s"}, TypeError, "strata"),
    ],
)
def test_audit_bad_arguments(audit_setup, kwargs, exc, match):
    pop, _, strata = audit_setup
    args = {"strata": strata, "design": "random", "rng": 0, **kwargs}
    with pytest.raises(exc, match=match):
        be.Audit(pop, **args)


def test_audit_refuses_strata_of_another_population(audit_setup):
    """One check with ``simulate`` (``_protocols.check_strata``): strata made from a different
    population are refused, strata of an equal copy (same fingerprint) are not."""
    pop, _, strata = audit_setup
    other = be.Population(np.random.default_rng(1).random(pop.size), threshold=0.5)
    with pytest.raises(ValueError, match="different population than the population given"):
        be.Audit(other, strata=strata, design="random", rng=0)
    copy = be.Population(pop.scores.copy(), threshold=pop.threshold)
    assert copy.fingerprint() == pop.fingerprint()
    be.Audit(copy, strata=strata, design="random", rng=0)


def test_estimate_matches_estimate_of_the_same_labels(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(pop, strata=strata, metric="f1", design="equal", rng=5, draws=4000)
    ids = audit.propose(150)
    audit.record(ids, truth[ids])
    post = audit.estimate(rng=123)
    ref = be.estimate(strata, (ids, truth[ids]), draws=4000, rng=123)
    for m in ("f1", "precision", "recall"):
        assert post.mean(m) == ref.mean(m)
    # default rng: reproducible, and estimating does not change what is proposed next
    assert audit.estimate().mean("f1") == audit.estimate().mean("f1")
    twin = be.Audit(pop, strata=strata, metric="f1", design="equal", rng=5, draws=4000)
    twin_ids = twin.propose(150)
    twin.record(twin_ids, truth[twin_ids])
    np.testing.assert_array_equal(audit.propose(20), twin.propose(20))


def test_random_design_is_a_simple_random_sample():
    # SRS of 10 from 40 items in 4 strata of unequal size: each item included w.p. 1/4
    pop = be.Population(
        np.r_[
            np.linspace(0, 0.4, 6),
            np.linspace(0.45, 0.49, 14),
            np.linspace(0.5, 0.7, 12),
            np.linspace(0.8, 1, 8),
        ],
        threshold=0.5,
    )
    strata = be.stratify(pop, n_strata=2)
    reps = 1500
    hits = np.zeros(40)
    for seed in range(reps):
        audit = be.Audit(pop, strata=strata, design="random", rng=seed)
        hits[audit.propose(10)] += 1
    chi2 = ((hits - reps / 4) ** 2 / (reps / 4 * 3 / 4)).sum()
    assert chi2 < stats.chi2.ppf(0.999, 40)


# ---------------------------------------------------------------------- run
def test_run_with_halfwidth(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(
        pop, strata=strata, metric="precision", design="proportional", rng=2, draws=4000
    )
    rule = be.stop.HalfWidth(0.06, level=0.9, rounds=2)
    res = audit.run(lambda ids: truth[ids], budget=3000, batch_size=50, stop=rule)
    tr = res.trajectory
    assert res.stopped_by.startswith("half-width") and res.n_labels < 3000
    assert tr.sizes["look"] == audit.looks
    hw = (tr["upper"] - tr["lower"]).values / 2
    assert np.all(np.diff(tr["n_labels"].values) == 50)
    assert tr["stop"].values[-1] and not tr["stop"].values[:-1].any()
    assert res.certification is None
    assert res.metric == "precision" and res.design == "proportional"
    true_precision = truth[pop.predictions].mean()
    assert abs(res.posterior.mean("precision") - true_precision) < 0.06
    assert hw[-1] <= 0.07  # 95% interval recorded, rule at 90%
    assert "labels" in repr(res)


def test_run_budget_and_pending(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(
        pop, strata=strata, metric="f1", design="random", rng=3, draws=2000, model="independent"
    )
    early = audit.propose(15)
    res = audit.run(
        lambda ids: truth[ids], budget=95, batch_size=20, stop=be.stop.LowerBoundAbove(0.99)
    )
    assert res.stopped_by == "budget" and res.n_labels == 95
    assert set(early) <= set(audit.labels().index)  # pending items were labelled first
    assert res.trajectory["n_labels"].values.tolist() == [35, 55, 75, 95]
    with pytest.raises(TypeError, match="oracle"):
        audit.run(3, budget=10, batch_size=2)
    with pytest.raises(ValueError, match="batch_size=0"):
        audit.run(lambda i: truth[i], budget=10, batch_size=0)
    with pytest.raises(ValueError, match="must match"):  # a wrong oracle
        audit.run(lambda i: truth[i][:1], budget=200, batch_size=5)


def test_run_with_accept_certifies(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(
        pop, strata=strata, metric="precision", design="proportional", rng=4, draws=4000
    )
    res = audit.run(
        lambda ids: truth[ids],
        budget=400,
        batch_size=100,
        stop=be.stop.Accept(0.5, level=0.95, corrected=False),
    )
    assert res.certification is not None and res.certification.accepted
    assert res.stopped_by.startswith("accepted")


def test_hierarchical_model_feeds_design_and_looks(audit_setup):
    pop, truth, strata = audit_setup
    audit = be.Audit(
        pop,
        strata=strata,
        metric="f1",
        design="proportional",
        rng=0,
        model="hierarchical",
        draws=2000,
    )
    res = audit.run(lambda ids: truth[ids], budget=80, batch_size=40, final_posterior=False)
    state = audit.design_state()
    assert not np.allclose(state.prior_a, 0.5)  # empirical Bayes priors, not the Jeffreys prior
    assert res.model == "hierarchical"
    assert res.trajectory.attrs["look_model"].startswith("independent with empirical-Bayes")
    assert "empirical-bayes" in res.posterior.prior


# ---------------------------------------------------------------------- persistence
@pytest.mark.parametrize("string_ids", [False, True])
def test_resume_gives_the_same_future(tmp_path, string_ids):
    ids = np.array([f"doc-{i}" for i in range(4000)]) if string_ids else None
    pop, truth = _pop(ids=ids)
    strata = be.stratify(pop, n_strata=3)
    lab = dict(zip(pop.ids.tolist(), truth.tolist(), strict=True))

    def oracle(x):
        return [lab[i] for i in x.tolist()]

    kw = {"strata": strata, "metric": "f1", "design": "random", "rng": 9, "draws": 1000}
    straight = be.Audit(pop, **kw)
    seq = [straight.propose(m) for m in (7, 11, 5, 9)]
    for s in seq[:3]:
        straight.record(s, oracle(s))
    a = be.Audit(pop, **kw, path=tmp_path / "x")
    for s in (a.propose(7), a.propose(11)):
        a.record(s, oracle(s))
    third = a.propose(5)
    a.record(third[:2], oracle(third[:2]))
    del a
    b = be.Audit.open(tmp_path / "x", pop)
    assert b.n_labels == 20 and b.pending.tolist() == third[2:].tolist()
    b.record(third[2:], oracle(third[2:]))
    np.testing.assert_array_equal(b.propose(9), seq[3])
    c = be.Audit(pop, **kw, path=tmp_path / "x")  # same arguments: resumes too
    np.testing.assert_array_equal(c.propose(13), straight.propose(13))
    assert c.labels().equals(b.labels())


def test_reopen_refuses_mismatch(tmp_path, audit_setup):
    pop, truth, strata = audit_setup
    a = be.Audit(pop, strata=strata, metric="f1", design="random", rng=0, path=tmp_path / "x")
    ids = a.propose(4)
    a.record(ids, truth[ids])
    with pytest.raises(ValueError, match="metric: stored 'f1', given 'recall'"):
        be.Audit(pop, strata=strata, metric="recall", design="random", rng=0, path=tmp_path / "x")
    with pytest.raises(ValueError, match="seed"):
        be.Audit(pop, strata=strata, metric="f1", design="random", rng=1, path=tmp_path / "x")
    other, _ = _pop(seed=1)
    with pytest.raises(ValueError, match="population does not match"):
        be.Audit.open(tmp_path / "x", other)
    other_strata = be.stratify(other, n_strata=3)
    with pytest.raises(ValueError, match="population"):
        be.Audit(
            other, strata=other_strata, metric="f1", design="random", rng=0, path=tmp_path / "x"
        )
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "f").write_text("x")
    with pytest.raises(ValueError, match="non-empty directory"):
        be.Audit(pop, strata=strata, design="random", rng=0, path=tmp_path / "junk")
    manifest = json.loads((tmp_path / "x" / "manifest.json").read_text())
    assert manifest["design"] == {"name": "random", "options": {}}
    assert manifest["population"]["fingerprint"] == pop.fingerprint()
    assert manifest["strata"]["sizes"] == strata.sizes.tolist()


def test_foreign_ledger_is_detected(tmp_path, audit_setup):
    pop, _truth, strata = audit_setup
    a = be.Audit(pop, strata=strata, design="random", rng=0, path=tmp_path / "x")
    a.propose(3)
    path = tmp_path / "x" / "ledger.jsonl"
    text = path.read_text().splitlines()
    rec = json.loads(text[1])
    rec.pop("crc")
    rec["ids"][0] = (rec["ids"][0] + 1) % pop.size  # a proposal this seed never made
    from bayes_eval.ledger import encode_line

    path.write_bytes((text[0] + "\n").encode() + encode_line(rec))
    with pytest.raises(LedgerError, match="differ"):
        be.Audit.open(tmp_path / "x", pop)


# ---------------------------------------------------------------------- batch schedules
def test_run_follows_the_design_batch_schedule(audit_setup):
    pop, truth, strata = audit_setup
    k = strata.n_strata
    audit = be.Audit(
        pop,
        strata=strata,
        metric="f1",
        design="online_optimal",
        design_options={"d0": 30, "d": 12},
        rng=0,
        draws=500,
        model="independent",
    )
    res = audit.run(lambda ids: truth[ids], budget=70)  # no batch_size needed
    # D0 first, then D, the last batch cut to the budget
    assert res.trajectory["n_labels"].values.tolist() == [30, 42, 54, 66, 70]
    assert audit.batch_size == 12
    # a schedule overrides batch_size; propose keeps the caller's n
    a2 = be.Audit(
        pop,
        strata=strata,
        metric="f1",
        design="opt_a2",
        design_options={"n_ini": 4, "n_step": 9},
        rng=1,
        draws=500,
        model="independent",
    )
    assert a2.propose(5).size == 5
    a2.record(a2.pending, truth[a2.pending])
    res = a2.run(lambda ids: truth[ids], budget=60, batch_size=100)
    assert res.trajectory["n_labels"].values.tolist() == [14, 23, 32, 41, 50, 59, 60]
    # OPT-A2's round 1 is n_step (round 0 was the caller's propose(5)); the initial sample is
    # filled first within the budget: n_ini labels in every stratum
    n, _ = a2.counts()
    assert (n >= 4).all() and k == n.size
    no_schedule = be.Audit(pop, strata=strata, design="equal", rng=0, model="independent")
    with pytest.raises(TypeError, match="batch_size=None"):
        no_schedule.run(lambda ids: truth[ids], budget=10)


@pytest.mark.parametrize("design", ["opt_a1", "online_optimal"])
def test_resume_mid_run_with_a_scheduled_design(tmp_path, audit_setup, design):
    # OPT-A1 freezes its weights after the initial sample (state on the design object) and
    # online_optimal draws its batch sizes: a resumed audit must still propose exactly what an
    # uninterrupted one proposes, batch sizes included
    pop, truth, strata = audit_setup
    kw = {"strata": strata, "metric": "f1", "design": design, "rng": 21, "draws": 300}
    first = be.Audit(pop, **kw, path=tmp_path / "r", model="independent")
    first.run(lambda ids: truth[ids], budget=70)
    extra = first.propose(3)  # pending at the interruption
    del first
    again = be.Audit.open(tmp_path / "r", pop)
    np.testing.assert_array_equal(again.pending, extra)
    # continue the straight audit's schedule from here: same proposals
    twin = be.Audit(pop, **kw, model="independent")
    twin.run(lambda ids: truth[ids], budget=70)
    np.testing.assert_array_equal(twin.propose(3), extra)
    twin.record(extra, truth[extra])
    again.record(extra, truth[extra])
    res_twin = twin.run(lambda ids: truth[ids], budget=150)
    res_again = again.run(lambda ids: truth[ids], budget=150)
    assert again.labels().index.tolist() == twin.labels().index.tolist()
    np.testing.assert_array_equal(
        res_again.trajectory["n_labels"].values, res_twin.trajectory["n_labels"].values
    )
    assert res_again.n_labels == 150


def test_one_opt_a1_object_serves_two_audits(tmp_path, audit_setup):
    # OPT-A1 remembers its frozen estimates in each audit's design memory, not on the design
    # object: one object used by two audits in turn (batches interleaved) proposes what two
    # fresh objects propose, and a reopened audit (memory rebuilt from the ledger) goes on alike
    pop, truth, strata = audit_setup
    other = truth[np.random.default_rng(1).permutation(truth.size)]  # other rates per stratum
    kw = {"strata": strata, "metric": "f1", "rng": 4, "draws": 300}
    shared = make_design("opt_a1", n_ini=4)

    def fresh():
        return make_design("opt_a1", n_ini=4)

    pairs = [
        (be.Audit(pop, design=shared, **kw), be.Audit(pop, design=fresh(), **kw)),
        (
            be.Audit(pop, design=shared, **kw, path=tmp_path / "b"),
            be.Audit(pop, design=fresh(), **kw),
        ),
    ]
    oracles = [lambda ids: truth[ids], lambda ids: other[ids]]
    k = int(strata.n_strata)
    for step in range(6):
        if step == 3:  # reopen the second audit from its ledger, with the shared object
            pairs[1][0].close()
            pairs[1] = (be.Audit.open(tmp_path / "b", pop, design=shared), pairs[1][1])
        for (a, twin), oracle in zip(pairs, oracles, strict=True):
            m = 4 * k if step == 0 else 9
            got, want = a.propose(m), twin.propose(m)
            np.testing.assert_array_equal(got, want)
            a.record(got, oracle(got))
            twin.record(want, oracle(want))
    assert not np.array_equal(pairs[0][0].counts()[0], pairs[1][0].counts()[0])


class _Switchable:
    """A custom design whose rule can be changed between writing and reopening a ledger."""

    name = "switchable"

    def __init__(self, target):
        self.target = target

    def allocate(self, state, batch_size, rng):
        out = np.zeros(state.sizes.shape[0], dtype=np.int64)
        out[self.target] = batch_size  # all in one stratum (test batches fit in it)
        return out


def test_replay_detects_a_design_that_no_longer_reproduces(tmp_path, audit_setup):
    pop, truth, strata = audit_setup
    a = be.Audit(pop, strata=strata, design=_Switchable(0), rng=0, path=tmp_path / "s", draws=300)
    ids = a.propose(30)
    a.record(ids, truth[ids])
    del a
    same = be.Audit.open(tmp_path / "s", pop, strata=strata, design=_Switchable(0))
    assert same.n_labels == 30
    with pytest.raises(LedgerError, match="now allocates"):
        be.Audit.open(tmp_path / "s", pop, strata=strata, design=_Switchable(1))


def test_audit_refuses_a_metric_the_population_cannot_define():
    """Session 33: as ``estimate`` does, not at the first look: precision with nothing predicted
    positive (a threshold above every score) is refused by name, with the metrics allowed."""
    scores = np.random.default_rng(0).random(500)
    pop = be.Population(scores, threshold=7.0)
    strata = be.stratify(pop, n_strata=4)
    with pytest.raises(ValueError, match=r"metric 'precision' is undefined: the population has "
                       r"no predicted positives; allowed here: recall, f1"):  # fmt: skip
        be.Audit(pop, strata=strata, metric="precision")
    assert be.Audit(pop, strata=strata, metric="f1").metric == "f1"
