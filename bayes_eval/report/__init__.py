"""Posterior reports: a self-contained HTML page (or Markdown) that a reader can check.

:func:`write_report` turns an audit, an audit result or a :class:`~bayes_eval.MetricPosterior`
into a report with

* a headline for the audited metric: posterior mean, one-sided lower bound at the stated level,
  :math:`P(\\text{metric} \\ge \\text{target})` and, with a certification, the verdict;
* the posterior table of every metric and the per-stratum table (size, predicted side, score
  range, labels, positives, rate);
* figures drawn with arviz-plots (:mod:`bayes_eval.report._plots`): each metric's posterior with
  the target and the lower bound marked, the stratum rates (forest plot) labelled with the labels
  per stratum, the estimate and lower bound against labels used (from a trajectory), and for a
  certification with a sequential correction the nominal-to-actual coverage curve;
* a disclosure block (design, prior, model, finite-population view, looks taken, every entry of
  the certification's correction, seed, package versions, population fingerprint...) from which
  the claim can be reproduced.

Modules: ``_disclosure`` (what is disclosed, as text), ``_plots`` (the figures), ``_build``
(:class:`Report`, the format-free content) and ``_render`` (HTML, Markdown, :func:`write_report`).

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (why the number of looks and the
correction must be disclosed); Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``
(stratified audits).
"""

from ._build import Report, build_report
from ._disclosure import package_versions
from ._render import render_html, render_markdown, write_report

__all__ = [
    "Report",
    "build_report",
    "package_versions",
    "render_html",
    "render_markdown",
    "write_report",
]
