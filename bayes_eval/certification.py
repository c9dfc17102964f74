"""Certification: a one-sided, conservative acceptance claim about a classifier metric.

A certification states "``metric >= target`` with posterior probability at least ``level``":

.. math::

    \\text{accept} \\iff \\Pr(M \\ge t \\mid D) \\ge \\gamma
    \\iff \\ell_\\gamma \\ge t,

where :math:`\\ell_\\gamma` is the lower credible bound at level :math:`\\gamma` (the
:math:`1-\\gamma` posterior quantile). With a single look :math:`\\gamma` is the requested level.
When the labeller has looked at the posterior repeatedly and would have stopped at the first
acceptance, the nominal :math:`\\gamma` is too optimistic (Webber et al.: a nominal 95% gives an
actual 68% with a look every 20 labels); passing a
:class:`~bayes_eval.sequential.SequentialCalibration` replaces :math:`\\gamma` by the corrected
nominal level whose *actual* level, under the least-favourable truth, is the requested one.

:class:`Accept` is the matching stopping rule for :meth:`bayes_eval.Audit.run`
(``be.stop.Accept``): it calibrates itself before the first look, caches the calibration by design,
and stops as soon as the corrected certification accepts.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import json
import numbers
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._validation import RNGLike, as_generator, check_level, check_positive_int
from .posterior import MetricPosterior
from .stop import StopDecision, StopRule

__all__ = ["Accept", "Certification", "certify"]


@dataclass(frozen=True, slots=True)
class Certification:
    """Everything a reader of an acceptance claim needs.

    Attributes
    ----------
    accepted : bool
        ``prob_at_least >= level_used``.
    metric : str
    target : float
    lower_bound : float
        Lower credible bound of the metric at ``level_used``.
    prob_at_least : float
        Posterior probability ``P(metric >= target)``.
    level_requested : float
        The level the claim is made at (the *actual* level, after any correction).
    level_used : float
        The nominal level applied to the posterior: ``level_requested`` without correction,
        else ``max(level_requested, calibration.corrected_level(level_requested))`` (never
        weaker than asked).
    labels : int
        Labels behind the posterior.
    looks : int
        Looks taken at the posterior (1 = a single, final test).
    design : str or None
        Sampling design of the labels.
    prior, model : str
        Prior and model of the posterior.
    finite_population : bool
    correction : str
        How ``level_used`` was obtained (``"none"`` or the calibration's description).
    correction_mcse : float
        Monte Carlo standard error of the actual level at ``level_used`` (NaN without
        correction).
    """

    accepted: bool
    metric: str
    target: float
    lower_bound: float
    prob_at_least: float
    level_requested: float
    level_used: float
    labels: int
    looks: int
    design: str | None
    prior: str
    model: str
    finite_population: bool
    correction: str
    correction_mcse: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python fields (for JSON reports)."""
        return asdict(self)

    def __str__(self) -> str:
        verdict = "ACCEPTED" if self.accepted else "not accepted"
        return (
            f"{verdict}: P({self.metric} >= {self.target:g}) = {self.prob_at_least:.4f} "
            f"against nominal level {self.level_used:.4f} (claimed level "
            f"{self.level_requested:g}); lower bound {self.lower_bound:.4f}; {self.labels} labels, "
            f"{self.looks} look(s), design {self.design}, prior {self.prior}; "
            f"correction: {self.correction}"
        )


def _check_target(metric: str, target: Any) -> float:
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        raise TypeError(
            f"target={target!r} must be a real number in [0, 1], the range of metric {metric!r}"
        )
    t = float(target)
    if not np.isfinite(t) or not 0.0 <= t <= 1.0:
        raise ValueError(f"target={target!r} is outside the range [0, 1] of metric {metric!r}")
    return t


def certify(
    post: MetricPosterior,
    metric: str = "f1",
    target: float = 0.8,
    level: float = 0.95,
    *,
    calibration: Any = None,
    looks: int = 1,
    design: str | None = None,
) -> Certification:
    """Certify ``metric >= target`` at ``level`` from a posterior.

    Parameters
    ----------
    post : MetricPosterior
    metric : str
        A metric of ``post``.
    target : float
        In the metric's range [0, 1].
    level : float
        Claimed (actual) level in (0, 1).
    calibration : SequentialCalibration, optional
        From :func:`bayes_eval.sequential.calibrate_sequential` for the same metric and target;
        the nominal level applied is then ``calibration.corrected_level(level)``.
    looks : int
        Looks taken before this one (reported; without a calibration, more than one look means
        the claimed level is optimistic, and the correction field says so).
    design : str, optional
        Sampling design of the labels (reported).

    Returns
    -------
    Certification

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt``.

    Examples
    --------
    >>> import bayes_eval as be
    >>> post = be.estimate_counts(tp=170, fp=10, fn=20, tn=800,
    ...                           predicted_sizes=(8000, 1800), draws=20000, rng=0)
    >>> cert = be.certify(post, "f1", target=0.85, level=0.95)
    >>> cert.accepted, round(cert.lower_bound, 2)
    (True, 0.89)
    """
    if not isinstance(post, MetricPosterior):
        raise TypeError(
            f"post has type {type(post).__name__}; allowed: a MetricPosterior "
            "(from bayes_eval.estimate or Audit.estimate)"
        )
    if not isinstance(metric, str) or metric not in post.metrics:
        raise ValueError(
            f"metric={metric!r} is not in the posterior; allowed: "
            + ", ".join(repr(m) for m in post.metrics)
        )
    target = _check_target(metric, target)
    level = check_level(level, "level")
    looks = check_positive_int(looks, "looks")
    if design is not None and not isinstance(design, str):
        raise TypeError(f"design={design!r} must be a design name (str) or None")
    if calibration is None:
        used = level
        correction = (
            "none"
            if looks == 1
            else (
                f"none: {looks} looks without sequential correction, so the actual level is below "
                f"{level:g} (Webber et al. 2013)"
            )
        )
        mcse = float("nan")
    else:
        from .sequential import SequentialCalibration

        if not isinstance(calibration, SequentialCalibration):
            raise TypeError(
                f"calibration has type {type(calibration).__name__}; allowed: a "
                "SequentialCalibration from calibrate_sequential, or None"
            )
        if calibration.metric != metric or abs(calibration.target - target) > 1e-12:
            raise ValueError(
                f"calibration is for {calibration.metric} >= {calibration.target}, not "
                f"{metric} >= {target}; calibrate for the same metric and target"
            )
        # conservative: never below the requested level (a single look may already be
        # conservative at the boundary; the claim is not made weaker than asked)
        used = max(level, calibration.corrected_level(level))
        correction = calibration.describe(level)
        mcse = float(np.sqrt(level * (1 - level) / calibration.n_sims))
    p = post.prob_at_least(metric, target)
    return Certification(
        accepted=bool(p >= used),
        metric=metric,
        target=target,
        lower_bound=post.lower_bound(metric, used),
        prob_at_least=p,
        level_requested=level,
        level_used=used,
        labels=int(post.n_labels),
        looks=looks,
        design=design,
        prior=post.prior,
        model=post.model,
        finite_population=bool(post.finite_population),
        correction=correction,
        correction_mcse=mcse,
    )


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
            from .sequential import required_sims

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
    def _rates_for(self, audit: Any) -> tuple[Any, Any, str]:
        strata = audit.strata
        n, h = (np.asarray(v) for v in audit.counts())
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

    def prepare(self, audit: Any) -> None:
        """Calibrate the nominal level for the audit's design (cached)."""
        if not self.corrected:
            return
        from .sequential import calibrate_sequential, calibration_key

        strata = audit.strata
        budget = getattr(audit, "budget", None)
        batch = getattr(audit, "batch_size", None)
        if budget is None or batch is None:
            raise ValueError(
                "Accept(corrected=True) needs the audit's budget and batch_size "
                "(run the audit with budget= and batch_size=)"
            )
        from .sequential import geometric_looks

        self._batch = int(batch)
        if self.looks is None:
            self._schedule = None
        elif isinstance(self.looks, str):
            self._schedule = geometric_looks(int(batch), int(budget))
        else:
            self._schedule = np.asarray(self.looks, dtype=np.int64)
        rates, pilot, source = self._rates_for(audit)
        seed = self.rng if self.rng is not None else getattr(audit, "seed", None)
        seed_part = seed if isinstance(seed, int | np.integer | None) else "generator"
        key = calibration_key(
            sizes=np.asarray(strata.sizes),
            predicted=np.asarray(strata.predicted, dtype=int),
            design=str(audit.design_name),
            options=dict(getattr(audit, "design_options", {}) or {}),
            metric=audit.metric,
            target=self.target,
            level=self.level,
            prior=repr(audit.prior),
            batch=int(batch),
            budget=int(budget),
            rates_source=source,
            rates=rates if source in ("user", "scores") else None,
            n_sims=self.n_sims,
            max_mcse=self.max_mcse,
            seed=seed_part,
            finite_population=bool(getattr(audit, "finite_population", True)),
            looks=None if self._schedule is None else self._schedule,
        )
        self._key = key
        stored = _CACHE.get(key)
        path = getattr(audit, "path", None)
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
                metric=audit.metric,
                target=self.target,
                design=audit.design_name,
                design_options=getattr(audit, "design_options", None),
                batch_size=int(batch),
                budget=int(budget),
                looks=self._schedule,
                prior=audit.prior,
                rates=rates,
                pilot=pilot,
                rates_label=source,
                finite_population=bool(getattr(audit, "finite_population", True)),
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
                "Accept.prepare(audit) has not run yet: the corrected level is "
                "computed before the first look"
            )
        return self._stored.level_used

    # -------------------------------------------------------------------- looks
    def certification(self, audit: Any, posterior: MetricPosterior) -> Certification:
        """The rule's verdict on ``posterior`` as a :class:`Certification`."""
        if self.corrected and self._stored is None:
            self.prepare(audit)
        looks = getattr(audit, "looks", 1)
        looks = len(looks) if isinstance(looks, list | tuple) else int(looks or 1)
        cert = certify(
            posterior,
            audit.metric,
            self.target,
            self.level,
            looks=max(looks, 1),
            design=str(getattr(audit, "design_name", None)),
        )
        if not self.corrected:
            return cert
        st = self._stored
        assert st is not None
        used = st.level_used
        p = cert.prob_at_least
        scheduled = self._is_look(audit)
        note = (
            ""
            if scheduled
            else (f"; {int(audit.n_labels)} labels is not a scheduled look, so no acceptance")
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

    def _is_look(self, audit: Any) -> bool:
        batch = int(getattr(audit, "batch_size", None) or 1)
        return bool(self._scheduled(np.array(int(audit.n_labels)), batch))

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

    def check(self, audit: Any, posterior: MetricPosterior) -> StopDecision:
        """Stop when the certification accepts, or when the budget is spent."""
        cert = self.certification(audit, posterior)
        state = {
            "prob_at_least": cert.prob_at_least,
            "level_used": cert.level_used,
            "lower_bound": cert.lower_bound,
            "accepted": cert.accepted,
        }
        state["look"] = self._is_look(audit)
        if cert.accepted:
            return StopDecision(
                True,
                f"accepted: P({cert.metric} >= {cert.target:g}) = "
                f"{cert.prob_at_least:.4f} >= {cert.level_used:.4f}",
                state,
            )
        budget = getattr(audit, "budget", None)
        if budget is not None and int(audit.n_labels) >= int(budget):
            return StopDecision(True, "budget exhausted without acceptance", state)
        return StopDecision(False, "", state)
