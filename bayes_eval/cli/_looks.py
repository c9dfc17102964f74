"""Looks at an audit's posterior, the certification they call for, and the claim.

A *look* is a moment a person could have stopped: every ``record`` call that added labels (a
person can run ``status`` after each). The looks decide two things:

* whether the nominal level overstates the actual one: with more than one look, ``certify`` and
  ``report`` apply the sequential correction by default (Webber et al.: a nominal 95% gives an
  actual 68% with a look every 20 labels);
* which look schedule the correction is calibrated for. The schedule planned at ``init`` (a look
  after every ``--batch-size`` labels up to ``--budget``, or a geometric one) is used when every
  actual look is one of its looks (looking less often than planned only lowers the
  false-accept rate). Otherwise — labels recorded in pieces, or past the budget — the
  correction is recalibrated for the actual look sizes (never silently reused).

The pre-registered :class:`~bayes_eval.audit.Claim` (registered by ``init``) is the claim: a
certification with another target or level says so in its verdict, and every ``status``,
``certify`` and ``report`` is logged to the ledger as a :class:`~bayes_eval.audit.LookRecord`.

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._app import UserError, _console
from ._directory import _Opened
from ._progress import Bars, ProgressCallback, bars

if TYPE_CHECKING:  # imported by the commands that need them (start-up time)
    from .._procedure import Procedure
    from ..audit import Claim, LookRecord
    from ..certification import Certification
    from ..sequential import Correction

#: the finest recalibration: actual looks whose common step needs more simulated batches are refused
MAX_SIMULATED_BATCHES = 1000

__all__ = [
    "Decision",
    "LookSchedule",
    "decide",
    "ledger_trajectory",
    "log_look",
    "look_schedule",
    "look_sizes",
]


def _looks(audit: Any) -> int:
    """Looks taken at an audit's posterior: the record calls that added labels (a person can
    look after each), or the looks of ``Audit.run``, whichever is more; at least 1."""
    from_run = int(getattr(audit, "looks", 0) or 0)
    return max(from_run, len(_label_groups(audit)), 1)


def _label_groups(audit: Any) -> list[list[tuple[Any, int]]]:
    """Labels of the audit's ledger grouped by the ``record`` call that wrote them (one time
    stamp per call), in order; each entry is a list of (id, label)."""
    from ..ledger import LEDGER_NAME, read_ledger

    path = getattr(audit, "path", None)
    if path is None or not (Path(path) / LEDGER_NAME).is_file():
        return []
    records, _, _ = read_ledger(Path(path) / LEDGER_NAME)
    groups: list[list[tuple[Any, int]]] = []
    last = None
    for rec in records:
        if rec.get("type") != "label":
            continue
        if rec.get("at") != last:
            groups.append([])
            last = rec.get("at")
        groups[-1].append((rec["id"], int(rec["label"])))
    return groups


def look_sizes(audit: Any) -> list[int]:
    """Labels in the audit after each ``record`` call that added labels (increasing)."""
    out: list[int] = []
    total = 0
    for group in _label_groups(audit):
        total += len(group)
        out.append(total)
    return out


@dataclass(frozen=True, slots=True)
class LookSchedule:
    """The look schedule a sequential correction is calibrated for.

    Attributes
    ----------
    planned : bool
        True: the schedule planned at ``init`` covers every actual look, and is used.
    batch_size, budget : int
        Of the simulated procedure.
    looks : None, "geometric" or tuple of int
        ``looks=`` for :func:`bayes_eval.sequential.correction_for`.
    actual : tuple of int
        Labels at each actual look.
    note : str
        Why this schedule (empty when the planned one is used).
    """

    planned: bool
    batch_size: int
    budget: int
    looks: Any
    actual: tuple[int, ...]
    note: str


def _planned_looks(batch_size: int, budget: int, kind: str) -> list[int]:
    from ..sequential import geometric_looks

    if kind == "geometric":
        return [int(v) for v in geometric_looks(batch_size, budget)]
    out = list(range(batch_size, budget + 1, batch_size))
    if not out or out[-1] != budget:
        out.append(budget)
    return out


def look_schedule(opened: _Opened, claim: Claim | None) -> LookSchedule:
    """The planned schedule if it covers every actual look, else one for the actual looks."""
    batch = int(claim.batch_size if claim and claim.batch_size else opened.meta["batch_size"])
    budget = int(claim.budget if claim and claim.budget else opened.meta["budget"])
    kind = claim.looks if claim is not None else "every-batch"
    actual = tuple(look_sizes(opened.audit)) or (int(opened.audit.n_labels),)
    planned = _planned_looks(batch, budget, kind)
    if set(actual) <= set(planned):
        looks = "geometric" if kind == "geometric" else None
        return LookSchedule(True, batch, budget, looks, actual, "")
    step = math.gcd(*actual)
    off = sorted(set(actual) - set(planned))
    note = (
        f"{len(actual)} actual looks at {_short(actual)} labels are not all looks of the "
        f"planned schedule ({kind}, --batch-size {batch}, --budget {budget}; e.g. "
        f"{_short(off)} are not): the correction is recalibrated for the actual looks"
    )
    if actual[-1] // step > MAX_SIMULATED_BATCHES:
        raise UserError(
            f"{note[: note.index(': the correction')]}; recalibrating needs simulated batches of "
            f"{step} label(s), {actual[-1] // step:,} of them (at most "
            f"{MAX_SIMULATED_BATCHES:,}): refusing rather than reusing the planned correction. "
            "Use --uncorrected (the verdict then says UNCORRECTED)"
        )
    return LookSchedule(False, step, int(actual[-1]), tuple(actual), actual, note)


def _short(values: Any, k: int = 6) -> str:
    values = list(values)
    text = ", ".join(str(v) for v in values[:k])
    return text + (f", ... ({len(values)} in all)" if len(values) > k else "")


@dataclass(frozen=True, slots=True)
class Decision:
    """A certification as the CLI shows and logs it.

    Attributes
    ----------
    certification : Certification
    corrected : bool
        The sequential correction was applied.
    claim : Claim or None
        The pre-registered claim (None: an audit from an older release).
    claim_matches : bool or None
        Metric, target and level are the claim's (None without a claim).
    schedule : LookSchedule or None
        The look schedule of the correction (None when uncorrected).
    correction : Correction or None
        The sequential correction applied.
    """

    certification: Certification
    corrected: bool
    claim: Claim | None
    claim_matches: bool | None
    schedule: LookSchedule | None
    correction: Correction | None

    @property
    def curve(self) -> Any:
        """The correction's coverage curve, for the report (None when uncorrected)."""
        if self.correction is None:
            return None
        c = self.correction
        return c.curve.assign_attrs(corrected_level=c.level_used, level=c.level)

    def verdict(self) -> str:
        """The headline of the certification, with the claim check."""
        text = self.certification.headline()
        if self.claim_matches is False:
            text += f" — differs from the pre-registered claim ({claim_text(self.claim)})"
        return text


