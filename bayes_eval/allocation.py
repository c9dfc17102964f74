r"""One-shot allocation of a labelling budget over strata.

:func:`allocate` splits ``n`` labels over the strata of a stratification: integers that sum to
``n`` exactly (Hamilton's largest-remainder rounding) and never exceed the unlabelled items left in
a stratum. When a cap binds, the stratum takes all it has and the rest is split again over the
others in the same proportions (which for Neyman allocation is the optimum under the caps).

Methods (:data:`ALLOCATIONS`), with :math:`W_k = N_k / N`:

``"proportional"``
    :math:`n_k \propto N_k`.
``"equal"``
    :math:`n_k = n / K`.
``"neyman"``
    :math:`n_k = n\, W_k S_k / \sum_j W_j S_j` (Kumar & Raj, eq. 9; Neyman's optimal allocation).
    ``S_k`` is given as ``sd``, or from Bernoulli ``rates`` :math:`p_k` as
    :math:`S_k^2 = \frac{N_k}{N_k - 1} p_k (1 - p_k)` (Kumar & Raj, Lemma 1 / eq. 5).
``"posterior_variance"``
    Label by label, to the stratum where one more label most reduces the expected posterior
    variance of the target metric (see :class:`bayes_eval.designs.PosteriorVariance`), from the
    labels and positives seen so far.

References
----------
Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, section 3.3 (PRO, EQU, OPT);
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt``, section 4 (:math:`n_k \propto
N_k \sigma_k`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._protocols import StrataLike
from ._validation import check_nonnegative_int, check_option
from .designs import DesignState, PosteriorVariance, largest_remainder, stratum_sd
from .metrics import METRICS
from .priors import BetaSpec, resolve_prior

__all__ = ["ALLOCATIONS", "allocate"]

#: allocation methods accepted by :func:`allocate`
ALLOCATIONS = ("proportional", "equal", "neyman", "posterior_variance")


def _sizes_of(strata: StrataLike | ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    sizes = getattr(strata, "sizes", None)
    if sizes is not None:
        return np.asarray(sizes, dtype=np.int64), np.asarray(strata.predicted, dtype=bool)
    try:
        arr = np.asarray(strata)
    except Exception:  # pragma: no cover - defensive
        arr = np.asarray([])
    if (
        arr.ndim != 1
        or arr.size == 0
        or not np.issubdtype(arr.dtype, np.integer)
        or arr.dtype == bool
        or (arr < 1).any()
    ):
        raise TypeError(
            f"strata={strata!r} must be a Strata from bayes_eval.stratify or a 1-D array of "
            "positive integer stratum sizes"
        )
    return arr.astype(np.int64), np.ones(arr.shape[0], dtype=bool)


def _per_stratum(value: Any, name: str, k: int, *, lo: float, hi: float | None) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}={value!r} must be an array of {k} numbers") from None
    if arr.shape != (k,):
        raise ValueError(f"{name} has shape {arr.shape}; allowed: one value per stratum ({k},)")
    bad = ~np.isfinite(arr) | (arr < lo) | ((arr > hi) if hi is not None else False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        allowed = f"[{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise ValueError(
            f"{name}[{i}]={float(arr[i])!r} is not allowed; allowed: finite values {allowed}"
        )
    return arr


def _counts(value: Any, name: str, sizes: np.ndarray) -> np.ndarray:
    k = sizes.shape[0]
    arr = np.asarray(value)
    if arr.shape != (k,) or not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != bool):
        raise ValueError(f"{name} must be {k} integers (one per stratum); got {value!r}")
    arr = arr.astype(np.int64)
    if (arr < 0).any() or (arr > sizes).any():
        i = int(np.flatnonzero((arr < 0) | (arr > sizes))[0])
        raise ValueError(
            f"{name}[{i}]={int(arr[i])} is not allowed; allowed: 0..N_k={int(sizes[i])}"
        )
    return arr


def allocate(
    strata: StrataLike | ArrayLike,
    n: int,
    *,
    method: str,
    sd: ArrayLike | None = None,
    rates: ArrayLike | None = None,
    labelled: ArrayLike | None = None,
    positives: ArrayLike | None = None,
    metric: str = "precision",
    prior: BetaSpec = "jeffreys",
    finite_population: bool = True,
) -> np.ndarray:
    r"""Split ``n`` labels over strata.

    Parameters
    ----------
    strata : Strata or array_like of int
        A stratification, or just the stratum sizes :math:`N_k`.
    n : int
        Labels to allocate.
    method : {"proportional", "equal", "neyman", "posterior_variance"}
    sd : array_like, optional
        Per-stratum standard deviations :math:`S_k` for ``"neyman"``.
    rates : array_like, optional
        Per-stratum positive rates :math:`p_k` in [0, 1] for ``"neyman"`` (the oracle when they
        are the true rates): :math:`S_k = \sqrt{N_k p_k (1 - p_k) / (N_k - 1)}`.
    labelled : array_like of int, optional
        Items of each stratum already labelled; at most :math:`N_k - \text{labelled}_k` are
        allocated to stratum k. Default none.
    positives : array_like of int, optional
        Positives among the labelled items (``"posterior_variance"`` only; default none).
    metric : str
        Target metric for ``"posterior_variance"`` (a key of :data:`bayes_eval.METRICS`).
    prior : "jeffreys", "uniform", (a, b) or per-stratum arrays
        Beta prior of the stratum rates for ``"posterior_variance"``.
    finite_population : bool
        ``"posterior_variance"``: count the unlabelled remainder's binomial variance (True) or
        use the superpopulation view.

    Returns
    -------
    ndarray of int64, shape (K,)
        Labels per stratum, summing to ``n``.

    Raises
    ------
    ValueError
        Unknown method, ``n`` more than the unlabelled items, a missing or malformed ``sd`` /
        ``rates``, or counts outside ``0..N_k``.

    References
    ----------
    Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt``, eq. 9.

    Examples
    --------
    Neyman allocation of 261 labels (Cochran's textbook example, see the tests):

    >>> import bayes_eval as be
    >>> be.allocate([1540, 770, 385], 261, method="neyman", sd=[2.6, 3.0, 3.3]).tolist()
    [138, 79, 44]
    """
    check_option(method, "method", ALLOCATIONS)
    sizes, predicted = _sizes_of(strata)
    k = sizes.shape[0]
    n = check_nonnegative_int(n, "n")
    done = np.zeros(k, dtype=np.int64) if labelled is None else _counts(labelled, "labelled", sizes)
    cap = sizes - done
    if n > int(cap.sum()):
        raise ValueError(
            f"n={n} is more than the {int(cap.sum())} unlabelled items left in the strata; "
            f"allowed: 0..{int(cap.sum())}"
        )
    if method != "neyman" and (sd is not None or rates is not None):
        raise ValueError(f"sd= and rates= are only used by method='neyman', not {method!r}")
    if method == "proportional":
        return largest_remainder(sizes.astype(np.float64), n, cap)
    if method == "equal":
        return largest_remainder(np.ones(k), n, cap)
    if method == "neyman":
        if (sd is None) == (rates is None):
            raise ValueError("method='neyman' needs exactly one of sd= and rates=")
        if sd is not None:
            s = _per_stratum(sd, "sd", k, lo=0.0, hi=None)
        else:
            s = stratum_sd(_per_stratum(rates, "rates", k, lo=0.0, hi=1.0), sizes)
        return largest_remainder(sizes * s, n, cap)
    # posterior_variance
    if metric not in METRICS:
        raise ValueError(
            f"metric={metric!r} is not one of the allowed values: "
            + ", ".join(repr(m) for m in METRICS)
        )
    h = np.zeros(k, dtype=np.int64) if positives is None else _counts(positives, "positives", sizes)
    if (h > done).any():
        raise ValueError("positives must not exceed labelled in any stratum")
    a, b, _ = resolve_prior(prior, k)
    state = DesignState(
        sizes=sizes,
        predicted=predicted,
        n=done,
        h=h,
        available=cap,
        prior_a=a,
        prior_b=b,
        metric=metric,
        finite_population=bool(finite_population),
    )
    return PosteriorVariance().allocate(state, n, np.random.default_rng(0))
