"""The ``bayes-eval`` command line: audits run by people over days, and a one-command demo.

Commands
--------
``demo``
    An end-to-end audit, offline, on the package's demo population with a simulated judge;
    prints the certification and writes a report.
``init AUDIT --scores FILE ... [--model independent|pooled|hierarchical]``
    Create an audit directory for a scored population (Parquet or CSV) and pre-register its
    claim (metric, target, level, batch size, budget, look schedule) in the ledger. The model
    (default :data:`bayes_eval.models.DEFAULT_MODEL`) is recorded and used by every command.
``next AUDIT -n 20 [--out batch.csv]``
    Items to label next, as CSV with columns ``id,score,stratum``.
``record AUDIT labels.csv [--id-col C] [--label-col C] [--annotator-col C]``
    Record human labels from a CSV, TSV or JSON Lines file (0/1 labels); all or nothing.
``status AUDIT [--json]``
    Posterior table (prior-only metrics marked), labels per stratum, the claim and the looks,
    state of the acceptance rule.
``certify AUDIT [--uncorrected] [--json]``
    The certification ``metric >= target``; corrected for repeated looks whenever more than one
    look was taken, for the look schedule actually followed.
``report AUDIT --out report.html``
    Self-contained HTML (or ``.md``) posterior report.
``pair-recall ... [--delta-1 LO,HI]``
    Recall of two classifiers from their overlap (Bommannavar et al.).

``bayes-eval --version`` prints the version; ``-h`` is ``--help`` everywhere.

Modules: :mod:`._app` (the Typer app, one-line errors), :mod:`._directory` (the audit directory
and population cache), :mod:`._collect` (init, next, record), :mod:`._labels` (labels files),
:mod:`._verdict` (status, certify, report), :mod:`._looks` (looks, claim, correction schedule),
:mod:`._output` (tables and strict JSON), :mod:`._progress`, :mod:`._pair_recall`,
:mod:`._demo`. Heavy libraries (numpy, pandas, xarray, scipy, matplotlib) are imported inside
the commands that need them, so start-up stays fast.

The audit directory
-------------------
The :class:`~bayes_eval.Audit` keeps its manifest (design, strata, prior, seed, versions,
population fingerprint) and its append-only ledger (labels, proposals, the pre-registered claim
and every look) in the directory. The CLI adds ``cli.json``: the population file (absolute
path, format, columns, threshold, engine) with its SHA-256, and the acceptance settings (metric,
target, level, batch size, budget). Every command checks the population file and refuses to
continue if it changed.

``next`` and ``record`` hold the directory's writer lock (``lock``) while they run; a second
writer fails at once with an error naming the holder's pid. ``status``, ``certify`` and
``report`` read without a lock and take it only to append their look to the ledger.

User errors (bad options, a missing column, a label outside 0/1, an id never proposed, a changed
population file, a missing audit) print one ``error: ...`` line on stderr naming the flag as
typed and exit with status 1 (usage errors: 2).
"""

from __future__ import annotations

from . import _collect, _demo, _pair_recall, _verdict  # noqa: F401  (register the commands)
from ._app import UserError, app
from ._directory import CLI_FILE, CLI_FORMAT, file_sha256

__all__ = ["CLI_FILE", "CLI_FORMAT", "UserError", "app", "file_sha256", "main"]


def main() -> None:  # pragma: no cover - console entry point alternative
    """Run the ``bayes-eval`` command line."""
    app()
