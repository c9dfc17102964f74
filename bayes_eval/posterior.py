"""Stratified beta-binomial posteriors of classifier metrics.

Model (per stratum k, independent across strata):

.. math::

    \\theta_k \\sim \\mathrm{Beta}(a_k, b_k), \\qquad
    h_k \\mid \\theta_k \\sim \\mathrm{Binomial}(n_k, \\theta_k)
    \\;\\Rightarrow\\;
    \\theta_k \\mid h_k \\sim \\mathrm{Beta}(a_k + h_k,\\; b_k + n_k - h_k).

With ``finite_population=True`` the positives among the ``N_k - n_k`` unlabelled items are drawn
``X_k | theta_k ~ Binomial(N_k - n_k, theta_k)`` (so ``X_k`` is beta-binomial a posteriori) and
the stratum holds ``P_k = h_k + X_k`` positives: the metric is that of the actual population, and a
fully labelled stratum contributes no uncertainty. With ``False``, ``P_k = N_k theta_k`` (the
infinite-population, or superpopulation, view). From the per-stratum positives, every Monte Carlo
draw gives the confusion counts

.. math::

    TP = \\sum_{k: \\hat y_k = 1} P_k,\\; FP = \\sum_{k: \\hat y_k = 1} (N_k - P_k),\\;
    FN = \\sum_{k: \\hat y_k = 0} P_k,\\; TN = \\sum_{k: \\hat y_k = 0} (N_k - P_k),

and every metric of :data:`bayes_eval.metrics.METRICS` jointly. This is the Monte Carlo
beta-binomial method of Webber (2013) as used by Webber et al.
(``../shared/seeds/002_bcc5f0faf615c660.txt``), stratified over score strata as in Bennett &
Carvalho (``../shared/seeds/000_51972d8d13fae9c1.txt``), with proper Beta priors in place of
their ad-hoc m-estimate smoothing.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ._draws import DEFAULT_DRAWS, DrawSummaries, eti
from ._informed import MetricInformation, information_from_counts, metric_information
from ._metric_draws import COUNTS, metric_draws_from_theta
from ._protocols import StrataLike
from ._sampling import draw_beta
from ._validation import RNGLike, as_generator, check_bool, check_option, check_positive_int
from .labels import LabelsSpec, coerce_labels
from .metrics import METRICS, confusion_from_positives, metrics_for_sides, resolve_metrics
from .models import DEFAULT_MODEL, MODELS, check_model_prior
from .priors import BetaSpec, Prior, PriorSpec, resolve_prior

__all__ = [
    "MODELS",
    "MetricPosterior",
    "estimate",
    "estimate_counts",
    "estimate_from_stratum_counts",
    "posterior_from_theta",
]


@functools.cache
def _version() -> str:
    try:
        from importlib.metadata import version

        return version("bayes-eval")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


@dataclass(frozen=True, slots=True)
class MetricPosterior(DrawSummaries):
    """Posterior of classifier metrics from stratified labels.

    Attributes
    ----------
    datatree : xarray.DataTree
        ArviZ groups: ``posterior`` (each metric and ``tp``/``fp``/``fn``/``tn`` over
        ``(chain, draw)``; ``theta`` and ``positives`` over ``(chain, draw, stratum)``),
        ``observed_data`` (``n``, ``h`` per stratum) and ``constant_data`` (``N``, ``predicted``,
        ``score_min``, ``score_max``, ``prior_a``, ``prior_b`` per stratum).
    metrics : tuple of str
        Metrics available.
    prior : str
        Description of the prior (``"jeffreys"``, ``"beta(1, 1)"``...).
    finite_population : bool
    model : str
        ``"independent"`` or another entry of :data:`MODELS`.
    n_labels : int
        Labels used.

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> post = be.estimate_counts(tp=80, fp=20, fn=10, tn=890, draws=4000, rng=0)
    >>> round(post.mean("precision"), 2)
    0.79
    """

    datatree: xr.DataTree
    metrics: tuple[str, ...]
    prior: str
    finite_population: bool
    model: str
    n_labels: int

    @property
    def quantities(self) -> tuple[str, ...]:  # type: ignore[override]
        """Names accepted by ``mean``, ``lower_bound``, ``interval``..."""
        return self.metrics

    @property
    def n_strata(self) -> int:
        """Number of strata."""
        return int(self.datatree["constant_data"].sizes["stratum"])

    @property
    def n_draws(self) -> int:
        """Number of Monte Carlo draws."""
        post = self.datatree["posterior"]
        return int(post.sizes["chain"] * post.sizes["draw"])

    def information(self) -> dict[str, MetricInformation]:
        """Per metric: whether the labels inform it, which relevant strata have no label, and
        why a metric is *prior only* (see :mod:`bayes_eval._informed`)."""
        return metric_information(self)

    def informed(self) -> dict[str, bool]:
        """Per metric: True if every stratum it depends on has labels, False if prior only."""
        return {m: i.informed for m, i in self.information().items()}

    @property
    def prior_only(self) -> tuple[str, ...]:
        """Metrics that depend on a stratum without labels: the prior decides them."""
        return tuple(m for m, ok in self.informed().items() if not ok)

    def strata_table(self, prob: float = 0.9) -> pd.DataFrame:
        """Per-stratum table: size, predicted class, score range, labels, positives and the
        posterior mean and equal-tailed ``prob`` interval of the positive rate ``theta``."""
        const = self.datatree["constant_data"]
        obs = self.datatree["observed_data"]
        theta = self.datatree["posterior"]["theta"].values.reshape(-1, self.n_strata)
        lo, hi = np.quantile(theta, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        return pd.DataFrame(
            {
                "N": const["N"].values,
                "predicted": const["predicted"].values.astype(int),
                "score_min": const["score_min"].values,
                "score_max": const["score_max"].values,
                "labelled": obs["n"].values,
                "positives": obs["h"].values,
                "rate_mean": theta.mean(axis=0),
                f"rate_lo{prob:g}": lo,
                f"rate_hi{prob:g}": hi,
            },
            index=pd.RangeIndex(self.n_strata, name="stratum"),
        )

    def __repr__(self) -> str:
        parts = []
        prior_only = set(self.prior_only)
        for name in self.metrics[:4]:
            x = self.draws(name)
            if name in prior_only:
                parts.append(f"{name}=prior only (no labels inform it)")
                continue
            parts.append(f"{name}={x.mean():.3f} (95% lower {np.quantile(x, 0.05):.3f})")
        more = f", +{len(self.metrics) - 4} more" if len(self.metrics) > 4 else ""
        view = "finite population" if self.finite_population else "infinite population"
        return (
            f"MetricPosterior({', '.join(parts)}{more}; {self.n_labels} labels in "
            f"{self.n_strata} strata, prior={self.prior}, model={self.model}, {view}, "
            f"{self.n_draws} draws)"
        )


def _check_model(model: Any) -> str:
    """Validate ``model``; importing :mod:`bayes_eval.hierarchical` registers "hierarchical"."""
    check_option(model, "model", ("independent", *MODELS))
    return model


def _check_draws(draws: Any) -> int:
    return check_positive_int(draws, "draws")


def posterior_from_theta(
    theta: np.ndarray,
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    n: np.ndarray,
    h: np.ndarray,
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    prior_desc: str,
    finite_population: bool,
    metrics: tuple[str, ...] | None,
    rng: np.random.Generator,
    sampler: str = "fast",
    model: str = DEFAULT_MODEL,
    score_min: np.ndarray | None = None,
    score_max: np.ndarray | None = None,
    extra_groups: dict[str, xr.Dataset] | None = None,
    attrs: dict[str, Any] | None = None,
) -> MetricPosterior:
    """Complete a posterior from draws of the stratum rates ``theta`` (shape (draws, K)).

    Draws the unlabelled remainder (finite population) or scales the rates (infinite), computes the
    confusion counts and every metric, and packs the :class:`MetricPosterior`. Every model (the
    independent Beta model, the hierarchical model) ends here.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    predicted = np.asarray(predicted, dtype=bool)
    k = sizes.shape[0]
    md = metric_draws_from_theta(
        theta,
        sizes=sizes,
        predicted=predicted,
        n=n,
        h=h,
        finite_population=finite_population,
        metrics=metrics,
        rng=rng,
        sampler=sampler,
    )
    metrics, positives = md.metrics, md.positives
    draws = theta.shape[0]
    cd = ("chain", "draw")
    post_vars: dict[str, Any] = {
        name: (cd, md.values[name].reshape(1, draws)) for name in (*metrics, *COUNTS)
    }
    post_vars["theta"] = ((*cd, "stratum"), theta.reshape(1, draws, k))
    post_vars["positives"] = ((*cd, "stratum"), positives.reshape(1, draws, k))
    coords = {"chain": [0], "draw": np.arange(draws), "stratum": np.arange(k)}
    posterior = xr.Dataset(post_vars, coords=coords)
    observed = xr.Dataset(
        {
            "n": ("stratum", np.asarray(n, dtype=np.int64)),
            "h": ("stratum", np.asarray(h, dtype=np.int64)),
        },
        coords={"stratum": np.arange(k)},
    )
    constant = xr.Dataset(
        {
            "N": ("stratum", sizes),
            "predicted": ("stratum", predicted.astype(np.int8)),
            "score_min": ("stratum", np.full(k, np.nan) if score_min is None else score_min),
            "score_max": ("stratum", np.full(k, np.nan) if score_max is None else score_max),
            "prior_a": ("stratum", np.asarray(prior_a, dtype=np.float64)),
            "prior_b": ("stratum", np.asarray(prior_b, dtype=np.float64)),
        },
        coords={"stratum": np.arange(k)},
    )
    prior_group = _prior_group(
        prior_a,
        prior_b,
        sizes=sizes,
        predicted=predicted,
        metrics=metrics,
        rng=rng,
        finite_population=finite_population,
        draws=draws,
    )
    prior_only = [
        m for m in metrics if not information_from_counts(m, sizes, predicted, n).informed
    ]
    root_attrs = {
        "prior": prior_desc,
        "prior_only": ",".join(prior_only),
        "finite_population": int(finite_population),
        "model": model,
        "sampler": sampler,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "created_by": f"bayes_eval {_version()}",
    }
    root_attrs.update(attrs or {})
    groups = {
        "posterior": posterior,
        "prior": prior_group,
        "observed_data": observed,
        "constant_data": constant,
    }
    groups.update(extra_groups or {})
    tree = xr.DataTree.from_dict(groups)
    tree.attrs.update(root_attrs)
    return MetricPosterior(
        datatree=tree,
        metrics=metrics,
        prior=prior_desc,
        finite_population=bool(finite_population),
        model=model,
        n_labels=int(np.sum(n)),
    )


