"""Benchmark: F1 estimation with the score-informed hierarchical model against OASIS.

Not run in CI. Needs the ``oasis`` 0.1.3 package (Marchant & Rubinstein, VLDB 2017), which asks
for the retired ``sklearn`` package name, so install it without its dependencies::

    uv pip install --no-deps oasis==0.1.3
    uv run python benchmarks/bench_oasis.py --seeds 50 > benchmarks/results/bench_oasis.txt

``oasis`` calls ``scipy.percentile`` and ``scipy.ptp``, which modern scipy removed; they are
aliased to numpy's functions below, inside this script only; its ``__init__`` also imports
PyTables for its experiment helpers (unused here), which is replaced by an empty stub module.
OASIS draws from numpy's global random state, so each of its runs is seeded with
``numpy.random.seed(seed)``.

For every real population (``bayes_eval.datasets.load``), every seed and every budget
(500, 1000, 2000 labels) the F1 estimate of

* ``oasis``: OASISSampler (alpha = 0.5, i.e. F1; probabilities as scores; its own defaults:
  epsilon = 1e-3, automatic cum-sqrt-F stratification, prior strength 2K), counting distinct
  labelled items;
* ``random``: simple random sample without replacement, plug-in ``2TP / (2TP + FP + FN)``;
* ``indep_pv``: the ``posterior_variance`` design of :mod:`bayes_eval.designs` (batches of 50)
  with independent Jeffreys priors, estimate = posterior mean of F1 (finite population);
* ``hier_pv``: the same design fed with :func:`bayes_eval.hierarchical.empirical_bayes_prior`
  priors at every batch; estimate = posterior mean of F1 under the hierarchical model, by its
  fast ``method="laplace"`` fit at every budget and by NUTS (nutpie, 4 chains x 500 draws after
  500 tuning steps) at the final budget only, for the first ``--nuts-seeds`` seeds (default
  20; ``hier_pv_nuts``);

is compared with the truth: RMSE, bias, and for our posteriors the coverage of the 95% lower
credible bound (fraction of seeds with ``lower_bound <= true F1``). All designs use the same
strata (``stratify(pop, n_strata=10)``: 10 equal-size strata per predicted side).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
import types
import warnings

import numpy as np
import scipy

scipy.percentile = np.percentile  # type: ignore[attr-defined]  # oasis 0.1.3 needs these
scipy.ptp = np.ptp  # type: ignore[attr-defined]
# oasis/__init__ imports its HDF5 experiment helpers (PyTables), unused here: stub the module
sys.modules.setdefault("tables", types.ModuleType("tables"))

import oasis  # noqa: E402

import bayes_eval as be  # noqa: E402
from bayes_eval import datasets  # noqa: E402
from bayes_eval._sampling import draw_beta, draw_remainder  # noqa: E402
from bayes_eval.designs import DesignState, make_design  # noqa: E402
from bayes_eval.hierarchical import (  # noqa: E402
    SamplerWarning,
    _covariate,
    _laplace_theta,
    empirical_bayes_prior,
    hierarchical_theta,
    score_summary,
)

BUDGETS = (500, 1000, 2000)
BATCH = 50
DRAWS = 4000


def f1_from_positives(p: np.ndarray, sizes: np.ndarray, pred: np.ndarray) -> np.ndarray:
    tp = p[:, pred].sum(axis=1)
    fn = p[:, ~pred].sum(axis=1)
    fp = sizes[pred].sum() - tp
    return 2 * tp / (2 * tp + fp + fn)


def run_oasis(scores, preds, truth, seed):
    np.random.seed(seed)  # noqa: NPY002 - oasis draws from numpy's global state
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its automatic bin choices
        smp = oasis.OASISSampler(
            0.5, preds.astype(int), scores, lambda i: int(truth[i]), proba=True, max_iter=400_000
        )
    out, done = [], 0
    for b in BUDGETS:
        smp.sample_distinct(b - done)
        done = b
        out.append(float(smp.estimate_[-1]))
    return out


def run_random(truth, preds, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(truth.size)[: max(BUDGETS)]
    out = []
    for b in BUDGETS:
        t, p = truth[order[:b]], preds[order[:b]]
        tp = np.sum(t & p)
        denom = 2 * tp + np.sum(~t & p) + np.sum(t & ~p)
        out.append(2 * tp / denom if denom else np.nan)
    return out


def run_pv(strata, positives, seeds, hierarchical, rng):
    """Vectorised posterior_variance audits; returns dict budget -> (n, h) arrays (R, K)."""
    sizes = strata.sizes.astype(np.int64)
    pred = strata.predicted
    k = sizes.size
    r = len(seeds)
    sm = score_summary(strata)
    a0 = np.full(k, 0.5)
    design = make_design("posterior_variance")
    n = np.zeros((r, k), dtype=np.int64)
    h = np.zeros((r, k), dtype=np.int64)
    gens = [np.random.default_rng(s) for s in seeds]
    snaps = {}
    while n[0].sum() < max(BUDGETS):
        if hierarchical:
            ab = [empirical_bayes_prior(sizes, n[i], h[i], sm, a0, a0) for i in range(r)]
            pa = np.array([x[0] for x in ab])
            pb = np.array([x[1] for x in ab])
        else:
            pa = np.tile(a0, (r, 1))
            pb = pa
        state = DesignState(
            sizes=sizes,
            predicted=pred,
            n=n,
            h=h,
            available=sizes - n,
            prior_a=pa,
            prior_b=pb,
            metric="f1",
            score_mean=sm,
        )
        c = design.allocate_many(state, BATCH, rng)
        new = np.array(
            [
                g.hypergeometric(positives - h[i], sizes - positives - (n[i] - h[i]), c[i])
                for i, g in enumerate(gens)
            ]
        )
        n += c
        h += new
        if int(n[0].sum()) in BUDGETS:
            snaps[int(n[0].sum())] = (n.copy(), h.copy())
    return snaps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--nuts-seeds", type=int, default=20)
    ap.add_argument("--pops", nargs="+", default=["nasscds", "default", "credit_cards"])
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    print(
        f"# bench_oasis: {args.seeds} seeds ({min(args.nuts_seeds, args.seeds)} for NUTS), "
        f"budgets {BUDGETS}, batch {BATCH}, {DRAWS} posterior draws"
    )
    for name in args.pops:
        lp = datasets.load(name)
        pop = lp.population
        truth = np.asarray(lp.truth, dtype=bool)
        preds = np.asarray(pop.predictions, dtype=bool)
        strata = be.stratify(pop, n_strata=10)
        k = strata.n_strata
        sizes = strata.sizes.astype(np.int64)
        pred = strata.predicted
        positives = np.bincount(
            strata.assignment.astype(np.int64), weights=truth, minlength=k
        ).astype(np.int64)
        true_f1 = lp.true_metrics()["f1"]
        print(
            f"\n## {name}: N={pop.size}, prevalence={truth.mean():.4f}, true F1={true_f1:.4f}, "
            f"K={k}"
        )
        est: dict[str, np.ndarray] = {}
        low: dict[str, np.ndarray] = {}
        secs: dict[str, float] = {}
        t0 = time.perf_counter()
        est["oasis"] = np.array([run_oasis(pop.scores, preds, truth, s) for s in seeds])
        secs["oasis"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        est["random"] = np.array([run_random(truth, preds, s) for s in seeds])
        secs["random"] = time.perf_counter() - t0
        gen = np.random.default_rng(12345)
        sm = score_summary(strata)
        xt, mu, sb, _ = _covariate(sm, "auto")
        a0 = np.full(k, 0.5)
        for label, hier in (("indep_pv", False), ("hier_pv", True)):
            t0 = time.perf_counter()
            snaps = run_pv(strata, positives, seeds, hier, gen)
            e = np.empty((len(seeds), len(BUDGETS)))
            lo = np.empty_like(e)
            for j, b in enumerate(BUDGETS):
                n, h = snaps[b]
                for i in range(len(seeds)):
                    if hier:
                        theta, _, _ = _laplace_theta(xt, n[i], h[i], mu, sb, DRAWS, gen)
                    else:
                        theta = draw_beta(a0 + h[i], a0 + n[i] - h[i], DRAWS, gen)
                    p = draw_remainder(theta, sizes - n[i], gen) + h[i]
                    f = f1_from_positives(p, sizes, pred)
                    e[i, j] = f.mean()
                    lo[i, j] = np.quantile(f, 0.05)
            est[label], low[label] = e, lo
            secs[label] = time.perf_counter() - t0
            if hier:
                # NUTS at the final budget only
                n, h = snaps[max(BUDGETS)]
                e2 = np.full((len(seeds), len(BUDGETS)), np.nan)
                lo2 = np.full_like(e2, np.nan)
                fit_secs, n_warn = [], 0
                t0 = time.perf_counter()
                for i in range(min(args.nuts_seeds, len(seeds))):
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        theta, _, attrs = hierarchical_theta(
                            strata=strata,
                            n=n[i],
                            h=h[i],
                            prior_a=a0,
                            prior_b=a0,
                            draws=2000,
                            rng=gen,
                            score_mean=sm,
                            tune=500,
                        )
                    n_warn += sum(issubclass(w.category, SamplerWarning) for w in caught)
                    fit_secs.append(attrs["nuts_seconds"])
                    p = draw_remainder(theta, sizes - n[i], gen) + h[i]
                    f = f1_from_positives(p, sizes, pred)
                    e2[i, -1] = f.mean()
                    lo2[i, -1] = np.quantile(f, 0.05)
                est["hier_pv_nuts"], low["hier_pv_nuts"] = e2, lo2
                secs["hier_pv_nuts"] = time.perf_counter() - t0
                print(
                    f"NUTS fits: median {np.median(fit_secs):.2f} s, max {max(fit_secs):.2f} s "
                    f"(first includes compilation), SamplerWarnings: {n_warn}/{len(fit_secs)}"
                )
        rmse_oasis = np.sqrt(np.nanmean((est["oasis"] - true_f1) ** 2, axis=0))
        print(
            f"{'method':<14}{'labels':>7}{'RMSE':>9}{'bias':>9}{'RMSE/OASIS':>12}"
            f"{'cov95LB':>9}{'n_ok':>6}{'sec':>8}"
        )
        for label in ("oasis", "random", "indep_pv", "hier_pv", "hier_pv_nuts"):
            for j, b in enumerate(BUDGETS):
                col = est[label][:, j]
                if np.all(np.isnan(col)):
                    continue
                ok = ~np.isnan(col)
                rmse = float(np.sqrt(np.mean((col[ok] - true_f1) ** 2)))
                bias = float(np.mean(col[ok] - true_f1))
                cov = ""
                if label in low:
                    cov = f"{np.mean(low[label][ok, j] <= true_f1):.3f}"
                print(
                    f"{label:<14}{b:>7}{rmse:>9.4f}{bias:>+9.4f}{rmse / rmse_oasis[j]:>12.3f}"
                    f"{cov:>9}{int(ok.sum()):>6}{secs[label]:>8.1f}"
                )


if __name__ == "__main__":
    main()
