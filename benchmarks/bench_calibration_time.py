"""Calibration time of the demo setting (issue 14's target: <= 20 s on one core).

The sequential correction of ``bayes-eval demo``'s procedure — the shipped demo population, 10
equal-size strata, ``posterior_variance``, F1 >= 0.65 at level 0.95, batches of 20 up to 2,000
labels (100 looks), the worst case over the family of truths at the target
(:func:`bayes_eval.sequential.correction_for`) — timed for the default pooled model and, in the
same process, for ``model="independent"`` (the yardstick: the same simulation without the pooled
model's refits). CPU seconds of this process (``time.process_time``, one thread), so a busy
machine inflates the wall time but not the figure; the calibration's own result is printed
beside it.

``--n-jobs J`` adds, in the same process, the pooled calibration with its refits fitted in ``J``
worker processes (:mod:`bayes_eval.models._look_pool`; session 35): its wall time, its CPU
(this process and the workers), and whether its correction is the same as the one-process run's
(it must be, bit for bit).

``--integration NODES SCALE DF`` adds, in the same process, the pooled model fitted with another
importance design (:func:`bayes_eval.models._laplace.integration`: ``NODES`` Student-t(``DF``)
nodes widened ``SCALE``), for the cost of a candidate integration (session 26).

Usage: ``uv run python benchmarks/bench_calibration_time.py [--n-sims 2000] [--n-jobs 2]
[--integration 1024 1.25 3]``; output committed as
``benchmarks/results/bench_calibration_time.txt``.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import bayes_eval as be
from bayes_eval.models import _laplace
from bayes_eval.sequential import correction_for
from bayes_eval.sequential.correction import clear_cache

TARGET, LEVEL, BUDGET, BATCH = 0.65, 0.95, 2000, 20


def _cpu() -> float:
    """CPU seconds of this process and of its ended children (the calibration's workers)."""
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def timed(model: str, n_sims: int, n_jobs: int = 1) -> tuple[float, float, str, object]:
    """CPU and wall seconds of one calibration of the demo procedure under ``model`` (with
    ``n_jobs`` processes), its description and its boundary."""
    lp = be.datasets.demo_population()
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    audit = be.Audit(
        lp.population, strata=st, metric="f1", design="posterior_variance", model=model, rng=0
    )
    proc = audit.procedure(budget=BUDGET, batch_size=BATCH)
    clear_cache()
    c0, w0 = _cpu(), time.perf_counter()
    corr = correction_for(
        proc,
        target=TARGET,
        level=LEVEL,
        n_sims=n_sims,
        max_mcse=0.4,
        rates="planning",
        rng=0,
        n_jobs=n_jobs,
    )
    return _cpu() - c0, time.perf_counter() - w0, corr.description, corr.boundary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-sims", type=int, default=2000, help="simulated audits per binding truth")
    ap.add_argument(
        "--integration",
        nargs=3,
        type=float,
        metavar=("NODES", "SCALE", "DF"),
        help="also time the pooled model with this importance design (e.g. 1024 1.25 3)",
    )
    ap.add_argument(
        "--n-jobs",
        type=int,
        default=None,
        help="also time the pooled calibration in this many processes (-1: one per CPU)",
    )
    args = ap.parse_args()
    if args.integration is not None:
        nodes, scale, df = args.integration
        try:  # the design's own check, before any timing
            with _laplace.integration(nodes, scale, df=df):
                pass
        except ValueError as err:
            ap.error(f"--integration {nodes:g} {scale:g} {df:g}: {err}")
    print(f"# demo procedure's calibration, {args.n_sims} simulated audits per binding truth")
    print(f"{'model':24s} {'cpu s':>8s} {'wall s':>8s} {'ratio':>7s}  result")
    rows = {m: timed(m, args.n_sims) for m in ("independent", "pooled")}
    if args.n_jobs is not None:
        rows[f"pooled, n_jobs={args.n_jobs}"] = timed("pooled", args.n_sims, args.n_jobs)
    if args.integration is not None:
        nodes, scale, df = args.integration
        with _laplace.integration(int(nodes), scale, df=df):
            rows[f"pooled {int(nodes)} t({df:g}) x{scale:g}"] = timed("pooled", args.n_sims)
    base = rows["independent"][0]
    for m, (cpu, wall, desc, _) in rows.items():
        print(f"{m:24s} {cpu:8.1f} {wall:8.1f} {cpu / base:7.2f}  {desc}")
    if args.n_jobs is not None:
        one, many = rows["pooled"], rows[f"pooled, n_jobs={args.n_jobs}"]
        same = one[2] == many[2] and np.array_equal(one[3], many[3])
        print(
            f"# n_jobs={args.n_jobs}: wall {one[1] / many[1]:.2f}x faster than one process, "
            f"CPU {many[0] / one[0]:.2f}x; the same correction: {same}"
        )
    if args.integration is not None:
        ratio = list(rows.values())[-1][0] / rows["pooled"][0]
        print(f"# CPU ratio of the candidate integration to the pooled model's own: {ratio:.2f}")


if __name__ == "__main__":  # the workers (spawned) import this file without running it
    main()
