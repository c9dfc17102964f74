"""Calibration of the repeated acceptance test by simulated audits on the batch engine
(see :mod:`bayes_eval.sequential`).
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from .._protocols import StrataLike
from .._validation import (
    RNGLike,
    as_generator,
    check_bool,
    check_level,
    check_max_mcse,
    check_n_jobs,
    check_option,
    check_positive_int,
)
from ..designs import Design
from ..metrics import metric_of_positives
from ..models._look_pool import RefitPool
from ..priors import Prior, PriorSpec
from ._linear import SUPPORTED_METRICS, least_favourable_truth
from ._paths import PathSetup, check_calibration_args, named_design, strict_plan

__all__ = [
    "CALIBRATION_VERSION",
    "DEFAULT_NOMINAL",
    "SequentialCalibration",
    "calibrate_sequential",
    "calibration_key",
    "check_pilot",
    "check_rate_array",
    "check_target",
    "geometric_looks",
    "required_sims",
]


#: default grid of nominal levels for the coverage curve
DEFAULT_NOMINAL = np.unique(
    np.round(
        np.concatenate(
            [
                np.arange(0.50, 0.95, 0.01),
                np.arange(0.95, 0.99, 0.0025),
                np.arange(0.99, 0.9995, 0.0005),
            ]
        ),
        6,
    )
)


# ------------------------------------------------------------------------------ the simulator
def _as_schedule(
    batch_size: int, budget: int, looks: str | ArrayLike | None, total: int
) -> np.ndarray:
    """Label counts at the looks of an audit without a design schedule (one batch engine)."""
    return strict_plan(None, batch_size, budget, looks, total, 1).looks


def geometric_looks(batch_size: int, budget: int, factor: float = 2.0) -> np.ndarray:
    """Look schedule ``batch_size * factor**j`` (rounded to whole batches) ending at the budget.

    Fewer looks need a smaller correction. For 10 strata, F1 target 0.7 and a budget of 2,000
    (``benchmarks/results/bench_sequential.txt``), looks at 20, 40, ..., 1280, 2000 labels need a
    corrected nominal level of 97.7% instead of 98.9% for a look every 20 labels, and accepting
    a classifier 0.05 above the target takes 28% more labels than the naive rule on the same
    schedule (64% more with a look every batch). The naive rule itself, though invalid, stops
    earlier with a look every batch.
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    budget = check_positive_int(budget, "budget")
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real) or factor <= 1:
        raise ValueError(f"factor={factor!r}; allowed: a number > 1")
    out: list[int] = []
    x = float(batch_size)
    while x < budget:
        v = round(x / batch_size) * batch_size
        if not out or v > out[-1]:
            out.append(v)
        x *= float(factor)
    if not out or out[-1] < budget:
        out.append(budget)
    return np.asarray(out, dtype=np.int64)


