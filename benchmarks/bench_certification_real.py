"""Certification at real truths: the corrected rule on real populations, the claim at their truth.

``bench_certification.py`` measures the corrected acceptance rule (issue 14) at the truths of
the calibration's family and at held-out *constructed* truths, all on one synthetic population.
Here the truth is a **real** one that no profile constructed: a real population of
``heldout_populations.py`` (a real outcome, scored by a classifier of ``classifiers.py`` trained
on another 30 % of the data) with its real labels, and the claim ``metric >= target``
made with ``target`` a hair above the population's **true** metric (:data:`CLAIM_EPS`): the
hardest claim that is still false, which an honest rule accepts in at most ``alpha`` of audits.
(Until session 46 the target was the true metric itself, a claim that is true at equality; where
an audit labels a whole side to a census it decides that claim exactly and accepts it, rightly.
With the hair above, a census rejects it, and the rows where no census happens are unchanged:
the posterior's probabilities move by about 1e-9.)

For each population and metric:

1. the audit as a user runs it: ``be.stratify(pop, method="equal_size", n_strata=5)`` (5 strata
   per predicted side), ``be.Audit(pop, strata=..., metric=..., model=...)`` with its default
   design (``posterior_variance``), batches of 20 up to 2,000 labels, a look after every batch
   (``--looks geometric``: 20, 40, ..., 1280, 2000); its correction from the one calibration
   path, :func:`bayes_eval.sequential.correction_for` (``--cal-sims`` audits per binding truth),
   built around the scores as every audit without pilot labels is;
2. ``--eval-sims`` fresh simulated audits of that procedure on the real population: labels drawn
   without replacement within each stratum from the real labels (an audit's labels depend on the
   real population only through its positives per stratum, since items are drawn uniformly within
   a stratum and the models read per-stratum counts), the posterior at every look as the
   calibration simulates it (same engine; for ``pooled`` the look model of
   :mod:`bayes_eval.sequential._paths`), its noise from the procedure's Monte Carlo draws;
3. the share of audits the corrected rule accepts (MISS when above ``alpha + 2`` Monte Carlo
   s.e.), the naive rule's (level 0.95 at every look) for comparison, and the calibration's own
   worst family truth.

The simulation of step 2 is the calibration's simulator (a different seed); what this adds to
``bench_certification.py`` is the truth: real positives per stratum on real score strata, at
real prevalences, and populations no calibration was designed around.

Usage: ``uv run python benchmarks/bench_certification_real.py [--models independent]
[--populations NAME,...] [--metrics f1,precision,recall] [--looks every] [--cal-sims 2000]
[--eval-sims 4000] [--n-jobs -1] [--claim-offset 1e-9]``; ``--list`` prints the population
names. A negative ``--claim-offset`` (e.g. ``-0.05``) makes the claim true and reports the share
of audits that accept it (the rule's power at a real truth) instead of false accepts, and the
mean labels to the first accepting look with the corrected boundary and with the naive rule
(nominal 0.95 at every look; an audit that never accepts counts the budget), each with its Monte
Carlo s.e., and their ratio: issue 14's label cost at a real classifier 0.05 above its claim.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from bench_certification import BATCH, BUDGET, audit_plan, fresh_paths
from heldout_populations import FOREST, FOREST_CHECK, FRESH, SCORERS, SOURCES, population

import bayes_eval as be
from bayes_eval._validation import check_n_jobs
from bayes_eval.designs import make_design
from bayes_eval.metrics import metric_of_positives
from bayes_eval.models._look_pool import RefitPool
from bayes_eval.sequential.boundary import labels_used

LEVEL = 0.95
#: the claim is ``metric >= truth + CLAIM_EPS``: false, by less than any two values of a metric of
#: these populations differ
CLAIM_EPS = 1e-9
#: the populations run by default: every held-out group at its natural prevalence, then needles
DEFAULT_POPULATIONS = (
    *SOURCES,
    *FRESH,
    *FOREST,
    *FOREST_CHECK,
    *SCORERS,
    *(
        f"needle {n}"
        for n in ("flights", "tv16", "diamonds", "chem97", "military", "covid_positive")
    ),
)


def positives_per_stratum(st, truth):
    """Real positives in each stratum."""
    return np.bincount(
        np.asarray(st.assignment, dtype=np.int64),
        weights=np.asarray(truth, dtype=np.float64),
        minlength=int(st.n_strata),
    ).astype(np.int64)


def run(lp, metric, model, looks, cal_sims, eval_sims, seed, n_jobs, offset=CLAIM_EPS):
    """One population x metric, the claim ``metric >= truth + offset``: the row's numbers (a
    dict), or a reason it was not run (str)."""
    pop = lp.population
    st = be.stratify(pop, method="equal_size", n_strata=5, rng=0)
    pos = positives_per_stratum(st, lp.truth)
    truth = metric_of_positives(metric, pos, np.asarray(st.sizes), np.asarray(st.predicted))
    target = truth + offset
    if not 0.0 < target < 1.0:
        return f"true {metric} {truth:g}, target {target:g}: no claim to test"
    audit = be.Audit(pop, strata=st, metric=metric, model=model, rng=seed)
    proc = audit.procedure(budget=BUDGET, batch_size=BATCH)
    t0 = time.perf_counter()
    corr = be.sequential.correction_for(
        proc,
        target=target,
        level=LEVEL,
        n_sims=cal_sims,
        # the default 0.005 needs 1,900 audits; fewer (a quick check) accept their own MC error
        max_mcse=max(0.005, 1.001 * np.sqrt(LEVEL * (1 - LEVEL) / cal_sims)),
        looks=None if looks == "every" else "geometric",
        n_jobs=n_jobs,
    )
    cal_s = time.perf_counter() - t0
    sizes = np.asarray(st.sizes, dtype=np.int64)
    dsg = make_design(proc.design, **proc.design_options)
    plan = audit_plan(st, dsg, corr.looks)
    if not np.array_equal(plan.looks, corr.look_labels):
        raise RuntimeError("the plan's looks are not the correction's")
    t0 = time.perf_counter()
    with RefitPool(check_n_jobs(n_jobs)) as pool:
        rng = np.random.default_rng([seed, 1000])
        prob = fresh_paths(
            st, dsg, plan, proc.prior, metric, target, model, pos, eval_sims, rng, proc.draws, pool
        )
    eval_s = time.perf_counter() - t0
    nominal = np.asarray(corr.boundary, dtype=np.float64)
    rate = float((prob >= nominal).any(axis=-1).mean()) * float(corr.attainable)
    se = float(np.sqrt(max(rate * (1 - rate), 1.0 / eval_sims) / eval_sims))
    naive = float((prob >= LEVEL).any(axis=-1).mean())
    # labels at the first accepting look (the budget where none accepts): the cost of a true claim
    lab = labels_used(prob, plan.looks, nominal).astype(np.float64) if corr.attainable else None
    nv = labels_used(prob, plan.looks, np.full(plan.looks.shape, LEVEL)).astype(np.float64)
    worst = corr.worst
    return {
        "N": int(sizes.sum()),
        "positives": int(pos.sum()),
        "truth": truth,
        "rate": rate,
        "se": se,
        "naive": naive,
        "first": float(nominal[0]),
        "last": float(nominal[-1]),
        "attainable": bool(corr.attainable),
        "worst": (worst.name, worst.rate, worst.mcse) if worst is not None else None,
        "cal_s": cal_s,
        "eval_s": eval_s,
        "labels": None if lab is None else (lab.mean(), lab.std(ddof=1) / np.sqrt(lab.size)),
        "naive_labels": (nv.mean(), nv.std(ddof=1) / np.sqrt(nv.size)),
    }


def _cost(r):
    """The labels column of a true claim: mean labels to the first accept (the budget where no
    look accepts) with the corrected boundary and the naive rule, each ± its s.e., and the ratio."""
    (nv, nv_se) = r["naive_labels"]
    if r["labels"] is None:
        return f" unattainable / {nv:,.0f} ± {nv_se:.0f} |"
    lab, lab_se = r["labels"]
    return f" {lab:,.0f} ± {lab_se:.0f} / {nv:,.0f} ± {nv_se:.0f} ({lab / nv:.2f}) |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="independent")
    ap.add_argument("--populations", default="", help="comma list (default: every one, --list)")
    ap.add_argument("--metrics", default="f1,precision,recall")
    ap.add_argument("--looks", default="every", help="every or geometric")
    ap.add_argument("--cal-sims", type=int, default=2000)
    ap.add_argument("--eval-sims", type=int, default=4000)
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument(
        "--claim-offset",
        type=float,
        default=CLAIM_EPS,
        help="the claim is 'metric >= truth + OFFSET' (default 1e-9: false by the least amount; "
        "a negative offset makes the claim true and measures how often the rule accepts it)",
    )
    ap.add_argument("--list", action="store_true", help="print the population names and stop")
    args = ap.parse_args()
    if args.list:
        print("\n".join(DEFAULT_POPULATIONS))
        return
    names = [n for n in args.populations.split(",") if n] or list(DEFAULT_POPULATIONS)
    metrics = [m for m in args.metrics.split(",") if m]
    bad = sorted(set(metrics) - set(be.METRICS))
    if bad:
        raise SystemExit(f"error: --metrics {','.join(bad)}: allowed: {', '.join(be.METRICS)}")
    if args.looks not in ("every", "geometric"):
        raise SystemExit(f"error: --looks {args.looks}: allowed: every, geometric")
    if not -1.0 < args.claim_offset < 1.0 or args.claim_offset == 0.0:
        raise SystemExit(
            f"error: --claim-offset {args.claim_offset:g}: allowed: a nonzero number in (-1, 1)"
        )
    alpha = 1 - LEVEL
    true_claim = args.claim_offset < 0  # accepting it is right: no MISS, the share is power
    print(
        f"# Certification at real truths: the claim 'metric >= its true value "
        f"{'+' if args.claim_offset > 0 else '-'} {abs(args.claim_offset):g}' "
        f"({'TRUE: the share of audits that accept it' if true_claim else 'false'}) (issue 14)"
    )
    print(
        f"5 equal-size strata per side; design posterior_variance; batches of {BATCH} to "
        f"{BUDGET} labels; looks: {args.looks}; level {LEVEL}; correction from correction_for "
        f"({args.cal_sims} audits per binding truth); {args.eval_sims} fresh audits on the real "
        f"labels; MISS = accept rate > alpha + 2 s.e.; seed {args.seed}"
    )
    t_start = time.perf_counter()
    misses = 0
    for model in args.models.split(","):
        print(f"\n## model {model}, {args.looks} looks")
        print(
            "| population | N | positives | metric | "
            f"truth (target = truth {args.claim_offset:+g}) | "
            "corrected accepts | naive accepts | boundary (first -> last) | "
            "calibration's worst truth | s |"
            + (" labels to accept: corrected / naive (ratio) |" if true_claim else "")
        )
        print("|---|---|---|---|---|---|---|---|---|---|" + ("---|" if true_claim else ""))
        for name in names:
            lp = population(name)
            for metric in metrics:
                r = run(
                    lp,
                    metric,
                    model,
                    args.looks,
                    args.cal_sims,
                    args.eval_sims,
                    args.seed,
                    args.n_jobs,
                    args.claim_offset,
                )
                if isinstance(r, str):
                    print(f"| {name} | | | {metric} | {r} | | | | | |")
                    continue
                miss = not true_claim and r["rate"] > alpha + 2 * r["se"]
                misses += miss
                w = r["worst"]
                worst = "" if w is None else f"{w[0]} {w[1]:.4f} ± {w[2]:.4f}"
                bound = (
                    f"{r['first']:.4f} -> {r['last']:.4f}" if r["attainable"] else "unattainable"
                )
                print(
                    f"| {name} | {r['N']:,} | {r['positives']:,} | {metric} | {r['truth']:.4f} | "
                    f"{'**' if miss else ''}{r['rate']:.4f} ± {r['se']:.4f}"
                    f"{' MISS**' if miss else ''} | {r['naive']:.3f} | {bound} | {worst} | "
                    f"{r['cal_s']:.0f} + {r['eval_s']:.0f} |" + (_cost(r) if true_claim else "")
                )
                sys.stdout.flush()
    print(f"\nrows above alpha + 2 s.e.: {misses}")
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
