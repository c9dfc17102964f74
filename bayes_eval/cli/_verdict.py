"""Commands that look at an audit: ``status``, ``certify`` and ``report``.

Each is a *look* at the results and is appended to the audit's ledger
(:class:`~bayes_eval.audit.LookRecord`: the command, the labels, the claim it evaluated, whether
it was corrected and its verdict), so a report can disclose how many looks were taken and which
claims were tried. ``certify`` and ``report`` apply the sequential correction by default whenever
more than one look was taken; ``--uncorrected`` turns it off, and the verdict then says
UNCORRECTED. A certification of another target or level than the claim pre-registered at
``init`` says "differs from the pre-registered claim" in its verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..models import prior_label
from ._app import (
    MAX_N_SIMS,
    N_JOBS_HELP,
    UserError,
    _check_out_file,
    _command,
    _console,
    _int_in,
    _max_mcse,
    _n_jobs,
    _setup_matplotlib,
    app,
)
from ._directory import _open, _Opened
from ._looks import (
    Decision,
    _looks,
    claim_matches,
    claim_text,
    decide,
    ledger_trajectory,
    log_look,
    look_sizes,
    looks_summary,
)
from ._output import (
    decision_json,
    dump_json,
    metrics_json,
    print_certification,
    status_table,
    strata_table,
)
from ._progress import bars

if TYPE_CHECKING:
    from .._metric_draws import MetricDraws

_JSON_HELP = "Print one strict JSON document (no tables) on standard output."
_CORRECTED_HELP = (
    "Correct the level for repeated looks (simulated, least-favourable truth). Default: "
    "corrected whenever more than one look was taken; --uncorrected turns it off (the verdict "
    "then says UNCORRECTED)."
)


def _look(command: str, opened: _Opened, decision: Decision | None, **rule: Any) -> None:
    """Log this look (with the decision it made, if any) to the audit's ledger."""
    from ..audit import LookRecord

    audit = opened.audit
    if decision is not None:
        cert = decision.certification
        rule = {
            "metric": cert.metric,
            "target": cert.target,
            "level": cert.level_requested,
            "corrected": decision.corrected,
            "accepted": bool(cert.accepted),
            "claim_matches": decision.claim_matches,
        }
    log_look(opened, LookRecord(command, int(audit.n_labels), **rule))


def _disclosure(opened: _Opened) -> dict[str, Any]:
    """The claim and the looks logged, for ``status`` and the report."""
    audit = opened.audit
    summary = looks_summary(audit)
    per = ", ".join(f"{k} {v}" for k, v in summary["by_command"].items())
    return {
        "pre-registered claim": claim_text(audit.claim),
        "looks logged (status/certify/report)": f"{summary['logged']}"
        + (f" ({per})" if per else ""),
        "claims tried": "; ".join(summary["claims_tried"]) or "none",
        "record calls (looks at the labels)": f"{len(look_sizes(audit))}",
    }


def _status_draws(audit: Any) -> MetricDraws:
    """The audit's posterior as numpy draws, for ``status``.

    The same draws as ``audit.estimate()`` (same generator, same kernel; tested), without the
    ``xarray.DataTree`` that a posterior object builds: importing xarray, pandas and dask and
    building the tree is most of the start-up time of ``status`` (issue 18). The pooled model
    takes the same path (:func:`_pooled_draws`); other models go through ``audit.estimate()``.
    """
    # on first use: the sampler imports scipy.special, which `next` and `record` never need
    from .._metric_draws import MetricDraws, audit_generator, independent_metric_draws

    if audit.model == "pooled":
        return _pooled_draws(audit)
    if audit.model != "independent":
        return MetricDraws.of_posterior(audit.estimate())
    strata = audit.strata
    n, h = audit.counts()
    return independent_metric_draws(
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=n,
        h=h,
        prior_a=audit.prior_a,
        prior_b=audit.prior_b,
        draws=audit.draws,
        rng=audit_generator(audit.seed, audit.n_labels),
        finite_population=audit.finite_population,
        score_min=strata.score_min,
        score_max=strata.score_max,
    )


