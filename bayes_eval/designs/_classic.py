r"""The published sequential designs: Bennett & Carvalho's online stratified sampling,
Kumar & Raj's OPT-A1 and OPT-A2, and the Neyman oracle.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1);
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (section 3.3, Algorithms 1 and 2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_positive_int
from ._base import (
    DesignState,
    _as_many,
    _lr_many,
    _ManyDesign,
    _multinomial_capped,
    _relevant,
    metric_gradient,
    stratum_sd,
)


class OnlineOptimal(_ManyDesign):
    r"""Bennett & Carvalho's online stratified sampling (Figure 1), as published.

    Before every batch, each stratum's rate is smoothed by the m-estimate

    .. math::

        \hat p_k = \frac{h_k + m\,p_0}{n_k + m}, \qquad p_0 = 0.5,\quad
        m = \begin{cases} 2 & n_k = 0 \\ 1/\sqrt{n_k} & n_k > 0 \end{cases}

    and :math:`\sigma_k = \sqrt{\hat p_k (1 - \hat p_k)}`; the batch sizes per stratum are one
    draw of :math:`\mathrm{Mult}(D;\, N_1\sigma_1, \dots, N_K\sigma_K)` (normalised). The first
    batch has ``d0`` labels (:math:`D_0`), later ones ``d`` (:math:`D`): the harness asks
    :meth:`batch_schedule` for them. Two details the paper leaves open are fixed here: draws
    beyond a stratum's unproposed items are drawn again among the others (the paper samples with
    replacement), and strata that cannot move the target metric (predicted negatives for
    precision; the paper's population is the predicted positives) get no labels.

    Parameters
    ----------
    d0, d : int, optional
        :math:`D_0` and :math:`D`; the paper gives each round "two samples per bin", so the
        defaults (``None``) mean ``2 K`` for both.

    References
    ----------
    Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``, section 5 and Figure 1.
    """

    name = "online_optimal"

    def __init__(self, d0: int | None = None, d: int | None = None) -> None:
        self.d0 = None if d0 is None else check_positive_int(d0, "d0")
        self.d = None if d is None else check_positive_int(d, "d")

    def options(self) -> dict[str, Any]:
        return {"d0": self.d0, "d": self.d}

    def batch_schedule(self, round: int, n_strata: int) -> int:
        """Batch size of round ``round``: :math:`D_0` first, then :math:`D`."""
        if round == 0:
            return self.d0 if self.d0 is not None else 2 * n_strata
        return self.d if self.d is not None else 2 * n_strata

    @staticmethod
    def smoothed_rates(n: np.ndarray, h: np.ndarray) -> np.ndarray:
        """Bennett & Carvalho's m-estimate of each stratum's rate."""
        n = np.asarray(n, dtype=np.float64)
        m = np.where(n > 0, 1.0 / np.sqrt(np.maximum(n, 1.0)), 2.0)
        return (np.asarray(h, dtype=np.float64) + 0.5 * m) / (n + m)

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        n, h, avail, _ = _as_many(state)
        p = self.smoothed_rates(n, h)
        sigma = np.sqrt(p * (1.0 - p))
        rel = _relevant(state, h + (state.sizes - n) * p)
        w = np.where(rel, state.sizes * sigma, 0.0)
        cap = np.where(rel, avail, 0)
        cap = np.where((cap.sum(axis=1) >= batch_size)[:, None], cap, avail)
        return _multinomial_capped(w, batch_size, cap, rng)


# ====================================================================== Kumar & Raj
def _kr_sd(n: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Kumar & Raj eq. 3: :math:`s_k^2 = \\frac{n_k}{n_k - 1}\\hat A_k (1 - \\hat A_k)`."""
    n = np.asarray(n, dtype=np.float64)
    p = np.divide(h, n, out=np.zeros_like(n), where=n > 0)
    f = np.divide(n, n - 1.0, out=np.zeros_like(n), where=n > 1)
    return np.sqrt(f * p * (1.0 - p))


#: key of OPT-A1's frozen eq.-9 weights ``N_k s_k`` ((R, K)) in ``DesignState.memory``
_FROZEN = "opt_a1_frozen"


class _KumarRaj(_ManyDesign):
    def __init__(self, n_ini: int = 10, n_step: int | None = None) -> None:
        self.n_ini = check_positive_int(n_ini, "n_ini")
        if self.n_ini < 2:
            raise ValueError(
                f"n_ini={n_ini} is not allowed; eq. 3 needs at least 2 labels per stratum "
                "(allowed: n_ini >= 2)"
            )
        self.n_step = None if n_step is None else check_positive_int(n_step, "n_step")

    def options(self) -> dict[str, Any]:
        return {"n_ini": self.n_ini}

    def batch_schedule(self, round: int, n_strata: int) -> int:
        """``K n_ini`` for the initial sample, then ``n_step`` (default ``2 K``)."""
        if round == 0:
            return self.n_ini * n_strata
        return self.n_step if self.n_step is not None else 2 * n_strata

    def _initial(self, state, n, avail, batch_size):
        """Fill the initial sample (n_ini per stratum) first; returns (counts, labels left)."""
        want = np.minimum(self.n_ini, np.asarray(state.sizes, dtype=np.int64))[None, :]
        deficit = np.minimum(np.clip(want - n, 0, None), avail)
        tot = deficit.sum(axis=1)
        out = _lr_many(deficit, np.minimum(batch_size, tot), deficit)
        return out, batch_size - out.sum(axis=1), tot

    def _rest(self, state, weights, counts, left, avail, fresh):
        """Allocate the labels left over after the initial sample by eq. 9 weights; before the
        initial labels are seen there is no estimate, so those are split equally."""
        w = np.where(fresh[:, None], 1.0, np.broadcast_to(weights, counts.shape))
        return counts + _lr_many(w, np.clip(left, 0, None), avail - counts)


class OptA1(_KumarRaj):
    r"""Kumar & Raj's OPT-A1 (Algorithm 1).

    ``n_ini`` labels from every stratum; then :math:`S_k` is estimated once from them by eq. 3,
    :math:`s_k^2 = \frac{n_k}{n_k - 1}\hat A_k(1 - \hat A_k)`, and every later label is
    allocated by eq. 9, :math:`n_k \propto W_k s_k`, with those estimates frozen (cumulatively
    over the later labels, so batches add up to one eq.-9 allocation of the remainder). The
    frozen estimates are kept in ``state.memory["opt_a1_frozen"]`` (the audit's memory, not the
    design object) from the first batch after the initial sample; memory holding another
    shape, or an audit with no labels yet, starts afresh. Without memory (``state.memory`` is
    None) every call freezes the estimates it sees, as on the first batch after the initial
    sample.

    As published, a stratum whose initial labels are all positive or all negative has
    :math:`s_k = 0` and gets no further labels; its estimate then rests on those ``n_ini``
    labels for good (see ``benchmarks/results/bench_kumar_raj.txt``). The Bayesian
    ``"posterior_variance"`` design has no such trap: a Beta posterior never has zero variance.

    Parameters
    ----------
    n_ini : int
        Labels per stratum in the initial sample (Kumar & Raj use 10; at least 2).

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.3.3, Algorithm 1.
    """

    name = "opt_a1"

    def __init__(self, n_ini: int = 10) -> None:
        super().__init__(n_ini)

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        n, h, avail, _ = _as_many(state)
        memory = {} if state.memory is None else state.memory
        frozen = memory.get(_FROZEN)
        if frozen is not None and (frozen.shape != n.shape or (n.sum(axis=1) == 0).any()):
            frozen = None
        counts, left, deficit = self._initial(state, n, avail, batch_size)
        fresh = deficit > 0
        if frozen is None and not fresh.any():
            frozen = np.asarray(state.sizes) * _kr_sd(n, h)
        if frozen is None:
            memory.pop(_FROZEN, None)
        else:
            memory[_FROZEN] = frozen
        w = frozen if frozen is not None else np.ones(n.shape)
        if frozen is not None:
            # cumulative eq.-9 targets over the labels after the initial sample
            init = np.minimum(self.n_ini, np.asarray(state.sizes))[None, :]
            post = np.clip(n - init, 0, None)
            total_post = post.sum(axis=1, keepdims=True) + left[:, None]
            wsum = w.sum(axis=1, keepdims=True)
            share = np.divide(w, wsum, out=np.full(w.shape, 1.0 / w.shape[1]), where=wsum > 0)
            w = np.clip(total_post * share - post, 0, None) + 1e-12 * share
        return self._rest(state, w, counts, left, avail, fresh)


class OptA2(_KumarRaj):
    r"""Kumar & Raj's OPT-A2 (Algorithm 2).

    ``n_ini`` labels from every stratum, then batches of ``n_step`` labels, each allocated by
    eq. 9, :math:`n_k \propto W_k s_k`, with :math:`s_k` re-estimated by eq. 3 from all labels
    so far before every batch.

    As published, a stratum whose labels so far are all positive or all negative has
    :math:`s_k = 0` and gets no further labels (unless every stratum has); its estimate then
    rests on its first few labels for good (see ``benchmarks/results/bench_kumar_raj.txt``).
    The Bayesian ``"posterior_variance"`` design has no such trap: a Beta posterior never has
    zero variance.

    Parameters
    ----------
    n_ini : int
        Initial labels per stratum (Kumar & Raj: 5 works as well as 10; at least 2).
    n_step : int, optional
        Labels per batch; the harness asks :meth:`batch_schedule` (default ``2 K``).

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.3.3, Algorithm 2.
    """

    name = "opt_a2"

    def __init__(self, n_ini: int = 5, n_step: int | None = None) -> None:
        super().__init__(n_ini, n_step)

    def options(self) -> dict[str, Any]:
        return {"n_ini": self.n_ini, "n_step": self.n_step}

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        n, h, avail, _ = _as_many(state)
        counts, left, deficit = self._initial(state, n, avail, batch_size)
        w = np.asarray(state.sizes) * _kr_sd(n, h)
        return self._rest(state, w, counts, left, avail, deficit > 0)


# ====================================================================== oracle
class NeymanOracle(_ManyDesign):
    r"""Neyman allocation from the true per-stratum rates: the oracle baseline.

    Cumulative labels are steered towards :math:`n_k \propto |g_k| N_k S_k` with
    :math:`S_k = \sqrt{N_k p_k (1 - p_k)/(N_k - 1)}` from the true rates :math:`p_k` and
    :math:`g_k = \partial\,\mathrm{metric} / \partial P_k` at the true counts (so for precision
    only predicted-positive strata are sampled; for a metric linear in the rates this is exactly
    Neyman's allocation for its stratified estimator).

    Parameters
    ----------
    rates : array_like, shape (K,)
        True positive rate of every stratum.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, eq. 9; Bennett & Carvalho,
    ``../shared/seeds/000_51972d8d13fae9c1.txt``, section 6 (the oracle of Table 1).
    """

    name = "neyman_oracle"

    def __init__(self, rates: ArrayLike | None = None) -> None:
        if rates is None:
            raise ValueError("design 'neyman_oracle' needs rates= (the true rate of each stratum)")
        arr = np.asarray(rates, dtype=np.float64)
        if arr.ndim != 1 or not np.all(np.isfinite(arr)) or (arr < 0).any() or (arr > 1).any():
            raise ValueError(f"rates={rates!r} must be a 1-D array of rates in [0, 1]")
        self.rates = arr

    def options(self) -> dict[str, Any]:
        return {"rates": self.rates.tolist()}

    def weights(self, state: DesignState) -> np.ndarray:
        """The oracle's allocation weights :math:`|g_k| N_k S_k`."""
        sizes = np.asarray(state.sizes)
        if self.rates.shape != sizes.shape:
            raise ValueError(
                f"rates has {self.rates.shape[0]} entries but there are {sizes.shape[0]} strata"
            )
        g = metric_gradient(state.metric, sizes, state.predicted, sizes * self.rates)
        return np.abs(g) * sizes * stratum_sd(self.rates, sizes)

    def allocate_many(
        self, state: DesignState, batch_size: int, rng: np.random.Generator
    ) -> np.ndarray:
        n, _, avail, _ = _as_many(state)
        w = self.weights(state)
        if w.sum() <= 0:
            w = np.asarray(state.sizes, dtype=np.float64)
        share = w / w.sum()
        target = (n.sum(axis=1, keepdims=True) + batch_size) * share[None, :]
        need = np.clip(target - n, 0, None) + 1e-12 * share[None, :]
        return _lr_many(need, batch_size, avail)
