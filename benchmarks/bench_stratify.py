"""Benchmark: ``Population`` + ``stratify`` on 10^7 scores against a full sort of the scores.

Prints the median time (and CPU thread time) of building a :class:`bayes_eval.Population` from
10^7 scores and stratifying it (``equal_size`` and ``equal_width``, 10 strata per predicted
side), beside ``np.sort`` of the same scores run interleaved in the same process, and the ratio.
Target: <= 2 s and faster than the sort (quantiles by partition and ``searchsorted`` are
O(N log K)).

Usage::

    uv run python benchmarks/bench_stratify.py | tee benchmarks/results/bench_stratify.txt
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import platform
import time

import numpy as np

import bayes_eval as be

N = 10_000_000
REPS = 5
TARGET_S = 2.0


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - w0, time.thread_time() - c0


def main() -> None:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        pinned = f"pinned to CPU {cpu}"
    except (AttributeError, OSError):  # pragma: no cover
        pinned = "not pinned"
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    rng = np.random.default_rng(0)
    scores = rng.beta(0.5, 2.0, N)  # skewed, like classifier probabilities
    print(f"bench_stratify: Population + stratify on {N:,} scores vs np.sort")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
        f"{pinned}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; median of {REPS}"
    )
    print()
    header = (
        f"{'method':<12} {'n_strata':>8} | {'pop+stratify s':>14} {'cpu s':>7} | "
        f"{'np.sort s':>9} {'cpu s':>7} | {'ratio':>6} {'cpu':>6}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for method in ("equal_size", "equal_width"):
        for n_strata in (10,):

            def run(method=method, n_strata=n_strata) -> None:
                pop = be.Population(scores, threshold=0.3)
                be.stratify(pop, method=method, n_strata=n_strata)

            run()  # warm-up
            ours, sort = [], []
            for _ in range(REPS):
                ours.append(_timed(run))
                sort.append(_timed(lambda: np.sort(scores)))
            o_w, o_c = np.median(ours, axis=0)
            s_w, s_c = np.median(sort, axis=0)
            print(
                f"{method:<12} {n_strata:>8} | {o_w:>14.3f} {o_c:>7.3f} | {s_w:>9.3f} "
                f"{s_c:>7.3f} | {o_w / s_w:>6.2f} {o_c / s_c:>6.2f}"
            )
            verdicts.append((method, o_w, o_w < s_w))
    print()
    for method, o_w, faster in verdicts:
        ok = o_w <= TARGET_S and faster
        print(
            f"target {method}: <= {TARGET_S:.0f} s and faster than np.sort: "
            f"{'met' if ok else 'NOT met'} ({o_w:.3f} s, {'faster' if faster else 'slower'})"
        )


if __name__ == "__main__":
    main()
