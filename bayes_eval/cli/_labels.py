"""Reading the human labels a person records: CSV, TSV or JSON Lines files.

A labels file has one row per labelled item: its id (column ``id``, or ``--id-col``), its 0/1
label (column ``label``, or ``--label-col``) and optionally who labelled it
(``--annotator-col``). Formats, by suffix:

* ``.csv`` (and anything else): comma-separated, UTF-8, header row;
* ``.tsv`` / ``.tab``: tab-separated, UTF-8, header row;
* ``.jsonl`` / ``.ndjson``: one JSON object per line, e.g. ``{"id": "doc-7", "label": 1}``;
  labels may be 0, 1, true or false, ids strings or integers.

Everything is validated before anything is recorded; an error names the file, the line, the
column (as the flag that chose it) and the bad value. Ids are matched exactly as written, spaces
included (``" doc-7"`` is not ``"doc-7"``); labels and column names may carry surrounding spaces.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._protocols import PopulationLike
from ._app import UserError

__all__ = ["LabelsFile", "label_format", "read_labels"]

#: an integer id as written in a population of integer ids (canonical decimal form)
_INT_ID = re.compile(r"-?(0|[1-9][0-9]{0,18})")

#: suffixes read as tab-separated and as JSON Lines
TSV_SUFFIXES = (".tsv", ".tab")
JSONL_SUFFIXES = (".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class LabelsFile:
    """The validated contents of a labels file.

    Attributes
    ----------
    ids : ndarray
        Item ids, converted to the population's id type (int64 or str).
    labels : ndarray of uint8
        0/1 labels, aligned with ``ids``.
    annotators : list of str or None
        Who gave each label (``--annotator-col``), or None.
    format : str
        ``"csv"``, ``"tsv"`` or ``"jsonl"``.
    """

    ids: Any
    labels: Any
    annotators: Any
    format: str


def label_format(path: Path) -> str:
    """``"jsonl"``, ``"tsv"`` or ``"csv"`` from the file's suffix."""
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    return "tsv" if suffix in TSV_SUFFIXES else "csv"


def _read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise UserError(f"labels file {str(path)!r} does not exist")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"labels file {str(path)!r} is not UTF-8 text (byte {exc.start}); allowed: a UTF-8 "
            f"{what}"
        ) from None


