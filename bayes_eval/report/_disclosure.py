"""What a report discloses: the facts from which a claim can be reproduced, as text.

The disclosure block lists the claim (metric, target, level asked and used), the sequential
correction, the looks taken, design, prior, model, finite-population view, draws, labels, strata,
seed, the population fingerprint and the package versions. Every entry the certification gives
about its correction is shown: :func:`correction_entries` renders each key and value of the
``correction`` entry of ``Certification.to_dict()`` (a text or a mapping, flattened) and of every
other mapping the certification exposes, so fields added to the certification later (e.g. the
worst-case truth of a calibration) appear without a change here.

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (why the number of looks and the
correction must be disclosed).
"""

from __future__ import annotations

import dataclasses
import numbers
import platform
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import numpy as np
import xarray as xr

from ..models._profile import SCORE_READINGS

__all__ = [
    "certification_rows",
    "correction_entries",
    "disclosure_entries",
    "fmt",
    "get_first",
    "has_correction",
    "is_posterior",
    "package_versions",
]

_VERSIONED = (
    "bayes-eval",
    "numpy",
    "scipy",
    "xarray",
    "pandas",
    "arviz-base",
    "arviz-stats",
    "arviz-plots",
    "matplotlib",
    "pymc",
)


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages a result depends on."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - optional package
            out[name] = "not installed"
    return out


def is_posterior(obj: Any) -> bool:
    """Whether ``obj`` looks like a :class:`~bayes_eval.MetricPosterior`."""
    return hasattr(obj, "datatree") and hasattr(obj, "strata_table") and hasattr(obj, "metrics")


def fmt(value: Any) -> str:
    """A value as disclosure text (None as a dash, booleans as yes/no, 4 significant digits)."""
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        v = float(value)
        return f"{v:.4g}" if np.isfinite(v) else str(v)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return ", ".join(fmt(v) for v in value)
    if isinstance(value, xr.Dataset | xr.DataArray | xr.DataTree):
        return f"<{type(value).__name__}>"
    return str(value)


def get_first(obj: Any, *names: str) -> Any:
    """First attribute (or zero-argument method result) among ``names`` that exists."""
    if obj is None:
        return None
    for name in names:
        try:
            value = getattr(obj, name)
        except Exception:  # properties may raise on incomplete objects
            continue
        if value is None:
            continue
        if callable(value) and not isinstance(value, type):
            try:
                value = value()
            except TypeError:
                continue
        return value
    return None


