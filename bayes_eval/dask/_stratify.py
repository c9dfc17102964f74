"""Stratification of an out-of-core population in passes, with the in-memory result.

Per predicted side, a histogram pass of the stratification variable; for ``"equal_size"``
refinement passes that collect the exact values in the histogram bins holding the target ranks,
so the boundaries are the *exact* order statistics :func:`bayes_eval.stratify` uses (3 passes:
histogram, collect, count; one more per re-binning level when a target bin holds over
``COLLECT_LIMIT`` items); 2 passes for the other methods. A final counting pass gives the exact
``N_k``, score ranges and mean scores. The driver holds ``HIST_BINS`` counts per piece and side
and at most ``COLLECT_LIMIT`` values per target bin, whatever N.

References
----------
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (stratification methods, confidence as
the stratification variable).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._score_histogram import index_dtype
from .._stratifiers import STRATIFIERS, equal_size_from_counts
from ..strata import FewerStrataWarning, side_n_strata
from ._dataset import PieceSet, Scan
from ._pieces import Columns, Piece, as_bool_predictions, read_piece

__all__ = ["StrataPlan", "assign", "assign_frame", "order_statistics", "stratify_pieces"]

#: histogram bins of the stratification variable per side and refinement level
HIST_BINS = 4096
#: a histogram bin holding at most this many items is collected exactly on the driver
COLLECT_LIMIT = 1_000_000
#: at most this many distinct values are gathered to repair tied equal_size edges
DISTINCT_LIMIT = 1_000_000
#: size of the sorted "quantile sample" fed to stratifiers that need raw values
QUANTILE_SAMPLE = 1 << 20


@dataclass(frozen=True, slots=True)
class StrataPlan:
    """The result of :func:`stratify_pieces`: exact per-stratum facts (shape ``(K,)``) and the
    ``plan`` that maps (score, predicted side) to a stratum in any task (:func:`assign`):
    ``{"spec": variable spec, "n_strata": K, "sides": {side: {"edges", "rank", "offset"}}}``."""

    plan: dict
    predicted: np.ndarray
    sizes: np.ndarray
    score_min: np.ndarray
    score_max: np.ndarray
    score_mean: np.ndarray
    method: str
    variable: str
    requested: Any


# ====================================================================== per-piece kernels
def _variable(score: np.ndarray, pred: np.ndarray, spec: dict) -> np.ndarray:
    """The stratification variable (same formula as :func:`bayes_eval.strata._confidence`)."""
    if spec["variable"] == "score":
        return score
    if spec["kind"] == "probability":
        return np.where(pred, score, 1.0 - score)
    return np.abs(score - spec["threshold"])


def _bin_index(v: np.ndarray, lo: float, width: float, nbins: int) -> np.ndarray:
    if width <= 0:
        return np.zeros(v.shape, dtype=np.int64)
    idx = np.floor((v - lo) / width)
    return np.clip(idx, 0, nbins - 1).astype(np.int64)


def _in_path(v: np.ndarray, path: tuple, top: dict, side: bool) -> np.ndarray:
    """Values whose nested bin indices equal ``path`` [(lo, width, bin), ...]; the first level's
    bin index of the whole side is computed once per piece (``top`` cache)."""
    lo, width, b = path[0]
    key = (side, lo, width)
    if key not in top:
        top[key] = _bin_index(v, lo, width, HIST_BINS)
    v = v[top[key] == b]
    for lo, width, b in path[1:]:
        v = v[_bin_index(v, lo, width, HIST_BINS) == b]
    return v


def _hist_piece(piece: Piece, fs: Any, cols: Columns, spec: dict, targets: list) -> list:
    """For every target (side, path, mode, (lo, width)) the values of the items of that side
    (False, True; None: all items) whose nested bins equal ``path``, summarised by ``mode``:
    ``"hist"`` (counts over ``HIST_BINS`` sub-bins, min, max), ``"collect"`` (the values) or
    ``"distinct"`` (distinct values and their counts, None beyond ``DISTINCT_LIMIT``)."""
    d = read_piece(piece, fs, cols, ("score", "pred"))
    pred = as_bool_predictions(d["pred"])
    v_all = _variable(d["score"], pred, spec)
    # side None: all items
    by_side = {s: v_all if s is None else v_all[pred == s] for s in {t[0] for t in targets}}
    out: list[Any] = []
    top: dict = {}
    for side, path, mode, sub in targets:
        v = by_side[side]
        if path:
            v = _in_path(v, path, top, side)
        if mode == "collect":
            out.append(v)
        elif mode == "distinct":
            u, c = np.unique(v, return_counts=True)
            out.append(None if u.size > DISTINCT_LIMIT else (u, c.astype(np.int64)))
        else:
            lo, width = sub
            counts = np.bincount(_bin_index(v, lo, width, HIST_BINS), minlength=HIST_BINS)
            out.append(
                (
                    counts.astype(np.int64),
                    float(v.min()) if v.size else np.inf,
                    float(v.max()) if v.size else -np.inf,
                )
            )
    return out


def _combine_hist(parts: list[list], modes: tuple[str, ...]) -> list:
    out: list[Any] = []
    for j, mode in enumerate(modes):
        items = [p[j] for p in parts]
        if mode == "collect":
            out.append(np.concatenate(items))
        elif mode == "distinct":
            if any(x is None for x in items):
                out.append(None)
                continue
            u, inv = np.unique(np.concatenate([x[0] for x in items]), return_inverse=True)
            c = np.bincount(inv, weights=np.concatenate([x[1] for x in items]))
            out.append(None if u.size > DISTINCT_LIMIT else (u, c.astype(np.int64)))
        else:
            out.append(
                (
                    np.sum([x[0] for x in items], axis=0),
                    min(x[1] for x in items),
                    max(x[2] for x in items),
                )
            )
    return out


def _local(v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Number of edges <= v (= ``searchsorted(edges, v, "right")``); one comparison pass per
    edge, several times faster than a binary search for the few edges of a stratification."""
    if edges.shape[0] > 64:
        return np.searchsorted(edges, v, side="right")
    local = np.zeros(v.shape[0], dtype=np.int16)
    for e in edges:
        local += v >= e
    return local


