"""Pair recall from both classifiers' flags over the universe and labelled items.

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``). The universe is
split into the disjoint cells :math:`A_{12}`, :math:`A_1 \\setminus A_2`,
:math:`A_2 \\setminus A_1` and *neither*; each cell's on-topic count is drawn from its labels
(finite population), so the precisions are coherent by construction, and the capture-recapture
layer (:mod:`bayes_eval.recall._capture`) draws the on-topic items caught by neither classifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from .._draws import DEFAULT_DRAWS
from .._sampling import draw_beta, draw_remainder
from .._validation import RNGLike, as_generator, check_bool, check_positive_int
from ..labels import as_label_values
from ..priors import BetaSpec, resolve_prior
from ._capture import cell_resolution
from ._common import (
    PairRecall,
    _check_capture_prior,
    _check_delta,
    _check_sizes,
    _delta_1,
    _pack_pair,
    capture_block,
    pair_quantities,
)
from .pairs import EQ1_NAMES

__all__ = ["SELECTIONS", "pair_recall_from_flags"]

#: selection kinds accepted by :func:`pair_recall_from_flags`
SELECTIONS = ("flags", "topic")


def _as_flags(values: Any, name: str, length: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D array of booleans")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise TypeError(
                f"{name} has dtype {arr.dtype} or values other than 0/1; allowed: "
                "booleans (or 0/1) over the universe"
            )
        arr = arr.astype(bool)
    if length is not None and arr.shape[0] != length:
        raise ValueError(
            f"{name} has length {arr.shape[0]}; allowed: length {length} (one flag per item of "
            "the universe, like the other flags)"
        )
    return arr


def _as_flag_matrix(flags: Any, name: str = "flags") -> np.ndarray:
    if isinstance(flags, np.ndarray) and flags.ndim == 2:
        cols = [flags[:, j] for j in range(flags.shape[1])]
    elif isinstance(flags, Sequence | np.ndarray):
        cols = list(flags)
    else:
        raise TypeError(
            f"{name} has type {type(flags).__name__}; allowed: a (items, classifiers) boolean "
            "array or a sequence of 1-D boolean arrays"
        )
    if not cols:
        raise ValueError(f"{name} holds no classifier")
    first = _as_flags(cols[0], f"{name}[0]")
    out = [first] + [
        _as_flags(c, f"{name}[{j}]", first.shape[0]) for j, c in enumerate(cols[1:], 1)
    ]
    return np.stack(out, axis=1)


def _labelled_positions(labelled: Any, n_items: int, ids: Any) -> np.ndarray:
    arr = np.asarray(labelled)
    if arr.ndim != 1:
        raise ValueError(f"labelled has shape {arr.shape}; allowed: a 1-D sequence")
    if ids is not None:
        index = pd.Index(np.asarray(ids))
        if index.size != n_items:
            raise ValueError(f"ids has length {index.size}; allowed: {n_items} (one per item)")
        if not index.is_unique:
            raise ValueError("ids contains duplicates; allowed: unique ids")
        pos = index.get_indexer(arr)
        if (pos < 0).any():
            bad = arr[int(np.flatnonzero(pos < 0)[0])]
            raise ValueError(f"labelled contains id {bad!r}, which is not in ids")
        return pos.astype(np.int64)
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(
            f"labelled has dtype {arr.dtype}; allowed: integer positions into the flags (or "
            "pass ids= to label by id)"
        )
    pos = arr.astype(np.int64)
    if pos.size and (pos.min() < 0 or pos.max() >= n_items):
        bad = pos[(pos < 0) | (pos >= n_items)][0]
        raise ValueError(f"labelled contains position {bad}; allowed: 0 .. {n_items - 1}")
    return pos


def _labelled_cells(flags, labelled, labels, ids, selection):
    """Validate the raw inputs; return (codes of all items, codes/values of label-blind labels,
    codes of topic-sample items)."""
    n_items, k = flags.shape
    pos = _labelled_positions(labelled, n_items, ids)
    values = as_label_values(labels, "labels")
    if values.shape[0] != pos.shape[0]:
        raise ValueError(
            f"labels has length {values.shape[0]} but labelled has {pos.shape[0]}; allowed: one "
            "label per labelled item"
        )
    if selection is None:
        sel = np.full(pos.shape[0], "flags", dtype=object)
    else:
        sel = np.asarray(selection, dtype=object)
        if sel.shape != pos.shape:
            raise ValueError(
                f"selection has shape {sel.shape}; allowed: one entry per labelled item "
                f"({pos.shape[0]})"
            )
        bad = ~np.isin(sel, SELECTIONS)
        if bad.any():
            raise ValueError(
                f"selection contains {sel[bad][0]!r}; allowed: " + ", ".join(map(repr, SELECTIONS))
            )
    uniq, counts = np.unique(pos, return_counts=True)
    if (counts > 1).any():
        raise ValueError(
            f"labelled contains item {uniq[counts > 1][0]} more than once; allowed: each item once "
            "(an item drawn by two samples is labelled once and counts once for its cell)"
        )
    topic = sel == "topic"
    if (values[topic] == 0).any():
        raise ValueError(
            "an item with selection='topic' is labelled 0; allowed: only on-topic items (label "
            "1) can come from a uniform sample of the on-topic set T"
        )
    weights = 1 << np.arange(k)
    codes = flags.astype(np.int64) @ weights
    blind = ~topic
    return codes, codes[pos[blind]], values[blind], codes[pos[topic]]


def _cell_positives(sizes, n, h, a, b, draws, gen, finite_population):
    theta = draw_beta(a + h, b + n - h, draws, gen)
    if finite_population:
        pos = draw_remainder(theta, sizes - n, gen)
        pos += h[None, :]
    else:
        pos = theta * sizes[None, :]
    return theta, pos


def pair_recall_from_flags(
    flags_1: ArrayLike,
    flags_2: ArrayLike,
    labelled: ArrayLike,
    labels: ArrayLike,
    *,
    ids: ArrayLike | None = None,
    selection: ArrayLike | None = None,
    prior: BetaSpec = "jeffreys",
    finite_population: bool = True,
    draws: int = DEFAULT_DRAWS,
    rng: RNGLike = None,
    delta_1: float | tuple[float, float] = 1.0,
    capture_prior: str | float = "jeffreys",
) -> PairRecall:
    """Pair recall from both classifiers' flags over the universe and labelled items.

    The universe is split into the disjoint cells :math:`A_{12}`, :math:`A_1 \\setminus A_2`,
    :math:`A_2 \\setminus A_1` and *neither*; each cell :math:`c` has its own positive rate
    :math:`q_c \\sim \\mathrm{Beta}(a + h_c, b + n_c - h_c)` from the labels that fall in it, and
    (``finite_population=True``) its on-topic count
    :math:`P_c = h_c + \\mathrm{Binomial}(N_c - n_c, q_c)`. Then :math:`|T \\cap A_1| = P_{12} +
    P_{1 \\setminus 2}`, the precisions are :math:`p_1 = |T \\cap A_1| / |A_1|`, ... and every
    quantity of :func:`pair_recall` follows draw by draw (Eq. 2 with :math:`|U|` = the number of
    flags). Because the cells are disjoint, the three precisions are coherent.

    Which labelled item counts for what
        Every item with ``selection="flags"`` (the default) counts once, for the cell of its flags,
        whichever sample drew it. This is valid whenever the items were chosen at random *given
        their flags*, without looking at the label: uniform samples of :math:`A_1`,
        :math:`A_2`, :math:`A_{12}`, of the universe, or any mixture of these (a uniform sample of
        :math:`A_1` is, within :math:`A_{12}`, a uniform sample of :math:`A_{12}`). Items chosen
        by score or by judgement must not be passed. An item drawn by two samples is labelled
        once and passed once (duplicates are refused).
        Items with ``selection="topic"`` come from a uniform sample of the on-topic set
        :math:`T` (e.g. the positives found by an earlier uniform sample of the universe, or a
        complete list of positives' random subset); they must be labelled 1, they are *not* used
        for any precision (they were chosen for being positive), and only their flag pattern is
        used, to estimate :math:`\\delta_1` (``delta_1_topic``).

    Extra quantities
        When label-blind labels fall in the *neither* cell (e.g. a uniform sample of the
        universe), :math:`|T|` is estimated directly: ``total_positives_sampled``,
        ``recall_1_sampled``, ``recall_2_sampled`` (no independence assumption) and
        ``delta_1`` :math:`= |T \\cap A_{12}| |T| / (|T \\cap A_1| |T \\cap A_2|)` (Assumption 1).
        With topic-sample items, ``delta_1_topic`` from the cell shares
        :math:`\\pi \\sim \\mathrm{Dirichlet}(m + a)` of those items: :math:`\\delta_1 = \\pi_{12} /
        ((\\pi_{12} + \\pi_{1 \\setminus 2})(\\pi_{12} + \\pi_{2 \\setminus 1}))`.

    What the recalls target
        ``recall_1``, ``recall_2`` and ``total_positives`` are the *realised* recalls
        :math:`|T \\cap A_i| / |T|` and topic size, from the capture-recapture layer
        (:mod:`bayes_eval.recall._capture`, as in :func:`~bayes_eval.recall.pairs.pair_recall`)
        applied to the drawn cell counts :math:`x_{12} = P_{12}`, :math:`x_1 = P_{1 \\setminus 2}`,
        :math:`x_2 = P_{2 \\setminus 1}`:
        :math:`\\pi \\sim \\mathrm{Dirichlet}(x + \\alpha)`, :math:`x_0 \\sim
        \\mathrm{NegBin}(x_{12} + x_1 + x_2, r_1 + r_2 - \\delta_1 r_1 r_2)` truncated to the
        *neither* cell (at least its labelled positives, at most its size less its labelled
        negatives). The plug-in Eq. (1) ``recall_1_eq1`` :math:`= P_{12} / (P_{12} +
        P_{2 \\setminus 1})` targets the realised ratio :math:`|T \\cap A_{12}| / |T \\cap A_2|`,
        which differs from the realised recall by about :math:`\\sqrt{r_1(1 - r_1) / |T \\cap
        A_2|}` even for independent classifiers: that capture noise is in ``recall_1``, not in
        ``recall_1_eq1``. The labels in the *neither* cell only bound :math:`x_0` here; the
        ``*_sampled`` quantities use them without the independence assumption.

    Parameters
    ----------
    flags_1, flags_2 : array of bool
        Flags of both classifiers over the universe (same length, :math:`|U|`).
    labelled : array
        Positions (0 .. |U|-1) of the labelled items, or their ids when ``ids`` is given.
    labels : array of 0/1 or bool
        Their labels (1 = on topic).
    ids : array, optional
        Ids of the universe's items, aligned with the flags.
    selection : array of str, optional
        Per labelled item, ``"flags"`` (default) or ``"topic"``; see above.
    prior : "jeffreys", "uniform" or (a, b)
        Beta prior of every cell's positive rate (the Dirichlet of ``delta_1_topic`` uses
        concentration ``a``).
    finite_population : bool
        Draw each cell's unlabelled remainder (quantities of the actual universe) or use
        :math:`N_c q_c` (superpopulation).
    draws : int
    rng : int, Generator or None
    delta_1 : float or (float, float)
        :math:`\\delta_1` assumed by the capture layer, or a sensitivity range (as in
        :func:`~bayes_eval.recall.pairs.pair_recall`).
    capture_prior : "jeffreys", "uniform" or float
        Dirichlet concentration of the capture layer.

    Returns
    -------
    PairRecall
        ``observed_data`` holds labels and positives per cell and the topic-sample counts.

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, Eq. (1),
    Eq. (2), Assumption 1.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.recall import pair_recall_from_flags
    >>> rng = np.random.default_rng(0)
    >>> topic = rng.random(100_000) < 0.01
    >>> f1 = np.where(topic, rng.random(100_000) < 0.5, rng.random(100_000) < 0.002)
    >>> f2 = np.where(topic, rng.random(100_000) < 0.6, rng.random(100_000) < 0.004)
    >>> pick = np.concatenate([rng.choice(np.flatnonzero(f), 300, replace=False)
    ...                        for f in (f1, f2)])
    >>> pick = np.unique(pick)
    >>> res = pair_recall_from_flags(f1, f2, pick, topic[pick], draws=4000, rng=0)
    >>> abs(res.mean("recall_1") - 0.5) < 0.06
    True
    """
    f1 = _as_flags(flags_1, "flags_1")
    f2 = _as_flags(flags_2, "flags_2", f1.shape[0])
    check_bool(finite_population, "finite_population")
    draws = check_positive_int(draws, "draws")
    delta = _check_delta(delta_1)
    alpha = _check_capture_prior(capture_prior)
    a_arr, b_arr, desc = resolve_prior(prior, 1)
    a, b = float(a_arr[0]), float(b_arr[0])
    flags = np.stack([f1, f2], axis=1)
    codes, lab_codes, lab_values, topic_codes = _labelled_cells(
        flags, labelled, labels, ids, selection
    )
    # cell code: bit 0 = classifier 1, bit 1 = classifier 2 -> 0 neither, 1 A1 only, 2 A2 only,
    # 3 both. Reported order: A12, A1_only, A2_only, neither.
    order = np.array([3, 1, 2, 0])
    sizes = np.bincount(codes, minlength=4)[order].astype(np.int64)
    n = np.bincount(lab_codes, minlength=4)[order].astype(np.int64)
    h = np.bincount(lab_codes, weights=lab_values, minlength=4)[order].astype(np.int64)
    s12 = int(sizes[0])
    s1, s2 = int(sizes[0] + sizes[1]), int(sizes[0] + sizes[2])
    _check_sizes(s1, s2, s12)
    u = int(codes.size)
    pair_n = n[:3]
    if (pair_n[sizes[:3] > 0] == 0).all():
        raise ValueError(
            "no label-blind labelled item falls in A1 ∪ A2; allowed: labels of uniform samples "
            "of A1, A2, A12 (or of the universe)"
        )
    gen = as_generator(rng)
    _, pos = _cell_positives(sizes, n, h, a, b, draws, gen, finite_population)
    t12, t1o, t2o, t0 = pos.T
    t1, t2 = t12 + t1o, t12 + t2o
    x0_low = float(h[3])
    x0_high = float(sizes[3] - (n[3] - h[3]))
    values, by_delta, grid, support, source = capture_block(
        t12, t1o, t2o, alpha=alpha, delta=delta, gen=gen, x0_low=x0_low, x0_high=x0_high
    )
    t12, t1o, t2o, t0 = t12[source], t1o[source], t2o[source], t0[source]
    t1, t2 = t12 + t1o, t12 + t2o
    plug = pair_quantities(t1 / s1, t2 / s2, t12 / s12, s1, s2, s12, u)
    values.update({EQ1_NAMES.get(k, k): v for k, v in plug.items()})
    if n[3] > 0:
        total = t1 + t2o + t0
        with np.errstate(divide="ignore", invalid="ignore"):
            values["total_positives_sampled"] = total
            values["recall_1_sampled"] = t1 / total
            values["recall_2_sampled"] = t2 / total
        values["delta_1"] = _delta_1(t12, t1, t2, total)
    m = np.bincount(topic_codes, minlength=4)[order].astype(np.int64)
    if m.sum() > 0:
        pi = gen.dirichlet(m + a, size=draws)
        values["delta_1_topic"] = _delta_1(
            pi[:, 0], pi[:, 0] + pi[:, 1], pi[:, 0] + pi[:, 2], np.ones(draws)
        )
    cells = ["A12", "A1_only", "A2_only", "neither"]
    observed = xr.Dataset(
        {"n": ("cell", n), "h": ("cell", h), "topic_sample": ("cell", m)},
        coords={"cell": cells},
    )
    constant = xr.Dataset(
        {
            "size": ("cell", sizes),
            "prior_a": ((), a),
            "prior_b": ((), b),
            "universe": ((), float(u)),
        },
        coords={"cell": cells},
    )
    view = "finite population" if finite_population else "superpopulation"
    result = _pack_pair(
        values,
        observed,
        constant,
        draws,
        desc,
        (s1, s2, s12),
        u,
        int(n.sum() + m.sum()),
        {
            "input": "flags",
            "view": view,
            "delta_support_fraction": support,
            "cell_resolution": float(cell_resolution(t1o, t2o)),
        },
        by_delta=by_delta,
        grid=grid,
        delta=delta,
        alpha=alpha,
    )
    result._warn_if_flagged()
    return result
