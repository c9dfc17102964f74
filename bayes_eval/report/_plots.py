"""Figures of the posterior report, drawn with arviz-plots (matplotlib backend).

Every function returns PNG bytes and closes its figure, so report generation leaks no figures
and needs no display (the Agg canvas is used for rendering). The arviz-plots functions work on the
:class:`~bayes_eval.MetricPosterior` datatree unchanged (ArviZ group names); reference lines,
target and bound lines on the posteriors with ``arviz_plots.add_lines``; the trajectory and
calibration panels are plain matplotlib. Figures are rendered at 150 dpi with axis labels and
legends outside the data.

* :func:`metric_posteriors_png` -- ``arviz_plots.plot_dist`` of each metric with the target and
  the one-sided lower bound marked;
* :func:`strata_rates_png` -- ``arviz_plots.plot_forest`` of the stratum positive rates ``theta``
  labelled with predicted side, labels used and stratum size;
* :func:`trajectory_png` -- posterior mean and lower bound against labels used;
* :func:`calibration_png` -- nominal against actual coverage of a sequential acceptance rule.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

__all__ = [
    "PNG_SIGNATURE",
    "calibration_png",
    "metric_posteriors_png",
    "strata_rates_png",
    "trajectory_png",
]

#: First 8 bytes of every PNG file.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_TARGET_STYLE = {"color": "#c0392b", "linestyle": "--", "linewidth": 1.6}
_BOUND_STYLE = {"color": "#1f4e79", "linestyle": ":", "linewidth": 2.0}
_EXTRA_STYLE = {"color": "#7b3294", "linestyle": "-.", "linewidth": 1.6}
_DPI = 150


def _to_png(fig: Any) -> bytes:
    """Render a matplotlib figure to PNG bytes with the Agg canvas and close it."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # attach an Agg canvas whatever the session's backend
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    return buf.getvalue()


def _figure_of(pc: Any) -> Any:
    fig = pc.viz["figure"]
    return fig.item() if hasattr(fig, "item") else fig


def _axes_of(pc: Any, var: str) -> Any:
    ax = pc.viz["plot"][var]
    return ax.item() if hasattr(ax, "item") else ax


def exact_metrics(posterior: Any, metrics: Sequence[str]) -> list[str]:
    """The metrics among ``metrics`` whose posterior draws are all equal (no uncertainty)."""
    out = []
    for name in metrics:
        x = posterior.draws(name)
        if not np.isfinite(x).all() or float(np.ptp(x)) == 0.0:
            out.append(name)
    return out


def _is_discrete(x: np.ndarray) -> bool:
    """Few distinct values: a KDE would draw a comb, so a histogram is shown instead."""
    return np.unique(x).size < 200


def _add_line(pc: Any, var: str, value: float, style: Mapping[str, Any]) -> None:
    """A vertical reference line on ``var``'s panel with ``arviz_plots.add_lines``."""
    import arviz_plots as azp

    azp.add_lines(pc, values={var: [float(value)]}, visuals={"ref_line": dict(style)})


