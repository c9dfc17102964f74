"""The manifest of an audit directory: what identifies an audit, and how to reopen one from it.

The manifest (``manifest.json``, written once, atomically, by :mod:`bayes_eval.ledger`) records
the design and its options, the metric, model, prior, seed, draws, the strata (method, sizes,
score ranges, a SHA-256 of the stratum of every item) and the population (size, fingerprint,
threshold, id kind). Reopening compares the fields in :data:`IDENTITY_KEYS` with those of the
arguments, so a ledger is never replayed against another population, other strata or another
design; :func:`open_arguments` turns a stored manifest back into the arguments of
:class:`~bayes_eval.audit.Audit`, and :func:`check_design` and :func:`audit_seed` check the
design and the seed a new audit is given.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._protocols import PopulationLike, StrataLike
from .._validation import RNGLike, as_generator, check_option
from ..designs import DESIGNS, Design, make_design
from ..ledger import LedgerError, now
from ..priors import NAMED_PRIORS

__all__ = [
    "IDENTITY_KEYS",
    "CheckedDesign",
    "audit_seed",
    "build_manifest",
    "check_design",
    "check_identity",
    "open_arguments",
    "strata_info",
]

#: fields of the manifest that must agree when an existing audit directory is reopened
IDENTITY_KEYS = (
    "design",
    "metric",
    "model",
    "prior",
    "seed",
    "draws",
    "finite_population",
    "strata",
    "population",
)


@dataclass(frozen=True, slots=True)
class CheckedDesign:
    """The design of an audit: the design object, its name and the options it was made with."""

    design: Design
    name: str
    options: dict[str, Any]


def check_design(design: Design | str, design_options: dict[str, Any] | None) -> CheckedDesign:
    """A design given by a registered name (with keyword ``design_options``) or as an object."""
    if design_options is not None and not isinstance(design_options, dict):
        raise TypeError(f"design_options={design_options!r} must be a dict or None")
    options = dict(design_options or {})
    if isinstance(design, str):
        check_option(design, "design", tuple(DESIGNS))
        return CheckedDesign(make_design(design, **options), design, options)
    if options:
        raise ValueError("design_options are only for a design given by name")
    name = str(getattr(design, "name", type(design).__name__))
    return CheckedDesign(make_design(design), name, options)


def audit_seed(rng: RNGLike) -> int:
    """The audit's seed: a non-negative int as is; from a Generator or None, a 63-bit draw."""
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        as_generator(rng)  # validates (non-negative)
        return int(rng)
    return int(as_generator(rng).integers(0, 2**63))


