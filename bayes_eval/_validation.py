"""Small named validators used at the public boundary.

Every validator raises ``ValueError`` or ``TypeError`` whose message names the argument, the bad
value and what is allowed, and none of them mutates its input.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "RNGLike",
    "as_finite_1d",
    "as_generator",
    "check_bool",
    "check_level",
    "check_nonnegative_int",
    "check_option",
    "check_positive_int",
]

RNGLike = int | np.random.Generator | None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_generator(rng: RNGLike, name: str = "rng") -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` from an int seed, a Generator or None."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise ValueError(
                f"{name}={rng!r} is negative; allowed: a non-negative int seed, "
                "a numpy.random.Generator or None"
            )
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{name}={_short(rng)} has type {type(rng).__name__}; allowed: an int seed, "
        "a numpy.random.Generator or None"
    )


def check_option(value: Any, name: str, allowed: Iterable[str]) -> str:
    """Match ``value`` exactly against a closed set of string options."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(
            f"{name}={_short(value)} is not one of the allowed values: "
            + ", ".join(repr(a) for a in allowed)
        )
    return value


def check_level(value: Any, name: str = "level") -> float:
    """A probability strictly between 0 and 1 (credible level, target probability...)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}={_short(value)} must be a real number in the open interval (0, 1)")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name}={value!r} is outside the open interval (0, 1)")
    return value


def check_max_mcse(value: Any, name: str = "max_mcse") -> float:
    """A Monte Carlo standard error bound in the open interval (0, 0.5)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 0.5:
        raise ValueError(f"{name}={value!r}; allowed: a number in (0, 0.5)")
    return float(value)


def check_positive_int(value: Any, name: str) -> int:
    """An integer >= 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={_short(value)} must be a positive integer")
    if int(value) < 1:
        raise ValueError(f"{name}={int(value)} must be a positive integer (>= 1)")
    return int(value)


def check_nonnegative_int(value: Any, name: str) -> int:
    """An integer >= 0 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={_short(value)} must be a non-negative integer")
    if int(value) < 0:
        raise ValueError(f"{name}={int(value)} must be a non-negative integer (>= 0)")
    return int(value)


def as_finite_1d(values: Any, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """Coerce to a 1-D float64 array, refusing non-numeric, NaN and infinite entries."""
    try:
        arr = np.asarray(values)
    except Exception as exc:  # pragma: no cover - numpy raises rarely here
        raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.number)):
        raise TypeError(
            f"{name} has dtype {arr.dtype}; allowed: a 1-D array of real numbers (int or float)"
        )
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} has complex dtype {arr.dtype}; allowed: real numbers")
    if arr.ndim != 1:
        raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D array")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty; at least one value is required")
    arr = np.asarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(
            f"{name} has {bad.size} non-finite value(s) (first at position {bad[0]}: "
            f"{float(arr[bad[0]])!r}); allowed: finite real numbers"
        )
    return arr


def check_bool(value: Any, name: str) -> bool:
    """``True`` or ``False`` (a Python or NumPy bool; ints such as 0 and 1 are refused)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}={value!r} must be True or False")
    return bool(value)


#: most worker processes ``n_jobs`` may ask for
MAX_N_JOBS = 1024


def check_n_jobs(value: Any, name: str = "n_jobs") -> int:
    """Worker processes: ``None`` (= 1, this process only), an integer 1 ... :data:`MAX_N_JOBS`,
    or ``-1`` (one per CPU this process may use), as in scikit-learn."""
    if value is None:
        return 1
    allowed = f"allowed: None or 1 (no worker process), 2 ... {MAX_N_JOBS}, or -1 (one per CPU)"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}={_short(value)} is not an integer; {allowed}")
    if not (int(value) == -1 or 1 <= int(value) <= MAX_N_JOBS):
        raise ValueError(f"{name}={int(value)} is not allowed; {allowed}")
    return int(value)
