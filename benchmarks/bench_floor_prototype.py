"""Prototype, not package code: the pooled model's calibration curve with a **floor** on the rate
(session 21; the blind-spot miss of ``bench_pooled.py --parts blind``).

The curve of :mod:`bayes_eval.models.pooled` becomes ``eps + (1 - eps) expit(eta)`` on every
item, with a fifth hyperparameter ``phi_5 = logit(eps)`` integrated like the other four (Newton
and the 512 Sobol' importance nodes of :mod:`bayes_eval.models._laplace`, which take any
dimension) under the prior ``phi_5 - logit(m_0) ~ N(mu, sd^2)``, ``m_0`` the predicted negatives'
mean score: a floor a priori a small fraction of what the scores already put on that side. The
stratum's curve rate is the mean over its items, ``eps + (1 - eps) mean expit(eta)``, so the
floor enters through :func:`bayes_eval.models._cells.curve_logit` alone (the sceptical lean and
the design's allocation rates read the same curve). It runs on the numpy engine (the compiled
kernel has four hyperparameters), monkeypatching the package for this process only.

Session 22 adds a second prototype, ``--cell-df NU``: every cell's logit deviation gets a
Student-t prior (NU degrees of freedom, the same scale) instead of the normal one
(:func:`install_cell_tails`), so a large deviation the labels support is shrunk less.

Usage: ``uv run python benchmarks/bench_floor_prototype.py REPS POPS [--mu -3] [--sd 2] [--off]
[--cell-df 4] [--negative-only]`` with POPS a comma list of ``blind2 blind20 cal2 cal20 flat2
nonmono2 needle`` (the battery's populations: ``bench_pooled.population``; ``blind*`` is
``miscalibration="blind_spot"``) or held-out names of ``bench_heldout.py`` (``"blind flights"``,
``"2% widened diamonds"``, audited as that benchmark does).
Prints the coverage of the 95 % lower bounds and the F1 RMSE at 1,000 labels of the battery's
audits (10 strata per side, ``"auto"`` for the needle, seed 7), as ``bench_pooled.py`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from scipy.special import expit, logit

sys.path.insert(0, str(Path(__file__).parent))
import bench_pooled as bp

from bayes_eval.models import _cells
from bayes_eval.models import _hyperposterior as hyp
from bayes_eval.models._prior import _ZERO_SLOPE, Prior

POPULATIONS = {
    "blind2": (0.02, "blind_spot"),
    "blind20": (0.2, "blind_spot"),
    "cal2": (0.02, "none"),
    "cal20": (0.2, "none"),
    "flat2": (0.02, "flat"),
    "nonmono2": (0.02, "nonmonotone"),
    "needle": (0.0005, "none"),
}


def install_floor(mu: float, sd: float, negative_only: bool = False) -> None:
    """Give the pooled curve a floor ``eps`` (``phi[..., 4]``), for this process; with
    ``negative_only`` on the predicted negatives' strata alone (session 23: a floor on the
    predicted positives raises a weak classifier's tiny rates there and breaks precision)."""
    curve4 = _cells.curve_logit
    prior_of4 = hyp.prior_of

    def curve_logit(phi, x, weight, side, center):
        eb = curve4(phi[..., :4], x, weight, side, center)
        if phi.shape[-1] == 4:
            return eb
        eps = expit(phi[..., 4])[..., None]
        floored = logit(np.clip(eps + (1.0 - eps) * expit(eb), 1e-300, 1.0 - 1e-16))
        return np.where(side == 0, floored, eb) if negative_only else floored

    @dataclasses.dataclass(frozen=True, slots=True)
    class FloorPrior(Prior):
        def start(self):
            return np.append(Prior.start(self), self.anchor[0, _ZERO_SLOPE] + mu)

        def log_density(self, phi):
            out = Prior.log_density(self, phi[..., :4])
            return out - 0.5 * ((phi[..., 4] - self.anchor[0, _ZERO_SLOPE] - mu) / sd) ** 2

    def prior_of(profile, hp):
        p = prior_of4(profile, hp)
        return FloorPrior(np.append(p.mean, mu), np.append(p.sd, sd), p.anchored, p.anchor, p.df)

    _cells.curve_logit = curve_logit
    hyp.curve_logit = curve_logit
    hyp.prior_of = prior_of
    hyp.D = 5


