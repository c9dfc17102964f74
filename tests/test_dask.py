"""Out-of-core populations on Dask (issue 8): same strata, N_k and proposals as in memory.

A multi-file Parquet dataset of 10^6 rows is written to a temporary directory; passes run on the
synchronous scheduler (one test on a small LocalCluster).
"""

from __future__ import annotations

import itertools
import os
import shutil

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bayes_eval as be
from bayes_eval import dask_population
from bayes_eval._protocols import PopulationLike, StrataLike
from bayes_eval._sampler import KeyedStratumSampler, make_sampler
from bayes_eval.dask import DaskPopulation, DaskStrata, DaskStratumSampler, _stratify
from bayes_eval.dask import strata as dask_strata
from bayes_eval.dask._dataset import PieceSet
from bayes_eval.models._profile import profile_of_strata, score_profile_of
from bayes_eval.parquet import read_parquet

N = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


def _write(frame: pd.DataFrame, root, bounds, row_group_size):
    os.makedirs(root, exist_ok=True)
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[a:b], preserve_index=False),
            os.path.join(root, f"part-{i:03d}.parquet"),
            row_group_size=row_group_size,
        )
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """10^6 items in 7 files of unequal size; ids a random permutation (file id ranges overlap,
    so uniqueness needs the global check); scores with ties (rounded to 1e-5) and a point mass."""
    rng = np.random.default_rng(8)
    pos = rng.random(N) < 0.15
    score = np.where(pos, rng.beta(5, 2, N), rng.beta(1, 5, N)).round(5)
    score[rng.random(N) < 0.02] = 0.5  # ties at the threshold
    ids = rng.permutation(3 * N)[:N].astype(np.int64)
    frame = pd.DataFrame({"item": ids, "score": score, "label": pos})
    root = tmp_path_factory.mktemp("pop")
    bounds = [0, 90_000, 250_000, 400_000, 410_000, 700_000, 860_000, N]
    a = _write(frame, str(root / "a"), bounds, 60_000)
    b = _write(frame, str(root / "b"), [0, 333_333, 666_666, N], 200_000)  # other layout
    return frame, a, b


@pytest.fixture(scope="module")
def pops(data):
    _, a, _ = data
    dp = read_parquet(a, score_col="score", id_col="item", threshold=0.5, engine="dask")
    mp = be.Population.from_parquet(a, score_col="score", id_col="item", threshold=0.5)
    return dp, mp


def _same_strata(ds, ms):
    # the protocol, not the in-memory class: DaskStrata cannot offer Strata.members
    assert isinstance(ds, DaskStrata) and isinstance(ds, StrataLike)
    assert not isinstance(ds, be.Strata)
    assert ds.to_dataset().identical(ms.to_dataset())
    np.testing.assert_array_equal(ds.sizes, ms.sizes)
    np.testing.assert_array_equal(ds.predicted, ms.predicted)
    np.testing.assert_array_equal(ds.score_min, ms.score_min)
    np.testing.assert_array_equal(ds.score_max, ms.score_max)


def test_population_interface(pops, data):
    dp, mp = pops
    frame = data[0]
    assert isinstance(dp, DaskPopulation) and dp.size == N == mp.size
    assert dp.threshold == 0.5 and dp.n_predicted_positive == int(mp.predictions.sum())
    assert isinstance(dp, PopulationLike)
    ids = frame["item"].to_numpy()[[5, 123_456, 999_999, 400_000]]
    # global positions follow (sorted file order, row order), as the in-memory reader
    np.testing.assert_array_equal(dp.positions_of(ids), mp.positions_of(ids))
    pos = np.array([999_999, 0, 400_000])
    np.testing.assert_array_equal(dp.ids_at(pos), mp.ids_at(pos))
    np.testing.assert_array_equal(dp.scores_at(pos), mp.scores_at(pos))
    np.testing.assert_array_equal(dp.predictions_at(pos), mp.predictions_at(pos))
    np.testing.assert_array_equal(dp.scores_of(ids), mp.scores_at(mp.positions_of(ids)))
    look = dp.lookup(ids)
    assert list(look.columns) == ["id", "position", "score", "prediction"]
    np.testing.assert_array_equal(look["id"].to_numpy(), ids)
    with pytest.raises(ValueError, match="unknown id 3000001"):
        dp.positions_of([ids[0], 3_000_001])
    with pytest.raises(AttributeError, match="does not hold its scores"):
        _ = dp.scores
    assert "N=1,000,000" in repr(dp)


