"""Human labels: coercion and validation of the ``labels`` argument, and of the ids and
annotators given with them.

Labels arrive as a mapping ``id -> label``, a :class:`pandas.Series` indexed by id, or a pair
``(ids, labels)`` of arrays. Values must be 0/1 or bool. The same id may appear twice only with
the same value; ids must belong to the population. :func:`canonical_ids` turns the ids given to
:meth:`Audit.record <bayes_eval.audit.Audit.record>` into the exact Python ints or strings the
ledger keeps (never wrapping, never converting between kinds); :func:`check_annotators`
validates who gave each label, and :func:`new_labels` checks one ``record`` call against the
items an audit proposed and the labels it already holds.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

import numpy as np
from numpy.typing import ArrayLike

from ._protocols import PopulationLike

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LabelsSpec",
    "as_label_values",
    "canonical_ids",
    "check_annotators",
    "coerce_labels",
    "new_labels",
]

#: labels as users give them: a mapping id -> 0/1 (or bool), a pandas Series indexed by id, a
#: DataFrame with columns ``id`` and ``label``, or a pair ``(ids, labels)`` of arrays
#: (pandas only by name: this module never imports it)
type LabelsSpec = Union[  # noqa: UP007 - the pandas names are forward references
    Mapping[Hashable, int | bool], tuple[ArrayLike, ArrayLike], "pd.Series", "pd.DataFrame"
]


def _unordered(value: Any, name: str) -> None:
    """Refuse a set, a mapping or a one-pass iterator where a sequence aligned with other
    sequences is needed: its order is not the user's (a set) or reading it consumes it."""
    if isinstance(value, set | frozenset | Mapping | Iterator):
        raise TypeError(
            f"{name} has type {type(value).__name__}; allowed: a list, tuple or 1-D array "
            "(an ordered sequence, matched position by position)"
        )


def as_label_values(values: Any, name: str = "labels") -> np.ndarray:
    """Validate label values: a 1-D array of 0/1 or bool; returns uint8."""
    _unordered(values, name)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D sequence of 0/1 labels")
    if arr.dtype == bool:
        return arr.astype(np.uint8)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in arr if not isinstance(v, int | float | bool | np.number))
            raise ValueError(f"{name} contains {bad!r}; allowed: 0, 1, True or False") from None
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} has dtype {arr.dtype}; allowed: 0, 1, True or False")
    ok = (arr == 0) | (arr == 1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(
            f"{name} contains {arr[i].item()!r} at position {i}; allowed: 0, 1, True or False"
        )
    return arr.astype(np.uint8)


def _split(labels: Any, name: str) -> tuple[Any, Any]:
    # labels can only be a pandas object if pandas was imported: never import it here (the
    # command line's `record` stays free of it)
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(labels, pd.Series):
        return labels.index.to_numpy(), labels.to_numpy()
    if pd is not None and isinstance(labels, pd.DataFrame):
        cols = set(labels.columns)
        if not {"id", "label"} <= cols:
            raise ValueError(
                f"{name} is a DataFrame with columns {list(labels.columns)}; "
                "allowed: columns 'id' and 'label'"
            )
        return labels["id"].to_numpy(), labels["label"].to_numpy()
    if isinstance(labels, Mapping):
        return np.asarray(list(labels.keys())), np.asarray(list(labels.values()), dtype=object)
    if isinstance(labels, tuple | list) and len(labels) == 2:
        ids, vals = labels
        _unordered(ids, f"ids of {name}")
        _unordered(vals, f"labels of {name}")
        return np.asarray(ids), np.asarray(vals)
    raise TypeError(
        f"{name} has type {type(labels).__name__}; allowed: a mapping id->label, a pandas "
        "Series indexed by id, or a pair (ids, labels) of arrays"
    )


def coerce_labels(
    labels: LabelsSpec | None, population: PopulationLike, *, name: str = "labels"
) -> tuple[np.ndarray, np.ndarray]:
    """Validate labels against a population.

    Returns
    -------
    positions : ndarray of int64
        Distinct population positions of the labelled items (sorted).
    values : ndarray of uint8
        Their 0/1 labels.

    Raises
    ------
    ValueError
        Labels outside {0, 1}, unknown ids, mismatched lengths, or the same id with two values.
    """
    if labels is None:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint8)
    ids, vals = _split(labels, name)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(
            f"ids of {name} have shape {ids.shape} (a pair's first element, e.g. of a list of two "
            "labels without ids); allowed: a pair (ids, labels) of 1-D arrays, a mapping "
            "id->label or a pandas Series indexed by id"
        )
    values = as_label_values(vals, name)
    if values.shape[0] != ids.shape[0]:
        raise ValueError(
            f"{name}: {ids.shape[0]} ids but {values.shape[0]} label values; they must match"
        )
    positions = population.positions_of(ids, name=f"ids of {name}")
    order = np.argsort(positions, kind="stable")
    pos_sorted, val_sorted = positions[order], values[order]
    same_as_next = pos_sorted[1:] == pos_sorted[:-1]
    if same_as_next.any():
        clash = same_as_next & (val_sorted[1:] != val_sorted[:-1])
        if clash.any():
            i = int(np.flatnonzero(clash)[0])
            bad_id = population.ids_at(pos_sorted[i : i + 1])[0].item()
            raise ValueError(
                f"{name} gives id {bad_id!r} two different labels (0 and 1); "
                "each item may have only one label"
            )
        keep = np.concatenate([[True], ~same_as_next])
        pos_sorted, val_sorted = pos_sorted[keep], val_sorted[keep]
    return pos_sorted, val_sorted


