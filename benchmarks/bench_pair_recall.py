"""Coverage of the realised recall by the pair-recall posteriors, with universes redrawn.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``) estimate the recall
of a classifier from a conditionally independent pair by Eq. (1). Even under exact independence a
realised topic set :math:`T` gives :math:`|T \\cap A_{12}| / |T \\cap A_2| \\ne |T \\cap A_1| / |T|`
(capture noise), which the earlier posteriors of this package ignored (issue 15). This script
measures, for the capture-recapture posteriors of :func:`bayes_eval.pair_recall` (counts form)
and :func:`bayes_eval.pair_recall_from_flags` (flags form):

1. **Coverage grid.** Every replication draws a fresh universe of 400,000 items (prevalence
   0.0005, 0.005, 0.05; independent classifiers with recalls (0.2, 0.3), (0.4, 0.5), (0.9, 0.7);
   off-topic flags independent, expected precisions 0.6 and 0.5), hypergeometric labels (50, 200,
   1500 per set of A1, A2, A12 in the counts form, per cell A12, A1 only, A2 only in the flags
   form, or every item labelled), and checks whether the 95% lower bound and the 90%
   equal-tailed interval hold the *realised* recall of classifier 1. Columns ``old``: the earlier
   method (counts: independent Beta precisions and plug-in Eq. 1; flags: finite-population
   plug-in Eq. 1). Target: 0.93-0.97 and 0.88-0.92. The kernels are those of the public
   functions (``bayes_eval.recall._simulate``), vectorised over replications.
2. **Public API spot check**: the same through ``be.pair_recall`` / ``be.pair_recall_from_flags``
   on built flag arrays, one grid cell.
3. **Tables 3 and 4 of the paper** with the printed precisions taken as known: plug-in Eq. (1),
   the capture posterior's mean, and its sd against the capture-noise formula
   :math:`\\mathrm{sd}(R_1) \\approx \\frac{x_{12}}{y_2}\\sqrt{\\frac{x_1 x_2}{y_1 y_2 x_{12}}}`
   (Seber's variance of the Lincoln-Petersen :math:`\\hat n`, carried to :math:`R_1 = y_1 / n`).
4. **delta_1 sensitivity** for one pair.

Run: ``uv run python benchmarks/bench_pair_recall.py`` (output in
``benchmarks/results/bench_pair_recall.txt``; about 5 minutes on 2 cores).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import bayes_eval as be
from bayes_eval.recall._simulate import Scenario, simulate_coverage, simulate_universes

REPS, DRAWS = 1000, 1000
PREVALENCES = (0.0005, 0.005, 0.05)
RECALLS = ((0.2, 0.3), (0.4, 0.5), (0.9, 0.7))
LABELS = (50, 200, 1500, None)
TABLE_3 = {
    "Apple": (676, 10217, 420, 0.655, 0.247, 0.774, 0.129, 0.734),
    "Mars": (1783, 7703, 1433, 0.904, 0.264, 0.938, 0.661, 0.834),
    "Obama": (851, 7400, 513, 0.984, 0.116, 0.994, 0.596, 0.609),
    "Olympics": (4595, 45705, 2688, 0.986, 0.330, 0.989, 0.176, 0.587),
}
TABLE_4 = {
    "Ads/Marketing": (42073, 76771, 4369, 0.825, 0.698, 0.900, 0.073, 0.113),
    "Education": (93292, 76535, 21426, 0.827, 0.868, 0.873, 0.282, 0.242),
    "Real Estate": (42841, 31978, 12411, 0.836, 0.918, 0.989, 0.418, 0.343),
    "Food": (42376, 218507, 20493, 0.875, 0.842, 0.898, 0.100, 0.496),
}


def in_band(x: float, lo: float, hi: float) -> str:
    return " " if lo <= x <= hi else "*"


def coverage_grid(gen: np.random.Generator) -> list[dict]:
    rows = []
    head = (
        f"{'form':<6} {'prev':>6} {'r1,r2':>8} {'labels':>6} {'|T|':>6} {'lb95':>7} "
        f"{'int90':>7} {'width90':>8} {'lb95_old':>8} {'int90_old':>9} {'width_old':>9}"
    )
    print(head)
    print("-" * len(head))
    for form in ("counts", "flags"):
        for prev in PREVALENCES:
            for r1, r2 in RECALLS:
                for lab in LABELS:
                    o = simulate_coverage(Scenario(prev, r1, r2, lab), form, REPS, DRAWS, gen)
                    o.update(form=form, prev=prev, r=(r1, r2), labels=lab)
                    rows.append(o)
                    print(
                        f"{form:<6} {prev:>6g} {r1:>3},{r2:<4} {lab or 'all':>6} "
                        f"{o['mean_T']:>6.0f} {o['lb95_capture']:>6.3f}"
                        f"{in_band(o['lb95_capture'], 0.93, 0.97)} {o['int90_capture']:>6.3f}"
                        f"{in_band(o['int90_capture'], 0.88, 0.92)} {o['width90_capture']:>8.4f} "
                        f"{o['lb95_old']:>8.3f} {o['int90_old']:>9.3f} {o['width90_old']:>9.4f}",
                        flush=True,
                    )
    se_lb, se_int = rows[0]["se_lb95"], rows[0]["se_int90"]
    miss_lb = [r for r in rows if not 0.93 <= r["lb95_capture"] <= 0.97]
    miss_int = [r for r in rows if not 0.88 <= r["int90_capture"] <= 0.92]
    print(
        f"\n{REPS} universes per row, {DRAWS} posterior draws each; MC s.e. of a coverage "
        f"{se_lb:.4f} (lb95) and {se_int:.4f} (int90). '*' = outside the target band "
        "[0.93, 0.97] / [0.88, 0.92]."
    )
    print(
        f"capture posterior: {len(rows) - len(miss_lb)} of {len(rows)} rows in band (lb95), "
        f"{len(rows) - len(miss_int)} of {len(rows)} (int90)"
    )
    for name in ("lb95", "int90"):
        cap = np.array([r[f"{name}_capture"] for r in rows])
        old = np.array([r[f"{name}_old"] for r in rows])
        print(
            f"  {name}: capture min {cap.min():.3f} max {cap.max():.3f} mean {cap.mean():.3f}; "
            f"old min {old.min():.3f} max {old.max():.3f} mean {old.mean():.3f}"
        )
    return rows


def _flag_universe(gen, sc: Scenario):
    u = simulate_universes(sc, 1, gen)
    on, size = u["on"][0], u["size"][0]
    n = int(size.sum())
    cell = np.repeat(np.arange(4), size)
    topic = np.zeros(n, dtype=bool)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    for c in range(4):
        topic[start[c] : start[c] + on[c]] = True
    perm = gen.permutation(n)
    cell, topic = cell[perm], topic[perm]
    f1 = (cell == 0) | (cell == 1)
    f2 = (cell == 0) | (cell == 2)
    return topic, f1, f2, (on[0] + on[1]) / on.sum()


def public_api_check(gen: np.random.Generator, reps: int = 300) -> None:
    sc = Scenario(0.005, 0.4, 0.5, 200)
    hits = {"counts": [0, 0], "flags": [0, 0]}
    t0 = time.perf_counter()
    for _ in range(reps):
        topic, f1, f2, truth = _flag_universe(gen, sc)
        sets = (f1, f2, f1 & f2)
        labs = []
        for s in sets:
            pick = gen.choice(np.flatnonzero(s), size=min(200, int(s.sum())), replace=False)
            labs.append((int(topic[pick].sum()), int(pick.size)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", be.RecallAboveOneWarning)
            res = be.pair_recall(*(int(s.sum()) for s in sets), *labs, draws=2000, rng=gen)
        cells = (f1 & f2, f1 & ~f2, f2 & ~f1)
        lab = np.concatenate(
            [
                gen.choice(np.flatnonzero(c), size=min(200, int(c.sum())), replace=False)
                for c in cells
            ]
        )
        res_f = be.pair_recall_from_flags(f1, f2, lab, topic[lab], draws=2000, rng=gen)
        for key, r in (("counts", res), ("flags", res_f)):
            lo, hi = r.interval("recall_1", 0.9, "eti")
            hits[key][0] += r.lower_bound("recall_1", 0.95) <= truth
            hits[key][1] += lo <= truth <= hi
    se = np.sqrt(0.95 * 0.05 / reps)
    print(
        f"\nPublic API, {reps} universes (prevalence 0.005, recalls 0.4/0.5, 200 labels per set "
        f"or cell), MC s.e. {se:.3f} / {np.sqrt(0.09 / reps):.3f}:"
    )
    for key, (lb, it) in hits.items():
        print(f"  {key:<6} lb95 {lb / reps:.3f}  int90 {it / reps:.3f}")
    print(f"  ({time.perf_counter() - t0:.0f} s)")


def paper_tables() -> None:
    print(
        "\nTables 3 and 4 (printed precisions known): printed r1 / plug-in Eq. (1) / capture "
        "posterior mean; sd of the capture posterior vs the capture-noise formula"
    )
    head = (
        f"{'topic':<14} {'printed':>8} {'eq1':>7} {'capture':>8} {'|diff|':>7} {'sd':>8} "
        f"{'formula':>8} {'90% width':>9}"
    )
    print(head)
    print("-" * len(head))
    worst = 0.0
    for table in (TABLE_3, TABLE_4):
        for topic, (s1, s2, s12, p1, p2, p12, r1, _) in table.items():
            res = be.pair_recall(
                s1, s2, s12, precision_1=p1, precision_2=p2, precision_12=p12, draws=40_000, rng=1
            )
            y1, y2, x12 = p1 * s1, p2 * s2, p12 * s12
            x1, x2 = y1 - x12, y2 - x12
            sd_formula = (x12 / y2) * np.sqrt(x1 * x2 / (y1 * y2 * x12))
            eq1, cap = res.mean("recall_1_eq1"), res.mean("recall_1")
            worst = max(worst, abs(cap - eq1))
            lo, hi = res.interval("recall_1", 0.9, "eti")
            print(
                f"{topic:<14} {r1:>8.3f} {eq1:>7.4f} {cap:>8.4f} {abs(cap - eq1):>7.4f} "
                f"{res.std('recall_1'):>8.5f} {sd_formula:>8.5f} {hi - lo:>9.4f}"
            )
    print(f"largest |capture mean - plug-in Eq. (1)|: {worst:.4f} (target <= 0.002)")


def sensitivity() -> None:
    res = be.pair_recall(
        5000,
        9000,
        1500,
        labels_1=(170, 200),
        labels_2=(90, 200),
        labels_12=(195, 200),
        delta_1=(0.9, 1.2),
        draws=40_000,
        rng=3,
    )
    print("\ndelta_1 sensitivity, pair_recall(5000, 9000, 1500, 170/200, 90/200, 195/200):")
    print(res.sensitivity("recall_1").round(4).to_string())
    lo, hi = res.interval_over_delta("recall_1", 0.9)
    print(
        f"worst case over delta_1 in [0.9, 1.2]: 95% lower bound "
        f"{res.lower_bound_over_delta('recall_1', 0.95):.4f}, 90% interval ({lo:.4f}, {hi:.4f}); "
        f"log-uniform delta_1 prior: mean {res.mean('recall_1'):.4f}, "
        f"90% ({res.interval('recall_1', 0.9, 'eti')[0]:.4f}, "
        f"{res.interval('recall_1', 0.9, 'eti')[1]:.4f})"
    )


def main() -> None:
    t0 = time.perf_counter()
    gen = np.random.default_rng(20140824)
    coverage_grid(gen)
    public_api_check(gen)
    paper_tables()
    sensitivity()
    print(f"\nElapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
