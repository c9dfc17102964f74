"""The corrected acceptance rule ``Accept``: stop as soon as the certification accepts.

It calibrates the sequential correction for the audit before the first look
(:func:`bayes_eval.sequential.calibrate_sequential`), caches the calibration by what it depends
on, and certifies with :func:`bayes_eval.certify` at the corrected level.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import json
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import RNGLike, as_generator, check_level, check_positive_int
from ..certification import Certification, _check_target, certify
from ..posterior import MetricPosterior
from ._rules import Look, Procedure, StopDecision, StopRule

__all__ = ["Accept"]


# ------------------------------------------------------------------------------ stopping rule
_CACHE: dict[str, Any] = {}
_CACHE_FILE = "sequential_calibration.json"


class _StoredCalibration:
    """What :class:`Accept` keeps of a calibration (enough to certify; JSON round-trips)."""

    __slots__ = ("describe_text", "level", "level_used", "mcse", "n_sims")

    def __init__(
        self, level: float, level_used: float, mcse: float, n_sims: int, describe_text: str
    ) -> None:
        self.level = level
        self.level_used = level_used
        self.mcse = mcse
        self.n_sims = n_sims
        self.describe_text = describe_text

    def to_json(self, key: str) -> dict[str, Any]:
        return {
            "key": key,
            "level": self.level,
            "level_used": self.level_used,
            "mcse": self.mcse,
            "n_sims": self.n_sims,
            "describe": self.describe_text,
        }


class Accept(StopRule):
    """Stop when the (sequentially corrected) certification ``metric >= target`` accepts.

    Parameters
    ----------
    target : float
        Acceptance target for the audit's metric.
    level : float
        Claimed actual level.
    corrected : bool
        Calibrate the nominal level for repeated looks (:func:`calibrate_sequential`) before the
        first look. ``False`` gives the naive rule of Webber et al. (documented to over-accept).
    n_sims : int
        Simulated audits for the calibration (at least ``level (1 - level) / max_mcse**2``).
    rng : int, Generator or None
        Seed of the calibration; default the audit's seed.
    rates : "auto", "pilot", "prior", "scores" or array
        Plausible stratum rates for the least-favourable truth: ``"auto"`` uses the audit's
        labels when it already has some (pilot), else the stratum score midpoints when the
        scores lie in [0, 1] (``"scores"``, read as calibrated probabilities), else the prior means.
    max_mcse : float
        Largest Monte Carlo standard error of the actual level.
    looks : None, "geometric" or array of int
        When the rule looks: after every batch (None), at ``batch_size * 2**j`` labels and the
        budget (``"geometric"``, :func:`bayes_eval.sequential.geometric_looks`: fewer looks, a
        smaller correction, fewer labels to accept a good classifier), or at the given label
        counts (multiples of the batch size). Between looks the rule never accepts.

    Notes
    -----
    The calibration is cached by a key of strata sizes and predicted sides, design and options,
    metric, target, level, prior, batch size, budget, rates and simulation settings, in process and,
    when the audit has a ``path``, in ``<path>/sequential_calibration.json`` (so a resumed audit
    keeps its corrected level).
    """

    def __init__(
        self,
        target: float,
        level: float = 0.95,
        corrected: bool = True,
        n_sims: int = 4000,
        rng: RNGLike = None,
        *,
        rates: Any = "auto",
        max_mcse: float = 0.005,
        looks: Any = None,
    ) -> None:
        self.target = _check_target("metric", target)
        self.level = check_level(level, "level")
        if not isinstance(corrected, bool | np.bool_):
            raise TypeError(f"corrected={corrected!r} must be True or False")
        self.corrected = bool(corrected)
        self.n_sims = check_positive_int(n_sims, "n_sims")
        if (
            isinstance(max_mcse, bool)
            or not isinstance(max_mcse, numbers.Real)
            or not (0 < max_mcse < 0.5)
        ):
            raise ValueError(f"max_mcse={max_mcse!r}; allowed: a number in (0, 0.5)")
        self.max_mcse = float(max_mcse)
        if self.corrected:
            from ..sequential import required_sims

            need = required_sims(self.level, self.max_mcse)
            if self.n_sims < need:
                raise ValueError(
                    f"n_sims={self.n_sims} is too few for level={self.level} with "
                    f"max_mcse={self.max_mcse}; allowed: n_sims >= {need}"
                )
        if rng is not None:
            as_generator(rng)  # validate now
        self.rng = rng
        if isinstance(rates, str) and rates not in ("auto", "pilot", "prior", "scores"):
            raise ValueError(
                f"rates={rates!r} is not one of the allowed values: 'auto', "
                "'pilot', 'prior', 'scores' or an array of per-stratum rates"
            )
        self.rates = rates
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
        self.looks = looks
        self._schedule: np.ndarray | None = None
        self._batch = 1
        self._stored: _StoredCalibration | None = None
        self._key: str | None = None

    def __repr__(self) -> str:
        return (
            f"Accept(target={self.target}, level={self.level}, corrected={self.corrected}, "
            f"n_sims={self.n_sims})"
        )

    # -------------------------------------------------------------------- calibration
    def _rates_for(self, procedure: Procedure) -> tuple[Any, Any, str]:
        strata = procedure.strata
        k = int(strata.n_strata)
        zero = np.zeros(k, dtype=np.int64)
        n = zero if procedure.pilot_n is None else np.asarray(procedure.pilot_n)
        h = zero if procedure.pilot_h is None else np.asarray(procedure.pilot_h)
        choice = self.rates
        if isinstance(choice, str) and choice == "auto":
            if int(np.sum(n)) > 0:
                choice = "pilot"
            elif (
                np.all(np.isfinite(strata.score_min))
                and strata.score_min.min() >= 0
                and strata.score_max.max() <= 1
            ):
                choice = "scores"
            else:
                choice = "prior"
        if isinstance(choice, str) and choice == "scores":
            mid = (np.asarray(strata.score_min) + np.asarray(strata.score_max)) / 2.0
            return np.clip(mid, 0.0, 1.0), None, "scores"
        if isinstance(choice, str) and choice == "pilot":
            return "pilot", (n, h), "pilot"
        if isinstance(choice, str):
            return choice, None, choice
        return np.asarray(choice, dtype=np.float64), None, "user"

    def prepare(self, procedure: Procedure) -> None:
        """Calibrate the nominal level for the audit's procedure (cached)."""
        if not self.corrected:
            return
        from ..sequential import calibrate_sequential, calibration_key

        strata = procedure.strata
        budget = procedure.budget
        batch = procedure.batch_size
        if budget is None or batch is None:
            raise ValueError(
                "Accept(corrected=True) needs the audit's budget and batch_size "
                "(run the audit with budget= and batch_size=)"
            )
        from ..sequential import geometric_looks

        self._batch = int(batch)
        if self.looks is None:
            self._schedule = None
        elif isinstance(self.looks, str):
            self._schedule = geometric_looks(int(batch), int(budget))
        else:
            self._schedule = np.asarray(self.looks, dtype=np.int64)
        rates, pilot, source = self._rates_for(procedure)
        seed = self.rng if self.rng is not None else procedure.seed
        seed_part = seed if isinstance(seed, int | np.integer | None) else "generator"
        key = calibration_key(
            sizes=np.asarray(strata.sizes),
            predicted=np.asarray(strata.predicted, dtype=int),
            design=procedure.design,
            options=dict(procedure.design_options or {}),
            metric=procedure.metric,
            target=self.target,
            level=self.level,
            prior=[procedure.prior.description, procedure.prior.a, procedure.prior.b],
            batch=int(batch),
            budget=int(budget),
            rates_source=source,
            rates=rates if source in ("user", "scores") else None,
            n_sims=self.n_sims,
            max_mcse=self.max_mcse,
            seed=seed_part,
            finite_population=procedure.finite_population,
            looks=None if self._schedule is None else self._schedule,
        )
        self._key = key
        stored = _CACHE.get(key)
        path = procedure.path
        file = Path(path) / _CACHE_FILE if path is not None else None
        if stored is None and file is not None and file.exists():
            try:
                data = json.loads(file.read_text())
            except (OSError, ValueError):
                data = {}
            if data.get("key") == key:
                stored = _StoredCalibration(
                    data["level"],
                    data["level_used"],
                    data["mcse"],
                    data["n_sims"],
                    data["describe"],
                )
        if stored is None:
            cal = calibrate_sequential(
                strata,
                metric=procedure.metric,
                target=self.target,
                design=procedure.design,
                design_options=procedure.design_options,
                batch_size=int(batch),
                budget=int(budget),
                looks=self._schedule,
                prior=procedure.prior,
                rates=rates,
                pilot=pilot,
                rates_label=source,
                finite_population=procedure.finite_population,
                n_sims=self.n_sims,
                max_mcse=self.max_mcse,
                rng=seed,
            )
            used = max(self.level, cal.corrected_level(self.level))
            stored = _StoredCalibration(
                self.level,
                used,
                float(np.sqrt(self.level * (1 - self.level) / self.n_sims)),
                self.n_sims,
                cal.describe(self.level),
            )
        _CACHE[key] = stored
        if file is not None:
            tmp = file.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(stored.to_json(key), indent=1))
            os.replace(tmp, file)
        self._stored = stored

    @property
    def level_used(self) -> float:
        """Nominal level applied (the corrected one after :meth:`prepare`)."""
        if not self.corrected:
            return self.level
        if self._stored is None:
            raise RuntimeError(
                "Accept.prepare(procedure) has not run yet: the corrected level is "
                "computed before the first look"
            )
        return self._stored.level_used

    # -------------------------------------------------------------------- looks
    def certification(self, look: Look, posterior: MetricPosterior) -> Certification:
        """The rule's verdict on ``posterior`` as a :class:`Certification`."""
        if self.corrected and self._stored is None:
            self.prepare(look.procedure)
        cert = certify(
            posterior,
            look.metric,
            self.target,
            self.level,
            looks=max(int(look.looks), 1),
            design=look.procedure.design,
        )
        if not self.corrected:
            return cert
        st = self._stored
        assert st is not None
        used = st.level_used
        p = cert.prob_at_least
        scheduled = self._is_look(look)
        note = (
            ""
            if scheduled
            else (f"; {int(look.n_labels)} labels is not a scheduled look, so no acceptance")
        )
        return Certification(
            accepted=bool(p >= used) and scheduled,
            metric=cert.metric,
            target=cert.target,
            lower_bound=posterior.lower_bound(cert.metric, used),
            prob_at_least=p,
            level_requested=self.level,
            level_used=used,
            labels=cert.labels,
            looks=cert.looks,
            design=cert.design,
            prior=cert.prior,
            model=cert.model,
            finite_population=cert.finite_population,
            correction=st.describe_text + note,
            correction_mcse=st.mcse,
        )

    def _scheduled(self, n_labels: np.ndarray, batch: int) -> np.ndarray:
        """Whether the batch that ended at ``n_labels`` crossed a scheduled look count (so a
        resumed audit, whose batches are offset, still looks once per scheduled count)."""
        n_labels = np.asarray(n_labels, dtype=np.int64)
        if self._schedule is None:
            return np.ones(n_labels.shape, dtype=bool)
        upto = np.searchsorted(self._schedule, n_labels, side="right")
        before = np.searchsorted(self._schedule, n_labels - batch, side="right")
        return upto > before

    def _is_look(self, look: Look) -> bool:
        batch = int(look.procedure.batch_size or 1)
        return bool(self._scheduled(np.array(int(look.n_labels)), batch))

    def start_many(self, n_reps: int) -> dict[str, Any]:
        """Vectorised form for :func:`bayes_eval.simulate` (no per-replication state)."""
        return {}

    def check_many(
        self, draws: np.ndarray, n_labels: np.ndarray, state: dict[str, Any], rows: np.ndarray
    ) -> np.ndarray:
        """Accept where ``mean(draws >= target) >= level_used`` (rows of metric draws)."""
        p = np.mean(np.asarray(draws) >= self.target, axis=-1)
        ok = p >= self.level_used
        if self._schedule is not None:
            ok &= self._scheduled(np.asarray(n_labels), self._batch)
        return ok

    def check(self, look: Look, posterior: MetricPosterior) -> StopDecision:
        """Stop when the certification accepts, or when the budget is spent."""
        cert = self.certification(look, posterior)
        state = {
            "prob_at_least": cert.prob_at_least,
            "level_used": cert.level_used,
            "lower_bound": cert.lower_bound,
            "accepted": cert.accepted,
        }
        state["look"] = self._is_look(look)
        if cert.accepted:
            return StopDecision(
                True,
                f"accepted: P({cert.metric} >= {cert.target:g}) = "
                f"{cert.prob_at_least:.4f} >= {cert.level_used:.4f}",
                state,
            )
        budget = look.procedure.budget
        if budget is not None and int(look.n_labels) >= int(budget):
            return StopDecision(True, "budget exhausted without acceptance", state)
        return StopDecision(False, "", state)
