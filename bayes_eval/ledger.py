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
    * ``{"type": "label", "id": ..., "label": 0 | 1, "at": ...}``: one line per recorded label
      (with ``"annotator": name`` when the labeller was given);
    * ``{"type": "look", "look": i, "n_labels": ..., "mean": ..., "lower": ..., "upper": ...,
      "stop": bool, "reason": ...}``: one line per look taken by ``Audit.run``;
    * ``{"type": "event", "event": "claim" | "look", "data": {...}, "at": ...}``: the
      pre-registered claim (once) and every logged look at the results or override of the claim
      (:mod:`bayes_eval.audit._records`); the replay of proposals and labels skips them.

Every record written by this version also carries ``seq``, its 0-based line number (the header
is 0), so a removed or reordered line is detected. ``ledger.count`` holds the number of
acknowledged records (a fixed-width decimal, rewritten in place and ``fsync``'d after each
append and before the append returns); a ledger with fewer records than that count lost
acknowledged lines and is refused. Ledgers written before sequence numbers (no ``seq`` fields, no
``ledger.count``) are read as before.

Durability: :meth:`Ledger.append` writes all lines of a call with one ``os.write`` on a file
opened with ``O_APPEND`` and calls ``os.fsync`` before returning; the audit acknowledges nothing
before that. A crash can therefore leave at most one incomplete (*torn*) last line, belonging to a
call that never returned, and an incomplete line is exactly one without its final newline.
:func:`read_ledger` reports it and :meth:`Ledger.open` truncates it away with a
:class:`LedgerRepairWarning`. A damaged complete line (bad JSON or CRC), even the last one, a
missing or empty ledger, and a ledger shorter than its count are errors, never silently repaired.

A ledger has a single writer, enforced by the directory lock of :mod:`bayes_eval._lock`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Any

__all__ = [
    "COUNT_NAME",
    "LEDGER_NAME",
    "MANIFEST_NAME",
    "Ledger",
    "LedgerError",
    "LedgerRepairWarning",
    "fsync_dir",
    "read_ledger",
    "read_manifest",
    "write_bytes_atomic",
    "write_json_atomic",
]

MANIFEST_NAME = "manifest.json"
LEDGER_NAME = "ledger.jsonl"
COUNT_NAME = "ledger.count"
_COUNT_WIDTH = 20
FORMAT = "bayes_eval-ledger"
VERSION = 1


class LedgerError(ValueError):
    """A damaged or foreign audit directory."""


class LedgerRepairWarning(UserWarning):
    """A torn (never acknowledged) last ledger line was cut on reopening."""


def count_path(ledger_path: str | Path) -> Path:
    """The ``ledger.count`` file next to a ledger."""
    return Path(ledger_path).with_name(COUNT_NAME)


