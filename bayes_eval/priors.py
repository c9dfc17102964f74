"""Per-stratum Beta priors for the positive rate ``theta_k``."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["NAMED_PRIORS", "BetaSpec", "Prior", "PriorSpec", "resolve_prior"]

#: a Beta prior as users write it: ``"jeffreys"``, ``"uniform"``, or an ``(a, b)`` pair of positive
#: numbers or of per-stratum arrays (:func:`resolve_prior`)
type BetaSpec = str | tuple[ArrayLike, ArrayLike] | list[ArrayLike]
#: what a ``prior=`` argument takes: a :data:`BetaSpec` or a resolved :class:`Prior`
type PriorSpec = BetaSpec | Prior

#: named priors: (a, b)
NAMED_PRIORS: dict[str, tuple[float, float]] = {"jeffreys": (0.5, 0.5), "uniform": (1.0, 1.0)}


def resolve_prior(prior: BetaSpec, n_strata: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Resolve ``prior`` to per-stratum arrays ``(a, b)`` and a description.

    Allowed: ``"jeffreys"`` (Beta(1/2, 1/2)), ``"uniform"`` (Beta(1, 1)), a pair ``(a, b)`` of
    positive numbers, or a pair of per-stratum arrays of length ``n_strata``.
    """
    if isinstance(prior, str):
        if prior not in NAMED_PRIORS:
            raise ValueError(
                f"prior={prior!r} is not allowed; allowed: 'jeffreys', 'uniform', an (a, b) pair "
                "of positive numbers, or a pair of per-stratum arrays"
            )
        a, b = NAMED_PRIORS[prior]
        return np.full(n_strata, a), np.full(n_strata, b), prior
    if not isinstance(prior, tuple | list) or len(prior) != 2:
        raise ValueError(
            f"prior={prior!r} is not allowed; allowed: 'jeffreys', 'uniform', an (a, b) pair of "
            "positive numbers, or a pair of per-stratum arrays"
        )
    out = []
    for name, value in zip(("a", "b"), prior, strict=True):
        if isinstance(value, bool):
            raise TypeError(f"prior {name}={value!r} must be a positive number or array")
        if isinstance(value, numbers.Real):
            arr = np.full(n_strata, float(value))
        else:
            try:
                arr = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(
                    f"prior {name}={value!r} must be a positive number or array"
                ) from None
            if arr.shape != (n_strata,):
                raise ValueError(
                    f"prior {name} has shape {arr.shape}; allowed: a scalar or one value per "
                    f"stratum (shape ({n_strata},))"
                )
        if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
            bad = arr[~(np.isfinite(arr) & (arr > 0))][0]
            raise ValueError(f"prior {name} contains {float(bad)!r}; allowed: finite numbers > 0")
        out.append(arr)
    a, b = out
    if np.all(a == a[0]) and np.all(b == b[0]):
        desc = f"beta({a[0]:g}, {b[0]:g})"
    else:
        desc = "per-stratum beta"
    return a, b, desc


@dataclass(frozen=True, slots=True)
class Prior:
    """A resolved Beta prior per stratum: ``theta_k ~ Beta(a_k, b_k)``.

    Attributes
    ----------
    a, b : ndarray of float64, (K,)
    description : str
        How results name it (``"jeffreys"``, ``"beta(1, 1)"``, ``"per-stratum beta"``...).
    """

    a: np.ndarray
    b: np.ndarray
    description: str

    @classmethod
    def resolve(cls, prior: PriorSpec, n_strata: int) -> Prior:
        """A :class:`Prior` from a prior spec (:func:`resolve_prior`) or a :class:`Prior` with
        ``n_strata`` entries."""
        if isinstance(prior, Prior):
            if prior.a.shape != (n_strata,):
                raise ValueError(
                    f"prior has {prior.a.shape[0]} strata; allowed: one value per stratum "
                    f"({n_strata})"
                )
            return prior
        a, b, desc = resolve_prior(prior, n_strata)
        a.flags.writeable = False
        b.flags.writeable = False
        return cls(a, b, desc)
