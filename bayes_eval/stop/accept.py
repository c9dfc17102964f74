"""The corrected acceptance rule ``Accept``: stop as soon as the certification accepts.

It calibrates the sequential correction for the audit before the first look
(:func:`bayes_eval.sequential.calibrate_sequential`), caches the calibration by what it depends
on, and certifies with :func:`bayes_eval.certify` at the corrected level.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._draws import decision_level
from .._validation import (
    RNGLike,
    as_generator,
    check_bool,
    check_level,
    check_max_mcse,
    check_n_jobs,
    check_positive_int,
)
from ..certification import Certification, certify
from ..posterior import MetricPosterior
from ..sequential.calibration import check_target
from ..sequential.correction import (
    Correction,
    check_looks,
    check_rates,
    check_sims,
    correction_for,
)
from ._rules import BUDGET, Look, Procedure, StopDecision, StopRule

__all__ = ["Accept"]


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
        Simulated audits per binding truth of the calibration (at least
        ``level (1 - level) / max_mcse**2``).
    rng : int, Generator or None
        Seed of the calibration; default the audit's seed.
    rates : "auto", "pilot", "planning", "prior", "scores" or array
        Score-shaped stratum rates around which the family of truths at the target is built
        (:mod:`bayes_eval.sequential.truths`): ``"auto"`` uses the audit's
        labels when it already has some (pilot), else the stratum score midpoints when the
        scores lie in [0, 1] (``"scores"``, read as calibrated probabilities), else the prior means
        (:func:`bayes_eval.sequential.correction_for`).
    max_mcse : float
        Largest Monte Carlo standard error of the actual level.
    looks : None, "geometric" or array of int
        When the rule looks: after every batch (None), at ``batch_size * 2**j`` labels and the
        budget (``"geometric"``, :func:`bayes_eval.sequential.geometric_looks`: fewer looks, a
        smaller correction, fewer labels to accept a good classifier), or at the given label
        counts (multiples of the batch size). Between looks the rule never accepts.
    n_jobs : int or None
        Processes the calibration uses (:func:`bayes_eval.sequential.correction_for`): ``None``
        or 1 this one, ``-1`` one per CPU; the same corrected levels whatever it is.

    Notes
    -----
    The calibration (:func:`bayes_eval.sequential.correction_for`) simulates the audit's exact
    procedure, model included, at every truth of a family at the target and applies a nominal
    level per look (stricter early) that holds ``1 - level`` false accepts at the worst truth;
    the certificate discloses that truth and its rate. The calibration is cached by a key of
    strata sizes, scores and predicted sides, design and options, model, metric, target, level,
    prior, batch size, budget, looks, rates and simulation settings, in process and, when the
    audit has a ``path``, in ``<path>/sequential_calibration.json`` (so a resumed audit keeps its
    corrected levels).
    """

    def __init__(
        self,
        target: float,
        level: float = 0.95,
        corrected: bool = True,
        n_sims: int = 2000,
        rng: RNGLike = None,
        *,
        rates: str | ArrayLike = "auto",
        max_mcse: float = 0.005,
        looks: str | ArrayLike | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.target = check_target(None, target)
        self.level = check_level(level, "level")
        check_bool(corrected, "corrected")
        self.corrected = bool(corrected)
        if self.corrected:
            self.n_sims, self.max_mcse = check_sims(n_sims, self.level, max_mcse)
        else:
            self.n_sims = check_positive_int(n_sims, "n_sims")
            self.max_mcse = check_max_mcse(max_mcse)
        if rng is not None:
            as_generator(rng)  # validate now
        self.rng = rng
        self.rates = check_rates(rates)
        self.looks = check_looks(looks)
        self.n_jobs = check_n_jobs(n_jobs)
        self._schedule: np.ndarray | None = None
        self._batch = 1
        self._stored: Correction | None = None

    def __repr__(self) -> str:
        return (
            f"Accept(target={self.target}, level={self.level}, corrected={self.corrected}, "
            f"n_sims={self.n_sims})"
        )

    # -------------------------------------------------------------------- calibration
    def prepare(self, procedure: Procedure) -> None:
        """Calibrate the nominal level for the audit's procedure
        (:func:`bayes_eval.sequential.correction_for`, cached)."""
        if not self.corrected:
            return
        if procedure.batch_size is None or procedure.budget is None:
            raise ValueError(
                "Accept(corrected=True) needs the audit's budget and batch_size "
                "(run the audit with budget= and batch_size=)"
            )
        self._batch = int(procedure.batch_size)
        self._stored = correction_for(
            procedure,
            target=self.target,
            level=self.level,
            n_sims=self.n_sims,
            max_mcse=self.max_mcse,
            looks=self.looks,
            rates=self.rates,
            rng=self.rng,
            n_jobs=self.n_jobs,
        )
        self._schedule = self._stored.looks

    @property
    def correction(self) -> Correction | None:
        """The sequential correction applied (after :meth:`prepare`; None if uncorrected)."""
        return self._stored

    @property
    def level_used(self) -> float:
        """Nominal level applied: the strictest level of the corrected boundary (its first
        look) after :meth:`prepare`; ``correction.level_at(n_labels)`` gives the level at a
        look."""
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
            metric=look.metric,
            target=self.target,
            level=self.level,
            looks=max(int(look.looks), 1),
            design=look.procedure.design,
        )
        if not self.corrected:
            return cert
        st = self._stored
        assert st is not None
        used = float(st.level_at(int(look.n_labels)))
        p = cert.prob_at_least
        scheduled = self._is_look(look)
        note = (
            ""
            if scheduled
            else (f"; {int(look.n_labels)} labels is not a scheduled look, so no acceptance")
        )
        return Certification(
            accepted=st.accepts(p, int(look.n_labels)) and scheduled,
            metric=cert.metric,
            target=cert.target,
            lower_bound=posterior.lower_bound(cert.metric, decision_level(used)),
            prob_at_least=p,
            level_requested=self.level,
            level_used=used,
            labels=cert.labels,
            looks=cert.looks,
            design=cert.design,
            prior=cert.prior,
            model=cert.model,
            finite_population=cert.finite_population,
            correction=st.description + note,
            correction_mcse=st.mcse,
            prob_mcse=cert.prob_mcse,
            informed=cert.informed,
            disclosure=tuple(st.disclosure(int(look.n_labels)).items()),
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
        if self.corrected and self._stored is not None:
            ok = self._stored.accepts(p, np.asarray(n_labels, dtype=np.int64))
        else:
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
            return StopDecision(True, "budget exhausted without acceptance", state, BUDGET)
        return StopDecision(False, "", state)
