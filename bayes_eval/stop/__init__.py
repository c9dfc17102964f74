"""Stopping rules for :meth:`bayes_eval.Audit.run` and :func:`bayes_eval.simulate`.

See :mod:`bayes_eval.stop._rules` for the protocol and the built-in rules, and
:mod:`bayes_eval.stop.accept` for the corrected acceptance rule ``Accept``.
"""

from ._rules import (
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
    supports_many,
)
from .accept import Accept

__all__ = [
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
    "supports_many",
]
