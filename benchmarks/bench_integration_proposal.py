"""Where should the pooled model's importance nodes sit? (issue 13: NUTS agreement, session 34)

The pooled fit integrates its 5-D hyperposterior by self-normalised importance sampling on 512
Student-t(5) nodes around the Laplace approximation widened 1.5x
(:mod:`bayes_eval.models._laplace`). Session 25 measured that this integration, not the model,
is what keeps the fit from agreeing with NUTS on the battery's 2 % calibrated case (false
negatives +54, z 3.4 against the reference integration), and session 26 that the best finer
rule (1,024 t(3) nodes widened 1.25) costs 1.9x the sequential calibration's CPU.

This benchmark measures, against the reference integration (``bench_pooled.REFERENCE``: 131,072
nodes widened 3, another scrambling), a **two-stage proposal**: a first set of nodes around the
Laplace approximation gives the weighted mean and covariance of the hyperposterior, and the
nodes that the fit keeps are placed around those instead. Variants (first stage + kept nodes,
widening of the second stage):

- ``laplace 512``: the model's rule (what every fit uses today);
- ``laplace 1024``: twice the nodes, the same centring (twice the kernel work);
- ``two-stage S1+S2 xW``: ``S1`` likelihood-only nodes at the Laplace approximation widened
  1.5, then ``S2`` kept nodes around their weighted moments widened ``W`` (kernel work
  ``S1 + S2`` node evaluations; the model's rule is 512).

For each case (counts fixed: ``min(per, N_k)`` labels per stratum with hypergeometric
positives, as ``bench_pooled.py --parts nuts``) it prints, for the false negatives FN and true
positives TP, the mean, sd, 5 % and 95 % quantiles of 200,000 joint draws of every variant and
their distance to the reference in reference sds (``z`` of the mean on the draws' noise).

Usage: ``uv run python benchmarks/bench_integration_proposal.py [--cases I ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import bayes_eval as be
from bayes_eval.models import _hyperposterior, _laplace
from bayes_eval.models import pooled as pooled_mod
from bayes_eval.models._laplace import importance_nodes, importance_weights
from bayes_eval.models._profile import profile_of_strata
from bayes_eval.models.pooled import draw_theta, fit_pooled

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pooled import REFERENCE, fixed_counts, population
from heldout_populations import population as heldout

#: (label, synthetic prevalence or None for a held-out population, miscalibration or held-out
#: name, strata per side, labels per stratum)
CASES = (
    ("0.02 none K=10", 0.02, "none", 5, 30),
    ("0.2 nonmonotone K=10", 0.2, "nonmonotone", 5, 30),
    ("needle insteval K=20", None, "needle insteval", 10, 30),
    ("2% widened diamonds K=20", None, "2% widened diamonds", 10, 30),
    ("0.02 shifted K=20", 0.02, "shifted", 10, 20),
    ("0.02 none K=20 per 50", 0.02, "none", 10, 50),
    ("0.0005 none K=10", 0.0005, "none", 5, 40),
    ("needle diamonds K=20", None, "needle diamonds", 10, 30),
    ("chem97 K=20", None, "chem97", 10, 30),
)


def _moments(w: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = (w[..., None] * phi).sum(axis=-2)
    dev = phi - mean[..., None, :]
    cov = np.einsum("...s,...si,...sj->...ij", w, dev, dev)
    return mean, cov + 1e-9 * np.eye(phi.shape[-1])


@contextmanager
def two_stage(first: int, kept: int, widen: float):
    """Fits within the block place their kept nodes around the weighted moments of a first
    stage of ``first`` nodes at the Laplace approximation (widened 1.5)."""
    original = pooled_mod.hyper_stage

    def staged(profile, n, h, hp, init=None):
        with _laplace.integration(first, 1.5):
            st = original(profile, n, h, hp, init)
            lp, _, _ = _hyperposterior.log_post(
                st.phi, profile, st.layout, *st.rows, st.prior, hp.nugget_sd
            )
            w, _ = importance_weights(lp, st.log_q)
        mean, cov = _moments(w, st.phi)
        with _laplace.integration(kept, widen):
            phi, log_q = importance_nodes(mean, cov)
        return dataclasses.replace(st, phi=phi, log_q=log_q)

    pooled_mod.hyper_stage = staged
    try:
        yield
    finally:
        pooled_mod.hyper_stage = original


@contextmanager
def laplace(nodes: int):
    with _laplace.integration(nodes, _laplace.SCALE):
        yield


VARIANTS = (
    ("laplace 512", lambda: laplace(512), 512),
    ("laplace 1024", lambda: laplace(1024), 1024),
    ("two-stage 128+512 x1.5", lambda: two_stage(128, 512, 1.5), 640),
    ("two-stage 256+256 x1.5", lambda: two_stage(256, 256, 1.5), 512),
    ("two-stage 256+256 x1.25", lambda: two_stage(256, 256, 1.25), 512),
    ("two-stage 512+512 x1.5", lambda: two_stage(512, 512, 1.5), 1024),
)


@functools.cache
def _built(prev, name, per_side):
    lp = population(prev, name) if prev is not None else heldout(name)
    strata = be.stratify(lp.population, method="equal_size", n_strata=per_side)
    return lp, strata, profile_of_strata(strata)


def _case(label, prev, name, per_side, per, seed=5):
    lp, strata, prof = _built(prev, name, per_side)
    n, h, pos = fixed_counts(strata, lp.truth, per, np.random.default_rng(seed))
    return prof, strata.sizes, strata.predicted, n, h, pos


def _summ(th, sizes, n, h, sel, gen):
    p = (gen.binomial(sizes - n, th) + h)[..., sel].sum(axis=-1)
    return p.mean(), p.std(), np.quantile(p, 0.05), np.quantile(p, 0.95), p.size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, nargs="*", default=None)
    ap.add_argument("--draws", type=int, default=200_000)
    ap.add_argument(
        "--seeds", type=int, nargs="+", default=[5], help="seeds of the counts of every case"
    )
    args = ap.parse_args()
    cases = CASES if args.cases is None else [CASES[i] for i in args.cases]
    print(__doc__.split("\n\n")[0])
    print(
        f"reference: {REFERENCE[0]:,} nodes widened {REFERENCE[1]:g}; {args.draws:,} draws per "
        "variant; z = (mean - ref mean) / draw noise; dq05, dq95 = quantile - ref quantile in "
        "ref sds; ms = fit time"
    )
    worst: dict[str, list[float]] = {v[0]: [] for v in VARIANTS}
    for case, seed in [(c, s) for c in cases for s in args.seeds]:
        label = f"{case[0]} seed {seed}"
        prof, sizes, pred, n, h, pos = _case(*case, seed=seed)
        gen = np.random.default_rng(11)
        with _laplace.integration(*REFERENCE):
            th_ref = draw_theta(fit_pooled(prof, n, h, warn=False), args.draws, gen)
        ref = {q: _summ(th_ref, sizes, n, h, sel, gen) for q, sel in (("FN", ~pred), ("TP", pred))}
        truth_fn = int(pos[~pred].sum())
        print(f"\n## {label}  (true FN {truth_fn}, TP {int(pos[pred].sum())}; labels {n.sum()})")
        print(
            f"{'variant':<26}{'q':<4}{'mean':>9}{'sd':>8}{'q05':>9}{'q95':>9}{'z':>8}"
            f"{'dq05':>7}{'dq95':>7}{'ESS':>7}{'ms':>7}"
        )
        m, s, q05, q95, _ = ref["FN"]
        print(f"{'reference':<26}{'FN':<4}{m:>9.1f}{s:>8.1f}{q05:>9.1f}{q95:>9.1f}")
        m, s, q05, q95, _ = ref["TP"]
        print(f"{'reference':<26}{'TP':<4}{m:>9.1f}{s:>8.1f}{q05:>9.1f}{q95:>9.1f}")
        for vname, ctx, _cost in VARIANTS:
            with ctx():
                fit_pooled(prof, n, h, warn=False)  # warm (designs, compilation)
                t0 = time.perf_counter()
                fit = fit_pooled(prof, n, h, warn=False)
                ms = 1e3 * (time.perf_counter() - t0)
            th = draw_theta(fit, args.draws, gen)
            ess = float(np.asarray(fit.ess).ravel()[0])
            for q, sel in (("FN", ~pred), ("TP", pred)):
                m, s, q05, q95, size = _summ(th, sizes, n, h, sel, gen)
                rm, rs, r05, r95, rsize = ref[q]
                z = (m - rm) / np.sqrt(s**2 / size + rs**2 / rsize)
                d05, d95 = (q05 - r05) / rs, (q95 - r95) / rs
                if rs > 0:  # a census side has no error to measure
                    worst[vname].append(max(abs(d05), abs(d95), abs(m - rm) / rs))
                print(
                    f"{vname:<26}{q:<4}{m:>9.1f}{s:>8.1f}{q05:>9.1f}{q95:>9.1f}{z:>8.2f}"
                    f"{d05:>7.3f}{d95:>7.3f}{ess:>7.1f}{ms:>7.1f}",
                    flush=True,
                )
    print(
        "\n## summary: per case and quantity the largest |error| of the mean, q05 and q95 in "
        "reference sds; over cases and FN/TP its max, mean and median"
    )
    for vname, _ctx, cost in VARIANTS:
        e = np.asarray(worst[vname])
        print(
            f"{vname:<26} node evaluations {cost:>5}  max {e.max():.3f}  mean {e.mean():.3f}  "
            f"median {np.median(e):.3f}"
        )


if __name__ == "__main__":
    main()
