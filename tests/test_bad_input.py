"""A table of bad inputs (issue 16): each names the argument or flag as typed and the bad value,
prints one ``error:`` line (CLI), and leaves the audit directory byte-identical."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import bayes_eval as be
from bayes_eval.cli import app

runner = CliRunner()
N = 400


def _snapshot(directory):
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(5)
    scores = rng.random(N)
    pd.DataFrame({"id": np.arange(N), "p": scores, "name": [f"n{i}" for i in range(N)]}).to_csv(
        root / "s.csv", index=False
    )
    (root / "empty.csv").write_text("")
    (root / "header.csv").write_text("id,p\n")
    (root / "latin1.csv").write_bytes("id,p\n1,0.5\n\xe9t\xe9,0.2\n".encode("latin-1"))
    (root / "bad.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    (root / "text.csv").write_text("id,p\n1,high\n2,0.3\n")
    (root / "nan.csv").write_text("id,p\n1,0.2\n2,\n3,0.3\n")
    (root / "inf.csv").write_text("id,p\n1,0.2\n2,0.4\n3,inf\n")
    (root / "pred.csv").write_text("id,p,yhat\n1,0.2,0\n2,0.4,2\n3,0.3,1\n")
    (root / "dup.csv").write_text("id,p\na,0.2\nb,0.4\na,0.3\n")
    pd.DataFrame({"p": [0.2, np.nan, 0.3]}).to_parquet(root / "nan.parquet")
    (root / "x.xlsx").write_text("")
    (root / "out_dir").mkdir()
    (root / "plain_dir").mkdir()
    aud = root / "aud"
    base = ("--score-col", "p", "--id-col", "id", "--threshold", "0.5", "--strata", "2")
    res = runner.invoke(
        app, ["init", str(aud), "--scores", str(root / "s.csv"), *base, "--target", "0.3"]
    )
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(app, ["next", str(aud), "-n", "4", "--out", str(root / "b.csv")])
    assert res.exit_code == 0, res.stderr
    first = int(pd.read_csv(root / "b.csv")["id"].iloc[0])
    spare = min(set(range(N)) - set(pd.read_csv(root / "b.csv")["id"]))  # never proposed
    (root / "l1.csv").write_text(f"id,label\n{first},1\n")
    assert runner.invoke(app, ["record", str(aud), str(root / "l1.csv")]).exit_code == 0
    labels = {
        "missing.csv": None,
        "lempty.csv": "",
        "lheader.csv": "id,label\n",
        "lcols.csv": "item,y\n1,1\n",
        "ltwo.csv": f"id,label\n{first},2\n",
        "lyes.csv": f"id,label\n{first},yes\n",
        "lthree.csv": f"id,label\n{first},1,extra\n",
        "lemptyid.csv": "id,label\n,1\n",
        "lexp.csv": f"id,label\n{first}e0,1\n",
        "lfloat.csv": f"id,label\n{first}.0,1\n",
        "lpad.csv": f"id,label\n00{first},1\n",
        "lunknown.csv": "id,label\n987654,1\n",
        "lnotproposed.csv": f"id,label\n{spare},1\n",
        "lconflict.csv": f"id,label\n{first},0\n",
    }
    for name, text in labels.items():
        if text is not None:
            (root / name).write_text(text)
    (root / "llatin.csv").write_bytes(b"id,label\n\xe9,1\n")
    return root, first


INIT = ("--score-col", "p", "--threshold", "0.5")
PR = ("pair-recall", "--size-1", "10", "--size-2", "10", "--size-12", "5")
PRL = (*PR, "--labels-1", "3/5", "--labels-2", "3/5", "--labels-12", "2/5")

# (command line with NEW = a fresh audit path, AUD = the audit, R/ = the fixture root), and the
# fragments the one error line must contain: the flag/argument as typed and the bad value
CLI_CASES = [
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--metric", "bogus"), ["--metric", "bogus"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--engine", "spark"), ["--engine", "spark"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--design", "best"), ["--design", "best"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--method", "magic"), ["--method", "magic"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--level", "1.5"), ["--level", "1.5"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--level", "0"), ["--level", "0"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--batch-size", "0"), ["--batch-size", "0"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--budget", "0"), ["--budget", "0"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--target", "1.5"), ["--target", "1.5"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--strata", "0"), ["--strata", "0"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--strata", "100000000000"),
     ["--strata", "100000000000"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--seed", "-1"), ["--seed", "-1"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--prior", "3,x"), ["--prior", "3,x"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--prior", "0,1"), ["--prior", "0,1"]),
    # a Beta prior the default (pooled) model would not use: refused, never ignored
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--prior", "uniform"),
     ["--prior", "uniform", "--model", "pooled"]),
    (("init", "NEW", "--scores", "R/s.csv", "--score-col", "nope", "--threshold", "0.5"),
     ["--score-col", "nope"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--id-col", "nope"), ["--id-col", "nope"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--id-col", "p"), ["--id-col", "'p'"]),
    (("init", "NEW", "--scores", "R/none.csv", *INIT), ["--scores", "none.csv"]),
    (("init", "NEW", "--scores", "R/x.xlsx", *INIT), ["--scores", ".xlsx"]),
    (("init", "NEW", "--scores", "R/empty.csv", *INIT), ["--scores", "empty.csv", "empty"]),
    (("init", "NEW", "--scores", "R/header.csv", *INIT), ["--scores", "header.csv", "no rows"]),
    (("init", "NEW", "--scores", "R/latin1.csv", *INIT, "--id-col", "id"),
     ["--scores", "latin1.csv", "UTF-8"]),
    (("init", "NEW", "--scores", "R/bad.parquet", *INIT), ["--scores", "bad.parquet", "Parquet"]),
    (("init", "NEW", "--scores", "R/text.csv", *INIT), ["--score-col", "'high'"]),
    (("init", "NEW", "--scores", "R/s.csv", "--score-col", "p"), ["--threshold"]),
    # the population's own checks, naming the flag, the file and (CSV) the line
    (("init", "NEW", "--scores", "R/nan.csv", *INIT),
     ["--score-col 'p'", "nan.csv", "line 3", "nan"]),
    (("init", "NEW", "--scores", "R/inf.csv", *INIT),
     ["--score-col 'p'", "inf.csv", "line 4", "inf"]),
    (("init", "NEW", "--scores", "R/nan.parquet", *INIT),
     ["--score-col 'p'", "nan.parquet", "nan"]),
    (("init", "NEW", "--scores", "R/pred.csv", "--score-col", "p", "--prediction-col", "yhat"),
     ["--prediction-col 'yhat'", "pred.csv", "value 2", "line 3"]),
    (("init", "NEW", "--scores", "R/dup.csv", *INIT, "--id-col", "id"),
     ["--id-col 'id'", "dup.csv", "'a'", "unique"]),
    (("init", "NEW", "--scores", "R/s.csv", "--score-col", "p", "--threshold", "nan"),
     ["--threshold=nan"]),
    (("init", "NEW", "--scores", "R/s.csv", *INIT, "--prediction-col", "id"),
     ["--threshold", "--prediction-col"]),
    (("init", "AUD", "--scores", "R/s.csv", *INIT), ["aud", "already exists"]),
    (("next", "AUD", "-n", "0"), ["-n", "0"]),
    (("next", "AUD", "-n", "5000000000"), ["-n", "5000000000"]),
    (("next", "AUD", "-n", "999999"), ["-n 999999", "never proposed", "allowed: -n 1 to"]),
    (("next", "AUD", "-n", "3", "--out", "R/out_dir"), ["--out", "out_dir", "directory"]),
    (("next", "AUD", "-n", "3", "--out", "R/nodir/b.csv"), ["--out", "nodir"]),
    (("next", "R/none_audit", "-n", "3"), ["none_audit", "does not exist"]),
    (("next", "R/plain_dir", "-n", "3"), ["plain_dir", "not an audit directory"]),
    (("record", "AUD", "R/missing.csv"), ["missing.csv", "does not exist"]),
    (("record", "AUD", "R/lempty.csv"), ["lempty.csv", "empty"]),
    (("record", "AUD", "R/lheader.csv"), ["lheader.csv", "no rows"]),
    (("record", "AUD", "R/lcols.csv"), ["lcols.csv", "'item'", "id,label"]),
    (("record", "AUD", "R/ltwo.csv"), ["ltwo.csv", "line 2", "'2'", "0 or 1"]),
    (("record", "AUD", "R/lyes.csv"), ["lyes.csv", "'yes'"]),
    (("record", "AUD", "R/lthree.csv"), ["lthree.csv", "row 2", "3 fields"]),
    (("record", "AUD", "R/lemptyid.csv"), ["lemptyid.csv", "empty id"]),
    (("record", "AUD", "R/lexp.csv"), ["lexp.csv", "e0'"]),
    (("record", "AUD", "R/lfloat.csv"), ["lfloat.csv", ".0'"]),
    (("record", "AUD", "R/lpad.csv"), ["lpad.csv", "'00"]),
    (("record", "AUD", "R/lunknown.csv"), ["--id-col 'id'", "lunknown.csv", "unknown id 987654"]),
    (("record", "AUD", "R/lnotproposed.csv"),
     ["--id-col 'id'", "lnotproposed.csv", "never proposed", "bayes-eval next"]),
    (("record", "AUD", "R/lconflict.csv"), ["already has label 1", "label 0 conflicts"]),
    (("record", "AUD", "R/llatin.csv"), ["llatin.csv", "UTF-8"]),
    (("status", "R/none_audit"), ["none_audit"]),
    (("certify", "AUD", "--n-sims", "0"), ["--n-sims", "0"]),
    (("certify", "AUD", "--n-sims", "999999999"), ["--n-sims", "999999999"]),
    (("certify", "AUD", "--max-mcse", "0"), ["--max-mcse=0.0", "(0, 0.5)"]),
    (("certify", "AUD", "--max-mcse", "nan"), ["--max-mcse", "nan"]),
    (("report", "AUD", "--out", "R/r.html", "--max-mcse", "0.5"), ["--max-mcse", "0.5"]),
    (("certify", "AUD", "--n-jobs", "0"), ["--n-jobs", "0", "-1 (one per CPU)"]),
    (("report", "AUD", "--out", "R/r.html", "--n-jobs", "-2"), ["--n-jobs", "-2", "1 to 1,024"]),
    (("report", "AUD", "--out", "R/r.pdf"), ["--out", ".pdf"]),
    (("report", "AUD", "--out", "R/nodir/r.html"), ["--out", "nodir"]),
    (("report", "AUD", "--out", "R/out_dir", "--n-sims", "0"), ["--n-sims", "0"]),
    ((*PRL, "--draws", "1000000000"), ["--draws", "1000000000"]),
    ((*PRL, "--draws", "0"), ["--draws", "0"]),
    ((*PRL, "--seed", "-1"), ["--seed", "-1"]),
    ((*PR, "--labels-1", "3/x"), ["--labels-1", "3/x"]),
    ((*PR, "--labels-1", "3"), ["--labels-1", "'3'"]),
    # pair_recall's own checks, naming the flags as typed
    (("pair-recall", "--size-1", "10", "--size-2", "10", "--size-12", "20", *PRL[7:]),
     ["--size-12=20", "min(--size-1, --size-2)"]),
    (("pair-recall", "--size-1", "-1", "--size-2", "10", "--size-12", "5", *PRL[7:]),
     ["--size-1=-1"]),
    ((*PR, "--labels-1", "6/5", "--labels-2", "3/5", "--labels-12", "2/5"),
     ["--labels-1 6/5", "exceed"]),
    ((*PRL, "--universe", "12"), ["--universe=12", "--size-1 + --size-2 - --size-12"]),
    ((*PR, "--precision-1", "1.5", "--labels-2", "3/5", "--labels-12", "2/5"),
     ["--precision-1=1.5"]),
    ((*PRL, "--level", "1"), ["--level=1.0"]),
    (("demo", "--n-sims", "0"), ["--n-sims", "0"]),
    (("demo", "--strata", "0"), ["--strata", "0"]),
    (("demo", "--n-jobs", "1025"), ["--n-jobs", "1025", "1 to 1,024"]),
    (("demo", "--target", "1.5"), ["--target", "1.5"]),
    (("demo", "--budget", "0"), ["--budget", "0"]),
    (("demo", "--out", "R/r.pdf"), ["--out", ".pdf"]),
    (("demo", "--design", "nope"), ["--design", "'nope'", "posterior_variance"]),
    (("demo", "--max-mcse", "0"), ["--max-mcse", "0.0"]),
    (("demo", "--audit-dir", "R/nodir/a"), ["--audit-dir", "nodir", "does not exist"]),
    (("demo", "--audit-dir", "R/s.csv"), ["--audit-dir", "s.csv", "not a directory"]),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "fragments"), CLI_CASES, ids=lambda v: " ".join(v)[:60])
def test_cli_bad_input(world, tmp_path, argv, fragments):
    root, _ = world
    aud = root / "aud"
    new = tmp_path / "new"
    args = [
        str(new)
        if a == "NEW"
        else str(aud)
        if a == "AUD"
        else str(root / a[2:])
        if a.startswith("R/")
        else a
        for a in argv
    ]
    before = _snapshot(aud)
    res = runner.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert _snapshot(aud) == before
    assert not new.exists() or not any(p.name != "lock" for p in new.iterdir())


def test_cli_usage_error_is_one_line(world):
    root, _ = world
    res = runner.invoke(app, ["next", str(root / "aud"), "-n", "2.5"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    # one line naming the flag as typed and the value given
    assert len(lines) == 1 and lines[0].startswith("error: -n '2.5': "), lines
    assert "integer" in lines[0]
    for argv in (["-n2.5"], ["--n=2.5"], ["--n", "2.5"]):
        res = runner.invoke(app, ["next", str(root / "aud"), *argv])
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and "'2.5'" in lines[0], lines
        assert lines[0].startswith("error: -n '2.5'" if argv[0].startswith("-n") else "error: --n")


# ---------------------------------------------------------------------- the Python API
@pytest.fixture(scope="module")
def api(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    rng = np.random.default_rng(2)
    pop = be.Population(rng.random(N), threshold=0.5, ids=np.arange(N) * 3)
    strata = be.stratify(pop, n_strata=2)
    audit = be.Audit(pop, strata=strata, design="random", rng=1, draws=200, path=root / "a")
    ids = audit.propose(4)
    audit.record(ids[:2], [1, 0])
    return root / "a", pop, strata, audit, ids


def _api_cases():
    def c(name, fragments, fn):
        return pytest.param(fn, fragments, id=name)

    return [
        c("record unknown id", ["ids", "7"], lambda a, p, s, ids: a.record([7], [1])),
        c("record label 2", ["labels", "2"], lambda a, p, s, ids: a.record(ids[2:3], [2])),
        c("record str id", ["ids", "'x'"], lambda a, p, s, ids: a.record(["x"], [1])),
        c("record shape", ["labels"], lambda a, p, s, ids: a.record(ids[2:4], [1])),
        c("record ids set", ["ids", "type set", "ordered sequence"],
          lambda a, p, s, ids: a.record(set(ids[2:4].tolist()), [1, 0])),
        c("record ids generator", ["ids", "type generator"],
          lambda a, p, s, ids: a.record((i for i in ids[2:4]), [1, 0])),
        c("record labels set", ["labels", "type set"],
          lambda a, p, s, ids: a.record(ids[2:4], {1, 0})),
        c("record labels dict", ["labels", "type dict"],
          lambda a, p, s, ids: a.record(ids[2:4], {ids[2]: 1, ids[3]: 0})),
        c("estimate pair with a set", ["ids of labels", "type set"],
          lambda a, p, s, ids: be.estimate(s, (set(ids[:2].tolist()), [1, 0]))),
        c("calibration rate above 1", ["rates contains 1.5", "position 0", "in [0, 1]"],
          lambda a, p, s, ids: be.calibrate_sequential(
              s, rates=[1.5] * s.n_strata, budget=100, n_sims=100, rng=0)),
        c("calibration rate not a number", ["rates=['high'", "'pilot', 'prior'"],
          lambda a, p, s, ids: be.calibrate_sequential(
              s, rates=["high"] * s.n_strata, budget=100, n_sims=100, rng=0)),
        c("Accept rate above 1", ["rates contains 1.5", "'planning'", "in [0, 1]"],
          lambda a, p, s, ids: be.stop.Accept(0.7, rates=[1.5] * s.n_strata)),
        c("correction rates of another length", ["rates has shape (2,)", "per-stratum"],
          lambda a, p, s, ids: be.sequential.correction_for(
              a.procedure(budget=100, batch_size=20), target=0.7, rates=[0.5, 0.5])),
        c("worst-case calibration rate above 1", ["rates contains 1.5", "in [0, 1]"],
          lambda a, p, s, ids: be.sequential.calibrate_worst_case(
              s, target=0.7, rates=[1.5] * s.n_strata, budget=100, n_sims=100, rng=0)),
        c("worst-case calibration target 1", ["target=1.0", "open interval (0, 1)"],
          lambda a, p, s, ids: be.sequential.calibrate_worst_case(
              s, target=1.0, budget=100, n_sims=100, rng=0)),
        c("worst-case calibration pilot h > n", ["pilot has n=1, h=2 in stratum 0"],
          lambda a, p, s, ids: be.sequential.calibrate_worst_case(
              s, target=0.7, pilot=([1] * s.n_strata, [2] * s.n_strata), budget=100,
              n_sims=100, rng=0)),
        c("calibration truth_metric 2", ["truth_metric=2.0", "[0, 1]"],
          lambda a, p, s, ids: be.calibrate_sequential(
              s, target=0.7, truth_metric=2.0, budget=100, n_sims=100, rng=0)),
        c("truth family rate above 1", ["score_rates contains 1.9", "position 3"],
          lambda a, p, s, ids: be.sequential.truth_family(
              [100] * 4, [0, 0, 1, 1], metric="f1", target=0.7,
              score_rates=[0.1, 0.2, 0.7, 1.9])),
        c("estimate pooled keyword typo", ["'hyperprior'", "model='pooled'", "'hyperpriors'"],
          lambda a, p, s, ids: be.estimate(s, (ids[:2], [1, 0]), hyperprior=None)),
        c("Hyperpriors nan", ["floor_sd=nan", "finite real number"],
          lambda a, p, s, ids: be.models.pooled.Hyperpriors(floor_sd=float("nan"))),
        c("options for a design that takes none", ["design 'random' takes no options", "['x']"],
          lambda a, p, s, ids: be.Audit(p, strata=s, design="random", design_options={"x": 1})),
        c("LowerBoundAbove above 1", ["target=2.0", "[0, 1]"],
          lambda a, p, s, ids: be.stop.LowerBoundAbove(2.0)),
        c("AllOf of no rule", ["AllOf() has no rule", "one or more"],
          lambda a, p, s, ids: be.stop.AllOf()),
        c("estimate prior -1", ["prior a", "-1.0", "> 0"],
          lambda a, p, s, ids: be.estimate(s, prior=(-1.0, 1.0), model="independent")),
        c("propose 0", ["n", "0"], lambda a, p, s, ids: a.propose(0)),
        c("propose 2.5", ["n", "2.5"], lambda a, p, s, ids: a.propose(2.5)),
        c("conflict", ["already has label 1", "label 0 conflicts"], lambda a, p, s, ids: a.record(ids[:1], [0])),  # noqa: E501
        c("draws 0", ["draws", "0"], lambda a, p, s, ids: be.Audit(p, strata=s, draws=0)),
        c("metric", ["metric", "bogus"], lambda a, p, s, ids: be.Audit(p, strata=s, metric="bogus")),  # noqa: E501
        c("model", ["model", "nope"], lambda a, p, s, ids: be.Audit(p, strata=s, model="nope")),
        c("prior unused by pooled", ["prior", "uniform", "model='pooled'"],
          lambda a, p, s, ids: be.Audit(p, strata=s, prior="uniform")),
        c("estimate prior unused by pooled", ["prior", "beta", "model='pooled'"],
          lambda a, p, s, ids: be.estimate(s, (ids[:2], [1, 0]), prior=(2.0, 5.0))),
        c("design", ["design", "best"], lambda a, p, s, ids: be.Audit(p, strata=s, design="best")),
        c("rng -1", ["rng", "-1"], lambda a, p, s, ids: be.Audit(p, strata=s, rng=-1)),
        c("finite_population", ["finite_population", "'yes'"],
          lambda a, p, s, ids: be.Audit(p, strata=s, finite_population="yes")),
        c("uint64 ids", ["ids", "9223372036854775813"],
          lambda a, p, s, ids: be.Population([0.1, 0.2], threshold=0.5,
                                             ids=np.array([1, 2**63 + 5], dtype=np.uint64))),
        c("mixed ids", ["ids", "int", "str"],
          lambda a, p, s, ids: be.Population([0.1, 0.2], threshold=0.5, ids=["a", 1])),
        c("threshold nan", ["threshold", "nan"],
          lambda a, p, s, ids: be.Population([0.1, 0.2], threshold=float("nan"))),
        c("positions_of", ["ids", "5"], lambda a, p, s, ids: p.positions_of([5])),
        c("labels without ids", ["ids of labels", "pair (ids, labels)"],
          lambda a, p, s, ids: be.estimate(s, [1, 0])),
        c("Accept max_mcse 0", ["max_mcse", "0", "(0, 0.5)"],
          lambda a, p, s, ids: be.stop.Accept(0.5, corrected=True, max_mcse=0)),
        c("Accept max_mcse nan", ["max_mcse", "nan"],
          lambda a, p, s, ids: be.stop.Accept(0.5, corrected=True, max_mcse=float("nan"))),
        c("Accept uncorrected max_mcse", ["max_mcse", "-1"],
          lambda a, p, s, ids: be.stop.Accept(0.5, corrected=False, max_mcse=-1)),
        c("open other pop", ["population", "fingerprint"],
          lambda a, p, s, ids: be.Audit.open(a.path, be.Population(np.linspace(0, 1, N),
                                                                   threshold=0.5))),
    ]  # fmt: skip


@pytest.mark.parametrize(("fn", "fragments"), _api_cases())
def test_api_bad_input(api, fn, fragments):
    path, pop, strata, audit, ids = api
    before = _snapshot(path)
    state = (audit.n_labels, audit.n_proposed, audit.pending.tolist())
    with pytest.raises((ValueError, TypeError)) as info:
        fn(audit, pop, strata, ids)
    for frag in fragments:
        assert frag in str(info.value), (frag, str(info.value))
    assert _snapshot(path) == before
    assert (audit.n_labels, audit.n_proposed, audit.pending.tolist()) == state