def install_cell_tails(df: float) -> None:
    """Give every cell deviation a Student-t prior with ``df`` degrees of freedom (scale the
    cell's sd) instead of the normal, for this process: a large deviation that the labels
    support (a pocket of positives under low scores) is shrunk less. The quadrature nodes are
    still placed by Newton (the t prior's gradient and its expected information); the integral
    uses the exact t log density."""
    import math

    from scipy.special import expit as _expit
    from scipy.special import gammaln

    const = gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * math.log(df * math.pi)

    def cell_integrals(ebar, sigma, n, h, layout, nugget, *, keep=False, nodes=_cells.QUAD_NODES):
        gh_x, gh_logw = _cells.gauss_hermite_rule(nodes)
        oh, cell = layout.onehot, layout.cell
        s2 = sigma * sigma
        nug2 = nugget * nugget
        d = np.zeros(sigma.shape)
        for _ in range(_cells._NEWTON_STEPS + 1):
            mu = _expit(ebar + d[..., cell])
            pq = mu * (1.0 - mu)
            over = 1.0 + np.maximum(n - 1.0, 0.0) * nug2 * pq / (1.0 + nug2 * pq)
            scale = df * s2 + d * d
            info = (n * pq / over) @ oh + (df + 1.0) / scale
            grad = ((h - n * mu) / over) @ oh - (df + 1.0) * d / scale
            d = d + np.clip(grad / info, -3.0, 3.0)
        sd = 1.0 / np.sqrt(info)
        dq = d[..., None, :] + (math.sqrt(2.0) * gh_x)[:, None] * sd[..., None, :]
        mu = _expit(ebar[..., None, :] + dq[..., cell])
        a, b = _cells.residual_beta(mu, nugget)
        nq, hq = n[..., None, :], h[..., None, :]
        ll = _cells.log_rising(a, hq) + _cells.log_rising(b, nq - hq) - _cells.log_rising(a + b, nq)
        log_prior = (
            const
            - np.log(sigma)[..., None, :]
            - 0.5 * (df + 1.0) * np.log1p(dq * dq / (df * s2[..., None, :]))
        )
        terms = (ll @ oh) + log_prior + gh_logw[:, None] + np.log(sd)[..., None, :]
        top = terms.max(axis=-2, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.exp(terms - top)
        tot = e.sum(axis=-2, keepdims=True)
        log_lik = (np.log(tot) + top)[..., 0, :].sum(axis=-1)
        log_lik = np.where(np.isfinite(log_lik), log_lik, -np.inf)
        if not keep:
            return _cells.CellIntegrals(log_lik, None, None, None)
        return _cells.CellIntegrals(log_lik, e / tot, a, b)

    _cells.cell_integrals = cell_integrals
    hyp.cell_integrals = cell_integrals


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("reps", type=int)
    ap.add_argument("pops")
    ap.add_argument("--mu", type=float, default=-3.0, help="prior mean of logit(eps / m_0)")
    ap.add_argument("--sd", type=float, default=2.0, help="its prior sd")
    ap.add_argument("--off", action="store_true", help="no floor (the model, numpy engine)")
    ap.add_argument(
        "--negative-only", action="store_true", help="the floor on the predicted negatives only"
    )
    ap.add_argument(
        "--cell-df",
        type=float,
        default=0.0,
        help="Student-t cell deviations with these degrees of freedom (0: normal, the model's)",
    )
    args = ap.parse_args()
    if not args.off:
        install_floor(args.mu, args.sd, negative_only=args.negative_only)
    if args.cell_df > 0:
        install_cell_tails(args.cell_df)
    hyp._ENGINE = "numpy"
    tag = "off" if args.off else f"mu {args.mu:g} sd {args.sd:g}"
    if args.negative_only and not args.off:
        tag += " neg"
    if args.cell_df > 0:
        tag += f" t{args.cell_df:g}"
    for name in args.pops.split(","):
        t0 = time.perf_counter()
        if name in POPULATIONS:
            prev, miscal = POPULATIONS[name]
            lp = bp.population(prev, miscal)
            ns = "auto" if name == "needle" else 10
            res, k, _ = bp.run_audits(lp, ns, (1000,), args.reps, seed=7)
        else:  # a held-out real population, audited as bench_heldout.py does
            from bench_heldout import population

            try:
                lp = population(name)
            except ValueError as exc:
                raise SystemExit(str(exc)) from None
            seed = zlib.crc32(lp.name.encode())
            res, k, _ = bp.run_audits(lp, "auto", (1000,), args.reps, seed=seed, batch=100)
        tm = lp.true_metrics()["f1"]
        cov, f1, _ = res[1000]
        r, se = bp._rmse(f1, tm)
        cells = " ".join(bp._coverage_cells(cov))
        print(
            f"{name:<9} floor {tag:<14} K={k:<3} cover p/r/f1 {cells}  F1 RMSE {r:.4f}±{se:.4f} "
            f"bias {np.nanmean(f1) - tm:+.4f} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
