r"""The pooled look model's hyper-nodes, kept for the strata that may be labelled to a census.

The pooled look model of the sequential calibration (:mod:`bayes_eval.sequential._paths`)
computes :math:`\Pr(L \ge c)` from the cumulants of the linear form :math:`L = \sum_k w_k P_k`
at every hyper-node of a refit, with a continuous (Pearson type III) law per node. Where a stratum
has at most :data:`~bayes_eval._lattice.LATTICE_REMAINDER` unlabelled items its remaining positives
are a handful of integers (the needle regime's predicted positives), and where they carry the
form's spread the continuous law is far off: measured against the pooled audit's own
draw-based probability (40,000 draws; 60,000 items, 43 positives, six predicted-positive strata
of 7-8 items with 1-4 unlabelled), precision at the audit's 2 % tail: 0.941-0.969, the
continuous nodes 0.966-0.986 (up to +0.027), the marginal Betas summed exactly 0.969-0.994 (the
strata's dependence lost, up to +0.034), and the exact lattice at each node 0.941-0.969 (within
0.002; with the 64 resampled nodes kept here, within 0.004).

So at a refit the look model keeps a :class:`NodeSample`: :data:`NODE_SAMPLE` nodes resampled
systematically along the nodes' mean of :math:`L` (offsets ``(i + 1/2) / M`` of the importance
weights' distribution; deterministic), each with the Beta (matched to the node's mean and
variance, over the cell quadrature) of each stratum in ``cols`` -- the strata that may come
within :data:`~bayes_eval._lattice.LATTICE_REMAINDER` of a census during the calibration -- and
its cumulants of the *rest* of :math:`L` (the other strata, which never come near a census).
:meth:`NodeSample.prob` rebuilds each node's form from its Betas at the current counts and the
rest, sums the near-census strata exactly (:func:`bayes_eval._lattice.lattice_prob_at_least`)
and averages the nodes. Between refits each node's Betas take the new labels conjugately, the
nodes are reweighted by the new labels' likelihood under them, and the rest moves by the look
model's change of its cumulants since the refit (``shift``: large strata, whose spread never
collapses; a shift of the whole form's variance would not do where a stratum reaches its census
between refits).

Calibration version 19: at each node a stratum of ``cols`` that is not near a census but whose
remaining positives are concentrated near 0 under the node's Beta (a predicted-positive stratum
of false positives; :func:`bayes_eval._lattice.concentrated_strata`) is summed exactly too, as
the independent model does since version 18: the node's Pearson law of its rest, skewed by that
stratum, has no left tail. At loans_grade_a-like counts (four predicted-positive strata near a
census, a fifth of 476 items with none positive among 117 labelled) the risk :math:`1 - P` was
0.01-0.47x the pooled audit's draws for risks up to 7e-4 (``benchmarks/bench_node_tail.py``).
And each node keeps its Beta as it is:
version 18 floored the priors backed out of it at 1e-3, which tightened and moved the Beta of
a stratum whose node rate is wider than any Beta posterior of its counts, and the difference
went to the node's continuous rest (variance ~1, a mean off the integers) and smeared the
lattice (the risk 1.25x and 0.66x the draws' with the exact sum alone; 1.07x and 1.01x with
both, 1,000,000 draws; ``tests/test_lattice.py``).

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from .._cumulants import PositiveCumulants, beta_rate_cumulants, stratum_cumulants
from .._lattice import lattice_prob_at_least
from ._moment_kernels import beta_from_moments

__all__ = ["NODE_SAMPLE", "NodeSample", "sample_nodes"]

#: hyper-nodes kept per row (systematic resampling of the refit's importance weights)
NODE_SAMPLE = 64
#: rows evaluated together by :meth:`NodeSample.prob` (memory: rows x nodes x strata)
_ROWS = 256


@dataclass(frozen=True, slots=True)
class NodeSample:
    """:data:`NODE_SAMPLE` equally weighted hyper-nodes of a refit per row.

    Attributes
    ----------
    cols : ndarray of int, (C,)
        The strata whose per-node Betas are kept.
    k1, k2, k3 : ndarray of float64, (R, M)
        Each node's cumulants of the rest of the linear form (the strata outside ``cols``) at
        the refit's counts.
    prior_a, prior_b : ndarray of float64, (R, M, C)
        Each node's Beta of each stratum in ``cols`` as a prior whose conjugate update by the
        refit's counts is that Beta (not floored: it may be negative, its posteriors are not).
    n, h : ndarray of float64, (R, C)
        The refit's counts of the strata in ``cols``.
    """

    cols: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    k3: np.ndarray
    prior_a: np.ndarray
    prior_b: np.ndarray
    n: np.ndarray
    h: np.ndarray

    def kept(self, k: int) -> np.ndarray:
        """``(k,)`` bool: the strata whose per-node Betas are kept (``cols``)."""
        out = np.zeros(k, dtype=bool)
        out[self.cols] = True
        return out

    def take(self, rows: np.ndarray) -> NodeSample:
        """The sample of ``rows`` (an index or mask over ``R``)."""
        return NodeSample(
            self.cols, *(getattr(self, f)[rows] for f in ("k1", "k2", "k3", "prior_a",
                                                          "prior_b", "n", "h"))
        )  # fmt: skip

    @staticmethod
    def concat(parts: list[NodeSample]) -> NodeSample:
        """The parts' rows one after the other (the same ``cols``)."""
        return NodeSample(
            parts[0].cols,
            *(np.concatenate([getattr(p, f) for p in parts])
              for f in ("k1", "k2", "k3", "prior_a", "prior_b", "n", "h")),
        )  # fmt: skip

    def prob(
        self,
        n: np.ndarray,
        h: np.ndarray,
        shift: tuple[np.ndarray, np.ndarray, np.ndarray],
        c: float,
        *,
        sizes: np.ndarray,
        w: np.ndarray,
        prior_a: np.ndarray,
        prior_b: np.ndarray,
    ) -> np.ndarray:
        """``Pr(L >= c)``, ``(R,)``, at the counts ``n, h`` (R, K) (module docstring).

        ``shift`` (each ``(R,)``) moves every node's cumulants of the rest of ``L`` (the look
        model's change since the refit; zeros at the refit); ``prior_a, prior_b`` (R, K) are the
        look model's marginal effective priors, used for the strata outside ``cols`` (never
        exact).
        """
        rows, kk = n.shape
        m = self.k1.shape[1]
        wc = np.asarray(w, dtype=np.float64)[self.cols]
        own = self.kept(kk)
        out = np.empty(rows)
        for lo in range(0, rows, _ROWS):
            sl = slice(lo, min(lo + _ROWS, rows))
            r = sl.stop - sl.start
            nc, hc = n[sl][:, self.cols], h[sl][:, self.cols]
            pa, pb = self.prior_a[sl], self.prior_b[sl]
            # the nodes reweighted by the labels of `cols` since the refit
            logw = (
                special.betaln(pa + hc[:, None], pb + (nc - hc)[:, None])
                - special.betaln(pa + self.h[sl][:, None], pb + (self.n[sl] - self.h[sl])[:, None])
            ).sum(axis=-1)
            wt = np.exp(logw - logw.max(axis=1, keepdims=True))
            wt /= wt.sum(axis=1, keepdims=True)
            a = np.repeat(np.broadcast_to(prior_a, n.shape)[sl][:, None, :], m, axis=1)
            b = np.repeat(np.broadcast_to(prior_b, n.shape)[sl][:, None, :], m, axis=1)
            a[..., self.cols] = pa
            b[..., self.cols] = pb
            nn = np.broadcast_to(n[sl][:, None, :], (r, m, kk))
            hh = np.broadcast_to(h[sl][:, None, :], (r, m, kk))
            # each node's whole form: the rest plus the near-census strata at the current counts
            cum = _positive_cumulants(pa, pb, nc[:, None], hc[:, None], sizes[self.cols])
            p = lattice_prob_at_least(
                self.k1[sl] + shift[0][sl, None] + (wc * cum.mean).sum(axis=-1),
                np.maximum(self.k2[sl] + shift[1][sl, None], 0.0) + (wc**2 * cum.var).sum(axis=-1),
                self.k3[sl] + shift[2][sl, None] + (wc**3 * cum.k3).sum(axis=-1),
                c, n=nn, h=hh, prior_a=a, prior_b=b, sizes=sizes, w=w, concentrated=own,
            )  # fmt: skip
            out[sl] = (wt * p).sum(axis=1)
        return out


