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
   functions (``bayes_eval.recall._simulate``), vectorised over replications. Also shown:
   ``lb_rnd``, ``in_rnd``, the same coverages by the randomised PIT (the realised recall is
   discrete, so an interval whose ends sit on atoms covers more than its level; splitting ties
   at random removes that excess), ``z_med`` the median over replications of
   ``PairRecall.cell_resolution`` (posterior mean / sd of the smaller single-caught cell) and
   ``unres`` the fraction of replications where it is below 2 (reported as unresolved).
   Labelling stage of the counts form: each set's precision has its own prior, and the draws are
   projected onto the coherent cell counts (each cell clipped to its range). Earlier versions:
   a Jeffreys prior on every *cell*'s rate, which pulls a small, poorly measured cell
   :math:`|T \\cap A_2 \\setminus A_1|` towards 0 (lower-bound coverage 0.910 at recalls
   0.9 / 0.7, :math:`|T| \\approx 200`, 200 labels per set); then set priors *restricted* to the
   coherent cells by rejection, which cuts that cell's posterior at 0 and made the lower bound
   conservative where the labels cannot tell it from 0 (1.000 at 50 labels per set, 0.991-0.995
   at 200 labels and :math:`|T| \\ge 2{,}000`).
2. **Public API spot check**: the same through ``be.pair_recall`` / ``be.pair_recall_from_flags``
   on built flag arrays, one grid cell.
2b. **Third classifier** (``be.recall_from_total``, section 6 of the paper) from a pair's
   capture-layer :math:`|T|`, the pair's cells from Eq. (1) (labels of :math:`A_{12}`) or from
   Eq. (2) (no labels of :math:`A_{12}`), three independent classifiers, universes redrawn.
