"""Posterior reports: content, self-containment, Markdown, rendering in headless Chromium."""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import bayes_eval as be
from bayes_eval.report import _plots, build_report, render_html, write_report
from bayes_eval.sequential import calibrate_sequential

_IMG = re.compile(r'<img[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (first chunk after the 8-byte signature)."""
    assert data[:8] == _plots.PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def material():
    """A posterior, a calibration, a certification and a trajectory (small, seeded)."""
    rng = np.random.default_rng(7)
    scores = rng.random(20_000)
    truth = rng.random(20_000) < scores
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=3)
    ids = rng.choice(20_000, 400, replace=False)
    post = be.estimate(strata, (ids, truth[ids]), draws=4000, rng=0, model="independent")
    cal = calibrate_sequential(
        strata, metric="f1", target=0.75, budget=400, n_sims=1000, max_mcse=0.01, rng=0
    )
    cert = be.certify(post, metric="f1", target=0.75, level=0.95, calibration=cal, looks=20)
    traj = xr.Dataset(
        {
            "n_labels": ("look", np.arange(1, 21) * 20),
            "estimate": ("look", np.linspace(0.70, 0.78, 20)),
            "lower_bound": ("look", np.linspace(0.40, 0.74, 20)),
        },
        coords={"look": np.arange(1, 21)},
    )
    return post, cal, cert, traj


@pytest.fixture(scope="module")
def html_report(material, tmp_path_factory):
    post, cal, cert, traj = material
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report(
        post,
        out,
        certification=cert,
        trajectory=traj,
        calibration=cal,
        title="Test report",
        disclosure={"population file": "/data/pop.parquet"},
    )
    return out


def test_html_is_self_contained_with_four_png_figures(html_report, material):
    post, _, cert, _ = material
    text = html_report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    # nothing is loaded from elsewhere: no http(s) URLs, no external scripts or stylesheets
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text and "<link" not in text
    images = _IMG.findall(text)
    assert len(images) == 4  # posterior, strata forest, trajectory, calibration
    for b64 in images:
        png = base64.b64decode(b64, validate=True)
        width, height = _png_size(png)
        assert width > 300 and height > 200
        assert len(png) > 10_000  # a real plot, not an empty canvas
        assert png.endswith(b"IEND\xaeB`\x82")
    # the headline numbers are the posterior's
    assert f"{post.mean('f1'):.4f}" in text
    assert f"{post.lower_bound('f1', 0.95):.4f}" in text
    assert f"{cert.level_used:.4g}" in text
    assert ("NOT ACCEPTED" in text) == (not cert.accepted)


def test_disclosure_block_lists_what_reproduces_the_claim(material, html_report):
    post, cal, cert, traj = material
    rep = build_report(
        post,
        certification=cert,
        trajectory=traj,
        calibration=cal,
        disclosure={"seed": 123},
        figures=False,
    )
    d = rep.disclosure
    for key in (
        "metric",
        "target",
        "level asked",
        "level used",
        "correction",
        "looks taken",
        "prior",
        "model",
        "finite population",
        "Monte Carlo draws",
        "labels used",
        "strata",
        "seed",
        "version bayes-eval",
        "version numpy",
        "version arviz-plots",
    ):
        assert key in d, key
    assert d["prior"] == "jeffreys"
    assert "scores read as" not in d
    assert d["looks taken"] == "20"
    assert d["seed"] == "123"
    assert d["correction"].startswith("sequential correction: nominal")
    assert rep.figures == []
    text = html_report.read_text(encoding="utf-8")
    ids = re.findall(r'<figure id="fig-([a-z]+)"', text)
    assert ids == ["posterior", "strata", "trajectory", "calibration"]
    assert "<td>population file</td><td>/data/pop.parquet</td>" in text


def test_disclosure_renders_every_entry_of_the_correction(material):
    """Whatever the certification says about its correction is disclosed entry by entry: each
    row of ``to_dict()["correction"]`` (e.g. the worst-case truth of the calibration) and the
    other ``correction_*`` fields, after the one-line description."""
    post, _, cert, _ = material
    rows = (("worst-case truth", "needle"), ("false accept at that truth", "0.049 ± 0.004"))
    rep = build_report(post, certification=replace(cert, disclosure=rows), figures=False)
    d = rep.disclosure
    assert d["correction"].startswith("sequential correction: nominal")
    assert d["correction worst-case truth"] == "needle"
    assert d["correction false accept at that truth"] == "0.049 ± 0.004"
    assert d["correction mcse"] == f"{cert.correction_mcse:.4g}"
    keys = list(d)
    assert keys.index("correction") < keys.index("correction worst-case truth")
    assert "UNCORRECTED" not in rep.headline[0][1]
    assert "<td>correction worst-case truth</td><td>needle</td>" in render_html(rep)
    # a text-only correction ("none: ...") stays one entry, and several looks are flagged
    plain = replace(cert, correction="none: 20 looks without sequential correction", disclosure=())
    rep = build_report(post, certification=plain, figures=False)
    assert rep.disclosure["correction"].startswith("none: 20 looks")
    assert not [k for k in rep.disclosure if k.startswith("correction method")]
    assert "UNCORRECTED for 20 looks" in rep.headline[0][1]
    assert any(n.startswith("No sequential correction") for n in rep.notes)


