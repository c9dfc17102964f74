r"""The pooled model's score profile of out-of-core strata: one histogram pass over the pieces.

The pooled model (:mod:`bayes_eval.models.pooled`) needs, per stratum, the histogram of the
covariate :math:`x` (the logit of a probability score, or a standardised margin) on a global grid
(:class:`~bayes_eval.models._profile.ScoreProfile`). In memory it is computed from the scores and
the assignment arrays; here every task reads one piece, assigns its items to strata
(:func:`bayes_eval.dask._stratify.assign`) and returns the per-(stratum, cell) counts and sums of
:math:`x` (:meth:`~bayes_eval.models._profile.CovariateGrid.histogram`, the very function the
in-memory path calls); a tree reduction adds them up and
:func:`~bayes_eval.models._profile.profile_from_cells` (shared too) builds the profile. Only the
order of the floating-point sums differs from memory (per piece, then across pieces), so the two
profiles agree to about 1e-15 relative.

Passes: one for probability scores (the grid's range is the covariate of the scan's score range,
the covariate being monotone in the score). Margins are standardised by the population's median
and standard deviation: one moments pass (per-piece mean and centred sum of squares, merged by
Chan et al.'s pairwise update) and the exact median by the nested histograms of
:func:`bayes_eval.dask._stratify.order_statistics` (one pass collects the values when
``N <= COLLECT_LIMIT``, otherwise a histogram pass first), computed once per population.
Driver memory: ``K x bins`` counts and sums per piece in the reduction.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (web-scale populations, score
strata).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..models._profile import (
    FULL_CLIP,
    CovariateGrid,
    ScoreProfile,
    covariate,
    probability_clip,
    profile_from_cells,
    resolve_kind,
)
from ._dataset import PieceSet, Scan
from ._pieces import Columns, Piece, as_bool_predictions, read_piece
from ._stratify import assign, order_statistics

__all__ = ["margin_standardisation", "profile_pieces"]


# ====================================================================== per-piece kernels
def _moments_piece(piece: Piece, fs: Any, cols: Columns) -> tuple[int, float, float]:
    """(count, mean, centred sum of squares) of one piece's scores."""
    s = read_piece(piece, fs, cols, ("score",))["score"]
    if s.size == 0:
        return 0, 0.0, 0.0
    mean = float(s.mean())
    return int(s.size), mean, float(np.square(s - mean).sum())


def _combine_moments(parts: list[tuple[int, float, float]]) -> tuple[int, float, float]:
    """Chan, Golub & LeVeque's pairwise update of (count, mean, centred sum of squares)."""
    n, mean, m2 = 0, 0.0, 0.0
    for nb, mb, m2b in parts:
        if nb == 0:
            continue
        tot = n + nb
        delta = mb - mean
        mean += delta * (nb / tot)
        m2 += m2b + delta * delta * (n * nb / tot)
        n = tot
    return n, mean, m2


def _cells_piece(
    piece: Piece, fs: Any, cols: Columns, plan: dict, grid: CovariateGrid
) -> tuple[np.ndarray, np.ndarray]:
    """Counts and sums of the covariate per (stratum, cell) of one piece."""
    d = read_piece(piece, fs, cols, ("score", "pred"))
    score = d["score"]
    stratum = assign(score, as_bool_predictions(d["pred"]), plan)
    return grid.histogram(grid.covariate(score), stratum, plan["n_strata"])


def _combine_cells(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    cnt, tot = parts[0][0].copy(), parts[0][1].copy()
    for c, t in parts[1:]:
        cnt += c
        tot += t
    return cnt, tot


# ====================================================================== passes
def margin_standardisation(data: PieceSet, scan: Scan) -> tuple[float, float]:
    """(median, standard deviation; 1 when it is 0) of the scores, as
    :func:`bayes_eval.models._profile.margin_standardisation` computes in memory: the exact
    median (mean of the two middle order statistics when N is even, as :func:`numpy.median`)
    and the population standard deviation (``ddof=0``), in 2 passes (3 beyond ``COLLECT_LIMIT``
    items)."""
    n, _, m2 = data.reduce(_moments_piece, _combine_moments)
    sd = float(np.sqrt(m2 / n))
    ranks = sorted({(n - 1) // 2, n // 2})
    spec = {"variable": "score", "kind": "margin", "threshold": 0.0}
    found = order_statistics(data, spec, {None: (ranks, scan.score_min, scan.score_max, n)})[None]
    median = float(np.mean(np.array([found[r] for r in ranks])))
    return median, (sd if sd > 0 else 1.0)


def profile_pieces(
    data: PieceSet,
    scan: Scan,
    plan: dict,
    sizes: np.ndarray,
    predicted: np.ndarray,
    *,
    bins: int,
    max_cells: int,
    kind: str,
    standardisation: Any = None,
) -> ScoreProfile:
    """The :class:`~bayes_eval.models._profile.ScoreProfile` of the strata ``plan`` in one pass
    (the same profile as :func:`bayes_eval.models._profile.score_profile` of the population in
    memory, up to the order of the sums).

    Parameters
    ----------
    data, scan : PieceSet, Scan
        The population's pieces and its scan (score range).
    plan, sizes, predicted
        From :class:`bayes_eval.dask._stratify.StrataPlan`.
    bins, max_cells, kind
        As for :func:`~bayes_eval.models._profile.score_profile`.
    standardisation : callable, optional
        Returns (median, sd) of margin scores (cached by the caller); default: computed here by
        :func:`margin_standardisation`.
    """
    kind = resolve_kind(kind, scan.score_min, scan.score_max)
    if kind == "probability":
        shift, scale = 0.0, 1.0
    elif standardisation is not None:
        shift, scale = standardisation()
    else:
        shift, scale = margin_standardisation(data, scan)
    clip = probability_clip(scan.inner_min, scan.inner_max) if kind == "probability" else FULL_CLIP
    ends = np.array([scan.score_min, scan.score_max])
    lo, hi = covariate(ends, kind, shift, scale, clip).tolist()
    grid = CovariateGrid(kind, shift, scale, lo, hi, bins, clip)
    sz = np.asarray(sizes, dtype=np.int64)
    pred = np.asarray(predicted, dtype=bool)
    if grid.constant:
        return grid.constant_profile(sz, pred)
    cnt, tot = data.reduce(_cells_piece, _combine_cells, plan, grid)
    if not np.array_equal(cnt.sum(axis=1), sz):  # pragma: no cover - data changed under us
        raise RuntimeError("the profile pass counted other stratum sizes than the strata hold")
    return profile_from_cells(cnt, tot, sz, pred, kind, max_cells)
