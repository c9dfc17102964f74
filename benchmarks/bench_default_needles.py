"""The default audit on needle populations: the default (pooled) model against the independent one.

What a new user runs — ``be.Audit(pop, strata=be.stratify(pop, n_strata="auto"), metric="f1")``
run to 1,000 labels in batches of 100 — on the real needle populations of
:func:`bayes_eval.datasets.needle` (40 positives, prevalence 0.1-0.5 %) and on synthetic needles
(100,000 items, prevalence 0.05 %, separation 4 and 5: strong classifiers), four seeds each; the
same audits with ``model="independent"``. Prints the true F1, the bias and RMSE of the posterior
mean, and how often the 95 % lower bound covers (4 seeds: a sanity check, not a coverage
estimate; the coverage battery is ``bench_pooled.py``).

Usage: ``uv run python benchmarks/bench_default_needles.py [--seeds 4] [--synthetic-only]
[--pooled-only] [--oasis] [--strata-method M]`` (``--oasis``: OASIS 0.1.3 on the same populations,
64 cumulative-sqrt(F) strata, its F1 estimate at the same budget, seeded by the seed;
``--strata-method``: the stratifier of ``be.stratify``, default ``stratify``'s own).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from bench_pooled import run_oasis

import bayes_eval as be
from bayes_eval import datasets

SEEDS = range(4)
MODELS = ("pooled", "independent")
STRATA_METHOD: dict[str, str] = {}  # empty: stratify's default method


def run(make, label):
    for model in MODELS:
        errs, cover = [], []
        for seed in SEEDS:
            lp = make(seed)
            truth = lp.true_metrics()["f1"]
            if model == "oasis":  # its own 64 cumulative-sqrt(F) strata; a point estimate only
                errs.append(run_oasis(lp, [seed])[0] - truth)
                cover.append(np.nan)
                continue
            st = be.stratify(lp.population, n_strata="auto", **STRATA_METHOD)
            audit = be.Audit(lp.population, strata=st, metric="f1", rng=seed, model=model)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # FewerStrataWarning, UninformativeScoresWarning
                res = audit.run(lp.oracle, budget=1000, batch_size=100)
            errs.append(res.posterior.mean("f1") - truth)
            cover.append(res.posterior.lower_bound("f1", 0.95) <= truth)
        e = np.asarray(errs)
        se = e.std(ddof=1) / np.sqrt(e.size) if e.size > 1 else float("nan")
        k = 64 if model == "oasis" else st.n_strata
        print(
            f"{label:<30}{model:<13}{truth:>7.3f}{e.mean():>+9.3f}{se:>8.3f}"
            f"{np.sqrt((e**2).mean()):>8.3f}{np.mean(cover):>8.2f}{k:>4}",
            flush=True,
        )


def main() -> None:
    global SEEDS, MODELS, STRATA_METHOD
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--synthetic-only", action="store_true")
    ap.add_argument("--pooled-only", action="store_true")
    ap.add_argument("--oasis", action="store_true", help="also OASIS (64 cum-sqrt-F strata)")
    ap.add_argument("--strata-method", default=None, help="stratify's method (default: its own)")
    args = ap.parse_args()
    if args.strata_method is not None:
        STRATA_METHOD = {"method": args.strata_method}
    SEEDS = range(args.seeds)
    MODELS = ("pooled",) if args.pooled_only else MODELS
    MODELS = (*MODELS, "oasis") if args.oasis else MODELS
    method = args.strata_method or "stratify's default"
    print(
        f"# {args.seeds} seeds, strata {method}; F1 is the last seed's truth, se the bias's s.e. "
        "over seeds"
    )
    print(
        f"{'population':<30}{'model':<13}{'F1':>7}{'bias':>9}{'se':>8}{'rmse':>8}{'cov95':>8}"
        f"{'K':>4}"
    )
    for name in () if args.synthetic_only else datasets.NEEDLE_DATASETS:
        run(lambda s, name=name: datasets.needle(name, positives=40, rng=s), f"needle {name}")
    for sep in (4.0, 5.0):
        run(
            lambda s, sep=sep: datasets.synthetic(
                100_000, prevalence=0.0005, separation=sep, rng=s
            ),
            f"synthetic 0.05% separation {sep:g}",
        )


if __name__ == "__main__":
    main()