def test_fingerprint_from_metadata(tmp_path):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"item": rng.permutation(50_000), "score": rng.random(50_000)})
    root = _write(frame, str(tmp_path / "fp"), [0, 9_000, 20_000, 30_000, 40_000, 50_000], 4_000)
    root = shutil.copytree(root, tmp_path / "copy")
    fp = DaskPopulation.from_parquet(root, score_col="score", id_col="item", threshold=0.5)
    os.utime(root / "part-003.parquet", (1, 1))  # modification time does not matter
    again = DaskPopulation.from_parquet(root, score_col="score", id_col="item", threshold=0.5)
    assert fp.fingerprint() == again.fingerprint()
    other = DaskPopulation.from_parquet(root, score_col="score", id_col="item", threshold=0.6)
    assert other.fingerprint() != fp.fingerprint()
    changed = frame.iloc[30_000:40_000].copy()
    changed.loc[changed.index[0], "score"] = 1.5  # a new maximum: statistics change
    pq.write_table(
        pa.Table.from_pandas(changed, preserve_index=False),
        root / "part-003.parquet",
        row_group_size=4_000,
    )
    new = DaskPopulation.from_parquet(root, score_col="score", id_col="item", threshold=0.5)
    assert new.fingerprint() != fp.fingerprint()


@pytest.mark.parametrize(
    ("method", "variable", "n_strata"),
    [
        ("equal_size", "score", 10),
        ("equal_size", "confidence", (3, 7)),
        ("equal_size", "score", "auto"),
        ("equal_width", "confidence", 8),
    ],
)
def test_strata_equal_in_memory(pops, method, variable, n_strata):
    dp, mp = pops
    ds = dp.stratify_lazy(method=method, n_strata=n_strata, variable=variable)
    ms = be.stratify(mp, method=method, n_strata=n_strata, variable=variable)
    _same_strata(ds, ms)
    assignment = ds.assignment
    assert isinstance(assignment, dask.dataframe.Series)  # lazy, never computed on the driver
    np.testing.assert_array_equal(assignment.compute().to_numpy(), ms.assignment)
    pos = np.array([3, 77_777, 999_998])
    np.testing.assert_array_equal(ds.stratum_of(pos), ms.stratum_of(pos))


def test_a_small_side_is_capped_as_in_memory(tmp_path):
    """50 strata asked per side, 64 predicted positives: the Dask path caps that side at
    ceil(64 / 5) = 13 strata, as ``bayes_eval.strata.side_n_strata`` does in memory."""
    rng = np.random.default_rng(4)
    score = np.concatenate([rng.random(20_000) * 0.5, 0.5 + rng.random(64) * 0.5]).round(6)
    frame = pd.DataFrame({"item": np.arange(score.size), "score": score})
    root = _write(frame, str(tmp_path / "small"), [0, 9_000, score.size], 4_000)
    dp = DaskPopulation.from_parquet(root, score_col="score", id_col="item", threshold=0.5)
    ds = dp.stratify_lazy(method="equal_size", n_strata=50, variable="score")
    ms = be.stratify(be.Population(score, threshold=0.5), method="equal_size", n_strata=50)
    assert int(np.asarray(ds.predicted).sum()) == 13 and int((~ms.predicted).sum()) == 50
    _same_strata(ds, ms)


def test_stratify_dispatches_to_dask(pops):
    """``be.stratify`` on a Dask population runs ``stratify_lazy`` (needs the dispatch in
    strata.stratify)."""
    dp, mp = pops
    ds = be.stratify(dp, method="equal_size", n_strata=4, variable="score")
    assert isinstance(ds, DaskStrata)
    _same_strata(ds, be.stratify(mp, method="equal_size", n_strata=4))


def test_equal_size_nested_refinement(pops, monkeypatch):
    """Bins above COLLECT_LIMIT are re-binned (several passes); the edges stay exact."""
    dp, mp = pops
    monkeypatch.setattr(_stratify, "COLLECT_LIMIT", 40)
    monkeypatch.setattr(_stratify, "HIST_BINS", 64)
    ds = dp.stratify_lazy(method="equal_size", n_strata=9)
    _same_strata(ds, be.stratify(mp, method="equal_size", n_strata=9))


