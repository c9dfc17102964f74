"""The one calibration path: the sequential correction of an audit's procedure, cached.

:func:`correction_for` is what the ``Accept`` stop rule, the CLI's ``certify``/``report`` and the
demo call. It simulates the audit's :class:`~bayes_eval.stop.Procedure` (strata, design and
options, prior, metric, batch schedule, budget) with
:func:`~bayes_eval.sequential.calibrate_sequential`, takes the corrected nominal level for the
requested actual level, and keeps the coverage curve (nominal → actual) for reports. The result is
cached by a key of everything that changes the simulated procedure (and
:data:`~bayes_eval.sequential.CALIBRATION_VERSION`), in process and, when the audit has a
directory, in ``<audit>/sequential_calibration.json`` (several keys per file), so a resumed audit,
a later ``certify`` and the report reuse the same numbers.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import json
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .._procedure import Procedure
from .._validation import RNGLike, as_generator, check_level, check_positive_int
from .calibration import calibrate_sequential, calibration_key, geometric_looks, required_sims

__all__ = ["CACHE_FILE", "Correction", "clear_cache", "correction_for", "planning_rates"]

#: file in the audit directory holding cached corrections, by key
CACHE_FILE = "sequential_calibration.json"

#: curve columns kept with a correction
_CURVE = ("actual", "mcse", "accept_rate", "mean_labels")

_CACHE: dict[str, Correction] = {}

#: how the plausible stratum rates of the least-favourable truth may be chosen
RATE_CHOICES = ("auto", "pilot", "prior", "scores", "planning")


@dataclass(frozen=True, slots=True)
class Correction:
    """A sequential correction for one procedure, target and level.

    Attributes
    ----------
    key : str
        Hash of everything the simulation depends on.
    level : float
        The actual level asked for.
    level_used : float
        The nominal level to apply: ``max(level, corrected level)`` (never weaker than asked).
    mcse : float
        Monte Carlo standard error of the actual level at ``level_used``.
    n_sims : int
    rates_source : str
        Where the plausible stratum rates came from (``"pilot"``, ``"scores"``, ``"prior"``...).
    description : str
        One line for certificates and reports.
    looks : ndarray of int64 or None
        The look schedule simulated (None: after every batch).
    curve : xarray.Dataset
        Over ``nominal``: ``actual``, ``mcse``, ``accept_rate``, ``mean_labels``.
    """

    key: str
    level: float
    level_used: float
    mcse: float
    n_sims: int
    rates_source: str
    description: str
    looks: np.ndarray | None = field(repr=False)
    curve: xr.Dataset = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (strict: no NaN)."""
        return {
            "key": self.key,
            "level": self.level,
            "level_used": self.level_used,
            "mcse": self.mcse,
            "n_sims": self.n_sims,
            "rates_source": self.rates_source,
            "describe": self.description,
            "looks": None if self.looks is None else self.looks.tolist(),
            "curve": {
                "nominal": self.curve["nominal"].values.tolist(),
                **{name: self.curve[name].values.tolist() for name in _CURVE},
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Correction:
        """Inverse of :meth:`to_json`; ``ValueError`` on anything else."""
        try:
            c = data["curve"]
            curve = xr.Dataset(
                {name: ("nominal", np.asarray(c[name], dtype=np.float64)) for name in _CURVE},
                coords={"nominal": np.asarray(c["nominal"], dtype=np.float64)},
            )
            looks = data.get("looks")
            return cls(
                key=str(data["key"]),
                level=float(data["level"]),
                level_used=float(data["level_used"]),
                mcse=float(data["mcse"]),
                n_sims=int(data["n_sims"]),
                rates_source=str(data["rates_source"]),
                description=str(data["describe"]),
                looks=None if looks is None else np.asarray(looks, dtype=np.int64),
                curve=curve,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stored sequential correction: {exc}") from None


def clear_cache() -> None:
    """Forget the corrections computed in this process (the files stay)."""
    _CACHE.clear()


def planning_rates(strata: Any, prior_a: Any, prior_b: Any) -> tuple[np.ndarray, str]:
    """Plausible stratum rates chosen without the audit's labels: the stratum score midpoints
    when scores lie in [0, 1] (read as probabilities), else the prior means. (The calibration
    shifts them until the metric equals the target; only their shape matters.)"""
    lo, hi = np.asarray(strata.score_min), np.asarray(strata.score_max)
    if np.all(np.isfinite(lo)) and lo.min() >= 0.0 and hi.max() <= 1.0:
        return np.clip((lo + hi) / 2.0, 0.0, 1.0), "scores"
    a, b = np.asarray(prior_a, dtype=float), np.asarray(prior_b, dtype=float)
    return a / (a + b), "prior"


def _rates(procedure: Procedure, choice: Any) -> tuple[Any, Any, str]:
    """``(rates, pilot, source)`` for :func:`calibrate_sequential`."""
    strata = procedure.strata
    k = int(strata.n_strata)
    zero = np.zeros(k, dtype=np.int64)
    n = zero if procedure.pilot_n is None else np.asarray(procedure.pilot_n)
    h = zero if procedure.pilot_h is None else np.asarray(procedure.pilot_h)
    if isinstance(choice, str) and choice == "auto":
        choice = "pilot" if int(np.sum(n)) > 0 else "planning"
    if isinstance(choice, str) and choice in ("planning", "scores"):
        rates, source = planning_rates(strata, procedure.prior.a, procedure.prior.b)
        if choice == "planning" or source == "scores":
            return rates, None, source
        mid = (np.asarray(strata.score_min) + np.asarray(strata.score_max)) / 2.0
        return np.clip(mid, 0.0, 1.0), None, "scores"
    if isinstance(choice, str) and choice == "pilot":
        return "pilot", (n, h), "pilot"
    if isinstance(choice, str):
        return choice, None, choice
    return np.asarray(choice, dtype=np.float64), None, "user"


def check_rates(rates: Any) -> Any:
    """Validate a ``rates`` choice (a name of :data:`RATE_CHOICES` or an array)."""
    if isinstance(rates, str) and rates not in RATE_CHOICES:
        raise ValueError(
            f"rates={rates!r} is not one of the allowed values: "
            + ", ".join(repr(r) for r in RATE_CHOICES)
            + " or an array of per-stratum rates"
        )
    return rates


def check_looks(looks: Any) -> Any:
    """Validate a look schedule: None, ``"geometric"`` or an increasing 1-D int array."""
    if isinstance(looks, str):
        if looks != "geometric":
            raise ValueError(
                f"looks={looks!r} is not allowed; allowed: None, 'geometric' or an "
                "increasing 1-D array of label counts"
            )
    elif looks is not None:
        arr = np.asarray(looks)
        if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(
                f"looks={looks!r} is not allowed; allowed: None, 'geometric' or an "
                "increasing 1-D array of label counts"
            )
    return looks


def check_sims(n_sims: Any, level: float, max_mcse: Any) -> tuple[int, float]:
    """Validate ``n_sims`` and ``max_mcse`` for a correction at ``level``."""
    n_sims = check_positive_int(n_sims, "n_sims")
    if (
        isinstance(max_mcse, bool)
        or not isinstance(max_mcse, numbers.Real)
        or not (0 < max_mcse < 0.5)
    ):
        raise ValueError(f"max_mcse={max_mcse!r}; allowed: a number in (0, 0.5)")
    need = required_sims(level, float(max_mcse))
    if n_sims < need:
        raise ValueError(
            f"n_sims={n_sims} is too few for level={level} with max_mcse={max_mcse}; allowed: "
            f"n_sims >= {need}"
        )
    return n_sims, float(max_mcse)


def _read_file(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    if "key" in data:  # a single entry (earlier format)
        return {str(data["key"]): data}
    return data


def _write_file(file: Path, entries: dict[str, Any]) -> None:
    tmp = file.with_name(file.name + ".tmp")
    tmp.write_text(json.dumps(entries, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, file)


def correction_for(
    procedure: Procedure,
    *,
    target: float,
    level: float = 0.95,
    n_sims: int = 4000,
    max_mcse: float = 0.005,
    looks: Any = None,
    rates: Any = "auto",
    rng: RNGLike = None,
) -> Correction:
    """The sequential correction of ``procedure`` for the claim ``metric >= target`` at the
    actual ``level`` (cached; see the module docstring).

    Parameters
    ----------
    procedure : Procedure
        From :meth:`bayes_eval.Audit.procedure`; needs ``batch_size`` and ``budget``.
    target : float
    level : float
        Actual level claimed.
    n_sims, max_mcse : int, float
        Simulated audits, and the largest Monte Carlo error of the actual level accepted.
    looks : None, "geometric" or array of int
        When the rule looks (None: after every batch).
    rates : "auto", "pilot", "planning", "scores", "prior" or array
        Plausible stratum rates for the least-favourable truth: ``"auto"`` = the pilot labels of
        the procedure when it has some, else ``"planning"`` (score midpoints when scores are in
        [0, 1], else prior means).
    rng : int, Generator or None
        Seed of the simulation; default the procedure's seed.

    Returns
    -------
    Correction
    """
    level = check_level(level, "level")
    n_sims, max_mcse = check_sims(n_sims, level, max_mcse)
    check_rates(rates)
    check_looks(looks)
    budget, batch = procedure.budget, procedure.batch_size
    if budget is None or batch is None:
        raise ValueError(
            "a sequential correction needs the audit's budget and batch_size (run the audit "
            "with budget= and batch_size=)"
        )
    if looks is None:
        schedule = None
    elif isinstance(looks, str):
        schedule = geometric_looks(int(batch), int(budget))
    else:
        schedule = np.asarray(looks, dtype=np.int64)
    rate_values, pilot, source = _rates(procedure, rates)
    seed = procedure.seed if rng is None else rng
    if not (seed is None or isinstance(seed, int | np.integer)):
        seed = as_generator(seed)
    strata = procedure.strata
    prior = procedure.prior
    key = calibration_key(
        sizes=np.asarray(strata.sizes),
        predicted=np.asarray(strata.predicted, dtype=int),
        design=procedure.design,
        options=dict(procedure.design_options or {}),
        model=procedure.model,
        metric=procedure.metric,
        target=float(target),
        level=level,
        prior=[prior.description, prior.a, prior.b],
        batch=int(batch),
        budget=int(budget),
        rates_source=source,
        rates=rate_values if source in ("user", "scores", "prior") else None,
        pilot=None if pilot is None else [np.asarray(v) for v in pilot],
        n_sims=n_sims,
        max_mcse=max_mcse,
        seed=seed if isinstance(seed, int | np.integer | None) else "generator",
        finite_population=procedure.finite_population,
        looks=schedule,
    )
    found = _CACHE.get(key)
    file = None if procedure.path is None else Path(procedure.path) / CACHE_FILE
    entries = _read_file(file) if file is not None and file.is_file() else {}
    if found is None and key in entries:
        try:
            found = Correction.from_json(entries[key])
        except ValueError:
            found = None
    if found is None:
        cal = calibrate_sequential(
            strata,
            metric=procedure.metric,
            target=target,
            design=procedure.design,
            design_options=procedure.design_options or None,
            batch_size=int(batch),
            budget=int(budget),
            looks=schedule,
            prior=prior,
            rates=rate_values,
            pilot=pilot,
            rates_label=source,
            finite_population=procedure.finite_population,
            n_sims=n_sims,
            max_mcse=max_mcse,
            rng=seed,
        )
        used = max(level, cal.corrected_level(level))
        found = Correction(
            key=key,
            level=level,
            level_used=used,
            mcse=float(np.sqrt(level * (1 - level) / n_sims)),
            n_sims=n_sims,
            rates_source=source,
            description=cal.describe(level),
            looks=None if schedule is None else np.asarray(schedule, dtype=np.int64),
            curve=cal.curve[list(_CURVE)],
        )
    _CACHE[key] = found
    if file is not None and key not in entries:
        _write_file(file, {**entries, key: found.to_json()})
    return found
