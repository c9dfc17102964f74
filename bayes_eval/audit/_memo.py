"""The design priors an audit's design was given, kept so that reopening need not refit them.

Before every proposal the design is given per-stratum Beta priors
(:func:`bayes_eval.models.design_prior`): for ``"independent"`` the prior itself, for the
``"pooled"`` model its allocation Betas (each stratum's rate on the fitted curve) and for the
``"hierarchical"`` model its empirical-Bayes priors, from a fit of the model to the counts
``n_k, h_k`` of that moment (about 10 ms for the pooled model). Reopening an audit replays
every proposal of its ledger and asks the design again, in the state it was first asked in
(:func:`bayes_eval.audit._directory.replay`), so a command late in a pooled audit refitted the
model once per batch of its history: about 0.8 s for 100 batches, paid by every ``next`` and
``record``.

:class:`PriorMemo` keeps the priors given to the design, keyed by the counts, in
``design_priors.jsonl`` of the audit directory: a header line (format, the manifest's digest,
the model), then one line per state ``{"n": [...], "h": [...], "a": [...], "b": [...]}``,
appended by the writer after each proposal (floats written by ``json`` round-trip exactly). A
replay takes the priors from it and fits only the states it lacks. The file is a record of what
the design was given, not a source of truth for the audit: it is never needed (an absent,
foreign or damaged file, or a torn last line, only means fitting again), and the ledger's
replay still checks every recorded allocation against the design.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (the sequential stratified
audit whose batches are replayed).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MEMO_NAME", "PriorMemo"]

MEMO_NAME = "design_priors.jsonl"
_FORMAT = "bayes_eval-design-priors"


class PriorMemo:
    """Design priors by counts: read from, and appended to, ``design_priors.jsonl``.

    Parameters
    ----------
    path : Path or None
        The audit directory (None: kept in memory only).
    manifest_sha256 : str
        Digest of the audit's manifest (a memo of another audit is ignored).
    model : str
        The audit's model.
    k : int
        Number of strata.
    """

    def __init__(self, path: Path | None, manifest_sha256: str, model: str, k: int) -> None:
        self.file = None if path is None else Path(path) / MEMO_NAME
        self.header = {
            "type": "header",
            "format": _FORMAT,
            "version": 1,
            "manifest_sha256": manifest_sha256,
            "model": model,
        }
        self.k = int(k)
        self._priors: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._unsaved: list[dict[str, Any]] = []
        self._file_ok = False  # the file exists with our header (appending is enough)
        if self.file is not None:
            self._read()

    @staticmethod
    def _key(n: np.ndarray, h: np.ndarray) -> bytes:
        return np.asarray(n, dtype=np.int64).tobytes() + np.asarray(h, dtype=np.int64).tobytes()

    def _read(self) -> None:
        assert self.file is not None
        try:
            lines = self.file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return
        try:
            head = json.loads(lines[0]) if lines else None
        except ValueError:
            return
        if head != self.header:
            return
        self._file_ok = True
        for line in lines[1:]:
            if not line:
                continue
            try:
                rec = json.loads(line)
                n, h = (np.asarray(rec[x], dtype=np.int64) for x in ("n", "h"))
                a, b = (np.asarray(rec[x], dtype=np.float64) for x in ("a", "b"))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line (or a damaged one): that state is fitted again
            shapes = {n.shape, h.shape, a.shape, b.shape}
            if shapes != {(self.k,)} or not (np.isfinite(a).all() and np.isfinite(b).all()):
                continue
            if (a + h <= 0).any() or (b + n - h <= 0).any():  # the design's Beta must be proper
                continue
            self._priors[self._key(n, h)] = (a, b)

    def __len__(self) -> int:
        return len(self._priors)

    def get(self, n: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The priors given at counts ``n, h`` (copies), or None."""
        hit = self._priors.get(self._key(n, h))
        return None if hit is None else (hit[0].copy(), hit[1].copy())

    def put(self, n: np.ndarray, h: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        """Remember the priors ``a, b`` given at counts ``n, h`` (saved by :meth:`save`)."""
        a = np.array(a, dtype=np.float64)
        b = np.array(b, dtype=np.float64)
        key = self._key(n, h)
        if key in self._priors:
            return
        self._priors[key] = (a, b)
        self._unsaved.append(
            {
                "n": np.asarray(n).astype(int).tolist(),
                "h": np.asarray(h).astype(int).tolist(),
                "a": a.tolist(),
                "b": b.tolist(),
            }
        )

    def save(self) -> None:
        """Append the new states to the file (a writer only; a failure just means fitting
        them again next time). A missing or foreign file is started anew."""
        if self.file is None or not self._unsaved:
            return
        lines = [json.dumps(rec, separators=(",", ":")) for rec in self._unsaved]
        with contextlib.suppress(OSError):
            if not self._file_ok:
                from ..ledger import write_bytes_atomic

                text = "\n".join([json.dumps(self.header, separators=(",", ":")), *lines])
                write_bytes_atomic(self.file, (text + "\n").encode("utf-8"))
                self._file_ok = True
            else:
                with open(self.file, "ab+") as fh:
                    fh.seek(0, 2)
                    torn = fh.tell() > 0 and (fh.seek(-1, 2), fh.read(1))[1] != b"\n"
                    text = ("\n" if torn else "") + "\n".join(lines) + "\n"
                    fh.write(text.encode("utf-8"))
            self._unsaved.clear()