def test_density_methods_approximate(pops):
    """Other kernels run on a quantile sample of 2^20 values: boundaries approximate, N_k exact
    for those boundaries. Tolerance: a stratum moves by at most 1% of its side."""
    dp, mp = pops
    for method in ("cum_sqrt_f", "kmeans"):
        ds = dp.stratify_lazy(method=method, n_strata=5, rng=0)
        ms = be.stratify(mp, method=method, n_strata=5, rng=0)
        assert ds.n_strata == ms.n_strata and ds.sizes.sum() == N
        side = np.where(ms.predicted, ms.sizes[ms.predicted].sum(), ms.sizes[~ms.predicted].sum())
        assert np.all(np.abs(ds.sizes - ms.sizes) <= 0.01 * side), (ds.sizes, ms.sizes)
        counts = np.bincount(ds.assignment.compute().to_numpy(), minlength=ds.n_strata)
        np.testing.assert_array_equal(counts, ds.sizes)


def test_ties_repaired_and_too_many_strata(tmp_path):
    """Heavy ties: edges repaired from the distinct values as in memory; too many strata give
    one stratum per distinct value with the same warning."""
    rng = np.random.default_rng(3)
    score = rng.choice(
        [0.05, 0.1, 0.2, 0.3, 0.35, 0.9], size=20_000, p=[0.6, 0.1, 0.1, 0.1, 0.05, 0.05]
    )
    frame = pd.DataFrame({"id": np.arange(20_000), "score": score})
    root = _write(frame, str(tmp_path / "ties"), [0, 7_000, 20_000], 3_000)
    dp = DaskPopulation.from_parquet(root, score_col="score", id_col="id", threshold=0.5)
    mp = be.Population.from_parquet(root, score_col="score", id_col="id", threshold=0.5)
    _same_strata(dp.stratify_lazy(n_strata=(4, 1)), be.stratify(mp, n_strata=(4, 1)))
    # too many strata for the ties: one stratum per distinct value, with the same warning
    with pytest.warns(be.strata.FewerStrataWarning, match="n_strata=6 is more than the 5 distinct"):
        lazy = dp.stratify_lazy(n_strata=(6, 1))
    with pytest.warns(be.strata.FewerStrataWarning, match="n_strata=6 is more than the 5 distinct"):
        eager = be.stratify(mp, n_strata=(6, 1))
    assert lazy.n_strata == eager.n_strata == 6
    _same_strata(lazy, eager)


def _sequence(sampler):
    out = []
    for k, m in [(0, 7), (3, 150), (0, 400), (11, 5), (3, 90), (19, 30), (0, 1)]:
        out.append(sampler.draw(k, m))
    return np.concatenate(out)


def test_sampler_same_proposals_any_partitioning(pops, data):
    dp, mp = pops
    _, _, b = data
    other = DaskPopulation.from_parquet(
        b, score_col="score", id_col="item", threshold=0.5, rows_per_piece=150_000
    )
    assert other.n_pieces != dp.n_pieces
    s_a = dp.stratify_lazy(n_strata=10)
    s_b = other.stratify_lazy(n_strata=10)
    s_m = be.stratify(mp, n_strata=10)
    np.testing.assert_array_equal(s_a.sizes, s_b.sizes)
    samp_a = s_a.make_sampler(42, reservoir=64)  # small reservoir: forces refill passes
    samp_b = make_sampler(s_b, 42)
    assert isinstance(samp_b, DaskStratumSampler)
    seq_a, seq_b = _sequence(samp_a), _sequence(samp_b)
    seq_m = _sequence(KeyedStratumSampler(s_m, 42))
    np.testing.assert_array_equal(seq_a, seq_b)
    np.testing.assert_array_equal(seq_a, seq_m)
    assert samp_a.passes > samp_b.passes >= 1
    assert len(np.unique(seq_a)) == seq_a.size  # never proposed twice
    # another seed, another sample
    assert not np.array_equal(_sequence(s_a.make_sampler(43)), seq_a)
    # proposals come with their scores; skip continues the same order
    s2 = s_a.make_sampler(42)
    s2.skip(3, 10)
    ids, scores = s2.draw_with_scores(3, 5)
    ref = KeyedStratumSampler(s_m, 42)
    ref.skip(3, 10)
    np.testing.assert_array_equal(ids, ref.draw(3, 5))
    np.testing.assert_array_equal(scores, mp.scores_at(mp.positions_of(ids)))
    np.testing.assert_array_equal(s2.available(), s_a.sizes - np.eye(20, dtype=int)[3] * 15)
    with pytest.raises(ValueError, match="m=10000000 is more than"):
        s2.draw(0, 10_000_000)
    with pytest.raises(TypeError, match="materialise"):
        s_a.members(0)


