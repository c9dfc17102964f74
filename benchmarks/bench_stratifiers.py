"""Wall time of :func:`bayes_eval.stratify` on 10^7 scores for every stratifier.

Targets (issue 3): <= 2 s for equal_width, equal_size, cum_sqrt_f, cum_cbrt_f and weighted_mean;
<= 10 s for kmeans and gmm. Scores: Beta(0.7, 1.5) (skewed, as classifier probabilities are),
threshold 0.5, 10 strata per side; best of ``REPEATS`` runs (the machine is shared, so the best
run is the least disturbed one); the load average is printed for context. Also timed: the
confidence variable (``variable="confidence"``) and ``n_strata="auto"``.

Run: ``uv run python benchmarks/bench_stratifiers.py``.
"""

from __future__ import annotations

import os
import time

import numpy as np

import bayes_eval as be
from bayes_eval._stratifiers import STRATIFIERS

N = 10_000_000
REPEATS = 3
TARGET = {"kmeans": 10.0, "gmm": 10.0}


def best_time(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    pop = be.Population(rng.beta(0.7, 1.5, N), threshold=0.5)
    print(
        f"# stratify() on N = {N:,} scores, K = 10 per side, best of {REPEATS}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    rows = []
    for method in STRATIFIERS:
        for variable in ("score", "confidence"):
            t = best_time(
                lambda m=method, v=variable: be.stratify(
                    pop, method=m, n_strata=10, variable=v, rng=0
                )
            )
            rows.append((method, variable, t, TARGET.get(method, 2.0)))
    t = best_time(lambda: be.stratify(pop, method="equal_size", n_strata="auto"))
    rows.append(("equal_size", "auto K", t, 2.0))
    base = rows[0][2]  # equal_size on the score, measured in the same process
    print(f"{'method':<15}{'variable':<12}{'seconds':>8}{'x equal_size':>14}{'target':>8}  ok")
    for method, variable, t, target in rows:
        print(
            f"{method:<15}{variable:<12}{t:8.2f}{t / base:14.2f}{target:8.0f}  "
            f"{'yes' if t <= target else 'NO'}"
        )
    print(f"# load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