def claim_text(claim: Claim | None) -> str:
    """``"f1 >= 0.8 at level 0.95"`` (or a note that no claim was registered)."""
    if claim is None:
        return "none registered (audit from an older release)"
    if claim.target is None:
        return f"{claim.metric}, no target, level {claim.level:g}"
    return f"{claim.metric} >= {claim.target:g} at level {claim.level:g}"


def claim_matches(claim: Claim | None, metric: str, target: float, level: float) -> bool | None:
    """Whether a certification's claim is the pre-registered one (None without one)."""
    if claim is None:
        return None
    return bool(
        claim.metric == metric
        and claim.target is not None
        and math.isclose(claim.target, target, rel_tol=0, abs_tol=1e-12)
        and math.isclose(claim.level, level, rel_tol=0, abs_tol=1e-12)
    )


def decide(
    opened: _Opened,
    post: Any,
    *,
    corrected: bool | None,
    target: float | None,
    level: float | None,
    n_sims: int,
    max_mcse: float = 0.005,
    n_jobs: int = 1,
) -> Decision:
    """Certify the audit's metric: corrected when more than one look was taken (``corrected``
    None) or when asked, for the schedule of :func:`look_schedule`."""
    import bayes_eval as be

    audit = opened.audit
    claim = audit.claim
    target = opened.target if target is None else target
    if target is None:
        raise UserError("no target: pass --target (or set it at init)")
    level = opened.level if level is None else level
    looks = _looks(audit)
    matches = claim_matches(claim, opened.metric, target, level)
    kw = {
        "metric": opened.metric,
        "target": target,
        "level": level,
        "looks": looks,
        "design": str(audit.design_name),
    }
    use = looks > 1 if corrected is None else corrected
    if not use:
        return Decision(be.certify(post, **kw), False, claim, matches, None, None)
    schedule = look_schedule(opened, claim)
    if schedule.note:
        _console(stderr=True).print(f"note: {schedule.note}")
    procedure = audit.procedure(budget=schedule.budget, batch_size=schedule.batch_size)
    with bars() as b:
        corr = calibrate(
            b,
            procedure,
            target=target,
            level=level,
            n_sims=n_sims,
            max_mcse=max_mcse,
            looks=None if schedule.looks is None else _as_looks(schedule.looks),
            rates="planning",
            rng=int(audit.seed),
            n_jobs=n_jobs,
        )
    cert = be.certify(post, calibration=corr, **kw)
    return Decision(cert, True, claim, matches, schedule, corr)


