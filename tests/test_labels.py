"""Label coercion and validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayes_eval as be
from bayes_eval.labels import coerce_labels


@pytest.fixture
def pop():
    return be.Population(np.linspace(0, 1, 10), threshold=0.5, ids=[f"i{j}" for j in range(10)])


def test_forms_agree(pop):
    ids = ["i3", "i7", "i1"]
    vals = [1, 0, True]
    a = coerce_labels(dict(zip(ids, vals, strict=True)), pop)
    b = coerce_labels(pd.Series(vals, index=ids), pop)
    c = coerce_labels((ids, vals), pop)
    d = coerce_labels(pd.DataFrame({"id": ids, "label": vals}), pop)
    for other in (b, c, d):
        assert np.array_equal(a[0], other[0]) and np.array_equal(a[1], other[1])
    assert a[0].tolist() == [1, 3, 7] and a[1].tolist() == [1, 1, 0]


def test_same_label_twice_is_deduplicated(pop):
    pos, val = coerce_labels((["i2", "i2", "i4"], [1, 1, 0]), pop)
    assert pos.tolist() == [2, 4] and val.tolist() == [1, 0]


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ((["i1"], [2]), "contains 2"),
        ((["i1"], [0.5]), "0.5"),
        ((["i1"], [np.nan]), "nan"),
        ((["i1"], ["yes"]), "dtype"),
        ((["i1", "i2"], [1]), "must match"),
        ((["zz"], [1]), "unknown id 'zz'"),
        ((["i1", "i1"], [0, 1]), "two different labels"),
        ([1, 2, 3], "allowed: a mapping"),
        (pd.DataFrame({"x": [1]}), "columns 'id' and 'label'"),
    ],
)
def test_bad_labels(pop, labels, match):
    with pytest.raises((ValueError, TypeError), match=match):
        coerce_labels(labels, pop)


def test_estimate_rejects_bad_labels_and_changes_nothing(pop):
    strata = be.stratify(pop, n_strata=1)
    before = strata.assignment.copy()
    with pytest.raises(ValueError):
        be.estimate(strata, (["i1"], [3]), draws=100, rng=0)
    assert np.array_equal(strata.assignment, before)


@pytest.mark.parametrize("value", [0, 1, "yes", None, np.array([True])])
def test_check_bool_refuses_non_bools_naming_the_argument(value):
    from bayes_eval._validation import check_bool

    with pytest.raises(TypeError, match=r"^finite_population=.* must be True or False$"):
        check_bool(value, "finite_population")
    assert check_bool(np.bool_(False), "x") is False and check_bool(True, "x") is True
