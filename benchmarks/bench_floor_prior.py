"""Prototype (issue 13): the predicted negatives' floor prior at truths where the scores overstate.

A classifier trained on enriched or rebalanced data and run on a needle population scores every
item's odds too high, often by orders of magnitude; its decisions can still be good. The pooled
model's floor (``Hyperpriors.floor_mean``: ``logit eps ~ N(m_0 - 3, 2^2)``, ``m_0`` the logit of
the predicted negatives' **mean score**) then puts a floor of ~1/20 of that inflated mean under
every predicted negative, which a thousand labels cannot refute on 10^5 items: the posterior
claims hundreds of missed positives and its 95 % *upper* bound on recall falls below the truth.

This benchmark runs the default audit (``n_strata="auto"``, ``posterior_variance``, F1, 1,000
labels in batches of 100; :func:`bayes_eval.simulate` with the pooled model) on a battery of
truths and refits each audit's final counts under floor-prior variants, so every variant sees
the same labels (the design's feedback through the variant is not simulated: a prototype):

* ``default``: the package's prior, ``N(m_0 - 3, 2^2)``;
* ``t-below``: the same normal above its centre, a Student-t(1) with the same curvature below it
  (the side intercepts' rule, :func:`bayes_eval.models._prior.intercept_log_density` with
  ``upper=False``): a floor orders of magnitude smaller is plausible a priori, so labels that
  find nothing in the bulk no longer meet a prior insisting on a floor;
* ``relative``: the centre moves with the curve: ``m_0 - 3`` plus the predicted negatives'
  intercept deviation from their anchor (:meth:`bayes_eval.models._prior.Prior.side_logits`),
  so where the labels show the negatives' scores overstate, the floor falls with the curve;
* ``relative t-below``: both;
* ``no floor``: ``floor_mean = -30``;
* ``follows positives`` / ``follows positives down``: the centre moved by the predicted
  *positives'* intercept deviation (all of it, or only where negative): the factor by which the
  labels show the scores overstate, where labels are many, applied to the negatives' mean score;
* ``t both sides``: a Student-t(1) of the same curvature on both sides of the centre (floors far
  above and far below it plausible);
* ``mixture 0.5`` / ``mixture 0.8`` (session 41): Bayesian model averaging over "a blind spot or
  not" — the package's floor with prior probability 0.5 / 0.8 and ``floor_mean=-30`` (in effect
  no floor) otherwise, the two fits weighted by their marginal likelihoods (each fit's
  importance estimate; the priors differ only in the floor's centre, so every other constant
  cancels) and joined into one fit of 1,024 nodes: where the labels can tell the two apart
  they decide, where they cannot (needles) the answer spans both.

Truths (two population seeds each, ``--reps`` audits per population): synthetic needles (100,000
items, 50 positives, separation 4) with calibrated scores and with every score's odds multiplied
by ``e^3`` and ``e^6`` (the threshold moved with them, so the predictions and the true metrics do
not change; "enriched"), the blind spot at the needle and at 2 %, 2 % flat and uninformative
scores, 20 % calibrated; and five real populations with positives their scores do not see
(``heldout_populations.py``: the widened topics at 2 % and as a needle, two real blind spots;
the same population for every seed). Columns: coverage of the one-sided 95 % lower bound and of
the 95 % upper bound of recall and F1 (``±`` the Monte Carlo s.e.), and the mean error of the
posterior mean of F1.

With ``--through-design V`` the audits are also run with variant ``V`` in force throughout
(the design's allocation rates come from the model under it, as they would if it were the
package's prior), rows marked ``(design too)``.

Usage: ``uv run python benchmarks/bench_floor_prior.py [--reps 100] [--cells 0 1 ...]
[--through-design "relative t-below"]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time

import numpy as np
from scipy import special

import bayes_eval as be
from bayes_eval import datasets
from bayes_eval.models import _prior, pooled
from bayes_eval.models.pooled import Hyperpriors
from bayes_eval.posterior import estimate_from_stratum_counts

_ORIGINAL = _prior.Prior.log_density


def _variant(tail: bool | str, relative: bool | str):
    """``Prior.log_density`` with the floor's normal replaced by the variant's density
    (``tail``: ``True`` a Student-t(1) below the centre, ``"both"`` on both sides; ``relative``:
    ``True`` follows the predicted negatives' intercept deviation, ``"positives"`` the predicted
    positives', ``"positives down"`` only where it is negative)."""

    def log_density(self, phi):
        out = _ORIGINAL(self, phi)
        if not self.anchored:
            return out
        fl, c, sf = phi[..., 4], self.mean[4], self.sd[4]
        out = out + 0.5 * ((fl - c) / sf) ** 2  # remove the package's floor term
        if relative:
            m0, m1 = self.side_logits(phi)
            z0, z1 = self.anchor[:, _prior._ZERO_SLOPE]
            if relative is True:
                c = c + (m0 - z0)
            elif relative == "positives":
                c = c + (m1 - z1)
            else:
                c = c + np.minimum(m1 - z1, 0.0)
        if tail:
            both = tail == "both"
            return out + _prior.intercept_log_density(fl - c, sf, 1.0, upper=both)
        return out - 0.5 * ((fl - c) / sf) ** 2

    return log_density


class _Mixture:
    """Model averaging over two floors: the package's prior with probability ``w`` and
    ``floor_mean=alt`` (in effect no floor) otherwise, the two fits weighted by their evidence
    (each fit's importance estimate of its marginal likelihood: the two priors differ only in the
    floor's centre, so every other constant cancels). The averaged fit is one
    :class:`~bayes_eval.models.pooled.PooledFit` whose nodes are both fits' nodes."""

    def __init__(self, w: float, alt: float = -30.0):
        self.w, self.alt = w, alt

    def fit(self, profile, n, h, *, hyperpriors=None, warn=True, init=None):
        hp = Hyperpriors() if hyperpriors is None else hyperpriors
        fits, logz = [], []
        for hp_j in (hp, dataclasses.replace(hp, floor_mean=self.alt)):
            rec = []

            def iw(lp, log_q, rec=rec):
                rec.append(special.logsumexp(lp - log_q, axis=-1))
                return _IW(lp, log_q)

            pooled.importance_weights = iw
            try:
                f = _FIT(profile, n, h, hyperpriors=hp_j, warn=warn, init=init)
            finally:
                pooled.importance_weights = _IW
            logz.append(rec[0] + 0.5 * np.linalg.slogdet(f.cov)[1])
            fits.append(f)
        lw = np.stack([np.log(self.w) + logz[0], np.log1p(-self.w) + logz[1]])
        pi = np.exp(lw - special.logsumexp(lw, axis=0))
        f0, f1 = fits
        weight = np.concatenate([pi[0][..., None] * f0.weight, pi[1][..., None] * f1.weight], -1)
        return dataclasses.replace(
            f0,
            phi=np.concatenate([f0.phi, f1.phi], axis=-2),
            weight=weight,
            node_weight=np.concatenate([f0.node_weight, f1.node_weight], axis=-3),
            a=np.concatenate([f0.a, f1.a], axis=-3),
            b=np.concatenate([f0.b, f1.b], axis=-3),
            ess=1.0 / (weight**2).sum(axis=-1),
        )


_FIT = pooled.fit_pooled
_IW = pooled.importance_weights

VARIANTS = {
    "default": None,
    "t-below": _variant(True, False),
    "relative": _variant(False, True),
    "relative t-below": _variant(True, True),
    "no floor": "no floor",
    "follows positives": _variant(False, "positives"),
    "follows positives down": _variant(False, "positives down"),
    "t both sides": _variant("both", False),
    "mixture 0.5": _Mixture(0.5),
    "mixture 0.8": _Mixture(0.8),
}


@contextlib.contextmanager
def _floor_prior(variant):
    if isinstance(variant, _Mixture):
        pooled.fit_pooled = variant.fit
        try:
            yield
        finally:
            pooled.fit_pooled = _FIT
        return
    if variant is None or isinstance(variant, str):
        yield
        return
    _prior.Prior.log_density = variant
    try:
        yield
    finally:
        _prior.Prior.log_density = _ORIGINAL


def enriched(lp: datasets.LabelledPopulation, shift: float) -> datasets.LabelledPopulation:
    """The same items, truth and decisions with every score's odds multiplied by ``e^shift``."""
    s = lp.population.scores
    logit = np.log(s) - np.log1p(-s)
    scores = 1.0 / (1.0 + np.exp(-(logit + shift)))
    thr = 1.0 / (1.0 + np.exp(-shift))  # the calibrated threshold 0.5, moved with the scores
    pop = be.Population(scores, threshold=thr)
    assert (pop.predictions == lp.population.predictions).all()
    return datasets.LabelledPopulation(
        f"{lp.name} enriched", f"{lp.description}; odds x e^{shift:g}", pop, lp.truth
    )


def cells():
    """``(label, factory(seed) -> LabelledPopulation)`` of the battery."""

    def needle(miscal="none", shift=0.0):
        def make(seed):
            lp = datasets.synthetic(
                100_000, prevalence=0.0005, separation=4.0, miscalibration=miscal, rng=seed
            )
            return enriched(lp, shift) if shift else lp

        return make

    def common(prev, miscal):
        return lambda seed: datasets.synthetic(
            100_000, prevalence=prev, separation=2.5, miscalibration=miscal, rng=seed
        )

    return [
        ("0.05% calibrated", needle()),
        ("0.05% enriched e^3", needle(shift=3.0)),
        ("0.05% enriched e^6", needle(shift=6.0)),
        ("0.05% blind spot", needle("blind_spot")),
        ("2% blind spot", common(0.02, "blind_spot")),
        ("2% flat", common(0.02, "flat")),
        ("2% uninformative", common(0.02, "uninformative")),
        ("20% calibrated", common(0.2, "none")),
        # real floors and blind spots (benchmarks/heldout_populations.py; a fixed population,
        # so every seed builds the same one and the audits differ by the simulation's seed)
        *((name, _real(name)) for name in REAL),
    ]


#: the real populations with positives the scores do not see, where the floor was measured
#: (``bench_heldout.py --widened`` / ``--blind``): the widened topics at 2 % and as a needle,
#: two real blind spots
REAL = (
    "2% widened diamonds",
    "2% widened flights",
    "needle widened diamonds",
    "blind diamonds",
    "blind insteval",
)


def _real(name):
    def make(seed):
        from heldout_populations import population

        return population(name)

    return make


def _final_counts(lp, st, reps, budget, batch, seed, variant=None):
    """Final ``n, h`` (reps, K) of the default audit, the design fed by the model under
    ``variant`` (``None``: the package's prior)."""
    with _floor_prior(variant):
        sim = be.simulate(
            lp,
            strata=st,
            designs="posterior_variance",
            metric="f1",
            budget=budget,
            batch_size=batch,
            n_reps=reps,
            rng=seed,
            trajectory=False,
        )["posterior_variance"]
    return sim["n"].values, sim["h"].values


def _cell_row(label, lp_seeds, reps, budget, batch, through_design=(), variants=None):
    names = [*(variants or VARIANTS), *(f"{v} (design too)" for v in through_design)]
    recs = {name: [] for name in names}
    for seed, lp in lp_seeds:
        st = be.stratify(lp.population, n_strata="auto")
        truth = lp.true_metrics()
        counts = _final_counts(lp, st, reps, budget, batch, seed)
        for name in names:
            base = name.removesuffix(" (design too)")
            variant = VARIANTS[base]
            n_all, h_all = (
                counts
                if base == name
                else _final_counts(lp, st, reps, budget, batch, seed, variant)
            )
            kw = {"hyperpriors": Hyperpriors(floor_mean=-30.0)} if variant == "no floor" else {}
            with _floor_prior(variant):
                for r in range(reps):
                    post = estimate_from_stratum_counts(
                        st, n_all[r], h_all[r], draws=4000, rng=r, metrics=("recall", "f1"), **kw
                    )
                    row = []
                    for m in ("recall", "f1"):
                        lo, up = post.lower_bound(m, 0.95), post.lower_bound(m, 0.05)
                        row += [truth[m] >= lo, truth[m] <= up]
                    row.append(post.mean("f1") - truth["f1"])
                    recs[name].append(row)
    for name, rows in recs.items():
        a = np.array(rows, dtype=float)
        cov = a[:, :4]
        p = cov.mean(axis=0)
        se = np.sqrt(p * (1 - p) / len(a))
        cells_ = " ".join(f"{pp:.3f}±{ss:.3f}" for pp, ss in zip(p, se, strict=True))
        print(f"{label:<24}{name:<32}{cells_}   {a[:, 4].mean():+.4f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=100, help="audits per population")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="population seeds")
    ap.add_argument("--cells", type=int, nargs="+", help="run only these cells (indices)")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), help="refit only under these priors"
    )
    ap.add_argument(
        "--through-design",
        nargs="+",
        default=[],
        # the mixtures replace only fit_pooled, not the look model's refits, so they cannot feed
        # the design faithfully
        choices=[
            v for v in VARIANTS if v not in ("default", "no floor", "mixture 0.5", "mixture 0.8")
        ],
        help="also run the audits with these variants feeding the design (not only the refit)",
    )
    args = ap.parse_args()
    battery = cells()
    if args.cells:
        bad = [i for i in args.cells if not 0 <= i < len(battery)]
        if bad:
            ap.error(f"--cells {bad[0]} is not a cell; allowed: 0 to {len(battery) - 1}")
        battery = [battery[i] for i in args.cells]
    print(
        f"# floor-prior variants on the default audit's final counts; {args.reps} audits x "
        f"{len(args.seeds)} populations per cell, {args.budget} labels in batches of "
        f"{args.batch}; coverage of the 95 % lower / upper bounds, mean F1 error"
    )
    print(
        f"{'cell':<24}{'floor prior':<32}{'recall lower':>13} {'recall upper':>13} "
        f"{'F1 lower':>13} {'F1 upper':>13}   F1 err"
    )
    for label, make in battery:
        t0 = time.perf_counter()
        pops = [(s, make(s)) for s in args.seeds]
        _cell_row(
            label, pops, args.reps, args.budget, args.batch, args.through_design, args.variants
        )
        print(f"# {label}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
