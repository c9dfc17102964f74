"""Posterior reports: a self-contained HTML page (or Markdown) that a reader can check.

:func:`write_report` turns an audit, an audit result or a :class:`~bayes_eval.MetricPosterior`
into a report with

* a headline for the audited metric: posterior mean, one-sided lower bound at the stated level,
  :math:`P(\\text{metric} \\ge \\text{target})` and, with a certification, the verdict;
* the posterior table of every metric and the per-stratum table (size, predicted side, score
  range, labels, positives, rate);
* figures drawn with arviz-plots (:mod:`bayes_eval._plots`): each metric's posterior with the
  target and the lower bound marked, the stratum rates (forest plot) labelled with the labels per
  stratum, the estimate and lower bound against labels used (from a trajectory), and for a
  certification with a sequential correction the nominal-to-actual coverage curve;
* a disclosure block (design, prior, model, finite-population view, looks taken, correction,
  seed, package versions, population fingerprint...) from which the claim can be reproduced.

HTML reports embed their PNG figures as base64 ``data:`` URIs and load nothing from the network.
Markdown reports write their figures as PNG files next to the ``.md`` file
(``<stem>_<figure>.png``) and link them relatively.

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (why the number of looks and the
correction must be disclosed); Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``
(stratified audits).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import html
import numbers
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from . import _plots
from ._validation import check_level

__all__ = ["Report", "build_report", "write_report"]

_VERSIONED = (
    "bayes-eval",
    "numpy",
    "scipy",
    "xarray",
    "pandas",
    "arviz-base",
    "arviz-stats",
    "arviz-plots",
    "matplotlib",
    "pymc",
)


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages a result depends on."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - optional package
            out[name] = "not installed"
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """Content of a report, independent of the output format.

    Attributes
    ----------
    title : str
    headline : list of (str, str)
        Key facts shown first (label, value).
    tables : list of (str, pandas.DataFrame)
    certification : list of (str, str)
        Fields of the certification (empty without one).
    figures : list of (str, str, bytes)
        ``(key, caption, png bytes)``.
    disclosure : dict of str to str
    notes : list of str
    """

    title: str
    headline: list[tuple[str, str]]
    tables: list[tuple[str, pd.DataFrame]]
    certification: list[tuple[str, str]]
    figures: list[tuple[str, str, bytes]]
    disclosure: dict[str, str]
    notes: list[str]


# ----------------------------------------------------------------------------- input unpacking
def _is_posterior(obj: Any) -> bool:
    return hasattr(obj, "datatree") and hasattr(obj, "strata_table") and hasattr(obj, "metrics")


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        v = float(value)
        return f"{v:.4g}" if np.isfinite(v) else str(v)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return ", ".join(_fmt(v) for v in value)
    if isinstance(value, xr.Dataset | xr.DataArray | xr.DataTree):
        return f"<{type(value).__name__}>"
    return str(value)


def _get(obj: Any, *names: str) -> Any:
    """First attribute (or zero-argument method result) among ``names`` that exists."""
    if obj is None:
        return None
    for name in names:
        try:
            value = getattr(obj, name)
        except Exception:  # properties may raise on incomplete objects
            continue
        if value is None:
            continue
        if callable(value) and not isinstance(value, type):
            try:
                value = value()
            except TypeError:
                continue
        return value
    return None


def _unpack(obj: Any) -> tuple[Any, Any, Any, Any, Any]:
    """-> (posterior, audit, result, certification, trajectory) from a posterior/audit/result."""
    if _is_posterior(obj):
        return obj, None, None, None, None
    post = _get(obj, "posterior")
    if post is not None and _is_posterior(post):  # an AuditResult
        audit = _get(obj, "audit")
        return post, audit, obj, _get(obj, "certification"), _get(obj, "trajectory")
    if hasattr(obj, "estimate") and hasattr(obj, "record"):  # an Audit
        return obj.estimate(), obj, None, None, _get(obj, "trajectory")
    raise TypeError(
        f"audit_or_posterior has type {type(obj).__name__}; allowed: a MetricPosterior, an "
        "Audit or an AuditResult"
    )


def _target_metric(post: Any, audit: Any, cert: Any, metric: str | None) -> str:
    if metric is not None:
        if metric not in post.metrics:
            raise ValueError(
                f"metric={metric!r} is not in the posterior; allowed: {', '.join(post.metrics)}"
            )
        return metric
    for src in (cert, audit):
        m = _get(src, "metric")
        if isinstance(m, str) and m in post.metrics:
            return m
    return "f1" if "f1" in post.metrics else post.metrics[0]


def _disclosure(
    post: Any,
    audit: Any,
    result: Any,
    cert: Any,
    extra: Mapping[str, Any] | None,
    metric: str,
    level: float,
    target: float | None,
) -> dict[str, str]:
    tree = post.datatree
    attrs = dict(tree.attrs)
    d: dict[str, Any] = {
        "metric": metric,
        "target": target,
        "level asked": level,
    }
    if cert is not None:
        for key, names in (
            ("level used", ("level_used",)),
            ("correction", ("correction",)),
            ("looks taken", ("looks", "n_looks", "looks_taken")),
            ("labels", ("n_labels", "labels")),
        ):
            v = _get(cert, *names)
            if v is not None:
                d[key] = v
    design = _get(audit, "design_name") or _get(_get(audit, "design"), "name")
    if design is None and cert is not None:
        design = _get(cert, "design")
    d["design"] = design
    d["prior"] = post.prior
    d["model"] = post.model
    d["finite population"] = post.finite_population
    d["Monte Carlo draws"] = post.n_draws
    d["labels used"] = post.n_labels
    method, variable = attrs.get("strata_method", "?"), attrs.get("strata_variable", "?")
    d["strata"] = f"{post.n_strata} ({method} on {variable})"
    if "looks taken" not in d:
        looks = [_get(result, "n_looks")]
        if isinstance(_get(result, "trajectory"), xr.Dataset):
            looks.append(int(result.trajectory.sizes.get("look", 0)))
        looks += [_get(audit, "looks"), _get(audit, "rounds")]
        looks = [int(v) for v in looks if isinstance(v, numbers.Integral)]
        if looks and max(looks) > 0:
            d["looks taken"] = max(looks)
    if d["design"] is None:
        d["design"] = _get(result, "design")
    seed = _get(audit, "seed")
    if seed is None:
        seed = _get(result, "seed")
    if seed is None:
        manifest = _get(audit, "manifest")
        if isinstance(manifest, Mapping):
            seed = manifest.get("seed")
    d["seed"] = seed
    pop = _get(audit, "population")
    if pop is not None and hasattr(pop, "fingerprint"):
        d["population fingerprint (sha256)"] = pop.fingerprint()
        d["population size"] = pop.size
        d["threshold"] = _get(pop, "threshold")
    d["audit directory"] = _get(audit, "path")
    d["posterior created"] = attrs.get("created_at")
    d.update(dict(extra or {}))
    d.update({f"version {k}": v for k, v in package_versions().items()})
    return {k: _fmt(v) for k, v in d.items() if v is not None}


def _certification_rows(cert: Any) -> list[tuple[str, str]]:
    rows: dict[str, str] = {}
    if dataclasses.is_dataclass(cert):
        for f in dataclasses.fields(cert):
            if f.name.startswith("_"):
                continue
            v = getattr(cert, f.name)
            if isinstance(v, xr.Dataset | xr.DataArray | xr.DataTree) or _is_posterior(v):
                continue
            rows[f.name.replace("_", " ")] = _fmt(v)
    else:
        for name in (
            "accepted",
            "metric",
            "target",
            "lower_bound",
            "prob_at_least",
            "level",
            "level_used",
            "n_labels",
            "looks",
            "design",
            "prior",
            "correction",
        ):
            v = _get(cert, name)
            if v is not None:
                rows[name.replace("_", " ")] = _fmt(v)
    return list(rows.items())


def _ranges(ids: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0–2, 5"``."""
    out: list[str] = []
    for k in ids:
        if out and out[-1].split("–")[-1] == str(k - 1):
            out[-1] = out[-1].split("–")[0] + f"–{k}"
        else:
            out.append(str(k))
    return ", ".join(out)


