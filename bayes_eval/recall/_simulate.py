"""Simulated universes for the coverage of the pair recall (used by the tests and the benchmark).

Every replication draws a fresh universe: :math:`|T| \\sim \\mathrm{Binomial}(|U|, \\pi)`, the
on-topic items fall in the cells :math:`A_{12}, A_1 \\setminus A_2, A_2 \\setminus A_1`,
*neither* with probabilities :math:`\\delta_1 r_1 r_2, r_1 - \\delta_1 r_1 r_2, \\ldots`
(Bommannavar et al., ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Assumption 1), the off-topic
items independently (Assumption 2) with false-positive rates set so that the expected precisions
are ``precision``; labels are hypergeometric samples of the sets (counts form) or of the cells
(flags form). The truth is the *realised* recall :math:`|T \\cap A_1| / |T|` of that universe.
Posterior draws come from the same kernels as :func:`~bayes_eval.recall.pairs.pair_recall` and
:func:`~bayes_eval.recall.flags.pair_recall_from_flags`, vectorised over replications.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._sampling import draw_beta, draw_remainder
from ._capture import RESOLVED_CELL, capture_draws, cell_resolution, project_cells

__all__ = [
    "Scenario",
    "flags_posterior_over_delta",
    "simulate_coverage",
    "simulate_universes",
]


@dataclass(frozen=True)
class Scenario:
    """One cell of the coverage grid."""

    prevalence: float
    r1: float
    r2: float
    labels: int | None  # per set (counts) or per cell (flags); None = every item labelled
    universe: int = 400_000
    precision: tuple[float, float] = (0.6, 0.5)
    delta_1: float = 1.0


def simulate_universes(sc: Scenario, reps: int, gen: np.random.Generator) -> dict[str, np.ndarray]:
    """Cell counts of ``reps`` fresh universes: ``on`` and ``size`` of shape (reps, 4) in the
    order A12, A1 only, A2 only, neither; ``truth`` the realised recall of classifier 1."""
    n_topic = gen.binomial(sc.universe, sc.prevalence, reps)
    p12 = sc.delta_1 * sc.r1 * sc.r2
    on = gen.multinomial(n_topic, [p12, sc.r1 - p12, sc.r2 - p12, 1 - sc.r1 - sc.r2 + p12])
    off_n = sc.universe - n_topic
    exp_t = sc.universe * sc.prevalence
    fpr = [
        exp_t * r * (1 - p) / p / (sc.universe - exp_t)
        for r, p in zip((sc.r1, sc.r2), sc.precision, strict=True)
    ]
    a1, a2 = fpr
    off = gen.multinomial(off_n, [a1 * a2, a1 * (1 - a2), (1 - a1) * a2, (1 - a1) * (1 - a2)])
    return {
        "on": on,
        "size": on + off,
        "truth": (on[:, 0] + on[:, 1]) / n_topic,
        "total": n_topic,
    }


def _hyper(gen, good, size, n):
    n = np.minimum(n, size)
    live = n > 0
    h = gen.hypergeometric(
        np.where(live, good, 0), np.where(live, size - good, 1), np.where(live, n, 1)
    )
    return np.where(live, h, 0), n


def counts_posterior(u, labels, draws, gen, a=0.5, b=0.5, alpha=0.5):
    """Draws (draws, reps) of ``recall_1`` for the counts form, by the kernels of
    :func:`~bayes_eval.recall.pairs.pair_recall` (independent set posteriors projected onto the
    coherent cells by :func:`~bayes_eval.recall._capture.project_cells`, as
    :func:`~bayes_eval.recall.pairs.coherent_precisions` does, then the capture layer), and of
    the earlier method (independent superpopulation Beta precisions, plug-in Eq. 1), and the cell
    resolution (reps,) of each replication."""
    on, size = u["on"], u["size"]
    set_pos = np.column_stack([on[:, 0] + on[:, 1], on[:, 0] + on[:, 2], on[:, 0]])
    set_size = np.column_stack([size[:, 0] + size[:, 1], size[:, 0] + size[:, 2], size[:, 0]])
    nlab = set_size if labels is None else np.full_like(set_size, labels)
    h, n = _hyper(gen, set_pos, set_size, nlab)
    reps = on.shape[0]
    hf, nf, sf = (x.reshape(-1) for x in (h, n, set_size))
    theta = draw_beta(a + hf, b + nf - hf, draws, gen)
    y = (draw_remainder(theta, sf - nf, gen) + hf).reshape(draws, reps, 3)
    s1, s2, s12 = (set_size[:, j].astype(np.float64) for j in range(3))
    x12, x1, x2, _ = project_cells(y[..., 0], y[..., 1], y[..., 2], s1, s2, s12)
    out, _ = capture_draws(
        x12, x1, x2, alpha=alpha, delta=1.0, gen=gen, x0_high=size[:, 3].astype(float)
    )
    theta = draw_beta(a + hf, b + (nf - hf), draws, gen).reshape(draws, reps, 3)
    old = theta[..., 2] * set_size[:, 2] / (theta[..., 1] * set_size[:, 1])
    return out["recall_1"], old, cell_resolution(x1, x2)


def _flag_cells(u, labels, draws, gen, a, b):
    """Finite-population draws (draws, reps, 3) of the on-topic counts of A12, A1 only, A2 only
    from uniform samples of the cells (as :func:`pair_recall_from_flags`)."""
    on, size = u["on"][:, :3], u["size"][:, :3]
    nlab = size if labels is None else np.full_like(size, labels)
    h, n = _hyper(gen, on, size, nlab)
    reps = on.shape[0]
    hf, nf, sf = (x.reshape(-1) for x in (h, n, size))
    theta = draw_beta(a + hf, b + nf - hf, draws, gen)
    return (draw_remainder(theta, sf - nf, gen) + hf).reshape(draws, reps, 3)


def flags_posterior(u, labels, draws, gen, a=0.5, b=0.5, alpha=0.5):
    """Capture-layer draws (draws, reps) of ``recall_1`` for the flags form: labels are uniform
    samples of the cells A12, A1 only, A2 only (as :func:`pair_recall_from_flags`); the
    finite-population plug-in Eq. (1) draws and the cell resolution (reps,)."""
    x = _flag_cells(u, labels, draws, gen, a, b)
    out, _ = capture_draws(
        x[..., 0],
        x[..., 1],
        x[..., 2],
        alpha=alpha,
        delta=1.0,
        gen=gen,
        x0_high=u["size"][:, 3].astype(float),
    )
    resolution = cell_resolution(x[..., 1], x[..., 2])
    return out["recall_1"], x[..., 0] / (x[..., 0] + x[..., 2]), resolution


def flags_posterior_over_delta(u, labels, draws, gen, grid, a=0.5, b=0.5, alpha=0.5):
    """Draws (draws, reps, len(grid)) of ``recall_1`` for the flags form at every
    :math:`\\delta_1` of ``grid`` (the same cell draws for all), as the sensitivity grid of
    :func:`pair_recall_from_flags` with a ``delta_1`` range."""
    x = _flag_cells(u, labels, draws, gen, a, b)[..., None]
    out, _ = capture_draws(
        x[..., 0, :],
        x[..., 1, :],
        x[..., 2, :],
        alpha=alpha,
        delta=np.asarray(grid, dtype=np.float64)[None, None, :],
        gen=gen,
        x0_high=u["size"][:, 3].astype(float)[:, None],
    )
    return out["recall_1"]


def simulate_coverage(
    sc: Scenario, form: str, reps: int, draws: int, gen: np.random.Generator
) -> dict[str, float]:
    """Coverage of the realised recall by the 95% lower bound and the 90% equal-tailed interval
    (capture layer, and the earlier method for comparison: independent Beta precisions and
    plug-in Eq. 1 for the counts form, finite-population plug-in Eq. 1 for the flags form), with
    their Monte Carlo errors; the same by the randomised PIT (``*_random``: ties of the discrete
    realised recall split at random), and the median and the fraction below
    :data:`~bayes_eval.recall._capture.RESOLVED_CELL` of the cell resolution."""
    u = simulate_universes(sc, reps, gen)
    post = counts_posterior if form == "counts" else flags_posterior
    rec, old, resolution = post(u, sc.labels, draws, gen)
    truth = u["truth"]
    out = {}
    for tag, x in (("capture", rec), ("old", old)):
        q = np.quantile(x, [0.05, 0.95], axis=0)
        out[f"lb95_{tag}"] = float(np.mean(truth >= q[0]))
        out[f"int90_{tag}"] = float(np.mean((truth >= q[0]) & (truth <= q[1])))
        out[f"width90_{tag}"] = float(np.mean(q[1] - q[0]))
    out["se_lb95"] = float(np.sqrt(0.95 * 0.05 / reps))
    out["se_int90"] = float(np.sqrt(0.90 * 0.10 / reps))
    out["mean_T"] = float(u["total"].mean())
    # the realised recall is discrete (x0 is a count): an interval whose ends sit on atoms covers
    # more than its level. The randomised PIT (ties split at random) removes that excess.
    pit = np.mean(rec < truth, axis=0) + np.mean(rec == truth, axis=0) * gen.random(truth.size)
    out["lb95_random"] = float(np.mean(pit >= 0.05))
    out["int90_random"] = float(np.mean((pit >= 0.05) & (pit <= 0.95)))
    # the smallest single-caught cell, as PairRecall.cell_resolution reports it
    out["resolution_median"] = float(np.median(resolution))
    out["unresolved"] = float(np.mean(resolution < RESOLVED_CELL))
    return out
