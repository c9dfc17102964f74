"""What the CLI prints: rich tables and panels for people, strict JSON for programs.

``status --json`` and ``certify --json`` print one JSON document on standard output (strict:
NaN and infinities become ``null``; progress and notes go to standard error). Its keys:

``metrics``
    Per metric ``mean``, ``sd``, ``lower``, ``upper`` (one-sided bounds at ``level``) and
    ``prior_only`` (true when a stratum the metric depends on has no label: the prior alone
    decides it, and the numbers are the prior's, not an estimate).
``verdict``
    ``accepted``, ``corrected``, ``level_used``, ``looks``, ``claim_matches_preregistered``,
    ``metric``, ``target``, ``level``, ``lower_bound`` (the one bound the decision used),
    ``prob_at_least``, ``headline``, the correction's description and look schedule, and the
    full certification (``certification``).
``preregistered_claim``, ``looks_logged``
    The claim registered at ``init`` (null for audits from older releases) and the looks the
    ledger holds: their number, per command, and the claims they evaluated.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ._app import _console
from ._looks import claim_text

if TYPE_CHECKING:
    from .._metric_draws import MetricDraws
    from ._looks import Decision

__all__ = ["decision_json", "dump_json", "metrics_json", "print_certification", "strict"]


def _fmt_p(x: float) -> str:
    return f"{x:.4f}"


def strict(value: Any) -> Any:
    """``value`` as strict-JSON data: NaN/inf become None, numpy scalars Python ones."""
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, str):
        try:
            value = value.item()
        except (TypeError, ValueError):
            value = value.tolist()
            return strict(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dump_json(data: dict[str, Any]) -> None:
    """Print ``data`` as one strict JSON document on standard output."""
    import typer

    typer.echo(json.dumps(strict(data), indent=2, allow_nan=False))


def metrics_json(post: Any, level: float) -> dict[str, dict[str, Any]]:
    """Per metric: mean, sd, one-sided ``level`` bounds and whether it is prior only."""
    informed = post.informed()
    return {
        name: {
            "mean": b.mean,
            "sd": b.sd,
            "lower": b.lower,
            "upper": b.upper,
            "prior_only": not bool(informed.get(name, True)),
        }
        for name, b in post.bounds(level).items()
    }


def decision_json(decision: Decision) -> dict[str, Any]:
    """The verdict block of ``certify --json`` (see the module docstring)."""
    cert = decision.certification
    corr = decision.correction
    return {
        "accepted": bool(cert.accepted),
        "corrected": bool(decision.corrected),
        "level_used": cert.level_used,
        "looks": int(cert.looks),
        "claim_matches_preregistered": decision.claim_matches,
        "metric": cert.metric,
        "target": cert.target,
        "level": cert.level_requested,
        "lower_bound": cert.lower_bound,
        "prob_at_least": cert.prob_at_least,
        "informed": bool(cert.informed),
        "borderline": bool(cert.borderline),
        "headline": decision.verdict(),
        "correction": None if corr is None else _correction_json(decision),
        "certification": cert.to_dict(),
    }


def _correction_json(decision: Decision) -> dict[str, Any]:
    """How the corrected level was obtained, with the worst-case truth of the calibration."""
    corr = decision.correction
    schedule = decision.schedule
    worst = corr.worst
    return {
        "description": corr.description,
        "n_sims": int(corr.n_sims),
        "mcse": corr.mcse,
        "rates_source": corr.rates_source,
        "attainable": bool(corr.attainable),
        "level_at_this_look": corr.level_at(int(decision.certification.labels)),
        "strictest_level": corr.level_used,
        "schedule": "planned" if schedule is None or schedule.planned else "actual looks",
        "schedule_note": "" if schedule is None else schedule.note,
        "looks": None if corr.looks is None else [int(v) for v in corr.looks],
        "worst_case_truth": None
        if worst is None
        else {
            "name": worst.name,
            "value": worst.value,
            "false_accept_rate": worst.rate,
            "mcse": worst.mcse,
            "n_sims": int(worst.n_sims),
        },
        "truths": [
            {"name": t.name, "value": t.value, "false_accept_rate": t.rate, "mcse": t.mcse}
            for t in corr.truths
        ],
    }


def print_certification(decision: Decision) -> None:
    """The certification panel: one headline row (the verdict and the one lower bound the
    decision used), then the claim, the looks and how the level was obtained."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    cert = decision.certification
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    colour = "green" if cert.accepted else "red"
    if cert.accepted and (cert.uncorrected or decision.claim_matches is False):
        colour = "yellow"
    rows = [
        ("verdict", f"[{colour}]{escape(decision.verdict())}[/]"),
        ("claim", f"{cert.metric} >= {cert.target:g} at level {cert.level_requested:g}"),
    ]
    if decision.claim is not None or decision.claim_matches is not None:
        rows.append(("pre-registered claim", escape(claim_text(decision.claim))))
    rows += [
        ("labels", f"{cert.labels}"),
        ("looks", f"{cert.looks}"),
        ("design", f"{cert.design}"),
        ("prior / model", f"{cert.prior} / {cert.model}"),
        ("correction", escape(f"{cert.correction}")),
    ]
    for key, value in cert.disclosure:
        if key != "method":
            rows.append((escape(key), escape(str(value))))
    if decision.schedule is not None and not decision.schedule.planned:
        rows.append(("look schedule", escape(decision.schedule.note)))
    for k, v in rows:
        t.add_row(k, v)
    _console().print(Panel(t, title="Certification", expand=False))


def status_table(post: Any, level: float, metric: str) -> Any:
    """The posterior table of ``status``: prior-only metrics greyed, their bounds not shown as
    an estimate. Built from ``post.bounds`` (numpy only), not ``post.summary``, whose two-sided
    interval and Monte Carlo error import arviz-stats (issue 18: start-up)."""
    from rich.table import Table

    informed = post.informed()
    tag = f"{level:g}"
    t = Table(title=f"Posterior (one-sided {tag} bounds)")
    for col in ("metric", "mean", "sd", f"lower {tag}", f"upper {tag}", "informed by"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    for name, b in post.bounds(level).items():
        prior_only = not informed.get(name, True)
        style = "dim" if prior_only else ("bold" if name == metric else None)
        if prior_only:
            cells = (f"({_fmt_p(b.mean)})", "", "", "", "prior only")
        else:
            cells = (_fmt_p(b.mean), _fmt_p(b.sd), _fmt_p(b.lower), _fmt_p(b.upper), "labels")
        t.add_row(name, *cells, style=style)
    return t


def strata_table(post: MetricDraws) -> Any:
    """Labels and positive rate per stratum."""
    from rich.table import Table

    t = Table(title="Strata")
    for col in ("stratum", "side", "scores", "N", "labelled", "positives", "rate"):
        t.add_column(col, justify="right")
    for row in post.strata_rows():
        t.add_row(
            str(row.stratum),
            "+" if row.predicted else "−",
            f"[{row.score_min:.3g}, {row.score_max:.3g}]",
            f"{row.size:,}",
            str(row.labelled),
            str(row.positives),
            f"{row.rate_mean:.3f}" if row.labelled else "(prior)",
        )
    return t