def _metric_status(post: Any, names: Any, info: Mapping[str, Any]) -> dict[str, str]:
    """Per metric: "yes", "PRIOR ONLY", "exact (all labelled)" or "constant (no uncertainty)"."""
    tree = post.datatree
    sizes = np.asarray(tree["constant_data"]["N"].values)
    n = np.asarray(tree["observed_data"]["n"].values)
    out = {}
    for m in names:
        i = info.get(m)
        if i is not None and not i.informed:
            out[m] = "PRIOR ONLY"
            continue
        x = post.draws(m)
        if np.isfinite(x).all() and float(np.ptp(x)) == 0.0:
            all_labelled = bool(post.finite_population) and bool(np.all(n >= sizes))
            if not all_labelled and i is not None:
                from .metrics import relevant_sides

                neg, pos = relevant_sides(m)
                pred = np.asarray(tree["constant_data"]["predicted"].values).astype(bool)
                rel = (pred & pos) | (~pred & neg)
                all_labelled = bool(post.finite_population) and bool(np.all(n[rel] >= sizes[rel]))
            out[m] = "exact (all labelled)" if all_labelled else "constant (no uncertainty)"
        else:
            out[m] = "yes"
    return out


def _calibration_of(
    cert: Any, calibration: Any, level: float
) -> tuple[xr.Dataset | None, float | None]:
    """The coverage curve (Dataset) and corrected nominal level from a calibration argument
    (Dataset, SequentialCalibration or Correction) or from the certification."""
    cal = calibration if calibration is not None else _get(cert, "calibration")
    if cal is None:
        return None, None
    if isinstance(cal, xr.Dataset):
        return cal, None
    if hasattr(cal, "level_used") and isinstance(getattr(cal, "curve", None), xr.Dataset):
        return cal.curve, float(cal.level_used)  # a sequential Correction
    curve = getattr(cal, "curve", None)
    if not isinstance(curve, xr.Dataset):
        raise TypeError(
            f"calibration has type {type(cal).__name__}; allowed: a SequentialCalibration from "
            "bayes_eval.calibrate_sequential or its coverage curve (xarray Dataset)"
        )
    try:
        corrected = float(cal.corrected_level(level))
    except (ValueError, AttributeError):
        corrected = None
    return curve, corrected


