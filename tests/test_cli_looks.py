"""The CLI's looks (issue 18): JSON output, corrected by default, pre-registration, the look
schedule, record options, --version/-h and pair-recall --delta-1."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayes_eval.cli import app
from bayes_eval.ledger import LEDGER_NAME, read_ledger

runner = CliRunner()
N = 3000
#: a small, coarse calibration: these tests check what is shown and logged, not the level
SIMS = ("--n-sims", "100", "--max-mcse", "0.05")


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def ok(*args):
    res = run(*args)
    assert res.exit_code == 0, res.output
    return res


def as_json(*args):
    return json.loads(ok(*args).stdout)


def flat(text: str) -> str:
    """Text of a rich panel as one line (box characters and wrapping removed)."""
    return " ".join(re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫]", " ", text).split())


def one_error(res, *fragments):
    assert res.exit_code in (1, 2), res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A scored population (CSV, string ids) and its hidden truth."""
    root = tmp_path_factory.mktemp("looks")
    rng = np.random.default_rng(7)
    scores = rng.beta(0.6, 2.0, size=N)
    ids = [f"doc-{i:05d}" for i in range(N)]
    pd.DataFrame({"doc": ids, "p": scores}).to_csv(root / "s.csv", index=False)
    truth = dict(zip(ids, (rng.random(N) < scores).astype(int).tolist(), strict=True))
    return root, truth


def _init(world, name, *extra):
    root, _ = world
    audit = root / name
    ok("init", audit, "--scores", root / "s.csv", "--score-col", "p", "--id-col", "doc",
       "--threshold", "0.5", "--strata", "3", "--seed", "0", *extra)  # fmt: skip
    return audit


def _propose(world, audit, n):
    root, _ = world
    ok("next", audit, "-n", n, "--out", root / "batch.csv")
    return pd.read_csv(root / "batch.csv", dtype={"id": str})


def _record(world, audit, batch, name="labels.csv"):
    root, truth = world
    frame = pd.DataFrame({"id": batch["id"], "label": [truth[i] for i in batch["id"]]})
    frame.to_csv(root / name, index=False)
    return ok("record", audit, root / name)


def _looks_in_ledger(audit):
    records, _, _ = read_ledger(audit / LEDGER_NAME)
    return [r["data"] for r in records if r.get("type") == "event" and r.get("event") == "look"]


def test_precision_only_audit_marks_prior_only_metrics(world):
    audit = _init(world, "prec", "--metric", "precision", "--target", "0.3", "--level", "0.9",
                  "--design", "proportional")  # fmt: skip
    batch = _propose(world, audit, 60)
    positive_side = batch[batch["score"] >= 0.5]  # label only predicted positives
    assert 0 < len(positive_side) < len(batch)
    _record(world, audit, positive_side)
    doc = as_json("status", audit, "--json")
    metrics = doc["metrics"]
    assert metrics["precision"]["prior_only"] is False
    for name in ("recall", "f1", "accuracy"):
        assert metrics[name]["prior_only"] is True, name
    assert set(doc["prior_only"]) >= {"recall", "f1", "accuracy"}
    assert set(metrics["precision"]) >= {"mean", "lower", "upper", "prior_only"}
    # the human table says so too, and the look is in the ledger
    text = ok("status", audit).stdout
    assert "prior only" in text
    assert [look["command"] for look in _looks_in_ledger(audit)] == ["status", "status"]


@pytest.fixture(scope="module")
def three_looks(world):
    """An f1 audit with three record calls (three looks), claim f1 >= 0.3 at 0.9."""
    audit = _init(world, "three", "--metric", "f1", "--target", "0.3", "--level", "0.9",
                  "--design", "proportional", "--batch-size", "20", "--budget", "200")  # fmt: skip
    for _ in range(3):
        _record(world, audit, _propose(world, audit, 20))
    return audit