def metric_posteriors_png(
    posterior: Any,
    metrics: Sequence[str],
    *,
    level: float = 0.95,
    targets: Mapping[str, float] | None = None,
    extra_bounds: Mapping[str, tuple[float, str]] | None = None,
) -> bytes:
    """Posterior of each metric (``arviz_plots.plot_dist``) with the claim and the decision
    bound marked by ``arviz_plots.add_lines``.

    Marks: target (red dashed), the one-sided ``level`` lower bound (blue dotted) or, where
    ``extra_bounds`` gives one (the bound at a sequentially corrected level), that bound alone
    (purple dash-dot) as the *decision* bound. The bar under each panel is the equal-tailed
    interval of probability ``2 level - 1``, so that its lower end is the one-sided ``level``
    bound. Discrete posteriors (few distinct draws) are drawn as histograms, not KDEs. The legend
    sits below the panels, never over them. Metrics whose draws are all equal (known exactly) have
    no density and are left out; see :func:`exact_metrics`.
    """
    import arviz_plots as azp
    from matplotlib.lines import Line2D

    targets = dict(targets or {})
    extra_bounds = dict(extra_bounds or {})
    exact = set(exact_metrics(posterior, metrics))
    metrics = [m for m in metrics if m not in exact]
    if not metrics:
        raise ValueError("every metric is known exactly: there is no posterior density to draw")
    discrete = any(_is_discrete(posterior.draws(m)) for m in metrics)
    ci_prob = max(2 * level - 1, 0.01)
    ncol = min(3, len(metrics))
    pc = azp.plot_dist(
        posterior.datatree,
        var_names=metrics,
        backend="matplotlib",
        kind="hist" if discrete else "kde",
        ci_kind="eti",
        ci_prob=ci_prob,
        col_wrap=ncol,
        figure_kwargs={"figsize": (4.4 * ncol, 3.2 * -(-len(metrics) // 3) + 0.9)},
    )
    handles: dict[str, Any] = {}
    for name in metrics:
        if name in extra_bounds:
            value, text = extra_bounds[name]
            _add_line(pc, name, value, _EXTRA_STYLE)
            handles["decision"] = Line2D([], [], label=f"decision bound: {text}", **_EXTRA_STYLE)
        else:
            _add_line(pc, name, posterior.lower_bound(name, level), _BOUND_STYLE)
            handles["bound"] = Line2D(
                [], [], label=f"{level:g} one-sided lower bound", **_BOUND_STYLE
            )
        if name in targets:
            _add_line(pc, name, targets[name], _TARGET_STYLE)
            handles["target"] = Line2D([], [], label="target (the claim)", **_TARGET_STYLE)
        ax = _axes_of(pc, name)
        ax.set_xlabel(name)
        ax.set_ylabel("posterior (histogram)" if discrete else "posterior density")
    handles["ci"] = Line2D(
        [],
        [],
        color="#444444",
        linewidth=2.5,
        label=f"bar: {ci_prob:.0%} equal-tailed interval (lower end = {level:g} bound); dot: mean",
    )
    fig = _figure_of(pc)
    fig.set_layout_engine("constrained")
    fig.legend(
        handles=list(handles.values()),
        loc="outside lower center",
        ncols=2,
        fontsize=8,
        frameon=False,
    )
    return _to_png(fig)


def _strata_labels(posterior: Any) -> list[str]:
    const = posterior.datatree["constant_data"]
    obs = posterior.datatree["observed_data"]
    labels = []
    for k in range(posterior.n_strata):
        side = "+" if int(const["predicted"].values[k]) else "−"
        smin, smax = float(const["score_min"].values[k]), float(const["score_max"].values[k])
        rng = "" if not np.isfinite(smin) else f" [{smin:.3g}, {smax:.3g}]"
        n_k = int(obs["n"].values[k])
        prior_only = "  PRIOR ONLY (no label)" if n_k == 0 else ""
        labels.append(
            f"{k} ({side}){rng}  {int(obs['h'].values[k])}/{n_k}"
            f" of {int(const['N'].values[k]):,}{prior_only}"
        )
    return labels


def strata_rates_png(posterior: Any) -> bytes:
    """Forest plot of the stratum positive rates ``theta`` (``arviz_plots.plot_forest``).

    Each row is labelled ``k (side) [score range] positives/labels of N_k``.
    """
    import arviz_plots as azp

    theta = posterior.datatree["posterior"]["theta"]
    theta = theta.assign_coords(stratum=_strata_labels(posterior))
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"positive rate": theta})})
    k = posterior.n_strata
    pc = azp.plot_forest(
        tree,
        backend="matplotlib",
        labels=["stratum"],
        figure_kwargs={"figsize": (10.0, 0.45 * k + 1.4), "width_ratios": [1.1, 1.5]},
    )
    fig = _figure_of(pc)
    pc.viz["plot"].sel(column="forest").item().set_xlabel(
        "positive rate θ (posterior mean, intervals)"
    )
    fig.suptitle(
        "Positive rate per stratum (labels: positives/labelled of stratum size)", fontsize=11
    )
    return _to_png(fig)


def _pick(ds: xr.Dataset, names: Sequence[str]) -> str | None:
    for n in names:
        if n in ds.variables:
            return n
    return None


def _lower_label(trajectory: xr.Dataset, level: float) -> str:
    attrs = trajectory.attrs
    if "lower_bound_label" in attrs:
        return str(attrs["lower_bound_label"])
    if "lower_bound" not in trajectory.variables and attrs.get("interval") == "equal-tailed":
        two_sided = float(attrs.get("level", level))
        return f"{(1 + two_sided) / 2:g} one-sided lower bound"
    return f"{level:g} one-sided lower bound"


