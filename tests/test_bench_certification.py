"""``benchmarks/bench_certification.py`` in parts: a stored calibration evaluated truth by truth
gives the rates of the whole row (each truth's fresh audits come from a stream of its own)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_certification as bc

import bayes_eval as be

CELL = ("independent", "random", "precision", "geometric")


@pytest.fixture(scope="module")
def setting():
    lp = be.datasets.demo_population()
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    cal, cal_s = bc.calibrate_cell(st, CELL, 200, seed=11, draws=None)
    return st, bc.calibration_record(cal, cal_s, CELL, 200, 11, None), cal


def test_stored_calibration_round_trips(setting, tmp_path):
    """The JSON file holds the boundary bit for bit, merged by cell; a file of anything else is
    refused with an error naming the flag."""
    _, rec, cal = setting
    path = tmp_path / "cal.json"
    bc.save_calibration(path, rec)
    bc.save_calibration(path, {**rec, "cell": "pooled/random/precision/geometric"})
    stored = bc.load_calibrations(path)
    assert sorted(stored) == [
        "independent/random/precision/geometric",
        "pooled/random/precision/geometric",
    ]
    back = stored["/".join(CELL)]
    assert np.array_equal(np.asarray(back["nominal"]), cal.boundary.nominal)
    assert [t["name"] for t in back["truths"]] == [t.name for t in cal.truths]
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(SystemExit, match="--calibration"):
        bc.load_calibrations(bad)


def test_a_part_gives_the_rates_of_the_whole_row(setting):
    """Evaluating two family truths, one held-out truth and the margin alone gives exactly their
    rates (and labels) in the evaluation of every truth: the streams are keyed by name."""
    st, rec, _ = setting
    held = bc.holdout_truths(st, "precision")
    whole = bc.evaluate_cell(st, rec, 100, seed=11, holdout=held)
    part = bc.evaluate_cell(
        st, rec, 100, seed=11, holdout=held, only={"flat", "floor_neg_bottom", "ends", "margin"}
    )
    assert part["truths"] == ["flat", "floor_neg_bottom"]
    assert part["holdout"] == ["ends"]
    for name, rate in zip(part["truths"], part["rates"], strict=True):
        assert rate == whole["rates"][whole["truths"].index(name)]
    assert part["holdout_rates"][0] == whole["holdout_rates"][whole["holdout"].index("ends")]
    assert part["labels"] == whole["labels"] and part["naive"] == whole["naive"]
    # and another seed gives other audits (the check can fail)
    other = bc.evaluate_cell(st, rec, 100, seed=12, holdout=[], only={"margin"})
    assert other["labels"] != whole["labels"]
