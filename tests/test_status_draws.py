"""``bayes-eval status`` computes its table from numpy draws (issue 18: start-up): the same draws,
bounds and per-stratum rows as the full posterior, and no xarray/pandas/arviz-stats import."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

import bayes_eval as be
from bayes_eval._draws import bounds_of
from bayes_eval._metric_draws import (
    COUNTS,
    MetricDraws,
    audit_generator,
    independent_metric_draws,
)
from bayes_eval.cli import app
from bayes_eval.cli._verdict import _status_draws
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.priors import Prior


def _strata(threshold: float = 0.7, n_strata: int = 6):
    rng = np.random.default_rng(5)
    pop = be.Population(rng.beta(0.6, 2.0, 5000), threshold=threshold)
    return pop, be.stratify(pop, n_strata=n_strata)


def _same(draws: MetricDraws, post) -> None:
    """Every array of ``draws`` equals the posterior's, bit for bit."""
    assert draws.metrics == post.metrics
    tree = post.datatree["posterior"]
    for name in (*post.metrics, *COUNTS):
        np.testing.assert_array_equal(draws.draws(name), tree[name].values.reshape(-1))
    k = post.n_strata
    np.testing.assert_array_equal(draws.theta, tree["theta"].values.reshape(-1, k))
    np.testing.assert_array_equal(draws.positives, tree["positives"].values.reshape(-1, k))
    assert draws.informed() == post.informed() and draws.prior_only == post.prior_only
    table = post.strata_table()
    rows = draws.strata_rows()
    assert [r.size for r in rows] == table["N"].tolist()
    assert [r.labelled for r in rows] == table["labelled"].tolist()
    assert [r.positives for r in rows] == table["positives"].tolist()
    assert [int(r.predicted) for r in rows] == table["predicted"].tolist()
    np.testing.assert_array_equal([r.rate_mean for r in rows], table["rate_mean"].to_numpy())
    np.testing.assert_array_equal([r.score_min for r in rows], table["score_min"].to_numpy())


@pytest.mark.parametrize("finite", [True, False])
@pytest.mark.parametrize("sampler", ["fast", "exact"])
@pytest.mark.parametrize("labelled", ["all", "positive side only", "none"])
def test_kernel_gives_the_posterior_draws_exactly(finite, sampler, labelled):
    _, strata = _strata()
    k = strata.n_strata
    rng = np.random.default_rng(11)
    n = np.minimum(rng.integers(3, 40, k), strata.sizes)
    if labelled == "positive side only":
        n[~strata.predicted] = 0
    elif labelled == "none":
        n[:] = 0
    h = rng.binomial(n, 0.4)
    prior = Prior.resolve("jeffreys", k)
    kwargs = {"finite_population": finite, "draws": 3000, "sampler": sampler}
    post = estimate_from_stratum_counts(
        strata, n, h, prior=prior, rng=np.random.default_rng(3), model="independent", **kwargs
    )
    draws = independent_metric_draws(
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=n,
        h=h,
        prior_a=prior.a,
        prior_b=prior.b,
        rng=np.random.default_rng(3),
        score_min=strata.score_min,
        score_max=strata.score_max,
        **kwargs,
    )
    _same(draws, post)
    if labelled != "all":
        assert draws.prior_only  # recall & co. without negative-side labels


def test_status_draws_are_the_audit_estimate():
    pop, strata = _strata()
    rng = np.random.default_rng(1)
    truth = rng.random(pop.size) < pop.scores
    audit = be.Audit(pop, strata=strata, metric="f1", design="proportional", rng=4, draws=5000)
    for _ in range(2):
        ids = audit.propose(40)
        audit.record(ids, truth[pop.positions_of(ids)])
    draws = _status_draws(audit)
    _same(draws, audit.estimate())
    # the generator is the audit's: another seed gives other draws
    other = independent_metric_draws(
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=audit.counts()[0],
        h=audit.counts()[1],
        prior_a=audit.prior_a,
        prior_b=audit.prior_b,
        draws=5000,
        rng=audit_generator(audit.seed + 1, audit.n_labels),
    )
    assert not np.array_equal(other.draws("f1"), draws.draws("f1"))


