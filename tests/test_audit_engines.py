"""The core audit behaviours on both population implementations (issue 8): in memory and on Dask.

These are not agreement tests between copied code paths: the audit has one engine
(``bayes_eval._loop``); what differs is the population and strata behind the
:class:`~bayes_eval._protocols.PopulationLike` / ``StrataLike`` protocols, and every audit
behaviour must hold for each implementation.

One multi-file Parquet dataset (40,000 rows in 4 files of unequal size, ids a random sample of
0..119,999 so that file id ranges overlap) is read once in memory and once lazily with Dask
(synchronous scheduler); every test of the ``engine`` fixture runs on both.
"""

from __future__ import annotations

import itertools
import os

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bayes_eval as be
from bayes_eval._protocols import PopulationLike, StrataLike
from bayes_eval.dask import DaskPopulation, DaskStrata
from bayes_eval.parquet import read_parquet

N = 40_000


@pytest.fixture(scope="module", autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    rng = np.random.default_rng(31)
    pos = rng.random(N) < 0.3
    score = np.where(pos, rng.beta(4, 2, N), rng.beta(1, 4, N))
    ids = rng.permutation(3 * N)[:N].astype(np.int64)
    frame = pd.DataFrame({"item": ids, "score": score})
    root = tmp_path_factory.mktemp("engines") / "pop"
    os.makedirs(root)
    for i, (a, b) in enumerate(itertools.pairwise([0, 7_000, 21_000, 22_500, N])):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[a:b], preserve_index=False),
            root / f"part-{i}.parquet",
            row_group_size=5_000,
        )
    truth = np.zeros(3 * N, dtype=bool)  # label by id
    truth[ids] = pos
    return str(root), truth


def _open(root, engine):
    pop = read_parquet(root, score_col="score", id_col="item", threshold=0.5, engine=engine)
    return pop, be.stratify(pop, method="equal_size", n_strata=3)


@pytest.fixture(scope="module", params=["memory", "dask"])
def engine(request, dataset):
    root, truth = dataset
    pop, strata = _open(root, request.param)
    assert isinstance(pop, DaskPopulation) == (request.param == "dask")
    assert isinstance(strata, DaskStrata) == (request.param == "dask")
    assert isinstance(pop, PopulationLike) and isinstance(strata, StrataLike)
    return request.param, pop, strata, truth


def _audit(engine, **kw):
    _, pop, strata, _ = engine
    args = {"metric": "f1", "design": "posterior_variance", "rng": 5, "draws": 1000, **kw}
    return be.Audit(pop, strata=strata, **args)


def test_propose_record_estimate(engine):
    _, pop, strata, truth = engine
    audit = _audit(engine)
    ids = audit.propose(40)
    assert ids.dtype == np.int64 and np.unique(ids).size == 40
    pos = pop.positions_of(ids)  # every id is in the population
    assert audit.record(ids, truth[ids]) == 40
    n, h = audit.counts()
    assert n.sum() == 40 and h.sum() == truth[ids].sum()
    np.testing.assert_array_equal(n, np.bincount(strata.stratum_of(pos), minlength=6))
    post = audit.estimate()
    lo, hi = post.interval("f1", prob=0.95, kind="eti")
    assert 0 < lo < post.mean("f1") < hi < 1
    assert audit.estimate().mean("f1") == post.mean("f1")  # reproducible


def test_never_proposes_twice(engine):
    _, _, _, truth = engine
    audit = _audit(engine, design="proportional")
    batches = [audit.propose(m) for m in (25, 60, 5, 110)]
    every = np.concatenate(batches)
    assert np.unique(every).size == every.size == 200
    np.testing.assert_array_equal(audit.pending, every)
    audit.record(batches[1], truth[batches[1]])
    assert audit.pending.size == 140 and audit.n_labels == 60
    more = audit.propose(50)
    assert not set(more.tolist()) & set(every.tolist())


@pytest.mark.parametrize("case", ["never", "unknown", "conflict", "value", "length"])
def test_bad_record_writes_nothing(engine, tmp_path, case):
    _, _, _, truth = engine
    audit = _audit(engine, design="random", path=tmp_path / "a")
    ids = audit.propose(10)
    audit.record(ids[:4], truth[ids[:4]])
    ledger = tmp_path / "a" / "ledger.jsonl"
    size = ledger.stat().st_size
    before = (audit.counts()[0].tolist(), audit.pending.tolist(), audit.labels().to_dict())
    labels = truth[ids[4:6]]
    bad_ids = ids[4:6]
    if case == "never":
        others = np.setdiff1d(np.flatnonzero(truth), ids)  # ids that exist (truth is by id)
        bad_ids = np.r_[ids[4], others[0]]
        match = "never proposed"
    elif case == "unknown":
        bad_ids = np.r_[ids[4], 10**9]
        match = "unknown id"
    elif case == "conflict":
        bad_ids, labels = ids[3:5], np.r_[not truth[ids[3]], truth[ids[4]]]
        match = "conflicts"
    elif case == "value":
        labels = np.array([1, 2])
        match = "allowed: 0, 1"
    else:
        labels = truth[ids[4:7]]
        match = "must match"
    with pytest.raises(ValueError, match=match):
        audit.record(bad_ids, labels)
    after = (audit.counts()[0].tolist(), audit.pending.tolist(), audit.labels().to_dict())
    assert after == before and ledger.stat().st_size == size