def test_reservoir_cutoff_shortfall_is_repaired(pops, monkeypatch):
    """The key cutoff that pre-filters candidates can (with probability < 1e-9) leave too few;
    the sampler then re-runs the pass without cutoff. Force it with a cutoff of ~0."""
    dp, mp = pops
    monkeypatch.setattr(dask_strata, "_cutoff", lambda r, left, front: (front or 0) + 1)
    s_d = dp.stratify_lazy(n_strata=3)
    sampler = s_d.make_sampler(4, reservoir=32)
    got = [sampler.draw(k, 40) for k in range(s_d.n_strata)]
    assert sampler.passes >= 2
    ref = KeyedStratumSampler(be.stratify(mp, n_strata=3), 4)
    for k, ids in enumerate(got):
        np.testing.assert_array_equal(ids, ref.draw(k, 40))


def test_uniform_within_stratum(pops):
    """The Dask sampler's first 2000 proposals of a stratum are a uniform sample without
    replacement: their mean score and mean rank (population order) within the stratum match the
    stratum's to within 4 standard errors (sd / sqrt(n), times the finite-population factor)."""
    dp, mp = pops
    s_d, s_m = dp.stratify_lazy(n_strata=4), be.stratify(mp, n_strata=4)
    n, k = 2000, 1
    ids = s_d.make_sampler(123).draw(k, n)
    assert np.unique(ids).size == n
    members = s_m.members(k)
    fpc = np.sqrt(1 - n / members.size)
    scores = mp.scores[members]
    z = (mp.scores_at(mp.positions_of(ids)).mean() - scores.mean()) / (
        scores.std() / np.sqrt(n) * fpc
    )
    assert abs(z) < 4
    rank = np.searchsorted(members, mp.positions_of(ids)) / members.size
    assert abs(rank.mean() - 0.5) < 4 * fpc / np.sqrt(12 * n)


def test_string_ids_and_prediction_column(tmp_path):
    rng = np.random.default_rng(11)
    n = 30_000
    score = rng.random(n) ** 3
    frame = pd.DataFrame(
        {
            "uid": [f"doc-{i:06d}" for i in rng.permutation(n)],
            "s": score,
            "p": (rng.random(n) < score).astype(np.int8),
        }
    )
    root = _write(frame, str(tmp_path / "str"), [0, 10_000, 25_000, n], 4_000)
    dp = read_parquet(root, score_col="s", id_col="uid", prediction_col="p", engine="dask")
    mp = be.Population.from_parquet(root, score_col="s", id_col="uid", prediction_col="p")
    ds = dp.stratify_lazy(n_strata=4, variable="confidence")
    ms = be.stratify(mp, n_strata=4, variable="confidence")
    _same_strata(ds, ms)
    a, b = ds.make_sampler(5, reservoir=16), KeyedStratumSampler(ms, 5)
    for k in range(ds.n_strata):
        np.testing.assert_array_equal(a.draw(k, 40), b.draw(k, 40))


def test_estimate_same_posterior(pops, data):
    dp, mp = pops
    frame = data[0]
    ds, ms = dp.stratify_lazy(n_strata=5), be.stratify(mp, n_strata=5)
    sampler = ds.make_sampler(7)
    ids = np.concatenate([sampler.draw(k, 30) for k in range(ds.n_strata)])
    truth = frame.set_index("item")["label"]
    labels = (ids, truth.loc[ids].to_numpy())
    # the independent model: bit-identical (the pooled model's comparison is below, to 1e-7)
    post_d = be.estimate(ds, labels, draws=2000, rng=1, model="independent")
    post_m = be.estimate(ms, labels, draws=2000, rng=1, model="independent")
    for metric in ("precision", "recall"):
        assert post_d.mean(metric) == post_m.mean(metric)


