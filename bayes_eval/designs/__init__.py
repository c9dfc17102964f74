r"""Sequential sampling designs: how many of the next batch of labels go to each stratum.

A design is an object with ``name`` and ``allocate(state, batch_size, rng) -> counts``: integer
labels per stratum for the next batch, summing to ``batch_size`` exactly and never exceeding
``state.available`` (items of the stratum not yet proposed). The audit then draws that many items
uniformly without replacement inside each stratum. Designs are pure functions of the state and the
generator, which makes audits reproducible from their seed. What a design must remember between
batches (OPT-A1's frozen estimates) lives in ``state.memory``, one dict per audit that the engine
owns, never on the design object, so one design object may serve any number of audits.

Designs are registered in :data:`DESIGNS` and built by :func:`make_design` (options are keyword
arguments):

================== ===========================================================================
``"random"``        simple random sampling over the whole population (the baseline)
``"proportional"``  each batch proportional to ``N_k`` (cumulatively balanced)
``"equal"``         each batch equal over strata (cumulatively balanced)
``"online_optimal"`` Bennett & Carvalho, Figure 1 (options ``d0``, ``d``)
``"opt_a1"``        Kumar & Raj, Algorithm 1 (option ``n_ini``)
``"opt_a2"``        Kumar & Raj, Algorithm 2 (options ``n_ini``, ``n_step``)
``"neyman_oracle"`` Neyman allocation from the true rates (option ``rates``): the oracle
``"posterior_variance"`` ours: greedy reduction of the expected posterior variance of the metric,
                    after a defensive floor of labels per stratum (option ``defensive``)
================== ===========================================================================

The package has one module per family: :mod:`~bayes_eval.designs._base` (state, registry, shared
allocation kernels, the baselines), :mod:`~bayes_eval.designs._classic` (the published designs)
and :mod:`~bayes_eval.designs.posterior_variance` (ours).

Every design here except ``"random"`` also has ``allocate_many(state, batch_size, rng)``, the
same rule applied to ``R`` independent audits at once (``state.n``, ``state.h``,
``state.available`` of shape ``(R, K)``), which the simulation harness and the benchmarks use
(``"random"`` needs one multivariate hypergeometric draw per audit, which numpy does not
vectorise over rows).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1);
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (section 3.3, Algorithms 1 and 2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._base import (
    DESIGNS,
    Design,
    DesignState,
    _Equal,
    _Proportional,
    _Random,
    largest_remainder,
    make_design,
    metric_gradient,
    register_design,
    stratum_sd,
)
from ._classic import NeymanOracle, OnlineOptimal, OptA1, OptA2
from .posterior_variance import (
    PosteriorVariance,
    completion_allocation,
    defensive_allocation,
    preposterior_variance,
)

__all__ = [
    "DESIGNS",
    "Design",
    "DesignState",
    "NeymanOracle",
    "OnlineOptimal",
    "OptA1",
    "OptA2",
    "PosteriorVariance",
    "completion_allocation",
    "defensive_allocation",
    "largest_remainder",
    "make_design",
    "metric_gradient",
    "preposterior_variance",
    "register_design",
    "stratum_sd",
]


def _without_options(name: str, cls: type) -> Callable[..., Design]:
    """Factory of a design that takes no option: an option given is an error, never ignored."""

    def factory(**options: Any) -> Design:
        if options:
            raise TypeError(f"design {name!r} takes no options; got {sorted(options)}")
        return cls()

    return factory


register_design("random")(_without_options("random", _Random))
register_design("proportional")(_without_options("proportional", _Proportional))
register_design("equal")(_without_options("equal", _Equal))
register_design("online_optimal")(OnlineOptimal)
register_design("opt_a1")(OptA1)
register_design("opt_a2")(OptA2)
register_design("neyman_oracle")(NeymanOracle)
register_design("posterior_variance")(PosteriorVariance)
