"""The persistent, sequential, stratified audit.

:class:`Audit` (:mod:`._audit`) proposes items, records labels and estimates. Its directory
(:mod:`._directory`: lock, manifest, ledger and the replay of the ledger) is checked against the
manifest (:mod:`._manifest`); the population and strata may be stored as memory maps
(:mod:`._store`). :meth:`Audit.run` is the loop of :mod:`._run`. :class:`Claim` and
:class:`LookRecord` (:mod:`._records`) are the pre-registered claim and the logged looks kept in
the ledger. ``AuditResult`` is imported on first use (with the posterior and xarray), so that
proposing and recording stay light.
"""

from __future__ import annotations

from typing import Any

from ._audit import Audit
from ._records import Claim, LookRecord

__all__ = ["Audit", "AuditResult", "Claim", "LookRecord"]


def __getattr__(name: str) -> Any:
    if name == "AuditResult":
        from ._run import AuditResult

        return AuditResult
    raise AttributeError(f"module 'bayes_eval.audit' has no attribute {name!r}")
