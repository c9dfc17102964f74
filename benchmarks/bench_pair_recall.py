"""Labels needed to know a recall within ±0.05 at 95%: classifier pair vs uniform sampling.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 4.3.2 and
Figure 1) note that estimating recall by uniform sampling of the universe needs about
``384 / prevalence`` labels (384 on-topic documents for a ±0.05 margin), while their pair method
needs only precision labels (about 500 per precision in their section 7.4), a saving of "as much as
1000x". This script measures both with this package's posteriors, in the same process:

* uniform sampling: the smallest number ``m`` of on-topic documents for which the Jeffreys Beta
  posterior of the recall (at its expected count) has a 95% equal-tailed interval of half-width
  <= 0.05, for the harder of the two recalls; labels needed = ``m / prevalence`` (expected);
* pair, Eq. (1): the smallest equal sample size ``n`` per precision sample (A1, A2, A12; 3n labels)
  for which both recalls' 95% intervals from :func:`bayes_eval.pair_recall` (expected counts) have
  half-width <= 0.05;
* pair, Eq. (2): the same without the joint sample (2n labels; needs |U|).

The scenario is fixed across prevalences: |U| = 10^7, recalls r1 = 0.5, r2 = 0.6, precisions
p1 = 0.7, p2 = 0.5, on-topic and off-topic independence exact (delta_1 = delta_2 = 1). The columns
``eq2_bias`` show what the sparsity assumption costs Eq. (2) at each prevalence, and
``cover95`` checks the chosen Eq. (1) design by simulation (400 hypergeometric label sets).

Run: ``uv run python benchmarks/bench_pair_recall.py`` (output in
``benchmarks/results/bench_pair_recall.txt``).
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats

import bayes_eval as be
from bayes_eval._sampling import draw_beta
from bayes_eval.recall_pairs import pair_quantities

UNIVERSE = 10_000_000
R1, R2, P1, P2 = 0.5, 0.6, 0.7, 0.5
MARGIN, LEVEL = 0.05, 0.95
PREVALENCES = (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005)


def scenario(prevalence: float) -> dict:
    n_topic = round(prevalence * UNIVERSE)
    off_total = UNIVERSE - n_topic
    t1, t2 = round(R1 * n_topic), round(R2 * n_topic)
    t12 = round(R1 * R2 * n_topic)  # delta_1 = 1
    f1 = round(t1 * (1 - P1) / P1)
    f2 = round(t2 * (1 - P2) / P2)
    f12 = round(f1 * f2 / off_total)  # delta_2 = 1
    return {
        "T": n_topic,
        "on": (t1, t2, t12),
        "off": (f1, f2, f12),
        "sizes": (t1 + f1, t2 + f2, t12 + f12),
        "p": (t1 / (t1 + f1), t2 / (t2 + f2), t12 / (t12 + f12)),
    }


def half_width(draws: np.ndarray) -> float:
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return (hi - lo) / 2


def uniform_positives_needed() -> int:
    """Smallest m with a Jeffreys-posterior 95% half-width <= margin for both recalls."""
    for m in range(50, 5000):
        ok = True
        for r in (R1, R2):
            h = r * m
            lo, hi = stats.beta.ppf([(1 - LEVEL) / 2, (1 + LEVEL) / 2], h + 0.5, m - h + 0.5)
            ok &= (hi - lo) / 2 <= MARGIN
        if ok:
            return m
    raise RuntimeError("not reached")


def pair_ok(sc: dict, n: int, joint: bool) -> bool:
    s1, s2, s12 = sc["sizes"]
    p1, p2, p12 = sc["p"]
    n1, n2 = min(n, s1), min(n, s2)
    labels = [(round(p1 * n1), n1), (round(p2 * n2), n2)]
    kw = {"labels_12": (round(p12 * min(n, s12)), min(n, s12))} if joint else {}
    res = be.pair_recall(s1, s2, s12, *labels, universe=UNIVERSE, draws=20_000, rng=0, **kw)
    names = ("recall_1", "recall_2") if joint else ("recall_1_eq2", "recall_2_eq2")
    return all(half_width(res.draws(q)) <= MARGIN for q in names)


def smallest_n(sc: dict, joint: bool) -> int:
    lo, hi = 10, 20_000
    while lo < hi:
        mid = (lo + hi) // 2
        if pair_ok(sc, mid, joint):
            hi = mid
        else:
            lo = mid + 1
    return lo


def coverage(sc: dict, n: int, rng: np.random.Generator, sets: int = 400) -> float:
    h = np.concatenate(
        [
            rng.hypergeometric(on, off, min(n, s), size=sets)
            for on, off, s in zip(sc["on"], sc["off"], sc["sizes"], strict=True)
        ]
    )
    nn = np.repeat([min(n, s) for s in sc["sizes"]], sets)
    theta = draw_beta(0.5 + h, 0.5 + nn - h, 4000, rng).reshape(4000, 3, sets)
    q = pair_quantities(theta[:, 0], theta[:, 1], theta[:, 2], *sc["sizes"])
    r1 = sc["on"][0] / sc["T"]
    lo, hi = np.quantile(q["recall_1"], [0.025, 0.975], axis=0)
    return float(np.mean((lo <= r1) & (r1 <= hi)))


def main() -> None:
    t0 = time.perf_counter()
    rng = np.random.default_rng(20140824)
    m = uniform_positives_needed()
    print(
        f"Labels for recall within ±{MARGIN} at {LEVEL:.0%} (|U| = {UNIVERSE:,}; r1={R1}, "
        f"r2={R2}, p1={P1}, p2={P2}; delta_1 = delta_2 = 1)"
    )
    print(f"uniform sampling needs {m} on-topic documents (paper: 384 = 1.96^2/4/0.05^2)\n")
    head = (
        f"{'prevalence':>10} {'|T|':>9} {'uniform':>10} {'pair_eq1':>9} {'ratio1':>8} "
        f"{'pair_eq2':>9} {'ratio2':>8} {'eq2_bias':>9} {'cover95':>8}"
    )
    print(head)
    print("-" * len(head))
    for prev in PREVALENCES:
        sc = scenario(prev)
        uniform = m / prev
        n1 = smallest_n(sc, joint=True)
        n2 = smallest_n(sc, joint=False)
        labels1 = sum(min(n1, s) for s in sc["sizes"])
        labels2 = sum(min(n2, s) for s in sc["sizes"][:2])
        p1, p2, _ = sc["p"]
        exact = pair_quantities(p1, p2, sc["p"][2], *sc["sizes"], UNIVERSE)
        bias2 = float(exact["recall_1_eq2"] - R1)
        cov = coverage(sc, n1, rng)
        print(
            f"{prev:>10g} {sc['T']:>9,} {uniform:>10,.0f} {labels1:>9,} "
            f"{uniform / labels1:>8.0f}x {labels2:>9,} {uniform / labels2:>8.0f}x "
            f"{bias2:>+9.4f} {cov:>8.3f}"
        )
    print(
        f"\n(pair columns: total labels over the precision samples, 3n for Eq. 1 and 2n for "
        f"Eq. 2; ratio = uniform / pair; eq2_bias = Eq. (2) recall_1 minus true r1 at exact "
        f"precisions; cover95 = simulated coverage of the Eq. (1) 95% interval of r1 at the "
        f"chosen n.)\nElapsed {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