def _pooled_draws(audit: Any) -> MetricDraws:
    """The pooled model's posterior as numpy draws: the steps of ``audit.estimate()``
    (:func:`bayes_eval.models.pooled.pooled_model` then the metric kernel, with the same
    generator, so the same draws; tested) without the ``xarray.DataTree``."""
    from .._metric_draws import audit_generator, metric_draws_from_theta
    from ..models._profile import score_profile_of
    from ..models.pooled import draw_theta, fit_pooled

    strata = audit.strata
    n, h = audit.counts()
    gen = audit_generator(audit.seed, audit.n_labels)
    fit = fit_pooled(score_profile_of(strata), n, h)
    theta = draw_theta(fit, audit.draws, gen)
    return metric_draws_from_theta(
        theta,
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=n,
        h=h,
        finite_population=audit.finite_population,
        metrics=None,
        rng=gen,
        score_min=strata.score_min,
        score_max=strata.score_max,
    )


def _score_reading(audit: Any) -> str | None:
    """How the pooled model reads the audit's scores; None for the other models, which do not
    read the scores."""
    if audit.model != "pooled":
        return None
    from ..models._profile import score_reading

    return score_reading(audit.strata)


def _claim_json(opened: _Opened) -> Any:
    claim = opened.audit.claim
    return None if claim is None else claim.to_dict()


@app.command()
@_command
def status(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    as_json: Annotated[bool, typer.Option("--json", help=_JSON_HELP)] = False,
) -> None:
    """Posterior table, labels per stratum and the state of the acceptance rule."""
    opened = _open(audit_dir)
    audit = opened.audit
    n_labels = int(audit.n_labels)
    post = _status_draws(audit)
    level = opened.level
    target = opened.target
    looks = _looks(audit)
    rule: dict[str, Any] = {}
    p = lb = None
    if target is not None:
        p = post.prob_at_least(opened.metric, target)
        lb = post.lower_bound(opened.metric, level)
        rule = {
            "metric": opened.metric,
            "target": target,
            "level": level,
            "corrected": False,
            "accepted": bool(p >= level),
            "claim_matches": claim_matches(audit.claim, opened.metric, target, level),
        }
    _look("status", opened, None, **rule)
    reading = _score_reading(audit)
    if as_json:
        dump_json(
            {
                "audit": str(audit_dir),
                "n_labels": n_labels,
                "pending": len(audit.pending),
                "metric": opened.metric,
                "level": level,
                "design": opened.meta["design"],
                # the pooled model has no Beta prior: its hyperpriors (as in the table header)
                "prior": (
                    prior_label(audit.model, opened.meta["prior"])
                    if audit.model == "pooled"
                    else opened.meta["prior"]
                ),
                "model": audit.model,
                "scores_read_as": reading,
                "metrics": metrics_json(post, level),
                "prior_only": list(post.prior_only),
                "rule": None
                if target is None
                else {
                    "metric": opened.metric,
                    "target": target,
                    "level": level,
                    "prob_at_least": p,
                    "lower_bound": lb,
                    "accepted_uncorrected": rule["accepted"],
                    "corrected": False,
                    "looks": looks,
                    "claim_matches_preregistered": rule["claim_matches"],
                },
                "preregistered_claim": _claim_json(opened),
                "looks_logged": looks_summary(audit),
            }
        )
        return
    out = _console()
    out.print(
        f"[bold]audit {audit_dir}[/]: {n_labels} labels, metric {opened.metric}, design "
        f"{opened.meta['design']}, prior {prior_label(audit.model, opened.meta['prior'])}, "
        f"model {audit.model}"
    )
    if reading is not None:
        out.print(f"scores read as {reading}")
    pending = len(audit.pending)
    if pending:
        out.print(f"{pending} item(s) proposed but not labelled yet (record them any time)")
    if n_labels == 0:
        out.print("no labels yet: run `bayes-eval next` and `bayes-eval record`")
    out.print(status_table(post, level, opened.metric))
    if post.prior_only:
        out.print(
            f"prior only (no label informs them; the prior decides): {', '.join(post.prior_only)}"
        )
    out.print(strata_table(post))
    for key, value in _disclosure(opened).items():
        out.print(f"{key}: {value}")
    if target is None:
        out.print("no --target was set at init: no acceptance rule")
        return
    out.print(
        f"acceptance rule: {opened.metric} >= {target:g} at level {level:g}: "
        f"P = {p:.4f}, {level:g} lower bound {lb:.4f} → "
        + ("[green]would accept (uncorrected)[/]" if rule["accepted"] else "[yellow]not yet[/]")
    )
    if looks > 1:
        out.print(
            f"looks so far: {looks}; with more than one look the nominal level overstates the "
            "actual one: `bayes-eval certify` applies the sequential correction"
        )