_PRIOR_DRAWS = 4000


def _prior_group(
    prior_a: np.ndarray,
    prior_b: np.ndarray,
    *,
    sizes: np.ndarray,
    predicted: np.ndarray,
    metrics: tuple[str, ...],
    rng: np.random.Generator,
    finite_population: bool,
    draws: int,
) -> xr.Dataset:
    """Prior predictive of every metric (ArviZ ``prior`` group): the stratum rates drawn from their
    Beta priors, the positives of every whole stratum from those rates, and the metrics from them.

    Drawn from a generator spawned from ``rng`` (the posterior draws are unchanged), with at most
    ``_PRIOR_DRAWS`` draws. For the hierarchical model the per-stratum Beta priors shown are the
    ones passed in, not the model's hyperprior.
    """
    k = sizes.shape[0]
    m = int(min(draws, _PRIOR_DRAWS))
    try:
        gen = rng.spawn(1)[0]
    except (AttributeError, TypeError, ValueError):  # a Generator without a SeedSequence
        gen = np.random.default_rng([k, m, 20240601])
    a = np.asarray(prior_a, dtype=np.float64)
    b = np.asarray(prior_b, dtype=np.float64)
    theta = gen.beta(a[None, :], b[None, :], size=(m, k))  # plain numpy: no table set-up cost
    if finite_population:
        positives = gen.binomial(sizes[None, :], theta).astype(np.float64)
    else:
        positives = theta * sizes[None, :]
    tp, fp, fn, tn = confusion_from_positives(positives, sizes, predicted)
    cd = ("chain", "draw")
    with np.errstate(divide="ignore", invalid="ignore"):
        data: dict[str, Any] = {
            name: (cd, METRICS[name].func(tp, fp, fn, tn).reshape(1, m)) for name in metrics
        }
    data["theta"] = ((*cd, "stratum"), theta.reshape(1, m, k))
    coords = {"chain": [0], "draw": np.arange(m), "stratum": np.arange(k)}
    return xr.Dataset(data, coords=coords)