3. **Tables 3 and 4 of the paper** with the printed precisions taken as known: plug-in Eq. (1),
   the capture posterior's mean, and its sd against the capture-noise formula
   :math:`\\mathrm{sd}(R_1) \\approx \\frac{x_{12}}{y_2}\\sqrt{\\frac{x_1 x_2}{y_1 y_2 x_{12}}}`
   (Seber's variance of the Lincoln-Petersen :math:`\\hat n`, carried to :math:`R_1 = y_1 / n`).
4. **delta_1 sensitivity** for one pair, and the coverage of the worst case over the range
   (0.9, 1.2) when the pair is in fact dependent (true delta_1 from 0.9 to 1.4).
5. **Rows near a boundary** (the counts form at recalls 0.9 / 0.7 with 50 and 200 labels, and
   the rows nearest the band's edges) with 4,000 universes each, and a **third classifier with
   recall near 1** (0.95, 50 labels): draws with :math:`y_{new} > |T|` projected onto 1 by
   ``recall_from_total`` or redrawn (the previous rule, reimplemented here for comparison).

Run: ``uv run python benchmarks/bench_pair_recall.py`` (output in
``benchmarks/results/bench_pair_recall.txt``; about 6 minutes on 2 shared cores).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import bayes_eval as be
from bayes_eval.recall._capture import delta_grid
from bayes_eval.recall._simulate import (
    Scenario,
    flags_posterior_over_delta,
    simulate_coverage,
    simulate_universes,
)

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
        f"{'int90':>7} {'width90':>8} {'lb_rnd':>6} {'in_rnd':>6} {'z_med':>6} {'unres':>5} "
        f"{'lb95_old':>8} {'int90_old':>9} {'width_old':>9}"
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
                        f"{o['lb95_random']:>6.3f} {o['int90_random']:>6.3f} "
                        f"{o['resolution_median']:>6.1f} {o['unresolved']:>5.2f} "
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
    rnd_lb = sum(0.93 <= r["lb95_random"] <= 0.97 for r in rows)
    rnd_int = sum(0.88 <= r["int90_random"] <= 0.92 for r in rows)
    print(
        f"randomised PIT (ties of the discrete realised recall split at random): {rnd_lb} of "
        f"{len(rows)} rows in band (lb95), {rnd_int} of {len(rows)} (int90)"
    )
    resolved = [r for r in rows if r["resolution_median"] >= 2.0]
    print(
        f"rows whose median cell resolution is >= 2 ({len(resolved)}): "
        f"{sum(0.93 <= r['lb95_capture'] <= 0.97 for r in resolved)} in band (lb95), "
        f"{sum(0.88 <= r['int90_capture'] <= 0.92 for r in resolved)} (int90)"
    )
    print("misses (coverage, its distance from the band in MC s.e., median cell resolution):")
    for r in rows:
        for name, (lo, hi), se in (("lb95", (0.93, 0.97), se_lb), ("int90", (0.88, 0.92), se_int)):
            x = r[f"{name}_capture"]
            if not lo <= x <= hi:
                side = "conservative" if x > hi else "ANTI-conservative"
                print(
                    f"  {r['form']:<6} prev {r['prev']:<6g} r {r['r'][0]},{r['r'][1]} labels "
                    f"{r['labels'] or 'all':>4}: {name} {x:.3f} ({side}, "
                    f"{min(abs(x - lo), abs(x - hi)) / se:.1f} s.e. outside; randomised "
                    f"{r[f'{name}_random']:.3f}; z_med {r['resolution_median']:.1f})"
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


def _labels_of(gen, topic, members, n):
    idx = np.flatnonzero(members)
    pick = gen.choice(idx, min(n, idx.size), replace=False)
    return int(topic[pick].sum()), int(pick.size)


def third_classifier_check(gen: np.random.Generator, reps: int = 300) -> None:
    """Coverage of the realised recalls of a pair and of a third classifier (recall_from_total)."""
    universe, prev = 200_000, 0.005
    recalls, precisions = (0.5, 0.6, 0.4), (0.6, 0.5, 0.7)
    se = (np.sqrt(0.95 * 0.05 / reps), np.sqrt(0.09 / reps))
    print(
        f"\nThird classifier, {reps} universes of {universe:,} items (prevalence {prev}, recalls "
        f"{recalls}, precisions {precisions}), MC s.e. {se[0]:.3f} / {se[1]:.3f}:"
    )
    print(
        f"{'cells':<7} {'labels':>6} {'lb95 r1':>8} {'int90 r1':>9} {'lb95 r3':>8} {'int90 r3':>9}"
    )
    t0 = time.perf_counter()
    for cells, lab in (("Eq. 1", 200), ("Eq. 2", 200), ("Eq. 1", None), ("Eq. 2", None)):
        hits = np.zeros((2, 2))
        n_lab = universe if lab is None else lab
        for _ in range(reps):
            topic = gen.random(universe) < prev
            flags = []
            for r, p in zip(recalls, precisions, strict=True):
                fpr = prev * r * (1 - p) / p / (1 - prev)
                flags.append(np.where(topic, gen.random(universe) < r, gen.random(universe) < fpr))
            f1, f2, f3 = flags
            truth = [(topic & f).sum() / topic.sum() for f in (f1, f3)]
            joint = (
                {"labels_12": _labels_of(gen, topic, f1 & f2, n_lab)} if cells == "Eq. 1" else {}
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", be.RecallAboveOneWarning)
                pair = be.pair_recall(
                    int(f1.sum()),
                    int(f2.sum()),
                    int((f1 & f2).sum()),
                    _labels_of(gen, topic, f1, n_lab),
                    _labels_of(gen, topic, f2, n_lab),
                    universe=universe,
                    draws=2000,
                    rng=gen,
                    **joint,
                )
                new = be.recall_from_total(
                    int(f3.sum()), _labels_of(gen, topic, f3, n_lab), total=pair, rng=gen
                )
            for k, (res, q) in enumerate(((pair, "recall_1"), (new, "recall"))):
                lo, hi = res.interval(q, 0.9, "eti")
                hits[k, 0] += res.lower_bound(q, 0.95) <= truth[k]
                hits[k, 1] += lo <= truth[k] <= hi
        c = hits / reps
        marks = [
            in_band(c[k, j], *((0.93, 0.97) if j == 0 else (0.88, 0.92)))
            for k in (0, 1)
            for j in (0, 1)
        ]
        print(
            f"{cells:<7} {lab or 'all':>6} {c[0, 0]:>7.3f}{marks[0]} {c[0, 1]:>8.3f}{marks[1]} "
            f"{c[1, 0]:>7.3f}{marks[2]} {c[1, 1]:>8.3f}{marks[3]}",
            flush=True,
        )
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


def dependence_coverage(gen: np.random.Generator, reps: int = 1000) -> None:
    """Coverage of the worst case over a delta_1 range when the pair is dependent (flags form)."""
    grid = delta_grid(0.9, 1.2)
    se = np.sqrt(0.95 * 0.05 / reps)
    print(
        f"\nDependent pairs, flags form, delta_1 range (0.9, 1.2): {reps} universes per row "
        f"(prevalence 0.005, recalls 0.4/0.5, 200 labels per cell), MC s.e. {se:.3f}. Coverage "
        "of the realised recall by the 95% lower bound assuming delta_1 = 1, by the worst case "
        "over the range (lower_bound_over_delta) and by the union of the 90% intervals "
        "(interval_over_delta):"
    )
    print(f"{'true delta_1':>12} {'lb95 at 1':>10} {'lb95 worst':>11} {'int90 union':>12}")
    for true in (0.9, 1.0, 1.1, 1.2, 1.4):
        u = simulate_universes(Scenario(0.005, 0.4, 0.5, 200, delta_1=true), reps, gen)
        rec = flags_posterior_over_delta(u, 200, DRAWS, gen, np.append(grid, 1.0))
        q = np.quantile(rec, [0.05, 0.95], axis=0)  # (2, reps, grid)
        t = u["truth"]
        at_one = np.mean(q[0, :, -1] <= t)
        worst = np.mean(q[0, :, :-1].min(axis=1) <= t)
        union = np.mean((q[0, :, :-1].min(axis=1) <= t) & (t <= q[1, :, :-1].max(axis=1)))
        note = "" if 0.9 <= true <= 1.2 else "  (outside the range)"
        print(f"{true:>12g} {at_one:>10.3f} {worst:>11.3f} {union:>12.3f}{note}")


#: rows re-run with more universes: the counts form at recalls (0.9, 0.7), where the smallest
#: cell is unresolved with 50 or 200 labels per set, and the rows closest to the band's edges
BOUNDARY_ROWS = (
    ("counts", 0.0005, 0.9, 0.7, 50),
    ("counts", 0.005, 0.9, 0.7, 50),
    ("counts", 0.05, 0.9, 0.7, 50),
    ("counts", 0.0005, 0.9, 0.7, 200),
    ("counts", 0.005, 0.9, 0.7, 200),
    ("counts", 0.05, 0.9, 0.7, 200),
    ("counts", 0.005, 0.2, 0.3, 200),
    ("flags", 0.0005, 0.2, 0.3, 50),
    ("counts", 0.05, 0.4, 0.5, 50),
    ("counts", 0.05, 0.9, 0.7, 1500),
    ("counts", 0.0005, 0.9, 0.7, 1500),
    ("counts", 0.0005, 0.9, 0.7, None),
    ("flags", 0.0005, 0.9, 0.7, None),
)


def boundary_rows(gen: np.random.Generator, reps: int = 4000) -> None:
    """The rows of :data:`BOUNDARY_ROWS` with ``reps`` universes each (a fresh stream)."""
    se_lb, se_int = np.sqrt(0.95 * 0.05 / reps), np.sqrt(0.09 / reps)
    print(
        f"\nRows near a boundary or the band's edges, {reps} universes each, {DRAWS} draws; MC "
        f"s.e. {se_lb:.4f} (lb95) / {se_int:.4f} (int90):"
    )
    print(
        f"{'form':<6} {'prev':>6} {'r1,r2':>8} {'labels':>6} {'lb95':>7} {'int90':>7} "
        f"{'lb_rnd':>6} {'in_rnd':>6} {'unres':>5}"
    )
    t0 = time.perf_counter()
    for form, prev, r1, r2, lab in BOUNDARY_ROWS:
        o = simulate_coverage(Scenario(prev, r1, r2, lab), form, reps, DRAWS, gen)
        print(
            f"{form:<6} {prev:>6g} {r1:>3},{r2:<4} {lab or 'all':>6} "
            f"{o['lb95_capture']:>6.3f}{in_band(o['lb95_capture'], 0.93, 0.97)} "
            f"{o['int90_capture']:>6.3f}{in_band(o['int90_capture'], 0.88, 0.92)} "
            f"{o['lb95_random']:>6.3f} {o['int90_random']:>6.3f} {o['unresolved']:>5.2f}",
            flush=True,
        )
    print(f"  ({time.perf_counter() - t0:.0f} s)")


def _third_by_rejection(n_hat, h, n, size, gen, a=0.5, b=0.5):
    """The previous rule of ``recall_from_total``: pairs ``(|T|, y_new)`` with ``y_new > |T|``
    redrawn (a fresh ``y_new`` with a random ``|T|`` draw) until coherent (exact draws)."""
    draws = n_hat.size

    def propose(k):
        return h + gen.binomial(size - n, gen.beta(a + h, b + n - h, k))

    y, t = propose(draws).astype(float), n_hat.copy()
    bad = np.flatnonzero(y > t)
    while bad.size:
        y[bad], t[bad] = propose(bad.size), n_hat[gen.integers(0, draws, bad.size)]
        bad = bad[y[bad] > t[bad]]
    return y / t


def third_near_one(gen: np.random.Generator, reps: int = 1000) -> None:
    """A third classifier whose recall is near 1 (0.95) with 50 labels: its recall draws above 1
    projected onto 1 (``recall_from_total``) or redrawn (the previous rule)."""
    universe, prev = 200_000, 0.005
    recalls, precisions = (0.5, 0.6, 0.95), (0.6, 0.5, 0.7)
    hits = np.zeros((2, 2))
    t0 = time.perf_counter()
    for _ in range(reps):
        topic = gen.random(universe) < prev
        flags = []
        for r, p in zip(recalls, precisions, strict=True):
            fpr = prev * r * (1 - p) / p / (1 - prev)
            flags.append(np.where(topic, gen.random(universe) < r, gen.random(universe) < fpr))
        f1, f2, f3 = flags
        truth = (topic & f3).sum() / topic.sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", be.RecallAboveOneWarning)
            pair = be.pair_recall(
                int(f1.sum()),
                int(f2.sum()),
                int((f1 & f2).sum()),
                _labels_of(gen, topic, f1, 200),
                _labels_of(gen, topic, f2, 200),
                _labels_of(gen, topic, f1 & f2, 200),
                universe=universe,
                draws=2000,
                rng=gen,
            )
            h3, n3 = _labels_of(gen, topic, f3, 50)
            new = be.recall_from_total(int(f3.sum()), (h3, n3), total=pair, rng=gen)
        old = _third_by_rejection(pair.draws("total_positives"), h3, n3, int(f3.sum()), gen)
        for k, x in enumerate((new.draws("recall"), old)):
            lo, hi = np.quantile(x, [0.05, 0.95])
            hits[k] += [lo <= truth, lo <= truth <= hi]
    c = hits / reps
    print(
        f"\nThird classifier with recall 0.95, 50 labels ({reps} universes, pair as above with 200 "
        f"labels per set), MC s.e. {np.sqrt(0.95 * 0.05 / reps):.3f} / {np.sqrt(0.09 / reps):.3f}:"
    )
    print(f"  projection (recall_from_total): lb95 {c[0, 0]:.3f}  int90 {c[0, 1]:.3f}")
    print(f"  rejection (previous rule):      lb95 {c[1, 0]:.3f}  int90 {c[1, 1]:.3f}")
    print(f"  ({time.perf_counter() - t0:.0f} s)")


def main() -> None:
    t0 = time.perf_counter()
    gen = np.random.default_rng(20140824)
    coverage_grid(gen)
    public_api_check(gen)
    third_classifier_check(gen)
    paper_tables()
    sensitivity()
    dependence_coverage(gen)
    boundary_rows(np.random.default_rng(20261123))
    third_near_one(np.random.default_rng(7))
    print(f"\nElapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