@app.command()
@_command
def certify(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    corrected: Annotated[
        bool | None, typer.Option("--corrected/--uncorrected", help=_CORRECTED_HELP)
    ] = None,
    target: Annotated[float | None, typer.Option(help="Override the target set at init.")] = None,
    level: Annotated[float | None, typer.Option(help="Override the level set at init.")] = None,
    n_sims: Annotated[
        int, typer.Option("--n-sims", help="Simulated audits of the correction.")
    ] = 4000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
    n_jobs: Annotated[int, typer.Option("--n-jobs", help=N_JOBS_HELP)] = 1,
    as_json: Annotated[bool, typer.Option("--json", help=_JSON_HELP)] = False,
) -> None:
    """Certify metric >= target at the audit's level (corrected for repeated looks)."""
    from .._validation import check_level

    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    _n_jobs(n_jobs)
    _max_mcse(max_mcse)
    if level is not None:
        check_level(level, "--level")
    if target is not None:
        from ..sequential.calibration import check_target

        check_target(None, target, "--target")
    opened = _open(audit_dir)
    post = opened.audit.estimate()
    decision = decide(
        opened,
        post,
        corrected=corrected,
        target=target,
        level=level,
        n_sims=n_sims,
        max_mcse=max_mcse,
        n_jobs=n_jobs,
    )
    _look("certify", opened, decision)
    if as_json:
        dump_json(
            {
                "audit": str(audit_dir),
                "n_labels": int(opened.audit.n_labels),
                "model": opened.audit.model,
                "metrics": metrics_json(post, decision.certification.level_requested),
                "verdict": decision_json(decision),
                "preregistered_claim": _claim_json(opened),
                "looks_logged": looks_summary(opened.audit),
            }
        )
        return
    print_certification(decision)


@app.command()
@_command
def report(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    out: Annotated[Path, typer.Option("--out", help="Output file: .html or .md.")] = Path(
        "report.html"
    ),
    corrected: Annotated[
        bool | None, typer.Option("--corrected/--uncorrected", help=_CORRECTED_HELP)
    ] = None,
    n_sims: Annotated[
        int, typer.Option("--n-sims", help="Simulated audits of the correction.")
    ] = 4000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
    n_jobs: Annotated[int, typer.Option("--n-jobs", help=N_JOBS_HELP)] = 1,
) -> None:
    """Write the posterior report (self-contained HTML, or Markdown with PNG files)."""
    _setup_matplotlib()
    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    _n_jobs(n_jobs)
    _max_mcse(max_mcse)
    if out.suffix.lower() not in (".html", ".htm", ".md"):
        raise UserError(f"--out {str(out)!r} has suffix {out.suffix!r}; allowed: .html or .md")
    _check_out_file(out)
    opened = _open(audit_dir)
    post = opened.audit.estimate()
    decision = None
    if opened.target is not None and post.n_labels > 0:
        decision = decide(
            opened,
            post,
            corrected=corrected,
            target=None,
            level=None,
            n_sims=n_sims,
            max_mcse=max_mcse,
            n_jobs=n_jobs,
        )
    _look("report", opened, decision)
    _write(opened, post, decision, out)
    _console().print(f"wrote {out}")


def _write(opened: _Opened, post: Any, decision: Decision | None, out: Path) -> None:
    """Re-estimate the trajectory and draw the report, with progress on standard error."""
    from ..report import write_report

    used = None
    if decision is not None and decision.corrected:
        used = decision.certification.level_used
    with bars() as b:
        task = b.add("report: trajectory", total=None, unit="looks")
        trajectory = ledger_trajectory(
            opened.audit, opened.level, level_used=used, progress=b.callback(task)
        )
        b.finish(task, none_done="no labels yet")
        with b.step("report: figures and file"):
            write_report(
                opened.audit,
                out,
                certification=None if decision is None else decision.certification,
                trajectory=trajectory,
                calibration=None if decision is None else decision.curve,
                metric=opened.metric,
                target=opened.target,
                level=opened.level,
                title=f"bayes_eval audit report: {opened.path.name}",
                disclosure={**opened.disclosure(), **_disclosure(opened)},
            )