def test_posterior_only_report_has_two_figures_and_no_verdict(material, tmp_path):
    post = material[0]
    out = write_report(post, tmp_path / "plain.html")
    text = out.read_text(encoding="utf-8")
    assert len(_IMG.findall(text)) == 2
    assert "ACCEPTED" not in text


def test_markdown_variant_writes_png_files_next_to_it(material, tmp_path):
    post, cal, cert, traj = material
    out = write_report(
        post, tmp_path / "audit.md", certification=cert, trajectory=traj, calibration=cal.curve
    )
    text = out.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links == [
        "audit_posterior.png",
        "audit_strata.png",
        "audit_trajectory.png",
        "audit_calibration.png",
    ]
    for name in links:
        data = (tmp_path / name).read_bytes()
        assert _png_size(data)[0] > 300
    assert "## Disclosure" in text and "| prior | `jeffreys` |" in text


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"path": "r.pdf"}, ValueError, "suffix '.pdf'"),
        ({"path": "missing_dir/r.html"}, ValueError, "does not exist"),
        ({"metric": "auc"}, ValueError, "metric='auc'"),
        ({"trajectory": [1, 2]}, TypeError, "trajectory has type list"),
        ({"calibration": 3}, TypeError, "calibration has type int"),
        ({"level": 1.5}, ValueError, "level"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    material, tmp_path, monkeypatch, kwargs, exc, match
):
    monkeypatch.chdir(tmp_path)
    post = material[0]
    path = kwargs.pop("path", "r.html")
    with pytest.raises(exc, match=match):
        write_report(post, path, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_exactly_known_metric_is_reported_not_drawn(tmp_path):
    # every predicted positive labelled (finite population): precision = 80/100 exactly
    post = be.estimate_counts(80, 20, 10, 890, predicted_sizes=(9000, 100), draws=2000, rng=0)
    assert np.ptp(post.draws("precision")) == 0.0
    out = write_report(post, tmp_path / "exact.html", metric="precision", target=0.7)
    text = out.read_text(encoding="utf-8")
    assert "Known exactly" in text and "precision = 0.8000" in text
    assert len(_IMG.findall(text)) == 2  # the other metrics' densities and the strata


def test_wrong_object_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="allowed: a MetricPosterior"):
        write_report({"f1": 0.8}, tmp_path / "r.html")


# ------------------------------------------------------------------------- headless Chromium
_CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_CHECK_SCRIPT = (
    '<script>window.addEventListener("load",function(){var d=document.createElement("pre");'
    'd.id="img-check";d.textContent=JSON.stringify(Array.from(document.images).map('
    "function(i){return [i.complete,i.naturalWidth,i.naturalHeight]}));"
    "document.body.appendChild(d);});</script>"
)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:  # the test must fail, not skip: CI installs Debian's chromium (.ci/run)
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    return exe


