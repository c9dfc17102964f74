"""The content of a report (headline, tables, figures, notes, disclosure), format-free.

:func:`build_report` turns an audit, an audit result or a :class:`~bayes_eval.MetricPosterior`
(with an optional certification, trajectory and calibration) into a :class:`Report`;
:mod:`bayes_eval.report._render` writes it as HTML or Markdown.

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (why the number of looks and the
correction must be disclosed); Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``
(stratified audits).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from .._draws import decision_level
from .._validation import check_level
from ..metrics import relevant_sides
from . import _plots
from ._disclosure import (
    certification_rows,
    disclosure_entries,
    get_first,
    has_correction,
    is_posterior,
)

if TYPE_CHECKING:
    from ..audit import Audit, AuditResult
    from ..certification import Certification
    from ..posterior import MetricPosterior
    from ..sequential import SequentialCalibration

__all__ = ["Report", "build_report"]


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
def _unpack(obj: Any) -> tuple[Any, Any, Any, Any, Any]:
    """-> (posterior, audit, result, certification, trajectory) from a posterior/audit/result."""
    if is_posterior(obj):
        return obj, None, None, None, None
    post = get_first(obj, "posterior")
    if post is not None and is_posterior(post):  # an AuditResult
        audit = get_first(obj, "audit")
        return post, audit, obj, get_first(obj, "certification"), get_first(obj, "trajectory")
    if hasattr(obj, "estimate") and hasattr(obj, "record"):  # an Audit
        return obj.estimate(), obj, None, None, get_first(obj, "trajectory")
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
        m = get_first(src, "metric")
        if isinstance(m, str) and m in post.metrics:
            return m
    return "f1" if "f1" in post.metrics else post.metrics[0]


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
    cal = calibration if calibration is not None else get_first(cert, "calibration")
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
    audit_or_posterior: MetricPosterior | Audit | AuditResult,
    *,
    certification: Certification | None = None,
    trajectory: xr.Dataset | None = None,
    calibration: SequentialCalibration | xr.Dataset | None = None,
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
        level = get_first(cert, "level") or get_first(audit, "level") or 0.95
    level = check_level(level, "level")
    if target is None:
        target = get_first(cert, "target") or get_first(audit, "target")
    if target is not None and (
        isinstance(target, bool) or not isinstance(target, numbers.Real) or not np.isfinite(target)
    ):
        raise ValueError(f"target={target!r} must be a finite real number or None")

    cal, corrected_level = _calibration_of(cert, calibration, level)  # validated before drawing
    info = post.information() if hasattr(post, "information") else {}
    prior_only = [m for m, i in info.items() if not i.informed]
    metric_prior_only = metric in prior_only
    lb_level = level
    used = get_first(cert, "level_used")
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
        lb = get_first(cert, "lower_bound")
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
        accepted = get_first(cert, "accepted")
        verdict = "ACCEPTED" if accepted else "NOT ACCEPTED"
        looks_taken = get_first(cert, "looks") or 1
        if not has_correction(cert) and int(looks_taken) > 1:
            verdict += f" — UNCORRECTED for {int(looks_taken)} looks (actual level below claimed)"
        if metric_prior_only:
            verdict += " — PRIOR ONLY: no label informs " + metric
        if get_first(cert, "borderline"):
            verdict += " — BORDERLINE (margin below the Monte Carlo error)"
        headline.insert(0, ("certification", verdict))
    if truth and metric in truth:
        headline.append((f"true {metric} (known in this simulation)", f"{truth[metric]:.4f}"))

    tables: list[tuple[str, pd.DataFrame]] = []
    cert_rows = certification_rows(cert) if cert is not None else []
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
            post.lower_bound(metric, decision_level(float(used))),
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
        if corrected_level is None and used is not None and has_correction(cert):
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
    if cert is not None and not has_correction(cert):
        notes.append(
            "No sequential correction: if the data were looked at more than once before "
            "accepting, the actual coverage can be far below the nominal level (Webber et al.)."
        )
    disc = disclosure_entries(
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
