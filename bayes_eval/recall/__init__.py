"""Recall of rare topics from classifier pairs (Bommannavar, Kolcz & Rajaraman).

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``) turn recall into a
capture-recapture problem. Two classifiers :math:`C_1, C_2` flag the sets :math:`A_1, A_2` of a
universe :math:`U` (:math:`A_{12} = A_1 \\cap A_2`); :math:`T` is the set of on-topic documents and
:math:`p_1, p_2, p_{12}` the precisions of :math:`A_1, A_2, A_{12}`. If the classifiers fire
independently on on-topic documents (Assumption 1,
:math:`\\delta_1 = P[A_{12}|T] / (P[A_1|T] P[A_2|T]) = 1`), then (their Eq. 1)

.. math::

    r_1 = \\frac{p_{12} |A_{12}|}{p_2 |A_2|}, \\qquad r_2 = \\frac{p_{12} |A_{12}|}{p_1 |A_1|},
    \\qquad \\hat n = |T| = \\frac{p_1 |A_1|\\, p_2 |A_2|}{p_{12} |A_{12}|},

and, with off-topic independence and sparsity, Eq. (2) replaces :math:`p_{12}` by
:math:`1 - (1 - p_1)(1 - p_2) |A_1| |A_2| / (|U| |A_{12}|)`.

Modules

* :mod:`~bayes_eval.recall._capture`: the Bayesian capture-recapture layer (numpy kernels): the
  on-topic items caught by neither classifier, so that the realised recall carries both the
  labelling and the capture noise, with every draw coherent; :math:`\\delta_1` fixed or a range;
  the cell resolution (how well the labels measure the smaller single-caught cell). Every
  realised recall goes through it: Eq. (1) cells, Eq. (2) cells (no labels of :math:`A_{12}`),
  the flags form, and a further classifier's recall over the layer's :math:`|T|`.
* :mod:`~bayes_eval.recall._common`: Eq. (1)/(2) kernels, validators, the result classes
  :class:`PairRecall` and :class:`RecallFromTotal`.
* :mod:`~bayes_eval.recall.pairs`: :func:`pair_recall` (set sizes and precision labels) and
  :func:`recall_from_total` (a further classifier's recall from a pair's :math:`|T|`).
* :mod:`~bayes_eval.recall.flags`: :func:`pair_recall_from_flags` (flags over the universe).
* :mod:`~bayes_eval.recall.totals`: :func:`pairwise_totals`, :func:`compare_totals` (the
  dependence diagnostic with three or more classifiers).
* :mod:`~bayes_eval.recall.cooccurrence`: seed/neighbour keyword pairs (section 6.1.1).
* :mod:`~bayes_eval.recall._simulate`: simulated universes for the coverage tests and benchmark.

References
----------
Bommannavar, Kolcz & Rajaraman, "Recall Estimation for Rare Topic Retrieval from Large Corpuses",
``../shared/seeds/004_bbc0a8a725a042a8.txt`` (Eq. 1, Eq. 2, Assumptions 1-3, section 6 for
:math:`\\hat n` and :math:`\\hat r_{new}`, Tables 3-5).
"""

from __future__ import annotations

from ._capture import DELTA_GRID_POINTS
from ._common import (
    ABOVE_ONE_FLAG,
    PairRecall,
    RecallAboveOneWarning,
    RecallFromTotal,
    eq1_recall,
    eq2_joint_precision,
    pair_quantities,
)
from .cooccurrence import SIMILARITIES, KeywordPair, keyword_flags, keyword_pair, neighbour_terms
from .flags import SELECTIONS, pair_recall_from_flags
from .pairs import pair_recall, recall_from_total
from .totals import PairwiseTotals, compare_totals, pairwise_totals

__all__ = [
    "ABOVE_ONE_FLAG",
    "DELTA_GRID_POINTS",
    "SELECTIONS",
    "SIMILARITIES",
    "KeywordPair",
    "PairRecall",
    "PairwiseTotals",
    "RecallAboveOneWarning",
    "RecallFromTotal",
    "compare_totals",
    "eq1_recall",
    "eq2_joint_precision",
    "keyword_flags",
    "keyword_pair",
    "neighbour_terms",
    "pair_quantities",
    "pair_recall",
    "pair_recall_from_flags",
    "pairwise_totals",
    "recall_from_total",
]
