"""Stopping rules for :meth:`bayes_eval.Audit.run` and :func:`bayes_eval.simulate`.

A stopping rule is an object with

* ``prepare(procedure) -> None``: called once by ``Audit.run`` (and by :func:`bayes_eval.simulate`)
  before the first look with the :class:`Procedure` being run — strata, metric, design, model,
  prior, batch size, budget, seed (a corrected acceptance rule calibrates this exact procedure
  here; the built-in rules reset their state);
* ``check(look, posterior) -> StopDecision``: called after every recorded batch with the
  :class:`Look` (the procedure, labels so far, looks so far) and the current
  :class:`~bayes_eval.MetricPosterior`;
* optionally ``certification(look, posterior)``: the rule's verdict as a
  :class:`~bayes_eval.Certification` (acceptance rules only). ``Audit.run`` stores it as
  ``result.certification``.

Rules never see the audit object itself, so the same rule runs unchanged in a real audit and in
thousands of simulated ones.

For :func:`bayes_eval.simulate`, which runs many audits in lock-step, a rule may also implement
the vectorised pair

* ``start_many(n_reps) -> state`` (a dict of arrays, one entry per replication) and
* ``check_many(draws, n_labels, state, rows) -> stop``: ``draws`` are the metric's posterior draws
  of the replications ``rows`` (shape ``(len(rows), D)``), ``n_labels`` their label counts; returns
  a boolean array over ``rows`` and updates ``state[...][rows]`` in place.

Rules without it are run by :func:`~bayes_eval.simulate` one replication at a time through
``check`` (slower, same result).

Rules combine with ``|`` (stop when any says stop) and ``&`` (stop when all do).

Built-in rules: :class:`Budget`, :class:`HalfWidth` (Bennett & Carvalho's rule: the equal-tailed
interval is within ±δ for T consecutive rounds), :class:`LowerBoundAbove` (naive acceptance:
the nominal lower bound clears a target, uncorrected for repeated looks — see Webber et al. for
why that overstates confidence). The corrected acceptance rule ``Accept(target, level=0.95,
corrected=True)`` lives in :mod:`bayes_eval.certification` and is available here as
``bayes_eval.stop.Accept``.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (±δ with confidence 1-α for T
consecutive rounds). Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (peeking at a
nominal lower bound inflates false acceptance).
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._procedure import Look, Procedure
from .._validation import check_level, check_positive_int
from ..sequential.calibration import check_target

if TYPE_CHECKING:
    from ..posterior import MetricPosterior

__all__ = [
    "BUDGET",
    "AllOf",
    "AnyOf",
    "Budget",
    "HalfWidth",
    "Look",
    "LowerBoundAbove",
    "Procedure",
    "StopDecision",
    "StopRule",
    "find_certifier",
    "stopped_by",
    "supports_many",
]


@dataclass(frozen=True, slots=True)
class StopDecision:
    """Outcome of one look: whether to stop, a human-readable reason, and the rule's state.

    ``by`` names what stopped the audit where the rule's own repr would not say it: a combination
    (:class:`AnyOf`) names the rule inside it that stopped, and a rule that stops only because the
    budget is spent (an acceptance rule that never accepted) says :data:`BUDGET`. Empty means the
    rule itself; :func:`stopped_by` resolves it.
    """

    stop: bool
    reason: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    by: str = ""


#: what :func:`stopped_by` names when the audit ran out of budget rather than being stopped by a
#: rule (also :func:`bayes_eval.simulate`'s ``stopped_by`` for audits no rule stopped)
BUDGET = "budget"


def stopped_by(rule: StopRule, decision: StopDecision) -> str:
    """What stopped an audit whose ``rule`` returned ``decision`` with ``decision.stop`` true.

    The repr of the rule (:func:`rule_name`; inside an :class:`AnyOf`, of the first rule in it
    that stopped for a reason other than the budget), or :data:`BUDGET` when it stopped only
    because the budget is spent — the same names :func:`bayes_eval.simulate` gives on its
    vectorised path, so its ``stopped_by`` reads alike for every model.
    """
    return decision.by or rule_name(rule)


def rule_name(rule: StopRule) -> str:
    """``repr(rule)``, or the class name of a rule without a ``__repr__`` of its own (the default
    repr holds the object's address, which differs between the copies simulated audits run)."""
    return repr(rule) if type(rule).__repr__ is not object.__repr__ else type(rule).__name__


class StopRule(ABC):
    """Base class for stopping rules (see module docstring)."""

    def prepare(self, procedure: Procedure) -> None:  # noqa: B027 - optional hook, no-op by default
        """Called once before the first look."""

    @abstractmethod
    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        """Decide after a look whether to stop."""

    def start_many(self, n_reps: int) -> dict[str, Any]:  # pragma: no cover - optional
        """Optional vectorised form (see :func:`supports_many`); rules without it refuse."""
        raise TypeError(
            f"{type(self).__name__} has no vectorised form; check supports_many(rule) first "
            "(bayes_eval.simulate then runs the rule one replication at a time)"
        )

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:  # pragma: no cover - optional
        """Optional vectorised form (see :func:`supports_many`); rules without it refuse."""
        raise TypeError(
            f"{type(self).__name__} has no vectorised form; check supports_many(rule) first "
            "(bayes_eval.simulate then runs the rule one replication at a time)"
        )

    def __or__(self, other: StopRule) -> AnyOf:
        return AnyOf(self, other)

    def __and__(self, other: StopRule) -> AllOf:
        return AllOf(self, other)


def supports_many(rule: StopRule) -> bool:
    """Whether ``rule`` (and every rule inside it) has the vectorised ``check_many`` form."""
    if isinstance(rule, AnyOf | AllOf):
        return all(supports_many(r) for r in rule.rules)
    return type(rule).check_many is not StopRule.check_many


def find_certifier(rule: StopRule | None) -> StopRule | None:
    """The first rule (depth first, inside ``AnyOf``/``AllOf`` too) with a ``certification``
    method, or None."""
    if rule is None:
        return None
    if callable(getattr(rule, "certification", None)):
        return rule
    for r in getattr(rule, "rules", ()):
        found = find_certifier(r)
        if found is not None:
            return found
    return None


def _check_rule(r: Any) -> StopRule:
    if not isinstance(r, StopRule):
        raise TypeError(f"stop rule {r!r} has type {type(r).__name__}; allowed: StopRule")
    return r


class _Combined(StopRule):
    """Rules combined by ``|`` or ``&``: nested combinations of the same kind are flattened;
    every rule is prepared and sees every look."""

    #: " | " or " & "
    _joiner = ""

    def __init__(self, *rules: StopRule) -> None:
        flat: list[StopRule] = []
        for r in rules:
            _check_rule(r)
            flat.extend(r.rules if type(r) is type(self) else (r,))  # type: ignore[attr-defined]
        if not flat:
            raise ValueError(
                f"{type(self).__name__}() has no rule; allowed: one or more stop rules (with none, "
                "AnyOf would never stop and AllOf would stop at the first look)"
            )
        self.rules = tuple(flat)

    def prepare(self, procedure: Procedure) -> None:
        for r in self.rules:
            r.prepare(procedure)

    def start_many(self, n_reps: int) -> dict[str, Any]:
        return {"rules": [r.start_many(n_reps) for r in self.rules]}

    def _each_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> list[np.ndarray]:
        return [
            r.check_many(draws, n_labels, st, rows)
            for r, st in zip(self.rules, state["rules"], strict=True)
        ]

    def __repr__(self) -> str:
        return self._joiner.join(repr(r) for r in self.rules)


class AnyOf(_Combined):
    """Stop as soon as any of the rules says stop."""

    _joiner = " | "

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        decisions = [r.check(look, posterior) for r in self.rules]
        hit = [(r, d) for r, d in zip(self.rules, decisions, strict=True) if d.stop]
        names = [stopped_by(r, d) for r, d in hit]
        by = next((b for b in names if b != BUDGET), BUDGET if hit else "")
        return StopDecision(
            bool(hit),
            "; ".join(d.reason for _, d in hit),
            {"rules": [d.state for d in decisions]},
            by,
        )

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        out = np.zeros(len(rows), dtype=bool)
        for hit in self._each_many(draws, n_labels, state, rows):
            out |= hit
        return out


class AllOf(_Combined):
    """Stop only when every rule says stop."""

    _joiner = " & "

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        decisions = [r.check(look, posterior) for r in self.rules]
        ok = all(d.stop for d in decisions)
        spent = ok and any(d.by == BUDGET for d in decisions)
        return StopDecision(
            ok,
            "; ".join(d.reason for d in decisions) if ok else "",
            {"rules": [d.state for d in decisions]},
            BUDGET if spent else "",
        )

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        # every rule sees every look (stateful rules keep counting)
        out = np.ones(len(rows), dtype=bool)
        for hit in self._each_many(draws, n_labels, state, rows):
            out &= hit
        return out


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise TypeError(f"{name}={value!r} must be a finite real number")
    return float(value)


class Budget(StopRule):
    """Stop once the audit holds at least ``n`` labels.

    Parameters
    ----------
    n : int
        Label budget (all recorded labels of the audit, including those of earlier runs).
    """

    def __init__(self, n: int) -> None:
        self.n = check_positive_int(n, "n")

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        used = int(look.n_labels)
        stop = used >= self.n
        return StopDecision(
            stop, f"budget of {self.n} labels reached" if stop else "", {"n_labels": used}
        )

    def start_many(self, n_reps: int) -> dict[str, Any]:
        return {}

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        return np.asarray(n_labels) >= self.n

    def __repr__(self) -> str:
        return f"Budget({self.n})"


class HalfWidth(StopRule):
    """Bennett & Carvalho's rule: the metric is known to ±δ at ``level`` for T consecutive looks.

    At every look the equal-tailed ``level`` credible interval ``[l, u]`` of the audit's metric is
    computed; the look *passes* when its half-width

    .. math:: w = (u - l) / 2 \\le \\delta,

    and the rule stops after ``rounds`` consecutive passing looks.

    Parameters
    ----------
    delta : float
        Target half-width, in (0, 1].
    level : float
        Credible level of the interval (Bennett & Carvalho: 1 - α = 0.95).
    rounds : int
        Consecutive passing looks required (their T).

    References
    ----------
    Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``, Figure 1 (stopping
    condition).

    Examples
    --------
    >>> import bayes_eval as be
    >>> be.stop.HalfWidth(0.01, level=0.95, rounds=2)
    HalfWidth(0.01, level=0.95, rounds=2)
    """

    def __init__(self, delta: float, level: float = 0.95, rounds: int = 1) -> None:
        delta = _real(delta, "delta")
        if not 0.0 < delta <= 1.0:
            raise ValueError(f"delta={delta!r} is outside the allowed range (0, 1]")
        self.delta = delta
        self.level = check_level(level, "level")
        self.rounds = check_positive_int(rounds, "rounds")
        self._streak = 0

    def prepare(self, procedure: Procedure) -> None:
        self._streak = 0

    def half_width(self, draws: np.ndarray) -> np.ndarray:
        """Half-width of the equal-tailed interval of draws along the last axis."""
        lo, hi = np.quantile(draws, [(1 - self.level) / 2, (1 + self.level) / 2], axis=-1)
        return (hi - lo) / 2

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        w = float(self.half_width(posterior.draws(look.metric)))
        self._streak = self._streak + 1 if w <= self.delta else 0
        stop = self._streak >= self.rounds
        reason = (
            (
                f"half-width {w:.4g} <= {self.delta:g} at level {self.level:g} for "
                f"{self._streak} consecutive look(s)"
            )
            if stop
            else ""
        )
        return StopDecision(stop, reason, {"half_width": w, "streak": self._streak})

    def start_many(self, n_reps: int) -> dict[str, Any]:
        return {"streak": np.zeros(n_reps, dtype=np.int64)}

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        w = self.half_width(draws)
        streak = state["streak"]
        streak[rows] = np.where(w <= self.delta, streak[rows] + 1, 0)
        return streak[rows] >= self.rounds

    def __repr__(self) -> str:
        return f"HalfWidth({self.delta:g}, level={self.level:g}, rounds={self.rounds})"


class LowerBoundAbove(StopRule):
    """Naive acceptance: stop when the one-sided ``level`` lower credible bound of the metric is at
    least ``target``.

    The bound is the ``1 - level`` posterior quantile. Checked after every batch, this rule is
    *not* corrected for repeated looks: its false-acceptance rate is well above ``1 - level``
    (Webber et al. measured 31.55% at nominal 95%). Use ``bayes_eval.stop.Accept`` for the
    calibrated version.

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt``.
    """

    def __init__(self, target: float, level: float = 0.95) -> None:
        self.target = check_target(None, target)
        self.level = check_level(level, "level")

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        lb = float(np.quantile(posterior.draws(look.metric), 1.0 - self.level))
        stop = lb >= self.target
        reason = (
            (
                f"{look.metric} lower bound {lb:.4g} >= {self.target:g} at level "
                f"{self.level:g} (uncorrected)"
            )
            if stop
            else ""
        )
        return StopDecision(stop, reason, {"lower_bound": lb})

    def start_many(self, n_reps: int) -> dict[str, Any]:
        return {}

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        return np.quantile(draws, 1.0 - self.level, axis=-1) >= self.target

    def __repr__(self) -> str:
        return f"LowerBoundAbove({self.target:g}, level={self.level:g})"
