"""Where the pooled model's deterministic integration collapses: its importance ESS (issue 13).

The pooled fit (:mod:`bayes_eval.models._laplace`) finds the hyper-mode by Newton and corrects
the Laplace approximation around it by importance sampling on 512 fixed nodes. Its effective
sample size (``PooledFit.ess``; ``pooled_importance_ess`` in every pooled result's attributes)
says how many nodes carry the posterior. Session 53 found a real population where it collapses:
bribe_justified (Gaussian naive Bayes, scores saturated at 1 - 1e-10 .. 1), whose F1 claim the
sequential correction refuses at every level because at the family truth ``fn_lowest`` the fit
says P = 0.999 for a false claim with an ESS of 1.3.

Two parts:

1. **ESS over the family.** For each population (5 equal-size strata per side, the F1 claim at
   its true value + 1e-9, as ``bench_certification_real.py`` runs it), each family truth of the
   sequential correction and the real truth: 20 simulated ``posterior_variance`` audits in
   batches of 20 (the calibration's own simulator, ``simulate_paths``), the full pooled fit at
   their counts after 100, 500, 1,000 and 2,000 labels; the ESS's minimum, 10 % quantile and
   median, and the share of fits below 3 and below 10. The counts are read by recording the
   simulator's lock-step labels after each batch (a subclass of ``_loop.LockStep``, installed in
   ``sequential._paths`` for this benchmark only).
2. **The integration at one collapsed fit.** bribe_justified's counts where ``fn_lowest`` was
   accepted (680 labels): P(F1 >= claim), F1's posterior mean and sd and the ESS with the
   default integration and three finer ones (:func:`bayes_eval.models._laplace.integration`),
   and the independent model's P at the same counts.

Usage: ``uv run python benchmarks/bench_fit_ess.py [--populations a,b] [--sims 20]``
(from the repository root; about 1-2 minutes per population on one core).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import ClassVar

import numpy as np
from bench_certification_real import positives_per_stratum
from heldout_populations import population

import bayes_eval as be
import bayes_eval.sequential._paths as paths
from bayes_eval._loop import LockStep
from bayes_eval.designs import make_design
from bayes_eval.metrics import metric_of_positives
from bayes_eval.models import _laplace
from bayes_eval.models._profile import profile_of_strata
from bayes_eval.models.pooled import fit_pooled
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.priors import Prior
from bayes_eval.sequential.robust import _score_rates
from bayes_eval.sequential.truths import truth_family

POPULATIONS = ("bribe_justified", "doctor_none", "needle diamonds", "uninsured", "strong_democrat")
#: labels at the fits: after 100, 500, 1,000 and 2,000 (batches of 20)
LOOK_BATCHES = (4, 24, 49, 99)
BATCHES = [20] * 100
#: bribe_justified's counts at a simulated fn_lowest audit that accepted (680 labels)
COLLAPSED_N = np.array([144, 143, 147, 145, 25, 15, 15, 13, 11, 22])
COLLAPSED_H = np.array([144, 134, 131, 133, 22, 4, 7, 6, 3, 10])
#: (nodes, widening, Student-t df) of the integrations compared; the first is the default
INTEGRATIONS = ((512, 1.5, 5.0), (8192, 1.5, 5.0), (8192, 3.0, 5.0), (32768, 4.0, 3.0))


class _Recorder(LockStep):
    """The simulator's lock-step labels, with every batch's counts kept in :attr:`snaps`."""

    snaps: ClassVar[list[tuple[np.ndarray, np.ndarray]]] = []

    def label(self, *args, **kwargs):
        out = super().label(*args, **kwargs)
        _Recorder.snaps.append((self.n.copy(), self.h.copy()))
        return out


def _setup(name):
    lp = population(name)
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    real = positives_per_stratum(st, lp.truth)
    target = float(metric_of_positives("f1", real, sizes, pred)) + 1e-9
    return st, sizes, pred, real, target


def family_ess(name, sims, seed=5):
    """Part 1 for one population: a printed row per truth."""
    st, sizes, pred, real, target = _setup(name)
    prof = profile_of_strata(st)
    prior = Prior.resolve("jeffreys", sizes.size)
    rates = _score_rates(st, None, prior.a, prior.b)
    truths = [(t.name, t.positives) for t in truth_family(
        sizes, pred, metric="f1", target=target, score_rates=rates
    )] + [("REAL", real)]  # fmt: skip
    print(f"\n## {name}: {int(sizes.sum()):,} items, F1 {target:.4f}, {sims} audits per truth")
    print("| truth | ESS min | 10 % | median | share < 3 | share < 10 |")
    print("|---|---|---|---|---|---|")
    every = []
    for tname, pos in truths:
        _Recorder.snaps = []
        paths.simulate_paths(
            sizes=sizes, predicted=pred, positives=pos, prior_a=prior.a, prior_b=prior.b,
            metric="f1", target=target, design=make_design("posterior_variance"),
            batches=BATCHES, schedule=np.cumsum(BATCHES), finite_population=True,
            n_sims=sims, rng=seed, model="pooled", strata=st,
        )  # fmt: skip
        ess = np.array(
            [fit_pooled(prof, *_Recorder.snaps[j], warn=False).ess for j in LOOK_BATCHES]
        ).ravel()
        every.append(ess)
        print(
            f"| {tname} | {ess.min():.1f} | {np.quantile(ess, 0.1):.1f} | {np.median(ess):.1f} | "
            f"{(ess < 3).mean():.3f} | {(ess < 10).mean():.3f} |"
        )
    a = np.concatenate(every)
    print(f"| all | {a.min():.1f} | | | {(a < 3).mean():.3f} | {(a < 10).mean():.3f} |")
    sys.stdout.flush()


def collapsed_fit():
    """Part 2: the integrations at bribe_justified's collapsed counts."""
    st, _, _, _, target = _setup("bribe_justified")
    print(f"\n## bribe_justified at n = {COLLAPSED_N.tolist()}, h = {COLLAPSED_H.tolist()}")
    print("| integration | P(F1 >= claim) | F1 mean | F1 sd | ESS |")
    print("|---|---|---|---|---|")
    for nodes, scale, df in INTEGRATIONS:
        with _laplace.integration(nodes, scale, df=df):
            post = estimate_from_stratum_counts(st, COLLAPSED_N, COLLAPSED_H, metrics="f1", rng=1)
            fit = fit_pooled(profile_of_strata(st), COLLAPSED_N, COLLAPSED_H, warn=False)
        f = post.draws("f1").ravel()
        print(
            f"| pooled, {nodes:,} t({df:g}) nodes widened {scale:g} | {(f >= target).mean():.3f} "
            f"| {f.mean():.3f} | {f.std():.3f} | {float(fit.ess):.1f} |"
        )
    post = estimate_from_stratum_counts(
        st, COLLAPSED_N, COLLAPSED_H, metrics="f1", rng=1, model="independent"
    )
    f = post.draws("f1").ravel()
    print(f"| independent | {(f >= target).mean():.3f} | {f.mean():.3f} | {f.std():.3f} | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--populations", default=",".join(POPULATIONS))
    ap.add_argument("--sims", type=int, default=20)
    args = ap.parse_args()
    if args.sims < 2:
        raise SystemExit(f"error: --sims {args.sims}: allowed: an integer >= 2")
    paths.LockStep = _Recorder
    t0 = time.perf_counter()
    print("# The pooled fit's importance ESS (512 nodes, the default integration) at simulated")
    print("# audits' counts, every family truth of the F1 claim and the real truth (issue 13)")
    for name in [n for n in args.populations.split(",") if n]:
        family_ess(name, args.sims)
    collapsed_fit()
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
