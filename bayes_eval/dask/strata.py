"""Strata of an out-of-core population and their keyed sampler.

:class:`DaskStrata` implements :class:`bayes_eval._protocols.StrataLike` (exact per-stratum facts,
lazy assignment) without subclassing the in-memory :class:`~bayes_eval.Strata`, whose
``assignment`` array and ``members`` it cannot offer. :class:`DaskStratumSampler` gives the same
proposals as :class:`bayes_eval._sampler.KeyedStratumSampler`: one *reservoir* pass keeps, per
stratum, the items with the smallest keys :func:`bayes_eval._sampler.item_keys` (bottom-k per
piece, merged); later batches are served from it, and a stratum that runs out is refilled by a
further pass over the items whose (key, id) exceed the last one served. Driver memory: K x
reservoir items.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (sampling within score strata).
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from .._protocols import PopulationLike, strata_repr
from .._sampler import _check_seed, item_keys
from .._score_histogram import index_dtype
from .._validation import check_positive_int
from ..models._profile import ScoreProfile, _check_bins, _check_kind, _check_max_cells
from ..strata import Strata
from ._dataset import PieceSet
from ._pieces import Columns, Piece, as_bool_predictions, read_piece
from ._profile import profile_pieces
from ._stratify import StrataPlan, assign, assign_frame

__all__ = ["DEFAULT_RESERVOIR", "DaskStrata", "DaskStratumSampler"]

#: items per stratum kept by the first reservoir pass: a refill is a full pass, so the reservoir
#: should cover the labels an audit will want per stratum (8192 x K x 24 bytes on the driver)
DEFAULT_RESERVOIR = 8192


# ====================================================================== strata
class DaskStrata:
    """Strata of a :class:`~bayes_eval.dask.DaskPopulation`: exact per-stratum facts, lazy
    assignment.

    ``sizes``, ``predicted``, ``score_min`` and ``score_max`` are exact (from a counting pass);
    :attr:`assignment` is a lazy Dask Series (index = global position) that is never computed on
    the driver. :meth:`stratum_of` looks the items up by position (a pass, for user calls);
    :meth:`make_sampler` returns the out-of-core :class:`DaskStratumSampler`.

    ``score_mean`` (mean score per stratum, from the counting pass) is given for designs and
    the audit, which would otherwise need the assignment in memory; being summed piece by piece,
    it may differ from the in-memory mean in the last bits.

    Parameters
    ----------
    population : DaskPopulation
    pieces : PieceSet
        Where the population's passes run.
    layout : StrataPlan
        From :func:`bayes_eval.dask._stratify.stratify_pieces`.
    """

    __slots__ = (
        "_profiles",
        "assignment",
        "method",
        "pieces",
        "plan",
        "population",
        "predicted",
        "requested",
        "score_max",
        "score_mean",
        "score_min",
        "sizes",
        "variable",
    )

    def __init__(self, population: PopulationLike, pieces: PieceSet, layout: StrataPlan) -> None:
        self.population = population
        self.pieces = pieces
        self.plan = layout.plan
        self.method = layout.method
        self.variable = layout.variable
        self.requested = layout.requested
        self.predicted = np.asarray(layout.predicted, dtype=bool)
        self.sizes = np.asarray(layout.sizes, dtype=np.int64)
        self.score_min = np.asarray(layout.score_min, dtype=np.float64)
        self.score_max = np.asarray(layout.score_max, dtype=np.float64)
        self.score_mean = np.asarray(layout.score_mean, dtype=np.float64)
        for arr in (self.predicted, self.sizes, self.score_min, self.score_max, self.score_mean):
            arr.flags.writeable = False
        meta = pd.Series([], dtype=index_dtype(self.n_strata), name="stratum")
        self.assignment = pieces.from_map(assign_frame, meta, self.plan)
        self._profiles: dict[tuple, ScoreProfile] = {}

    @property
    def n_strata(self) -> int:
        """Number of strata K."""
        return int(self.sizes.shape[0])

    @property
    def edges(self) -> dict[str, np.ndarray]:
        """Lower edges of the stratification variable per side ("negative", "positive")."""
        return {
            ("positive" if s else "negative"): v["edges"].copy()
            for s, v in self.plan["sides"].items()
        }

    def stratum_of(self, positions: np.ndarray) -> np.ndarray:
        """Stratum of the items at global ``positions`` (reads the pieces holding them)."""
        return self._assign_rows(self.pieces.rows_at(positions))

    def strata_of_ids(self, ids: ArrayLike) -> np.ndarray:
        """Stratum of the items with ``ids`` (one pass)."""
        return self._assign_rows(self.pieces.lookup(ids))

    def _assign_rows(self, rows: pd.DataFrame) -> np.ndarray:
        return assign(
            rows["score"].to_numpy(dtype=float), rows["prediction"].to_numpy(bool), self.plan
        )

    def to_dataset(self) -> xr.Dataset:
        """Per-stratum facts as an :class:`xarray.Dataset` over dim ``stratum``; the same as
        :meth:`bayes_eval.Strata.to_dataset`, which reads only :class:`StrataLike` members."""
        return Strata.to_dataset(self)  # type: ignore[arg-type]

    def members(self, k: int) -> np.ndarray:
        """Refused: it would materialise a stratum on the driver."""
        raise TypeError(
            "DaskStrata.members would materialise a stratum on the driver; use "
            "strata.assignment (a lazy Dask Series) or make_sampler(seed).draw(k, m)"
        )

    def compute_score_profile(
        self, *, bins: int = 256, max_cells: int = 16, kind: str = "auto"
    ) -> ScoreProfile:
        """The pooled model's per-stratum histogram of the score covariate, out of core.

        The same :class:`~bayes_eval.models._profile.ScoreProfile` as
        :func:`bayes_eval.models._profile.score_profile` of the population and assignment in
        memory (up to the order of the floating-point sums, ~1e-15 relative): one pass over the
        pieces (margins: 2-3 more, once per population, for the median and standard deviation),
        then cached, so later looks of an audit never scan the population.
        :func:`bayes_eval.models._profile.score_profile_of` calls it for these strata.
        """
        kind = _check_kind(kind)
        key = (_check_bins(bins), _check_max_cells(max_cells), kind)
        if key not in self._profiles:
            pop = self.population
            self._profiles[key] = profile_pieces(
                self.pieces,
                pop.scan_summary,
                self.plan,
                self.sizes,
                self.predicted,
                bins=key[0],
                max_cells=key[1],
                kind=kind,
                standardisation=getattr(pop, "margin_standardisation", None),
            )
        return self._profiles[key]

    def make_sampler(self, seed: int, *, reservoir: int = DEFAULT_RESERVOIR) -> DaskStratumSampler:
        """The out-of-core keyed sampler (same proposals as the in-memory one)."""
        return DaskStratumSampler(self, seed, reservoir=reservoir)

    def __repr__(self) -> str:
        return strata_repr(self)


# ====================================================================== reservoir kernels
def _bottom(keys: np.ndarray, ids: np.ndarray, r: int) -> np.ndarray:
    """Indices of the ``r`` smallest (key, id), in increasing order."""
    if keys.shape[0] > r:
        cut = np.partition(keys, r - 1)[r - 1]
        sel = np.flatnonzero(keys <= cut)  # keep key ties at the cut: the id decides
    else:
        sel = np.arange(keys.shape[0])
    order = np.lexsort((ids[sel], keys[sel]))
    return sel[order[:r]]


def _reservoir_piece(
    piece: Piece, fs: Any, cols: Columns, plan: dict, seed: int, want: dict[int, tuple]
) -> dict:
    """For each wanted stratum ``k -> (r, after_key, after_id, cutoff)``: the ``r`` smallest
    (key, id) after the frontier among items with key <= cutoff (None: no cutoff)."""
    d = read_piece(piece, fs, cols, ("score", "pred", "id"))
    ids = d["id"]
    keys = item_keys(ids, seed)
    cuts = [w[3] for w in want.values()]
    if any(c is None for c in cuts):
        idx = np.arange(ids.shape[0])
    else:  # keys are uniform: the cutoff leaves few candidates, whose strata are then computed
        idx = np.flatnonzero(keys <= np.uint64(max(cuts)))
    keys, ids = keys[idx], ids[idx]
    score = d["score"][idx]
    st = assign(score, as_bool_predictions(d["pred"][idx]), plan)
    out = {}
    for k, (r, akey, aid, cut) in want.items():
        m = st == k
        if cut is not None:
            m &= keys <= np.uint64(cut)
        if akey is not None:
            m &= (keys > np.uint64(akey)) | ((keys == np.uint64(akey)) & (ids > aid))
        sel = np.flatnonzero(m)
        if sel.size == 0:
            continue
        b = sel[_bottom(keys[sel], ids[sel], r)]
        out[k] = (keys[b], ids[b], score[b])
    return out


def _combine_reservoir(parts: list[dict], want: dict[int, tuple]) -> dict:
    """Merge bottom-r reservoirs (associative, so it can run as a tree)."""
    out = {}
    for k, w in want.items():
        got = [p[k] for p in parts if k in p]
        if not got:
            continue
        keys = np.concatenate([g[0] for g in got])
        ids = np.concatenate([g[1] for g in got])
        scores = np.concatenate([g[2] for g in got])
        b = _bottom(keys, ids, w[0])
        out[k] = (keys[b], ids[b], scores[b])
    return out


def _cutoff(r: int, left: int, front: int | None) -> int | None:
    """Key cutoff above which an item is very unlikely among the next ``r`` of ``left`` items
    whose keys are uniform on [front, 2^64): the expected count below it is
    ``r + 6 sqrt(r) + 20`` (a Poisson shortfall below ``r`` has probability < 1e-9, and is
    detected and repaired by a pass without cutoff)."""
    lam = r + 6.0 * np.sqrt(r) + 20.0
    if lam >= left:
        return None
    lower = 0 if front is None else int(front)
    return lower + int(((1 << 64) - lower) * (lam / left))


# ====================================================================== sampler
class DaskStratumSampler:
    """Out-of-core bottom-k sampler: items of each stratum in increasing (key, id) order.

    Same contract and the same proposals as :class:`bayes_eval._sampler.KeyedStratumSampler`:
    keys are :func:`bayes_eval._sampler.item_keys` of (id, seed), so the order depends on ids and
    the seed only, never on the partitioning.

    The first draw runs one pass that keeps, per stratum, the ``reservoir`` items with the
    smallest keys (bottom-k per piece, merged by a tree reduction). Draws are then served from
    memory in O(m). A stratum whose reservoir runs out is refilled by one more pass over the
    items after the last (key, id) queued, with a reservoir twice as large each time, so a
    stratum needing ``c`` items costs O(log(c / reservoir)) passes in all.

    Parameters
    ----------
    strata : DaskStrata
    seed : int
    reservoir : int
        Items kept per stratum by the first pass.
    """

    def __init__(
        self, strata: DaskStrata, seed: int, *, reservoir: int = DEFAULT_RESERVOIR
    ) -> None:
        self.strata = strata
        self.seed = _check_seed(seed)
        self.reservoir = check_positive_int(reservoir, "reservoir")
        k = strata.n_strata
        self.sizes = np.asarray(strata.sizes, dtype=np.int64)
        self.drawn = np.zeros(k, dtype=np.int64)
        self.passes = 0
        self._queue: list[tuple[np.ndarray, np.ndarray] | None] = [None] * k  # (ids, scores)
        self._head = np.zeros(k, dtype=np.int64)
        self._queued = np.zeros(k, dtype=np.int64)
        self._frontier: list[tuple[int, Any] | None] = [None] * k
        self._next = np.full(k, self.reservoir, dtype=np.int64)

    def _refill(self, need: dict[int, int]) -> None:
        """One pass: queue at least ``need[k]`` more items of each stratum k in ``need``."""
        want = {}
        for k, m in need.items():
            left = int(self.sizes[k] - self._queued[k])
            r = int(min(left, max(m, self._next[k])))
            if r <= 0:  # everything of stratum k is queued already
                continue
            front = self._frontier[k]
            fkey, fid = (None, None) if front is None else front
            want[k] = (r, fkey, fid, _cutoff(r, left, fkey))
            self._next[k] *= 2
        if not want:
            return
        res = self._pass(want)
        found = {k: (res[k][0].shape[0] if k in res else 0) for k in want}
        short = {k: (*w[:3], None) for k, w in want.items() if w[3] is not None and found[k] < w[0]}
        if short:  # the cutoff left too few candidates (probability < 1e-9): redo without
            res.update(self._pass(short))
        for k in want:
            keys, ids, scores = res.get(k, (np.empty(0, np.uint64), np.empty(0), np.empty(0)))
            if ids.size:
                self._frontier[k] = (int(keys[-1]), ids[-1])
            old = self._queue[k]
            h = int(self._head[k])
            if old is not None:
                ids = np.concatenate([old[0][h:], ids])
                scores = np.concatenate([old[1][h:], scores])
            self._queue[k] = (ids, scores)
            self._head[k] = 0
            self._queued[k] += keys.shape[0]

    def _pass(self, want: dict[int, tuple]) -> dict:
        combine = functools.partial(_combine_reservoir, want=want)
        pieces, plan = self.strata.pieces, self.strata.plan
        res = pieces.reduce(_reservoir_piece, combine, plan, self.seed, want)
        self.passes += 1
        return res

    def _check(self, k: Any, m: Any) -> tuple[int, int]:
        kk = self.sizes.shape[0]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= int(k) < kk:
            raise ValueError(f"stratum k={k!r} is outside 0..{kk - 1}")
        if isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 0:
            raise ValueError(f"m={m!r} must be a non-negative integer")
        k, m = int(k), int(m)
        if m > self.sizes[k] - self.drawn[k]:
            raise ValueError(
                f"m={m} is more than the {int(self.sizes[k] - self.drawn[k])} items of stratum "
                f"{k} not yet drawn"
            )
        return k, m

    def _have(self, k: int) -> int:
        q = self._queue[k]
        return 0 if q is None else q[0].shape[0] - int(self._head[k])

    def prefetch(self) -> None:
        """Run the first reservoir pass for every stratum now (otherwise on the first draw)."""
        need = {
            k: 1
            for k in range(self.sizes.shape[0])
            if self._queue[k] is None and self.sizes[k] > self.drawn[k]
        }
        if need:
            self._refill(need)

    def _take(self, k: Any, m: Any) -> tuple[np.ndarray, np.ndarray]:
        k, m = self._check(k, m)
        if m == 0:
            return np.empty(0, dtype=self._id_dtype()), np.empty(0)
        if self._have(k) < m:
            if all(q is None for q in self._queue):
                self.prefetch()
            if self._have(k) < m:
                self._refill({k: m - self._have(k)})
        q = self._queue[k]
        assert q is not None
        h = int(self._head[k])
        ids, scores = q[0][h : h + m], q[1][h : h + m]
        self._head[k] = h + m
        self.drawn[k] += m
        return ids.copy(), scores.copy()

    def _id_dtype(self) -> Any:
        return self.strata.pieces.id_dtype()

    def draw(self, k: int, m: int) -> np.ndarray:
        """Ids of the next ``m`` items of stratum ``k`` in key order (never repeated)."""
        return self._take(k, m)[0]

    def draw_with_scores(self, k: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Ids and scores of the next ``m`` items of stratum ``k``."""
        return self._take(k, m)

    def skip(self, k: int, c: int) -> None:
        """Advance stratum ``k`` by ``c`` items, as if they had been drawn."""
        self._take(k, c)

    def available(self) -> np.ndarray:
        """Items not yet drawn, per stratum."""
        return self.sizes - self.drawn
