"""Benchmark: ``Population`` + ``stratify`` on 10^7 scores against a full sort of the scores.

Prints the median wall time and CPU thread time of building a :class:`bayes_eval.Population`
from 10^7 scores and stratifying it (``equal_size`` and ``equal_width``, 10 strata per predicted
side), beside ``np.sort`` of the same scores run interleaved in the same process, and the ratios,
for uniform scores and two skewed ones (beta(0.5, 5): most mass near 0, so a few histogram bins
are crowded; beta(0.5, 2)). The machine may be shared: the load average is printed before and
after, and CPU time is less sensitive to other processes than wall time.
Target (issue 2): <= 2 s and faster than the sort (the O(N) histogram path of
:func:`bayes_eval._score_histogram.histogram_strata` needs a few passes over the scores).

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
REPS = 7
#: (name, threshold, draw) of the score distributions
CASES = (
    ("uniform", 0.5, lambda rng, n: rng.random(n)),
    ("beta(.5,5)", 0.5, lambda rng, n: rng.beta(0.5, 5.0, n)),
    ("beta(.5,2)", 0.3, lambda rng, n: rng.beta(0.5, 2.0, n)),
)
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
    print(f"bench_stratify: Population + stratify on {N:,} scores vs np.sort")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
        f"{pinned}; load average before {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
        f"median of {REPS}"
    )
    print()
    header = (
        f"{'scores':<11} {'thr':>4} {'method':<12} {'K/side':>6} | {'pop+stratify s':>14} "
        f"{'cpu s':>6} | {'np.sort s':>9} {'cpu s':>6} | {'ratio':>5} {'cpu':>5}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for name, threshold, draw in CASES:
        scores = draw(rng, N)
        for method in ("equal_size", "equal_width"):
            n_strata = 10

            def run(method=method, n_strata=n_strata, threshold=threshold, scores=scores) -> None:
                pop = be.Population(scores, threshold=threshold)
                be.stratify(pop, method=method, n_strata=n_strata)

            run()  # warm-up
            ours, sort = [], []
            for _ in range(REPS):
                ours.append(_timed(run))
                sort.append(_timed(lambda scores=scores: np.sort(scores)))
            o_w, o_c = np.median(ours, axis=0)
            s_w, s_c = np.median(sort, axis=0)
            print(
                f"{name:<11} {threshold:>4} {method:<12} {n_strata:>6} | {o_w:>14.3f} "
                f"{o_c:>6.3f} | {s_w:>9.3f} {s_c:>6.3f} | {o_w / s_w:>5.2f} {o_c / s_c:>5.2f}"
            )
            verdicts.append((f"{name} {method}", o_w, o_w < s_w, o_c < s_c))
        del scores
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average after {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print()
    for label, o_w, faster, faster_cpu in verdicts:
        ok = o_w <= TARGET_S and faster
        print(
            f"target {label}: <= {TARGET_S:.0f} s and faster than np.sort: "
            f"{'met' if ok else 'NOT met'} ({o_w:.3f} s, {'faster' if faster else 'slower'} "
            f"in wall time, {'faster' if faster_cpu else 'slower'} in CPU time)"
        )


if __name__ == "__main__":
    main()