@pytest.mark.parametrize("design", ["posterior_variance", "random"])
def test_audit_same_proposals_and_posterior(pops, data, tmp_path, design):
    """An Audit over the Dask population proposes the same ids and gives the same posterior as
    over the in-memory one, also after reopening its directory."""
    dp, mp = pops
    truth = data[0].set_index("item")["label"]
    ds, ms = dp.stratify_lazy(n_strata=4), be.stratify(mp, n_strata=4)
    np.testing.assert_allclose(
        ds.score_mean, [mp.scores[ms.members(k)].mean() for k in range(ms.n_strata)], rtol=1e-12
    )
    kw = {"metric": "f1", "design": design, "rng": 3, "draws": 2000, "model": "independent"}
    a_d = be.Audit(dp, strata=ds, path=tmp_path / "d", **kw)
    a_m = be.Audit(mp, strata=ms, **kw)
    for _ in range(3):
        ids_d, ids_m = a_d.propose(25), a_m.propose(25)
        np.testing.assert_array_equal(ids_d, ids_m)
        a_d.record(ids_d, truth.loc[ids_d].to_numpy())
        a_m.record(ids_m, truth.loc[ids_m].to_numpy())
    assert a_d.estimate(rng=1).mean("f1") == a_m.estimate(rng=1).mean("f1")
    del a_d
    again = be.Audit.open(tmp_path / "d", dp, strata=ds)
    np.testing.assert_array_equal(again.propose(10), a_m.propose(10))


def _same_profile(mem, out):
    """The in-memory and out-of-core score profiles agree up to the order of the sums."""
    assert out.kind == mem.kind and out.x.shape == mem.x.shape
    np.testing.assert_array_equal(out.sizes, mem.sizes)
    np.testing.assert_array_equal(out.predicted, mem.predicted)
    np.testing.assert_array_equal(out.weight > 0, mem.weight > 0)
    np.testing.assert_allclose(out.weight, mem.weight, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out.x, mem.x, rtol=1e-12, atol=1e-12)
    assert out.center == pytest.approx(mem.center, rel=1e-12, abs=1e-12)


class _Passes:
    """Counts the passes of PieceSet.reduce."""

    def __init__(self, monkeypatch):
        self.n = 0
        reduce = PieceSet.reduce

        def counted(piece_set, *args):
            self.n += 1
            return reduce(piece_set, *args)

        monkeypatch.setattr(PieceSet, "reduce", counted)


@pytest.mark.parametrize(
    ("variable", "n_strata"), [("score", 5), ("confidence", 12), ("score", (3, 40))]
)
def test_score_profile_same_as_in_memory(pops, monkeypatch, variable, n_strata):
    """The pooled model's score profile of Dask strata: one pass, then cached, and the profile
    the in-memory strata give (probability scores, 10^6 rows in 7 files)."""
    dp, mp = pops
    ds = dp.stratify_lazy(n_strata=n_strata, variable=variable)
    ms = be.stratify(mp, n_strata=n_strata, variable=variable)
    passes = _Passes(monkeypatch)
    prof = score_profile_of(ds)
    assert passes.n == 1
    _same_profile(profile_of_strata(ms), prof)
    assert prof.kind == "probability"
    assert score_profile_of(ds) is prof and passes.n == 1  # cached: no pass per batch
    with pytest.raises(AttributeError, match="does not hold its scores in memory"):
        dp.scores  # noqa: B018 - the in-memory path is never taken


def test_score_profile_exact_zero_and_one_scores(tmp_path):
    """A random forest's scores (steps of 0.01, most items exactly 0, a few exactly 1): the scan
    finds the smallest and largest score inside (0, 1) over all pieces, so the out-of-core
    profile reads the exact 0 and 1 as the in-memory one does (half a step beyond them)."""
    rng = np.random.default_rng(11)
    n = 20_000
    score = np.where(rng.random(n) < 0.7, 0.0, np.round(rng.beta(0.5, 2.0, n), 2))
    score[rng.choice(n, 30, replace=False)] = 1.0
    score[:12_000] = np.minimum(score[:12_000], 0.5)  # the largest inner score in a later file
    frame = pd.DataFrame({"id": np.arange(n), "score": score})
    root = _write(frame, str(tmp_path / "rf"), [0, 8_000, 12_000, n], 2_000)
    dp = DaskPopulation.from_parquet(root, score_col="score", id_col="id", threshold=0.5)
    mp = be.Population.from_parquet(root, score_col="score", id_col="id", threshold=0.5)
    ds, ms = dp.stratify_lazy(n_strata=6), be.stratify(mp, n_strata=6)
    prof = score_profile_of(ds)
    _same_profile(profile_of_strata(ms), prof)
    inner = score[(score > 0) & (score < 1)]
    assert prof.x.min() == pytest.approx(np.log(inner.min() / 2 / (1 - inner.min() / 2)))