def assign(score: np.ndarray, pred: np.ndarray, plan: dict) -> np.ndarray:
    """Global stratum index of items from their score and predicted side (-1 never occurs)."""
    v = _variable(score, pred, plan["spec"])
    out = np.empty(score.shape[0], dtype=np.int64)
    for side in (False, True):
        m = pred == side
        if not m.any():
            continue
        info = plan["sides"].get(side)
        if info is None:  # pragma: no cover - population changed under us
            raise RuntimeError("an item lies on a predicted side that had no items at stratify")
        out[m] = info["offset"] + info["rank"][_local(v[m], info["edges"])]
    return out


def _count_piece(piece: Piece, fs: Any, cols: Columns, plan: dict) -> dict:
    """Per-side counts and score ranges of the candidate bins ``plan['sides'][s]['edges']``."""
    d = read_piece(piece, fs, cols, ("score", "pred"))
    score, pred = d["score"], as_bool_predictions(d["pred"])
    v = _variable(score, pred, plan["spec"])
    out = {}
    for side, info in plan["sides"].items():
        m = pred == side
        k = info["edges"].shape[0] + 1
        local = _local(v[m], info["edges"])
        s = score[m]
        cnt = np.bincount(local, minlength=k).astype(np.int64)
        lo = np.full(k, np.inf)
        hi = np.full(k, -np.inf)
        np.minimum.at(lo, local, s)
        np.maximum.at(hi, local, s)
        out[side] = (cnt, lo, hi, np.bincount(local, weights=s, minlength=k))
    return out


