"""Kumar & Raj's study for accuracy: variance ratio against random sampling and labels needed
for 1% mean absolute error, over stratifier x allocation x K.

Setting (``../shared/seeds/003_d8c568d527ba610a.txt``, section 4): the stratification variable is
the classifier's confidence (``variable="confidence"``); K strata in total, here ``K/2`` on each
predicted side (bayes_eval keeps the threshold as a boundary). Allocations: ``PRO``
(proportional), ``EQU`` (equal), ``A1`` (OPT-A1, n_ini = 10), ``A2`` (OPT-A2, n_ini = 5, n_step =
10), ``PV`` (ours, posterior_variance for accuracy) and ``ORC`` (Neyman with the true rates,
``neyman_oracle``).
Labels arrive in batches of 10 (after the initial samples of A1/A2), up to ``N_MAX``.

Estimators: Kumar & Raj's ``A_s = sum_k W_k c_k / n_k`` (eq. 4; ``c_k`` correct among ``n_k``
labels) for random sampling and for PRO, EQU, A1, A2, ORC (a stratum without labels, possible for
PRO at small n, gets the posterior mean below); for PV (ours) the posterior mean of the
population's accuracy (Jeffreys priors per stratum, finite population),
``sum_k W_k (c_k + R_k (c_k + 1/2)/(n_k + 1)) / N_k`` with ``R_k = N_k - n_k``; ``PV/KR`` is eq. 4
on PV's labels. ``VR(n)`` = empirical variance of the estimate over the replications / that of
random sampling at the same n (Kumar & Raj average per-run variance estimates instead; both
estimate the same ratio); ``MR(n)`` the same ratio of mean squared errors, which also counts
bias (a design that stops sampling a stratum has a stable but biased estimate: low VR, high MR).
``n@1%`` = smallest n of the grid where the mean absolute error is <= 0.01, and ``%red`` its
reduction against random sampling (Kumar & Raj, Figures 2, 4, 6).

Run: ``uv run python benchmarks/bench_kumar_raj.py [reps]`` (default 600 replications).
"""

from __future__ import annotations

import sys
import time

import numpy as np

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval.designs import DesignState, make_design

N_MAX = 2000
BATCH = 10
VR_AT = (100, 500, 1000)
MR_AT = (100, 500, 1000)
METHODS = (
    "equal_width",
    "equal_size",
    "cum_sqrt_f",
    "cum_cbrt_f",
    "weighted_mean",
    "kmeans",
    "gmm",
)
KS = (4, 10)
ALLOCS = (
    ("PRO", "proportional", {}),
    ("EQU", "equal", {}),
    ("A1", "opt_a1", {"n_ini": 10}),
    ("A2", "opt_a2", {"n_ini": 5, "n_step": BATCH}),
    ("PV", "posterior_variance", {}),
    ("PV/KR", "posterior_variance", {}),
    ("ORC", "neyman_oracle", None),
)