def test_score_profile_margins(tmp_path, monkeypatch):
    """Margin scores: the exact median (even N: mean of the two middle values) and standard
    deviation, computed once per population; a constant population gives kind 'constant'."""
    rng = np.random.default_rng(5)
    n = 30_000
    score = np.round(rng.standard_t(4, n) * 2.0 + 0.3, 3)  # ties, heavy tails
    frame = pd.DataFrame({"id": rng.permutation(n), "score": score})
    root = _write(frame, str(tmp_path / "m"), [0, 8_000, 8_001, 19_000, n], 3_000)
    dp = DaskPopulation.from_parquet(
        root, score_col="score", id_col="id", threshold=0.0, rows_per_piece=5_000
    )
    mp = be.Population.from_parquet(root, score_col="score", id_col="id", threshold=0.0)
    passes = _Passes(monkeypatch)
    for n_strata in (4, 9):
        ds, ms = dp.stratify_lazy(n_strata=n_strata), be.stratify(mp, n_strata=n_strata)
        before = passes.n
        prof = score_profile_of(ds)
        # moments, median (N <= COLLECT_LIMIT: collected at once), profile; then one pass
        assert passes.n - before == (3 if n_strata == 4 else 1)
        _same_profile(profile_of_strata(ms), prof)
        assert prof.kind == "margin"
    med, sd = dp.margin_standardisation()
    assert med == np.median(score) and sd == pytest.approx(score.std(), rel=1e-13)
    flat = pd.DataFrame({"id": np.arange(100), "score": np.full(100, 0.25)})
    fp = DaskPopulation.from_parquet(
        _write(flat, str(tmp_path / "flat"), [0, 40, 100], 20), score_col="score", threshold=0.5
    )
    fm = be.Population(np.full(100, 0.25), threshold=0.5)
    prof = score_profile_of(fp.stratify_lazy(n_strata=1))
    _same_profile(profile_of_strata(be.stratify(fm, n_strata=1)), prof)
    assert prof.kind == "constant"


def test_pooled_estimate_same_posterior(pops, data):
    """``be.estimate(..., model="pooled")`` on Dask strata: the in-memory posterior."""
    dp, mp = pops
    truth = data[0].set_index("item")["label"]
    ds, ms = dp.stratify_lazy(n_strata=5), be.stratify(mp, n_strata=5)
    sampler = ds.make_sampler(7)
    ids = np.concatenate([sampler.draw(k, 30) for k in range(ds.n_strata)])
    labels = (ids, truth.loc[ids].to_numpy())
    post_d = be.estimate(ds, labels, model="pooled", draws=2000, rng=1)
    post_m = be.estimate(ms, labels, model="pooled", draws=2000, rng=1)
    # the profiles differ in the last bits (sums in another order); the hyper-fit's stopping
    # tolerance turns that into ~1e-9 relative differences (4e-9 measured), not bit equality
    for metric in ("precision", "recall"):
        assert post_d.mean(metric) == pytest.approx(post_m.mean(metric), rel=1e-7)


def test_pooled_audit_same_proposals_and_posterior(pops, data, tmp_path):
    """A pooled-model Audit over the Dask population proposes the same ids and gives the same
    posterior as over the in-memory one, also after reopening its directory."""
    dp, mp = pops
    truth = data[0].set_index("item")["label"]
    ds, ms = dp.stratify_lazy(n_strata=4), be.stratify(mp, n_strata=4)
    kw = {"metric": "f1", "design": "posterior_variance", "model": "pooled", "rng": 3}
    a_d = be.Audit(dp, strata=ds, path=tmp_path / "d", draws=2000, **kw)
    a_m = be.Audit(mp, strata=ms, draws=2000, **kw)
    for _ in range(3):
        ids_d, ids_m = a_d.propose(25), a_m.propose(25)
        np.testing.assert_array_equal(ids_d, ids_m)
        a_d.record(ids_d, truth.loc[ids_d].to_numpy())
        a_m.record(ids_m, truth.loc[ids_m].to_numpy())
    f1_d, f1_m = a_d.estimate(rng=1).mean("f1"), a_m.estimate(rng=1).mean("f1")
    assert f1_d == pytest.approx(f1_m, rel=1e-7)
    del a_d
    again = be.Audit.open(tmp_path / "d", dp, strata=ds)
    np.testing.assert_array_equal(again.propose(10), a_m.propose(10))