def jsonable(value: Any, name: str) -> Any:
    """Plain JSON data from numpy-bearing options (arrays -> lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v, name) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, name) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(
        f"{name} holds {value!r} of type {type(value).__name__}, which cannot be written to the "
        "audit manifest; allowed: numbers, strings, lists, dicts and numpy arrays"
    )


def versions() -> dict[str, str]:
    """Versions of Python and the packages an audit's numbers depend on (for a new manifest)."""
    from importlib.metadata import PackageNotFoundError, version  # ~0.1 s, only when creating

    out = {"python": platform.python_version()}
    for pkg in ("bayes-eval", "numpy", "scipy", "pandas", "xarray"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            out[pkg] = "unknown"
    return out


def strata_info(strata: StrataLike) -> dict[str, Any]:
    """The manifest's ``strata`` entry (the assignment's SHA-256 when the strata are in memory;
    strata that know their digest, such as stored ones, give ``assignment_sha256`` directly)."""
    digest = getattr(strata, "assignment_sha256", None)
    assignment = getattr(strata, "assignment", None)
    if digest is None and isinstance(assignment, np.ndarray):
        digest = hashlib.sha256(
            np.ascontiguousarray(assignment, dtype=np.int32).view(np.uint8)
        ).hexdigest()
    requested = getattr(strata, "requested", None)
    return {
        "method": getattr(strata, "method", "custom"),
        "variable": getattr(strata, "variable", "score"),
        "requested": None if requested is None else list(requested),
        "n_strata": int(strata.n_strata),
        "sizes": np.asarray(strata.sizes).astype(int).tolist(),
        "predicted": np.asarray(strata.predicted).astype(int).tolist(),
        "score_min": np.asarray(strata.score_min, dtype=float).tolist(),
        "score_max": np.asarray(strata.score_max, dtype=float).tolist(),
        "assignment_sha256": digest,
    }


def build_manifest(audit: Any) -> dict[str, Any]:
    """The manifest of ``audit`` (an :class:`~bayes_eval.audit.Audit`), as plain JSON data,
    without the package ``versions`` (no identity field; added when the manifest is written)."""
    prior = (
        audit.prior
        if isinstance(audit.prior, str)
        else {"a": audit.prior_a.tolist(), "b": audit.prior_b.tolist()}
    )
    manifest = {
        "format": "bayes_eval-audit",
        "version": 1,
        "created_at": now(),
        "design": {
            "name": audit.design_name,
            "options": jsonable(audit.design_options, "design_options"),
        },
        "metric": audit.metric,
        "model": audit.model,
        "prior": prior,
        "prior_description": audit.prior_description,
        "seed": audit.seed,
        "draws": audit.draws,
        "finite_population": audit.finite_population,
        "strata": strata_info(audit.strata),
        "population": {
            "size": int(audit.population.size),
            "fingerprint": audit.population.fingerprint(),
            "threshold": audit.population.threshold,
            "id_kind": audit.id_kind,
        },
    }
    return json.loads(json.dumps(manifest))  # exactly what a reader of the file gets


def short(value: Any, limit: int = 80) -> str:
    """A value for an error message, cut to ``limit`` characters."""
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_identity(stored: dict[str, Any], mine: dict[str, Any], path: Path) -> None:
    """Refuse to reopen ``path`` with arguments whose manifest differs in an identity field."""
    diff = [key for key in IDENTITY_KEYS if stored.get(key) != mine.get(key)]
    if diff:
        details = "; ".join(
            f"{key}: stored {short(stored.get(key))}, given {short(mine.get(key))}" for key in diff
        )
        raise ValueError(
            f"path={str(path)!r} holds an audit that does not match these arguments or "
            f"this population ({details}); use Audit.open(path, population) to resume "
            "it, or a new path"
        )


def check_population(manifest: dict[str, Any], population: PopulationLike, path: Any) -> None:
    """Refuse a population whose size or fingerprint differs from the manifest's."""
    pinfo = manifest["population"]
    if int(pinfo["size"]) != int(population.size) or pinfo["fingerprint"] != (
        population.fingerprint()
    ):
        raise ValueError(
            f"population does not match the audit in {str(path)!r} (stored size "
            f"{pinfo['size']}, fingerprint {pinfo['fingerprint'][:12]}...; given size "
            f"{population.size}, fingerprint {population.fingerprint()[:12]}...)"
        )


def restratify(manifest: dict[str, Any], population: PopulationLike, path: Any) -> StrataLike:
    """The audit's strata, made again with ``stratify`` from the manifest and checked against it."""
    from ..strata import stratify  # the stratifiers (scipy) only when strata must be re-made

    sinfo = manifest["strata"]
    if sinfo["method"] == "custom" or sinfo["requested"] is None:
        raise ValueError(f"the audit in {str(path)!r} uses custom strata; pass strata= to open it")
    strata = stratify(
        population,
        method=sinfo["method"],
        n_strata=tuple(sinfo["requested"]),
        variable=sinfo["variable"],
    )
    if strata_info(strata) != sinfo:
        raise ValueError(
            f"re-stratifying with method={sinfo['method']!r} does not reproduce the "
            f"strata stored in {str(path)!r} (a randomised stratifier?); pass strata="
        )
    return strata


def open_arguments(
    manifest: dict[str, Any],
    path: Any,
    population: PopulationLike,
    strata: StrataLike | None,
    design: Design | None,
) -> dict[str, Any]:
    """Keyword arguments of :class:`~bayes_eval.audit.Audit` that reopen the stored audit."""
    check_population(manifest, population, path)
    if strata is None:
        strata = restratify(manifest, population, path)
    dinfo = manifest["design"]
    if design is None:
        if dinfo["name"] not in DESIGNS:
            raise ValueError(
                f"the audit in {str(path)!r} used design {dinfo['name']!r}, which is not a "
                "registered design; pass design= (the same design object)"
            )
        design, options = dinfo["name"], dinfo["options"]
    else:
        options = None
    prior = manifest["prior"]
    if isinstance(prior, dict):
        prior = (np.asarray(prior["a"], dtype=float), np.asarray(prior["b"], dtype=float))
    elif prior not in NAMED_PRIORS:  # pragma: no cover - written by us
        raise LedgerError(f"manifest prior {prior!r} is not understood")
    return {
        "strata": strata,
        "metric": manifest["metric"],
        "design": design,
        "design_options": options,
        "prior": prior,
        "rng": int(manifest["seed"]),
        "model": manifest["model"],
        "draws": int(manifest["draws"]),
        "finite_population": bool(manifest["finite_population"]),
    }
