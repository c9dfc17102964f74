"""Is OASIS configured fairly? Its cumulative-sqrt(F) strata at three score histograms.

OASIS 0.1.3 cuts its strata on a histogram of the scores whose number of bins it chooses by the
Freedman-Diaconis rule; asked for 64 strata (as this package's comparisons configure it,
``bench_pooled.run_oasis``) it makes fewer where that histogram has fewer bins, and warns
"Consider increasing n_bins". This benchmark runs OASIS with its own histogram and with 256 and
1,024 bins (``stratification_n_bins``) on the needles the held-out benchmark compares against
(``heldout_populations``: the population of seed 0, OASIS seeds 0-15, 1,000 labels, as
``bench_heldout.py --oasis 16``) and on the synthetic needles of ``bench_default_needles.py``
(population and OASIS seed s), and prints each setting's F1 RMSE (MC s.e. by the delta
method), the strata OASIS made, and the ratio of the default audit's F1 RMSE (committed
results, calibration version 13: ``POOLED_RMSE``) to OASIS's at its own histogram and at the best
of the three (chosen after seeing the truth, so that column flatters OASIS; the ratios' s.e.
carry OASIS's Monte Carlo error only).

Usage: ``uv run python benchmarks/bench_oasis_histogram.py [--seeds 16] [--only NAME ...]``
(OASIS: ``uv pip install --no-deps oasis==0.1.3``).
"""

from __future__ import annotations

import argparse
import functools
import warnings

import numpy as np
from bench_pooled import _rmse, run_oasis
from heldout_populations import FRESH, SOURCES, build, needle

from bayes_eval import datasets

#: histograms: OASIS's own (None) and two finer ones
BINS = (None, 256, 1024)

#: the default audit's F1 RMSE at 1,000 labels, version 13: bench_heldout.txt (session 31
#: block for the first group's needles, 300 audits; session 32 for the fresh group's) and
#: bench_default_needles.txt (session 31, 16 seeds) for the synthetic needles
POOLED_RMSE = {
    "needle flights": 0.0017,
    "needle tv16": 0.0369,
    "needle diamonds": 0.0151,
    "needle gss_abortion": 0.0027,
    "needle cps_female": 0.0012,
    "needle chem97": 0.0301,
    "needle insteval": 0.0026,
    "needle fertility": 0.0045,
    "needle military": 0.0012,
    "needle nlswork_union": 0.0185,
    "needle cps1988_afam": 0.0097,
    "needle nafld_death": 0.0124,
    "needle doctor_none": 0.0048,
    "synthetic 0.05% separation 4": 0.125,
    "synthetic 0.05% separation 5": 0.129,
}


def _oasis(make, seeds, fixed, n_bins):
    """OASIS's F1 errors and the strata it made over ``seeds`` (``fixed``: one population)."""
    errs, strata = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Failed to create 64 strata", "n_bins" hints
        for seed in seeds:
            lp = make(0 if fixed else seed)
            est = run_oasis(lp, [seed], n_bins=n_bins, strata_out=strata)[0]
            errs.append(est - lp.true_metrics()["f1"])
    return np.asarray(errs), strata


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    seeds = range(args.seeds)
    pops = [
        (f"needle {n}", functools.cache(lambda s, n=n: needle(build(n, 0), 0)), True)
        for n in (*SOURCES, *FRESH)
    ]
    pops += [
        (
            f"synthetic 0.05% separation {sep:g}",
            lambda s, sep=sep: datasets.synthetic(
                100_000, prevalence=0.0005, separation=sep, rng=s
            ),
            False,
        )
        for sep in (4.0, 5.0)
    ]
    print(f"# OASIS 0.1.3, 64 cum-sqrt-F strata asked, {args.seeds} seeds, 1,000 labels")
    head = "".join(f"{'bins ' + str(b or 'own'):>22}" for b in BINS)
    print(f"{'population':<30}{head}{'pooled':>8}{'/own':>11}{'/best':>11}")
    for name, make, fixed in pops:
        if args.only and name not in args.only:
            continue
        cells, rmses = [], []
        for b in BINS:
            e, k = _oasis(make, seeds, fixed, b)
            r, se = _rmse(e, 0.0)
            rmses.append((r, se))
            cells.append(f"{r:.4f}±{se:.4f} K{min(k)}")
        ours = POOLED_RMSE.get(name, float("nan"))
        best = min(rmses)
        ratios = [f"{ours / r:.2f}±{ours / r * s / r:.2f}" for r, s in (rmses[0], best)]
        print(
            f"{name:<30}"
            + "".join(f"{c:>22}" for c in cells)
            + f"{ours:>8.4f}"
            + "".join(f"{x:>11}" for x in ratios),
            flush=True,
        )


if __name__ == "__main__":
    main()