def _combine_count(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        for side, (cnt, lo, hi, tot) in p.items():
            if side not in out:
                out[side] = (cnt.copy(), lo.copy(), hi.copy(), tot.copy())
            else:
                c0, l0, h0, t0 = out[side]
                out[side] = (c0 + cnt, np.minimum(l0, lo), np.maximum(h0, hi), t0 + tot)
    return out


def _range_piece(piece: Piece, fs: Any, cols: Columns, spec: dict) -> dict:
    d = read_piece(piece, fs, cols, ("score", "pred"))
    pred = as_bool_predictions(d["pred"])
    v = _variable(d["score"], pred, spec)
    out = {}
    for s in (False, True):
        x = v[pred == s]
        if x.size:
            out[s] = (float(x.min()), float(x.max()), int(x.size))
    return out


def _combine_range(parts: list[dict]) -> dict:
    out: dict = {}
    for p in parts:
        for s, (lo, hi, c) in p.items():
            out[s] = (
                (min(out[s][0], lo), max(out[s][1], hi), out[s][2] + c) if s in out else (lo, hi, c)
            )
    return out


def _quantile_sample(
    bin_edges: np.ndarray, counts: np.ndarray, vmin: float, vmax: float, m: int
) -> np.ndarray:
    """``m`` sorted values at evenly spaced ranks of the histogram, linear inside each bin, with
    the exact minimum and maximum as first and last values."""
    if m <= 1:
        return np.array([vmin])
    cdf = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    ranks = (np.arange(m) + 0.5) / m * cdf[-1]
    values = np.interp(ranks, cdf, bin_edges)
    values[0], values[-1] = vmin, vmax
    return np.sort(values)


def assign_frame(piece: Piece, fs: Any, cols: Columns, plan: dict) -> pd.Series:
    """Stratum of every item of a piece (a partition of the lazy assignment)."""
    d = read_piece(piece, fs, cols, ("score", "pred"))
    st = assign(d["score"], as_bool_predictions(d["pred"]), plan)
    dtype = index_dtype(plan["n_strata"])
    return pd.Series(
        st.astype(dtype),
        name="stratum",
        index=pd.RangeIndex(piece.offset, piece.offset + piece.nrows),
    )


# ====================================================================== passes
def stratify_pieces(
    data: PieceSet,
    scan: Scan,
    *,
    method: str,
    wanted: tuple[int | str, int | str],
    variable: str,
    score_kind: str,
    gen: np.random.Generator,
) -> StrataPlan:
    """Stratify the pieces out of core: the same strata as :func:`bayes_eval.stratify`.

    The arguments are those of :func:`bayes_eval.stratify`, validated by the caller
    (:meth:`bayes_eval.dask.DaskPopulation.stratify_lazy`): ``wanted`` is the parsed
    ``n_strata`` (negative side, positive side), ``gen`` the generator of ``rng``.

    Boundaries, per predicted side (threshold always a boundary):

    * ``"equal_size"``: the exact order statistics :math:`v_{(\\lfloor jN/n \\rfloor)}`,
      j = 1..n-1, that the in-memory kernel takes: a histogram pass (``HIST_BINS`` bins),
      then passes that re-bin the bins holding a target rank until each holds at most
      ``COLLECT_LIMIT`` items, which are collected and sorted. Ties that collapse edges are
      repaired exactly as in memory from the distinct values, when a side has at most
      ``DISTINCT_LIMIT`` of them (otherwise fewer strata result).
    * ``"equal_width"``: exact (needs only the side's range, known from the scan).
    * any other registered kernel (density-based, clustering): run on a sorted *quantile
      sample* of ``QUANTILE_SAMPLE`` values whose empirical CDF equals the side's at every
      histogram bin edge up to :math:`1/M` and interpolates linearly inside a bin, so the
      boundaries are approximate: their CDF error is at most :math:`1/M` plus one bin's
      mass. Kernels that offer ``kernel.from_histogram(edges, counts, n, rng=)`` are given
      the histogram instead.

    Whatever the method, a final counting pass gives the exact ``N_k`` and score ranges used
    by the posterior; strata that would be empty are merged as in memory.
    """
    kind = score_kind
    if kind == "auto":
        kind = "probability" if scan.score_min >= 0.0 and scan.score_max <= 1.0 else "margin"
    t = data.cols.threshold if data.cols.threshold is not None else 0.0
    spec = {"variable": variable, "kind": kind, "threshold": t}
    ranges = _variable_ranges(data, scan, spec)
    sides: dict[bool, dict] = {}
    for side, want in ((False, wanted[0]), (True, wanted[1])):
        if side not in ranges:
            continue
        vmin, vmax, count = ranges[side]
        n = side_n_strata(want, count)
        sides[side] = {"n": n, "want": want, "vmin": vmin, "vmax": vmax, "count": count}
    if method == "equal_size":
        _equal_size_edges(data, sides, spec)
    elif method == "equal_width":
        for info in sides.values():
            vals = np.array([info["vmin"], info["vmax"]])
            info["edges"] = np.asarray(STRATIFIERS[method](vals, info["n"], rng=gen), float)
    else:
        _kernel_edges(data, sides, spec, method, gen)
    for info in sides.values():
        e = np.unique(info["edges"])
        info["edges"] = e[e > info["vmin"]]
    counted = _count(data, sides, spec)
    if _fewer_strata_where_tied(data, sides, spec, counted, variable):
        counted = _count(data, sides, spec)  # one more pass, only when ties forced fewer strata
    for side, info in sides.items():
        cnt, lo, hi, tot = counted[side]
        if (cnt[1:] == 0).any():  # merge empty strata into the one below, as in memory
            keep = cnt[1:] > 0
            group = np.concatenate([[0], np.cumsum(keep)])
            k2 = int(keep.sum()) + 1
            cnt = np.bincount(group, weights=cnt, minlength=k2).astype(np.int64)
            tot = np.bincount(group, weights=tot, minlength=k2)
            lo2, hi2 = np.full(k2, np.inf), np.full(k2, -np.inf)
            np.minimum.at(lo2, group, lo)
            np.maximum.at(hi2, group, hi)
            lo, hi = lo2, hi2
            info["edges"] = info["edges"][keep]
        info["stats"] = (cnt, lo, hi, tot)
        n = info["n"]
    sizes, predicted, smin, smax, smean = [], [], [], [], []
    offset = 0
    for side in (False, True):
        if side not in sides:
            continue
        info = sides[side]
        cnt, lo, hi, tot = info["stats"]
        k = cnt.shape[0]
        order = np.argsort(lo, kind="stable")
        rank = np.empty(k, dtype=np.int64)
        rank[order] = np.arange(k)
        info["rank"], info["offset"] = rank, offset
        sizes.append(cnt[order])
        smin.append(lo[order])
        smax.append(hi[order])
        smean.append(tot[order] / cnt[order])
        predicted.append(np.full(k, side))
        offset += k
    plan = {
        "spec": spec,
        "n_strata": offset,
        "sides": {
            s: {"edges": i["edges"], "rank": i["rank"], "offset": i["offset"]}
            for s, i in sides.items()
        },
    }
    return StrataPlan(
        plan=plan,
        predicted=np.concatenate(predicted),
        sizes=np.concatenate(sizes),
        score_min=np.concatenate(smin),
        score_max=np.concatenate(smax),
        score_mean=np.concatenate(smean),
        method=method,
        variable=variable,
        requested=wanted,
    )


def _variable_ranges(
    data: PieceSet, scan: Scan, spec: dict
) -> dict[bool, tuple[float, float, int]]:
    """Per side (min, max, count) of the stratification variable, from the scan when the
    variable is a monotone function of the score on each side (no pass)."""
    out = {}
    for side, (lo, hi, c) in scan.side.items():
        if spec["variable"] == "score":
            out[side] = (lo, hi, c)
        elif spec["kind"] == "probability":
            out[side] = (lo, hi, c) if side else (1.0 - hi, 1.0 - lo, c)
        elif data.cols.threshold is not None:
            t = spec["threshold"]
            out[side] = (abs(lo - t), abs(hi - t), c) if side else (abs(hi - t), abs(lo - t), c)
        else:
            out = {}
            break
    if out:
        return out
    # |score| with explicit predictions is not monotone on a side: one pass for its range
    res = data.reduce(_range_piece, _combine_range, spec)
    return {s: (lo, hi, c) for s, (lo, hi, c) in res.items()}


def _hist(data: PieceSet, spec: dict, targets: list) -> list:
    combine = functools.partial(_combine_hist, modes=tuple(t[2] for t in targets))
    return data.reduce(_hist_piece, combine, spec, targets)


def order_statistics(data: PieceSet, spec: dict, wanted: dict) -> dict:
    """Exact order statistics of the stratification variable, by nested histograms.

    ``wanted`` maps a side (False, True, or None for all items) to ``(ranks, vmin, vmax,
    count)``: the 0-based ranks wanted among the ``count`` values of that side, which lie in
    ``[vmin, vmax]``. One pass per level: a histogram (``HIST_BINS`` bins) of every bin holding
    a wanted rank, until a bin holds at most ``COLLECT_LIMIT`` items, which are collected and
    sorted. Returns ``{side: {rank: value}}``.
    """
    found: dict = {side: {} for side in wanted}
    # pending items: (side, rank, path, items below the path's bin, (lo, width), count)
    pending = []
    for side, (ranks, vmin, vmax, size) in wanted.items():
        width = (vmax - vmin) / HIST_BINS
        for r in ranks:
            pending.append((side, int(r), (), 0, (vmin, width), size))
    while pending:  # one pass per level: histogram or collect every distinct (side, path)
        groups: dict[tuple, list] = {}
        for item in pending:
            groups.setdefault((item[0], item[2]), []).append(item)
        keys = list(groups)
        targets = []
        for side, path in keys:
            sub, cnt = groups[(side, path)][0][4:]
            mode = "collect" if cnt <= COLLECT_LIMIT or len(path) >= 12 else "hist"
            targets.append((side, path, mode, sub))
        res = _hist(data, spec, targets)
        pending = []
        for (side, path), (_, _, mode, sub), out in zip(keys, targets, res, strict=True):
            os_ = found[side]
            if mode == "collect":
                out = np.sort(out)
                for _, r, _, below, _, _ in groups[(side, path)]:
                    os_[r] = float(out[r - below])
                continue
            counts, mn, mx = out
            cum = np.cumsum(counts)
            lo, width = sub
            for _, r, _, below, _, _ in groups[(side, path)]:
                if mn == mx:  # every item of the bin has the same value
                    os_[r] = float(mn)
                    continue
                b = int(np.searchsorted(cum, r - below, side="right"))
                new_below = below + (int(cum[b - 1]) if b > 0 else 0)
                pending.append(
                    (
                        side,
                        r,
                        (*path, (lo, width, b)),
                        new_below,
                        (lo + b * width, width / HIST_BINS),
                        int(counts[b]),
                    )
                )
    return found


def _equal_size_edges(data: PieceSet, sides: dict, spec: dict) -> None:
    """Exact order statistics at the in-memory kernel's ranks (:func:`order_statistics`)."""
    wanted = {}
    for side, info in sides.items():
        size, n = info["count"], info["n"]
        kth = np.unique((np.arange(1, n) * size) // n)
        kth = kth[(kth > 0) & (kth < size)]
        wanted[side] = (kth.tolist(), info["vmin"], info["vmax"], size)
    found = order_statistics(data, spec, wanted)
    for side, info in sides.items():
        os_ = np.array([found[side][r] for r in sorted(found[side])], dtype=float)
        edges = np.unique(os_)
        edges = edges[edges > info["vmin"]]
        n = info["n"]
        if edges.size + 1 < n:
            distinct = _distinct(data, side, info, spec)
            if distinct is not None and distinct[0].size >= n:
                edges = equal_size_from_counts(distinct[0], distinct[1], n)
        info["edges"] = edges


def _distinct(data: PieceSet, side: bool, info: dict, spec: dict) -> tuple | None:
    if "distinct" not in info:
        (res,) = _hist(data, spec, [(side, (), "distinct", None)])
        info["distinct"] = res
    return info["distinct"]


def _kernel_edges(data: PieceSet, sides: dict, spec: dict, method: str, gen: Any) -> None:
    kernel = STRATIFIERS[method]
    targets = []
    for side, info in sides.items():
        width = (info["vmax"] - info["vmin"]) / HIST_BINS
        targets.append((side, (), "hist", (info["vmin"], width)))
    res = _hist(data, spec, targets)
    for (side, _, _, (lo, width)), (counts, _, _) in zip(targets, res, strict=True):
        info = sides[side]
        bin_edges = lo + width * np.arange(HIST_BINS + 1)
        bin_edges[-1] = info["vmax"]
        if hasattr(kernel, "from_histogram"):
            info["edges"] = np.asarray(
                kernel.from_histogram(bin_edges, counts, info["n"], rng=gen), dtype=float
            )
            continue
        sample = _quantile_sample(
            bin_edges, counts, info["vmin"], info["vmax"], min(info["count"], QUANTILE_SAMPLE)
        )
        info["edges"] = np.asarray(kernel(sample, info["n"], rng=gen), dtype=float)


def _count(data: PieceSet, sides: dict, spec: dict) -> dict:
    plan = {"spec": spec, "sides": {s: {"edges": i["edges"]} for s, i in sides.items()}}
    return data.reduce(_count_piece, _combine_count, plan)


def _fewer_strata_where_tied(
    data: Any, sides: dict[bool, dict[str, Any]], spec: Any, counted: Any, variable: str
) -> bool:
    """Where a side has fewer distinct values than the strata asked for, give it one stratum
    per distinct value with a :class:`~bayes_eval.strata.FewerStrataWarning`, as
    :func:`bayes_eval.stratify` does in memory. True when any side's edges changed."""
    changed = False
    for side, info in sides.items():
        cnt = counted[side][0]
        n = info["n"]
        if int((cnt > 0).sum()) >= n or info["want"] == "auto":
            continue
        distinct = _distinct(data, side, info, spec)
        if distinct is None or distinct[0].size >= n:
            continue
        values = np.asarray(distinct[0], dtype=np.float64)
        warnings.warn(
            f"n_strata={info['want']} is more than the {values.size} distinct {variable} "
            f"value(s) on the predicted-{'positive' if side else 'negative'} side; that side gets "
            f"{values.size} strata",
            FewerStrataWarning,
            stacklevel=4,
        )
        info["edges"] = values[values > info["vmin"]]
        changed = True
    return changed
