"""Certification that holds at every truth at the target (issue 14).

For each cell (design x model x metric x look schedule) on the demo population
(``bayes_eval.datasets.demo_population()``, 5 strata per predicted side, batches of 20 up to 2,000
labels, target 0.65, claimed level 0.95):

1. calibrate the corrected rule exactly as an audit does (:func:`bayes_eval.sequential.
   calibrate_worst_case`, the body of ``correction_for``; ``--cal-sims`` audits per binding truth,
   a quarter of that per screened truth) and time it;
2. on **fresh** simulated audits (another seed, ``--eval-sims`` per truth) of every truth of the
   family, count the audits the calibrated boundary accepts: the false-accept rate and its Monte
   Carlo standard error :math:`\\sqrt{p(1-p)/S}`; a cell misses when the rate exceeds
   :math:`\\alpha + 2` s.e. at some truth (marked ``MISS``);
3. on fresh audits of a classifier 0.05 above the target (score-shaped), the mean labels to
   accept with the calibrated boundary and with the naive rule (nominal 0.95 at every look), and
   their ratio (target <= 1.3 with every-batch looks).

The evaluation uses the calibration's simulator (same engine and model; for ``pooled`` the look
model of :mod:`bayes_eval.sequential._paths`), with a different seed. Cells are run in order of
importance (the demo setting first) until ``--deadline`` seconds; cells not run are listed.

Usage: ``uv run python benchmarks/bench_certification.py [--cal-sims 2000] [--eval-sims 4000]``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np

import bayes_eval as be
from bayes_eval._loop import BatchPlan
from bayes_eval.designs import make_design
from bayes_eval.priors import Prior
from bayes_eval.sequential._paths import simulate_paths
from bayes_eval.sequential.boundary import labels_used
from bayes_eval.sequential.robust import calibrate_worst_case

TARGET = 0.65
LEVEL = 0.95
BATCH = 20
BUDGET = 2000


def _cells(models):
    designs = ("posterior_variance", "random", "proportional", "online_optimal")
    metrics = ("f1", "precision", "recall")
    looks = ("every", "geometric")
    cells = list(itertools.product(models, designs, metrics, looks))
    demo = ("independent", "posterior_variance", "f1", "every")
    pooled_demo = ("pooled", "posterior_variance", "f1", "every")
    first = [c for c in (demo, pooled_demo) if c in cells]
    # independent before pooled (pooled is ~50x slower per simulated audit)
    rest = sorted((c for c in cells if c not in first), key=lambda c: (c[0] != "independent",))
    return first + rest


def run_cell(st, model, design, metric, looks, cal_sims, eval_sims, seed, draws=None):
    sched = None if looks == "every" else be.sequential.geometric_looks(BATCH, BUDGET)
    t0 = time.perf_counter()
    cal = calibrate_worst_case(
        st,
        metric=metric,
        target=TARGET,
        level=LEVEL,
        design=design,
        batch_size=BATCH,
        budget=BUDGET,
        looks=sched,
        model=model,
        n_sims=cal_sims,
        rng=seed,
        draws=draws,
    )
    cal_s = time.perf_counter() - t0
    b = cal.boundary
    sizes = np.asarray(st.sizes)
    pred = np.asarray(st.predicted, dtype=bool)
    dsg = make_design(design)
    plan = BatchPlan.build(
        dsg,
        batch_size=BATCH,
        budget=BUDGET,
        total=int(sizes.sum()),
        n_strata=sizes.size,
        looks=sched,
        strict_budget=True,
    )
    prior = Prior.resolve("jeffreys", sizes.size)
    pos = np.stack([t.positives for t in cal.truths])
    if cal.margin_positives is not None:
        pos = np.concatenate([pos, cal.margin_positives[None, :]])
    prob = simulate_paths(
        sizes=sizes,
        predicted=pred,
        positives=pos,
        prior_a=prior.a,
        prior_b=prior.b,
        metric=metric,
        target=TARGET,
        design=dsg,
        batches=list(plan.batches),
        schedule=plan.looks,
        finite_population=True,
        n_sims=eval_sims,
        rng=np.random.default_rng(seed + 1000),
        model=model,
        strata=st,
        draws=draws,
    )
    n_t = len(cal.truths)
    fam = prob[:n_t]
    # an unattainable boundary never accepts (the rule refuses even P = 1)
    rates = (fam >= b.nominal).any(axis=-1).mean(axis=1) * float(b.attainable)
    se = np.sqrt(np.maximum(rates * (1 - rates), 1.0 / eval_sims) / eval_sims)
    out = {
        "truths": [t.name for t in cal.truths],
        "rates": rates,
        "se": se,
        "cal_s": cal_s,
        "shape": b.shape,
        "first": b.nominal[0],
        "last": b.nominal[-1],
        "attainable": b.attainable,
        "naive_worst": float((fam >= LEVEL).any(axis=-1).mean(axis=1).max()),
    }
    if prob.shape[0] > n_t:
        good = prob[n_t]
        lab = labels_used(good, plan.looks, b.nominal).astype(float)
        naive = labels_used(good, plan.looks, np.full(plan.looks.shape, LEVEL)).astype(float)
        out["labels"] = (lab.mean(), lab.std(ddof=1) / np.sqrt(lab.size))
        out["naive"] = (naive.mean(), naive.std(ddof=1) / np.sqrt(naive.size))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cal-sims", type=int, default=2000)
    ap.add_argument("--eval-sims", type=int, default=4000)
    ap.add_argument("--other-eval-sims", type=int, default=1000)
    ap.add_argument("--other-cal-sims", type=int, default=2000)
    ap.add_argument("--pooled-cal-sims", type=int, default=200)
    ap.add_argument("--pooled-eval-sims", type=int, default=200)
    ap.add_argument("--models", default="independent,pooled")
    ap.add_argument("--deadline", type=float, default=3600.0)
    ap.add_argument("--designs", default="", help="comma list: run only these designs")
    ap.add_argument("--skip-demo", action="store_true", help="skip the demo cell")
    ap.add_argument("--metrics", default="", help="comma list: run only these metrics")
    ap.add_argument("--looks", default="", help="comma list: run only these look schedules")
    ap.add_argument(
        "--draws",
        type=int,
        default=40_000,
        help="posterior draws per look of the audit (their noise is simulated; 0: exact P)",
    )
    args = ap.parse_args()
    t_start = time.perf_counter()
    lp = be.datasets.demo_population()
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    alpha = 1 - LEVEL
    print("# Certification at every truth at the target (issue 14)")
    print(
        f"demo population ({lp.description}); 10 strata; target {TARGET} at level {LEVEL}; "
        f"batches of {BATCH} to {BUDGET} labels; 'every' = a look after every batch, "
        "'geometric' = 20, 40, ..., 1280, 2000 labels (online_optimal: its own batch schedule)"
    )
    print(
        f"calibration: {args.cal_sims} audits per binding truth (independent), "
        f"{args.pooled_cal_sims} (pooled); evaluation on fresh audits: {args.eval_sims} per truth "
        f"(independent, demo cells = posterior_variance x F1), {args.other_eval_sims} (other "
        f"independent cells), {args.pooled_eval_sims} (pooled). MISS = rate > alpha + 2 s.e.; "
        f"P at each look from {args.draws or 'exact'} posterior draws (their noise simulated)"
    )
    sys.stdout.flush()
    models = tuple(args.models.split(","))
    skipped = []
    misses = 0
    ratios = []
    for cell in _cells(models):
        model, design, metric, looks = cell
        if args.designs and design not in args.designs.split(","):
            continue
        if args.skip_demo and cell[1:] == ("posterior_variance", "f1", "every"):
            continue
        if args.metrics and metric not in args.metrics.split(","):
            continue
        if args.looks and looks not in args.looks.split(","):
            continue
        if time.perf_counter() - t_start > args.deadline:
            skipped.append(cell)
            continue
        pooled = model != "independent"
        demo = design == "posterior_variance" and metric == "f1"
        cs = args.pooled_cal_sims if pooled else (args.cal_sims if demo else args.other_cal_sims)
        es = args.pooled_eval_sims if pooled else (args.eval_sims if demo else args.other_eval_sims)
        try:
            r = run_cell(
                st, model, design, metric, looks, cs, es, seed=11, draws=args.draws or None
            )
        except ValueError as exc:
            print(f"\n## {model} / {design} / {metric} / {looks}: not run ({exc})")
            continue
        print(
            f"\n## {model} / {design} / {metric} / {looks} looks  (calibration {r['cal_s']:.1f} s"
            f", {cs} per binding truth; boundary {r['first']:.4f} -> {r['last']:.4f}, shape "
            f"{r['shape']:g}{'' if r['attainable'] else ', UNATTAINABLE'}; naive rule worst "
            f"{r['naive_worst']:.3f})"
        )
        line = []
        for name, p, s in zip(r["truths"], r["rates"], r["se"], strict=True):
            miss = p > alpha + 2 * s
            misses += miss
            line.append(f"{name} {p:.4f}±{s:.4f}{' MISS' if miss else ''}")
        print("  false accepts (fresh, " + str(es) + " per truth): " + "; ".join(line))
        if "labels" in r:
            (m, ms), (n, ns) = r["labels"], r["naive"]
            ratio = m / n
            if looks == "every":
                ratios.append((cell, ratio))
            print(
                f"  labels to accept at target + 0.05: corrected {m:.0f}±{ms:.0f}, naive "
                f"{n:.0f}±{ns:.0f}, ratio {ratio:.2f}{' (target 1.3: MISS)' if ratio > 1.3 else ''}"
            )
        sys.stdout.flush()
    print(f"\ncells with a miss at some truth: {misses} truth-cells")
    if ratios:
        print(
            "labels ratio (every-batch looks): "
            + ", ".join(f"{'/'.join(c[:3])} {v:.2f}" for c, v in ratios)
        )
    if skipped:
        print("not run (time): " + ", ".join("/".join(c) for c in skipped))
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