def read_count(ledger_path: str | Path) -> int | None:
    """Acknowledged record count from ``ledger.count`` (None: no count file, an old ledger)."""
    path = count_path(ledger_path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise LedgerError(
            f"{str(path)!r} is damaged ({text[:40]!r}); it should hold the number of "
            "acknowledged ledger records"
        ) from None


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


def fsync_dir(path: str | Path) -> None:
    """``fsync`` the directory ``path``, so that a rename or a new file in it is durable."""
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
    """Write ``obj`` as indented JSON to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (tmp + fsync + replace + dir fsync).

    A reader sees either the old file or the complete new one, never a partial file.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


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
        Whether an incomplete last line (no final newline: never acknowledged) follows the valid
        prefix.

    Raises
    ------
    LedgerError
        A missing or empty file, a damaged complete line (even the last), or a record whose
        sequence number is not its line number (lines removed or reordered).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise LedgerError(
            f"ledger {str(path)!r} is missing: the audit's labels are gone; restore it from a "
            "backup (it is never re-created for an existing audit)"
        ) from None
    if not data:
        raise LedgerError(
            f"ledger {str(path)!r} is empty: its header and all labels are gone; restore it "
            "from a backup"
        )
    records: list[dict[str, Any]] = []
    pos = 0
    lineno = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:  # no newline: the tail of an interrupted write
            return records, pos, True
        rec = _decode_line(data[pos:end])
        if rec is None and lineno == 0:
            raise LedgerError(
                f"{str(path)!r} is not a bayes_eval ledger (its first line is not a valid header)"
            )
        if rec is None:
            where = "the last line" if end + 1 >= len(data) else "not the last line"
            raise LedgerError(
                f"ledger {str(path)!r} is damaged at line {lineno + 1} (byte {pos}): bad JSON or "
                f"CRC on a complete line ({where}), so it is not an interrupted write; "
                "refusing to guess"
            )
        seq = rec.get("seq")
        if seq is not None and seq != lineno:
            raise LedgerError(
                f"ledger {str(path)!r} line {lineno + 1} has sequence number {seq!r}, expected "
                f"{lineno}: lines were removed or reordered"
            )
        records.append(rec)
        lineno += 1
        pos = end + 1
    return records, pos, False


def _check_header(path: Path, records: list[dict[str, Any]]) -> None:
    if not records or records[0].get("type") != "header" or records[0].get("format") != FORMAT:
        raise LedgerError(f"{str(path)!r} is not a bayes_eval ledger (no valid header line)")
    if records[0].get("version") != VERSION:
        raise LedgerError(
            f"ledger {str(path)!r} has format version {records[0].get('version')!r}; "
            f"this bayes_eval reads version {VERSION}"
        )


def _check_count(path: Path, records: list[dict[str, Any]], count: int | None) -> None:
    if count is None:
        if any("seq" in r for r in records[1:]):
            raise LedgerError(
                f"{str(count_path(path))!r} is missing but ledger {str(path)!r} was written with "
                "sequence numbers: removed trailing lines could not be detected; restore it"
            )
        return
    if len(records) < count:
        raise LedgerError(
            f"ledger {str(path)!r} has {len(records)} complete records but {count} were "
            f"acknowledged ({COUNT_NAME}): {count - len(records)} line(s) were removed at the "
            "end; restore the ledger from a backup"
        )


def load_ledger(path: str | Path) -> tuple[list[dict[str, Any]], bool]:
    """Read-only, lock-free: the records of a ledger (a torn tail is ignored, not cut).

    The count is read before the ledger, so a concurrent writer (which appends, then updates
    the count) never makes a consistent ledger look short.
    """
    path = Path(path)
    count = read_count(path)
    records, _, torn = read_ledger(path)
    _check_header(path, records)
    _check_count(path, records, count)
    return records, torn


class Ledger:
    """Append-only, fsync'd JSON-lines ledger (see the module docstring)."""

    def __init__(self, path: str | Path, fd: int, n_records: int = 0) -> None:
        self.path = Path(path)
        self._fd = fd
        self._n = n_records
        self._count_fd = -1

    @classmethod
    def create(cls, path: str | Path, header: dict[str, Any]) -> Ledger:
        """Create a new ledger whose first line is ``header`` (fails if the file exists)."""
        path = Path(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        led = cls(path, fd)
        led.append([{"type": "header", "format": FORMAT, "version": VERSION, **header}])
        fsync_dir(path.parent)
        return led

    @classmethod
    def open(cls, path: str | Path) -> tuple[Ledger, list[dict[str, Any]], bool]:
        """Open an existing ledger for appending; a torn last line is truncated away (warned).

        Returns the ledger, its records (header first) and whether a torn line was repaired.
        The caller must hold the directory's writer lock.
        """
        path = Path(path)
        count = read_count(path)
        records, good, torn = read_ledger(path)
        _check_header(path, records)
        _check_count(path, records, count)
        if torn:
            size = path.stat().st_size
            with open(path, "r+b") as fh:
                fh.truncate(good)
                fh.flush()
                os.fsync(fh.fileno())
            warnings.warn(
                f"ledger {str(path)!r}: cut a torn last line ({size - good} bytes without a "
                "final newline, from a write that was interrupted and never acknowledged)",
                LedgerRepairWarning,
                stacklevel=3,
            )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        led = cls(path, fd, len(records))
        if count is not None and count != len(records):  # crashed between append and count
            led._write_count()
        return led, records, torn

    def _write_count(self) -> None:
        if self._count_fd < 0:
            self._count_fd = os.open(count_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(self._count_fd, f"{self._n:0{_COUNT_WIDTH}d}\n".encode(), 0)
        os.fsync(self._count_fd)

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records durably: one write of all lines, ``fsync``, then the count, ``fsync``."""
        if not records:
            return
        data = b"".join(encode_line({**r, "seq": self._n + i}) for i, r in enumerate(records))
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        self._n += len(records)
        self._write_count()

    def close(self) -> None:
        """Close the file descriptor (appending afterwards is an error)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._count_fd >= 0:
            os.close(self._count_fd)
            self._count_fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
