"""Certification: a one-sided, conservative acceptance claim about a classifier metric.

A certification states "``metric >= target`` with posterior probability at least ``level``":

.. math::

    \\text{accept} \\iff \\Pr(M \\ge t \\mid D) \\ge \\gamma
    \\iff \\ell_\\gamma \\ge t,

where :math:`\\ell_\\gamma` is the lower credible bound at level :math:`\\gamma` (the
:math:`1-\\gamma` posterior quantile). With a single look :math:`\\gamma` is the requested level.
When the labeller has looked at the posterior repeatedly and would have stopped at the first
acceptance, the nominal :math:`\\gamma` is too optimistic (Webber et al.: a nominal 95% gives an
actual 68% with a look every 20 labels). Passing a :class:`~bayes_eval.sequential.Correction`
(:func:`~bayes_eval.sequential.correction_for`) replaces :math:`\\gamma` by the nominal level of
a look-dependent boundary whose false-accept rate is at most :math:`1 - \\text{level}` at the
worst of a documented family of truths at the target (:mod:`bayes_eval.sequential.truths`); the
certificate discloses that truth and the rate there with its Monte Carlo error
(:attr:`Certification.disclosure`, ``to_dict()["correction"]``). A
:class:`~bayes_eval.sequential.SequentialCalibration` (one simulated truth) is still accepted.

:class:`Accept` is the matching stopping rule for :meth:`bayes_eval.Audit.run`
(``be.stop.Accept``): it calibrates itself before the first look, caches the calibration, and
stops as soon as the corrected certification accepts; its final certificate is computed from the
same posterior as the stop decision.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ._draws import decision_level
from ._validation import check_level, check_positive_int
from .posterior import MetricPosterior
from .sequential.calibration import SequentialCalibration, check_target
from .sequential.correction import Correction

__all__ = ["Certification", "certify"]


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
    prob_mcse : float
        Monte Carlo standard error of ``prob_at_least`` from the posterior draws,
        :math:`\\sqrt{p(1-p)/D}` for :math:`D` independent draws.
    informed : bool
        False when the labels do not inform ``metric`` (a stratum it depends on has no label):
        the verdict then rests on the prior alone (see :mod:`bayes_eval._informed`).
    disclosure : tuple of (str, str)
        Human-readable rows describing the correction (nominal level at this look, the worst
        truth of the calibration family and its false-accept rate with Monte Carlo error, the
        model simulated); empty without a correction.

    Derived (properties): ``borderline`` (the margin ``|prob_at_least - level_used|`` is below
    the combined Monte Carlo error, so the verdict could flip with other draws), ``uncorrected``
    (more than one look and no sequential correction), and :meth:`headline`.
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
    prob_mcse: float = float("nan")
    informed: bool = True
    disclosure: tuple[tuple[str, str], ...] = ()

    @property
    def uncorrected(self) -> bool:
        """More than one look without a sequential correction: the actual level is below the
        claimed one (Webber et al.)."""
        return self.looks > 1 and str(self.correction).startswith("none")

    @property
    def borderline(self) -> bool:
        """The margin between ``prob_at_least`` and ``level_used`` is below the combined Monte
        Carlo standard error (of the probability and, when corrected, of the level)."""
        parts = [v for v in (self.prob_mcse, self.correction_mcse) if np.isfinite(v)]
        if not parts:
            return False
        se = float(np.sqrt(np.sum(np.square(parts))))
        return bool(abs(self.prob_at_least - self.level_used) < se)

    def headline(self) -> str:
        """One line with the verdict and the one lower bound the decision used."""
        verdict = "ACCEPTED" if self.accepted else "NOT ACCEPTED"
        flags = []
        if self.uncorrected:
            flags.append(f"UNCORRECTED for {self.looks} looks: actual level below claimed")
        if self.borderline:
            flags.append("BORDERLINE: margin below the Monte Carlo error")
        if not self.informed:
            flags.append(f"PRIOR ONLY: no label informs {self.metric}")
        flag = f" [{'; '.join(flags)}]" if flags else ""
        if abs(self.level_used - self.level_requested) > 1e-12:
            at = f"at nominal level {self.level_used:.4f}, corrected for {self.level_requested:g}"
        else:
            at = f"at level {self.level_used:g}"
        return (
            f"{verdict}{flag}: {self.metric} >= {self.target:g} claimed at level "
            f"{self.level_requested:g}; lower bound {self.lower_bound:.4f} ({at}); "
            f"P({self.metric} >= {self.target:g}) = {self.prob_at_least:.4f}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Fields as strict-JSON values (NaN and infinities become ``None``), plus
        ``borderline``, ``uncorrected`` and ``headline``. ``correction`` is a mapping of
        human-readable rows (``"method"`` and, when corrected, the :attr:`disclosure` rows: the
        worst-case truth and its false-accept rate); ``correction_description`` the one-line
        text."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "disclosure":
                continue
            if isinstance(value, float) and not np.isfinite(value):
                value = None
            elif isinstance(value, np.generic):
                value = value.item()
            out[key] = value
        out["correction_description"] = str(self.correction)
        out["correction"] = (
            {str(k): str(v) for k, v in self.disclosure}
            if self.disclosure
            else {"method": str(self.correction)}
        )
        out["borderline"] = self.borderline
        out["uncorrected"] = self.uncorrected
        out["headline"] = self.headline()
        return out

    def __str__(self) -> str:
        return (
            f"{self.headline()}; {self.labels} labels, {self.looks} look(s), design "
            f"{self.design}, prior {self.prior}; correction: {self.correction}"
        )


def certify(
    post: MetricPosterior,
    *,
    metric: str,
    target: float,
    level: float,
    calibration: Correction | SequentialCalibration | None = None,
    looks: int = 1,
    design: str | None = None,
) -> Certification:
    """Certify ``metric >= target`` at ``level`` from a posterior.

    Parameters
    ----------
    post : MetricPosterior
    metric : str
        A metric of ``post`` (keyword-only and required: there is no default claim).
    target : float
        In the metric's range [0, 1].
    level : float
        Claimed (actual) level in (0, 1).
    calibration : Correction or SequentialCalibration, optional
        A :class:`~bayes_eval.sequential.Correction` (:func:`~bayes_eval.sequential.correction_for`,
        the worst case over the family of truths at the target) applies its nominal level at
        ``post.n_labels`` labels and discloses the worst truth; a
        :class:`~bayes_eval.sequential.SequentialCalibration` (one simulated truth) applies
        ``calibration.corrected_level(level)``.
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
    >>> cert = be.certify(post, metric="f1", target=0.85, level=0.95)
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
    target = check_target(metric, target)
    level = check_level(level, "level")
    looks = check_positive_int(looks, "looks")
    if design is not None and not isinstance(design, str):
        raise TypeError(f"design={design!r} must be a design name (str) or None")
    disclosure: tuple[tuple[str, str], ...] = ()
    correction_used: Correction | None = None
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
    elif isinstance(calibration, Correction):
        if abs(calibration.level - level) > 1e-12 or (
            calibration.metric
            and (calibration.metric != metric or abs(calibration.target - target) > 1e-12)
        ):
            raise ValueError(
                f"calibration is a correction for {calibration.metric or 'metric'} >= "
                f"{calibration.target} at level={calibration.level}, not {metric} >= {target} at "
                f"level={level}; calibrate for the same claim"
            )
        used = float(calibration.level_at(int(post.n_labels)))
        correction_used = calibration
        correction = calibration.description
        mcse = float(calibration.mcse)
        disclosure = tuple(calibration.disclosure(int(post.n_labels)).items())
    else:
        if not isinstance(calibration, SequentialCalibration):
            raise TypeError(
                f"calibration has type {type(calibration).__name__}; allowed: a "
                "Correction (correction_for), a SequentialCalibration (calibrate_sequential), "
                "or None"
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
    informed = post.informed().get(metric, True) if hasattr(post, "informed") else True
    return Certification(
        # a Correction decides (an unattainable one never accepts, not even at P = 1)
        accepted=(
            correction_used.accepts(p, int(post.n_labels))
            if correction_used is not None
            else bool(p >= used)
        ),
        metric=metric,
        target=target,
        lower_bound=post.lower_bound(metric, decision_level(used)),
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
        prob_mcse=float(np.sqrt(p * (1.0 - p) / post.n_draws)),
        informed=bool(informed),
        disclosure=disclosure,
    )
