"""Benchmark: ``estimate`` with K strata of 10^5 items, a few hundred labels, all metrics.

For K in {2, 10, 20, 50} and draws in {4,000, 40,000}, prints the median time of
``bayes_eval.estimate`` (default ``sampler="fast"``, finite population, Jeffreys prior, every
metric) beside the plain numpy draws it replaces (``rng.beta`` for every stratum, then
``rng.binomial`` of the unlabelled remainder), run interleaved in the same process, and their
ratio. Also the time of the sampler kernels alone (``draw_beta`` + ``draw_remainder``) and of
``estimate(sampler="exact")``.

Run on one core: the script pins itself to one CPU and limits BLAS threads. Wall-clock medians
suffer when the machine is shared; the CPU-time columns (``time.thread_time``) are less affected.

Usage::

    uv run python benchmarks/bench_estimate.py | tee benchmarks/results/bench_estimate.txt
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import platform
import time

import numpy as np

import bayes_eval as be
from bayes_eval import _sampling
from bayes_eval.posterior import stratum_counts

STRATUM_SIZE = 100_000
LABELS = 400
KS = (2, 10, 20, 50)
DRAWS = (4_000, 40_000)
TARGET_MS = 50.0


def _pin_one_core() -> str:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return "not pinned"


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return (time.perf_counter() - w0) * 1e3, (time.thread_time() - c0) * 1e3


def _setup(k: int, rng: np.random.Generator):
    scores = rng.random(k * STRATUM_SIZE)
    truth = rng.random(scores.size) < scores**2  # precision ~0.58, prevalence ~1/3
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, method="equal_size", n_strata=k // 2)
    per = max(LABELS // k, 4)
    ids = np.concatenate(
        [rng.choice(strata.members(j), per, replace=False) for j in range(strata.n_strata)]
    )
    labels = (ids, truth[ids])
    n, h = stratum_counts(strata, ids, truth[ids].astype(np.uint8))
    return strata, labels, n, h


def main() -> None:
    pinned = _pin_one_core()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print("bench_estimate: estimate(strata, labels, draws=D) vs plain numpy Beta+Binomial draws")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {pinned}; load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f}"
    )
    print(
        f"strata of {STRATUM_SIZE:,} items, ~{LABELS} labels (equal allocation, >= 4 per "
        "stratum), all metrics, finite population, Jeffreys prior; times in ms (median over "
        "repeats; CPU = thread time)"
    )
    print()
    header = (
        f"{'K':>3} {'draws':>6} {'reps':>4} | {'estimate':>9} {'cpu':>7} | {'numpy':>8} "
        f"{'cpu':>7} | {'ratio':>6} {'cpu':>6} | {'kernels':>8} {'exact est':>9}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    verdict = None
    for k in KS:
        strata, labels, n, h = _setup(k, rng)
        a_post, b_post = 0.5 + h, 0.5 + n - h
        remaining = strata.sizes - n
        for draws in DRAWS:
            reps = 31 if draws <= 4_000 else 15

            ctx = (strata, labels, a_post, b_post, remaining, draws, k)

            def run_estimate(seed: int, sampler: str = "fast", ctx=ctx) -> None:
                strata, labels, _, _, _, draws, _ = ctx
                be.estimate(strata, labels, draws=draws, rng=seed, sampler=sampler)

            def run_numpy(seed: int, ctx=ctx) -> None:
                _, _, a_post, b_post, remaining, draws, k = ctx
                g = np.random.default_rng(seed)
                theta = g.beta(a_post, b_post, size=(draws, k))
                g.binomial(remaining, theta)

            def run_kernels(seed: int, ctx=ctx) -> None:
                _, _, a_post, b_post, remaining, draws, _ = ctx
                g = np.random.default_rng(seed)
                theta = _sampling.draw_beta(a_post, b_post, draws, g)
                _sampling.draw_remainder(theta, remaining, g)

            run_estimate(0)  # warm-up (imports, caches)
            est, base, kern, exact = [], [], [], []
            for r in range(reps):
                est.append(_timed(lambda r=r: run_estimate(r)))
                base.append(_timed(lambda r=r: run_numpy(r)))
                kern.append(_timed(lambda r=r: run_kernels(r)))
                if r < 5:
                    exact.append(_timed(lambda r=r: run_estimate(r, "exact")))
            e_w, e_c = np.median(est, axis=0)
            b_w, b_c = np.median(base, axis=0)
            k_w = float(np.median([t[0] for t in kern]))
            x_w = float(np.median([t[0] for t in exact]))
            print(
                f"{k:>3} {draws:>6} {reps:>4} | {e_w:>9.1f} {e_c:>7.1f} | {b_w:>8.1f} "
                f"{b_c:>7.1f} | {e_w / b_w:>6.2f} {e_c / b_c:>6.2f} | {k_w:>8.1f} {x_w:>9.1f}"
            )
            if k == 20 and draws == 40_000:
                verdict = (e_w, e_c)
    print()
    if verdict is not None:
        e_w, e_c = verdict
        status = "met" if e_w <= TARGET_MS else "NOT met (wall)"
        print(
            f"target K=20, 40,000 draws <= {TARGET_MS:.0f} ms median: {status}: "
            f"wall {e_w:.1f} ms, CPU {e_c:.1f} ms"
        )


if __name__ == "__main__":
    main()