def build_report(
    audit_or_posterior: Any,
    *,
    certification: Any = None,
    trajectory: xr.Dataset | None = None,
    calibration: Any = None,
    title: str = "bayes_eval audit report",
    metric: str | None = None,
    target: float | None = None,
    level: float | None = None,
    truth: Mapping[str, float] | None = None,
    disclosure: Mapping[str, Any] | None = None,
    max_metrics: int = 6,
    figures: bool = True,
) -> Report:
    """Compute the content of a report (tables, figures, disclosure); see :func:`write_report`.

    With ``figures=False`` no figure is drawn (a fast, text-only report).
    """
    post, audit, result, cert0, traj0 = _unpack(audit_or_posterior)
    cert = certification if certification is not None else cert0
    traj = trajectory if trajectory is not None else traj0
    if traj is not None and not isinstance(traj, xr.Dataset):
        raise TypeError(
            f"trajectory has type {type(traj).__name__}; allowed: an xarray Dataset with one "
            "entry per look"
        )
    metric = _target_metric(post, audit, cert, metric)
    if level is None:
        level = _get(cert, "level") or _get(audit, "level") or 0.95
    level = check_level(level, "level")
    if target is None:
        target = _get(cert, "target") or _get(audit, "target")
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, numbers.Real) or not np.isfinite(target)
    ):
        raise ValueError(f"target={target!r} must be a finite real number or None")

    cal, corrected_level = _calibration_of(cert, calibration, level)  # validated before drawing
    info = post.information() if hasattr(post, "information") else {}
    prior_only = [m for m, i in info.items() if not i.informed]
    metric_prior_only = metric in prior_only
    lb_level = level
    used = _get(cert, "level_used")
    if used is not None:
        lb_level = float(used)
    if metric_prior_only:
        bound_row = (
            "lower bound",
            "PRIOR ONLY: no label informs " + metric + " (" + info[metric].reason + ")",
        )
        mean_row = ("posterior mean", f"PRIOR ONLY ({post.mean(metric):.4f} is the prior's)")
    else:
        mean_row = ("posterior mean", f"{post.mean(metric):.4f}")
        if used is not None and abs(lb_level - level) > 1e-12:
            label = f"lower bound at level used {lb_level:.4g} (for claimed {level:g})"
        else:
            label = f"{lb_level:.0%} lower bound (one-sided)"
        lb = _get(cert, "lower_bound")
        value = float(lb) if lb is not None else post.lower_bound(metric, lb_level)
        bound_row = (label, f"{value:.4f}")
    headline: list[tuple[str, str]] = [
        ("metric", metric),
        mean_row,
        bound_row,
        ("labels used", f"{post.n_labels:,}"),
    ]
    if target is not None:
        headline.insert(1, ("target", f"{float(target):g}"))
        headline.append(
            (f"P({metric} ≥ {float(target):g})", f"{post.prob_at_least(metric, float(target)):.4f}")
        )
    if cert is not None:
        accepted = _get(cert, "accepted")
        verdict = "ACCEPTED" if accepted else "NOT ACCEPTED"
        looks_taken = _get(cert, "looks") or 1
        correction = str(_get(cert, "correction") or "none")
        if correction.startswith("none") and int(looks_taken) > 1:
            verdict += f" — UNCORRECTED for {int(looks_taken)} looks (actual level below claimed)"
        if metric_prior_only:
            verdict += " — PRIOR ONLY: no label informs " + metric
        if _get(cert, "borderline"):
            verdict += " — BORDERLINE (margin below the Monte Carlo error)"
        headline.insert(0, ("certification", verdict))
    if truth and metric in truth:
        headline.append((f"true {metric} (known in this simulation)", f"{truth[metric]:.4f}"))

    tables: list[tuple[str, pd.DataFrame]] = []
    cert_rows = _certification_rows(cert) if cert is not None else []
    summary = post.summary(level=level)
    status = _metric_status(post, summary.index, info)
    if "informed" in summary.columns:
        summary = summary.drop(columns="informed")
    if prior_only:
        summary = summary.astype(object)
        for m in prior_only:
            if m in summary.index:
                summary.loc[m, :] = np.nan
    summary.insert(0, "labels inform it", [status[q] for q in summary.index])
    if truth:
        summary["true value"] = [truth.get(q, np.nan) for q in summary.index]
    tables.append(("Posterior of every metric", summary))
    strata_tab = post.strata_table()
    unlabelled = strata_tab["labelled"].to_numpy() == 0
    if unlabelled.any():
        rate_cols = [c for c in strata_tab.columns if str(c).startswith("rate")]
        strata_tab = strata_tab.astype({c: object for c in rate_cols})
        strata_tab.loc[unlabelled, rate_cols] = np.nan
    strata_tab.insert(
        0, "labels inform it", np.where(unlabelled, "PRIOR ONLY", "yes").astype(object)
    )
    tables.append(("Strata", strata_tab))

    shown = [metric] + [
        m for m in ("precision", "recall", "f1", "accuracy") if m in post.metrics and m != metric
    ]
    shown = [m for m in shown if m not in prior_only][:max_metrics]
    targets = {metric: float(target)} if target is not None else {}
    extra: dict[str, tuple[float, str]] = {}
    caption = (
        f"Posterior of each metric; dashed red: target; dotted blue: {level:g} one-sided lower "
        f"bound; bar: {max(2 * level - 1, 0.01):.0%} equal-tailed interval, whose lower end is "
        "that bound"
    )
    corrected_used = used is not None and abs(float(used) - level) > 1e-12
    if corrected_used:
        extra[metric] = (
            post.lower_bound(metric, float(used)),
            f"lower bound at level used {float(used):.4g}",
        )
        caption += (
            f"; dash-dot purple on {metric}: the decision bound, at the corrected nominal level "
            f"{float(used):.4g}"
        )
    traj_caption = "Estimate and lower bound against labels used (one point per look)."
    if (
        traj is not None
        and corrected_used
        and not any(v in traj.variables for v in ("lower_bound_used", "lower_bound_corrected"))
    ):
        traj_caption += (
            f" The bound drawn is at the nominal {level:g}, not at the corrected level used "
            f"{float(used):.4g}: the trajectory does not carry the corrected bound."
        )
    draw = bool(figures)
    notes: list[str] = []
    figures_out: list[tuple[str, str, bytes]] = []
    if prior_only:
        strata_ids = sorted({k for m in prior_only for k in info[m].unlabelled_strata})
        sizes = np.asarray(post.datatree["constant_data"]["N"].values)
        share = float(sizes[strata_ids].sum() / sizes.sum())
        notes.append(
            f"PRIOR ONLY (greyed, no value shown): {', '.join(prior_only)}. Each depends on "
            f"strata without a single label ({_ranges(strata_ids)}: {share:.1%} of the "
            "population), whose rates come from the prior alone; their distribution is the "
            "prior's, not an estimate. Label those strata to estimate them."
        )
    exact = _plots.exact_metrics(post, shown)
    for m in exact:
        if status.get(m) == "exact (all labelled)":
            notes.append(
                f"Known exactly: {m} = {post.mean(m):.4f} (every item it depends on is labelled, "
                "so no posterior density is drawn)."
            )
        else:
            notes.append(
                f"{m} = {post.mean(m):.4f} in every draw, with no uncertainty: it is constant by "
                "definition on this population (e.g. without predicted positives F1 is 0 whenever "
                "there are positives), not because labels pin it down."
            )
    if draw and shown and len(exact) < len(shown):
        figures_out.append(
            (
                "posterior",
                caption + ".",
                _plots.metric_posteriors_png(
                    post, shown, level=level, targets=targets, extra_bounds=extra
                ),
            )
        )
    if draw:
        figures_out.append(
            (
                "strata",
                "Positive rate per stratum (forest plot); labels: positives/labelled of "
                "stratum size, (+)/(−) predicted side.",
                _plots.strata_rates_png(post),
            )
        )
    if traj is not None and draw:
        figures_out.append(
            (
                "trajectory",
                traj_caption,
                _plots.trajectory_png(
                    traj,
                    metric=metric,
                    level=level,
                    target=target,
                    truth=None if not truth else truth.get(metric),
                ),
            )
        )
    if cal is not None and draw:
        if (
            corrected_level is None
            and used is not None
            and _get(cert, "correction") not in (None, "none")
        ):
            corrected_level = float(used)
        figures_out.append(
            (
                "calibration",
                "Actual against nominal coverage of the repeated-looks acceptance "
                "rule under the least-favourable truth (metric exactly at the target); band: "
                "± 2 Monte Carlo standard errors.",
                _plots.calibration_png(cal, level=level, corrected_level=corrected_level),
            )
        )
    notes[:0] = [
        f"The lower bound is the {1 - level:.0%} quantile of the posterior: "
        f"P({metric} ≥ bound) = {level:g} given the labels, the prior and the model below.",
    ]
    if cert is not None and _get(cert, "correction") in (None, "none", False):
        notes.append(
            "No sequential correction: if the data were looked at more than once before "
            "accepting, the actual coverage can be far below the nominal level (Webber et al.)."
        )
    disc = _disclosure(
        post,
        audit,
        result,
        cert,
        disclosure,
        metric,
        level,
        None if target is None else float(target),
    )
    return Report(title, headline, tables, cert_rows, figures_out, disc, notes)