def _independent_theta(
    a_post: np.ndarray, b_post: np.ndarray, draws: int, rng: np.random.Generator, sampler: str
) -> np.ndarray:
    return draw_beta(a_post, b_post, draws, rng, method=sampler)


def stratum_counts(
    strata: StrataLike, positions: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``n_k`` and positives ``h_k`` per stratum from labelled positions."""
    k = strata.n_strata
    s = strata.stratum_of(positions)
    n = np.bincount(s, minlength=k).astype(np.int64)
    h = np.bincount(s, weights=values, minlength=k).astype(np.int64)
    return n, h


def estimate(
    strata: StrataLike,
    labels: LabelsSpec | None = None,
    *,
    prior: BetaSpec = "jeffreys",
    finite_population: bool = True,
    draws: int = DEFAULT_DRAWS,
    rng: RNGLike = None,
    metrics: str | tuple[str, ...] | None = None,
    sampler: str = "fast",
    model: str = DEFAULT_MODEL,
    **model_kwargs: Any,
) -> MetricPosterior:
    """Posterior of precision, recall, F1, accuracy... from labels on a stratified population.

    Parameters
    ----------
    strata : Strata
        From :func:`bayes_eval.stratify`.
    labels : mapping, Series or (ids, labels) pair
        0/1 or bool labels of some items, by id (see :mod:`bayes_eval.labels`).
    prior : "jeffreys", "uniform", (a, b) or (array, array)
        Beta prior on each stratum's positive rate.
    finite_population : bool
        Draw the unlabelled remainder (metric of the actual population) or not (superpopulation).
    draws : int
        Monte Carlo draws (Webber et al. use 40,000).
    rng : int, Generator or None
    metrics : str or sequence of str, optional
        Restrict to these metrics; default every metric defined for the population.
    sampler : {"fast", "exact"}
        See :mod:`bayes_eval._sampling`; both sample the same distribution.
    model : str
        ``"independent"`` Beta priors per stratum, or another entry of :data:`MODELS`.

    Returns
    -------
    MetricPosterior

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt``; Bennett & Carvalho,
    ``../shared/seeds/000_51972d8d13fae9c1.txt``.

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.random(10_000)
    >>> truth = rng.random(10_000) < scores
    >>> pop = be.Population(scores, threshold=0.5)
    >>> strata = be.stratify(pop, n_strata=4)
    >>> ids = rng.choice(10_000, 400, replace=False)
    >>> post = be.estimate(strata, (ids, truth[ids]), draws=4000, rng=0)
    >>> 0.6 < post.mean("precision") < 0.9
    True
    """
    if not isinstance(strata, StrataLike):
        raise TypeError(
            f"strata has type {type(strata).__name__}; allowed: strata from bayes_eval.stratify "
            "(a Strata or DaskStrata)"
        )
    draws = _check_draws(draws)
    check_option(sampler, "sampler", ("fast", "exact"))
    _check_model(model)
    check_bool(finite_population, "finite_population")
    a, b, desc = resolve_prior(prior, strata.n_strata)
    positions, values = coerce_labels(labels, strata.population)
    metrics_for_sides(metrics, strata.sizes, strata.predicted)
    n, h = stratum_counts(strata, positions, values)
    return estimate_from_stratum_counts(
        strata,
        n,
        h,
        prior=Prior(a, b, desc),
        finite_population=finite_population,
        draws=draws,
        rng=rng,
        metrics=metrics,
        sampler=sampler,
        model=model,
        **model_kwargs,
    )


def estimate_from_stratum_counts(
    strata: StrataLike,
    n: np.ndarray,
    h: np.ndarray,
    *,
    prior: PriorSpec = "jeffreys",
    finite_population: bool = True,
    draws: int = DEFAULT_DRAWS,
    rng: RNGLike = None,
    metrics: str | tuple[str, ...] | None = None,
    sampler: str = "fast",
    model: str = DEFAULT_MODEL,
    **model_kwargs: Any,
) -> MetricPosterior:
    """:func:`estimate` from per-stratum label counts ``n_k`` and positives ``h_k``.

    Used by the audit, which knows the stratum of every label it recorded, so that no pass over
    the population is needed. ``prior`` may also be a resolved :class:`~bayes_eval.priors.Prior`.
    """
    draws = _check_draws(draws)
    check_option(sampler, "sampler", ("fast", "exact"))
    _check_model(model)
    k = strata.n_strata
    n = np.asarray(n, dtype=np.int64)
    h = np.asarray(h, dtype=np.int64)
    if n.shape != (k,) or h.shape != (k,):
        raise ValueError(f"n and h must have shape ({k},); got {n.shape} and {h.shape}")
    if (n < 0).any() or (h < 0).any() or (h > n).any() or (n > strata.sizes).any():
        raise ValueError("counts must satisfy 0 <= h_k <= n_k <= N_k for every stratum")
    resolved = Prior.resolve(prior, k)
    a, b, desc = resolved.a, resolved.b, resolved.description
    check_model_prior(model, desc)
    gen = as_generator(rng)
    extra: dict[str, xr.Dataset] = {}
    attrs: dict[str, Any] = {"strata_method": strata.method, "strata_variable": strata.variable}
    requested = getattr(strata, "requested", None)
    if requested is not None:  # what stratify was asked for (it may make fewer: side_n_strata)
        attrs["strata_requested"] = f"{requested[0]} / {requested[1]} per side (neg / pos)"
    _check_model_kwargs(model, model_kwargs)
    if model == "independent":
        theta = _independent_theta(a + h, b + n - h, draws, gen, sampler)
    else:
        theta, extra, more_attrs = MODELS[model](
            strata=strata, n=n, h=h, prior_a=a, prior_b=b, draws=draws, rng=gen, **model_kwargs
        )
        attrs.update(more_attrs)
        if "hyperpriors" in more_attrs:
            # a model with its own prior (the pooled model) is named by it, not by the unused
            # Beta prior; the full text is in the root attribute ``hyperpriors``
            attrs["independent_prior"] = desc
            desc = f"{model} hyperpriors"
    return posterior_from_theta(
        theta,
        sizes=strata.sizes,
        predicted=strata.predicted,
        n=n,
        h=h,
        prior_a=a,
        prior_b=b,
        prior_desc=desc,
        finite_population=bool(finite_population),
        metrics=metrics,
        rng=gen,
        sampler=sampler,
        model=model,
        score_min=strata.score_min,
        score_max=strata.score_max,
        extra_groups=extra,
        attrs=attrs,
    )


#: what :func:`estimate_from_stratum_counts` passes every model itself (not the user's keywords)
_MODEL_ARGS = frozenset({"strata", "n", "h", "prior_a", "prior_b", "draws", "rng"})


def _check_model_kwargs(model: str, model_kwargs: dict[str, Any]) -> None:
    """Refuse keywords the model does not take, naming the model and the ones it does (a
    TypeError before any work; never the model function's own message)."""
    if not model_kwargs:
        return
    if model == "independent":
        accepted: list[str] = []
    else:
        params = inspect.signature(MODELS[model]).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return
        accepted = sorted(p.name for p in params if p.name not in _MODEL_ARGS)
    bad = sorted(set(model_kwargs) - set(accepted))
    if bad:
        allowed = ", ".join(repr(a) for a in accepted) if accepted else "none"
        raise TypeError(
            f"unexpected keyword argument(s) {bad} for model={model!r}; allowed: {allowed}"
        )


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 0:
        raise ValueError(f"{name}={value!r} must be a non-negative integer count")
    return int(value)


def estimate_counts(
    tp: int,
    fp: int,
    fn: int,
    tn: int,
    *,
    predicted_sizes: tuple[int, int] | None = None,
    prior: BetaSpec = "jeffreys",
    draws: int = DEFAULT_DRAWS,
    rng: RNGLike = None,
    metrics: str | tuple[str, ...] | None = None,
) -> MetricPosterior:
    """Posterior from the confusion counts of a labelled random test set (unstratified case).

    Without ``predicted_sizes`` the test set is a random sample of an unbounded population and the
    four cell probabilities get the Dirichlet posterior of Goutte & Gaussier (2005),
    ``Dirichlet(tp + a, fp + a, fn + a, tn + a)`` with ``a = 1/2`` for ``"jeffreys"`` and 1 for
    ``"uniform"``. With ``predicted_sizes=(N_negative, N_positive)`` (the sizes of the predicted
    sides of the deployed population, known since the classifier has scored every item) the test set
    is post-stratified by predicted side and the beta-binomial machinery of :func:`estimate` runs
    with two strata and ``finite_population=True`` (Webber 2013).

    References
    ----------
    Webber et al., ``../shared/seeds/002_bcc5f0faf615c660.txt`` (Monte Carlo beta-binomial F1
    bounds, 40,000 draws).
    """
    tp, fp, fn, tn = (_count(v, nm) for v, nm in ((tp, "tp"), (fp, "fp"), (fn, "fn"), (tn, "tn")))
    if tp + fp + fn + tn == 0:
        raise ValueError("tp + fp + fn + tn is 0; at least one labelled item is required")
    draws = _check_draws(draws)
    gen = as_generator(rng)
    if predicted_sizes is None:
        if isinstance(prior, str) and prior in ("jeffreys", "uniform"):
            conc = 0.5 if prior == "jeffreys" else 1.0
        elif isinstance(prior, numbers.Real) and not isinstance(prior, bool) and prior > 0:
            conc = float(prior)
        else:
            raise ValueError(
                f"prior={prior!r} is not allowed for Dirichlet counts; allowed: 'jeffreys', "
                "'uniform' or a positive concentration"
            )
        cells = gen.dirichlet(np.array([tp, fp, fn, tn], dtype=float) + conc, size=draws)
        # express as two strata (predicted negative, predicted positive) in the infinite view:
        # stratum weights are the cell masses, theta the positive share within each side
        w_neg = cells[:, 2] + cells[:, 3]
        w_pos = cells[:, 0] + cells[:, 1]
        metrics_sel = resolve_metrics(
            metrics, has_predicted_positive=tp + fp > 0, has_predicted_negative=fn + tn > 0
        )
        ctp, cfp, cfn, ctn = cells.T
        cd = ("chain", "draw")
        post_vars: dict[str, Any] = {
            name: (cd, METRICS[name].func(ctp, cfp, cfn, ctn).reshape(1, draws))
            for name in metrics_sel
        }
        with np.errstate(invalid="ignore", divide="ignore"):
            theta = np.stack([cells[:, 2] / w_neg, cells[:, 0] / w_pos], axis=1)
        post_vars["theta"] = ((*cd, "stratum"), theta.reshape(1, draws, 2))
        for name, arr in (("tp", ctp), ("fp", cfp), ("fn", cfn), ("tn", ctn)):
            post_vars[name] = (cd, arr.reshape(1, draws))
        coords = {"chain": [0], "draw": np.arange(draws), "stratum": [0, 1]}
        tree = xr.DataTree.from_dict(
            {
                "posterior": xr.Dataset(post_vars, coords=coords),
                "observed_data": xr.Dataset(
                    {"n": ("stratum", [fn + tn, tp + fp]), "h": ("stratum", [fn, tp])},
                    coords={"stratum": [0, 1]},
                ),
                "constant_data": xr.Dataset(
                    {
                        "N": ("stratum", [fn + tn, tp + fp]),
                        "predicted": ("stratum", [0, 1]),
                        "score_min": ("stratum", [np.nan, np.nan]),
                        "score_max": ("stratum", [np.nan, np.nan]),
                        "prior_a": ("stratum", [conc, conc]),
                        "prior_b": ("stratum", [conc, conc]),
                    },
                    coords={"stratum": [0, 1]},
                ),
            }
        )
        tree.attrs.update(
            {
                "prior": f"dirichlet({conc:g})",
                "finite_population": 0,
                "model": "dirichlet",
                "created_by": f"bayes_eval {_version()}",
            }
        )
        return MetricPosterior(
            tree, metrics_sel, f"dirichlet({conc:g})", False, "dirichlet", tp + fp + fn + tn
        )
    if not isinstance(predicted_sizes, tuple | list) or len(predicted_sizes) != 2:
        raise ValueError(
            f"predicted_sizes={predicted_sizes!r}; allowed: a pair (N_negative, N_positive)"
        )
    n_neg, n_pos = (
        _count(v, nm) for v, nm in zip(predicted_sizes, ("N_negative", "N_positive"), strict=True)
    )
    if n_neg < fn + tn or n_pos < tp + fp:
        raise ValueError(
            f"predicted_sizes={predicted_sizes!r} is smaller than the labelled items "
            f"({fn + tn} predicted negative, {tp + fp} predicted positive)"
        )
    keep = np.array([n_neg > 0, n_pos > 0])
    sizes = np.array([n_neg, n_pos])[keep]
    predicted = np.array([False, True])[keep]
    n = np.array([fn + tn, tp + fp])[keep]
    h = np.array([fn, tp])[keep]
    a, b, desc = resolve_prior(prior, int(keep.sum()))
    theta = draw_beta(a + h, b + n - h, draws, gen)
    return posterior_from_theta(
        theta,
        sizes=sizes,
        predicted=predicted,
        n=n,
        h=h,
        prior_a=a,
        prior_b=b,
        prior_desc=desc,
        finite_population=True,
        metrics=metrics,
        rng=gen,
    )


def summarize_interval(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """Equal-tailed interval (re-exported helper for reports)."""
    return eti(draws, prob)
