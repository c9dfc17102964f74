"""The stored arrays of an audit directory (issue 16's speed): the same proposals as the in-memory
audit, refused when incomplete, a changed population file still detected, older directories
still open, and proposing/recording from them without pandas, xarray or scipy."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import bayes_eval as be
from bayes_eval.audit._store import STORE_DIR, open_store, write_store
from bayes_eval.cli import app
from bayes_eval.cli._directory import batch_csv
from bayes_eval.population import SortedIds

runner = CliRunner()


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def _population(kind: str, n: int = 6000):
    rng = np.random.default_rng(3)
    scores = rng.random(n)
    ids = {
        "default": None,
        "int": np.arange(n, dtype=np.int64) * 7 - 5000,
        "str": np.array([f"doc-{i:05d}" for i in rng.permutation(n)]),
    }[kind]
    return be.Population(scores, threshold=0.5, ids=ids), rng.random(n) < scores


@pytest.mark.parametrize("kind", ["default", "int", "str"])
@pytest.mark.parametrize("design", ["proportional", "posterior_variance"])
def test_stored_audit_proposes_exactly_what_the_in_memory_audit_does(tmp_path, kind, design):
    pop, truth = _population(kind)
    strata = be.stratify(pop, n_strata=4)
    twin = be.Audit(pop, strata=strata, metric="f1", design=design, rng=9)
    path = tmp_path / "a"
    with be.Audit(pop, strata=strata, metric="f1", design=design, rng=9, path=path) as a:
        assert write_store(path, pop, strata, a.seed)
        for audit in (a, twin):
            ids = audit.propose(30)
            audit.record(ids, truth[pop.positions_of(ids)])
    store = open_store(path)
    assert store is not None and store.population.fingerprint() == pop.fingerprint()
    assert isinstance(store.population.scores, np.memmap | np.ndarray)
    with be.Audit.open(path, store.population, strata=store.strata) as b:
        assert b.labels().equals(twin.labels())
        for _ in range(3):
            got, want = b.propose(25), twin.propose(25)
            assert np.array_equal(got, want)
            b.record(got, truth[pop.positions_of(got)])
            twin.record(want, truth[pop.positions_of(want)])
        pos = store.population.positions_of(got)
        assert np.array_equal(pos, pop.positions_of(got))
        assert np.array_equal(store.strata.stratum_of(pos), strata.stratum_of(pos))
        assert b.estimate().mean("f1") == twin.estimate().mean("f1")
    with pytest.raises(ValueError, match="unknown id"):
        store.population.positions_of(np.asarray(["nope"] if kind == "str" else [10**12]))
    # the stored strata describe themselves as the in-memory ones do (one shared repr/dataset)
    assert store.strata.to_dataset().identical(strata.to_dataset())
    assert repr(store.strata) == "Stored" + repr(strata)


@pytest.mark.parametrize(
    "damage", ["truncate order", "drop ids file", "bad json", "foreign format", "no store"]
)
def test_incomplete_or_foreign_store_is_not_used(tmp_path, damage):
    pop, _ = _population("int", 2000)
    strata = be.stratify(pop, n_strata=3)
    assert write_store(tmp_path, pop, strata, 1)
    store = tmp_path / STORE_DIR
    if damage == "truncate order":
        data = (store / "order.npy").read_bytes()
        (store / "order.npy").write_bytes(data[:-8])
    elif damage == "drop ids file":
        (store / "ids_sorted.npy").unlink()
    elif damage == "bad json":
        (store / "store.json").write_text("{")
    elif damage == "foreign format":
        (store / "store.json").write_text('{"format": "other"}')
    else:
        for f in store.iterdir():
            f.unlink()
        store.rmdir()
    assert open_store(tmp_path) is None


def test_dask_like_populations_are_not_stored(tmp_path):
    pop, _ = _population("default", 500)

    class Wrapped:  # not an in-memory Population: read as before, never stored
        pass

    assert not write_store(tmp_path, Wrapped(), be.stratify(pop, n_strata=2), 0)
    assert not (tmp_path / STORE_DIR).exists()


def _init(tmp_path, n=3000, model=None):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"id": np.arange(n) * 3 + 1, "p": rng.random(n)})
    scores = tmp_path / "s.csv"
    frame.to_csv(scores, index=False, float_format="%.6f")
    audit = tmp_path / "audit"
    res = _cli("init", audit, "--scores", scores, "--score-col", "p", "--id-col", "id",
               "--threshold", "0.5", "--strata", "3", "--design", "proportional",
               *(["--model", model] if model else []))  # fmt: skip
    assert res.exit_code == 0, res.output
    return audit, scores


def _next(audit, out):
    res = _cli("next", audit, "-n", "6", "--out", out)
    assert res.exit_code == 0, res.output
    return pd.read_csv(out)


def test_cli_stores_arrays_and_an_old_directory_still_opens_and_continues(tmp_path):
    audit, _ = _init(tmp_path)
    twin = tmp_path / "twin"
    first = _next(audit, tmp_path / "b.csv")
    assert open_store(audit) is not None  # written at init, or by the first writer command
    shutil.copytree(audit, twin)
    shutil.rmtree(twin / STORE_DIR)  # as written by a release without stored arrays
    a, b = _next(audit, tmp_path / "b1.csv"), _next(twin, tmp_path / "b2.csv")
    assert a.equals(b) and not a["id"].isin(first["id"]).any()
    assert open_store(twin) is not None  # the writer stored the arrays again
    labels = tmp_path / "l.csv"
    pd.DataFrame({"id": a["id"], "label": (a["score"] > 0.3).astype(int)}).to_csv(
        labels, index=False
    )
    for d in (audit, twin):
        assert _cli("record", d, labels).exit_code == 0
        assert _cli("status", d).exit_code == 0


def test_changed_population_file_is_refused_touched_one_is_not(tmp_path):
    audit, scores = _init(tmp_path)
    _next(audit, tmp_path / "b.csv")
    st = scores.stat()
    os.utime(scores, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same bytes
    _next(audit, tmp_path / "b.csv")
    text = scores.read_text()
    last = "1" if text[-2] != "1" else "2"
    scores.write_text(text[:-2] + last + "\n")  # the last score's last digit
    res = _cli("next", audit, "-n", "3")
    assert res.exit_code == 1
    assert "changed since init" in res.stderr


_NO_HEAVY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from bayes_eval.cli import app  # what every command imports
    from bayes_eval.cli._directory import _open, batch_csv
    opened = _open(Path(sys.argv[1]), write=True)
    audit, pop = opened.audit, opened.population
    ids = audit.propose(5)
    pos = pop.positions_of(ids)
    text = batch_csv(pop.ids_at(pos), pop.scores_at(pos), audit.strata.stratum_of(pos))
    audit.record(ids, [1, 0, 1, 0, 1])
    allowed = set(sys.argv[2].split()) if len(sys.argv) > 2 else set()
    roots = ("pandas", "xarray", "scipy", "arviz_stats")
    heavy = sorted(
        m for m in sys.modules
        if m.split(".")[0] in roots and m.count(".") <= 1 and not m.split(".")[-1].startswith("_")
        and m not in allowed and m not in ("scipy.version",)
    )
    print(len(text.splitlines()), audit.n_labels, heavy)
    """
)