# ----------------------------------------------------------------------------- rendering
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em;border-bottom:2px solid #1f4e79;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:1.6em;color:#1f4e79}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#eef3f8}
td:first-child,th:first-child{text-align:left}
.headline td{font-size:1.05em}
.headline td:first-child{font-weight:600}
figure{margin:1em 0}
figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.85em;color:#555}
.disclosure td{text-align:left;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em}
.accepted{color:#1a7f37;font-weight:700}.rejected{color:#b42318;font-weight:700}
.note{font-size:.9em;color:#444}
.certification td{text-align:left}.certification th{text-align:left}
tr.prior-only td,tr.prior-only th{color:#9a9a9a;background:#f2f2f2;font-style:italic}
.prior-note{color:#6b6b6b;border-left:4px solid #bbb;padding-left:.6em}
"""


def _cell_html(value: Any) -> str:
    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}"
    return html.escape(str(value))


def _table_html(frame: pd.DataFrame, cls: str = "") -> str:
    """A table; rows whose "labels inform it" cell says PRIOR ONLY get the ``prior-only`` class
    (greyed)."""
    esc = html.escape
    attr = f' class="{esc(cls)}"' if cls else ""
    head = [frame.index.name or "", *map(str, frame.columns)]
    parts = [f"<table{attr}><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)]
    parts.append("</tr></thead><tbody>")
    status_col = "labels inform it" if "labels inform it" in frame.columns else None
    for idx, row in frame.iterrows():
        prior_only = status_col is not None and row[status_col] == "PRIOR ONLY"
        rcls = ' class="prior-only"' if prior_only else ""
        cells = "".join(f"<td>{_cell_html(v)}</td>" for v in row.tolist())
        parts.append(
            f'<tr{rcls} data-quantity="{esc(str(idx))}"><th>{esc(str(idx))}</th>{cells}</tr>'
        )
    parts.append("</tbody></table>")
    return "".join(parts)


def render_html(report: Report) -> str:
    """The report as a self-contained HTML document (figures as base64 data URIs)."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>",
        '<table class="headline">',
    ]
    for key, value in report.headline:
        cls = ""
        if key == "certification":
            cls = ' class="accepted"' if value.startswith("ACCEPTED") else ' class="rejected"'
        parts.append(f"<tr><td>{esc(key)}</td><td{cls}>{esc(value)}</td></tr>")
    parts.append("</table>")
    for note in report.notes:
        cls = "note prior-note" if note.startswith("PRIOR ONLY") else "note"
        parts.append(f'<p class="{cls}">{esc(note)}</p>')
    if report.certification:
        parts.append('<h2>Certification</h2><table class="certification">')
        for key, value in report.certification:
            parts.append(f"<tr><th>{esc(key)}</th><td>{esc(value)}</td></tr>")
        parts.append("</table>")
    for name, frame in report.tables:
        parts.append(f"<h2>{esc(name)}</h2>")
        parts.append(_table_html(frame))
    parts.append("<h2>Figures</h2>")
    for key, caption, png in report.figures:
        data = base64.b64encode(png).decode("ascii")
        parts.append(
            f'<figure id="fig-{esc(key)}"><img class="plot" alt="{esc(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{esc(caption)}</figcaption></figure>'
        )
    parts.append("<h2>Disclosure (what is needed to reproduce the claim)</h2>")
    parts.append('<table class="disclosure">')
    for key, value in report.disclosure.items():
        parts.append(f"<tr><td>{esc(key)}</td><td>{esc(value)}</td></tr>")
    parts.append("</table>")
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    parts.append(f'<p class="note">Generated {esc(stamp)} by bayes_eval.</p>')
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        text = "—" if np.isnan(value) else f"{value:.4g}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(frame: pd.DataFrame) -> str:
    index_name = frame.index.name or ""
    head = [index_name, *map(str, frame.columns)]
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for idx, row in frame.iterrows():
        lines.append("| " + " | ".join(_md_cell(v) for v in [idx, *row.tolist()]) + " |")
    return "\n".join(lines)


def render_markdown(report: Report, figure_names: Mapping[str, str]) -> str:
    """The report as Markdown; figures are linked by the file names in ``figure_names``."""
    lines = [f"# {report.title}", ""]
    lines += ["| | |", "|---|---|"]
    lines += [f"| {_md_cell(k)} | {_md_cell(v)} |" for k, v in report.headline]
    lines.append("")
    lines += [f"> {n}" for n in report.notes]
    if report.certification:
        lines += ["", "## Certification", "", "| | |", "|---|---|"]
        lines += [f"| {_md_cell(k)} | {_md_cell(v)} |" for k, v in report.certification]
    for name, frame in report.tables:
        lines += ["", f"## {name}", "", _md_table(frame)]
    lines += ["", "## Figures", ""]
    for key, caption, _ in report.figures:
        lines += [f"![{caption}]({figure_names[key]})", "", f"*{caption}*", ""]
    lines += ["## Disclosure (what is needed to reproduce the claim)", "", "| | |", "|---|---|"]
    lines += [f"| {_md_cell(k)} | `{_md_cell(v)}` |" for k, v in report.disclosure.items()]
    lines.append("")
    return "\n".join(lines)


def write_report(
    audit_or_posterior: Any,
    path: str | Path,
    *,
    certification: Any = None,
    trajectory: xr.Dataset | None = None,
    calibration: Any = None,
    title: str = "bayes_eval audit report",
    metric: str | None = None,
    target: float | None = None,
    level: float | None = None,
    truth: Mapping[str, float] | None = None,
    disclosure: Mapping[str, Any] | None = None,
) -> Path:
    """Write a posterior report as self-contained HTML (``.html``/``.htm``) or Markdown (``.md``).

    Parameters
    ----------
    audit_or_posterior : MetricPosterior, Audit or AuditResult
        What to report on. An audit contributes its design, seed and population fingerprint to
        the disclosure; an audit result also its trajectory and certification.
    path : str or Path
        Output file; the suffix picks the format. Markdown figures are written next to it as
        ``<stem>_<figure>.png``.
    certification : Certification, optional
        From :func:`bayes_eval.certify`; adds the verdict, the certification table and, when it
        carries one, the coverage curve.
    trajectory : xarray.Dataset, optional
        One entry per look with labels used (``n_labels``), ``estimate`` and ``lower_bound``
        (optionally over a ``metric`` dimension).
    calibration : SequentialCalibration or xarray.Dataset, optional
        From :func:`bayes_eval.calibrate_sequential` (or its ``curve``): the nominal-to-actual
        coverage curve, with the corrected nominal level marked.
    title : str
    metric : str, optional
        Metric of the headline; default the certification's or audit's metric, else ``"f1"``.
    target : float, optional
        Marked on the figures; default the certification's target.
    level : float, optional
        One-sided credible level of the lower bounds; default the certification's, else 0.95.
    truth : mapping, optional
        True metric values (simulations only), shown beside the estimates.
    disclosure : mapping, optional
        Extra disclosure entries (e.g. the population file and its sha256).

    Returns
    -------
    Path
        The file written.

    Examples
    --------
    >>> import bayes_eval as be, tempfile, pathlib
    >>> from bayes_eval.report import write_report
    >>> post = be.estimate_counts(80, 20, 10, 890, predicted_sizes=(9000, 1000), draws=2000,
    ...                           rng=0)
    >>> out = write_report(post, pathlib.Path(tempfile.mkdtemp()) / "r.html")
    >>> out.read_text().startswith("<!DOCTYPE html>")
    True
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".html", ".htm", ".md"):
        raise ValueError(
            f"path={str(path)!r} has suffix {path.suffix!r}; allowed: '.html', '.htm' or '.md'"
        )
    if not path.parent.exists():
        raise ValueError(f"path={str(path)!r}: directory {str(path.parent)!r} does not exist")
    report = build_report(
        audit_or_posterior,
        certification=certification,
        trajectory=trajectory,
        calibration=calibration,
        title=title,
        metric=metric,
        target=target,
        level=level,
        truth=truth,
        disclosure=disclosure,
    )
    if suffix == ".md":
        names = {}
        for key, _, png in report.figures:
            fig_path = path.with_name(f"{path.stem}_{key}.png")
            fig_path.write_bytes(png)
            names[key] = fig_path.name
        text = render_markdown(report, names)
    else:
        text = render_html(report)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