def _table_rows(path: Path, fmt: str, columns: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV/TSV file (every value a string, rows of the header's width)."""
    text = _read_text(path, f"{fmt.upper()} with columns {columns}")
    delimiter = "\t" if fmt == "tsv" else ","
    rows = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
    if not rows:
        raise UserError(f"labels file {str(path)!r} is empty; expected columns {columns}")
    cols = [c.strip() for c in rows[0]]
    for lineno, row in enumerate(rows[1:], start=2):
        if len(row) != len(cols):
            raise UserError(
                f"labels file {str(path)!r} row {lineno} has {len(row)} fields, the header "
                f"{cols} has {len(cols)}; allowed: one value per column"
            )
    if len(set(cols)) != len(cols):
        raise UserError(f"labels file {str(path)!r} has duplicate columns {cols}")
    return cols, rows[1:]


def _jsonl_rows(path: Path, wanted: list[str], columns: str) -> tuple[list[str], list[list[str]]]:
    """The wanted fields of a JSON Lines file as strings (labels true/false become 1/0)."""
    text = _read_text(path, f"JSON Lines file with fields {columns}")
    rows: list[list[str]] = []
    seen: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UserError(
                f"labels file {str(path)!r} line {lineno} is not JSON ({exc.msg}); allowed: one "
                "JSON object per line"
            ) from None
        if not isinstance(obj, dict):
            raise UserError(
                f"labels file {str(path)!r} line {lineno} holds a JSON {type(obj).__name__}; "
                f"allowed: one JSON object per line with fields {columns}"
            )
        seen = seen or list(obj)
        missing = [k for k in wanted if k not in obj]
        if missing:
            raise UserError(
                f"labels file {str(path)!r} line {lineno} has fields {list(obj)}; required: "
                f"{columns}"
            )
        row = []
        for key in wanted:
            v = obj[key]
            if isinstance(v, bool):
                v = int(v)
            if isinstance(v, float) and v.is_integer() and key != wanted[0]:
                v = int(v)
            if v is None or isinstance(v, dict | list):
                v = json.dumps(v)
            row.append(str(v))
        rows.append(row)
    if not rows:
        raise UserError(f"labels file {str(path)!r} is empty; expected fields {columns}")
    return wanted, rows


def read_labels(
    path: Path,
    population: PopulationLike,
    *,
    id_col: str = "id",
    label_col: str = "label",
    annotator_col: str | None = None,
) -> LabelsFile:
    """Read and validate a labels file (see the module docstring for the formats).

    Returns a :class:`LabelsFile` with ids converted to the population's id type. Raises
    :class:`UserError` naming the file, the line and the bad value (and the flag that chose a
    column that is missing).
    """
    import numpy as np

    fmt = label_format(path)
    wanted = [id_col, label_col] + ([annotator_col] if annotator_col is not None else [])
    if len(set(wanted)) != len(wanted):
        raise UserError(
            f"--id-col {id_col!r}, --label-col {label_col!r} and --annotator-col "
            f"{annotator_col!r} must name different columns"
        )
    columns = ",".join(wanted)
    if fmt == "jsonl":
        cols, rows = _jsonl_rows(path, wanted, columns)
    else:
        cols, rows = _table_rows(path, fmt, columns)
        for flag, col, default in (
            ("--id-col", id_col, "id"),
            ("--label-col", label_col, "label"),
            ("--annotator-col", annotator_col, None),
        ):
            if col is None or col in cols:
                continue
            if col == default:
                raise UserError(
                    f"labels file {str(path)!r} has columns {cols}; required: {columns} "
                    f"(or name yours with {flag})"
                )
            raise UserError(
                f"{flag} {col!r} is not a column of labels file {str(path)!r}; columns are {cols}"
            )
    if not rows:
        raise UserError(f"labels file {str(path)!r} has no rows")
    first_line = 1 if fmt == "jsonl" else 2

    def column(name: str, *, exact: bool = False) -> list[str]:
        k = cols.index(name)
        return [row[k] if exact else row[k].strip() for row in rows]

    raw_labels = column(label_col)
    for i, value in enumerate(raw_labels):
        if value not in ("0", "1"):
            raise UserError(
                f"labels file {str(path)!r} line {i + first_line}: label {value!r} is not "
                "allowed; allowed: 0 or 1"
            )
    labels = np.fromiter((v == "1" for v in raw_labels), dtype=np.uint8, count=len(raw_labels))
    raw_ids = column(id_col, exact=True)  # never trimmed: an id is exactly what is written
    for i, value in enumerate(raw_ids):
        if value == "":
            raise UserError(f"labels file {str(path)!r} line {i + first_line}: empty id")
    ids: Any = np.asarray(raw_ids, dtype=object)
    pop_ids_int = getattr(population, "has_default_ids", False) or np.issubdtype(
        np.asarray(population.ids_at(np.zeros(1, dtype=np.int64))).dtype, np.integer
    )
    if pop_ids_int:
        ints = []
        for i, value in enumerate(raw_ids):
            v = int(value) if _INT_ID.fullmatch(value) else None
            if v is None or not -(2**63) <= v < 2**63:
                raise UserError(
                    f"labels file {str(path)!r} line {i + first_line}: id {value!r} is not an "
                    "integer id of this population as written; allowed: integers written as "
                    "in the population (no leading zeros, sign, decimals or exponent, e.g. 793)"
                )
            ints.append(v)
        ids = np.asarray(ints, dtype=np.int64)
    annotators = None
    if annotator_col is not None:
        annotators = column(annotator_col)
        for i, value in enumerate(annotators):
            if value == "":
                raise UserError(
                    f"labels file {str(path)!r} line {i + first_line}: empty --annotator-col "
                    f"{annotator_col!r} value; allowed: a non-empty annotator name"
                )
    return LabelsFile(ids=ids, labels=labels, annotators=annotators, format=fmt)
