"""The calibrated rule on the procedure that is actually run (issue 14): draw-based posteriors.

The sequential correction simulates the pooled model through a *look model* (its marginal
posterior matched by Betas, refitted when the labels double; :mod:`bayes_eval.sequential._paths`).
The audit itself decides at every look from the pooled model's joint posterior draws. This check
runs the real procedure — :func:`bayes_eval.simulate` with ``model``'s draw-based posterior at
every look and ``Accept(target, corrected=True)``, whose correction is the look model's — at the
truths of the family where the calibration found the highest false-accept rates, and reports the
false-accept rate of the real procedure with its Monte Carlo s.e. (a miss: above alpha + 2 s.e.).

Setting: synthetic population of 20,000 items (prevalence 0.2, separation 2.0), 3 equal-size
strata per side, ``posterior_variance``, F1 >= 0.6 at level 0.95, batches of 20 up to 600 labels
(30 looks), each truth placed at the target (F1 = 0.6 exactly) by the family's 1-D solve.

``--setting needle`` (session 47, calibration version 17): the needle regime's census -- 60,000
items with 0.4 % positives (synthetic, separation 3.0, seed 7), 6 equal-size strata per side, so
the predicted positives are six strata of 20 items that the audit labels towards a census --,
precision >= 0.75 at level 0.95, batches of 10 up to 200 labels (20 looks). There the
calibration's acceptance probability depends on the integer lattice of the near-census strata
(:mod:`bayes_eval._lattice`); ``--no-lattice`` calibrates without it (version 16's simulator),
for comparison.

``--population NAME --metric M`` (session 48): the real procedure on a real population of
``heldout_populations.py`` with its real labels, the claim a hair above its true metric, set up
as ``bench_certification_real.py`` sets it up (5 equal-size strata per side, batches of 20 up to
2,000 labels, a look after every batch). That benchmark runs the calibration's simulator at the
real truth; this runs the audit's own draw-based posterior there, as a user (or an outside
check) does with ``be.simulate``. One table row per run.

Usage: ``uv run python benchmarks/bench_procedure_check.py [--model pooled] [--reps 300]
[--setting default|needle] [--no-lattice] [--population NAME --metric f1]`` (from
``benchmarks/``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bayes_eval as be
from bayes_eval.sequential.robust import calibrate_worst_case

TARGET, LEVEL, BATCH, BUDGET = 0.6, 0.95, 20, 600
#: posterior draws per look of the real procedure (the calibration simulates their noise)
DRAWS = 2000


def labels_at(strata, positives, rng):
    """True labels with exactly ``positives[k]`` positives in stratum k, placed at random."""
    truth = np.zeros(strata.population.size, dtype=bool)
    for k in range(strata.n_strata):
        members = strata.members(k)
        truth[rng.choice(members, int(positives[k]), replace=False)] = True
    return truth


def real_procedure(lp, labels, st, metric, target, batch, budget, args):
    """The real procedure's false accepts at ``labels``: ``(rate, s.e.)``, the rate of the
    audits ``Accept(target, corrected=True)`` stopped by accepting."""
    rule = be.stop.Accept(target, level=LEVEL, corrected=True, n_sims=args.cal_sims, rng=0)
    res = be.simulate(
        (lp.population, labels),
        strata=st,
        designs=["posterior_variance"],
        metric=metric,
        budget=budget,
        batch_size=batch,
        n_reps=args.reps,
        stop=rule,
        model=args.model,
        draws=DRAWS,
        rng=args.seed,
        trajectory=False,
    )["posterior_variance"]
    # what stopped each audit: the Accept rule (``accepted``) or the budget -- the same names
    # on the vectorised independent path and the per-audit path of the other models
    stopped = res.stopped_by.values.astype(str)
    accepted = res.accepted.values
    acc = float(accepted.mean())
    other = set(stopped[~accepted]) - {"budget", "exhausted"}
    if other:
        raise RuntimeError(f"unexpected stop reasons: {sorted(other)}")
    return acc, np.sqrt(max(acc * (1 - acc), 1.0 / args.reps) / args.reps)


def at_real_truth(args) -> None:
    """``--population``: the real procedure on a real population, the claim a hair above its
    true metric (``bench_certification_real.py``'s setting: 5 equal-size strata per side,
    batches of 20 up to 2,000 labels, a look after every batch)."""
    from bench_certification import BATCH as batch
    from bench_certification import BUDGET as budget
    from bench_certification_real import CLAIM_EPS, positives_per_stratum
    from heldout_populations import population

    from bayes_eval.metrics import metric_of_positives

    lp = population(args.population)
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    pos = positives_per_stratum(st, lp.truth)
    truth = metric_of_positives(args.metric, pos, np.asarray(st.sizes), np.asarray(st.predicted))
    target = truth + CLAIM_EPS
    t0 = time.perf_counter()
    acc, se = real_procedure(
        lp, np.asarray(lp.truth, dtype=bool), st, args.metric, target, batch, budget, args
    )
    mark = " MISS" if acc > 0.05 + 2 * se else ""
    print(
        f"| {args.population} | {args.model} | {args.metric} | {truth:.4f} | {acc:.4f} ± {se:.4f}"
        f"{mark} | {args.reps} | {time.perf_counter() - t0:.0f} |",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="pooled")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--cal-sims", type=int, default=2000)
    ap.add_argument("--truths", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11, help="seed of the simulated audits")
    ap.add_argument("--setting", default="default", help="default or needle")
    ap.add_argument("--no-lattice", action="store_true", help="calibrate as version 16 did")
    ap.add_argument(
        "--population",
        default=None,
        help="a real population of heldout_populations.py: the real procedure at its real truth",
    )
    ap.add_argument("--metric", default="f1", help="with --population: f1, precision or recall")
    args = ap.parse_args()
    if args.setting not in ("default", "needle"):
        raise SystemExit(f"error: --setting {args.setting}: allowed: default, needle")
    if args.no_lattice:
        from bayes_eval import _lattice

        _lattice.LATTICE_REMAINDER = 0  # no stratum is summed exactly: version 16's simulator
    if args.population is not None:
        at_real_truth(args)
        return
    if args.setting == "needle":
        lp = be.datasets.synthetic(60_000, prevalence=0.004, separation=3.0, rng=7)
        st = be.stratify(lp.population, n_strata=6)
        metric, target, batch, budget = "precision", 0.75, 10, 200
    else:
        lp = be.datasets.synthetic(20_000, prevalence=0.2, separation=2.0, rng=1)
        st = be.stratify(lp.population, n_strata=3)
        metric, target, batch, budget = "f1", TARGET, BATCH, BUDGET
    kw = dict(metric=metric, target=target, level=LEVEL, design="posterior_variance")
    t0 = time.perf_counter()
    wc = calibrate_worst_case(
        st,
        **kw,
        batch_size=batch,
        budget=budget,
        model=args.model,
        n_sims=args.cal_sims,
        rng=0,
        draws=DRAWS,
    )
    print(
        f"# model {args.model}, setting {args.setting}"
        f"{' (no lattice: version 16)' if args.no_lattice else ''}: calibration "
        f"{time.perf_counter() - t0:.1f} s; boundary "
        f"{wc.boundary.nominal[0]:.4f} -> {wc.boundary.nominal[-1]:.4f}"
    )
    order = np.argsort(-np.asarray(wc.boundary.rates))[: args.truths]
    print(f"{'truth':<14}{'look model (in-sample)':>24}{'real procedure':>22}{'reps':>6}{'sec':>8}")
    for i in order:
        truth = wc.truths[i]
        labels = labels_at(st, truth.positives, np.random.default_rng(7))
        t1 = time.perf_counter()
        acc, se = real_procedure(lp, labels, st, metric, target, batch, budget, args)
        mark = " MISS" if acc > 0.05 + 2 * se else ""
        rate = float(wc.boundary.rates[i])
        print(
            f"{truth.name:<14}{rate:>24.4f}{acc:>15.4f} ± {se:.4f}{args.reps:>6}"
            f"{time.perf_counter() - t1:>8.1f}{mark}",
            flush=True,
        )


if __name__ == "__main__":
    main()
