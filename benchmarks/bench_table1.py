"""Bennett & Carvalho's Table 1 for precision, with the Bayesian design and the Neyman oracle.

For each population (its predicted positives; precision is their positive rate), each
stratification ({equal_width, equal_size} x K in {4, 10}) and each bound delta in {0.01, 0.02,
0.05} at alpha = 0.05, many independent sequential audits run until their stopping rule holds for
T = 2 consecutive rounds; every round labels "two samples per bin" (2K; Random, one bin, 2), as in
the paper (``../shared/seeds/000_51972d8d13fae9c1.txt``, section 6).

Rows
    ``Random`` (one bin), ``{equal, perc} x {uni, pps, opt}`` (designs ``equal``, ``proportional``,
    ``online_optimal`` = Figure 1) -- all stopped by Bennett & Carvalho's rule: the normal interval
    ``z_{1-alpha/2} sqrt(var(p_hat)) <= delta`` with m-estimate-smoothed stratum rates and
    ``var = sum W_k^2 (1 - n_k/N_k) p_k (1-p_k) / max(n_k + m_k - 1, 1)`` (the paper's
    ``n_k - 1`` with the m-estimate's ``m_k`` virtual examples added, our reading, so that a
    stratum with fewer than two labels does not block the rule); ``post-var`` (ours,
    ``posterior_variance``), ``ney-orc`` (``neyman_oracle`` with the true rates) and
    ``Random-B`` -- stopped by the Bayesian rule: the posterior (Jeffreys priors, finite
    population) of precision has ``z_{1-alpha/2} * sd <= delta`` (posterior mean and sd exact;
    normal shape assumed for the stopping decision only).
Columns
    ``InConf``: share of audits whose estimate is within +-delta of the true precision;
    ``labels``: mean labels used (its Monte Carlo standard error in brackets); ``%Change``: vs
    Random; ``%Oracle``: vs the oracle's labels on the same strata; ``Savings``: Random's labels
    minus the row's; ``orc%sv``: the oracle's saving over Random's oracle (both from the normal
    interval with the true rates, Neyman allocation with the finite-population factor:
    ``n = (sum W_k S_k)^2 / ((delta/z)^2 + sum W_k S_k^2 / N)``), printed beside every row.

Run: ``uv run python benchmarks/bench_table1.py [reps]`` (default 500 replications).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy import stats

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval.designs import DesignState, OnlineOptimal, make_design, metric_gradient

ALPHA = 0.05
DELTAS = (0.01, 0.02, 0.05)
KS = (4, 10)
T_ROUNDS = 2


# ---------------------------------------------------------------------- vectorised audits
def _allocate(design, state: DesignState, batch: int, rng: np.random.Generator) -> np.ndarray:
    if hasattr(design, "allocate_many"):
        return design.allocate_many(state, batch, rng)
    out = np.empty(state.n.shape, dtype=np.int64)
    for r in range(state.n.shape[0]):
        one = DesignState(
            sizes=state.sizes,
            predicted=state.predicted,
            n=state.n[r],
            h=state.h[r],
            available=state.available[r],
            prior_a=state.prior_a,
            prior_b=state.prior_b,
            metric=state.metric,
            round=state.round,
            finite_population=True,
        )
        out[r] = design.allocate(one, batch, rng)
    return out


def bennett_rule(sizes, n, h):
    """Estimate and its normal-interval standard error, Bennett & Carvalho style."""
    p = OnlineOptimal.smoothed_rates(n, h)
    m = np.where(n > 0, 1.0 / np.sqrt(np.maximum(n, 1)), 2.0)
    w = sizes / sizes.sum()
    est = (w * p).sum(axis=1)
    fpc = 1.0 - n / sizes
    # n_k - 1 -> n_k + m - 1 (at least 1): the m-estimate's virtual examples count, so a stratum
    # with 0 or 1 labels contributes its prior variance instead of blocking the rule forever
    v = fpc * p * (1 - p) / np.maximum(n + m - 1.0, 1.0)
    return est, np.sqrt((w * w * v).sum(axis=1))


def bayes_rule(sizes, predicted, n, h, metric="precision", a0=0.5, b0=0.5):
    """Posterior mean and sd of the metric (finite population; delta method for non-linear)."""
    a = a0 + h
    b = b0 + n - h
    s = a + b
    mu = a / s
    rem = sizes - n
    mean_pos = h + rem * mu
    var_pos = rem * mu * (1 - mu) * (s + rem) / (s + 1)
    g = metric_gradient(metric, sizes, predicted, mean_pos)
    pos = mean_pos
    tp = pos[:, predicted].sum(axis=1)
    fn = pos[:, ~predicted].sum(axis=1)
    fp = sizes[predicted].sum() - tp
    tn = sizes[~predicted].sum() - fn
    est = be.METRICS[metric].func(tp, fp, fn, tn)
    return est, np.sqrt((g * g * var_pos).sum(axis=1))


def run_audits(
    sizes, predicted, positives, design, *, rule, delta, reps, batch, rng, metric="precision"
):
    """Replicated sequential audits in lock-step; returns labels used and estimates."""
    sizes = np.asarray(sizes, dtype=np.int64)
    k = sizes.shape[0]
    z = stats.norm.ppf(1 - ALPHA / 2)
    n = np.zeros((reps, k), dtype=np.int64)
    h = np.zeros((reps, k), dtype=np.int64)
    consec = np.zeros(reps, dtype=np.int64)
    active = np.ones(reps, dtype=bool)
    labels = np.zeros(reps, dtype=np.int64)
    est_out = np.full(reps, np.nan)
    total = int(sizes.sum())
    pa, pb = np.full(k, 0.5), np.full(k, 0.5)
    rnd = 0
    while active.any():
        rows = np.flatnonzero(active)
        used = int(n[rows[0]].sum())
        m = min(batch, total - used)
        st = DesignState(
            sizes=sizes,
            predicted=predicted,
            n=n[rows],
            h=h[rows],
            available=sizes - n[rows],
            prior_a=pa,
            prior_b=pb,
            metric=metric,
            round=rnd,
            finite_population=True,
        )
        c = _allocate(design, st, m, rng)
        good = positives - h[rows]
        bad = (sizes - positives) - (n[rows] - h[rows])
        h[rows] += rng.hypergeometric(good, bad, c)
        n[rows] += c
        if rule == "bennett":
            est, se = bennett_rule(sizes, n[rows], h[rows])
        else:
            est, se = bayes_rule(sizes, predicted, n[rows], h[rows], metric)
        meets = z * se <= delta
        consec[rows] = np.where(meets, consec[rows] + 1, 0)
        done = (consec[rows] >= T_ROUNDS) | (n[rows].sum(axis=1) >= total)
        fin = rows[done]
        labels[fin] = n[fin].sum(axis=1)
        est_out[fin] = est[done]
        active[fin] = False
        rnd += 1
    return labels, est_out


def oracle_labels(sizes, positives, delta):
    """Labels the normal interval needs with the true rates and Neyman allocation (with fpc)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    p = positives / sizes
    big_n = sizes.sum()
    w = sizes / big_n
    s2 = np.where(sizes > 1, sizes / np.maximum(sizes - 1, 1) * p * (1 - p), 0.0)
    v = (delta / stats.norm.ppf(1 - ALPHA / 2)) ** 2
    return float((w * np.sqrt(s2)).sum() ** 2 / (v + (w * s2).sum() / big_n))