def test_certify_is_corrected_by_default_after_several_looks(three_looks, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # room for the whole progress line off a terminal
    res = ok("certify", three_looks, "--json", *SIMS)
    doc = json.loads(res.stdout)
    # real progress of the calibration on stderr: a count of simulated batches and a rate
    m = re.search(
        r"calibration \(100 sims/truth\).*?([\d,]+)/([\d,]+) ([\d,.]+) batches/s", res.stderr
    )
    assert m and m.group(1) == m.group(2) and int(m.group(1).replace(",", "")) > 1, res.stderr
    again = ok("certify", three_looks, "--json", *SIMS)  # the same correction: from the cache
    assert "reused from the cache" in again.stderr
    assert json.loads(again.stdout)["verdict"]["level_used"] == doc["verdict"]["level_used"]
    v = doc["verdict"]
    assert v["corrected"] is True and v["looks"] == 3
    assert v["claim_matches_preregistered"] is True
    assert v["level"] == 0.9 and v["target"] == 0.3 and v["metric"] == "f1"
    assert v["level_used"] > 0.9  # the correction raised the nominal level
    assert v["correction"]["schedule"] == "planned"
    assert v["correction"]["worst_case_truth"]["name"]
    # one lower bound, the one the decision used, in the headline
    assert len(re.findall(r"lower bound", v["headline"])) == 1
    assert f"{v['lower_bound']:.4f}" in v["headline"]
    assert doc["preregistered_claim"] == {
        "metric": "f1", "target": 0.3, "level": 0.9, "batch_size": 20, "budget": 200,
        "looks": "every-batch",
    }  # fmt: skip
    # --uncorrected: the verdict itself says UNCORRECTED
    v = as_json("certify", three_looks, "--json", "--uncorrected")["verdict"]
    assert v["corrected"] is False and v["level_used"] == 0.9
    assert "UNCORRECTED for 3 looks" in v["headline"]
    assert "UNCORRECTED for 3 looks" in flat(ok("certify", three_looks, "--uncorrected").stdout)


def test_changed_claim_is_flagged_and_logged(three_looks):
    before = len(_looks_in_ledger(three_looks))
    doc = as_json("certify", three_looks, "--json", "--target", "0.25", "--level", "0.8", *SIMS)
    v = doc["verdict"]
    assert v["claim_matches_preregistered"] is False
    assert "differs from the pre-registered claim" in v["headline"]
    looks = _looks_in_ledger(three_looks)
    assert len(looks) == before + 1
    last = looks[-1]
    assert last["command"] == "certify" and last["claim_matches"] is False
    assert last["target"] == 0.25 and last["level"] == 0.8 and last["n_labels"] == 60
    tried = doc["looks_logged"]["claims_tried"]
    assert "f1 >= 0.25 at level 0.8" in tried
    # the human verdict says it too; the JSON has no NaN anywhere (strict JSON)
    res = ok("certify", three_looks, "--target", "0.25", "--level", "0.8", *SIMS)
    assert "differs from the pre-registered claim" in flat(res.stdout)
    json.loads(ok("status", three_looks, "--json").stdout, parse_constant=pytest.fail)


def test_one_look_is_not_corrected(world):
    audit = _init(world, "single", "--target", "0.3", "--design", "proportional")
    _record(world, audit, _propose(world, audit, 20))
    v = as_json("certify", audit, "--json")["verdict"]
    assert v["corrected"] is False and v["looks"] == 1 and "UNCORRECTED" not in v["headline"]


def test_looks_beyond_the_schedule_recalibrate(world, monkeypatch):
    """20-item batches recorded in pieces of 5: 8 looks where 2 were planned; the correction is
    recalibrated for the actual looks, never silently reused."""
    audit = _init(world, "pieces", "--target", "0.3", "--level", "0.9",
                  "--design", "proportional", "--batch-size", "20", "--budget", "200")  # fmt: skip
    for _ in range(2):
        batch = _propose(world, audit, 20)
        for k in range(4):
            _record(world, audit, batch.iloc[5 * k : 5 * k + 5], name=f"piece{k}.csv")
    res = ok("certify", audit, "--json", *SIMS)
    v = json.loads(res.stdout)["verdict"]
    assert v["looks"] == 8 and v["corrected"] is True
    corr = v["correction"]
    assert corr["schedule"] == "actual looks"
    assert corr["looks"] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert "not all looks of the planned schedule" in res.stderr
    # a recalibration too fine to simulate is refused, naming the mismatch (never reused)
    from bayes_eval.cli import _looks

    monkeypatch.setattr(_looks, "MAX_SIMULATED_BATCHES", 4)
    one_error(
        run("certify", audit, *SIMS), "8 actual looks at 5, 10, 15", "refusing", "--uncorrected"
    )
    monkeypatch.undo()
    # the planned schedule, when followed, is used as planned (checked above); a pure subset
    # of planned looks (looking less often) keeps it too
    audit2 = _init(world, "sparse", "--target", "0.3", "--level", "0.9",
                   "--design", "proportional", "--batch-size", "20", "--budget", "200")  # fmt: skip
    _record(world, audit2, _propose(world, audit2, 20))
    _record(world, audit2, _propose(world, audit2, 40), name="two.csv")
    corr = as_json("certify", audit2, "--json", *SIMS)["verdict"]["correction"]
    assert corr["schedule"] == "planned" and corr["looks"] is None


def test_record_options(world):
    root, truth = world
    audit = _init(world, "rec")
    batch = _propose(world, audit, 12)
    ids = list(batch["id"])
    # TSV with other column names
    pd.DataFrame({"item": ids[:4], "y": [truth[i] for i in ids[:4]]}).to_csv(
        root / "l.tsv", sep="\t", index=False
    )
    one_error(run("record", audit, root / "l.tsv"), "l.tsv", "'item'", "--id-col")
    one_error(run("record", audit, root / "l.tsv", "--id-col", "item", "--label-col", "lab"),
              "--label-col 'lab'", "columns are ['item', 'y']")  # fmt: skip
    res = ok("record", audit, root / "l.tsv", "--id-col", "item", "--label-col", "y")
    assert "recorded 4 new label(s)" in res.stdout
    # JSON Lines, labels as booleans
    lines = [json.dumps({"doc": i, "ok": bool(truth[i])}) for i in ids[4:8]]
    (root / "l.jsonl").write_text("\n".join(lines) + "\n")
    res = ok("record", audit, root / "l.jsonl", "--id-col", "doc", "--label-col", "ok")
    assert "8 labels in total" in res.stdout
    (root / "bad.jsonl").write_text('{"id": "x", "label": 1}\n[1, 2]\n')
    one_error(run("record", audit, root / "bad.jsonl"), "bad.jsonl", "line 2", "JSON list")
    (root / "bad2.jsonl").write_text(json.dumps({"id": ids[8], "label": 2}) + "\n")
    one_error(run("record", audit, root / "bad2.jsonl"), "line 1", "label '2'", "0 or 1")
    # annotators: kept in the ledger's label records
    pd.DataFrame({"id": ids[8:], "label": [truth[i] for i in ids[8:]], "who": "ann-1"}).to_csv(
        root / "a.csv", index=False
    )
    pd.DataFrame({"id": ids[8:], "label": [truth[i] for i in ids[8:]], "who": ""}).to_csv(
        root / "a_blank.csv", index=False
    )
    one_error(run("record", audit, root / "a_blank.csv", "--annotator-col", "who"),
              "line 2", "empty --annotator-col 'who'")  # fmt: skip
    one_error(
        run("record", audit, root / "a.csv", "--annotator-col", "whom"), "--annotator-col 'whom'"
    )
    assert as_json("status", audit, "--json")["n_labels"] == 8  # rejected input changed nothing
    ok("record", audit, root / "a.csv", "--annotator-col", "who")
    records, _, _ = read_ledger(audit / LEDGER_NAME)
    labelled = [r for r in records if r.get("type") == "label"]
    assert len(labelled) == 12
    assert [r.get("annotator") for r in labelled] == [None] * 8 + ["ann-1"] * 4


def test_version_and_short_help():
    from importlib.metadata import version

    import bayes_eval

    res = ok("--version")
    assert res.stdout.strip() == f"bayes-eval {version('bayes-eval')}"
    assert bayes_eval.__version__ == version("bayes-eval")
    assert "Usage" in ok("-h").stdout
    assert "--json" in ok("status", "-h").stdout


def test_pair_recall_delta_range():
    base = ("pair-recall", "--size-1", "1000", "--size-2", "800", "--size-12", "300",
            "--labels-1", "40/50", "--labels-2", "35/50", "--labels-12", "45/50",
            "--draws", "2000")  # fmt: skip
    res = ok(*base, "--delta-1", "0.8,1.25")
    text = " ".join(res.stdout.split())
    assert "recall_1 over delta_1 in [0.8, 1.25]: worst-case 0.95 lower bound" in text
    one_error(run(*base, "--delta-1", "2,1"), "--delta-1 '2,1'", "LO > HI")
    one_error(run(*base, "--delta-1", "x"), "--delta-1 'x'", "allowed")
    one_error(run(*base, "--delta-1", "0"), "--delta-1 '0'", "allowed")


def test_progress_bars_survive_a_removed_bar(capsys):
    """A step with nothing to count (a cached calibration) is replaced by a line; the bars
    after it still update (ids are not list indices once a bar is removed)."""
    from bayes_eval.cli._progress import bars

    with bars() as b:
        cached = b.add("calibration", total=None)
        b.finish(cached, none_done="reused from the cache")
        task = b.add("report", total=3, unit="looks")
        for done in range(1, 4):
            b.callback(task)(done, 3)
        b.advance(task, 0)
        b.finish(task)
    err = capsys.readouterr().err
    assert "calibration: reused from the cache" in err
    assert "3/3" in err


def test_a_look_that_cannot_be_logged_is_an_error(world):
    """While another writer holds the lock, status/certify refuse (one line naming the pid)
    rather than look without a record in the ledger."""
    import os

    from bayes_eval.cli._directory import _open

    audit = _init(world, "busy", "--target", "0.3")
    writer = _open(audit, write=True)  # holds the writer lock, as a running `record` would
    try:
        for cmd in (("status", audit), ("certify", audit, "--json")):
            one_error(run(*cmd), "could not be recorded in the ledger", str(os.getpid()))
    finally:
        writer.audit.close()
    assert _looks_in_ledger(audit) == []
    ok("status", audit)
    assert [look["command"] for look in _looks_in_ledger(audit)] == ["status"]


def test_audit_without_a_preregistered_claim(world):
    """An audit directory without a claim in its ledger (as older releases wrote them) still
    opens: no claim to compare with (null), the planned schedule from cli.json, looks logged."""
    import shutil

    import bayes_eval as be
    from bayes_eval.cli._directory import _load_population

    root, _ = world
    made = _init(world, "claimed", "--target", "0.3", "--design", "proportional",
                 "--budget", "200")  # fmt: skip
    meta = json.loads((made / "cli.json").read_text())
    pop = _load_population(meta["population"])
    strata = be.stratify(pop, method="equal_size", n_strata=3, rng=0)
    old = root / "old"
    a = be.Audit(pop, strata=strata, metric="f1", design="proportional", rng=0, path=old)
    a.close()
    shutil.copy(made / "cli.json", old / "cli.json")
    for _ in range(2):
        _record(world, old, _propose(world, old, 20))
    doc = as_json("status", old, "--json")
    assert doc["preregistered_claim"] is None and doc["rule"]["claim_matches_preregistered"] is None
    v = as_json("certify", old, "--json", *SIMS)["verdict"]
    assert v["corrected"] is True and v["claim_matches_preregistered"] is None
    assert v["correction"]["schedule"] == "planned"
    assert [look["claim_matches"] for look in _looks_in_ledger(old)] == [None, None]
