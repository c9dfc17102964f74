"""The public API's type hints (STYLE.md habit 12: type hints on the public API, ``py.typed``).

Every function and method that ``bayes_eval`` exports says what it takes: no parameter is a bare
``Any`` (``**options`` and ``**model_kwargs`` pass through to a registry and may be), and every
annotation resolves to real objects (a misspelt or never-imported name fails here, not in a
user's type checker). Names imported only for type checking (``TYPE_CHECKING`` blocks, to keep
the import graph free of cycles and of optional packages) are supplied to the resolution.
"""

from __future__ import annotations

import importlib
import inspect
import typing

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayes_eval as be
from bayes_eval import datasets, labels, priors, sequential, simulation
from bayes_eval._protocols import StrataLike
from bayes_eval.audit import AuditResult
from bayes_eval.models._look import LookRefit
from bayes_eval.models._profile import ScoreProfile
from bayes_eval.models.pooled import PooledFit

#: the package and its public subpackages (each with a curated ``__all__``)
_SUBPACKAGES = (
    "audit",
    "dask",
    "datasets",
    "designs",
    "models",
    "population",
    "recall",
    "report",
    "sequential",
    "stop",
    "strata",
)
MODULES = (be, *(importlib.import_module(f"bayes_eval.{name}") for name in _SUBPACKAGES))


def _public_callables():
    out = {}
    for module in MODULES:
        prefix = "" if module is be else module.__name__.removeprefix("bayes_eval.") + "."
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    is_bound = isinstance(member, classmethod | staticmethod)
                    func = member.__func__ if is_bound else member
                    if not inspect.isfunction(func) or func.__name__ == "_no_init_or_replace_init":
                        continue  # a Protocol's placeholder __init__
                    if not attr.startswith("_") or attr == "__init__":
                        out.setdefault(func, f"{prefix}{name}.{attr}")
            elif inspect.isfunction(obj):
                out.setdefault(obj, f"{prefix}{name}")
    return [(name, func) for func, name in out.items()]


CALLABLES = _public_callables()

#: names the package imports only for type checking
_TYPE_CHECKING_NAMES = {
    "pd": pd,
    "xr": xr,
    "np": np,
    "Audit": be.Audit,
    "AuditResult": AuditResult,
    "Certification": be.Certification,
    "MetricPosterior": be.MetricPosterior,
    "SequentialCalibration": sequential.SequentialCalibration,
    "LabelledPopulation": datasets.LabelledPopulation,
    "StopRule": be.stop.StopRule,
    "StrataLike": StrataLike,
    "PooledFit": PooledFit,
    "LookRefit": LookRefit,
    "ScoreProfile": ScoreProfile,
}


def _localns():
    ns = dict(_TYPE_CHECKING_NAMES)
    try:
        from distributed import Client
    except ImportError:  # the dask extra is optional
        Client = object
    ns["Client"] = Client
    return ns


def test_the_registry_finds_the_api():
    names = {n for n, _ in CALLABLES}
    assert {"estimate", "stratify", "Audit.__init__", "Audit.record", "simulate"} <= names
    assert len(CALLABLES) > 150


@pytest.mark.parametrize(("name", "func"), CALLABLES, ids=[n for n, _ in CALLABLES])
def test_no_parameter_is_bare_any(name, func):
    sig = inspect.signature(func)
    bare = [
        p.name
        for p in sig.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.annotation in ("Any", typing.Any)
    ]
    assert not bare, f"{name}: parameters annotated Any: {bare}"


@pytest.mark.parametrize(("name", "func"), CALLABLES, ids=[n for n, _ in CALLABLES])
def test_annotations_resolve(name, func):
    hints = typing.get_type_hints(func, localns=_localns())
    params = set(inspect.signature(func).parameters) - {"self", "cls"}
    assert params <= set(hints), f"{name}: unannotated {sorted(params - set(hints))}"


@pytest.mark.parametrize(
    "alias",
    [priors.BetaSpec, priors.PriorSpec, labels.LabelsSpec, simulation.DesignChoice],
    ids=lambda a: a.__name__,
)
def test_type_aliases_evaluate(alias):
    """The ``type`` aliases are lazy: their value must still evaluate (runtime checkers such as
    beartype or typer read it) without importing pandas where the module avoids it."""
    assert alias.__value__ is not None
