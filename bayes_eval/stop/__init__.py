"""Stopping rules for :meth:`bayes_eval.Audit.run` and :func:`bayes_eval.simulate`.

See :mod:`bayes_eval.stop._rules` for the protocol and the built-in rules, and
:mod:`bayes_eval.stop.accept` for the corrected acceptance rule ``Accept``.
"""

from ._rules import (
    BUDGET,
    AllOf,
    AnyOf,
    Budget,
    HalfWidth,
    Look,
    LowerBoundAbove,
    Procedure,
    StopDecision,
    StopRule,
    find_certifier,
    stopped_by,
    supports_many,
)
from .accept import Accept

__all__ = [
    "BUDGET",
    "Accept",
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
