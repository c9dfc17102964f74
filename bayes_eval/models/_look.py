r"""The pooled model refitted for the sequential calibration's look model, without its Betas.

A simulated audit's look model (:mod:`bayes_eval.sequential._paths`) needs three things from a
pooled fit at each refit: the hyper-mode (the design's allocation rates,
:func:`bayes_eval.models.allocation_rate`, and the next refit's warm start), each stratum's
moment-matched marginal posterior (:func:`bayes_eval.models.marginal_prior`) and the cumulants
of the metric's linear form at every hyper-node
(:func:`bayes_eval.models.pooled.linear_form_nodes`). :func:`look_refit` computes them from the
same hyperposterior stage as :func:`bayes_eval.models.pooled.fit_pooled`
(:func:`bayes_eval.models._hyperposterior.hyper_stage`) but forms the per-node summaries inside
the compiled kernel (:func:`bayes_eval.models._kernels.log_post_summaries`) instead of keeping
every node's conditional Betas: ~1.2 kB per row instead of ~0.7 MB at 10 strata, and no second
pass over them. The numbers are the full fit's, summed in another order
(``tests/test_pooled_kernels.py`` holds them to 1e-9).

References
----------
Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posteriors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._hyperposterior import hyper_stage, log_post_summaries
from ._laplace import importance_weights
from ._linear_form import LinearFormNodes
from ._moment_kernels import beta_from_moments, conjugate_prior
from ._node_sample import NodeSample, sample_nodes
from ._profile import ScoreProfile
from .pooled import Hyperpriors

__all__ = ["LookRefit", "look_refit"]


@dataclass(frozen=True, slots=True)
class LookRefit:
    """What the look model keeps of a pooled fit of counts ``n, h`` (batch shape ``(...)``).

    Attributes
    ----------
    mode : ndarray, (..., 5)
        Hyper-mode ``(alpha, beta, gamma, log tau, logit eps)``.
    prior_a, prior_b : ndarray, (..., K)
        Beta priors whose conjugate update by ``n, h`` is each stratum's moment-matched marginal
        posterior (:func:`bayes_eval.models.marginal_prior` of the full fit).
    nodes : LinearFormNodes
        The linear form's cumulants at every hyper-node, ``(..., S)``.
    sample : NodeSample or None
        Resampled hyper-nodes with the Betas of the strata ``cols`` (given ``cols``; rows
        ``(R,)``: a two-dimensional ``n``), for the exact lattice of the strata near a census
        (:mod:`bayes_eval.models._node_sample`).
    """

    mode: np.ndarray
    prior_a: np.ndarray
    prior_b: np.ndarray
    nodes: LinearFormNodes
    sample: NodeSample | None = None


def look_refit(
    profile: ScoreProfile,
    n: Any,
    h: Any,
    w: Any,
    *,
    finite_population: bool = True,
    hyperpriors: Any = None,
    init: Any = None,
    cols: np.ndarray | None = None,
) -> LookRefit:
    """Refit the pooled model to ``n, h`` (..., K) for the look model of the linear form
    ``sum_k w_k P_k`` (``w`` (K,); ``P_k`` completed by the finite population unless
    ``finite_population=False``); ``init`` (..., 5) warm-starts the mode search
    (:func:`bayes_eval.models.pooled.fit_pooled`'s arguments otherwise). Given ``cols`` (strata
    indices; ``n`` of shape (R, K)) the refit also keeps a
    :class:`~bayes_eval.models._node_sample.NodeSample` of its hyper-nodes for them."""
    hp = Hyperpriors() if hyperpriors is None else hyperpriors
    stage = hyper_stage(profile, n, h, hp, init)
    lp, mom, lin = log_post_summaries(
        stage.phi,
        profile,
        stage.layout,
        *stage.rows,
        stage.prior,
        hp.nugget_sd,
        np.asarray(w, dtype=np.float64),
        bool(finite_population),
    )
    weight, _ = importance_weights(lp, stage.log_q)
    live = weight > 0.0  # nodes of weight 0 may carry non-finite summaries
    mom = np.where(live[..., None, None], mom, 0.0)
    lin = np.where(live[..., None], lin, 0.0)
    m = np.einsum("...s,...sk->...k", weight, mom[..., 0])
    v = np.einsum("...s,...sk->...k", weight, mom[..., 1]) - m * m
    prior_a, prior_b = conjugate_prior(*beta_from_moments(m, v), stage.n, stage.h)
    nodes = LinearFormNodes(weight, lin[..., 0], lin[..., 1], lin[..., 2])
    sample = None
    if cols is not None and len(cols):
        sample = sample_nodes(
            weight, lin, mom, stage.n, stage.h, np.asarray(cols), profile.sizes, w
        )
    return LookRefit(stage.mode, prior_a, prior_b, nodes, sample)