#: what ``import numba`` loads of scipy by itself (its version check imports the bare package,
#: and loading a cached kernel imports ``scipy.linalg.cython_blas`` for numba's linear algebra):
#: allowed under the pooled model; every other scipy module (scipy.special, ...) is not
_NUMBA_SCIPY = "scipy scipy.linalg"

_MODELS = ["independent", "pooled"]


@pytest.mark.parametrize("model", _MODELS)
def test_proposing_and_recording_from_the_store_import_no_pandas_xarray_scipy(tmp_path, model):
    audit, _ = _init(tmp_path, model=model)
    _next(audit, tmp_path / "b.csv")  # the store exists from here on
    allowed = _NUMBA_SCIPY if model == "pooled" else ""
    res = subprocess.run(
        [sys.executable, "-c", _NO_HEAVY, str(audit), allowed],
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.split() == ["6", "5", "[]"], res.stdout + res.stderr


@pytest.mark.parametrize("ids", [np.array([7, -3, 12]), np.array(["a,b", 'say "hi"', "plain"])])
def test_batch_csv_is_what_pandas_writes(ids):
    scores = np.array([0.1234567890123, 1e-7, 0.5])
    strata = np.array([0, 2, 1])
    want = pd.DataFrame({"id": ids, "score": scores, "stratum": strata}).to_csv(
        index=False, float_format="%.10g"
    )
    got = batch_csv(ids, scores, strata)
    assert got == want
    assert list(csv.reader(io.StringIO(got)))[1][0] == str(ids[0])


def test_sorted_id_index_agrees_with_pandas():
    rng = np.random.default_rng(0)
    ids = rng.choice(10**9, size=5000, replace=False)
    query = np.concatenate([ids[:50], rng.integers(0, 10**9, 50), [-1, 10**10]])
    index = SortedIds.build(ids)
    assert np.array_equal(index.get_indexer(query), pd.Index(ids).get_indexer(query))


def test_package_import_is_lazy_and_has_a_version():
    code = (
        "import sys, bayes_eval as be; "
        "print(be.__version__, [m for m in ('numpy', 'pandas', 'xarray') if m in sys.modules]); "
        "be.Audit; print('numpy' in sys.modules, 'xarray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    version, loaded = out[0].split(" ", 1)
    assert version[0].isdigit() and loaded == "[]"
    assert out[1] == "True False"  # the audit needs numpy, never xarray
    assert set(be.__all__) <= set(dir(be))


def test_read_parquet_is_public_and_reads_a_population(tmp_path):
    from bayes_eval.parquet import read_parquet

    assert "read_parquet" in be.__all__ and be.read_parquet is read_parquet
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame({"score": [0.1, 0.7, 0.4, 0.9]}).to_parquet(tmp_path / "p.parquet")
    pop = be.read_parquet(tmp_path / "p.parquet", score_col="score", threshold=0.5)
    assert pop.size == 4 and pop.predictions_at(np.arange(4)).tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("dtype", ["<i8", "<f8", "|b1", "<i4", "<U7"])
def test_reading_few_items_of_a_memory_map_equals_numpy_indexing(tmp_path, dtype):
    from bayes_eval._mapped import searchsorted, take, take_range

    rng = np.random.default_rng(2)
    if dtype == "<U7":
        arr = np.array(sorted(f"k{i:05d}" for i in rng.choice(99999, 3000, replace=False)))
    else:
        arr = np.sort(rng.integers(-1000, 1000, 3000)).astype(dtype)
    np.save(tmp_path / "a.npy", arr)
    mm = np.load(tmp_path / "a.npy", mmap_mode="r")
    pos = rng.integers(-3000, 3000, 50)
    assert np.array_equal(take(mm, pos), arr[pos])
    assert np.array_equal(take_range(mm, 17, 123), arr[17:123])
    assert np.array_equal(take_range(mm, 2990, 4000), arr[2990:])
    query = arr[rng.integers(0, 3000, 40)]
    if dtype != "|b1":
        outside = np.array(["a", "z"] if dtype == "<U7" else [-5000, 5000], dtype=dtype)
        query = np.concatenate([query, arr[:3], arr[-1:], outside])
        assert np.array_equal(searchsorted(mm, query), np.searchsorted(arr, query))
    with pytest.raises(IndexError, match="out of bounds"):
        take(mm, [3000])


_CLI_NO_HEAVY = textwrap.dedent(
    """
    import sys
    from bayes_eval.cli import app
    try:
        app(sys.argv[1:])
    except SystemExit as exc:
        assert not exc.code, exc.code
    allowed = set(ALLOWED.split())
    roots = ("pandas", "xarray", "scipy", "arviz_stats")
    heavy = sorted(
        m for m in sys.modules
        if m.split(".")[0] in roots and m.count(".") <= 1 and not m.split(".")[-1].startswith("_")
        and m not in allowed and m not in ("scipy.version",)
    )
    print("HEAVY", heavy, file=sys.stderr)
    """
)


@pytest.mark.parametrize("model", _MODELS)
def test_cli_next_and_record_import_no_pandas_xarray_scipy(tmp_path, model):
    audit, _ = _init(tmp_path, model=model)
    _next(audit, tmp_path / "b0.csv")  # the store exists from here on
    allowed = _NUMBA_SCIPY if model == "pooled" else ""
    run = [sys.executable, "-c", f"ALLOWED = {allowed!r}\n" + _CLI_NO_HEAVY]
    batch, labels = tmp_path / "b.csv", tmp_path / "l.csv"
    res = subprocess.run([*run, "next", str(audit), "-n", "4", "--out", str(batch)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "HEAVY []" in res.stderr, res.stderr
    rows = list(csv.DictReader(io.StringIO(batch.read_text())))
    labels.write_text("id,label\n" + "".join(f"{r['id']},1\n" for r in rows))
    res = subprocess.run([*run, "record", str(audit), str(labels)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "HEAVY []" in res.stderr and "4 new label(s)" in res.stdout, res.stdout + res.stderr


# ------------------------------------------------------------------ --model and the stored profile
def test_init_model_is_recorded_used_and_named(tmp_path):
    from bayes_eval.ledger import read_manifest

    audit, _ = _init(tmp_path, model="pooled")
    assert read_manifest(audit)["model"] == "pooled"
    assert json.loads((audit / "cli.json").read_text())["model"] == "pooled"
    _next(audit, tmp_path / "b.csv")
    res = _cli("status", audit, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["model"] == "pooled" and doc["prior"] == "pooled hyperpriors"  # no Beta prior
    assert "model pooled" in _cli("status", audit).stdout
    res = _cli("certify", audit, "--target", "0.2", "--uncorrected", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["model"] == "pooled"
    (tmp_path / "d").mkdir()
    default, _ = _init(tmp_path / "d")
    assert read_manifest(default)["model"] == be.models.DEFAULT_MODEL


def test_init_refuses_an_unknown_model_and_writes_nothing(tmp_path):
    scores = tmp_path / "s.csv"
    scores.write_text("p\n0.1\n0.7\n")
    res = _cli("init", tmp_path / "a", "--scores", scores, "--score-col", "p",
               "--threshold", "0.5", "--model", "bogus")  # fmt: skip
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for word in ("--model", "bogus", "independent", "pooled", "hierarchical"):
        assert word in lines[0], lines[0]
    assert not (tmp_path / "a").exists()


def _profile_arrays(prof):
    return [prof.x, prof.weight, prof.sizes, prof.predicted, prof.kind, prof.center]


def _same_profile(a, b):
    for u, v in zip(_profile_arrays(a), _profile_arrays(b), strict=True):
        assert np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v


def _no_scan(monkeypatch):
    """Make computing a score profile an error (what a stored profile must avoid)."""
    import bayes_eval.models._profile as prof_mod

    calls = []

    def refuse(*args, **kwargs):
        calls.append(1)
        raise AssertionError("the score profile was computed, not read from the store")

    monkeypatch.setattr(prof_mod, "score_profile", refuse)  # the O(N) pass itself
    return calls


def test_pooled_profile_is_stored_at_init_and_read_by_later_commands(tmp_path, monkeypatch):
    from bayes_eval.cli._directory import _open
    from bayes_eval.models._profile import profile_of_strata

    audit, _ = _init(tmp_path, model="pooled")
    assert (audit / STORE_DIR / "profile.json").is_file()
    store = open_store(audit)
    want = profile_of_strata(be.stratify(store.population, n_strata=3))
    _same_profile(store.strata.score_profile, want)
    _no_scan(monkeypatch)
    for write in (True, False):  # next/record, and status (estimate)
        opened = _open(audit, write=write)
        if write:
            ids = opened.audit.propose(6)
            opened.audit.record(ids, [1, 0, 1, 0, 0, 1])
        else:
            assert opened.audit.estimate(draws=200).n_labels == 6
        opened.audit.close()
    for command in (("status", audit), ("next", audit, "-n", "3")):
        res = _cli(*command)
        assert res.exit_code == 0, res.output


def test_old_directory_computes_the_profile_once_and_stores_it(tmp_path, monkeypatch):
    from bayes_eval.cli._directory import _open

    audit, _ = _init(tmp_path, model="pooled")
    _next(audit, tmp_path / "b.csv")
    files = sorted((audit / STORE_DIR).glob("profile*"))
    want = open_store(audit).strata.score_profile
    for f in files:  # as written by the previous release: stored arrays, no profile
        f.unlink()
    assert open_store(audit).strata.score_profile is None
    opened = _open(audit)  # a reader computes it, and writes nothing
    _same_profile(opened.audit.strata.score_profile, want)
    assert not (audit / STORE_DIR / "profile.json").exists()
    opened = _open(audit, write=True)  # the first writer stores it
    opened.audit.close()
    assert sorted((audit / STORE_DIR).glob("profile*")) == files
    calls = _no_scan(monkeypatch)
    _next(audit, tmp_path / "b2.csv")
    assert calls == []


def test_a_damaged_or_foreign_profile_is_not_used(tmp_path):
    audit, _ = _init(tmp_path, model="pooled")
    good = open_store(audit).strata.score_profile
    (audit / STORE_DIR / "profile_x.npy").write_bytes(b"torn")
    assert open_store(audit).strata.score_profile is None
    from bayes_eval.audit._store import write_profile

    write_profile(audit / STORE_DIR, good)
    assert open_store(audit).strata.score_profile is not None
    meta = json.loads((audit / STORE_DIR / "profile.json").read_text())
    meta["recipe"]["bins"] = 128  # made by another recipe: made again
    (audit / STORE_DIR / "profile.json").write_text(json.dumps(meta))
    assert open_store(audit).strata.score_profile is None


# ------------------------------------------------------------------ the design priors' memo
def _pooled_audit(tmp_path, rounds=4):
    pop, truth = _population("int", 4000)
    strata = be.stratify(pop, n_strata=3)
    kw = {"strata": strata, "metric": "f1", "design": "posterior_variance", "rng": 5}
    twin = be.Audit(pop, model="pooled", **kw)
    with be.Audit(pop, model="pooled", path=tmp_path / "a", **kw) as audit:
        for _ in range(rounds):
            for a in (audit, twin):
                ids = a.propose(15)
                a.record(ids, truth[pop.positions_of(ids)])
    return pop, strata, twin


def test_reopening_a_pooled_audit_takes_the_design_priors_from_the_memo(tmp_path, monkeypatch):
    from bayes_eval.audit import _audit
    from bayes_eval.audit._memo import MEMO_NAME

    pop, strata, twin = _pooled_audit(tmp_path)
    memo = tmp_path / "a" / MEMO_NAME
    assert len(memo.read_text().splitlines()) == 1 + 4  # header + the state of every proposal
    want = twin.design_state()

    def refuse(*args, **kwargs):
        raise AssertionError("the model was fitted again")

    with monkeypatch.context() as m:
        m.setattr(_audit, "design_prior", refuse)
        with be.Audit.open(tmp_path / "a", pop, strata=strata, read_only=True) as b:
            assert b.n_labels == twin.n_labels  # the replay fitted nothing
        memo.unlink()
        with pytest.raises(AssertionError, match="fitted again"):
            be.Audit.open(tmp_path / "a", pop, strata=strata)
    with be.Audit.open(tmp_path / "a", pop, strata=strata) as c:  # refits, and keeps them again
        state = c.design_state()
        assert np.array_equal(state.prior_a, want.prior_a)
        assert np.array_equal(state.prior_b, want.prior_b)
        assert np.array_equal(c.propose(15), twin.propose(15))
    assert len(memo.read_text().splitlines()) == 1 + 5


def test_a_damaged_or_foreign_memo_only_means_fitting_again(tmp_path):
    from bayes_eval.audit._memo import MEMO_NAME

    pop, strata, twin = _pooled_audit(tmp_path, rounds=3)
    memo = tmp_path / "a" / MEMO_NAME
    lines = memo.read_text().splitlines()
    lines[2] = lines[2][:40]  # a damaged line
    memo.write_text("\n".join(lines) + '\n{"n": [1,')  # and a torn last one
    with be.Audit.open(tmp_path / "a", pop, strata=strata) as b:
        assert np.array_equal(b.propose(15), twin.propose(15))
    rows = [json.loads(x) for x in memo.read_text().splitlines()[3:] if x.startswith('{"n":[')]
    assert len(rows) >= 2  # the refitted state and the new proposal's, after the torn line
    foreign = json.loads(memo.read_text().splitlines()[0])
    foreign["manifest_sha256"] = "0" * 64
    memo.write_text(json.dumps(foreign) + "\n" + "\n".join(memo.read_text().splitlines()[1:]))
    with be.Audit.open(tmp_path / "a", pop, strata=strata) as c:
        assert np.array_equal(c.propose(15), twin.propose(15))
    assert json.loads(memo.read_text().splitlines()[0])["manifest_sha256"] != "0" * 64
