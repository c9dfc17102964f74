"""Event records of an audit's ledger: the pre-registered claim and the looks at the results.

An audit that certifies ``metric >= target`` is honest only if the claim was fixed before the
labels came in and every look at the results is on record: looking after every batch and stopping
at the first favourable look inflates the false-accept rate unless a sequential correction pays
for the looks (Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt``, section on sequential
acceptance). The audit directory therefore keeps both in its append-only ledger
(:mod:`bayes_eval.ledger`), as ``{"type": "event", "event": "claim" | "look", "data": {...}}``
records that the replay of proposals and labels skips:

* :class:`Claim` -- the claim registered once, at the start (metric, target, level, planned batch
  size and budget, how often the results will be looked at);
* :class:`LookRecord` -- one look at the results (``status``, ``certify``, ``report``, ...) or an
  override of the claim, with the number of labels at that time.

Both are frozen dataclasses with strict JSON round trips (:meth:`Claim.to_dict` /
:meth:`Claim.from_dict`); :meth:`from_dict` refuses unknown or missing fields, so a damaged or
foreign record is never half-read.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

from ..metrics import METRICS

__all__ = ["LOOK_SCHEDULES", "Claim", "LookRecord", "event_record", "parse_event"]

#: how often a claim's results will be looked at (the sequential correction depends on it)
LOOK_SCHEDULES = ("every-batch", "geometric")

#: ``event`` values of ledger records of type ``"event"``
EVENT_CLAIM = "claim"
EVENT_LOOK = "look"


def _fail(owner: str, field: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{owner}.{field}={value!r} is not allowed; allowed: {allowed}")


def _metric(owner: str, value: Any, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or value not in METRICS:
        allowed = ", ".join(sorted(METRICS)) + (" or None" if optional else "")
        raise _fail(owner, "metric", value, allowed)
    return value


def _unit(owner: str, field: str, value: Any, *, open_interval: bool, optional: bool) -> Any:
    if value is None and optional:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    x = float(value) if ok else math.nan
    inside = (0.0 < x < 1.0) if open_interval else (0.0 <= x <= 1.0)
    if not (ok and inside):
        span = "a number in (0, 1)" if open_interval else "a number in [0, 1]"
        raise _fail(owner, field, value, span + (" or None" if optional else ""))
    return x


def _count(owner: str, field: str, value: Any, *, low: int, optional: bool) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        what = "a positive integer" if low == 1 else "a non-negative integer"
        raise _fail(owner, field, value, what + (" or None" if optional else ""))
    return int(value)


def _flag(owner: str, field: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _fail(owner, field, value, "True, False or None")
    return value


def _keys(cls: type, data: Any) -> dict[str, Any]:
    """The fields of ``cls`` from a dict, refusing missing required and unknown keys."""
    name = cls.__name__
    if not isinstance(data, dict):
        raise TypeError(f"{name}.from_dict needs a dict, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{name} record has unknown field(s) {unknown}; allowed: {sorted(known)}")
    return dict(data)


@dataclass(frozen=True, slots=True)
class Claim:
    """The claim an audit is run to decide, registered before any label.

    Parameters
    ----------
    metric : str
        Metric of the claim (a key of :data:`bayes_eval.metrics.METRICS`).
    target : float or None
        The claim is ``metric >= target``; None registers an audit without an acceptance target
        (only estimates will be reported).
    level : float
        Credibility level in (0, 1) at which the claim is certified.
    batch_size, budget : int or None
        Planned labels per batch and in total (what the sequential correction assumes).
    looks : {"every-batch", "geometric"}
        How often the results will be looked at.

    Examples
    --------
    >>> from bayes_eval.audit import Claim
    >>> c = Claim("precision", 0.9, 0.95, batch_size=20, budget=2000)
    >>> Claim.from_dict(c.to_dict()) == c
    True
    """

    metric: str
    target: float | None
    level: float
    batch_size: int | None
    budget: int | None
    looks: str = "every-batch"

    def __post_init__(self) -> None:
        me = "Claim"
        set_ = object.__setattr__
        set_(self, "metric", _metric(me, self.metric, optional=False))
        set_(self, "target", _unit(me, "target", self.target, open_interval=False, optional=True))
        set_(self, "level", _unit(me, "level", self.level, open_interval=True, optional=False))
        set_(self, "batch_size", _count(me, "batch_size", self.batch_size, low=1, optional=True))
        set_(self, "budget", _count(me, "budget", self.budget, low=1, optional=True))
        if not isinstance(self.looks, str) or self.looks not in LOOK_SCHEDULES:
            raise _fail(me, "looks", self.looks, ", ".join(LOOK_SCHEDULES))

    def to_dict(self) -> dict[str, Any]:
        """The claim as strict JSON data (every field, in declaration order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Claim:
        """Inverse of :meth:`to_dict` (unknown or missing fields are errors)."""
        d = _keys(cls, data)
        required = ("metric", "target", "level", "batch_size", "budget")
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"Claim record lacks field(s) {missing}")
        return cls(**d)