def test_local_cluster(data):
    from distributed import Client, LocalCluster

    _, a, _ = data
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dp = read_parquet(
            a, score_col="score", id_col="item", threshold=0.5, engine="dask", client=client
        )
        ds = dp.stratify_lazy(n_strata=6)
        got = ds.make_sampler(9).draw(2, 25)
    mp = be.Population.from_parquet(a, score_col="score", id_col="item", threshold=0.5)
    ms = be.stratify(mp, n_strata=6)
    _same_strata(ds, ms)
    np.testing.assert_array_equal(got, KeyedStratumSampler(ms, 9).draw(2, 25))


def test_bad_input(tmp_path):
    frame = pd.DataFrame(
        {
            "id": np.arange(100),
            "score": np.linspace(0, 1, 100),
            "name": [f"x{i}" for i in range(100)],
        }
    )
    good = _write(frame, str(tmp_path / "good"), [0, 50, 100], 20)
    with pytest.raises(ValueError, match="score_col='prob' is not a column"):
        DaskPopulation.from_parquet(good, score_col="prob", threshold=0.5)
    with pytest.raises(ValueError, match="id_col='key' is not a column"):
        read_parquet(good, score_col="score", id_col="key", threshold=0.5, engine="dask")
    with pytest.raises(TypeError, match=r"score column 'name' has type (large_)?string"):
        DaskPopulation.from_parquet(good, score_col="name", threshold=0.5)
    with pytest.raises(ValueError, match="exactly one of threshold= and prediction_col="):
        DaskPopulation.from_parquet(good, score_col="score")
    with pytest.raises(ValueError, match="does not exist"):
        DaskPopulation.from_parquet(tmp_path / "nowhere", score_col="score", threshold=0.5)
    dup = pd.concat([frame.iloc[:60], frame.iloc[55:]])  # ids 55..59 in both files
    root = _write(dup, str(tmp_path / "dup"), [0, 60, 105], 20)
    with pytest.raises(ValueError, match=r"ids must be unique; id 5[5-9] occurs more than once"):
        DaskPopulation.from_parquet(root, score_col="score", id_col="id", threshold=0.5)
    interleaved = frame.iloc[np.r_[0:100:2, 1:100:2]]  # overlapping ranges, no duplicate
    ok = DaskPopulation.from_parquet(
        _write(interleaved, str(tmp_path / "il"), [0, 50, 100], 20),
        score_col="score",
        id_col="id",
        threshold=0.5,
    )
    assert ok.size == 100
    nan = frame.assign(score=frame["score"].where(frame["id"] != 70))
    with pytest.raises(ValueError, match="non-finite value nan"):
        DaskPopulation.from_parquet(
            _write(nan, str(tmp_path / "nan"), [0, 50, 100], 20), score_col="score", threshold=0.5
        )
    with pytest.raises(ValueError, match="method='quantile' is not one of"):
        ok.stratify_lazy(method="quantile")
    # the engine dispatch: read_parquet names the engines; Population.from_parquet reads in
    # memory only and says where the Dask engine is
    with pytest.raises(ValueError, match="engine='spark' is not one of the allowed values"):
        read_parquet(good, score_col="score", threshold=0.5, engine="spark")
    with pytest.raises(ValueError, match=r"engine='dask' is not read by Population.from_parquet"):
        be.Population.from_parquet(good, score_col="score", threshold=0.5, engine="dask")
    with pytest.raises(ValueError, match=r"client=.* needs engine='dask'"):
        read_parquet(good, score_col="score", threshold=0.5, client=object())


def test_old_module_path_still_imports():
    """``bayes_eval.dask_population`` (the pre-split module) re-exports the same classes."""
    assert dask_population.DaskPopulation is DaskPopulation
    assert dask_population.DaskStrata is DaskStrata
    assert dask_population.DaskStratumSampler is DaskStratumSampler