def test_of_posterior_keeps_every_array():
    _, strata = _strata()
    n = np.full(strata.n_strata, 10)
    h = np.arange(strata.n_strata) % 10
    post = estimate_from_stratum_counts(strata, n, h, draws=2000, rng=0)
    _same(MetricDraws.of_posterior(post), post)


def test_bounds_are_the_summary_columns():
    post = be.estimate_counts(tp=80, fp=20, fn=10, tn=890, draws=4000, rng=0)
    for level in (0.9, 0.95):
        summ = post.summary(level=level)
        tag = f"{level:g}"
        for name, b in post.bounds(level).items():
            row = summ.loc[name]
            assert (b.mean, b.sd) == (row["mean"], row["sd"])
            assert (b.lower, b.upper) == (row[f"lower_{tag}"], row[f"upper_{tag}"])
            assert b.lower == post.lower_bound(name, level)
            assert b.upper == post.upper_bound(name, level)


def test_bounds_of_refuses_a_bad_level():
    with pytest.raises(ValueError, match="level"):
        bounds_of(np.zeros(10), 1.5)


def test_metric_draws_refuses_an_unknown_metric():
    _, strata = _strata()
    k = strata.n_strata
    draws = independent_metric_draws(
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=np.zeros(k),
        h=np.zeros(k),
        prior_a=0.5,
        prior_b=0.5,
        draws=100,
        rng=np.random.default_rng(0),
    )
    with pytest.raises(ValueError, match="f2"):
        draws.mean("f2")
    with pytest.raises(AttributeError, match="datatree"):
        _ = draws.datatree


_CHECK = """
import sys
from bayes_eval.cli import app
try:
    app(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
names = ("xarray", "pandas", "arviz_stats", "arviz_base", "dask")
heavy = sorted(m for m in names if m in sys.modules)
print("HEAVY", heavy, file=sys.stderr)
"""


@pytest.mark.parametrize("model", ["independent", "pooled"])
def test_status_imports_neither_xarray_nor_pandas(tmp_path, model):
    """Start-up of ``status`` (issue 18): what it imports, not how long it takes (also with
    ``init --model pooled``, whose draws take the same numpy path)."""
    pop, _ = _strata()
    scores = tmp_path / "scores.csv"
    scores.write_text("id,p\n" + "".join(f"{i},{s:.6f}\n" for i, s in enumerate(pop.scores)))
    cli_dir = tmp_path / "cli"
    res = CliRunner().invoke(
        app,
        [
            "init", str(cli_dir), "--scores", str(scores), "--score-col", "p", "--id-col", "id",
            "--threshold", "0.7", "--strata", "4", "--design", "proportional",
            "--model", model,
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    for flags in ([], ["--json"]):
        out = subprocess.run(
            [sys.executable, "-c", _CHECK, "status", str(cli_dir), *flags],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
        )
        assert "HEAVY []" in out.stderr, out.stderr
    data = json.loads(out.stdout)
    assert set(data["metrics"]["f1"]) == {"mean", "sd", "lower", "upper", "prior_only"}
    assert data["model"] == model


def test_status_draws_of_another_model_are_its_posterior():
    pop, strata = _strata()
    truth = np.random.default_rng(3).random(pop.size) < pop.scores
    audit = be.Audit(pop, strata=strata, design="proportional", rng=2, draws=2000, model="pooled")
    ids = audit.propose(60)
    audit.record(ids, truth[pop.positions_of(ids)])
    _same(_status_draws(audit), audit.estimate())


def test_cli_import_stays_light():
    """``next``/``record`` (issue 16) must not pay for ``status``'s sampler: importing the CLI
    loads neither scipy nor pandas nor xarray."""
    code = "import sys, bayes_eval.cli; print(sorted(m for m in NAMES if m in sys.modules))"
    names = ("scipy", "pandas", "xarray", "arviz_stats")
    out = subprocess.run(
        [sys.executable, "-c", f"NAMES = {names!r}; {code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout
