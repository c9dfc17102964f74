"""Rendering a :class:`~bayes_eval.report.Report` as self-contained HTML or as Markdown.

HTML reports embed their PNG figures as base64 ``data:`` URIs and load nothing from the network.
Markdown reports write their figures as PNG files next to the ``.md`` file
(``<stem>_<figure>.png``) and link them relatively. :func:`write_report` builds and writes.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from ..ledger import write_bytes_atomic
from ._build import Report, build_report

if TYPE_CHECKING:
    from ..audit import Audit, AuditResult
    from ..certification import Certification
    from ..posterior import MetricPosterior
    from ..sequential import SequentialCalibration

__all__ = ["render_html", "render_markdown", "write_report"]


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
    audit_or_posterior: MetricPosterior | Audit | AuditResult,
    path: str | Path,
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
            write_bytes_atomic(fig_path, png)
            names[key] = fig_path.name
        text = render_markdown(report, names)
    else:
        text = render_html(report)
    write_bytes_atomic(path, text.encode("utf-8"))
    return path
