"""Pair recall from set sizes and precision labels, and the recall of a further classifier.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``) turn recall into a
capture-recapture problem: two classifiers flag :math:`A_1, A_2` (:math:`A_{12} = A_1 \\cap A_2`)
and, if they fire independently on the on-topic set :math:`T` (Assumption 1), Eq. (1) gives
:math:`r_1 = p_{12} |A_{12}| / (p_2 |A_2|)` from the precisions alone. Here the precisions'
labels give draws of the on-topic counts of the three cells, projected onto the coherent cells
(each within its size), and a Bayesian capture-recapture layer (:mod:`bayes_eval.recall._capture`)
draws the on-topic items that neither classifier caught, so the posterior of the *realised*
recall :math:`|T \\cap A_1| / |T|` carries both the labelling and the capture noise.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._draws import DEFAULT_DRAWS
from .._sampling import draw_beta, draw_remainder
from .._validation import RNGLike, as_generator, check_bool, check_option, check_positive_int
from ..priors import BetaSpec, resolve_prior
from ._capture import cell_resolution, project_cells
from ._common import (
    PairRecall,
    RecallFromTotal,
    _check_capture_prior,
    _check_delta,
    _check_labels,
    _check_precision,
    _check_sizes,
    _check_universe,
    _count,
    _now,
    _pack_pair,
    _posterior_dataset,
    capture_block,
    eq2_joint_precision,
    pair_quantities,
)

__all__ = ["pair_recall", "recall_from_total"]

_SAMPLES = ("A1", "A2", "A12")
#: Eq. (1) keys of :func:`pair_quantities` and their names in a result
EQ1_NAMES = {
    "recall_1": "recall_1_eq1",
    "recall_2": "recall_2_eq1",
    "total_positives": "total_positives_eq1",
}
#: plug-in keys of :func:`pair_quantities` without a joint precision (Eq. 2 only)
EQ2_ONLY_NAMES = {"total_positives": "total_positives_eq2"}
#: relative slack of the coherence checks on float counts
_EPS = 1e-9


def _set_specs(sizes, labels, precisions, universe):
    specs = []
    for tag, size, lab, precision in zip(("1", "2", "12"), sizes, labels, precisions, strict=True):
        if lab is not None and precision is not None:
            raise ValueError(
                f"labels_{tag} and precision_{tag} are both given; allowed: exactly one of them"
            )
        if lab is None and precision is None:
            if tag != "12":
                raise ValueError(
                    f"neither labels_{tag} nor precision_{tag} is given; allowed: exactly one"
                )
            if universe is None:
                raise ValueError(
                    "neither labels_12 nor precision_12 is given and universe is None: Eq. (1) "
                    "needs the joint precision and Eq. (2) needs |U|; give one of them"
                )
            specs.append(None)
            continue
        if lab is not None:
            h, n = _check_labels(lab, f"labels_{tag}", size)
            specs.append(("labels", h, n))
        else:
            specs.append(("known", _check_precision(precision, f"precision_{tag}")))
    return specs


def _check_coherent_support(specs, sizes, finite: bool, universe: int | None) -> None:
    """Raise if no value the set posteriors allow is coherent (the data contradict the sizes).

    The on-topic count of each set lies in ``[h, h + N - n]`` (labels, finite population),
    ``[0, N]`` (labels, superpopulation) or at ``p N`` (known precision); without a joint
    precision :math:`y_{12}` is the Eq. (2) value, increasing in :math:`p_1, p_2`. Coherent
    counts exist when some :math:`y_{12}` in its range has :math:`y_s - N_s + N_{12} \\le y_{12}
    \\le y_s` for a :math:`y_s` in each set's range. Only a certain contradiction is an error;
    draws that are merely improbable are projected (and flagged when nearly all are).
    """
    lo, hi = np.empty(3), np.empty(3)
    for i, spec in enumerate(specs):
        if spec is None:
            continue
        if spec[0] == "known":
            lo[i] = hi[i] = spec[1] * sizes[i]
        elif finite:
            lo[i], hi[i] = spec[1], spec[1] + sizes[i] - spec[2]
        else:
            lo[i], hi[i] = 0.0, sizes[i]
    if specs[2] is None:
        q = [
            eq2_joint_precision(v[0] / sizes[0], v[1] / sizes[1], *sizes, universe)
            for v in (lo, hi)
        ]
        lo[2], hi[2] = q[0] * sizes[2], q[1] * sizes[2]
    s1, s2, s12 = sizes
    low = max(lo[0] - (s1 - s12), lo[1] - (s2 - s12), lo[2], 0.0)
    high = min(hi[0], hi[1], hi[2], s12)
    if low > high + _EPS * sizes.max():
        names = ("A1", "A2", "A12")
        ranges = ", ".join(f"{m} [{a:.4g}, {b:.4g}]" for m, a, b in zip(names, lo, hi, strict=True))
        raise ValueError(
            "the labels or known precisions contradict the set sizes: no coherent on-topic "
            f"counts (|T ∩ A12| <= |T ∩ A1|, |T ∩ A2|, each cell within its size) exist in the "
            f"ranges they allow ({ranges}; sizes {s1:g}, {s2:g}, {s12:g})"
        )


def coherent_precisions(
    specs,
    sizes,
    a: float,
    b: float,
    draws: int,
    gen: np.random.Generator,
    finite: bool,
    universe: int | None = None,
) -> tuple[np.ndarray, float]:
    """Precision draws ``(draws, 3)`` of :math:`A_1, A_2, A_{12}` projected onto coherent cells.

    Each estimated set :math:`s \\in \\{1, 2, 12\\}` has its own ``Beta(a, b)`` prior on its
    precision, the parameter its uniform sample ``(h_s, n_s)`` measures, and its posterior
    on-topic count :math:`y_s = h_s + \\mathrm{BetaBinomial}(N_s - n_s, a + h_s, b + n_s - h_s)`
    (``finite=True``, the realised count of the set) or :math:`y_s = N_s p_s` with
    :math:`p_s \\sim \\mathrm{Beta}(a + h_s, b + n_s - h_s)` (superpopulation), drawn
    independently. A known precision fixes :math:`y_s`. Without a joint precision (``specs[2]``
    is None) the third column is the Eq. (2) joint precision :math:`1 - (1 - p_1)(1 - p_2) N_1
    N_2 / (|U| N_{12})` of each draw (``universe`` given), or NaN (no ``universe``: nothing to
    project, every draw is returned as it is).

    Every draw is then projected onto the coherent set, the box

    .. math::

        0 \\le y_{12} \\le N_{12},\\qquad 0 \\le y_s - y_{12} \\le N_s - N_{12} \\quad (s = 1, 2)

    in the cell coordinates (:func:`~bayes_eval.recall._capture.project_cells`: each cell
    clipped to its range, :math:`y_{12}` kept, :math:`y_1, y_2` moved), and the precisions are
    the projected counts over the set sizes.

    Why projection, not rejection
        The information on a small cell such as :math:`x_2 = |T \\cap A_2 \\setminus A_1|`
        comes from the sample of :math:`A_2`: :math:`x_2 = y_2 - y_{12}` is the difference of
        two set counts, with a posterior sd set by that sample (about :math:`N_2 \\sqrt{p_2 (1 -
        p_2) / n_2}`), not by :math:`x_2`. With recalls 0.9 / 0.7 and 50 labels per set,
        :math:`x_2 \\approx 140 \\pm 200` at :math:`|T| \\approx 2{,}000`. Restricting the product
        of the set posteriors to the coherent set (rejection, the previous version) is the
        Bayesian posterior under the set priors cut to that set; its upper quantiles of
        :math:`x_2` move outwards, so the 95% lower bound of the recall covered the realised
        recall in 1.000 of 1,000 universes at every prevalence (0.991-0.995 with 200 labels),
        the frequentist behaviour of a posterior cut at a bound the truth is near. A Jeffreys
        prior on every cell's rate (the version before) pulls the cell towards 0 by about
        :math:`\\mathrm{var}(x_2) / (2 x_2)` instead: lower bound 0.910 at :math:`|T| \\approx
        200` with 200 labels, still 0.994-0.999 with 50. Projection keeps every quantile of a
        cell on the far side of the boundary as it is in the set posteriors, and a bound clipped
        to the boundary still holds every coherent truth, so each one-sided bound of a cell
        covers as often as that of the (calibrated) set posteriors, at any distance from the
        boundary (Sen, Patra & Dunson, "Constrained inference through posterior projections",
        arXiv:1812.05741: the projected posterior inherits the unconstrained posterior's
        asymptotic coverage). Measured in ``benchmarks/bench_pair_recall.py`` (4,000 universes
        per row): 95% lower bound 0.952-0.961 and 90% interval 0.896-0.905 in those rows. The
        projected posterior has an atom where the cell is 0 (recall near 1);
        :attr:`PairRecall.cell_resolution` reports how far the smallest cell is from it.

    Returns the projected draws and the fraction of draws that were coherent before projection.

    Raises
    ------
    ValueError
        If no coherent counts lie in the ranges the labels and known precisions allow (e.g.
        known precisions with :math:`p_{12} N_{12} > p_2 N_2`).
    """
    sizes_arr = np.asarray(sizes, dtype=np.float64)
    check = specs[2] is not None or universe is not None
    if check:
        _check_coherent_support(specs, sizes_arr, finite, universe)
    est = [i for i, s in enumerate(specs) if s is not None and s[0] == "labels"]
    h = np.array([specs[i][1] for i in est], dtype=np.int64)
    n = np.array([specs[i][2] for i in est], dtype=np.int64)
    p = np.empty((draws, 3))
    for i, s in enumerate(specs):
        p[:, i] = s[1] if s is not None and s[0] == "known" else np.nan
    if est:
        theta = draw_beta(a + h, b + n - h, draws, gen)
        if finite:
            y = draw_remainder(theta, sizes_arr[est].astype(np.int64) - n, gen) + h
            theta = y / sizes_arr[est]
        p[:, est] = theta
    if not check:
        return p, 1.0
    if specs[2] is None:
        p[:, 2] = eq2_joint_precision(p[:, 0], p[:, 1], *sizes_arr, universe)
    s1, s2, s12 = sizes_arr
    y1, y2, y12 = (p * sizes_arr).T
    x12, x1, x2, inside = project_cells(y1, y2, y12, s1, s2, s12, tol=_EPS * sizes_arr.max())
    projected = np.column_stack([(x12 + x1) / s1, (x12 + x2) / s2, x12 / s12])
    return np.where(inside[:, None], p, projected), float(inside.mean())


def pair_recall(
    size_1: int,
    size_2: int,
    size_12: int,
    labels_1: tuple[int, int] | None = None,
    labels_2: tuple[int, int] | None = None,
    labels_12: tuple[int, int] | None = None,
    universe: int | None = None,
    prior: BetaSpec = "jeffreys",
    draws: int = DEFAULT_DRAWS,
    rng: RNGLike = None,
    *,
    precision_1: float | None = None,
    precision_2: float | None = None,
    precision_12: float | None = None,
    finite_population: bool = True,
    delta_1: float | tuple[float, float] = 1.0,
    capture_prior: str | float = "jeffreys",
) -> PairRecall:
    """Posterior of both classifiers' realised recall from set sizes and precision labels.

    Labelling stage. Each precision :math:`p_s` (:math:`s \\in \\{1, 2, 12\\}`) comes from the
    labels of a uniform sample of its set, ``labels_s = (h_s, n_s)`` (positives, labelled), or
    from a known number ``precision_s``. The unknowns are the on-topic counts of the disjoint
    cells, :math:`x_{12} = p_{12}|A_{12}|`, :math:`x_1 = p_1|A_1| - x_{12}`,
    :math:`x_2 = p_2|A_2| - x_{12}` of :math:`A_{12}`, :math:`A_1 \\setminus A_2`,
    :math:`A_2 \\setminus A_1`. Each estimated precision has the ``prior`` of its set (the
    parameter its sample measures); the set posteriors are drawn independently and every draw
    is projected onto the coherent set, each cell count clipped to :math:`[0, \\text{cell
    size}]` (:func:`coherent_precisions`, which says why projection and not rejection: a
    posterior cut at :math:`x_2 \\ge 0` makes the lower bound of the recall conservative when
    the labels cannot tell :math:`x_2` from 0). No draw has :math:`p_{12}|A_{12}| > p_2|A_2|`;
    ``incoherent`` is the fraction of draws that were projected.

    Capture stage (:mod:`bayes_eval.recall._capture`). Given the cell counts,

    .. math::

        \\pi \\sim \\mathrm{Dirichlet}(x_{12} + \\alpha, x_1 + \\alpha, x_2 + \\alpha),\\quad
        r_1 = \\frac{\\pi_{12}}{\\delta_1(\\pi_{12} + \\pi_2)},\\quad
        r_2 = \\frac{\\pi_{12}}{\\delta_1(\\pi_{12} + \\pi_1)},

        x_0 \\sim \\mathrm{NegBin}(x_{12} + x_1 + x_2,\\ r_1 + r_2 - \\delta_1 r_1 r_2),\\qquad
        \\mathrm{recall}_1 = \\frac{x_{12} + x_1}{x_{12} + x_1 + x_2 + x_0},

    the exact posterior of the multinomial capture model with a :math:`1/|T|` prior on the topic
    size (``x_0`` at most :math:`|U| - |A_1 \\cup A_2|` when ``universe`` is given). The target
    is the realised recall of the realised topic set; a realised
    :math:`|T \\cap A_{12}| / |T \\cap A_2|` differs from it by about
    :math:`\\sqrt{r_1 (1 - r_1) / |T \\cap A_2|}` even under exact independence, which this
    posterior includes and the plug-in Eq. (1) does not. Every draw is coherent.

    The paper's plug-in estimates are kept draw by draw: ``recall_1_eq1`` :math:`= p_{12}
    |A_{12}| / (p_2 |A_2|)`, ``recall_2_eq1``, ``total_positives_eq1`` :math:`= p_1 |A_1| /
    r_1` (Eq. 1) and, with ``universe``, Eq. (2), where :math:`p_{12}` is replaced by
    :math:`1 - (1-p_1)(1-p_2)|A_1||A_2| / (|U||A_{12}|)`. Without a joint precision (neither
    ``labels_12`` nor ``precision_12``) ``universe`` is required and the capture layer takes
    :math:`x_{12}` from the Eq. (2) joint precision of each draw (projected, like the Eq. (1)
    cells, onto the coherent cells), so ``recall_1``, ``recall_2`` and ``total_positives`` are still
    realised quantities with capture noise; the plug-in ``recall_1_eq2``, ``recall_2_eq2``,
    ``total_positives_eq2`` stay, and the ``*_eq1`` quantities do not exist.

    How well the labels resolve the cells
        :attr:`PairRecall.cell_resolution` is the posterior mean / sd of the smaller of
        :math:`x_1, x_2`. Below 2 (e.g. recall 0.9 and 50 labels per set: :math:`x_2 \\approx
        14 \\pm 18` before projection) the labels cannot tell that cell from 0: many draws
        sit at 0 (recall near 1), so the upper end of the interval is near 1 and the interval
        is wide; its coverage holds (95% lower bound 0.952-0.961, 90% interval 0.896-0.905
        in ``benchmarks/bench_pair_recall.py``) and the repr says so. Labels of the cells
        themselves (:func:`~bayes_eval.recall.flags.pair_recall_from_flags`) or more labels of
        :math:`A_2` narrow it.

    Parameters
    ----------
    size_1, size_2, size_12 : int
        :math:`|A_1|, |A_2|, |A_{12}|`: items flagged by classifier 1, 2 and both in the universe.
    labels_1, labels_2, labels_12 : (int, int), optional
        ``(positives, labelled)`` of a uniform sample of :math:`A_1`, :math:`A_2`, :math:`A_{12}`.
    universe : int, optional
        :math:`|U|`, at least :math:`|A_1 \\cup A_2|`; enables Eq. (2) and bounds :math:`x_0`.
    prior : "jeffreys", "uniform" or (a, b)
        Beta prior of every estimated precision.
    draws : int
        Monte Carlo draws.
    rng : int, Generator or None
    precision_1, precision_2, precision_12 : float, optional
        Known precisions in (0, 1], instead of the corresponding ``labels_*``. With all three
        known the interval of ``recall_1`` is the capture noise alone (not zero).
    finite_population : bool
        Draw each set's unlabelled remainder (the realised on-topic counts; the labelling noise
        vanishes when every item is labelled) or take :math:`p_s |A_s|` with superpopulation
        :math:`p_s` (the earlier behaviour).
    delta_1 : float or (float, float)
        Bommannavar et al.'s :math:`\\delta_1 = P[A_{12}|T] / (P[A_1|T] P[A_2|T])` assumed (1 =
        Assumption 1), or a range ``(low, high)`` for a sensitivity analysis: the main
        quantities then take :math:`\\log \\delta_1` uniform on the range, and
        :meth:`PairRecall.sensitivity`, :meth:`PairRecall.lower_bound_over_delta` and
        :meth:`PairRecall.interval_over_delta` give the bounds at every :math:`\\delta_1` of a
        grid and their worst case. (Eq. 1 itself estimates :math:`\\delta_1 r_1`.)
    capture_prior : "jeffreys", "uniform" or float
        Dirichlet concentration :math:`\\alpha` of the caught-cell probabilities (1/2, 1 or the
        number).

    Returns
    -------
    PairRecall
        Quantities ``recall_1``, ``recall_2``, ``total_positives`` (realised, capture layer),
        ``missed``, ``capture_1``, ``capture_2``, the plug-in ``*_eq1`` and ``*_eq2`` and the
        precisions (projected). Plug-in draws above 1 are kept; a
        :class:`RecallAboveOneWarning` is issued for every flagged recall and when at least
        :data:`~bayes_eval.recall._common.INCOHERENT_FLAG` of the precision draws were
        incoherent (projected).

    Raises
    ------
    ValueError
        Negative sizes, ``size_12 > min(size_1, size_2)``, ``size_12 == 0``, positives above
        labelled, more labels than set items, ``universe < |A1 ∪ A2|``, both or neither of
        ``labels_s`` and ``precision_s`` (``s`` = 1, 2), a bad ``delta_1`` or
        ``capture_prior``, labels or known precisions that no coherent cell counts can satisfy.

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. (1), Eq. (2),
    Assumption 1 (:math:`\\delta_1`) and section 6 (:math:`\\hat n`).

    Examples
    --------
    Table 3 of the paper, topic Apple, with the printed precisions taken as known: the plug-in
    values of the paper, and the realised recall with its capture noise.

    >>> import bayes_eval as be
    >>> res = be.pair_recall(676, 10217, 420, universe=800_000, precision_1=0.655,
    ...                      precision_2=0.247, precision_12=0.774, draws=20_000, rng=0)
    >>> round(res.mean("recall_1_eq1"), 3), round(res.mean("recall_1_eq2"), 3)
    (0.129, 0.166)
    >>> round(res.mean("recall_1"), 3), round(res.std("recall_1"), 3)
    (0.129, 0.003)
    """
    s1, s2, s12 = _check_sizes(size_1, size_2, size_12)
    u = _check_universe(universe, s1, s2, s12)
    draws = check_positive_int(draws, "draws")
    finite = check_bool(finite_population, "finite_population")
    delta = _check_delta(delta_1)
    alpha = _check_capture_prior(capture_prior)
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    a, b = float(a_arr[0]), float(b_arr[0])
    specs = _set_specs(
        (s1, s2, s12),
        (labels_1, labels_2, labels_12),
        (precision_1, precision_2, precision_12),
        u,
    )
    gen = as_generator(rng)
    p, coherent = coherent_precisions(specs, (s1, s2, s12), a, b, draws, gen, finite, u)
    p1, p2, p12 = p.T
    joint = specs[2] is not None
    plug = pair_quantities(p1, p2, p12 if joint else None, s1, s2, s12, u)
    attrs = {
        "input": "counts",
        "view": "finite population" if finite else "superpopulation",
        "capture_cells": "Eq. (1)" if joint else "Eq. (2)",
    }
    # the capture layer takes x12 from the joint precision, or from the Eq. (2) joint precision
    # (off-topic independence and sparsity) when A12 has no labels
    y12 = p12 * s12
    x1 = np.maximum(p1 * s1 - y12, 0.0)
    x2 = np.maximum(p2 * s2 - y12, 0.0)
    high = np.inf if u is None else float(u - (s1 + s2 - s12))
    values, by_delta, grid, support, source = capture_block(
        y12, x1, x2, alpha=alpha, delta=delta, gen=gen, x0_high=high
    )
    names = EQ1_NAMES if joint else EQ2_ONLY_NAMES
    values.update({names.get(k, k): v[source] for k, v in plug.items()})
    attrs["delta_support_fraction"] = support
    attrs["incoherent_fraction"] = 1.0 - coherent
    attrs["cell_resolution"] = float(cell_resolution(x1, x2))

    h_obs = [s[1] if s is not None and s[0] == "labels" else 0 for s in specs]
    n_obs = [s[2] if s is not None and s[0] == "labels" else 0 for s in specs]
    known = [s[1] if s is not None and s[0] == "known" else np.nan for s in specs]
    coords = {"sample": list(_SAMPLES)}
    observed = xr.Dataset(
        {
            "n": ("sample", np.array(n_obs, dtype=np.int64)),
            "h": ("sample", np.array(h_obs, dtype=np.int64)),
        },
        coords=coords,
    )
    constant = xr.Dataset(
        {
            "size": ("sample", np.array([s1, s2, s12], dtype=np.int64)),
            "known_precision": ("sample", np.array(known, dtype=np.float64)),
            "prior_a": ((), a),
            "prior_b": ((), b),
            "universe": ((), np.nan if u is None else float(u)),
        },
        coords=coords,
    )
    result = _pack_pair(
        values,
        observed,
        constant,
        draws,
        desc,
        (s1, s2, s12),
        u,
        int(sum(n_obs)),
        attrs,
        by_delta=by_delta,
        grid=grid,
        delta=delta,
        alpha=alpha,
    )
    result._warn_if_flagged()
    return result


# ---------------------------------------------------------------------------- recall_from_total
def recall_from_total(
    size: int,
    labels: tuple[int, int] | None = None,
    *,
    precision: float | None = None,
    total: PairRecall,
    total_quantity: str = "total_positives",
    prior: BetaSpec = "jeffreys",
    finite_population: bool = True,
    rng: RNGLike = None,
) -> RecallFromTotal:
    """Recall of any other classifier from its size, its precision and a pair's :math:`|T|`.

    .. math:: \\mathrm{recall}_{new} = \\frac{y_{new}}{|T|}, \\qquad y_{new} = p_{new} |A_{new}|

    draw by draw (section 6: :math:`\\hat r_{new} = p_{new} |A_{new}| / \\hat n`), with
    :math:`y_{new}` from a uniform sample of :math:`A_{new}` (``labels``, independent of the
    pair's labels: :math:`h + \\mathrm{Binomial}(N - n, \\theta)`, :math:`\\theta \\sim
    \\mathrm{Beta}(a + h, b + n - h)`, or :math:`\\theta |A_{new}|` with
    ``finite_population=False``) or a known ``precision``, and the :math:`|T|` draws of
    ``total`` (as many draws as ``total`` has).

    With a realised total (``"total_positives"`` of the capture layer, which carries the capture
    noise, from Eq. (1) cells, Eq. (2) cells or the flags form, or ``"total_positives_sampled"``)
    the recall is the third classifier's *realised* recall :math:`|T \\cap A_{new}| / |T|` and
    every draw is projected onto :math:`y_{new} \\le |T|` (an on-topic subset of :math:`T`):
    a draw with :math:`y_{new} > |T|` takes :math:`y_{new} = |T|`, recall 1, with the pair's
    :math:`|T|` draw kept (projection, not rejection, for the reason given in
    :func:`coherent_precisions`: conditioning on the bound would make the lower bound of a recall
    near 1 conservative). Every recall draw lies in :math:`[0, 1]`; ``incoherent`` is the
    fraction of draws projected. With the plug-in totals (``*_eq1``,
    ``*_eq2``) the draws are paired as they are and recalls above 1 are kept and flagged.

    Parameters
    ----------
    size : int
        :math:`|A_{new}|`, items the classifier flags in the same universe.
    labels : (int, int), optional
        ``(positives, labelled)`` of a uniform sample of :math:`A_{new}`.
    precision : float, optional
        Known precision instead of ``labels``.
    total : PairRecall
        A pair's posterior; its ``total_quantity`` draws are used.
    total_quantity : str
        ``"total_positives"`` (default) or another total of ``total`` such as
        ``"total_positives_eq1"``, ``"total_positives_eq2"`` or ``"total_positives_sampled"``.
    prior : "jeffreys", "uniform" or (a, b)
    finite_population : bool
    rng : int, Generator or None

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 6.

    Examples
    --------
    >>> import bayes_eval as be
    >>> pair = be.pair_recall(1000, 2000, 300, labels_1=(180, 200), labels_2=(100, 200),
    ...                       labels_12=(190, 200), draws=4000, rng=0)
    >>> new = be.recall_from_total(1500, (150, 200), total=pair, rng=1)
    >>> 0.3 < new.mean("recall") < 0.5
    True
    """
    if not isinstance(total, PairRecall):
        raise TypeError(
            f"total has type {type(total).__name__}; allowed: a PairRecall from pair_recall or "
            "pair_recall_from_flags"
        )
    totals = tuple(q for q in total.quantities if q.startswith("total_positives"))
    check_option(total_quantity, "total_quantity", totals)
    s = _count(size, "size")
    if s == 0:
        raise ValueError("size=0: a classifier that flags nothing has recall 0; allowed: >= 1")
    finite = check_bool(finite_population, "finite_population")
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    if (labels is None) == (precision is None):
        raise ValueError("give exactly one of labels=(positives, labelled) and precision=")
    n_hat_all = total.draws(total_quantity)
    draws = n_hat_all.size
    realised = total_quantity == "total_positives_sampled" or (
        total_quantity == "total_positives" and "capture_1" in total.quantities
    )
    if labels is not None:
        h, n = _check_labels(labels, "labels", s)
    else:
        h, n = 0, 0
        known = _check_precision(precision, "precision")
    gen = as_generator(rng)
    if labels is None:
        y = np.full(draws, known * s)
    else:
        theta = draw_beta(np.array([a_arr[0] + h]), np.array([b_arr[0] + n - h]), draws, gen)
        rest = draw_remainder(theta, np.array([s - n]), gen) + h if finite else theta * s
        y = rest[:, 0]
    ok = 1.0
    if realised:
        # an on-topic subset of T: project y_new > |T| onto y_new = |T| (recall 1)
        ok = float(np.mean(y <= n_hat_all))
        y = np.minimum(y, n_hat_all)
    n_hat = n_hat_all
    p = y / s
    with np.errstate(divide="ignore", invalid="ignore"):
        r = y / n_hat
    tree = xr.DataTree.from_dict(
        {
            "posterior": _posterior_dataset(
                {"recall": r, "precision": p, "total_positives": n_hat}, draws
            ),
            "observed_data": xr.Dataset({"n": ((), n), "h": ((), h)}),
            "constant_data": xr.Dataset(
                {
                    "size": ((), s),
                    "known_precision": ((), np.nan if precision is None else float(precision)),
                    "prior_a": ((), float(a_arr[0])),
                    "prior_b": ((), float(b_arr[0])),
                }
            ),
        }
    )
    res = RecallFromTotal(datatree=tree, prior=desc, size=s, n_labels=n)
    tree.attrs.update(
        {
            "method": "recall_from_total (Bommannavar et al. 2014, section 6)",
            "total_quantity": total_quantity,
            "prior": desc,
            "view": "finite population" if finite else "superpopulation",
            "created_at": _now(),
            "above_one_recall": res.above_one["recall"],
            "incoherent_fraction": 1.0 - ok,
        }
    )
    res._warn_if_flagged()
    return res
