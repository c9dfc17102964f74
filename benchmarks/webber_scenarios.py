"""Webber et al.'s three scenarios of repeated testing, reproduced with scikit-learn classifiers.

A paper reproduction (``../shared/seeds/002_bcc5f0faf615c660.txt``, Sections 3.1-3.4), kept with
the benchmarks rather than in the library because it needs scikit-learn and trains classifiers;
it uses the library's lock-step path simulator (``bayes_eval.sequential.calibration``) and fast
acceptance probability (``bayes_eval.sequential._linear``).

Used by ``benchmarks/bench_sequential.py`` (sections 6-7), the notebook
``02_sequential_testing_bias`` and ``tests/test_webber_scenarios.py``. Import it with the
``benchmarks`` folder on ``sys.path`` (a script run from that folder has it):
``from webber_scenarios import webber_scenarios``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from sklearn.base import clone
from threadpoolctl import threadpool_limits

from bayes_eval._validation import (
    RNGLike,
    as_generator,
    check_level,
    check_option,
    check_positive_int,
)
from bayes_eval.designs import make_design
from bayes_eval.metrics import metric_of_positives
from bayes_eval.priors import resolve_prior
from bayes_eval.sequential._linear import SUPPORTED_METRICS, linear_form, prob_linear_ge
from bayes_eval.sequential._paths import simulate_paths
from bayes_eval.sequential.calibration import DEFAULT_NOMINAL, _first_crossing

__all__ = ["SCENARIOS", "webber_scenarios"]


# -------------------------------------------------------------------- Webber's three scenarios
SCENARIOS = ("variable_test", "variable_training", "variable_both")


def _fit_predict(
    estimator: Any, X: np.ndarray, y: np.ndarray, train: np.ndarray, target_rows: np.ndarray
) -> np.ndarray | None:
    yt = y[train]
    if yt.min() == yt.max():
        return None  # one class only: no classifier yet
    with threadpool_limits(1):  # many small fits: BLAS threads only add overhead
        model = clone(estimator).fit(X[train], yt)
        return np.asarray(model.predict(X[target_rows])).astype(bool)


def _side_counts(pred: np.ndarray, y: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sizes, positives (truth set) or labels/positives (test set) by predicted side."""
    p = pred[rows]
    yy = y[rows]
    n = np.array([np.sum(~p), np.sum(p)], dtype=np.int64)
    h = np.array([np.sum(yy[~p]), np.sum(yy[p])], dtype=np.int64)
    return n, h