def calibrate(
    b: Bars,
    procedure: Procedure,
    *,
    target: float,
    level: float,
    n_sims: int,
    max_mcse: float,
    rates: Any,
    rng: int,
    looks: Any = None,
    n_jobs: int = 1,
) -> Correction:
    """:func:`bayes_eval.sequential.correction_for` of ``procedure`` under a progress bar of
    ``b`` (a correction found in the cache runs no batch, and the bar says so); ``n_jobs``
    processes fit the pooled model's refits (the bar says how many; other models run in one)."""
    from ..models._look_pool import WorkerPoolError, resolve_n_jobs
    from ..sequential import correction_for  # on first use: the simulation imports scipy

    processes = resolve_n_jobs(n_jobs) if procedure.model == "pooled" else 1  # its refits only
    where = "" if processes == 1 else f", {processes} processes"
    task = b.add(f"calibration ({n_sims:,} sims/truth{where})", total=None, unit="batches")
    try:
        corr = correction_for(
            procedure,
            target=target,
            level=level,
            n_sims=n_sims,
            max_mcse=max_mcse,
            looks=looks,
            rates=rates,
            rng=rng,
            progress=b.callback(task),
            n_jobs=n_jobs,
        )
    except WorkerPoolError as exc:
        b.drop(task)
        raise UserError(
            f"the calibration's worker processes (--n-jobs {n_jobs}) stopped "
            f"({exc.__cause__ or exc}); a worker killed or out of memory stops them; allowed "
            "instead: --n-jobs 1 (no worker process)"
        ) from None
    b.finish(task, none_done="reused from the cache (same procedure, claim and seed)")
    return corr


def _as_looks(looks: Any) -> Any:
    if isinstance(looks, str):
        return looks
    import numpy as np

    return np.asarray(looks, dtype=np.int64)


def log_look(opened: _Opened, record: LookRecord) -> None:
    """Append a look to the audit's ledger (an error naming the writer if the lock is busy:
    a look is never left unrecorded)."""
    from .._lock import AuditLockedError

    try:
        opened.audit.log_look(record)
    except AuditLockedError as exc:
        raise UserError(
            f"this {record.command} could not be recorded in the ledger ({exc}); every look is "
            "recorded, so retry when that command has finished"
        ) from None


