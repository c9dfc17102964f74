"""bayes_eval: honest, label-efficient Bayesian evaluation of deployed classifiers.

The public API is listed in ``__all__``; everything else is implementation detail. Every public
name is imported lazily on first use (PEP 562 module ``__getattr__``), so ``import bayes_eval``
costs almost nothing and a command line tool imports only the modules its command needs.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "METRICS": ".metrics",
    "register_metric": ".metrics",
    "Population": ".population",
    "read_parquet": ".parquet",
    "MetricPosterior": ".posterior",
    "estimate": ".posterior",
    "estimate_counts": ".posterior",
    "Strata": ".strata",
    "stratify": ".strata",
    "FewerStrataWarning": ".strata",
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

__all__ = ["__version__", *sorted(_LAZY)]


def _version() -> str:
    from importlib import metadata  # ~0.1 s: only when asked

    try:
        return metadata.version("bayes-eval")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value = globals()["__version__"] = _version()
        return value
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        value = module if module.__name__.rsplit(".", 1)[-1] == name else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayes_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