def trajectory(sizes, predicted, positives, design, *, reps, rng, first, bayes=False):
    """Estimates of accuracy at n = 10, 20, ..., N_MAX (NaN where not reached exactly)."""
    k = sizes.shape[0]
    n = np.zeros((reps, k), dtype=np.int64)
    h = np.zeros((reps, k), dtype=np.int64)
    grid = np.arange(BATCH, N_MAX + 1, BATCH)
    out = np.full((reps, grid.size), np.nan)
    w = sizes / sizes.sum()
    pa = np.full(k, 0.5)
    used = 0
    rnd = 0
    memory: dict = {}  # OPT-A1's frozen estimates for these `reps` audits (DesignState.memory)
    while used < N_MAX:
        m = first if rnd == 0 else BATCH
        st = DesignState(
            sizes=sizes,
            predicted=predicted,
            n=n,
            h=h,
            available=sizes - n,
            prior_a=pa,
            prior_b=pa,
            metric="accuracy",
            round=rnd,
            memory=memory,
        )
        c = design.allocate_many(st, m, rng)
        h += rng.hypergeometric(positives - h, sizes - positives - (n - h), c)
        n += c
        used += m
        rnd += 1
        correct = np.where(predicted, h, n - h)
        # posterior mean of the population accuracy (Jeffreys priors, finite population):
        # E[correct_k] = correct_k + (N_k - n_k) * (correct_k + 1/2) / (n_k + 1)
        post_k = (correct + (sizes - n) * (correct + 0.5) / (n + 1.0)) / sizes
        # Kumar & Raj eq. 4 unless bayes (the posterior mean only for a stratum without labels)
        acc_k = post_k if bayes else np.where(n > 0, correct / np.maximum(n, 1), post_k)
        est = (w * acc_k).sum(axis=1)
        if used % BATCH == 0 and used <= N_MAX:
            out[:, used // BATCH - 1] = est
    return grid, out


def populations():
    lp = datasets.load("movies_comedy")
    yield "movies_comedy", lp
    yield "synthetic", datasets.synthetic(200_000, prevalence=0.3, separation=2.5, rng=2)


def main(reps: int = 600) -> None:
    t0 = time.time()
    rng = np.random.default_rng(20261123)
    print(
        f"# Kumar & Raj study for accuracy, {reps} replications, batches of {BATCH}, "
        f"variable='confidence'"
    )
    print(f"# MC error: relative s.e. of a variance ratio ~ sqrt(4/reps) = {np.sqrt(4 / reps):.3f}")
    for pname, lp in populations():
        pop = lp.population
        truth = lp.truth
        acc = float(np.mean(truth == pop.predictions))
        one = np.array([pop.size])
        # random sampling: one stratum of correct/incorrect items
        design = make_design("proportional")
        grid, r_est = trajectory(
            one,
            np.array([True]),
            np.array([int((truth == pop.predictions).sum())]),
            design,
            reps=reps,
            rng=rng,
            first=BATCH,
        )
        r_var = np.nanvar(r_est, axis=0, ddof=1)
        r_mse = np.nanmean((r_est - acc) ** 2, axis=0)
        r_mae = np.nanmean(np.abs(r_est - acc), axis=0)
        r_n1 = _n_at(grid, r_mae)
        print(
            f"\n## {pname}: N={pop.size:,}, accuracy {acc:.4f}; random sampling needs n@1% = {r_n1}"
        )
        head = "".join(f"{'VR@' + str(v):>8}" for v in VR_AT)
        head += "".join(f"{'MR@' + str(v):>8}" for v in MR_AT)
        print(f"{'stratifier':<14}{'K':>3} {'alloc':<6}{head}{'n@1%':>7}{'%red':>7}")
        for method in METHODS:
            for kk in KS:
                strata = be.stratify(
                    pop, method=method, n_strata=kk // 2, variable="confidence", rng=0
                )
                a = np.asarray(strata.assignment, dtype=np.int64)
                sizes = strata.sizes
                positives = np.bincount(a, weights=truth, minlength=strata.n_strata)
                positives = positives.astype(np.int64)
                for short, dname, opts in ALLOCS:
                    if opts is None:
                        opts = {"rates": positives / sizes}
                    design = make_design(dname, **opts)
                    first = (
                        design.batch_schedule(0, strata.n_strata)
                        if short in ("A1", "A2")
                        else BATCH
                    )
                    _, est = trajectory(
                        sizes,
                        strata.predicted,
                        positives,
                        design,
                        reps=reps,
                        rng=rng,
                        first=first,
                        bayes=short == "PV",
                    )
                    reached = ~np.isnan(est[0])
                    var = np.full(grid.size, np.nan)
                    mae = np.full(grid.size, np.inf)
                    var[reached] = est[:, reached].var(axis=0, ddof=1)
                    mae[reached] = np.abs(est[:, reached] - acc).mean(axis=0)
                    mse = np.full(grid.size, np.nan)
                    mse[reached] = ((est[:, reached] - acc) ** 2).mean(axis=0)
                    mr = [
                        mse[grid == v][0] / r_mse[grid == v][0] if v >= first else np.nan
                        for v in MR_AT
                    ]
                    vr = [
                        var[grid == v][0] / r_var[grid == v][0] if v >= first else np.nan
                        for v in VR_AT
                    ]
                    n1 = _n_at(grid, mae)
                    red = 100 * (1 - n1 / r_n1) if n1 and r_n1 else np.nan
                    cells = "".join(f"{x:8.3f}" for x in vr + mr)
                    print(
                        f"{method:<14}{strata.n_strata:>3} {short:<6}{cells}"
                        f"{(n1 if n1 else -1):>7}{red:7.1f}"
                    )
                sys.stdout.flush()
    print(f"\n# total time {time.time() - t0:.0f} s")


def _n_at(grid, mae):
    ok = np.flatnonzero(mae <= 0.01)
    return int(grid[ok[0]]) if ok.size else None


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 600)
