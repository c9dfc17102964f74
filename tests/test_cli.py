"""The bayes-eval command line: audit round trips, user errors, the demo."""

from __future__ import annotations

import base64
import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from bayes_eval.cli import CLI_FILE, app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def flat(text: str) -> str:
    """Text of a rich panel or table as one line (box characters and wrapping removed)."""
    return " ".join(re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫]", " ", text).split())


def assert_user_error(result, match: str) -> None:
    """Exit status 1, exactly one line on stderr starting with 'error:', no traceback."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert re.search(match, lines[0]), lines[0]
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def population_frame():
    """3,000 items with string ids, calibrated scores and their (hidden) truth."""
    rng = np.random.default_rng(2024)
    scores = rng.beta(0.6, 2.0, size=3000)
    truth = rng.random(3000) < scores
    ids = [f"doc-{i:05d}" for i in range(3000)]
    return pd.DataFrame({"doc": ids, "p": scores}), dict(zip(ids, truth.astype(int), strict=True))


@pytest.fixture
def parquet_file(population_frame, tmp_path):
    frame, _ = population_frame
    path = tmp_path / "scores.parquet"
    frame.to_parquet(path)
    return path


def _init(audit, scores, *extra: str):
    return run(
        "init",
        audit,
        "--scores",
        scores,
        "--score-col",
        "p",
        "--id-col",
        "doc",
        "--threshold",
        "0.5",
        "--metric",
        "f1",
        "--target",
        "0.3",
        "--level",
        "0.9",
        "--design",
        "proportional",
        "--strata",
        "3",
        "--method",
        "equal_size",
        "--seed",
        "0",
        "--budget",  # a 200-label plan: ten looks to simulate, not a hundred
        "200",
        *extra,
    )


def test_init_suggests_a_first_batch_within_the_budget(parquet_file, tmp_path):
    """A budget below one batch cuts the first batch: the suggested ``next -n`` says so."""
    res = _init(tmp_path / "a", parquet_file, "--batch-size", "20", "--budget", "10")
    assert res.exit_code == 0, res.output
    assert "-n 10 --out batch.csv" in res.stdout
    res = _init(tmp_path / "b", parquet_file, "--batch-size", "20")
    assert "-n 20 --out batch.csv" in res.stdout


def test_init_says_how_the_pooled_model_reads_the_scores(population_frame, tmp_path):
    """Session 32: one score outside [0, 1] makes the pooled model read every score as a margin
    (no calibration anchor); ``init`` says which reading it took, and the range (session 34: in
    the words ``status`` and the report use, one helper)."""
    frame, _ = population_frame
    frame.to_parquet(tmp_path / "p.parquet")
    res = _init(tmp_path / "a", tmp_path / "p.parquet", "--model", "pooled")
    assert res.exit_code == 0, res.output
    assert "scores read as probabilities (the calibration curve anchored" in flat(res.stdout)
    odd = frame.copy()
    odd.loc[7, "p"] = 1.5
    odd.to_parquet(tmp_path / "m.parquet")
    res = _init(tmp_path / "b", tmp_path / "m.parquet", "--model", "pooled")
    assert res.exit_code == 0, res.output
    assert "scores read as margins (not all within [0, 1]" in flat(res.stdout)
    assert "; the scores run from " in flat(res.stdout)
    assert "to 1.5" in flat(res.stdout)
    res = _init(tmp_path / "c", tmp_path / "p.parquet", "--model", "independent")
    assert "scores read as" not in res.stdout
    flat_scores = frame.assign(p=0.25)
    flat_scores.to_parquet(tmp_path / "f.parquet")
    res = _init(
        tmp_path / "d", tmp_path / "f.parquet", "--model", "pooled", "--threshold", "0.2",
        "--strata", "1",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (
        "scores read as one constant score (no information in the scores); every score is 0.25"
        in flat(res.stdout)
    )
    # session 33: ``status`` says it too (text and JSON), for the pooled model only; the
    # constant scores' warning is one ``warning:`` line, not Python's file-and-source format
    for audit, reading in (("a", "probabilities (the"), ("b", "margins (not all"), ("d", "one ")):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            res = run("status", str(tmp_path / audit))
            assert res.exit_code == 0, res.output
            assert f"scores read as {reading}" in flat(res.stdout)
            res = run("status", str(tmp_path / audit), "--json")
        assert json.loads(res.stdout)["scores_read_as"].startswith(reading)
        if audit == "d":
            assert res.stderr.splitlines() == [
                "warning: pooled model: every score is equal: the scores carry no information, "
                "so rates are pooled within each predicted side (UninformativeScoresWarning)"
            ]
        else:
            assert res.stderr == ""
    res = run("status", str(tmp_path / "c"), "--json")
    assert json.loads(res.stdout)["scores_read_as"] is None
    assert "scores read as" not in run("status", str(tmp_path / "c")).stdout


def test_init_refuses_a_metric_the_threshold_leaves_undefined(parquet_file, tmp_path):
    """Session 33: ``--threshold 7`` on probabilities predicts nothing positive, so precision is
    undefined: one error line naming the flags, the highest score and what is allowed, and no
    directory. A metric that stays defined (F1, then 0 once any positive exists) is created with
    a one-line warning on stderr."""
    base = ("--scores", parquet_file, "--score-col", "p", "--id-col", "doc")
    res = run("init", tmp_path / "a", *base, "--threshold", "7", "--metric", "precision")
    assert_user_error(
        res,
        r"--metric precision is undefined: no item is predicted positive \(--threshold 7 is "
        r"above every score, the highest 0\.\d+\); allowed: a --threshold at or below 0\.\d+, "
        r"or --metric recall, f1",
    )
    assert not (tmp_path / "a").exists()
    res = run("init", tmp_path / "b", *base, "--threshold", "0", "--metric", "npv")
    assert_user_error(res, r"--metric npv is undefined: no item is predicted negative")
    assert not (tmp_path / "b").exists()
    res = run("init", tmp_path / "c", *base, "--threshold", "7", "--metric", "f1")
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("warning: no item is predicted positive (--threshold 7 is")
    assert len(res.stderr.strip().splitlines()) == 1


def test_init_says_when_fewer_strata_were_made_than_asked(parquet_file, tmp_path):
    """Session 33: ``--strata 400`` on a side of a few hundred items makes at most one stratum
    per five items (``strata.side_n_strata``); ``init`` says how many per side and why, and says
    nothing when every side got what it asked."""
    base = ("--scores", parquet_file, "--score-col", "p", "--id-col", "doc", "--threshold", "0.5")
    res = run("init", tmp_path / "a", *base, "--strata", "400")
    assert res.exit_code == 0, res.output
    text = flat(res.stdout)
    made = re.search(r"(\d+) / (\d+) per side \(negative / positive\) where 400 / 400 were asked: "
                     r"at most one stratum per 5 items and per distinct score", text)  # fmt: skip
    assert made is not None, text
    meta = json.loads((tmp_path / "a" / CLI_FILE).read_text())
    assert int(made[1]) + int(made[2]) == len(meta["strata"]["sizes"])
    assert int(made[2]) < 400
    res = run("init", tmp_path / "b", *base, "--strata", "4")
    assert res.exit_code == 0, res.output
    assert "were asked" not in flat(res.stdout)


def test_a_torn_ledger_line_is_announced_as_one_warning_line(parquet_file, tmp_path):
    """Session 33: the ledger's repair goes through the command boundary's warning hook like
    every other warning: one ``warning:`` line naming the ledger and the class, then the
    command runs."""
    audit = tmp_path / "a"
    assert _init(audit, parquet_file).exit_code == 0
    assert run("next", audit, "-n", "5", "--out", tmp_path / "b.csv").exit_code == 0
    with (audit / "ledger.jsonl").open("ab") as f:
        f.write(b'{"kind": "prop')  # an interrupted, never acknowledged write
    res = run("next", audit, "-n", "5", "--out", tmp_path / "c.csv")
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("warning:")]
    assert len(lines) == 1, res.stderr  # (``next --out`` reports what it wrote on stderr too)
    assert lines[0].startswith("warning: ledger ")
    assert "cut a torn last line" in lines[0] and lines[0].endswith("(LedgerRepairWarning)")


def _label(batch_csv, truth, out_csv):
    batch = pd.read_csv(batch_csv, dtype={"id": str})
    pd.DataFrame({"id": batch["id"], "label": [truth[i] for i in batch["id"]]}).to_csv(
        out_csv, index=False
    )
    return batch


@pytest.mark.slow  # 10-35 s on 2 busy cores: three reports' worth of figures and a calibration
def test_round_trip_parquet(parquet_file, population_frame, tmp_path):
    _, truth = population_frame
    audit = tmp_path / "audit"
    res = _init(audit, parquet_file)
    assert res.exit_code == 0, res.output
    meta = json.loads((audit / CLI_FILE).read_text())
    assert meta["population"]["path"] == str(parquet_file.resolve())
    assert len(meta["population"]["sha256"]) == 64
    assert (audit / "manifest.json").is_file()

    seen: set[str] = set()
    for _ in range(3):
        res = run("next", audit, "-n", "20", "--out", tmp_path / "batch.csv")
        assert res.exit_code == 0, res.output
        batch = _label(tmp_path / "batch.csv", truth, tmp_path / "labels.csv")
        assert list(batch.columns) == ["id", "score", "stratum"]
        assert len(batch) == 20 and not set(batch["id"]) & seen  # never proposed twice
        seen |= set(batch["id"])
        res = run("record", audit, tmp_path / "labels.csv")
        assert res.exit_code == 0, res.output
    # re-recording the same labels is a no-op
    res = run("record", audit, tmp_path / "labels.csv")
    assert res.exit_code == 0 and "60 labels in total" in res.output

    res = run("status", audit)
    assert res.exit_code == 0, res.output
    assert "f1" in res.stdout and "Strata" in res.stdout and "acceptance rule" in res.stdout

    res = run("certify", audit, "--uncorrected")
    assert res.exit_code == 0, res.output
    assert "Certification" in res.stdout and "f1 >= 0.3" in res.stdout
    assert "looks 3" in flat(res.stdout)
    assert "3 looks without sequential correction" in flat(res.stdout)
    assert "UNCORRECTED for 3 looks" in flat(res.stdout)  # in the verdict itself

    # three looks: corrected by default; simulated once, cached in the audit directory
    res = run("certify", audit, "--n-sims", "225", "--max-mcse", "0.02")
    assert res.exit_code == 0, res.output
    assert "sequential correction" in flat(res.stdout) and "worst-case truth" in flat(res.stdout)
    assert "UNCORRECTED" not in res.stdout
    (cached,) = json.loads((audit / "sequential_calibration.json").read_text()).values()
    assert 0.9 < cached["level_used"] < 1.0 and cached["n_sims"] == 225

    out = tmp_path / "report.html"
    res = run("report", audit, "--out", out, "--n-sims", "225", "--max-mcse", "0.02")
    assert res.exit_code == 0, res.output
    html = out.read_text()
    figures = re.findall(r'<figure id="fig-([a-z]+)"', html)
    assert figures == ["posterior", "strata", "trajectory", "calibration"]
    assert str(parquet_file.resolve()) in html and meta["population"]["sha256"] in html
    assert f"{cached['level_used']:.4g}" in html
    png = base64.b64decode(re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000

    assert_user_error(run("report", audit, "--out", tmp_path / "r.pdf"), "allowed: .html or .md")


def test_round_trip_csv_to_stdout(population_frame, tmp_path):
    frame, truth = population_frame
    csv = tmp_path / "scores.csv"
    frame.to_csv(csv, index=False)
    audit = tmp_path / "audit_csv"
    assert _init(audit, csv).exit_code == 0
    res = run("next", audit, "-n", "15")
    assert res.exit_code == 0, res.output
    batch = pd.read_csv(pd.io.common.StringIO(res.stdout), dtype={"id": str})
    assert list(batch.columns) == ["id", "score", "stratum"] and len(batch) == 15
    pd.DataFrame({"id": batch["id"], "label": [truth[i] for i in batch["id"]]}).to_csv(
        tmp_path / "l.csv", index=False
    )
    assert run("record", audit, tmp_path / "l.csv").exit_code == 0
    res = run("status", audit)
    assert res.exit_code == 0 and "15 labels" in res.stdout


# ------------------------------------------------------------------------------ user errors
def test_bad_column_is_one_line(parquet_file, tmp_path):
    res = run(
        "init",
        tmp_path / "a",
        "--scores",
        parquet_file,
        "--score-col",
        "nope",
        "--threshold",
        "0.5",
    )
    assert_user_error(res, "nope")
    assert not (tmp_path / "a").exists()  # nothing half-created


def test_missing_audit_is_one_line(tmp_path):
    assert_user_error(run("status", tmp_path / "missing"), "does not exist")
    assert_user_error(run("next", tmp_path / "missing"), "does not exist")


@pytest.fixture
def started(parquet_file, population_frame, tmp_path):
    audit = tmp_path / "audit"
    assert _init(audit, parquet_file).exit_code == 0
    res = run("next", audit, "-n", "10", "--out", tmp_path / "batch.csv")
    assert res.exit_code == 0, res.output
    batch = pd.read_csv(tmp_path / "batch.csv", dtype={"id": str})
    return audit, batch, population_frame[1]


def _ledger_bytes(audit):
    return (audit / "ledger.jsonl").read_bytes()


def test_label_two_is_refused_and_nothing_written(started, tmp_path):
    audit, batch, truth = started
    labels = [truth[i] for i in batch["id"]]
    labels[3] = 2
    pd.DataFrame({"id": batch["id"], "label": labels}).to_csv(tmp_path / "l.csv", index=False)
    before = _ledger_bytes(audit)
    assert_user_error(run("record", audit, tmp_path / "l.csv"), r"line 5: label '2'")
    assert _ledger_bytes(audit) == before


def test_never_proposed_id_is_refused_and_nothing_written(started, tmp_path, population_frame):
    audit, batch, truth = started
    frame = population_frame[0]
    other = next(i for i in frame["doc"] if i not in set(batch["id"]))
    ids = [*batch["id"][:5], other]
    pd.DataFrame({"id": ids, "label": [truth[i] for i in ids]}).to_csv(
        tmp_path / "l.csv", index=False
    )
    before = _ledger_bytes(audit)
    assert_user_error(run("record", audit, tmp_path / "l.csv"), other)
    assert _ledger_bytes(audit) == before


def test_unknown_id_and_bad_columns_are_refused(started, tmp_path):
    audit, batch, _ = started
    pd.DataFrame({"id": ["no-such-doc"], "label": [1]}).to_csv(tmp_path / "l.csv", index=False)
    assert_user_error(run("record", audit, tmp_path / "l.csv"), "no-such-doc")
    pd.DataFrame({"item": batch["id"], "y": 1}).to_csv(tmp_path / "m.csv", index=False)
    assert_user_error(run("record", audit, tmp_path / "m.csv"), "required: id,label")


def test_an_id_is_matched_exactly_as_written_never_trimmed(started, tmp_path):
    """Session 32: ``" doc-00042"`` is not ``"doc-00042"`` (the labels reader used to trim every
    value, ids included: a guess). Labels may carry spaces; ids may not, in CSV or JSON Lines."""
    audit, batch, truth = started
    ids = list(batch["id"])
    labels = [int(truth[i]) for i in ids]
    before = _ledger_bytes(audit)
    written = [f" {ids[0]}", *ids[1:]]
    pd.DataFrame({"id": written, "label": labels}).to_csv(tmp_path / "l.csv", index=False)
    assert_user_error(run("record", audit, tmp_path / "l.csv"), f"unknown id ' {ids[0]}'")
    lines = [json.dumps({"id": i, "label": v}) for i, v in zip(ids, labels, strict=True)]
    lines[1] = json.dumps({"id": f"{ids[1]} ", "label": labels[1]})
    (tmp_path / "l.jsonl").write_text("\n".join(lines) + "\n")
    assert_user_error(run("record", audit, tmp_path / "l.jsonl"), f"unknown id '{ids[1]} '")
    assert _ledger_bytes(audit) == before
    spaced = [f" {v} " for v in labels]
    pd.DataFrame({"id": ids, "label": spaced}).to_csv(tmp_path / "ok.csv", index=False)
    res = run("record", audit, tmp_path / "ok.csv")
    assert res.exit_code == 0, res.output
    assert f"recorded {len(ids)} new label(s)" in res.output


def test_changed_population_file_is_refused(started, parquet_file, population_frame):
    audit, _, _ = started
    frame = population_frame[0].copy()
    frame.loc[0, "p"] = 0.999
    frame.to_parquet(parquet_file)
    for cmd in (("next", audit), ("status", audit), ("record", audit, parquet_file)):
        assert_user_error(run(*cmd), "changed since init")


def test_existing_audit_directory_is_not_overwritten(started, parquet_file):
    audit, _, _ = started
    before = (audit / CLI_FILE).read_bytes()
    assert_user_error(_init(audit, parquet_file), "already exists")
    assert (audit / CLI_FILE).read_bytes() == before


def test_bad_options_are_one_line(parquet_file, tmp_path):
    assert_user_error(_init(tmp_path / "b", parquet_file, "--prior", "beta"), "--prior 'beta'")
    assert_user_error(
        run(
            "init",
            tmp_path / "c",
            "--scores",
            parquet_file,
            "--score-col",
            "p",
            "--metric",
            "auc",
            "--threshold",
            "0.5",
        ),
        "--metric='auc'",
    )
    assert_user_error(
        run(
            "init",
            tmp_path / "d",
            "--scores",
            tmp_path / "none.parquet",
            "--score-col",
            "p",
            "--threshold",
            "0.5",
        ),
        "does not exist",
    )
    assert not any((tmp_path / n).exists() for n in "bcd")


# ------------------------------------------------------------------------------ pair-recall
def test_pair_recall_prints_summary():
    # Bommannavar et al. Table 3 (topic Apple) with the printed precisions taken as known:
    # recall_1 = 0.774 * 420 / (0.247 * 10217) = 0.129 (Eq. 1), as in bayes_eval.pair_recall.
    res = run(
        "pair-recall",
        "--size-1",
        "676",
        "--size-2",
        "10217",
        "--size-12",
        "420",
        "--precision-1",
        "0.655",
        "--precision-2",
        "0.247",
        "--precision-12",
        "0.774",
        "--universe",
        "800000",
        "--draws",
        "100",
    )
    assert res.exit_code == 0, res.output
    assert "recall_1" in res.stdout and "0.1288" in res.stdout


def test_pair_recall_bad_labels_option():
    res = run(
        "pair-recall",
        "--size-1",
        "10",
        "--size-2",
        "10",
        "--size-12",
        "5",
        "--labels-1",
        "three of ten",
        "--labels-2",
        "4/10",
        "--labels-12",
        "4/5",
    )
    assert_user_error(res, "--labels-1")


# ------------------------------------------------------------------------------ demo
def test_demo_says_when_the_calibration_workers_stop(tmp_path, monkeypatch):
    from bayes_eval import sequential
    from bayes_eval.models._look_pool import WorkerPoolError

    def stopped(*args, **kwargs):
        raise WorkerPoolError("killed") from OSError("worker 123 exited with signal 9")

    monkeypatch.setattr(sequential, "correction_for", stopped)
    res = run("demo", "--out", tmp_path / "d.html", "--n-jobs", "2", "--budget", "100")
    assert_user_error(res, r"--n-jobs 2\) stopped \(worker 123 exited with signal 9\).*--n-jobs 1")
    assert not (tmp_path / "d.html").exists()


def test_ctrl_c_is_one_error_line_and_the_interrupt_status(tmp_path, monkeypatch):
    """Ctrl-C (KeyboardInterrupt) in the calibration: exit status 130, one ``error:`` line, no
    traceback, no report."""
    from bayes_eval import sequential

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sequential, "correction_for", interrupted)
    res = run("demo", "--out", tmp_path / "d.html", "--budget", "100")
    assert res.exit_code == 130, res.output
    assert res.stderr.strip().splitlines()[-1] == "error: interrupted"
    assert res.stderr.count("error:") == 1 and "Traceback" not in res.output
    assert not (tmp_path / "d.html").exists()


def test_sigterm_is_one_error_line_and_the_terminate_status(tmp_path, monkeypatch):
    """SIGTERM (``kill``) in the calibration: exit status 143, one ``error: terminated`` line, no
    traceback, no report, and the handler of before comes back."""
    import os
    import signal
    import time

    from bayes_eval import sequential

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises in this thread before the sleep ends
        raise AssertionError("SIGTERM did not stop the command")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(sequential, "correction_for", terminated)
    started = time.monotonic()
    res = run("demo", "--out", tmp_path / "d.html", "--budget", "100")
    assert time.monotonic() - started < 25
    assert res.exit_code == 143, res.output
    assert res.stderr.strip().splitlines()[-1] == "error: terminated"
    assert res.stderr.count("error:") == 1 and "Traceback" not in res.output
    assert not (tmp_path / "d.html").exists()
    assert signal.getsignal(signal.SIGTERM) is before


def test_demo_runs_end_to_end_and_writes_a_report(tmp_path):
    out = tmp_path / "demo.html"
    res = run(
        "demo",
        "--out",
        out,
        "--budget",
        "200",
        "--n-sims",
        "200",
        "--max-mcse",
        "0.02",
        "--seed",
        "1",
        "--design",
        "posterior_variance",
    )
    assert res.exit_code == 0, res.output
    assert "Certification" in res.stdout and "wrote" in res.stdout
    html = out.read_text()
    assert html.count("data:image/png;base64,") >= 3  # posterior, strata, trajectory
    assert "true f1 (known in this simulation)" in html
