"""The one calibration path: the sequential correction of an audit's procedure, cached.

:func:`correction_for` is what the ``Accept`` stop rule, the CLI's ``certify``/``report`` and the
demo call. It simulates the audit's :class:`~bayes_eval.stop.Procedure` (strata, design and
options, prior, **model**, metric, batch schedule, budget, looks, and the Monte Carlo draws the
decision at each look is computed from) at every truth of a documented family at the target
(:mod:`bayes_eval.sequential.truths`) and fits a look-dependent boundary
whose false-accept rate at the worst truth is at most ``1 - level``
(:mod:`bayes_eval.sequential.boundary`, :func:`~bayes_eval.sequential.calibrate_worst_case`). The
:class:`Correction` keeps the nominal level per look, the rate at every truth (which was worst,
with its Monte Carlo error) and a coverage curve (one level at every look → worst-case actual
level) for reports. The result is cached by a key of everything that changes the simulated
procedure (and :data:`~bayes_eval.sequential.CALIBRATION_VERSION`), in process and, when the
audit has a directory, in ``<audit>/sequential_calibration.json`` (several keys per file), so a
resumed audit, a later ``certify`` and the report reuse the same numbers.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from .._procedure import Procedure
from .._protocols import StrataLike, score_mean
from .._validation import (
    RNGLike,
    as_generator,
    check_level,
    check_max_mcse,
    check_n_jobs,
    check_positive_int,
)
from ..models._profile import score_profile_of
from .boundary import DEFAULT_SHAPES, DEFAULT_Z
from .calibration import (
    DEFAULT_NOMINAL,
    calibration_key,
    check_rate_array,
    geometric_looks,
    required_sims,
)
from .robust import (
    DEFAULT_MARGIN,
    DEFAULT_POSTERIOR_TRUTHS,
    WorstCaseCalibration,
    calibrate_worst_case,
)
from .truths import PROFILES

__all__ = [
    "CACHE_FILE",
    "Correction",
    "TruthRate",
    "clear_cache",
    "correction_for",
    "planning_rates",
    "scores_read",
]

#: file in the audit directory holding cached corrections, by key
CACHE_FILE = "sequential_calibration.json"

#: curve columns kept with a correction
_CURVE = ("actual", "mcse", "accept_rate", "mean_labels")

_CACHE: dict[str, Correction] = {}

#: how the plausible stratum rates of the least-favourable truth may be chosen
RATE_CHOICES = ("auto", "pilot", "prior", "scores", "planning")
_RATE_NAMES = ", ".join(repr(r) for r in RATE_CHOICES)


@dataclass(frozen=True, slots=True)
class TruthRate:
    """False-accept rate of the corrected rule at one truth of the family (in-sample).

    Attributes
    ----------
    name : str
        Profile (:mod:`bayes_eval.sequential.truths`).
    value : float
        The truth's metric (at the target).
    rate, mcse : float
        Share of simulated audits that accepted, and its Monte Carlo standard error.
    n_sims : int
    """

    name: str
    value: float
    rate: float
    mcse: float
    n_sims: int


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
        The strictest nominal level of the boundary (at the first look); never below ``level``.
        :meth:`level_at` gives the level at a given look.
    mcse : float
        Monte Carlo standard error of the false-accept rate at the worst truth.
    n_sims : int
    rates_source : str
        Where the score-shaped rates of the family came from (``"pilot"``, ``"scores"``...).
    description : str
        One line for certificates and reports.
    looks : ndarray of int64 or None
        The look schedule asked for (None: after every batch).
    curve : xarray.Dataset
        Over ``nominal`` (one level at every look): ``actual`` (1 - worst-case false-accept
        rate), ``mcse``, ``accept_rate`` (worst case), ``mean_labels`` (at the truth above the
        target).
    look_labels : ndarray of int64
        Labels at each simulated look; ``boundary`` the nominal level there.
    boundary : ndarray
    shape : float
        Shape of the boundary (0: one level for every look).
    attainable : bool
        False when no boundary holds the level at every truth: the rule then never accepts and
        the anytime-valid confidence sequence (``compare_anytime``) is the way to certify.
    truths : tuple of TruthRate
        Rate at every truth of the family; ``worst`` indexes the highest.
    model, look_model : str
        The model simulated and how its acceptance probability was simulated.
    labels_margin : float
        Mean labels to accept a classifier ``margin`` above the target (NaN if not simulated).
    margin : float
    seconds : float
        Time the calibration took.
    metric, target : str, float
        The claim calibrated (``""``/NaN for corrections stored by earlier releases).
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
    look_labels: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))
    boundary: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    shape: float = 0.0
    attainable: bool = True
    truths: tuple[TruthRate, ...] = ()
    model: str = "independent"
    look_model: str = ""
    labels_margin: float = float("nan")
    margin: float = DEFAULT_MARGIN
    seconds: float = float("nan")
    metric: str = ""
    target: float = float("nan")

    @property
    def worst(self) -> TruthRate | None:
        """The truth with the highest false-accept rate."""
        if not self.truths:
            return None
        return max(self.truths, key=lambda t: t.rate)

    def level_at(self, n_labels: ArrayLike) -> Any:
        """Nominal level at a look after ``n_labels`` labels (scalar or array): the level of the
        last simulated look at or before it (the first look's, the strictest, before any)."""
        if self.boundary.size == 0:
            return np.full(np.shape(n_labels), self.level_used)[()]
        j = np.searchsorted(self.look_labels, np.asarray(n_labels, dtype=np.int64), side="right")
        out = self.boundary[np.maximum(j - 1, 0)]
        return float(out) if np.ndim(out) == 0 else out

    def accepts(self, prob: ArrayLike, n_labels: ArrayLike) -> Any:
        """Whether ``P(metric >= target) = prob`` accepts at a look after ``n_labels`` labels
        (scalars or arrays): ``prob >= level_at(n_labels)``, and never when no nominal level
        holds alpha at every truth (``attainable`` false), not even at ``prob = 1``."""
        ok = np.asarray(prob) >= np.asarray(self.level_at(n_labels))
        ok = ok & bool(self.attainable)
        return bool(ok) if np.ndim(ok) == 0 else ok

    def disclosure(self, n_labels: int | None = None) -> dict[str, str]:
        """Human-readable rows for certificates and reports (strings, strict JSON)."""
        w = self.worst
        rows = {"method": self.description}
        if n_labels is not None:
            rows["nominal level at this look"] = f"{self.level_at(n_labels):.4f}"
        rows["nominal level per look"] = (
            f"{self.boundary[0]:.4f} (first look) to {self.boundary[-1]:.4f} (last look), "
            f"shape {self.shape:g}"
            if self.boundary.size
            else f"{self.level_used:.4f}"
        )
        rows["model simulated"] = f"{self.model} ({self.look_model})"
        if w is not None:
            rows["worst-case truth"] = f"{w.name} ({len(self.truths)} truths at the target)"
            rows["false-accept rate at the worst truth"] = (
                f"{w.rate:.4f} ± {w.mcse:.4f} (MC s.e., {w.n_sims} simulated audits; "
                f"allowed {1 - self.level:.3g})"
            )
            rows["scope"] = (
                f"held at each of the {len(self.truths)} truths of the family ("
                + ", ".join(t.name for t in self.truths)
                + "; see truth_family); a population unlike all of them is not covered by "
                "this calibration. The anytime-valid betting confidence sequence "
                "(compare_anytime) holds at every population"
            )
        if not self.attainable:
            rows["warning"] = (
                f"no nominal level holds {1 - self.level:.3g} at every truth; the rule never "
                "accepts. Use the anytime-valid betting confidence sequence "
                "(bayes_eval.sequential.compare_anytime), which needs no calibration"
            )
        if np.isfinite(self.labels_margin):
            rows[f"mean labels to accept at target + {self.margin:g}"] = f"{self.labels_margin:.0f}"
        return rows

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
            "look_labels": self.look_labels.tolist(),
            "boundary": self.boundary.tolist(),
            "shape": self.shape,
            "attainable": self.attainable,
            "truths": [
                {
                    "name": t.name,
                    "value": t.value,
                    "rate": t.rate,
                    "mcse": t.mcse,
                    "n_sims": t.n_sims,
                }
                for t in self.truths
            ],
            "model": self.model,
            "look_model": self.look_model,
            "labels_margin": None if not np.isfinite(self.labels_margin) else self.labels_margin,
            "margin": self.margin,
            "seconds": None if not np.isfinite(self.seconds) else self.seconds,
            "metric": self.metric,
            "target": None if not np.isfinite(self.target) else self.target,
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
            lm = data.get("labels_margin")
            sec = data.get("seconds")
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
                look_labels=np.asarray(data.get("look_labels", []), dtype=np.int64),
                boundary=np.asarray(data.get("boundary", []), dtype=np.float64),
                shape=float(data.get("shape", 0.0)),
                attainable=bool(data.get("attainable", True)),
                truths=tuple(
                    TruthRate(
                        str(t["name"]),
                        float(t["value"]),
                        float(t["rate"]),
                        float(t["mcse"]),
                        int(t["n_sims"]),
                    )
                    for t in data.get("truths", [])
                ),
                model=str(data.get("model", "independent")),
                look_model=str(data.get("look_model", "")),
                labels_margin=float("nan") if lm is None else float(lm),
                margin=float(data.get("margin", DEFAULT_MARGIN)),
                seconds=float("nan") if sec is None else float(sec),
                metric=str(data.get("metric", "")),
                target=float("nan") if data.get("target") is None else float(data["target"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a stored sequential correction: {exc}") from None


def clear_cache() -> None:
    """Forget the corrections computed in this process (the files stay)."""
    _CACHE.clear()


def planning_rates(strata: StrataLike, prior_a: Any, prior_b: Any) -> tuple[np.ndarray, str]:
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
    return check_rate_array(choice, k, _RATE_NAMES), None, "user"


def check_rates(rates: Any) -> Any:
    """Validate a ``rates`` choice (a name of :data:`RATE_CHOICES` or an array)."""
    if isinstance(rates, str):
        if rates not in RATE_CHOICES:
            raise ValueError(
                f"rates={rates!r} is not one of the allowed values: {_RATE_NAMES} or an array of "
                "per-stratum rates"
            )
        return rates
    return check_rate_array(rates, None, _RATE_NAMES)


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
    check_max_mcse(max_mcse)
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


def _curve(wc: WorstCaseCalibration) -> xr.Dataset:
    """Worst case over the family for one nominal level at every look (for reports)."""
    grid = DEFAULT_NOMINAL
    worst = np.zeros(grid.shape)
    s_worst = np.ones(grid.shape)
    for p in wc.prob:
        rate = (p.max(axis=1)[:, None] >= grid[None, :]).mean(axis=0)
        take = rate > worst
        worst = np.where(take, rate, worst)
        s_worst = np.where(take, p.shape[0], s_worst)
    mcse = np.sqrt(np.maximum(worst * (1 - worst), 1.0 / s_worst) / s_worst)
    if wc.margin_prob is not None:
        mx = np.maximum.accumulate(wc.margin_prob, axis=1)
        first = np.stack(
            [(mx >= g).argmax(axis=1) + (~(mx >= g).any(axis=1)) * 10**9 for g in grid]
        )
        looks = wc.looks
        used = np.where(
            first < looks.shape[0], looks[np.minimum(first, looks.shape[0] - 1)], looks[-1]
        )
        mean_labels = used.mean(axis=1).astype(np.float64)
    else:
        mean_labels = np.full(grid.shape, float(wc.looks[-1]))
    return xr.Dataset(
        {
            "accept_rate": ("nominal", worst),
            "actual": ("nominal", 1.0 - worst),
            "mcse": ("nominal", mcse),
            "mean_labels": ("nominal", mean_labels),
        },
        coords={"nominal": grid},
    )


def scores_read(model: str, strata: StrataLike) -> list[Any] | None:
    """What the simulated ``model`` reads of the scores beyond the strata's sizes and score
    ranges, for the cache key: the pooled model's covariate histogram within every stratum
    (:func:`bayes_eval.models._profile.score_profile_of`: its curve, its truths drawn from the
    posterior and its look model depend on it), the hierarchical model's stratum mean scores,
    nothing for the independent model. Two populations whose strata agree in sizes and score
    ranges but not in these give different keys."""
    if model == "pooled":
        prof = score_profile_of(strata)
        return [prof.kind, float(prof.center), np.asarray(prof.x), np.asarray(prof.weight)]
    if model == "hierarchical":
        return [np.asarray(score_mean(strata), dtype=np.float64)]
    return None


def correction_for(
    procedure: Procedure,
    *,
    target: float,
    level: float = 0.95,
    n_sims: int = 2000,
    max_mcse: float = 0.005,
    looks: str | ArrayLike | None = None,
    rates: str | ArrayLike = "auto",
    rng: RNGLike = None,
    progress: Callable[[int, int], None] | None = None,
    n_jobs: int | None = None,
) -> Correction:
    """The sequential correction of ``procedure`` for the claim ``metric >= target`` at the
    actual ``level`` (cached; see the module docstring).

    The procedure is simulated — strata, design and options, prior, **model**, metric, batch
    schedule, budget, looks — at every truth of the family at the target
    (:mod:`bayes_eval.sequential.truths`), and a look-dependent boundary holds the false-accept
    rate at ``1 - level`` at the worst of them (:func:`calibrate_worst_case`).

    Parameters
    ----------
    procedure : Procedure
        From :meth:`bayes_eval.Audit.procedure`; needs ``batch_size`` and ``budget``.
    target : float
    level : float
        Actual level claimed.
    n_sims, max_mcse : int, float
        Simulated audits per binding truth, and the largest Monte Carlo error of the actual
        level accepted (``n_sims >= level (1 - level) / max_mcse**2``).
    looks : None, "geometric" or array of int
        When the rule looks (None: after every batch).
    rates : "auto", "pilot", "planning", "scores", "prior" or array
        Score-shaped rates the family is built around: ``"auto"`` = the pilot labels of the
        procedure when it has some, else ``"planning"`` (score midpoints when scores are in
        [0, 1], else prior means).
    rng : int, Generator or None
        Seed of the simulation; default the procedure's seed.
    progress : callable ``(done, total)``, optional
        Called as the simulation advances (simulated audit-batches); not called on a cache hit.
    n_jobs : int or None
        Processes that fit the pooled look model's refits, most of a pooled calibration's work
        (:mod:`bayes_eval.models._look_pool`): ``None`` or 1 this one, ``-1`` one per CPU.
        The correction is the same bit for bit, so ``n_jobs`` is not part of the cache key.

    Returns
    -------
    Correction
    """
    level = check_level(level, "level")
    n_sims, max_mcse = check_sims(n_sims, level, max_mcse)
    check_rates(rates)
    check_looks(looks)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress={progress!r}; allowed: a callable (done, total) or None")
    n_jobs = check_n_jobs(n_jobs)
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
    zero = np.zeros(int(strata.n_strata), dtype=np.int64)
    pilot_n = zero if procedure.pilot_n is None else np.asarray(procedure.pilot_n)
    pilot_h = zero if procedure.pilot_h is None else np.asarray(procedure.pilot_h)
    key = calibration_key(
        sizes=np.asarray(strata.sizes),
        predicted=np.asarray(strata.predicted, dtype=int),
        scores=[np.asarray(strata.score_min), np.asarray(strata.score_max)],
        scores_read=scores_read(procedure.model, strata),
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
        pilot=[pilot_n, pilot_h],
        n_sims=n_sims,
        max_mcse=max_mcse,
        seed=seed if isinstance(seed, int | np.integer | None) else "generator",
        finite_population=procedure.finite_population,
        looks=schedule,
        draws=int(procedure.draws),
        family=[PROFILES, DEFAULT_POSTERIOR_TRUTHS, DEFAULT_MARGIN, DEFAULT_SHAPES, DEFAULT_Z],
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
        base = _score_base(rate_values, pilot, prior, int(strata.n_strata))
        wc = calibrate_worst_case(
            strata,
            metric=procedure.metric,
            target=target,
            level=level,
            design=procedure.design,
            design_options=procedure.design_options or None,
            batch_size=int(batch),
            budget=int(budget),
            looks=schedule,
            prior=prior,
            model=procedure.model,
            rates=base,
            pilot=(pilot_n, pilot_h),
            finite_population=procedure.finite_population,
            n_sims=n_sims,
            rng=seed,
            progress=progress,
            rates_label=source,
            draws=int(procedure.draws),
            n_jobs=n_jobs,
        )
        b = wc.boundary
        w = b.worst
        n_per = [p.shape[0] for p in wc.prob]
        found = Correction(
            key=key,
            level=level,
            level_used=float(b.nominal.max()),
            mcse=float(b.mcse[w]),
            n_sims=n_sims,
            rates_source=source,
            description=wc.describe(),
            looks=None if schedule is None else np.asarray(schedule, dtype=np.int64),
            curve=_curve(wc),
            look_labels=np.asarray(b.looks, dtype=np.int64),
            boundary=np.asarray(b.nominal, dtype=np.float64),
            shape=b.shape,
            attainable=b.attainable,
            truths=tuple(
                TruthRate(t.name, float(t.value), float(r), float(se), int(m))
                for t, r, se, m in zip(wc.truths, b.rates, b.mcse, n_per, strict=True)
            ),
            model=procedure.model,
            look_model=wc.look_model,
            labels_margin=b.labels_margin,
            margin=DEFAULT_MARGIN,
            seconds=wc.seconds,
            metric=procedure.metric,
            target=float(target),
        )
    _CACHE[key] = found
    if file is not None and key not in entries:
        _write_file(file, {**entries, key: found.to_json()})
    return found


def _score_base(rates: Any, pilot: Any, prior: Any, k: int) -> np.ndarray | None:
    """Score-shaped rates for the family: given rates, the pilot's posterior means, or None
    (the strata's score midpoints, else the prior means)."""
    a, b = np.asarray(prior.a, dtype=np.float64), np.asarray(prior.b, dtype=np.float64)
    if isinstance(rates, str) and rates == "pilot" and pilot is not None:
        n, h = (np.asarray(v, dtype=np.float64) for v in pilot)
        return (a + h) / (a + b + n)
    if isinstance(rates, str) and rates == "prior":
        return a / (a + b)
    if isinstance(rates, np.ndarray) and rates.shape == (k,):
        return rates
    return None