def sample_nodes(
    weight: np.ndarray,
    lin: np.ndarray,
    mom: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    cols: np.ndarray,
    sizes: np.ndarray,
    w: np.ndarray,
    nodes: int = NODE_SAMPLE,
) -> NodeSample:
    """Resample ``nodes`` hyper-nodes per row from a refit (module docstring).

    ``weight`` (R, S) are the importance weights, ``lin`` (R, S, 3) the nodes' cumulants of the
    linear form ``sum_k w_k P_k`` (``w``, ``sizes`` (K,)), ``mom`` (R, S, K, 2) each stratum's
    mean and second moment of its rate at each node, ``n, h`` (R, K) the counts.
    """
    s = weight.shape[1]
    order = np.argsort(lin[..., 0], axis=1, kind="stable")
    cw = np.cumsum(np.take_along_axis(weight, order, axis=1), axis=1)
    u = (np.arange(nodes) + 0.5) / nodes * cw[:, -1:]
    at = np.minimum((cw[:, :, None] < u[:, None, :]).sum(axis=1), s - 1)  # (R, M)
    pick = np.take_along_axis(order, at, axis=1)
    mean = np.take_along_axis(mom[..., 0][..., cols], pick[..., None], axis=1)
    second = np.take_along_axis(mom[..., 1][..., cols], pick[..., None], axis=1)
    big_a, big_b = beta_from_moments(mean, np.maximum(second - mean * mean, 0.0))
    nc = np.asarray(n, dtype=np.float64)[:, cols]
    hc = np.asarray(h, dtype=np.float64)[:, cols]
    # the priors whose conjugate update by the refit's counts is each node's Beta, not floored:
    # a node's rate (a mixture over its cell's quadrature) is often wider than any Beta
    # posterior of those counts, so they may be negative; every posterior they give (the counts
    # only grow) is the node's Beta updated by the labels since the refit (version 19). The
    # Beta's own parameters are floored at 1e-3, so that no posterior rounds to 0.
    pa = np.maximum(big_a, 1e-3) - hc[:, None, :]
    pb = np.maximum(big_b, 1e-3) - (nc - hc)[:, None, :]
    # the rest of the form: the node's whole form less the near-census strata under its Betas
    cum = _positive_cumulants(pa, pb, nc[:, None, :], hc[:, None, :], np.asarray(sizes)[cols])
    wc = np.asarray(w, dtype=np.float64)[cols]
    k = [
        np.take_along_axis(lin[..., j], pick, axis=1) - (wc ** (j + 1) * part).sum(axis=-1)
        for j, part in enumerate((cum.mean, cum.var, cum.k3))
    ]
    return NodeSample(np.asarray(cols, dtype=np.int64), *k, pa, pb, nc, hc)


def _positive_cumulants(
    prior_a: np.ndarray, prior_b: np.ndarray, n: np.ndarray, h: np.ndarray, sizes: np.ndarray
) -> PositiveCumulants:
    """Cumulants of each stratum's positives under ``Beta(prior_a + h, prior_b + n - h)``."""
    rate = beta_rate_cumulants(prior_a + h, prior_b + n - h)
    return stratum_cumulants(*rate, n=n, h=h, sizes=sizes)
