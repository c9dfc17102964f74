"""The audit loop: propose, label with an oracle, record, look, until a stopping rule ends it.

:func:`run_audit` is :meth:`Audit.run <bayes_eval.audit.Audit.run>`: batch by batch it asks the
design for the next batch (:func:`bayes_eval._loop.scheduled_batch` for designs with a published
batch schedule), records the oracle's labels, looks at the posterior and asks the stop rule
(:mod:`bayes_eval.stop`) whether to stop. Every look is appended to the ledger, so the
trajectory of a resumed audit is complete. The posterior, the stop rules and xarray are only
needed here, and this module is only imported when an audit is run, so proposing and recording
(the command line's ``next`` and ``record``) never load them.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1: the sequential
stratified audit with a +-delta stopping rule). Webber et al.,
``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posterior, sequential acceptance).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from .._draws import audit_generator
from .._loop import scheduled_batch
from .._validation import check_level, check_positive_int
from ..certification import Certification
from ..models import prior_label
from ..posterior import MetricPosterior, estimate_from_stratum_counts
from ..priors import Prior
from ..stop import Look, StopDecision, StopRule, find_certifier

__all__ = ["AuditResult", "look_posterior", "run_audit"]


@dataclass(frozen=True, slots=True)
class AuditResult:
    """What :meth:`Audit.run` returns.

    Attributes
    ----------
    n_labels : int
        Labels recorded in the audit when it stopped.
    posterior : MetricPosterior
        Posterior after the last batch.
    trajectory : xarray.Dataset
        One entry per look (dimension ``look``): ``n_labels``, ``mean``, ``lower``, ``upper``
        (equal-tailed interval at ``level``), ``half_width``, ``stop``, ``reason`` and the
        per-stratum counts ``n``/``h`` (``look``, ``stratum``).
    certification : Certification or None
        The verdict of the first rule with a ``certification`` method (``be.stop.Accept``);
        None without one.
    stopped_by : str
        ``"budget"``, ``"exhausted"`` (every item labelled) or the stop rule's reason.
    metric, design, model, prior : str
    seed : int
    """

    n_labels: int
    posterior: MetricPosterior
    trajectory: xr.Dataset
    certification: Certification | None
    stopped_by: str
    metric: str
    design: str
    model: str
    prior: str
    seed: int

    def __repr__(self) -> str:
        m = self.metric
        lo, hi = self.posterior.interval(m, prob=0.95, kind="eti")
        cert = "" if self.certification is None else f", certification={self.certification!r}"
        return (
            f"AuditResult({m}={self.posterior.mean(m):.4f} (95% interval {lo:.4f}-{hi:.4f}), "
            f"{self.n_labels} labels, {self.trajectory.sizes.get('look', 0)} looks, stopped by "
            f"{self.stopped_by!r}; design={self.design}, model={self.model}, "
            f"prior={self.prior}, seed={self.seed}{cert})"
        )


def look_posterior(audit: Any) -> MetricPosterior:
    if audit.model != "hierarchical":
        return audit.estimate()
    state = audit.design_state()  # carries the empirical-Bayes priors
    return estimate_from_stratum_counts(
        audit.strata,
        audit._n,
        audit._h,
        prior=Prior(
            state.prior_a,
            state.prior_b,
            f"empirical-bayes ({audit.model} approximation, base {audit.prior_description})",
        ),
        finite_population=audit.finite_population,
        draws=audit.draws,
        rng=audit_generator(audit.seed, audit.n_labels),
        model="independent",
    )


def run_audit(
    audit: Any,
    oracle: Callable[[np.ndarray], ArrayLike],
    *,
    budget: int,
    batch_size: int | None = None,
    stop: StopRule | None = None,
    level: float = 0.95,
    final_posterior: bool = True,
) -> AuditResult:
    """:meth:`Audit.run <bayes_eval.audit.Audit.run>` (see there) on ``audit``."""
    audit._check_usable()
    if not callable(oracle):
        raise TypeError(f"oracle={oracle!r} must be callable: ids -> 0/1 labels")
    budget = check_positive_int(budget, "budget")
    if batch_size is not None:
        batch_size = check_positive_int(batch_size, "batch_size")
    level = check_level(level, "level")
    if stop is not None and not isinstance(stop, StopRule):
        raise TypeError(f"stop={stop!r} has type {type(stop).__name__}; allowed: a StopRule")
    k = int(audit._sizes.shape[0])
    scheduled_batch(audit.design, audit._round, k, batch_size)  # refuses a missing batch_size
    if getattr(audit.design, "batch_schedule", None) is not None:
        # stop rules read the (steady-state) batch size
        batch_size = scheduled_batch(audit.design, max(audit._round, 1), k, batch_size)
    audit.budget, audit.batch_size = budget, batch_size
    procedure = audit.procedure(budget=budget, batch_size=batch_size)
    if stop is not None:
        stop.prepare(procedure)
    if audit._pending:
        ids = audit.pending
        audit.record(ids, oracle(ids))
    rows: list[dict[str, Any]] = []
    post: MetricPosterior | None = None
    stopped_by = ""
    total = int(audit._sizes.sum())
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    while True:
        room = budget - audit.n_labels - len(audit._pending)
        left = total - audit.n_proposed
        m = min(_next_batch_size(audit, batch_size), room, left)
        if m <= 0:
            stopped_by = "budget" if room <= 0 else "exhausted"
            break
        ids = audit.propose(m)
        audit.record(ids, oracle(ids))
        post = look_posterior(audit)
        audit.looks += 1
        look = Look(procedure, audit.n_labels, audit.looks)
        decision = stop.check(look, post) if stop is not None else StopDecision(False)
        x = post.draws(audit.metric)
        lo, hi = np.quantile(x, [lo_q, hi_q])
        row = {
            "type": "look",
            "look": audit.looks,
            "n_labels": audit.n_labels,
            "mean": float(x.mean()),
            "lower": float(lo),
            "upper": float(hi),
            "stop": bool(decision.stop),
            "reason": decision.reason,
        }
        audit._persist([row])
        audit._look_records.append(row)
        rows.append({**row, "n": audit._n.copy(), "h": audit._h.copy()})
        if decision.stop:
            stopped_by = decision.reason or repr(stop)
            break
    if post is None or (audit.model == "hierarchical" and final_posterior):
        post = audit.estimate() if final_posterior else look_posterior(audit)
    certifier = find_certifier(stop)
    cert = None
    if certifier is not None:
        final = Look(procedure, audit.n_labels, max(audit.looks, 1))
        cert = certifier.certification(final, post)  # type: ignore[attr-defined]
    return AuditResult(
        n_labels=audit.n_labels,
        posterior=post,
        trajectory=_trajectory(audit, rows, level, stop),
        certification=cert,
        stopped_by=stopped_by,
        metric=audit.metric,
        design=audit.design_name,
        model=audit.model,
        prior=prior_label(audit.model, audit.prior_description),
        seed=audit.seed,
    )


def _next_batch_size(audit: Any, batch_size: int | None) -> int:
    """The size of the next batch (:func:`bayes_eval._loop.scheduled_batch`)."""
    try:
        return scheduled_batch(audit.design, audit._round, int(audit._sizes.shape[0]), batch_size)
    except RuntimeError:
        audit._broken = f"design {audit.design_name!r} returned an invalid batch size"
        raise


def _trajectory(
    audit: Any, rows: list[dict[str, Any]], level: float, stop: StopRule | None
) -> xr.Dataset:
    k = audit._sizes.shape[0]
    col = {
        name: [r[name] for r in rows]
        for name in ("look", "n_labels", "mean", "lower", "upper", "stop", "reason")
    }
    lower = np.asarray(col["lower"], dtype=float)
    upper = np.asarray(col["upper"], dtype=float)
    return xr.Dataset(
        {
            "n_labels": ("look", np.asarray(col["n_labels"], dtype=np.int64)),
            "mean": ("look", np.asarray(col["mean"], dtype=float)),
            "lower": ("look", lower),
            "upper": ("look", upper),
            "half_width": ("look", (upper - lower) / 2),
            "stop": ("look", np.asarray(col["stop"], dtype=bool)),
            "reason": ("look", np.asarray(col["reason"], dtype=str)),
            "n": (
                ("look", "stratum"),
                np.asarray([r["n"] for r in rows], dtype=np.int64).reshape(-1, k),
            ),
            "h": (
                ("look", "stratum"),
                np.asarray([r["h"] for r in rows], dtype=np.int64).reshape(-1, k),
            ),
        },
        coords={"look": np.asarray(col["look"], dtype=np.int64), "stratum": np.arange(k)},
        attrs={
            "metric": audit.metric,
            "design": audit.design_name,
            "level": level,
            "interval": "equal-tailed",
            "prior": prior_label(audit.model, audit.prior_description),
            "model": audit.model,
            "look_model": audit.look_model,
            "seed": audit.seed,
            "stop": "none" if stop is None else repr(stop),
        },
    )
