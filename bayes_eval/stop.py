"""Stopping rules for :meth:`bayes_eval.Audit.run`.

A stopping rule is an object with

* ``prepare(audit) -> None``: called once by ``Audit.run`` before the first look (a corrected
  acceptance rule calibrates itself here);
* ``check(audit, posterior) -> StopDecision``: called after every recorded batch with the current
  :class:`~bayes_eval.MetricPosterior`;
* optionally ``certification(audit, posterior)``: the rule's verdict as a
  :class:`~bayes_eval.Certification` (acceptance rules only).

Rules combine with ``|`` (stop when any says stop) and ``&`` (stop when all do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AllOf", "AnyOf", "StopDecision", "StopRule"]


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Outcome of one look: whether to stop, a human-readable reason, and the rule's state."""

    stop: bool
    reason: str = ""
    state: dict[str, Any] = field(default_factory=dict)


class StopRule:
    """Base class for stopping rules (see module docstring)."""

    def prepare(self, audit: Any) -> None:
        """Called once before the first look."""

    def check(self, audit: Any, posterior: Any) -> StopDecision:  # pragma: no cover - abstract
        raise NotImplementedError("subclasses implement check()")

    def __or__(self, other: StopRule) -> AnyOf:
        return AnyOf(self, other)

    def __and__(self, other: StopRule) -> AllOf:
        return AllOf(self, other)


class AnyOf(StopRule):
    """Stop as soon as any of the rules says stop."""

    def __init__(self, *rules: StopRule) -> None:
        flat: list[StopRule] = []
        for r in rules:
            if not isinstance(r, StopRule):
                raise TypeError(f"stop rule {r!r} has type {type(r).__name__}; allowed: StopRule")
            flat.extend(r.rules if isinstance(r, AnyOf) else (r,))
        self.rules = tuple(flat)

    def prepare(self, audit: Any) -> None:
        for r in self.rules:
            r.prepare(audit)

    def check(self, audit: Any, posterior: Any) -> StopDecision:
        decisions = [r.check(audit, posterior) for r in self.rules]
        hit = [d.reason for d in decisions if d.stop]
        return StopDecision(bool(hit), "; ".join(hit),
                            {"rules": [d.state for d in decisions]})

    def __repr__(self) -> str:
        return " | ".join(repr(r) for r in self.rules)


class AllOf(StopRule):
    """Stop only when every rule says stop."""

    def __init__(self, *rules: StopRule) -> None:
        for r in rules:
            if not isinstance(r, StopRule):
                raise TypeError(f"stop rule {r!r} has type {type(r).__name__}; allowed: StopRule")
        self.rules = tuple(rules)

    def prepare(self, audit: Any) -> None:
        for r in self.rules:
            r.prepare(audit)

    def check(self, audit: Any, posterior: Any) -> StopDecision:
        decisions = [r.check(audit, posterior) for r in self.rules]
        ok = all(d.stop for d in decisions)
        return StopDecision(ok, "; ".join(d.reason for d in decisions) if ok else "",
                            {"rules": [d.state for d in decisions]})

    def __repr__(self) -> str:
        return " & ".join(repr(r) for r in self.rules)