# ---------------------------------------------------------------------- populations
def populations():
    out = []
    for name in ("movies_drama", "mplsstops"):
        lp = datasets.load(name)
        out.append(
            (
                name,
                lp.population.scores,
                lp.population.predictions,
                lp.truth,
                lp.population.threshold,
            )
        )
    lp = datasets.synthetic(400_000, prevalence=0.1, separation=2.5, rng=1)
    out.append(
        (
            "synthetic",
            lp.population.scores,
            lp.population.predictions,
            lp.truth,
            lp.population.threshold,
        )
    )
    return out


def main(reps: int = 500) -> None:
    t0 = time.time()
    rng = np.random.default_rng(20261122)
    print(
        f"# Bennett & Carvalho Table 1 layout, precision, alpha={ALPHA}, T={T_ROUNDS}, "
        f"{reps} replications per row"
    )
    print(
        "# InConf MC s.e. ~ sqrt(0.95*0.05/reps) = "
        f"{np.sqrt(0.95 * 0.05 / reps):.3f}; labels: mean (s.e.)"
    )
    summary = []
    for pname, scores, pred, truth, thr in populations():
        s_pos = scores[pred]
        y_pos = truth[pred]
        pop = be.Population(s_pos, threshold=thr)
        prec = y_pos.mean()
        print(f"\n## {pname}: {s_pos.size:,} predicted positives, precision {prec:.4f}")
        for delta in DELTAS:
            n_rand_orc = oracle_labels(np.array([s_pos.size]), np.array([y_pos.sum()]), delta)
            one = np.array([s_pos.size])
            one_pos = np.array([int(y_pos.sum())])
            lab_r, est_r = run_audits(
                one,
                np.array([True]),
                one_pos,
                make_design("proportional"),
                rule="bennett",
                delta=delta,
                reps=reps,
                batch=2,
                rng=rng,
            )
            lab_rb, est_rb = run_audits(
                one,
                np.array([True]),
                one_pos,
                make_design("posterior_variance"),
                rule="bayes",
                delta=delta,
                reps=reps,
                batch=2,
                rng=rng,
            )
            base = lab_r.mean()
            print(f"\n### {pname}, delta={delta}  (Random oracle {n_rand_orc:.0f} labels)")
            print(
                f"{'row':<22}{'InConf':>7}{'labels':>16}{'%Change':>9}{'%Oracle':>9}"
                f"{'Savings':>9}{'oracle':>8}{'orc%sv':>8}"
            )

            def line(label, lab, est, orc, orc_sv, prec=prec, delta=delta, base=base):
                inconf = np.mean(np.abs(est - prec) <= delta)
                mean = lab.mean()
                se = lab.std(ddof=1) / np.sqrt(lab.size)
                ch = 100 * (mean / base - 1)
                po = 100 * (mean / orc - 1)
                print(
                    f"{label:<22}{inconf:7.3f}{mean:10.0f} ({se:3.0f}){ch:9.1f}{po:9.1f}"
                    f"{base - mean:9.0f}{orc:8.0f}{orc_sv:8.1f}"
                )
                return inconf, mean, ch, po

            line("Random", lab_r, est_r, n_rand_orc, 0.0)
            line("Random-B (Bayes stop)", lab_rb, est_rb, n_rand_orc, 0.0)
            for k in KS:
                for method, short in (("equal_width", "equal"), ("equal_size", "perc")):
                    strata = be.stratify(pop, method=method, n_strata=k)
                    a = np.asarray(strata.assignment, dtype=np.int64)
                    sizes = strata.sizes
                    positives = np.bincount(a, weights=y_pos, minlength=strata.n_strata)
                    positives = positives.astype(np.int64)
                    predicted = strata.predicted
                    orc = oracle_labels(sizes, positives, delta)
                    orc_sv = 100 * (1 - orc / n_rand_orc)
                    kk = strata.n_strata
                    for dname, dshort, rule in (
                        ("equal", "uni", "bennett"),
                        ("proportional", "pps", "bennett"),
                        ("online_optimal", "opt", "bennett"),
                        ("posterior_variance", "post-var", "bayes"),
                        ("neyman_oracle", "ney-orc", "bayes"),
                    ):
                        opts = {"rates": positives / sizes} if dname == "neyman_oracle" else {}
                        design = make_design(dname, **opts)
                        lab, est = run_audits(
                            sizes,
                            predicted,
                            positives,
                            design,
                            rule=rule,
                            delta=delta,
                            reps=reps,
                            batch=2 * kk,
                            rng=rng,
                        )
                        label = f"K={kk:<2} {short},{dshort}"
                        inconf, mean, ch, po = line(label, lab, est, orc, orc_sv)
                        summary.append(
                            (pname, delta, kk, short, dshort, inconf, mean, ch, po, orc_sv)
                        )
            sys.stdout.flush()
    se_ic = np.sqrt(0.95 * 0.05 / reps)
    neyorc = {r[:4]: r[6] for r in summary if r[4] == "ney-orc"}
    opt = {r[:4]: r[6] for r in summary if r[4] == "opt"}
    print("\n## Targets for post-var (ours)")
    print(
        "labels: %Oracle <= +5 against the analytic Neyman oracle on the same strata (Bennett's\n"
        "definition; it ignores the T=2 rounds and the batch granularity that every simulated row\n"
        "pays), %NeyOrc against the simulated oracle design (same strata, batches and stop rule);\n"
        f"InConf >= 0.94 (MC s.e. {se_ic:.3f}: 'InConf~' = below 0.94 but within 2 s.e.);\n"
        "saving: where orc%sv >= 20, post-var saves >= 17.3% over Random. %vsOpt: post-var\n"
        "labels against Bennett & Carvalho's online_optimal on the same strata."
    )
    print(
        f"{'population':<14}{'delta':>6}{'K':>4}{'strata':>7}{'InConf':>8}{'%Oracle':>9}"
        f"{'%NeyOrc':>9}{'%vsOpt':>8}{'%Change':>9}{'orc%sv':>8}  verdict"
    )
    for row in summary:
        pname, delta, kk, short, dshort, inconf, mean, ch, po, orc_sv = row
        if dshort != "post-var":
            continue
        pn = 100 * (mean / neyorc[row[:4]] - 1)
        pvo = 100 * (mean / opt[row[:4]] - 1)
        ok1 = po <= 5.0
        ok1b = pn <= 5.0
        ok2 = inconf >= 0.94
        ok2b = inconf >= 0.94 - 2 * se_ic
        ok3 = (orc_sv < 20) or (-ch >= 17.3)
        misses = []
        if not ok1:
            misses.append("labels(analytic)" + ("" if ok1b else "+labels(sim)"))
        if not ok2:
            misses.append("InConf~" if ok2b else "InConf")
        if not ok3:
            misses.append("saving")
        verdict = "ok" if not misses else "MISS: " + ", ".join(misses)
        print(
            f"{pname:<14}{delta:6.2f}{kk:4d}{short:>7}{inconf:8.3f}{po:9.1f}{pn:9.1f}{pvo:8.1f}"
            f"{ch:9.1f}{orc_sv:8.1f}  {verdict}"
        )
    print(f"\n# total time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
