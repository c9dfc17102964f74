"""The family of truths at the target over which the sequential correction is calibrated.

A false accept is an acceptance of ``metric >= target`` when the true metric is below the
target. How often the repeated-look rule does that depends on *which* population sits at the
target: the same nominal level accepts 5% of audits at one configuration and 25% at another
(flat rates within each predicted side, where the model's score-shaped expectations are wrong).
The correction therefore holds the false-accept rate at every member of a documented family and
reports the worst one (:mod:`bayes_eval.sequential.boundary`).

**Construction.** Every truth starts from a *profile* of per-stratum rates :math:`r_k` and is
moved to the target by one logit shift, up on predicted-positive strata and down on
predicted-negative strata (:func:`~bayes_eval.sequential.least_favourable_truth`),

.. math::

    \\theta_k(s) = \\operatorname{expit}(\\operatorname{logit} r_k + s\\,d_k), \\qquad
    d_k = \\pm 1,

with :math:`s` solved (Brent, 1-D) so that the metric equals the target; the positives
:math:`P_k = \\operatorname{round}(N_k\\theta_k)` are then nudged until the metric of the integer
population is strictly below the target (within a few items of it: the claim is false there).
Until calibration version 15 the truths were *at most* the target, so a truth could sit exactly
at it where the integers allow (e.g. precision 0.65 with a multiple of 20 predicted positives);
an audit that labels that side to a census then accepts a claim that is true, and counting those
acceptances as false made the correction refuse every claim it could decide by a census
(session 45, ``benchmarks/bench_certification_real.py``). Version 16 keeps every truth strictly
below; where no member sat exactly at the target (every cell of the certification benchmark,
``tests/test_worst_case.py``) the family, and so the calibration, is version 15's bit for bit.

The profiles, with :math:`x_k` the logit of stratum ``k``'s score midpoint (the planning rates
when scores are not probabilities):

====================  ==========================================================================
``scores``            calibrated scores, :math:`r_k = \\operatorname{expit} x_k` (the single
                      "least-favourable truth" of earlier releases)
``flat``              one rate per predicted side (size-weighted side mean of the score rates):
                      the scores rank nothing within a side
``shifted``           :math:`x_k + 1.5` (over-confident-low scores; ``datasets`` "shifted")
``compressed``        :math:`x_k / 3` (``datasets`` "compressed")
``sharpened``         :math:`3 x_k` (under-confident scores: "logit/3" scores of a sharp truth)
``nonmonotone``       log-odds above 2 folded back (``datasets`` "nonmonotone")
``reversed``          the score rates in reverse order within each side
``fn_lowest``         every false negative in the lowest-score predicted-negative stratum
                      (the others near 0); positive side as ``scores``
``fp_top``            every false positive in the top-score predicted-positive stratum (the others
                      near 1); negative side as ``scores``
``bump_neg``          the middle fifth (at least one) of the predicted-negative strata
                      :data:`BUMP` logits above the scores, the rest as ``scores``: missed
                      positives concentrated in one score region the design labels little
``flat_neg``          one rate on the predicted negatives only (as ``flat``), the predicted
                      positives as ``scores``
``floor_neg``         a blind spot (version 14): every predicted negative's rate raised by half
                      that side's size-weighted mean score rate, :math:`r_k + \\bar r_0 / 2`
                      (the scores' shape on top of a floor: positives the scores do not see,
                      spread over the negatives; ``datasets.synthetic(miscalibration=
                      "blind_spot")`` at the stratum level), the predicted positives as ``scores``
``floor_neg_low``     a blind spot among the lowest scores (version 15): the lower half (at least
                      one) of the predicted-negative strata raised by :math:`\\bar r_0`, the rest
                      as ``scores`` (rates that dip between the blind spot and the scores' rise:
                      the widened topics of real audits)
``floor_neg_bottom``  the same at the lowest quarter (at least one stratum) raised by
                      :math:`2 \\bar r_0` (version 15)
``posterior_i``       draws of the rates from the current posterior of the model that is run
                      (pilot labels, or the prior without them), each moved to the target
====================  ==========================================================================

Profiles that give the same integer population (e.g. on the side a metric ignores) are kept once.
The family is returned in the order of :data:`PROFILES` up to ``flat_neg`` (the family of
calibration version 13), then the posterior draws, then the profiles added since
(:data:`ADDED_PROFILES`): the calibration simulates every added member from a stream of its own
(:func:`~bayes_eval.sequential.robust.calibrate_worst_case`), so adding one leaves every earlier
member's simulated audits as they were.

``floor_neg`` was a held-out truth from session 21 to 37 (``benchmarks/bench_certification.py``)
and the worst held-out truth of most adaptive pooled rows; at one (``online_optimal`` × F1 ×
every-batch looks, version 13) the rule accepted 6.38 % ± 0.39 % of fresh audits there, above
α + 2 s.e., so a blind spot is a member now (version 14). ``floor_neg_low`` was held out from
session 38 (defined before any run): on version 14 the rule accepted 6.73 % ± 0.40 % of fresh
audits there (pooled ``posterior_variance`` × recall × every-batch looks), so version 15 holds
the blind spot at two placements below the one of version 14 (:data:`FLOORS`: a grid over where
the missed positives sit and how dense they are; its held-out successors sit between and beyond
the grid's points).
Extreme truths make the finite-population posterior sharp in some strata; together with ``flat``
and the posterior draws they bracket the configurations the rule meets in practice. The family is
a documented finite set, not every population at the target: the rate at a truth outside it is
not guaranteed (the anytime-valid confidence sequence of :mod:`bayes_eval.sequential.anytime`
holds at every truth).

References
----------
Webber, Bagdouri, Lewis & Oard (2013), ``../shared/seeds/002_bcc5f0faf615c660.txt`` (sequential
testing bias). Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (score strata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from .._protocols import StrataLike
from .._validation import RNGLike, as_generator
from ..datasets import _log_odds_transform
from ..metrics import metric_of_positives
from ..models import design_prior
from ..models._profile import score_profile_of
from ..models.pooled import draw_theta, fit_pooled
from ._linear import least_favourable_truth
from .calibration import check_rate_array

__all__ = [
    "ADDED_PROFILES",
    "BASE_VERSION",
    "FLOORS",
    "PROFILES",
    "Truth",
    "blind_spot",
    "posterior_rate_draws",
    "truth_family",
]

#: the deterministic profiles of the family, in order (posterior draws are appended)
PROFILES: tuple[str, ...] = (
    "scores",
    "flat",
    "shifted",
    "compressed",
    "sharpened",
    "nonmonotone",
    "reversed",
    "fn_lowest",
    "fp_top",
    "bump_neg",
    "flat_neg",
    "floor_neg",
    "floor_neg_low",
    "floor_neg_bottom",
)

#: the calibration version of the family before any member was added on a stream of its own
BASE_VERSION = 13

#: profiles added to the family after calibration version 13, with the version that added them:
#: each is simulated from its own random stream, after the posterior draws in the family's order
ADDED_PROFILES: dict[str, int] = {"floor_neg": 14, "floor_neg_low": 15, "floor_neg_bottom": 15}

#: the blind spots: (share of the predicted-negative strata raised, lowest scores first; multiple
#: of that side's size-weighted mean score rate added to their rates)
FLOORS: dict[str, tuple[float, float]] = {
    "floor_neg": (1.0, 0.5),
    "floor_neg_low": (0.5, 1.0),
    "floor_neg_bottom": (0.25, 2.0),
}

#: logit of a rate that is "near 0" in the extreme profiles
_FAR = 12.0

#: logits the ``bump_neg`` region sits above the scores
BUMP = 2.5


@dataclass(frozen=True, slots=True)
class Truth:
    """One simulated population at the target.

    Attributes
    ----------
    name : str
        Profile name (:data:`PROFILES` or ``posterior_i``).
    positives : ndarray of int64, (K,)
        Positives per stratum.
    value : float
        Its metric (below the target, as close as integers allow).
    """

    name: str
    positives: np.ndarray
    value: float


def blind_spot(
    x: np.ndarray, sizes: np.ndarray, pos: np.ndarray, where: np.ndarray, multiple: float
) -> np.ndarray:
    """Score logits ``x`` with the predicted-negative strata ``where`` raised by ``multiple``
    times that side's size-weighted mean score rate (the :data:`FLOORS` members; the held-out
    blind spots of ``benchmarks/bench_certification.py`` place it elsewhere)."""
    r = special.expit(x)
    out = x.copy()
    neg = ~pos
    if neg.any() and len(where):
        floor = multiple * float(np.average(r[neg], weights=sizes[neg]))
        out[where] = special.logit(np.clip(r[where] + floor, 1e-6, 1 - 1e-6))
    return out


def _profile(name: str, x: np.ndarray, sizes: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Base logits of profile ``name`` from the score logits ``x`` (ordered within each side by
    stratum index, lowest score first)."""
    r = special.expit(x)
    if name == "scores":
        return x
    if name in ("flat", "flat_neg"):
        out = x.copy()
        for side in (pos, ~pos) if name == "flat" else (~pos,):
            if side.any():
                m = float(np.average(r[side], weights=sizes[side]))
                out[side] = special.logit(np.clip(m, 1e-6, 1 - 1e-6))
        return out
    if name in FLOORS:
        share, multiple = FLOORS[name]
        idx = np.flatnonzero(~pos)
        return blind_spot(x, sizes, pos, idx[: max(1, int(idx.size * share))], multiple)
    if name == "bump_neg":
        out = x.copy()
        idx = np.flatnonzero(~pos)
        if idx.size:
            width = max(1, idx.size // 5)
            start = (idx.size - width) // 2
            out[idx[start : start + width]] += BUMP
        return out
    if name in ("shifted", "compressed", "nonmonotone"):
        return _log_odds_transform(x, name)
    if name == "sharpened":
        return 3.0 * x
    if name == "reversed":
        out = x.copy()
        for side in (pos, ~pos):
            idx = np.flatnonzero(side)
            out[idx] = x[idx[::-1]]
        return out
    if name == "fn_lowest":
        out = x.copy()
        idx = np.flatnonzero(~pos)
        if idx.size:
            out[idx] = -_FAR
            out[idx[np.argmin(x[idx])]] = 0.0
        return out
    if name == "fp_top":
        out = x.copy()
        idx = np.flatnonzero(pos)
        if idx.size:
            out[idx] = _FAR
            out[idx[np.argmax(x[idx])]] = 0.0
        return out
    raise ValueError(f"profile={name!r}; allowed: " + ", ".join(map(repr, PROFILES)))


def truth_family(
    sizes: ArrayLike,
    predicted: ArrayLike,
    *,
    metric: str,
    target: float,
    score_rates: ArrayLike,
    posterior_draws: ArrayLike | None = None,
    profiles: Sequence[str] | None = None,
) -> tuple[Truth, ...]:
    """The truths at the target (module docstring), duplicates removed.

    Parameters
    ----------
    sizes, predicted : array (K,)
        Stratum sizes and predicted side.
    metric : str
    target : float
    score_rates : array (K,)
        Rates the scores stand for (score midpoints, planning or pilot rates), strata ordered by
        score within each side.
    posterior_draws : array (M, K), optional
        Rate draws from the current posterior; each becomes ``posterior_i``.
    profiles : sequence of str, optional
        Subset of :data:`PROFILES` (default all).

    Returns
    -------
    tuple of Truth

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.sequential.truths import truth_family
    >>> fam = truth_family([5000, 5000, 800, 200], [0, 0, 1, 1], metric="f1", target=0.7,
    ...                    score_rates=[0.01, 0.1, 0.6, 0.9])
    >>> [t.name for t in fam][:3], all(t.value < 0.7 for t in fam)
    (['scores', 'flat', 'shifted'], True)
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    pos = np.asarray(predicted, dtype=bool)
    r = np.clip(check_rate_array(score_rates, sizes.shape[0], "", "score_rates"), 1e-6, 1 - 1e-6)
    names = PROFILES if profiles is None else tuple(profiles)
    bad = [n for n in names if n not in PROFILES]
    if bad or not names:
        raise ValueError(
            f"profiles={profiles!r}; allowed: a non-empty subset of "
            + ", ".join(map(repr, PROFILES))
        )
    x = special.logit(r)
    bases = [(n, _profile(n, x, sizes, pos)) for n in names if n not in ADDED_PROFILES]
    if posterior_draws is not None:
        d = np.clip(np.atleast_2d(np.asarray(posterior_draws, dtype=np.float64)), 1e-6, 1 - 1e-6)
        if d.shape[-1] != sizes.shape[0]:
            raise ValueError(f"posterior_draws has shape {d.shape}; allowed: (M, {sizes.size})")
        bases += [(f"posterior_{i + 1}", special.logit(row)) for i, row in enumerate(d)]
    bases += [(n, _profile(n, x, sizes, pos)) for n in names if n in ADDED_PROFILES]
    out: list[Truth] = []
    seen: set[bytes] = set()
    for name, base in bases:
        p = least_favourable_truth(
            sizes, pos, special.expit(base), metric=metric, value=float(target), strict=True
        )
        key = p.tobytes()
        if key in seen:
            continue
        seen.add(key)
        out.append(Truth(name, p, metric_of_positives(metric, p, sizes, pos)))
    return tuple(out)


def posterior_rate_draws(
    model: str,
    strata: StrataLike,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    count: int,
    rng: RNGLike,
) -> np.ndarray:
    """``count`` draws ``(count, K)`` of the stratum rates from the current posterior of
    ``model`` (the pooled model's joint draws; otherwise the Beta marginals the designs use,
    :func:`bayes_eval.models.design_prior`)."""
    gen = as_generator(rng)
    if model == "pooled" and strata is not None and hasattr(strata, "population"):
        fit = fit_pooled(score_profile_of(strata), n, h, warn=False)
        return np.asarray(draw_theta(fit, count, gen))
    a, b = (prior_a, prior_b)
    if model != "independent" and strata is not None and hasattr(strata, "population"):
        a, b = design_prior(model, strata, n, h, prior_a, prior_b)
    return gen.beta(a + h, b + n - h, size=(count, np.asarray(n).shape[-1]))