def trajectory_png(
    trajectory: xr.Dataset,
    *,
    metric: str,
    level: float = 0.95,
    target: float | None = None,
    truth: float | None = None,
) -> bytes:
    """Posterior mean and lower bound of ``metric`` against labels used.

    ``trajectory`` is a Dataset with one entry per look; it needs a labels-used variable
    (``n_labels`` or ``labels``), an estimate (``estimate`` or ``mean``) and a lower bound
    (``lower_bound`` or ``lower``), each optionally with a ``metric`` dimension. A
    ``lower_bound_used`` (or ``lower_bound_corrected``) variable, the bound at the sequentially
    corrected level, is drawn too (purple), labelled by the attribute ``lower_bound_used_label``.
    The legend sits outside the axes.
    """
    import matplotlib.pyplot as plt

    x_name = _pick(trajectory, ("n_labels", "labels", "labels_used"))
    m_name = _pick(trajectory, ("estimate", "mean", "posterior_mean"))
    lb_name = _pick(trajectory, ("lower_bound", "lower", "lower_bound_nominal"))
    if x_name is None or m_name is None:
        raise ValueError(
            f"trajectory has variables {sorted(trajectory.variables)}; it needs a labels-used "
            "variable ('n_labels' or 'labels') and an estimate ('estimate' or 'mean')"
        )

    def sel(name: str) -> np.ndarray:
        da = trajectory[name]
        if "metric" in da.dims:
            da = da.sel(metric=metric)
        return np.asarray(da.values, dtype=np.float64).reshape(-1)

    x = sel(x_name)
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    ax.plot(x, sel(m_name), marker="o", markersize=3, color="#2c7fb8", label="posterior mean")
    if lb_name is not None:
        ax.plot(
            x,
            sel(lb_name),
            marker="o",
            markersize=3,
            color=_BOUND_STYLE["color"],
            label=_lower_label(trajectory, level),
        )
    used_name = _pick(trajectory, ("lower_bound_used", "lower_bound_corrected"))
    if used_name is not None:
        used_label = trajectory.attrs.get("lower_bound_used_label", "lower bound at level used")
        ax.plot(x, sel(used_name), marker="s", markersize=3, label=str(used_label), **_EXTRA_STYLE)
    up_name = _pick(trajectory, ("upper_bound", "upper"))
    if up_name is not None and lb_name is not None:
        ax.fill_between(
            x, sel(lb_name), sel(up_name), color="#2c7fb8", alpha=0.12, label="interval"
        )
    if target is not None:
        ax.axhline(target, label=f"target {target:g}", **_TARGET_STYLE)
    if truth is not None:
        ax.axhline(truth, color="#555555", linewidth=1.0, label=f"true value {truth:.3f}")
    ax.set_xlabel("labels used")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric}: estimate and lower bound as labels accrue")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _to_png(fig)


def calibration_png(
    calibration: xr.Dataset, *, level: float | None = None, corrected_level: float | None = None
) -> bytes:
    """Actual against nominal coverage of the sequential acceptance rule.

    ``calibration`` is the Dataset of :func:`bayes_eval.calibrate_sequential`: a coverage
    variable (``actual``, ``actual_coverage`` or ``coverage``) over a nominal-level dimension or
    coordinate (``nominal``), optionally a Monte Carlo standard error (``mcse`` / ``se``) and a
    ``corrected_level`` (variable or attribute).
    """
    import matplotlib.pyplot as plt

    ds = calibration
    y_name = _pick(ds, ("actual", "actual_coverage", "coverage"))
    if y_name is None:
        raise ValueError(
            f"calibration has variables {sorted(ds.variables)}; it needs an actual-coverage "
            "variable ('actual', 'actual_coverage' or 'coverage')"
        )
    y = ds[y_name]
    x_name = "nominal" if "nominal" in ds.variables else (y.dims[0] if y.dims else None)
    if x_name is None:
        raise ValueError("calibration coverage must have a nominal-level dimension")
    x = np.asarray(ds[x_name].values, dtype=np.float64).reshape(-1)
    yv = np.asarray(y.values, dtype=np.float64).reshape(-1)
    fig, ax = plt.subplots(figsize=(6.0, 4.4))
    se_name = _pick(ds, ("mcse", "se", "actual_mcse", "coverage_mcse", "mc_error"))
    if se_name is not None:
        se = np.asarray(ds[se_name].values, dtype=np.float64).reshape(-1)
        ax.fill_between(
            x, yv - 2 * se, yv + 2 * se, color="#2c7fb8", alpha=0.2, label="± 2 Monte Carlo s.e."
        )
    ax.plot(x, yv, color="#2c7fb8", marker="o", markersize=3, label="actual coverage")
    lo = float(min(x.min(), np.nanmin(yv)))
    zoom = x >= 0.8  # the interesting part: nominal levels a certification would use
    if zoom.sum() >= 2:
        lo = float(min(0.8, np.nanmin(yv[zoom])))
        ax.set_xlim(0.8, 1.0)
        ax.set_ylim(max(lo - 0.02, 0.0), 1.0)
    ax.plot(
        [lo, 1], [lo, 1], color="#777777", linewidth=1, linestyle="--", label="actual = nominal"
    )
    requested = level if level is not None else ds.attrs.get("level")
    if requested is not None:
        ax.axhline(float(requested), label=f"requested {float(requested):g}", **_TARGET_STYLE)
    corrected = corrected_level
    if corrected is not None:
        pass
    elif "corrected_level" in ds.variables:
        corrected = float(ds["corrected_level"].values)
    elif "corrected_level" in ds.attrs:
        corrected = float(ds.attrs["corrected_level"])
    if corrected is not None and np.isfinite(corrected):
        ax.axvline(corrected, label=f"corrected nominal {corrected:.4g}", **_BOUND_STYLE)
    ax.set_xlabel("nominal level (per look)")
    ax.set_ylabel("actual coverage (1 − false-accept rate)")
    ax.set_title("Sequential acceptance: nominal vs actual coverage")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _to_png(fig)
