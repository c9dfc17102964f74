"""Population construction, look-up and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayes_eval as be


def test_threshold_predictions_and_default_ids():
    pop = be.Population([0.1, 0.5, 0.49, 2.0], threshold=0.5)
    assert pop.size == 4
    assert pop.predictions.tolist() == [False, True, False, True]
    assert pop.ids.tolist() == [0, 1, 2, 3]
    assert pop.has_default_ids
    assert pop.positions_of([3, 0]).tolist() == [3, 0]


def test_explicit_predictions_and_string_ids():
    pop = be.Population([0.2, 0.8, 0.3], predictions=[0, 1, 1], ids=["a", "b", "c"])
    assert pop.threshold is None
    assert pop.predictions.tolist() == [False, True, True]
    assert pop.positions_of(["c", "a"]).tolist() == [2, 0]
    assert pop.ids_at(np.array([1])).tolist() == ["b"]


def test_arrays_are_read_only():
    pop = be.Population(np.array([0.1, 0.9]), threshold=0.5)
    with pytest.raises(ValueError):
        pop.scores[0] = 3.0


def test_from_pandas_and_parquet(tmp_path):
    frame = pd.DataFrame({"item": [10, 20, 30], "s": [0.1, 0.7, 0.9], "p": [0, 1, 1]})
    pop = be.Population.from_pandas(frame, score_col="s", id_col="item", threshold=0.5)
    assert pop.positions_of([30]).tolist() == [2]
    path = tmp_path / "pop.parquet"
    frame.to_parquet(path)
    pop2 = be.Population.from_parquet(path, score_col="s", id_col="item", prediction_col="p")
    assert pop2.predictions.tolist() == [False, True, True]
    assert pop2.fingerprint() == pop.fingerprint()  # same scores, predictions and ids
    with pytest.raises(ValueError, match="score_col='nope'"):
        be.Population.from_parquet(path, score_col="nope", threshold=0.5)
    with pytest.raises(ValueError, match="id_col='x'"):
        be.Population.from_pandas(frame, score_col="s", id_col="x", threshold=0.5)


def test_fingerprint_is_stable_and_sensitive():
    a = be.Population([0.1, 0.2, 0.9], threshold=0.5)
    b = be.Population([0.1, 0.2, 0.9], threshold=0.5)
    c = be.Population([0.1, 0.2, 0.8], threshold=0.5)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"scores": [0.1, np.nan], "threshold": 0.5}, ValueError, "non-finite"),
        ({"scores": [0.1, np.inf], "threshold": 0.5}, ValueError, "non-finite"),
        ({"scores": ["a", "b"], "threshold": 0.5}, TypeError, "dtype"),
        ({"scores": [True, False], "threshold": 0.5}, TypeError, "dtype"),
        ({"scores": [], "threshold": 0.5}, ValueError, "empty"),
        ({"scores": [[0.1, 0.2]], "threshold": 0.5}, ValueError, "1-D"),
        ({"scores": [0.1, 0.2]}, ValueError, "exactly one of threshold"),
        (
            {"scores": [0.1, 0.2], "threshold": 0.5, "predictions": [0, 1]},
            ValueError,
            "exactly one",
        ),
        ({"scores": [0.1, 0.2], "threshold": float("nan")}, ValueError, "threshold"),
        ({"scores": [0.1, 0.2], "predictions": [0, 2]}, ValueError, "predictions has value 2"),
        ({"scores": [0.1, 0.2], "predictions": [0]}, ValueError, "length 2"),
        ({"scores": [0.1, 0.2], "threshold": 0.5, "ids": [1, 1]}, ValueError, "unique"),
        ({"scores": [0.1, 0.2], "threshold": 0.5, "ids": ["a", "a"]}, ValueError, "'a'"),
        ({"scores": [0.1, 0.2], "threshold": 0.5, "ids": [1.5, 2.5]}, TypeError, "ids"),
    ],
)
def test_bad_population_input(kwargs, exc, match):
    scores = kwargs.pop("scores")
    with pytest.raises(exc, match=match):
        be.Population(scores, **kwargs)


def test_unknown_ids_are_refused():
    pop = be.Population([0.1, 0.9], threshold=0.5)
    with pytest.raises(ValueError, match="unknown id 5"):
        pop.positions_of([0, 5])
    spop = be.Population([0.1, 0.9], threshold=0.5, ids=["x", "y"])
    with pytest.raises(ValueError, match="unknown id 'z'"):
        spop.positions_of(["z"])