@pytest.mark.parametrize("design", ["posterior_variance", "online_optimal"])
def test_resume_gives_the_same_next_proposals(engine, tmp_path, design):
    name, pop, strata, truth = engine
    straight = _audit(engine, design=design)
    stored = _audit(engine, design=design, path=tmp_path / name)
    for m in (12, 30):
        a, b = straight.propose(m), stored.propose(m)
        np.testing.assert_array_equal(a, b)
        straight.record(a, truth[a])
        stored.record(b, truth[b])
    half = stored.propose(8)
    np.testing.assert_array_equal(half, straight.propose(8))
    stored.record(half[:3], truth[half[:3]])
    straight.record(half[:3], truth[half[:3]])
    del stored
    again = be.Audit.open(tmp_path / name, pop, strata=strata)
    assert again.n_labels == 45 and again.pending.tolist() == half[3:].tolist()
    assert again.rounds == 3
    for m in (9, 21):
        np.testing.assert_array_equal(again.propose(m), straight.propose(m))
    # and a run continues the design's batch schedule identically
    res_a = again.run(lambda ids: truth[ids], budget=150, batch_size=17)
    res_s = straight.run(lambda ids: truth[ids], budget=150, batch_size=17)
    np.testing.assert_array_equal(
        res_a.trajectory["n_labels"].values, res_s.trajectory["n_labels"].values
    )
    assert again.labels().index.tolist() == straight.labels().index.tolist()


def test_run_with_a_stop_rule(engine, true_precision):
    _, pop, _, truth = engine
    audit = _audit(engine, metric="precision", design="proportional", rng=8)
    rule = be.stop.HalfWidth(0.05, level=0.9, rounds=2)
    res = audit.run(lambda ids: truth[ids], budget=5000, batch_size=100, stop=rule)
    assert res.stopped_by.startswith("half-width") and res.n_labels < 5000
    tr = res.trajectory
    assert tr["stop"].values[-1] and not tr["stop"].values[:-1].any()
    assert np.all(np.diff(tr["n_labels"].values) == 100)
    ids = audit.labels().index.to_numpy()
    pos = pop.positions_of(ids)
    assert np.unique(ids).size == ids.size == res.n_labels
    # within 4 posterior sds of the population's precision
    assert pop.predictions_at(pos).dtype == bool
    assert abs(res.posterior.mean("precision") - true_precision) < 4 * res.posterior.std(
        "precision"
    )


@pytest.fixture(scope="module")
def true_precision(dataset):
    root, truth = dataset
    frame = pd.concat(
        pq.read_table(os.path.join(root, f)).to_pandas() for f in sorted(os.listdir(root))
    )
    y = truth[frame["item"].to_numpy()]
    return float(y[frame["score"].to_numpy() >= 0.5].mean())


@pytest.mark.parametrize(
    ("design", "options", "model"),
    [
        ("posterior_variance", {}, "independent"),
        ("online_optimal", {"d0": 30, "d": 15}, "independent"),
        ("random", {}, "independent"),
        ("posterior_variance", {}, "pooled"),
    ],
)
def test_same_proposals_on_both_engines(dataset, design, options, model):
    root, truth = dataset
    (mp, ms), (dp, ds) = _open(root, "memory"), _open(root, "dask")
    np.testing.assert_array_equal(ms.sizes, ds.sizes)
    kw = {"metric": "f1", "design": design, "design_options": options, "rng": 17, "draws": 500}
    kw["model"] = model
    am, ad = be.Audit(mp, strata=ms, **kw), be.Audit(dp, strata=ds, **kw)
    for m in (20, 7, 33):
        a, b = am.propose(m), ad.propose(m)
        np.testing.assert_array_equal(a, b)
        am.record(a, truth[a])
        ad.record(b, truth[b])
    rm = am.run(lambda ids: truth[ids], budget=200, batch_size=25)
    rd = ad.run(lambda ids: truth[ids], budget=200, batch_size=25)
    assert am.labels().index.tolist() == ad.labels().index.tolist()
    if model == "pooled":  # its score profile: sums in another order, fitted to a tolerance
        assert rd.posterior.mean("f1") == pytest.approx(rm.posterior.mean("f1"), rel=1e-7)
    else:
        assert rm.posterior.mean("f1") == rd.posterior.mean("f1")
