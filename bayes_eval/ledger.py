"""Crash-safe persistence of an audit: an atomically written manifest and an append-only ledger.

Audit directory layout
----------------------
``manifest.json``
    Human-readable JSON describing the audit (design and options, metric, strata, prior, seed,
    model, draws, package versions, population size and fingerprint). Written once, atomically:
    temporary file in the same directory, ``fsync``, ``os.replace``, ``fsync`` of the directory.
``ledger.jsonl``
    Append-only JSON lines, one record per line, each with a ``crc`` field (CRC-32 of the record's
    canonical JSON without it). Record types:

    * ``{"type": "header", "format": "bayes_eval-ledger", "version": 1, "manifest_sha256": ...}``
      (first line);
    * ``{"type": "propose", "round": r, "counts": [c_0, ..., c_{K-1}], "ids": [...],
      "rng": {...}, "at": ...}``: one line per proposal batch; ``ids`` are grouped by stratum in
      stratum order (the first ``c_0`` are from stratum 0, ...), ``rng`` is the design
      generator's state after the batch;
    * ``{"type": "label", "id": ..., "label": 0 | 1, "at": ...}``: one line per recorded label;
    * ``{"type": "look", "look": i, "n_labels": ..., "mean": ..., "lower": ..., "upper": ...,
      "stop": bool, "reason": ...}``: one line per look taken by ``Audit.run``.

Durability: :meth:`Ledger.append` writes all lines of a call with one ``os.write`` on a file
opened with ``O_APPEND`` and calls ``os.fsync`` before returning; the audit acknowledges nothing
before that. A crash can therefore leave at most one incomplete (*torn*) last line, belonging to a
call that never returned. :func:`read_ledger` detects it (no final newline, invalid JSON or a bad
CRC on the last line) and :meth:`Ledger.open` truncates it away. Damage anywhere else is reported
as an error, never silently skipped.

A ledger has a single writer: do not open the same audit directory from two processes at once.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Any

__all__ = [
    "LEDGER_NAME",
    "MANIFEST_NAME",
    "Ledger",
    "LedgerError",
    "read_ledger",
    "read_manifest",
    "write_json_atomic",
]

MANIFEST_NAME = "manifest.json"
LEDGER_NAME = "ledger.jsonl"
FORMAT = "bayes_eval-ledger"
VERSION = 1


class LedgerError(ValueError):
    """A damaged or foreign audit directory."""


def now() -> str:
    """UTC time stamp, ISO 8601 to the millisecond."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def encode_line(record: dict[str, Any]) -> bytes:
    """One ledger line: the record's JSON with its CRC-32 appended as field ``crc``."""
    if "crc" in record:
        raise ValueError("ledger records may not carry their own 'crc' field")
    crc = zlib.crc32(_canonical(record))
    body = json.dumps({**record, "crc": crc}, separators=(",", ":"), ensure_ascii=True)
    return body.encode() + b"\n"


def _decode_line(raw: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or "crc" not in rec:
        return None
    crc = rec.pop("crc")
    if zlib.crc32(_canonical(rec)) != crc:
        return None
    return rec


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (tmp + fsync + replace + dir fsync).

    A reader sees either the old file or the complete new one, never a partial file.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    data = (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of an audit directory."""
    path = Path(directory) / MANIFEST_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise LedgerError(
            f"{str(directory)!r} has no {MANIFEST_NAME}; not an audit directory"
        ) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise LedgerError(f"{str(path)!r} is not valid JSON: {exc}") from None


def manifest_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON (ties a ledger to its manifest)."""
    return hashlib.sha256(_canonical(manifest)).hexdigest()


def read_ledger(path: str | Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Parse a ledger file.

    Returns
    -------
    records : list of dict
        Every complete, CRC-valid record, in order.
    good_bytes : int
        Length of the valid prefix of the file.
    torn : bool
        Whether an incomplete last line (never acknowledged) follows the valid prefix.

    Raises
    ------
    LedgerError
        A damaged line that is not the last one.
    """
    data = Path(path).read_bytes()
    records: list[dict[str, Any]] = []
    pos = 0
    lineno = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        lineno += 1
        if end < 0:  # no newline: the tail of an interrupted write
            return records, pos, True
        rec = _decode_line(data[pos:end])
        if rec is None:
            if end + 1 >= len(data):  # damaged last line: torn
                return records, pos, True
            raise LedgerError(
                f"ledger {str(path)!r} is damaged at line {lineno} (byte {pos}); it is not the "
                "last line, so it is not an interrupted write: refusing to guess"
            )
        records.append(rec)
        pos = end + 1
    return records, pos, False


class Ledger:
    """Append-only, fsync'd JSON-lines ledger (see the module docstring)."""

    def __init__(self, path: str | Path, fd: int) -> None:
        self.path = Path(path)
        self._fd = fd

    @classmethod
    def create(cls, path: str | Path, header: dict[str, Any]) -> Ledger:
        """Create a new ledger whose first line is ``header`` (fails if the file exists)."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        led = cls(path, fd)
        led.append([{"type": "header", "format": FORMAT, "version": VERSION, **header}])
        _fsync_dir(path.parent)
        return led

    @classmethod
    def open(cls, path: str | Path) -> tuple[Ledger, list[dict[str, Any]], bool]:
        """Open an existing ledger for appending; a torn last line is truncated away.

        Returns the ledger, its records (header first) and whether a torn line was repaired.
        """
        path = Path(path)
        records, good, torn = read_ledger(path)
        if not records or records[0].get("type") != "header" or records[0].get("format") != FORMAT:
            raise LedgerError(f"{str(path)!r} is not a bayes_eval ledger (no valid header line)")
        if records[0].get("version") != VERSION:
            raise LedgerError(
                f"ledger {str(path)!r} has format version {records[0].get('version')!r}; "
                f"this bayes_eval reads version {VERSION}"
            )
        if torn:
            with open(path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return cls(path, fd), records, torn

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records durably: one write of all lines, then ``fsync``."""
        if not records:
            return
        data = b"".join(encode_line(r) for r in records)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file descriptor (appending afterwards is an error)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
