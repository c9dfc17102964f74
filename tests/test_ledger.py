"""The crash-safe ledger and the atomic manifest."""

from __future__ import annotations

import json
import os

import pytest

from bayes_eval.ledger import (
    Ledger,
    LedgerError,
    encode_line,
    read_ledger,
    read_manifest,
    write_json_atomic,
)


def _new(tmp_path):
    led = Ledger.create(tmp_path / "ledger.jsonl", {"manifest_sha256": "abc"})
    led.append([{"type": "label", "id": i, "label": i % 2} for i in range(5)])
    return led


def test_round_trip(tmp_path):
    led = _new(tmp_path)
    led.append([{"type": "label", "id": "x", "label": 1}])
    led.close()
    records, good, torn = read_ledger(tmp_path / "ledger.jsonl")
    assert not torn and good == os.path.getsize(tmp_path / "ledger.jsonl")
    assert records[0]["type"] == "header" and records[0]["manifest_sha256"] == "abc"
    assert [r["id"] for r in records[1:]] == [0, 1, 2, 3, 4, "x"]
    # every line is plain JSON with a crc field (human readable)
    first = (tmp_path / "ledger.jsonl").read_text().splitlines()[1]
    assert json.loads(first)["crc"] > 0


def test_create_refuses_existing(tmp_path):
    _new(tmp_path).close()
    with pytest.raises(FileExistsError):
        Ledger.create(tmp_path / "ledger.jsonl", {})


@pytest.mark.parametrize("cut", [1, 7, 20])
def test_torn_tail_is_detected_and_repaired(tmp_path, cut):
    led = _new(tmp_path)
    led.close()
    path = tmp_path / "ledger.jsonl"
    good_size = path.stat().st_size
    line = encode_line({"type": "label", "id": 99, "label": 1})
    with open(path, "ab") as fh:
        fh.write(line[:cut])  # an interrupted write: no newline
    records, good, torn = read_ledger(path)
    assert torn and good == good_size and len(records) == 6
    led, records, repaired = Ledger.open(path)
    assert repaired and path.stat().st_size == good_size
    led.append([{"type": "label", "id": 7, "label": 0}])
    led.close()
    records, _, torn = read_ledger(path)
    assert not torn and records[-1]["id"] == 7 and len(records) == 7


def test_bad_crc_on_last_line_is_torn(tmp_path):
    _new(tmp_path).close()
    path = tmp_path / "ledger.jsonl"
    with open(path, "ab") as fh:
        fh.write(b'{"type":"label","id":5,"label":1,"crc":1}\n')
    records, _, torn = read_ledger(path)
    assert torn and len(records) == 6


def test_damage_before_the_end_is_an_error(tmp_path):
    _new(tmp_path).close()
    path = tmp_path / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"label":1', b'"label":0')  # crc no longer matches
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerError, match="damaged at line 3"):
        read_ledger(path)


def test_foreign_file_is_refused(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(LedgerError, match="not a bayes_eval ledger"):
        Ledger.open(path)


def test_crc_field_is_reserved():
    with pytest.raises(ValueError, match="crc"):
        encode_line({"crc": 3})


def test_manifest_atomic_write(tmp_path):
    write_json_atomic(tmp_path / "manifest.json", {"a": 1})
    write_json_atomic(tmp_path / "manifest.json", {"a": 2, "b": [1, 2]})
    assert read_manifest(tmp_path) == {"a": 2, "b": [1, 2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # no tmp left


def test_manifest_missing_or_invalid(tmp_path):
    with pytest.raises(LedgerError, match="not an audit directory"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{nope")
    with pytest.raises(LedgerError, match="not valid JSON"):
        read_manifest(tmp_path)