def _dom_after_load(page: Path, script: str, tmp_path: Path) -> str:
    """The DOM of ``page`` with ``script`` run at load, as headless Chromium renders it."""
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8"
    )
    return subprocess.run(
        [
            _chromium(),
            *_CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile1'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def _screenshot(page: Path, shot: Path, size: tuple[int, int], tmp_path: Path) -> bytes:
    """A PNG screenshot of ``page`` at ``size`` by headless Chromium."""
    subprocess.run(
        [
            _chromium(),
            *_CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile2'}",
            f"--screenshot={shot}",
            f"--window-size={size[0]},{size[1]}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return shot.read_bytes()


def test_report_renders_in_headless_chromium(html_report, tmp_path):
    # 1. the DOM after load: every image decoded, with the PNG's own size
    dom = _dom_after_load(html_report, _CHECK_SCRIPT, tmp_path)
    found = re.search(r'<pre id="img-check">([^<]*)</pre>', dom)
    assert found, "the load handler did not run"
    images = json.loads(found.group(1))
    expected = [
        _png_size(base64.b64decode(b))
        for b in _IMG.findall(html_report.read_text(encoding="utf-8"))
    ]
    assert len(images) == len(expected) == 4
    for (complete, width, height), (pw, ph) in zip(images, expected, strict=True):
        assert complete is True
        assert (width, height) == (pw, ph)  # decoded by the browser at the PNG's size
    # 2. a screenshot of the page (looked at by eye when the report layout changes)
    data = _screenshot(html_report, tmp_path / "report.png", (1200, 3000), tmp_path)
    assert _png_size(data) == (1200, 3000)
    assert len(data) > 100_000  # a page with text and figures, not a blank one


# ------------------------------------------------------------------ prior-only metrics (issue 18)
_ROW_SCRIPT = (
    '<script>window.addEventListener("load",function(){var d=document.createElement("pre");'
    'd.id="row-check";d.textContent=JSON.stringify(Array.from(document.querySelectorAll('
    '"tr[data-quantity]")).map(function(r){var c=r.querySelector("td");return [r.dataset.quantity,'
    "r.className,getComputedStyle(c).color,c.textContent,r.querySelectorAll('td')[1].textContent]"
    "}));document.body.appendChild(d);});</script>"
)


@pytest.fixture(scope="module")
def precision_only_report(tmp_path_factory):
    """A precision audit: every label on the predicted-positive side (2.4% of the items)."""
    rng = np.random.default_rng(18)
    n_items = 50_000
    scores = rng.beta(0.3, 8.0, n_items)
    truth = rng.random(n_items) < np.clip(3 * scores, 0, 1)
    pop = be.Population(scores, threshold=float(np.quantile(scores, 0.976)))
    strata = be.stratify(pop, n_strata=5)
    ids = rng.choice(np.flatnonzero(pop.predictions), 300, replace=False)
    post = be.estimate(strata, (ids, truth[ids]), draws=4000, rng=0, model="independent")
    out = tmp_path_factory.mktemp("prior_only") / "precision_audit.html"
    write_report(post, out, metric="precision", target=0.5)
    return post, out


def test_prior_only_metrics_are_flagged_in_table_and_notes(precision_only_report):
    post, out = precision_only_report
    assert post.informed()["precision"] is True
    assert {"recall", "f1", "accuracy", "prevalence"} <= set(post.prior_only)
    assert "precision" not in post.prior_only
    rep = build_report(post, metric="precision", figures=False)
    table = rep.tables[0][1]
    assert table.loc["precision", "labels inform it"] == "yes"
    for m in ("recall", "f1", "accuracy"):
        assert table.loc[m, "labels inform it"] == "PRIOR ONLY"
        # no number of a prior-only metric is shown as if it were an estimate
        assert table.loc[m].drop("labels inform it").isna().all()
    assert any(n.startswith("PRIOR ONLY") and "recall" in n for n in rep.notes)
    text = out.read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="prior-only" data-quantity="([^"]+)"', text)
    assert [r for r in rows if r in post.metrics] == list(post.prior_only)
    # the unlabelled strata (all predicted negative) are greyed in the strata table too
    assert sorted(int(r) for r in rows if r.isdigit()) == list(range(5))
    # the posterior figure leaves the prior-only metrics out; the headline is precision's
    assert f"{post.mean('precision'):.4f}" in text
    assert f"{post.mean('recall'):.4f}" not in text


def test_prior_only_headline_when_the_audited_metric_is_uninformed(precision_only_report):
    post, _ = precision_only_report
    rep = build_report(post, metric="recall", target=0.1, figures=False)
    head = dict(rep.headline)
    assert head["posterior mean"].startswith("PRIOR ONLY")
    assert head["lower bound"].startswith("PRIOR ONLY")


def test_prior_only_rows_render_greyed_in_headless_chromium(precision_only_report, tmp_path):
    post, out = precision_only_report
    dom = _dom_after_load(out, _ROW_SCRIPT, tmp_path)
    found = re.search(r'<pre id="row-check">([^<]*)</pre>', dom)
    assert found, "the load handler did not run"
    rows = {q: rest for q, *rest in json.loads(found.group(1)) if q in post.metrics}
    assert set(rows) == set(post.metrics)
    for m, (cls, color, status, first_value) in rows.items():
        if m in post.prior_only:
            assert cls == "prior-only" and status == "PRIOR ONLY" and first_value == "—", m
            assert color == "rgb(154, 154, 154)", (m, color)  # greyed as rendered
        else:
            assert cls == "" and status == "yes", m
            assert color == "rgb(34, 34, 34)", (m, color)
            assert first_value == f"{post.mean(m):.4g}"
    data = _screenshot(out, tmp_path / "precision_audit.png", (1200, 2400), tmp_path)
    assert _png_size(data) == (1200, 2400)
    assert len(data) > 50_000


def test_disclosure_says_how_many_strata_were_asked_and_made():
    """A side of 64 items asked for 50 strata gets 13 (``side_n_strata``); the posterior records
    what was asked and the report's disclosure shows both."""
    rng = np.random.default_rng(3)
    scores = np.concatenate([rng.random(5_000) * 0.5, 0.5 + rng.random(64) * 0.5])
    strata = be.stratify(be.Population(scores, threshold=0.5), n_strata=50)
    n = np.minimum(strata.sizes, 3)
    post = be.estimate(strata, (n, n // 3), draws=1000, rng=0)
    assert post.datatree.attrs["strata_requested"] == "50 / 50 per side (neg / pos)"
    rep = build_report(post, figures=False)
    made = "63 (equal_size on score)"
    assert rep.disclosure["strata"] == f"{made}; asked 50 / 50 per side (neg / pos)"
    # session 32: the pooled model's reading of the scores is disclosed (the independent model
    # does not read them: no entry)
    assert rep.disclosure["scores read as"].startswith("probabilities (the calibration curve")