@dataclass(frozen=True, slots=True)
class LookRecord:
    """One look at an audit's results (or an override of its claim), as kept in the ledger.

    Parameters
    ----------
    command : str
        What looked: ``"status"``, ``"certify"``, ``"report"``, ``"estimate"``, ...
    n_labels : int
        Labels recorded at the time of the look.
    metric, target, level : optional
        The claim the look evaluated (None: not a certification).
    corrected : bool or None
        Whether the verdict used the sequential correction.
    accepted : bool or None
        The verdict, when the look made one.
    claim_matches : bool or None
        Whether ``metric``/``target``/``level`` are the pre-registered claim's; None when no claim
        was registered.
    time : str
        UTC ISO-8601 time stamp; :meth:`Audit.log_look <bayes_eval.audit.Audit.log_look>` fills
        it in when empty.

    Examples
    --------
    >>> from bayes_eval.audit import LookRecord
    >>> r = LookRecord("certify", 120, metric="f1", target=0.8, level=0.95, accepted=False)
    >>> LookRecord.from_dict(r.to_dict()).accepted
    False
    """

    command: str
    n_labels: int
    metric: str | None = None
    target: float | None = None
    level: float | None = None
    corrected: bool | None = None
    accepted: bool | None = None
    claim_matches: bool | None = None
    time: str = ""

    def __post_init__(self) -> None:
        me = "LookRecord"
        set_ = object.__setattr__
        if not isinstance(self.command, str) or not self.command.strip():
            raise _fail(me, "command", self.command, "a non-empty string such as 'status'")
        set_(self, "n_labels", _count(me, "n_labels", self.n_labels, low=0, optional=False))
        set_(self, "metric", _metric(me, self.metric, optional=True))
        set_(self, "target", _unit(me, "target", self.target, open_interval=False, optional=True))
        set_(self, "level", _unit(me, "level", self.level, open_interval=True, optional=True))
        for name in ("corrected", "accepted", "claim_matches"):
            _flag(me, name, getattr(self, name))
        if not isinstance(self.time, str):
            raise _fail(me, "time", self.time, "an ISO-8601 string or ''")

    def to_dict(self) -> dict[str, Any]:
        """The look as strict JSON data (every field, in declaration order)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LookRecord:
        """Inverse of :meth:`to_dict` (unknown fields or a missing command/n_labels are errors)."""
        d = _keys(cls, data)
        missing = [k for k in ("command", "n_labels") if k not in d]
        if missing:
            raise ValueError(f"LookRecord record lacks field(s) {missing}")
        return cls(**d)


def event_record(item: Claim | LookRecord, at: str) -> dict[str, Any]:
    """The ledger record of a claim or a look."""
    kind = EVENT_CLAIM if isinstance(item, Claim) else EVENT_LOOK
    return {"type": "event", "event": kind, "data": item.to_dict(), "at": at}


def parse_event(record: dict[str, Any]) -> Claim | LookRecord:
    """The claim or look of a ledger ``event`` record (ValueError/TypeError when malformed)."""
    kind = record.get("event")
    if kind == EVENT_CLAIM:
        return Claim.from_dict(record.get("data"))
    if kind == EVENT_LOOK:
        return LookRecord.from_dict(record.get("data"))
    raise ValueError(f"unknown event {kind!r}; allowed: {EVENT_CLAIM!r}, {EVENT_LOOK!r}")