def canonical_ids(ids: Any, kind: str, name: str = "ids") -> list[Any]:
    """Ids as the ledger keeps them: Python ints (``kind="int"``) or strings (``"str"``).

    Refuses (``TypeError`` naming ``name``) ids of the other kind, bools and floats, and never
    wraps integers above 2**63 - 1 to negative ones.
    """
    _unordered(ids, name)
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D sequence of ids")
    if arr.size == 0:
        return []
    if kind == "int":
        if arr.dtype == object:
            bad = [
                v
                for v in arr.tolist()
                if isinstance(v, bool) or not isinstance(v, numbers.Integral)
            ]
            if bad:
                raise TypeError(f"{name} contains {bad[0]!r}; this population has integer ids")
            return [int(v) for v in arr.tolist()]
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(
                f"{name} contains {arr.tolist()[0]!r} (dtype {arr.dtype}); this population "
                "has integer ids"
            )
        if arr.dtype == np.uint64:  # never wrap ids above 2**63 - 1 to negative ones
            return [int(v) for v in arr.tolist()]
        return arr.astype(np.int64).tolist()
    if arr.dtype == object:
        bad = [v for v in arr.tolist() if not isinstance(v, str)]
        if bad:
            raise TypeError(f"{name} contains {bad[0]!r}; this population has string ids")
    elif not np.issubdtype(arr.dtype, np.str_):
        raise TypeError(
            f"{name} contains {arr.tolist()[0]!r} (dtype {arr.dtype}); this population has "
            "string ids"
        )
    return [str(v) for v in arr.tolist()]


def check_annotators(annotators: Any, n: int, name: str = "annotators") -> list[str] | None:
    """Annotator names, one non-empty string per label (None when not given)."""
    if annotators is None:
        return None
    values = [annotators] if isinstance(annotators, str) else list(annotators)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries but ids has {n}; they must match")
    for v in values:
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{name} contains {v!r}; allowed: non-empty strings")
    return values


def new_labels(
    keys: list[Any],
    labels: Any,
    annotators: Any,
    *,
    proposed: Mapping[Any, int],
    recorded: Mapping[Any, int],
    population: PopulationLike,
    id_array: Callable[[list[Any]], np.ndarray],
) -> list[tuple[Any, int, str | None]]:
    """The labels one :meth:`Audit.record <bayes_eval.audit.Audit.record>` call adds.

    ``keys`` are the call's ids in ledger form (:func:`canonical_ids`), ``proposed`` maps every
    proposed id to its stratum, ``recorded`` every labelled id to its label, and ``id_array``
    turns ledger keys back into an id array of the population. Everything is checked before
    anything is returned: the labels are 0/1 or bool with one per id, an id gets one label in the
    call and none that conflicts with an earlier one, and every id was proposed (an id not in
    the population and an id never proposed are distinct errors).

    Returns
    -------
    list of (id, label, annotator or None)
        The labels not recorded before, in first-seen order; an id given twice keeps its first
        annotator. Empty when every label was recorded before (re-recording is a no-op).
    """
    _unordered(labels, "labels")
    values = as_label_values(
        np.asarray(labels).reshape(-1) if np.ndim(labels) == 0 else labels, "labels"
    )
    if values.shape[0] != len(keys):
        raise ValueError(
            f"ids has {len(keys)} entries but labels has {values.shape[0]}; they must match"
        )
    who = check_annotators(annotators, len(keys))
    given: dict[Any, int] = {}
    by: dict[Any, str] = {}
    for i, (key, y) in enumerate(zip(keys, values.tolist(), strict=True)):
        if who is not None:
            by.setdefault(key, who[i])
        old = given.setdefault(key, y)
        if old != y:
            raise ValueError(f"ids gives id {key!r} two different labels (0 and 1)")
    not_proposed = [key for key in given if key not in proposed]
    if not_proposed:
        population.positions_of(id_array(not_proposed), name="ids")  # unknown ids: its error
        raise ValueError(
            f"ids contains {len(not_proposed)} id(s) never proposed by this audit (first: "
            f"{not_proposed[0]!r}); only items from propose() can be recorded"
        )
    new: list[tuple[Any, int, str | None]] = []
    for key, y in given.items():
        old = recorded.get(key)
        if old is None:
            new.append((key, y, by.get(key)))
        elif old != y:
            raise ValueError(
                f"id {key!r} already has label {old}; the new label {y} conflicts with it"
            )
    return new
