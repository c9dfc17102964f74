"""The pooled look model's tail near a census against the pooled audit's own draws (issue 14).

The sequential correction simulates the pooled model's P(metric >= target) through its look
model; where strata come near a census the look model sums them exactly at 64 resampled
hyper-nodes (:mod:`bayes_eval.models._node_sample`). This prints, at loans_grade_a-like counts
(7,000 items, 5 equal-size strata per side; four predicted-positive strata near a census, a
fifth of 476 items with none positive among 117 labelled), the risk ``P(TP < k)`` from the
hyper-nodes and from 1,000,000 posterior draws of the pooled audit, for ``k`` across the tail,
and the nodes' numbers with calibration version 18's rule (no concentrated stratum at the
nodes; node Betas through priors floored at 1e-3) in the same run.

Usage: ``uv run python benchmarks/bench_node_tail.py`` (from the repository root).
"""

from __future__ import annotations

import numpy as np

import bayes_eval as be
from bayes_eval import _lattice
from bayes_eval.models import _look, _node_sample
from bayes_eval.models._profile import score_profile_of
from bayes_eval.population import Population
from bayes_eval.posterior import estimate_from_stratum_counts
from bayes_eval.sequential._linear import linear_form

DRAWS = 1_000_000


def _floored_sample_nodes(weight, lin, mom, n, h, cols, sizes, w, nodes=64):
    """Version 18's node sample: the priors backed out of each node's Beta floored at 1e-3."""
    s = _node_sample.sample_nodes(weight, lin, mom, n, h, cols, sizes, w, nodes)
    nc, hc = s.n[:, None, :], s.h[:, None, :]
    big_a, big_b = s.prior_a + hc, s.prior_b + nc - hc
    pa, pb = np.maximum(big_a - hc, 1e-3), np.maximum(big_b - (nc - hc), 1e-3)
    cum = _node_sample._positive_cumulants(pa, pb, nc, hc, np.asarray(sizes)[cols])
    old = _node_sample._positive_cumulants(s.prior_a, s.prior_b, nc, hc, np.asarray(sizes)[cols])
    wc = np.asarray(w, dtype=np.float64)[cols]
    k = [
        getattr(s, f) + (wc ** (j + 1) * (po - pn)).sum(axis=-1)
        for j, (f, po, pn) in enumerate(
            zip(
                ("k1", "k2", "k3"),
                (old.mean, old.var, old.k3),
                (cum.mean, cum.var, cum.k3),
                strict=True,
            )
        )
    ]
    return _node_sample.NodeSample(s.cols, *k, pa, pb, s.n, s.h)


def main() -> None:
    rng = np.random.default_rng(3)
    scores = np.concatenate([rng.uniform(0.0, 0.5, 4621), rng.uniform(0.5, 1.0, 2379)])
    pop = Population(scores, predictions=scores >= 0.5)
    st = be.stratify(pop, method="equal_size", n_strata=5, rng=0)
    sizes, pred = np.asarray(st.sizes), np.asarray(st.predicted)
    n = np.array([[0, 0, 0, 0, 0, 117, 457, 476, 451, 459]])
    h = np.array([[0, 0, 0, 0, 0, 0, 297, 308, 302, 296]])
    zero = (np.zeros(1),) * 3
    post = estimate_from_stratum_counts(
        st, n[0], h[0], draws=DRAWS, rng=0, metrics=("precision",), model="pooled"
    )
    print(f"# sizes {sizes.tolist()}; n {n[0].tolist()}; h {h[0].tolist()}; {DRAWS:,} draws")
    print("| k | P(TP < k), draws (s.e.) | nodes, version 19 | ratio | nodes, version 18 | ratio |")
    print("|---|---|---|---|---|---|")
    prof = score_profile_of(st)
    cols = np.flatnonzero(pred)
    for k in range(1222, 1240, 2):
        t = k / 2379 - 1e-9  # precision >= t  <=>  TP >= k
        w, c = linear_form("precision", t, pred, sizes)
        args = dict(sizes=sizes, w=w)
        ref = _look.look_refit(prof, n, h, w, cols=cols)
        new = 1 - ref.sample.prob(n, h, zero, c, prior_a=ref.prior_a, prior_b=ref.prior_b, **args)
        real = _look.sample_nodes
        _look.sample_nodes = _floored_sample_nodes
        keep = _lattice.concentrated_strata
        _lattice.concentrated_strata = lambda r, *a, **kw: np.zeros(r.shape, dtype=bool)
        try:
            ref18 = _look.look_refit(prof, n, h, w, cols=cols)
            old = 1 - ref18.sample.prob(
                n, h, zero, c, prior_a=ref18.prior_a, prior_b=ref18.prior_b, **args
            )
        finally:
            _look.sample_nodes = real
            _lattice.concentrated_strata = keep
        d = 1 - post.prob_at_least("precision", t)
        se = np.sqrt(max(d * (1 - d), 1 / DRAWS) / DRAWS)
        r_new = new[0] / d if d > 0 else float("nan")
        r_old = old[0] / d if d > 0 else float("nan")
        print(
            f"| {k} | {d:.3e} ({se:.1e}) | {new[0]:.3e} | {r_new:.2f} | {old[0]:.3e} "
            f"| {r_old:.2f} |"
        )


if __name__ == "__main__":
    main()
