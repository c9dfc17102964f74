"""bayes_eval: honest, label-efficient Bayesian evaluation of deployed classifiers.

The public API is listed in ``__all__``; everything else is implementation detail. Heavier parts
(the audit, PyMC models, Dask) are imported lazily on first use, so ``import bayes_eval`` stays
light.
"""

from __future__ import annotations

import importlib
from importlib import metadata as _metadata
from typing import Any

from .metrics import METRICS, register_metric
from .population import Population
from .posterior import MetricPosterior, estimate, estimate_counts
from .strata import Strata, stratify

try:
    __version__: str = _metadata.version("bayes-eval")
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

_LAZY = {
    "allocate": ".allocation",
    "Audit": ".audit",
    "AuditResult": ".audit",
    "simulate": ".simulation",
    "stop": ".stop",
    "certify": ".certification",
    "Certification": ".certification",
    "sequential": ".sequential",
    "calibrate_sequential": ".sequential",
    "pair_recall": ".recall",
    "PairRecall": ".recall",
    "recall_from_total": ".recall",
    "pair_recall_from_flags": ".recall",
    "pairwise_totals": ".recall",
    "compare_totals": ".recall",
    "RecallFromTotal": ".recall",
    "RecallAboveOneWarning": ".recall",
    "neighbour_terms": ".recall",
    "keyword_pair": ".recall",
    "keyword_flags": ".recall",
    "datasets": ".datasets",
    "make_design": ".designs",
    "write_report": ".report",
}

__all__ = [
    "METRICS",
    "MetricPosterior",
    "Population",
    "Strata",
    "__version__",
    "estimate",
    "estimate_counts",
    "register_metric",
    "stratify",
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayes_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
