"""An audit's directory: its writer lock, its manifest and its ledger, opened or created, and
the replay of the ledger that rebuilds the audit's state.

:class:`AuditDirectory` is what an :class:`~bayes_eval.audit.Audit` with a ``path`` holds: the
directory lock of a writer (:mod:`bayes_eval._lock`), the open, append-only ledger
(:mod:`bayes_eval.ledger`), and the records read when it was opened. Creating a new audit writes
the ledger (header with the manifest's digest) before the manifest, so a directory with a
manifest always has its ledger; a leftover ledger with only its header and no manifest is an
interrupted creation and is started again.

A reader (``read_only=True``) takes no lock and never changes the directory, except through
:meth:`AuditDirectory.append_as_reader`, which takes the writer lock just for one append (so a
``status`` can log that it looked).

Reopening an audit replays its ledger (:mod:`bayes_eval.ledger`) in order:

* ``propose``: the recorded items of each stratum are drawn again from the audit's sampler and
  must be the recorded ids, and the design is asked again for its allocation in the state it was
  first asked in (which rebuilds any state a design keeps between batches, e.g. OPT-A1's frozen
  weights) and must give the recorded counts; the design generator then takes the recorded state;
* ``label``: must be for a proposed id, and never contradict an earlier label;
* ``look`` (a look taken by :meth:`Audit.run <bayes_eval.audit.Audit.run>`) and ``event`` (a
  pre-registered claim or a logged look, :mod:`bayes_eval.audit._records`): kept, never used by
  the replay of proposals and labels.

Any disagreement is a :class:`~bayes_eval.ledger.LedgerError` naming the ledger line: a ledger
replayed against another population, seed or design version never opens with a silently
different state. The cost is O(labels + proposals), with the sampler's per-stratum set-up.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (the sequential stratified
audit whose batches are replayed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._lock import LOCK_NAME, DirectoryLock, lock_for_writer
from ..ledger import (
    COUNT_NAME,
    LEDGER_NAME,
    MANIFEST_NAME,
    Ledger,
    LedgerError,
    load_ledger,
    manifest_digest,
    read_manifest,
    write_json_atomic,
)
from ._manifest import check_identity, versions
from ._records import Claim, LookRecord, parse_event

__all__ = ["AuditDirectory", "label_lines", "proposal_line", "replay"]


class AuditDirectory:
    """The lock, manifest and ledger of one audit directory (see the module docstring).

    Parameters
    ----------
    path : Path
        The directory.
    read_only : bool
        Open without the writer lock (only :meth:`append_as_reader` may then write).
    """

    def __init__(self, path: Path, *, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        self.ledger: Ledger | None = None
        self.repaired_torn_line = False
        self._lock: Any = None

    @property
    def ledger_file(self) -> Path:
        return self.path / LEDGER_NAME

    def open(
        self, mine: dict[str, Any], owner: Any, supersede: Callable[[Any], None]
    ) -> list[dict[str, Any]]:
        """Lock (writers), then create the audit with manifest ``mine`` or check the stored one.

        Returns the ledger records after the header (empty for a new audit). ``owner`` and
        ``supersede`` go to :func:`bayes_eval._lock.lock_for_writer`.
        """
        path = self.path
        if path.exists() and not path.is_dir():
            raise ValueError(f"path={str(path)!r} exists and is not a directory")
        manifest_file = path / MANIFEST_NAME
        if self.read_only:
            if not manifest_file.exists():
                raise LedgerError(f"{str(path)!r} has no {MANIFEST_NAME}; not an audit directory")
        else:
            if not manifest_file.exists():
                path.mkdir(parents=True, exist_ok=True)
            self._lock = lock_for_writer(path, owner, supersede)
        try:
            if manifest_file.exists():
                return self._open_existing(mine)
            self._create(mine)
            return []
        except BaseException:
            self.close()
            raise

    def _open_existing(self, mine: dict[str, Any]) -> list[dict[str, Any]]:
        stored = read_manifest(self.path)
        check_identity(stored, mine, self.path)
        if self.read_only:
            records, torn = load_ledger(self.ledger_file)
        else:
            self.ledger, records, torn = Ledger.open(self.ledger_file)
        self._check_header(records, stored)
        self.repaired_torn_line = torn and not self.read_only
        return records[1:]

    def _check_header(self, records: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        if records[0].get("manifest_sha256") != manifest_digest(manifest):
            raise LedgerError(f"ledger {str(self.ledger_file)!r} belongs to a different manifest")

    def _create(self, mine: dict[str, Any]) -> None:
        path = self.path
        leftovers = {p.name for p in path.iterdir()} - {LOCK_NAME}
        if leftovers <= {LEDGER_NAME, COUNT_NAME} and LEDGER_NAME in leftovers:
            try:
                records, _ = load_ledger(self.ledger_file)
            except LedgerError:
                records = []
            if len(records) == 1 and records[0].get("type") == "header":
                self.ledger_file.unlink()  # interrupted creation: nothing was ever acknowledged
                (path / COUNT_NAME).unlink(missing_ok=True)
                leftovers = set()
        if leftovers:
            raise ValueError(
                f"path={str(path)!r} is a non-empty directory without {MANIFEST_NAME} "
                f"(holds {sorted(leftovers)[:5]}); allowed: a new or empty directory, or an "
                "existing audit directory"
            )
        mine = {**mine, "versions": versions()}
        self.ledger = Ledger.create(self.ledger_file, {"manifest_sha256": manifest_digest(mine)})
        write_json_atomic(path / MANIFEST_NAME, mine)

    def append_as_reader(self, record: dict[str, Any]) -> None:
        """Append one record without holding the directory: lock, reopen, append, release.

        Raises :class:`~bayes_eval._lock.AuditLockedError` (naming the holder's pid) while
        another writer holds the directory.
        """
        with DirectoryLock(self.path):
            ledger, records, _ = Ledger.open(self.ledger_file)
            try:
                self._check_header(records, read_manifest(self.path))
                ledger.append([record])
            finally:
                ledger.close()

    def close(self) -> bool:
        """Close the ledger and release the lock (idempotent); whether a ledger was open."""
        was_open = self.ledger is not None
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        return was_open


def proposal_line(
    round: int, counts: np.ndarray, keys: list[Any], rng_state: dict[str, Any], at: str
) -> dict[str, Any]:
    """The ledger record of one proposal (what :func:`replay` reads back)."""
    return {
        "type": "propose",
        "round": int(round),
        "counts": np.asarray(counts).tolist(),
        "ids": keys,
        "rng": rng_state,
        "at": at,
    }


def label_lines(new: list[tuple[Any, int, str | None]], at: str) -> list[dict[str, Any]]:
    """The ledger records of new labels ``(id, label, annotator or None)``."""
    lines = []
    for key, y, who in new:
        line: dict[str, Any] = {"type": "label", "id": key, "label": y, "at": at}
        if who is not None:
            line["annotator"] = who
        lines.append(line)
    return lines


def replay(audit: Any, records: list[dict[str, Any]]) -> None:
    """Apply ledger ``records`` (after the header) to a freshly made ``audit``."""
    for line, rec in enumerate(records, start=2):
        kind = rec.get("type")
        if kind == "propose":
            _replay_proposal(audit, line, rec)
        elif kind == "label":
            key, y = rec["id"], int(rec["label"])
            if key not in audit._proposed:
                raise LedgerError(f"ledger line {line}: label for id {key!r} never proposed")
            old = audit._labels.get(key)
            if old is not None:
                if old != y:
                    raise LedgerError(f"ledger line {line}: conflicting label for id {key!r}")
                continue
            audit._apply_label(key, y)
        elif kind == "look":
            audit.looks += 1
            audit._look_records.append(rec)
        elif kind == "event":
            _replay_event(audit, line, rec)
        else:
            raise LedgerError(f"ledger line {line}: unknown record type {kind!r}")


def _replay_proposal(audit: Any, line: int, rec: dict[str, Any]) -> None:
    counts = np.asarray(rec["counts"], dtype=np.int64)
    ids = rec["ids"]
    if counts.shape != audit._sizes.shape or int(counts.sum()) != len(ids):
        raise LedgerError(f"ledger line {line}: malformed proposal record")
    start = 0
    for kk in np.flatnonzero(counts):
        got = audit._sampler.draw(int(kk), int(counts[kk]))
        want = ids[start : start + int(counts[kk])]
        if [audit._canon_one(v) for v in got.tolist()] != want:
            raise LedgerError(
                f"ledger line {line}: the proposals recorded for stratum {kk} differ from what "
                "this population and seed produce; the ledger does not belong to this population"
            )
        start += int(counts[kk])
        for v in want:
            audit._proposed[v] = int(kk)
            audit._pending[v] = None
    _replay_allocation(audit, line, counts)
    audit._drawn += counts
    audit._round += 1
    audit._rng.bit_generator.state = rec["rng"]


def _replay_allocation(audit: Any, line: int, counts: np.ndarray) -> None:
    """Ask the design again for a recorded batch, in the state it was first asked in.

    Designs may remember things between batches in the audit's design memory (OPT-A1 freezes
    its standard deviations after the initial sample); calling ``allocate`` on every replayed
    proposal, with the same counts, availability, round and generator state, rebuilds that
    memory, so a resumed audit proposes
    exactly what an uninterrupted one would. The answer must be the recorded allocation; a
    different one means the design does not reproduce the ledger.
    """
    n = int(counts.sum())
    if n == 0:
        return
    state = audit.design_state()  # counts, availability and round as at the time
    again = np.asarray(audit.design.allocate(state, n, audit._rng), dtype=np.int64)
    if again.shape != counts.shape or not np.array_equal(again, counts):
        raise LedgerError(
            f"ledger line {line}: design {audit.design_name!r} now allocates "
            f"{again.tolist()} where the ledger records {counts.tolist()}; the ledger was "
            "written by a different version of the design or with other options"
        )


def _replay_event(audit: Any, line: int, rec: dict[str, Any]) -> None:
    """A claim or a logged look (proposals and labels do not depend on them)."""
    try:
        item = parse_event(rec)
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"ledger line {line}: malformed event record ({exc})") from None
    if isinstance(item, LookRecord):
        audit._looks_logged.append(item)
    elif isinstance(item, Claim) and audit._claim is not None:
        raise LedgerError(f"ledger line {line}: a second claim; an audit has one claim")
    else:
        audit._claim = item
