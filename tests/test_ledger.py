"""The crash-safe ledger and the atomic manifest."""

from __future__ import annotations

import json
import os

import pytest

from bayes_eval.ledger import (
    COUNT_NAME,
    Ledger,
    LedgerError,
    LedgerRepairWarning,
    encode_line,
    load_ledger,
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
    with pytest.warns(LedgerRepairWarning, match="torn last line"):
        led, records, repaired = Ledger.open(path)
    assert repaired and path.stat().st_size == good_size
    led.append([{"type": "label", "id": 7, "label": 0}])
    led.close()
    records, _, torn = read_ledger(path)
    assert not torn and records[-1]["id"] == 7 and len(records) == 7


def test_bad_crc_on_complete_last_line_is_an_error_not_torn(tmp_path):
    _new(tmp_path).close()
    path = tmp_path / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    before = path.read_bytes()
    # a label edited with a stale CRC, and a flipped byte, on the last complete line
    for damaged in (
        lines[-1].replace(b'"label":0', b'"label":1'),
        lines[-1][:5] + bytes([lines[-1][5] ^ 0x01]) + lines[-1][6:],
    ):
        path.write_bytes(b"".join(lines[:-1]) + damaged)
        with pytest.raises(LedgerError, match=r"damaged at line 6.*not an interrupted write"):
            read_ledger(path)
        with pytest.raises(LedgerError, match="damaged at line 6"):
            Ledger.open(path)
    path.write_bytes(before)
    assert len(read_ledger(path)[0]) == 6


def test_sequence_numbers_and_count(tmp_path):
    _new(tmp_path).close()
    path = tmp_path / "ledger.jsonl"
    records, _, _ = read_ledger(path)
    assert [r["seq"] for r in records] == list(range(6))
    assert int((tmp_path / COUNT_NAME).read_text()) == 6
    lines = path.read_bytes().splitlines(keepends=True)
    # whole lines removed at the end: fewer records than acknowledged
    for keep in (5, 3, 1):
        path.write_bytes(b"".join(lines[:keep]))
        with pytest.raises(LedgerError, match=f"{6 - keep} line\\(s\\) were removed at the end"):
            Ledger.open(path)
        with pytest.raises(LedgerError, match="removed at the end"):
            load_ledger(path)
    # a line removed in the middle, or two swapped: sequence numbers disagree
    path.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(LedgerError, match="sequence number 3, expected 2"):
        read_ledger(path)
    path.write_bytes(b"".join([lines[0], lines[2], lines[1], *lines[3:]]))
    with pytest.raises(LedgerError, match="removed or reordered"):
        read_ledger(path)
    # the count file deleted while the ledger has sequence numbers
    path.write_bytes(b"".join(lines))
    (tmp_path / COUNT_NAME).unlink()
    with pytest.raises(LedgerError, match=r"ledger\.count. is missing"):
        Ledger.open(path)


def test_count_lagging_after_a_crash_is_caught_up(tmp_path):
    _new(tmp_path).close()
    (tmp_path / COUNT_NAME).write_text("4\n")  # crash between the ledger fsync and the count
    led, records, torn = Ledger.open(tmp_path / "ledger.jsonl")
    led.close()
    assert len(records) == 6 and not torn
    assert int((tmp_path / COUNT_NAME).read_text()) == 6


def test_old_ledger_without_sequence_numbers_still_opens(tmp_path):
    path = tmp_path / "ledger.jsonl"
    header = {"type": "header", "format": "bayes_eval-ledger", "version": 1}
    rows = [header] + [{"type": "label", "id": i, "label": 1} for i in range(3)]
    path.write_bytes(b"".join(encode_line(r) for r in rows))  # as written by 0.x: no seq
    led, records, _ = Ledger.open(path)
    assert len(records) == 4 and not any("seq" in r for r in records)
    led.append([{"type": "label", "id": 9, "label": 0}])
    led.close()
    records, _, _ = read_ledger(path)
    assert records[-1]["seq"] == 4 and int((tmp_path / COUNT_NAME).read_text()) == 5


@pytest.mark.parametrize("content", [None, b""])
def test_missing_or_empty_ledger_is_an_error(tmp_path, content):
    path = tmp_path / "ledger.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LedgerError, match="missing" if content is None else "is empty"):
        Ledger.open(path)
    assert path.exists() == (content is not None)


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