def looks_summary(audit: Any) -> dict[str, Any]:
    """Looks logged in the ledger: how many per command, and the claims they evaluated."""
    logged = list(getattr(audit, "looks_logged", ()) or ())
    by_command: dict[str, int] = {}
    claims: list[str] = []
    for rec in logged:
        by_command[rec.command] = by_command.get(rec.command, 0) + 1
        if rec.metric is not None and rec.target is not None and rec.level is not None:
            text = f"{rec.metric} >= {rec.target:g} at level {rec.level:g}"
            if text not in claims:
                claims.append(text)
    return {"logged": len(logged), "by_command": by_command, "claims_tried": claims}


def ledger_trajectory(
    audit: Any,
    level: float,
    *,
    level_used: float | None = None,
    draws: int = 4000,
    max_looks: int = 200,
    progress: ProgressCallback | None = None,
) -> Any:
    """Posterior mean and one-sided ``level`` lower bound of the audit's metric after every
    ``record`` call in its ledger, as an xarray Dataset over ``look`` (None without labels).

    Each look re-estimates from the per-stratum counts at that point (``draws`` Monte Carlo
    draws, seeded by the audit's seed and the look); with more than ``max_looks`` record calls,
    ``max_looks`` evenly spaced ones (always including the last) are shown. With ``level_used``
    (the corrected nominal level of the decision) the bound the decision uses is added as
    ``lower_bound_used``. ``progress(done, total)`` is called after each look re-estimated.
    """
    import numpy as np
    import xarray as xr

    from .._draws import decision_level
    from ..posterior import estimate_from_stratum_counts
    from ..priors import Prior

    groups = _label_groups(audit)
    if not groups:
        return None
    strata = audit.strata
    k = int(strata.n_strata)
    pop = audit.population
    n = np.zeros(k, dtype=np.int64)
    h = np.zeros(k, dtype=np.int64)
    cum: list[tuple[np.ndarray, np.ndarray]] = []
    for group in groups:
        ids = np.asarray([g[0] for g in group])
        ys = np.asarray([g[1] for g in group], dtype=np.int64)
        st = strata.stratum_of(pop.positions_of(ids))
        n += np.bincount(st, minlength=k)
        h += np.bincount(st, weights=ys, minlength=k).astype(np.int64)
        cum.append((n.copy(), h.copy()))
    pick = np.unique(np.linspace(0, len(cum) - 1, min(max_looks, len(cum))).round().astype(int))
    rows = []
    prior = Prior(audit.prior_a, audit.prior_b, audit.prior_description)
    for done, i in enumerate(pick, start=1):
        nn, hh = cum[i]
        post = estimate_from_stratum_counts(
            strata,
            nn,
            hh,
            prior=prior,
            finite_population=audit.finite_population,
            draws=draws,
            rng=np.random.default_rng([audit.seed, 0x7A, int(i)]),
            metrics=(audit.metric,),
        )
        used = (
            post.lower_bound(audit.metric, decision_level(level_used))
            if level_used is not None
            else np.nan
        )
        rows.append(
            (
                int(nn.sum()),
                post.mean(audit.metric),
                post.lower_bound(audit.metric, level),
                used,
            )
        )
        if progress is not None:
            progress(done, len(pick))
    arr = np.asarray(rows, dtype=np.float64)
    data = {
        "n_labels": ("look", arr[:, 0].astype(np.int64)),
        "estimate": ("look", arr[:, 1]),
        "lower_bound": ("look", arr[:, 2]),
    }
    if level_used is not None:
        data["lower_bound_used"] = ("look", arr[:, 3])
    return xr.Dataset(
        data,
        coords={"look": pick + 1},
        attrs={
            "lower_bound_label": f"{level:g} one-sided lower bound (nominal)",
            "lower_bound_used_label": (
                "" if level_used is None else f"{level_used:.4g} one-sided lower bound (used)"
            ),
            "source": "ledger: one look per record call",
        },
    )