def _flatten(prefix: str, value: Any) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` under ``prefix`` -> ``{"prefix a b": 1}`` (keys with spaces)."""
    if not isinstance(value, Mapping):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, sub in value.items():
        out.update(_flatten(f"{prefix} {str(key).replace('_', ' ')}", sub))
    return out


def _as_dict(cert: Any) -> dict[str, Any]:
    to_dict = getattr(cert, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    return {}


def correction_entries(cert: Any) -> dict[str, Any]:
    """Every key and value the certification gives about its sequential correction.

    From ``cert.to_dict()``: ``"correction"`` is the one-line description
    (``correction_description``, or the ``correction`` entry when it is a text); every key of a
    ``correction`` mapping follows as ``"correction <key>"`` (nested mappings flattened, rows
    repeating the description left out), then every other ``correction_*`` entry
    (``correction_mcse`` ...) and every other mapping-valued entry, flattened under its own
    name. Without ``to_dict`` only the ``correction`` attribute is used.

    Examples
    --------
    >>> class Cert:
    ...     def to_dict(self):
    ...         return {"metric": "f1", "correction_description": "sequential correction",
    ...                 "correction": {"worst_case": {"truth": "needle", "rate": 0.049}},
    ...                 "correction_mcse": 0.002}
    >>> correction_entries(Cert())  # doctest: +NORMALIZE_WHITESPACE
    {'correction': 'sequential correction', 'correction worst case truth': 'needle',
     'correction worst case rate': 0.049, 'correction mcse': 0.002}
    """
    d = _as_dict(cert)
    if not d:
        value = get_first(cert, "correction")
        return {} if value is None else _flatten("correction", value)
    out: dict[str, Any] = {}
    text = d.get("correction_description")
    body = d.get("correction")
    if text is None and body is not None and not isinstance(body, Mapping):
        text = body
    if text is not None:
        out["correction"] = text
    if isinstance(body, Mapping):
        rows = _flatten("correction", body)
        out.update({k: v for k, v in rows.items() if v != text})
    for key, value in d.items():
        if key in ("correction", "correction_description") or value is None:
            continue
        if key.startswith("correction_") or isinstance(value, Mapping):
            out.update(_flatten(key.replace("_", " "), value))
    return out


def has_correction(cert: Any) -> bool:
    """Whether the certification applied a sequential correction (its ``correction`` is neither
    missing, False nor a text starting with "none")."""
    value = get_first(cert, "correction")
    if value is None or value is False:
        return False
    if isinstance(value, Mapping):
        return bool(value)
    return not str(value).startswith("none")


def disclosure_entries(
    post: Any,
    audit: Any,
    result: Any,
    cert: Any,
    extra: Mapping[str, Any] | None,
    metric: str,
    level: float,
    target: float | None,
) -> dict[str, str]:
    """The disclosure block (ordered entries, values as text)."""
    tree = post.datatree
    attrs = dict(tree.attrs)
    d: dict[str, Any] = {
        "metric": metric,
        "target": target,
        "level asked": level,
    }
    if cert is not None:
        v = get_first(cert, "level_used")
        if v is not None:
            d["level used"] = v
        d.update(correction_entries(cert))
        for key, names in (
            ("looks taken", ("looks", "n_looks", "looks_taken")),
            ("labels", ("n_labels", "labels")),
        ):
            v = get_first(cert, *names)
            if v is not None:
                d[key] = v
    design = get_first(audit, "design_name") or get_first(get_first(audit, "design"), "name")
    if design is None and cert is not None:
        design = get_first(cert, "design")
    d["design"] = design
    d["prior"] = post.prior
    d["model"] = post.model
    kind = attrs.get("score_kind")  # the pooled model's reading of the scores
    if kind is not None:
        d["scores read as"] = SCORE_READINGS.get(kind, kind)
    d["finite population"] = post.finite_population
    d["Monte Carlo draws"] = post.n_draws
    d["labels used"] = post.n_labels
    method, variable = attrs.get("strata_method", "?"), attrs.get("strata_variable", "?")
    d["strata"] = f"{post.n_strata} ({method} on {variable})"
    if attrs.get("strata_requested"):
        d["strata"] += f"; asked {attrs['strata_requested']}"
    if "looks taken" not in d:
        looks = [get_first(result, "n_looks")]
        if isinstance(get_first(result, "trajectory"), xr.Dataset):
            looks.append(int(result.trajectory.sizes.get("look", 0)))
        looks += [get_first(audit, "looks"), get_first(audit, "rounds")]
        looks = [int(v) for v in looks if isinstance(v, numbers.Integral)]
        if looks and max(looks) > 0:
            d["looks taken"] = max(looks)
    if d["design"] is None:
        d["design"] = get_first(result, "design")
    seed = get_first(audit, "seed")
    if seed is None:
        seed = get_first(result, "seed")
    if seed is None:
        manifest = get_first(audit, "manifest")
        if isinstance(manifest, Mapping):
            seed = manifest.get("seed")
    d["seed"] = seed
    pop = get_first(audit, "population")
    if pop is not None and hasattr(pop, "fingerprint"):
        d["population fingerprint (sha256)"] = pop.fingerprint()
        d["population size"] = pop.size
        d["threshold"] = get_first(pop, "threshold")
    d["audit directory"] = get_first(audit, "path")
    d["posterior created"] = attrs.get("created_at")
    d.update(dict(extra or {}))
    d.update({f"version {k}": v for k, v in package_versions().items()})
    return {k: fmt(v) for k, v in d.items() if v is not None}


def certification_rows(cert: Any) -> list[tuple[str, str]]:
    """The certification table: every public field (a mapping in one cell, ``k=v`` pairs)."""
    rows: dict[str, str] = {}
    if dataclasses.is_dataclass(cert):
        for f in dataclasses.fields(cert):
            if f.name.startswith("_"):
                continue
            v = getattr(cert, f.name)
            if isinstance(v, xr.Dataset | xr.DataArray | xr.DataTree) or is_posterior(v):
                continue
            rows[f.name.replace("_", " ")] = fmt(v)
    else:
        for name in (
            "accepted",
            "metric",
            "target",
            "lower_bound",
            "prob_at_least",
            "level",
            "level_used",
            "n_labels",
            "looks",
            "design",
            "prior",
            "correction",
        ):
            v = get_first(cert, name)
            if v is not None:
                rows[name.replace("_", " ")] = fmt(v)
    return list(rows.items())