def _first_crossing(prob: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Index of the first look with ``prob >= level`` for every path and level (J if none)."""
    running = np.maximum.accumulate(prob, axis=1)  # (S, J), non-decreasing
    jj = prob.shape[1]
    out = np.empty((prob.shape[0], levels.shape[0]), dtype=np.int64)
    for i in range(prob.shape[0]):
        out[i] = np.searchsorted(running[i], levels, side="left")
    out[out > jj] = jj
    return out


# ------------------------------------------------------------------------------- the result
@dataclass(frozen=True, slots=True)
class SequentialCalibration:
    """Nominal → actual level of a repeated acceptance test, from simulated audits.

    Attributes
    ----------
    curve : xarray.Dataset
        Over ``nominal``: ``accept_rate`` (share of simulated audits that accept),
        ``actual`` (= 1 - ``accept_rate``: the actual level when the truth is at the target),
        ``mcse`` (Monte Carlo standard error of both), ``mean_labels`` (labels used, the budget
        for audits that never accept).
    prob : ndarray, (n_sims, n_looks)
        ``P(metric >= target)`` at every look of every simulated audit.
    looks : ndarray of int
        Labels at each look.
    truth : xarray.Dataset
        Per stratum: ``N``, ``predicted``, ``rate`` (plausible rate before the shift),
        ``positives`` (the simulated population).
    truth_metric : float
        Metric of the simulated population (at most the target when calibrating).
    metric, target, design, prior : str, float, str, str
    rates_source : str
        Where the plausible stratum rates came from (``"pilot"``, ``"prior"``, ``"user"``...).
    finite_population : bool
    n_sims : int
    max_mcse : float
        Largest Monte Carlo standard error accepted for the actual level at a corrected level.
    approximation : str
    """

    curve: xr.Dataset
    prob: np.ndarray = field(repr=False)
    looks: np.ndarray
    truth: xr.Dataset = field(repr=False)
    truth_metric: float
    metric: str
    target: float
    design: str
    prior: str
    rates_source: str
    finite_population: bool
    n_sims: int
    max_mcse: float
    approximation: str = "pearson3 (exact cumulants of the linear form)"

    @property
    def max_prob(self) -> np.ndarray:
        """Per simulated audit, the largest ``P(metric >= target)`` over the looks."""
        return self.prob.max(axis=1)

    @property
    def at_target(self) -> bool:
        """Whether the simulated truth is at the target (so the curve is a false-accept curve)."""
        return bool(self.truth_metric <= self.target + 1e-12)

    def accept_rate(self, nominal: float) -> tuple[float, float]:
        """Share of simulated audits accepting at ``nominal`` and its Monte Carlo error."""
        nominal = check_level(nominal, "nominal")
        p = float(np.mean(self.max_prob >= nominal))
        return p, float(np.sqrt(max(p * (1 - p), 1.0 / self.n_sims) / self.n_sims))

    def actual_level(self, nominal: float) -> float:
        """Actual level at a nominal level: ``1 - accept_rate(nominal)`` (truth at target)."""
        self._need_target("actual_level")
        return 1.0 - self.accept_rate(nominal)[0]

    def labels_to_accept(self, nominal: float) -> tuple[float, float]:
        """Mean labels used at ``nominal`` (budget when never accepting) and its MC error."""
        nominal = check_level(nominal, "nominal")
        first = _first_crossing(self.prob, np.array([nominal]))[:, 0]
        used = np.where(
            first < self.looks.shape[0],
            self.looks[np.minimum(first, self.looks.shape[0] - 1)],
            self.looks[-1],
        ).astype(np.float64)
        return float(used.mean()), float(used.std(ddof=1) / np.sqrt(used.size))

    def corrected_level(self, actual: float = 0.95) -> float:
        """Nominal level whose actual level is ``actual``.

        The smallest nominal :math:`\\gamma` with simulated false-accept rate
        :math:`\\le 1 - \\text{actual}`: just above the :math:`\\lceil S(1-\\text{actual})\\rceil
        + 1`-th largest path maximum.

        Raises
        ------
        ValueError
            When the simulation is too small for this level (Monte Carlo standard error
            :math:`\\sqrt{\\alpha(1-\\alpha)/S}` above ``max_mcse``), when the truth is not at the
            target, or when no nominal level below 1 reaches it.
        """
        self._need_target("corrected_level")
        actual = check_level(actual, "actual")
        alpha = 1.0 - actual
        need = required_sims(actual, self.max_mcse)
        if self.n_sims < need:
            raise ValueError(
                f"n_sims={self.n_sims} is too few for actual={actual}: its Monte Carlo error "
                f"{np.sqrt(alpha * actual / self.n_sims):.4f} exceeds max_mcse={self.max_mcse}; "
                f"allowed: n_sims >= {need}"
            )
        v = np.sort(self.max_prob)[::-1]
        m = int(np.floor(self.n_sims * alpha + 1e-9))
        if m >= v.size:
            return float(np.nextafter(0.0, 1.0))
        level = float(np.nextafter(v[m], 1.0))
        if level >= 1.0:
            raise ValueError(
                f"no nominal level below 1 gives actual={actual}: more than {alpha:.3g} of the "
                "simulated audits reach P(metric >= target) = 1 (too few labels per stratum or "
                "a degenerate design)"
            )
        return level

    def corrected_level_mcse(self, actual: float = 0.95) -> float:
        """Monte Carlo standard error of :meth:`corrected_level` (order-statistic interval)."""
        actual = check_level(actual, "actual")
        alpha = 1.0 - actual
        v = np.sort(self.max_prob)[::-1]
        s = v.size
        half = np.sqrt(s * alpha * actual)
        lo = int(np.clip(np.floor(s * alpha - half), 0, s - 1))
        hi = int(np.clip(np.ceil(s * alpha + half), 0, s - 1))
        return float((v[lo] - v[hi]) / 2.0)

    def describe(self, actual: float = 0.95) -> str:
        """One line: what was simulated and the corrected level with its Monte Carlo error."""
        lvl = self.corrected_level(actual)
        return (
            f"sequential correction: nominal {lvl:.4f} for actual {actual:g} "
            f"(MC s.e. of actual {np.sqrt(actual * (1 - actual) / self.n_sims):.4f}, of nominal "
            f"{self.corrected_level_mcse(actual):.4f}); {self.n_sims} simulated audits, "
            f"{self.looks.shape[0]} looks up to {int(self.looks[-1])} labels, design "
            f"{self.design}, truth {self.metric}={self.truth_metric:.4f} from {self.rates_source} "
            f"rates, prior {self.prior}"
        )

    def _need_target(self, what: str) -> None:
        if not self.at_target:
            raise ValueError(
                f"{what} needs a calibration simulated at the target; this one has the truth "
                f"at {self.metric}={self.truth_metric:.4f} > target={self.target}"
            )

    def __repr__(self) -> str:
        try:
            extra = f", corrected_level(0.95)={self.corrected_level(0.95):.4f}"
        except ValueError:
            extra = ""
        return (
            f"SequentialCalibration(metric={self.metric!r}, target={self.target}, "
            f"truth={self.truth_metric:.4f}, design={self.design!r}, looks={self.looks.shape[0]}"
            f" up to {int(self.looks[-1])} labels, n_sims={self.n_sims}{extra})"
        )


def required_sims(actual: float, max_mcse: float) -> int:
    """Simulated audits needed for Monte Carlo error ``max_mcse`` on the actual level."""
    alpha = 1.0 - actual
    return int(np.ceil(alpha * actual / max_mcse**2 - 1e-9))


def check_target(metric: str | None, target: Any, name: str = "target") -> float:
    """``target`` (or the argument ``name``) as a float in [0, 1], the range of ``metric``; the one
    check of a claimed or simulated metric value (calibration, certification, ``Accept``)."""
    of = "every metric" if metric is None else f"metric {metric!r}"
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        raise TypeError(f"{name}={target!r} must be a real number in [0, 1] (the range of {of})")
    t = float(target)
    if not (0.0 <= t <= 1.0) or not np.isfinite(t):
        raise ValueError(f"{name}={target!r} is outside the range [0, 1] of {of}")
    return t


def _resolve_rates(
    rates: Any, pilot: Any, a: np.ndarray, b: np.ndarray, k: int
) -> tuple[np.ndarray, str]:
    if rates is None:
        rates = "pilot" if pilot is not None else "prior"
    if isinstance(rates, str):
        check_option(rates, "rates", ("pilot", "prior"))
        if rates == "prior":
            return a / (a + b), "prior"
        if pilot is None:
            raise ValueError(
                "rates='pilot' needs pilot=(n, h), the pilot labels and positives per stratum"
            )
        pn, ph = check_pilot(pilot, k)
        return (a + ph) / (a + b + pn), "pilot"
    return check_rate_array(rates, k, "'pilot', 'prior'"), "user"


def check_pilot(pilot: tuple[ArrayLike, ArrayLike], k: int) -> tuple[np.ndarray, np.ndarray]:
    """``pilot = (n, h)`` as two integer arrays ``(k,)`` with ``0 <= h <= n``, else a ValueError
    naming ``pilot`` and what is allowed (the pilot labels and positives per stratum)."""
    allowed = f"allowed: a pair (n, h) of {k} per-stratum counts with 0 <= h_k <= n_k"
    try:
        pn, ph = (np.asarray(v) for v in pilot)
    except (TypeError, ValueError):
        raise ValueError(f"pilot={pilot!r}; {allowed}") from None
    for arr in (pn, ph):
        if arr.shape != (k,) or not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
            raise ValueError(f"pilot has a part of shape {arr.shape}, dtype {arr.dtype}; {allowed}")
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"pilot has non-integer counts; {allowed}")
    if (ph < 0).any() or (ph > pn).any():
        i = int(np.flatnonzero((ph < 0) | (ph > pn))[0])
        raise ValueError(
            f"pilot has n={pn[i].item()!r}, h={ph[i].item()!r} in stratum {i}; {allowed}"
        )
    return pn.astype(np.int64), ph.astype(np.int64)


def check_rate_array(
    rates: ArrayLike, k: int | None, names: str, name: str = "rates"
) -> np.ndarray:
    """``rates`` as per-stratum rates in [0, 1], shape ``(k,)`` (any length when ``k`` is
    None), else a ValueError naming the bad value and what is allowed: the names ``names``
    (the string choices of the caller) or the rates. One check for every function that takes
    user rates (:func:`calibrate_sequential`, :func:`~bayes_eval.sequential.calibrate_worst_case`,
    :func:`~bayes_eval.sequential.correction_for` and ``be.stop.Accept``)."""
    count = "" if k is None else f"{k} "
    allowed = f"allowed: {names + ' or ' if names else ''}{count}per-stratum rates in [0, 1]"
    try:
        arr = np.asarray(rates, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={rates!r}; {allowed}") from None
    if arr.ndim != 1 or arr.size == 0 or (k is not None and arr.shape != (k,)):
        raise ValueError(f"{name} has shape {arr.shape}; {allowed}")
    bad = ~((arr >= 0) & (arr <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} contains {float(arr[i])!r} at position {i}; {allowed}")
    return arr


def _planning(strata: Any, sizes: Any, predicted: Any) -> tuple[np.ndarray, np.ndarray]:
    if strata is not None:
        if sizes is not None or predicted is not None:
            raise ValueError("give either strata or (sizes, predicted), not both")
        return np.asarray(strata.sizes, dtype=np.int64), np.asarray(strata.predicted, dtype=bool)
    if sizes is None or predicted is None:
        raise ValueError(
            "give strata, or a planning population as sizes= and predicted= "
            "(items and predicted class per stratum)"
        )
    s = np.asarray(sizes)
    p = np.asarray(predicted)
    if s.ndim != 1 or s.size == 0 or not np.issubdtype(s.dtype, np.integer) or (s < 1).any():
        raise ValueError(f"sizes={sizes!r}; allowed: positive integer stratum sizes (1-D)")
    if p.shape != s.shape:
        raise ValueError(
            f"predicted has shape {p.shape}; allowed: one bool per stratum (shape {s.shape})"
        )
    return s.astype(np.int64), p.astype(bool)


def calibrate_sequential(
    strata: StrataLike | None = None,
    *,
    sizes: ArrayLike | None = None,
    predicted: ArrayLike | None = None,
    metric: str = "f1",
    target: float = 0.8,
    design: str | Design = "random",
    design_options: dict[str, Any] | None = None,
    batch_size: int = 20,
    budget: int = 2000,
    looks: ArrayLike | None = None,
    prior: PriorSpec = "jeffreys",
    rates: str | ArrayLike | None = None,
    pilot: tuple[ArrayLike, ArrayLike] | None = None,
    truth_metric: float | None = None,
    positives: ArrayLike | None = None,
    rates_label: str | None = None,
    finite_population: bool = True,
    n_sims: int = 10_000,
    max_mcse: float = 0.005,
    nominal: ArrayLike | None = None,
    rng: RNGLike = None,
    model: str = "independent",
    progress: Callable[[int, int], None] | None = None,
    draws: int | None = None,
    n_jobs: int | None = None,
) -> SequentialCalibration:
    """Simulate repeated acceptance testing under the least-favourable truth.

    Parameters
    ----------
    strata : Strata, optional
        The audit's strata; or give a planning population as ``sizes`` and ``predicted``.
    metric : str
        One of :data:`SUPPORTED_METRICS`.
    target : float
        The acceptance target, in the metric's range [0, 1].
    design : str or design object
        Sampling design (:func:`bayes_eval.designs.make_design`). ``"random"``,
        ``"proportional"`` and ``"equal"`` are vectorised; a design with
        ``allocate_many`` (every other registered design) is called once per batch for all
        simulated audits at once; any other design object is called once per simulated audit
        and batch, each audit with its own copy of the design (slower, same statistics).
    batch_size, budget : int
        Labels per batch and the most labels the audit may use. A design with a
        ``batch_schedule(round, K)`` (``"online_optimal"``, ``"opt_a1"``, ``"opt_a2"``) sets
        its own batch sizes, as :meth:`bayes_eval.Audit.run` does, and ``batch_size`` is not
        used; the last batch is cut to the budget.
    looks : array of int, optional
        Label counts at which the rule looks (multiples of ``batch_size`` or the budget, at
        most ``budget``); default after every batch. With a ``batch_schedule`` any increasing
        counts up to the budget are allowed, each taken at the end of the batch that reaches
        it (``looks`` of the result are those batch ends).
    prior : prior spec
        The audit's Beta prior (:func:`bayes_eval.priors.resolve_prior`).
    rates : "pilot", "prior" or array, optional
        Plausible stratum rates for the least-favourable truth; default the pilot's posterior
        means when ``pilot`` is given, else the prior means.
    pilot : (n, h), optional
        Pilot labels and positives per stratum.
    truth_metric : float, optional
        Metric of the simulated population; default the target (the least favourable case).
        Set it above the target to measure labels-to-accept instead of false accepts.
    rates_label : str, optional
        How user-given ``rates`` were obtained (recorded as ``rates_source``; e.g. ``"scores"``).
    positives : array of int, optional
        Simulate this population instead (positives per stratum, e.g. the known truth of a
        benchmark population); ``rates`` and ``truth_metric`` are then not used.
    finite_population : bool
        As in :func:`bayes_eval.estimate`.
    n_sims : int
        Simulated audits.
    max_mcse : float
        Largest Monte Carlo standard error allowed for an actual level derived from this
        calibration (:meth:`SequentialCalibration.corrected_level` refuses otherwise).
    nominal : array, optional
        Grid of nominal levels for ``curve``.
    rng : int, Generator or None
    model : str
        Posterior model simulated (:mod:`bayes_eval.sequential._paths`; a model other than
        ``"independent"`` needs ``strata``).
    progress : callable ``(done, total)``, optional
        Called after every simulated batch with the simulated audit-batches done and in all.
    draws : int, optional
        Monte Carlo draws the audit decides on at each look: the simulated probabilities get
        their binomial noise (``None``: exact probabilities).
    n_jobs : int or None
        Processes that fit the pooled look model's refits (:mod:`bayes_eval.models._look_pool`):
        ``None`` or 1 this one, ``-1`` one per CPU. The result is the same bit for bit.

    Returns
    -------
    SequentialCalibration

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Section 3.1, Figure 4).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_eval.sequential import calibrate_sequential
    >>> cal = calibrate_sequential(sizes=np.array([5000, 1000]), predicted=np.array([0, 1]),
    ...                            metric="f1", target=0.7, rates=[0.05, 0.7], budget=400,
    ...                            n_sims=2000, rng=0)
    >>> round(cal.actual_level(0.95), 2) < 0.9       # naive peeking every 20 labels
    True
    """
    sizes_, pred_ = _planning(strata, sizes, predicted)
    k = sizes_.shape[0]
    check_option(metric, "metric", SUPPORTED_METRICS)
    target = check_target(metric, target)
    truth_value = (
        target if truth_metric is None else check_target(metric, truth_metric, "truth_metric")
    )
    n_sims = check_calibration_args(n_sims, progress, " to estimate a coverage curve")
    n_jobs = check_n_jobs(n_jobs)
    check_max_mcse(max_mcse)
    check_bool(finite_population, "finite_population")
    if model != "independent" and strata is None:
        raise ValueError(f"model={model!r} reads the scores: pass strata, not sizes/predicted")
    dsg, design_name = named_design(design, design_options)
    plan = strict_plan(dsg, batch_size, budget, looks, int(sizes_.sum()), k)
    schedule = plan.looks
    resolved = Prior.resolve(prior, k)
    a, b, prior_desc = resolved.a, resolved.b, resolved.description
    r, source = _resolve_rates(rates, pilot, a, b, k)
    if rates_label is not None and source == "user":
        source = str(rates_label)
    grid = DEFAULT_NOMINAL if nominal is None else np.asarray(nominal, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid > 0) & (grid < 1)):
        raise ValueError("nominal must be a 1-D array of levels in the open interval (0, 1)")
    if positives is None:
        positives = least_favourable_truth(sizes_, pred_, r, metric=metric, value=truth_value)
    else:
        positives = np.asarray(positives)
        if (
            positives.shape != (k,)
            or not np.issubdtype(positives.dtype, np.integer)
            or ((positives < 0) | (positives > sizes_)).any()
        ):
            raise ValueError(f"positives must be {k} integers with 0 <= positives_k <= N_k")
        positives = positives.astype(np.int64)
        source = "given population"
    if draws is not None:
        draws = check_positive_int(draws, "draws")
    gen = as_generator(rng)
    setup = PathSetup(
        sizes=sizes_,
        predicted=pred_,
        metric=metric,
        target=target,
        design=dsg,
        plan=plan,
        prior=resolved,
        finite_population=bool(finite_population),
        model=model,
        strata=strata,
        draws=draws,
    )
    with RefitPool(n_jobs) as pool:
        prob = setup.simulate(positives, n_sims, gen, progress, pool)[0]
    curve = _curve(prob, schedule, grid)
    truth = xr.Dataset(
        {
            "N": ("stratum", sizes_),
            "predicted": ("stratum", pred_.astype(np.int8)),
            "rate": ("stratum", r),
            "positives": ("stratum", positives),
        },
        coords={"stratum": np.arange(k)},
    )
    tm = metric_of_positives(metric, positives, sizes_, pred_)
    curve.attrs.update(
        {
            "metric": metric,
            "target": target,
            "truth_metric": tm,
            "design": design_name,
            "prior": prior_desc,
            "n_sims": n_sims,
        }
    )
    return SequentialCalibration(
        curve=curve,
        prob=prob.astype(np.float32),
        looks=schedule,
        truth=truth,
        truth_metric=tm,
        metric=metric,
        target=target,
        design=design_name,
        prior=prior_desc,
        rates_source=source,
        finite_population=bool(finite_population),
        n_sims=n_sims,
        max_mcse=float(max_mcse),
    )


def _curve(prob: np.ndarray, schedule: np.ndarray, grid: np.ndarray) -> xr.Dataset:
    mx = prob.max(axis=1)
    s = prob.shape[0]
    accept = (mx[:, None] >= grid[None, :]).mean(axis=0)
    mcse = np.sqrt(np.maximum(accept * (1 - accept), 1.0 / s) / s)
    first = _first_crossing(prob, grid)
    used = np.where(
        first < schedule.shape[0], schedule[np.minimum(first, schedule.shape[0] - 1)], schedule[-1]
    )
    return xr.Dataset(
        {
            "accept_rate": ("nominal", accept),
            "actual": ("nominal", 1.0 - accept),
            "mcse": ("nominal", mcse),
            "mean_labels": ("nominal", used.mean(axis=0)),
        },
        coords={"nominal": grid},
    )


#: bumped whenever the simulated procedure changes, so that cached calibrations are not reused
#: (4: the session-5 pooled hyperprior and the dependence-keeping pooled look model; 5: the
#: pooled fit's faster Newton search and the binomial noise of the audit's draws at every look;
#: 6: the pooled model's designs are given its allocation rates, ``models.allocation_rate``, and
#: the boundary's margin is two MC s.e., ``boundary.DEFAULT_Z``, and the pooled prior's lean is
#: directional, ``models._prior.side_lean``; 7: the lean reads each side's unlabelled items,
#: ``models._prior.remainder_lean``; 8: the side intercepts' Student-t tails,
#: ``models._prior.intercept_log_density``; 9: the family's ``bump_neg`` and ``flat_neg``
#: truths, :data:`~bayes_eval.sequential.truths.PROFILES`; 10: the pooled model's importance
#: design, 512 scrambled Sobol' nodes, ``models._laplace``; 11: the worst-case calibration's
#: stage 3, every truth near its allowance simulated at the full ``n_sims``,
#: ``sequential.robust``; 12: the pooled model's predicted-negative floor, a fifth
#: hyperparameter, ``models.pooled.Hyperpriors.floor_mean``; 13: ``posterior_variance``
#: completes mostly labelled strata, ``designs.completion_allocation``, which never acts where
#: every stratum holds more than the budget plus one batch, as in the certification benchmark's
#: setting (3,161 items or more, 2,000 labels in batches of 20), so its version-12 rows are rows
#: of version 13: the same paths, checked bit for bit in session 31; 14: the blind-spot member
#: ``floor_neg`` of the family, simulated from its own stream, ``sequential.truths.ADDED_PROFILES``:
#: where it binds no boundary, ``WorstCaseCalibration.added_bind`` is False and the boundary and
#: the other members' paths are version 13's bit for bit; 15: the blind spot at two lower
#: placements, ``floor_neg_low`` and ``floor_neg_bottom``, ``sequential.truths.FLOORS``, on
#: their own streams too: ``WorstCaseCalibration.same_as_version`` names the earliest version
#: whose family gives the same calibration bit for bit; 16: the family's truths strictly below
#: the target, ``least_favourable_truth(strict=True)``: where no member sat exactly at the target
#: (every cell of the certification benchmark) the family and the calibration are version 15's
#: bit for bit; 17: the strata with at most ``_lattice.LATTICE_REMAINDER`` unlabelled items are
#: summed exactly on the integer lattice, :func:`bayes_eval._lattice.lattice_prob_at_least`:
#: where every stratum keeps more unlabelled items than that at every look (every stratum larger
#: than the budget plus 256, as in the certification benchmark's setting) the paths are
#: version 16's bit for bit; 18: the independent model's rows with a near-census stratum also sum
#: the strata whose remaining positives are concentrated near 0 exactly,
#: ``_lattice.concentrated_strata`` (the whole form's Pearson law, skewed by such a stratum, has
#: no left tail and said P = 1 where the posterior says 0.99991: loans_grade_a precision was
#: refused at every level); rows without a near-census stratum, and the pooled look model, are
#: version 17's bit for bit; 19: the pooled look model's hyper-nodes do the same for the strata
#: whose nodes they keep, and keep each node's Beta unfloored (``models._node_sample``; their
#: risk 1 - P was 3-7x too small there, within MC error of the audit's draws after): rows
#: without a near-census stratum, and every row of a setting whose strata all hold more than the
#: budget plus 256 items (the certification benchmark's cells, the demo), are version 18's bit
#: for bit; 20: at a look between refits where every stratum of the metric's linear form is
#: labelled to a census (the Betas' variance of the form is 0: the form is counted), the pooled
#: look model's probability is the count's point mass, without the dependence correction of the
#: last refit, whose stale mean shift had moved the count (``sequential._paths._Dependence``:
#: covid_positive precision, 464 predicted positives, was refused at every level, its family
#: truth ``fp_top`` accepted with P = 1 at a census in 11 % of simulated audits); every row
#: whose form holds more items than the budget -- F1 and recall wherever the population does,
#: precision where the predicted positives do (the certification benchmark's cells, the demo) --
#: is version 19's bit for bit)
CALIBRATION_VERSION = 20


def calibration_key(**parts: Any) -> str:
    """A stable hash of the things a calibration depends on (for caching), including
    :data:`CALIBRATION_VERSION`."""

    def norm(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in sorted(v.items())}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v if isinstance(v, str | int | float | bool | type(None)) else repr(v)

    parts = {**parts, "calibration_version": CALIBRATION_VERSION}
    text = json.dumps({k: norm(v) for k, v in sorted(parts.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
