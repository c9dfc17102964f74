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

Usage: ``uv run python benchmarks/bench_procedure_check.py [--model pooled] [--reps 300]``.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="pooled")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--cal-sims", type=int, default=2000)
    ap.add_argument("--truths", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11, help="seed of the simulated audits")
    args = ap.parse_args()
    lp = be.datasets.synthetic(20_000, prevalence=0.2, separation=2.0, rng=1)
    st = be.stratify(lp.population, n_strata=3)
    kw = dict(metric="f1", target=TARGET, level=LEVEL, design="posterior_variance")
    t0 = time.perf_counter()
    wc = calibrate_worst_case(
        st,
        **kw,
        batch_size=BATCH,
        budget=BUDGET,
        model=args.model,
        n_sims=args.cal_sims,
        rng=0,
        draws=DRAWS,
    )
    print(
        f"# model {args.model}: calibration {time.perf_counter() - t0:.1f} s; boundary "
        f"{wc.boundary.nominal[0]:.4f} -> {wc.boundary.nominal[-1]:.4f}"
    )
    order = np.argsort(-np.asarray(wc.boundary.rates))[: args.truths]
    rule = be.stop.Accept(TARGET, level=LEVEL, corrected=True, n_sims=args.cal_sims, rng=0)
    print(f"{'truth':<14}{'look model (in-sample)':>24}{'real procedure':>22}{'reps':>6}{'sec':>8}")
    for i in order:
        truth = wc.truths[i]
        labels = labels_at(st, truth.positives, np.random.default_rng(7))
        t1 = time.perf_counter()
        res = be.simulate(
            (lp.population, labels),
            strata=st,
            designs=["posterior_variance"],
            metric="f1",
            budget=BUDGET,
            batch_size=BATCH,
            n_reps=args.reps,
            stop=rule,
            model=args.model,
            draws=DRAWS,
            rng=args.seed,
            trajectory=False,
        )["posterior_variance"]
        # the Accept rule's reasons: "accepted: ..." or "budget exhausted without acceptance"
        stopped = res.stopped_by.values.astype(str)
        acc = float(np.char.startswith(stopped, "accepted").mean())
        other = set(stopped[~np.char.startswith(stopped, "accepted")]) - {
            "budget exhausted without acceptance"
        }
        if other:
            raise RuntimeError(f"unexpected stop reasons: {sorted(other)}")
        se = np.sqrt(max(acc * (1 - acc), 1.0 / args.reps) / args.reps)
        mark = " MISS" if acc > 0.05 + 2 * se else ""
        rate = float(wc.boundary.rates[i])
        print(
            f"{truth.name:<14}{rate:>24.4f}{acc:>15.4f} ± {se:.4f}{args.reps:>6}"
            f"{time.perf_counter() - t1:>8.1f}{mark}",
            flush=True,
        )


if __name__ == "__main__":
    main()