def webber_scenarios(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    metric: str = "f1",
    scenarios: tuple[str, ...] = SCENARIOS,
    n_runs: int = 20,
    paths_per_run: int = 50,
    step: int = 20,
    train_size: int = 1000,
    test_size: int = 1067,
    budget: int = 3000,
    truth_fraction: float = 0.5,
    target_fraction: float = 0.9,
    prior: Any = "jeffreys",
    nominal: Any = None,
    rng: RNGLike = None,
) -> xr.Dataset:
    """Actual vs nominal confidence of the naive repeated test in Webber et al.'s three scenarios.

    The data are split at random in every run into a *truth set* (``truth_fraction`` of the rows:
    test items are drawn from it and the true metric of a classifier is its metric on it, as
    Webber et al. drew test sets from their 700,000-document truth set) and a training pool.
    Every ``step`` labels the posterior ``P(metric >= target)`` of the current classifier is
    computed from its test set, post-stratified by predicted side over the truth set (the
    beta-binomial model of :mod:`bayes_eval.posterior`, finite population), and the developer
    stops at the first look where it reaches the nominal level.

    ``"variable_test"`` (Section 3.1)
        Classifier trained once on ``train_size`` items; the test set grows by ``step`` up to
        ``budget``; the target is the classifier's true metric (Webber: "infinitesimally above"),
        so any acceptance is false. ``paths_per_run`` test sequences per trained classifier.
    ``"variable_training"`` (Section 3.2)
        Fixed test set of ``test_size``; the training set grows by ``step`` (classifier refitted)
        until ``budget`` labels in all; target ``target_fraction`` × the best true metric of the
        run; a stop is premature (false) when the true metric at the stop is below the target.
    ``"variable_both"`` (Section 3.3)
        ``step / 2`` labels to training and ``step / 2`` to test per look, up to ``budget``.

    Parameters
    ----------
    estimator : scikit-learn classifier
        Cloned and refitted (``sklearn.base.clone``).
    X : array (n, p)
    y : array (n,) of 0/1
    metric : str
        One of :data:`SUPPORTED_METRICS`.

    Returns
    -------
    xarray.Dataset
        Over ``(scenario, nominal)``: ``false_accept`` (premature or false acceptance rate),
        ``actual`` (= 1 - ``false_accept``) and ``mcse``; over ``scenario``: ``corrected`` (the
        smallest grid level from which on ``false_accept <= 0.05``) and ``runs`` (independent
        runs behind each scenario).

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Sections 3.1-3.4, Figure 4).
    """
    check_option(metric, "metric", SUPPORTED_METRICS)
    if isinstance(scenarios, str):
        scenarios = (scenarios,)
    for s_name in scenarios:
        check_option(s_name, "scenarios", SCENARIOS)
    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y)
    if Xa.ndim != 2 or ya.ndim != 1 or Xa.shape[0] != ya.shape[0]:
        raise ValueError(f"X has shape {Xa.shape} and y {ya.shape}; allowed: X (n, p), y (n,)")
    if not np.isin(ya, (0, 1)).all():
        raise ValueError("y must hold 0/1 labels")
    ya = ya.astype(np.int64)
    for name, v in (
        ("n_runs", n_runs),
        ("paths_per_run", paths_per_run),
        ("step", step),
        ("train_size", train_size),
        ("test_size", test_size),
        ("budget", budget),
    ):
        check_positive_int(v, name)
    truth_fraction = check_level(truth_fraction, "truth_fraction")
    target_fraction = check_level(target_fraction, "target_fraction")
    n_all = Xa.shape[0]
    n_truth = int(n_all * truth_fraction)
    pool_size = n_all - n_truth
    if budget > n_truth or budget > pool_size:
        raise ValueError(
            f"budget={budget} is more than the truth set ({n_truth}) or the "
            f"training pool ({pool_size}); allowed: at most {min(n_truth, pool_size)}"
        )
    if test_size >= budget or train_size > pool_size:
        raise ValueError(
            f"test_size={test_size} must be below budget={budget} and "
            f"train_size={train_size} at most the pool ({pool_size})"
        )
    grid = DEFAULT_NOMINAL if nominal is None else np.asarray(nominal, dtype=np.float64)
    gen = as_generator(rng)
    a, b, _ = resolve_prior(prior, 2)
    predicted = np.array([False, True])
    false_acc = np.full((len(scenarios), grid.size), np.nan)
    runs_n = np.zeros(len(scenarios), dtype=np.int64)
    for si, scen in enumerate(scenarios):
        events = []  # per run/path: boolean over grid, premature/false acceptance
        for _ in range(n_runs):
            perm = gen.permutation(n_all)
            truth_rows, pool = perm[:n_truth], perm[n_truth:]
            if scen == "variable_test":
                pred = _fit_predict(estimator, Xa, ya, pool[:train_size], np.arange(n_all))
                if pred is None:
                    continue
                sizes, pos = _side_counts(pred, ya, truth_rows)
                keep = sizes > 0
                tm = metric_of_positives(metric, pos[keep], sizes[keep], predicted[keep])
                schedule = np.arange(step, budget + 1, step)
                prob = simulate_paths(
                    sizes=sizes[keep],
                    predicted=predicted[keep],
                    positives=pos[keep],
                    prior_a=a[keep],
                    prior_b=b[keep],
                    metric=metric,
                    target=tm,
                    design=make_design("random"),
                    batches=[step] * schedule.size,
                    schedule=schedule,
                    finite_population=True,
                    n_sims=paths_per_run,
                    rng=gen,
                )[0]  # one truth: (paths, looks)
                events.extend(prob.max(axis=1)[:, None] >= grid[None, :])
                continue
            test_rows = truth_rows[:budget]
            if scen == "variable_training":
                looks = np.arange(step, budget - test_size + 1, step)
                n_test = np.full(looks.size, test_size)
                n_train = looks
            else:
                half = step // 2
                looks = np.arange(1, budget // step + 1)
                n_test = looks * (step - half)
                n_train = looks * half
            truth_j = np.full(looks.size, np.nan)
            counts = []
            for j in range(looks.size):
                pred = _fit_predict(estimator, Xa, ya, pool[: n_train[j]], np.arange(n_all))
                if pred is None:
                    counts.append(None)
                    continue
                sizes, pos = _side_counts(pred, ya, truth_rows)
                n_k, h_k = _side_counts(pred, ya, test_rows[: n_test[j]])
                truth_j[j] = metric_of_positives(metric, pos, sizes, predicted)
                counts.append((sizes, n_k, h_k))
            if np.all(np.isnan(truth_j)):
                continue
            target = target_fraction * np.nanmax(truth_j)
            prob = np.zeros(looks.size)
            for j, cnt in enumerate(counts):
                if cnt is None:
                    continue
                sizes, n_k, h_k = cnt
                keep = sizes > 0
                w, c = linear_form(metric, target, predicted[keep], sizes[keep])
                prob[j] = prob_linear_ge(
                    n_k[keep], h_k[keep], a[keep], b[keep], sizes[keep], w, c, True
                )
            first = _first_crossing(prob[None, :], grid)[0]
            stopped = first < looks.size
            early = stopped & (
                np.nan_to_num(truth_j, nan=-1.0)[np.minimum(first, looks.size - 1)] < target
            )
            events.append(early)
        if events:
            ev = np.asarray(events, dtype=np.float64)
            false_acc[si] = ev.mean(axis=0)
            runs_n[si] = ev.shape[0]
    mcse = np.sqrt(
        np.maximum(false_acc * (1 - false_acc), 1.0 / np.maximum(runs_n, 1)[:, None])
        / np.maximum(runs_n, 1)[:, None]
    )

    def _corrected(fa: np.ndarray) -> float:
        # smallest grid level from which on every level keeps false_accept <= 0.05
        ok = np.logical_and.accumulate((fa <= 0.05)[::-1])[::-1]
        return float(grid[np.argmax(ok)]) if ok.any() else float("nan")

    corrected = np.array([_corrected(fa) for fa in false_acc])
    return xr.Dataset(
        {
            "false_accept": (("scenario", "nominal"), false_acc),
            "actual": (("scenario", "nominal"), 1.0 - false_acc),
            "mcse": (("scenario", "nominal"), mcse),
            "corrected": ("scenario", corrected),
            "runs": ("scenario", runs_n),
        },
        coords={"scenario": list(scenarios), "nominal": grid},
        attrs={
            "metric": metric,
            "step": step,
            "budget": budget,
            "train_size": train_size,
            "test_size": test_size,
            "n_runs": n_runs,
            "paths_per_run": paths_per_run,
            "target_fraction": target_fraction,
            "estimator": repr(estimator),
        },
    )
